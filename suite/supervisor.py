"""Crash isolation for a run: pytest in a child process, resumed past a case that kills it.

When a case kills the interpreter (a kernel abort, a segfault), that case is recorded
as ``crashed`` with the signal and the run resumes without it and without the cases
already done, appending to the same report stream. Signals to the CLI process
(SIGINT, SIGTERM) are forwarded to the child, which ends its run as interrupted; the CLI
then exits 128 + the signal (130, 143). The child dies with the CLI (Linux: a parent-death
signal), and a report on disk is always this run's: the previous ``latest.*`` are removed
before the child starts, and a run interrupted before its first row still leaves a partial
report with zero rows.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from suite import options
from suite.report import files, schema
from suite.report.schema import Row, last_record


def supervise(argv, report_dir: Path, *, max_crashes=25) -> int:
    """Run pytest in a child process; when a case kills the interpreter, record that case
    as ``crashed`` (with the signal) and resume the run without it and without the cases
    already done, appending to the same stream. Returns 0 iff nothing failed or crashed."""
    import signal

    jsonl = report_dir / "latest.jsonl"
    clear_previous(report_dir)
    # Signals go to the running child (a repeated Ctrl-C too) and, once it has ended, are
    # only noted: no KeyboardInterrupt traceback while the report is read or written.
    state = {"child": None, "signalled": []}

    def forward(signum, frame):
        state["signalled"].append(signum)
        child = state["child"]
        if child is not None and child.poll() is None:
            child.send_signal(signum)

    previous = {s: signal.signal(s, forward) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        return _supervise(argv, report_dir, jsonl, state, max_crashes)
    finally:
        for s, handler in previous.items():
            # an interrupted run is on its way out: a Ctrl-C pressed again while it exits is
            # ignored, not a KeyboardInterrupt traceback from wherever it lands
            signal.signal(s, signal.SIG_IGN if state["signalled"] else handler)


def _supervise(argv, report_dir: Path, jsonl: Path, state: dict, max_crashes: int) -> int:
    import signal
    import subprocess

    crashes = 0
    extra: list[str] = []
    while True:
        cmd = [sys.executable, "-m", "pytest", *argv, *extra]
        # The child gets a process group of its own, so a signal reaches it once, from us:
        # Ctrl-C (to the terminal's group) and ``kill -INT <pid>`` (to this process alone,
        # as timeout, IDEs and job runners send it) both end the run the same way, and a
        # second SIGINT from the group cannot break the child while it writes the report.
        env = {**os.environ, options.FAST_EXIT_ENV: "1"}  # the child ends once its report is written
        state["child"] = child = subprocess.Popen(cmd, env=env, **_own_process_group())
        signalled = state["signalled"]
        rc = child.wait()
        # Interrupted: the stream says so, or the signal ended the child before its footer. A
        # signal that came after the run had finished leaves a complete report and its status.
        if _interrupted(jsonl) or (signalled and not _finished(jsonl)):
            written = ensure_partial_report(report_dir)
            print(
                f"autodiff-semantics: interrupted; the partial report ({written} rows) is in "
                f"{report_dir}/latest.json (render it with 'autodiff-semantics report')",
                file=sys.stderr,
            )
            return 128 + (signalled[-1] if signalled else signal.SIGINT)
        if rc >= 0 or crashes >= max_crashes:
            return _exit_status(rc, crashes, report_dir)
        done = _record_crash(jsonl, rc)  # killed by a signal: the case that was running crashed
        if done is None:
            return 1
        crashes += 1
        extra = ["--report-append", *[f"--deselect={t}" for t in done]]


def _record_crash(jsonl: Path, rc: int) -> list[str] | None:
    """Append the crashed row of the case that was running when the child died of signal
    ``-rc``; the tests done so far (to deselect when resuming), or None outside any case."""
    import json
    import signal

    started, finished = _progress(jsonl)
    running = [t for t in started if t not in finished]
    sig = signal.Signals(-rc).name if -rc in signal.Signals.__members__.values() else str(-rc)
    if not running:
        print(f"autodiff-semantics: pytest died with {sig} outside any case", file=sys.stderr)
        return None
    crashed = running[-1]
    print(f"autodiff-semantics: {crashed} crashed the interpreter ({sig}); resuming without it", file=sys.stderr)
    with open(jsonl, "a", encoding="utf-8") as fh:
        fh.write(json.dumps({"kind": "row", **Row.crashed(crashed, sig).as_dict()}) + "\n")
    return sorted(set(finished) | {crashed})


def _exit_status(rc: int, crashes: int, report_dir: Path) -> int:
    """The run's exit status from pytest's and the report's: 2 for bad input, 1 when a row
    failed or crashed (or the run itself failed), 0 when all passed."""
    if rc == 4:  # pytest's usage error (its message is above): bad input, as for our own flags
        return 2
    if rc == 5 and crashes:  # the resumed process had nothing left to run
        rc = 0
    if rc in (0, 1):
        try:
            report = schema.load(report_dir / "latest.json")
        except schema.ReportError:
            return rc or 1
        bad = [r for r in report["results"] if r["outcome"] in ("failed", "error", "crashed")]
        # rc 1 with no bad row: the run itself failed (a missing subject, a stale declaration)
        return 1 if bad or rc == 1 else 0
    if rc == 5:
        hint = "check --behaviour, --frameworks, --modes and the pytest arguments"
        print(f"autodiff-semantics: no case was collected ({hint})", file=sys.stderr)
    return rc


#: What a run writes in its report directory; removed before a run starts, so none of them
#: can be a previous run's presented as this one's.
RUN_FILES = ("latest.json", "latest.jsonl", "latest.md", "latest.html", "latest.junit.xml")


def clear_previous(report_dir: Path) -> None:
    for name in RUN_FILES:
        (report_dir / name).unlink(missing_ok=True)


def ensure_partial_report(report_dir: Path) -> int:
    """After an interrupted run: ``latest.json`` (and its pages) from what was streamed, marked
    partial; with nothing streamed, a partial report with zero rows. Returns its row count."""
    import datetime as dt

    out = report_dir / "latest.json"
    try:
        return len(schema.load(out)["results"])
    except schema.ReportError:
        pass
    try:
        report = schema.load(report_dir / "latest.jsonl")
    except schema.ReportError:
        report = {
            "schema_version": schema.SCHEMA_VERSION,
            "created": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "environment": {},
            "results": [],
        }
    report["partial"] = True
    schema.write_json(report, out)
    try:
        files.write_pages([out], [report], report_dir, "latest", [])
    except Exception as e:  # the JSON is what matters; say why the pages are missing
        print(f"autodiff-semantics: could not render the partial report's pages: {e}", file=sys.stderr)
    return len(report["results"])


def _die_with_parent() -> None:  # pragma: no cover - runs in the child between fork and exec
    import os

    os.setpgrp()
    if sys.platform.startswith("linux"):
        import ctypes
        import signal

        PR_SET_PDEATHSIG = 1
        try:
            ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
        except (OSError, AttributeError):
            pass


def _own_process_group() -> dict:
    """A process group of its own (signals reach the child once, from us) and, on Linux, a
    SIGTERM when the CLI dies (a SIGKILL of the CLI left pytest running on)."""
    return {"preexec_fn": _die_with_parent}


def _interrupted(jsonl: Path) -> bool:
    return bool(last_record(jsonl).get("interrupted"))


def _finished(jsonl: Path) -> bool:
    """The stream ends with a footer (the run wrote its whole report)."""
    return last_record(jsonl).get("kind") == "footer"


def _progress(jsonl: Path):
    import json

    started, finished = [], set()
    try:
        lines = jsonl.read_text(encoding="utf-8").splitlines()
    except OSError:
        return started, finished
    for line in lines:
        try:
            obj = json.loads(line)
        except json.JSONDecodeError:
            continue
        if obj.get("kind") == "start":
            started.append(obj["test"])
        elif obj.get("kind") == "row":
            finished.add(obj["test"])
    return started, finished
