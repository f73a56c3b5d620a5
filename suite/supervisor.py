"""Crash isolation for a run: pytest in a child process, resumed past a case that kills it.

When a case kills the interpreter (a kernel abort, a segfault), that case is recorded
as ``crashed`` with the signal and the run resumes without it and without the cases
already done, appending to the same report stream. Signals to the CLI process
(SIGINT, SIGTERM) are forwarded once to the child, which ends its run as interrupted.
"""

from __future__ import annotations

import sys
from pathlib import Path


def supervise(argv, report_dir: Path, *, max_crashes=25) -> int:
    """Run pytest in a child process; when a case kills the interpreter, record that case
    as ``crashed`` (with the signal) and resume the run without it and without the cases
    already done, appending to the same stream. Returns 0 iff nothing failed or crashed."""
    import json
    import signal
    import subprocess

    from suite.report import schema

    jsonl = report_dir / "latest.jsonl"
    done: list[str] = []
    crashes = 0
    extra: list[str] = []
    while True:
        cmd = [sys.executable, "-m", "pytest", *argv, *extra]
        # The child gets a process group of its own, so a signal reaches it once, from us:
        # Ctrl-C (to the terminal's group) and ``kill -INT <pid>`` (to this process alone,
        # as timeout, IDEs and job runners send it) both end the run the same way, and a
        # second SIGINT from the group cannot break the child while it writes the report.
        child = subprocess.Popen(cmd, **_own_process_group())
        signalled = []

        def forward(signum, frame):
            signalled.append(signum)
            child.send_signal(signum)

        previous = {s: signal.signal(s, forward) for s in (signal.SIGINT, signal.SIGTERM)}
        try:
            rc = child.wait()
        finally:
            for s, handler in previous.items():
                signal.signal(s, handler)
        # Interrupted: the stream says so, or the signal ended the child before its footer. A
        # signal that came after the run had finished leaves a complete report and its status.
        if _interrupted(jsonl) or (signalled and not _finished(jsonl)):
            print(
                "autodiff-semantics: interrupted; the partial report is in "
                f"{report_dir}/latest.json (render it with 'autodiff-semantics report')",
                file=sys.stderr,
            )
            return 130
        if rc >= 0 or crashes >= max_crashes:
            break
        # Killed by a signal: find the case that was running.
        started, finished = _progress(jsonl)
        running = [t for t in started if t not in finished]
        crashed = running[-1] if running else None
        sig = signal.Signals(-rc).name if -rc in signal.Signals.__members__.values() else str(-rc)
        if crashed is None:
            print(f"autodiff-semantics: pytest died with {sig} outside any case", file=sys.stderr)
            return 1
        crashes += 1
        print(f"autodiff-semantics: {crashed} crashed the interpreter ({sig}); resuming without it", file=sys.stderr)
        with open(jsonl, "a", encoding="utf-8") as fh:
            fh.write(json.dumps({"kind": "row", **crashed_row(crashed, sig)}) + "\n")
        done = sorted(set(finished) | {crashed})
        extra = ["--report-append", *[f"--deselect={t}" for t in done]]
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


def _own_process_group() -> dict:
    import os

    if sys.version_info >= (3, 11):
        return {"process_group": 0}
    return {"preexec_fn": os.setpgrp}  # pragma: no cover - Python 3.10


def _interrupted(jsonl: Path) -> bool:
    import json

    try:
        last = jsonl.read_text(encoding="utf-8").splitlines()[-1]
        return bool(json.loads(last).get("interrupted"))
    except (OSError, IndexError, ValueError):
        return False


def _finished(jsonl: Path) -> bool:
    """The stream ends with a footer (the run wrote its whole report)."""
    import json

    try:
        return json.loads(jsonl.read_text(encoding="utf-8").splitlines()[-1]).get("kind") == "footer"
    except (OSError, IndexError, ValueError):
        return False


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


def crashed_row(nodeid: str, sig: str, error: str | None = None) -> dict:
    """The row of a case that killed the process running it (this supervisor's child, or a
    pytest-xdist worker, which xdist restarts)."""
    import re

    m = re.search(r"\[(\w+)-(\w+)-(\w+)\]$", nodeid)
    fw, mode, dev = m.groups() if m else ("none", "none", "cpu")
    path = nodeid.split("::")[0]
    beh = Path(path).stem[len("test_") :].replace("_", "-")
    return {
        "behaviour": beh,
        "test": nodeid,
        "framework": fw,
        "mode": mode,
        "device": dev,
        "outcome": "crashed",
        "observed": {},
        "expected": {},
        "max_rel_err": {},
        "examples": 0,
        "duration_s": 0.0,
        "error": error or f"the interpreter died with {sig} while this case ran",
        "signal": sig,
        "reproducer": f"# reproduces {nodeid}\n#   autodiff-semantics run -- '{nodeid}'",
    }
