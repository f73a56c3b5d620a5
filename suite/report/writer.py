"""The report writer, registered in the process that writes the report (a serial run's
pytest, or the pytest-xdist controller): the streamed ``latest.jsonl``, progress on the
terminal, and at the end ``latest.{json,md,html}`` and the matrix."""

from __future__ import annotations

import datetime as dt
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import settings

from suite import context, frameworks
from suite.report import deprecations, html, pages, query, schema
from suite.report.rows import (
    _PROPERTIES,
    DECLARED_PROPERTY,
    DEPRECATIONS_PROPERTY,
    DESELECTED_OUTPUT,
    ENVIRONMENT_PROPERTY,
    _behaviour_of,
    measured_environment,
)
from suite.report.signals import _SIGNALLED, _raise_interrupt

#: Set by whoever installs the suite from a known commit (a wheel carries no git metadata).
REVISION_VARIABLE = "AUTODIFF_SEMANTICS_REVISION"


def _git(*args, cwd) -> str | None:
    try:
        out = subprocess.run(["git", *args], capture_output=True, text=True, timeout=10, cwd=cwd)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def _git_sha() -> str | None:
    """The suite revision that is running: ``AUTODIFF_SEMANTICS_REVISION`` when set; otherwise
    the commit of the checkout these files belong to, with ``+dirty`` when suite/ or cases/
    differ from it. An installed copy that git does not track (a wheel in site-packages, even
    under a checkout's ``.tox/``) has no revision: git would name the checkout's HEAD, which is
    not what runs (measured: tox's wheel, built once, reported each env's later HEAD)."""
    if os.environ.get(REVISION_VARIABLE):
        return os.environ[REVISION_VARIABLE]
    here = Path(__file__).resolve()
    if _git("ls-files", "--error-unmatch", here.name, cwd=here.parent) is None:
        return None
    sha = _git("rev-parse", "HEAD", cwd=here.parent)
    top = _git("rev-parse", "--show-toplevel", cwd=here.parent)
    if sha and top and _git("status", "--porcelain", "--", "suite", "cases", cwd=top):
        sha += "+dirty"
    return sha


#: Profiles whose complete runs fail on a stale declaration (their draws are fixed or many;
#: dev's few random draws may miss a rare one).
STALE_FAILS_IN = ("ci", "ci-seeded", "thorough")


def interrupt_summary(excinfo):
    """pytest's rendering of an interrupt for its summary, without the traceback entries that
    have no line number; a bare one naming the interrupt where even that cannot be rendered."""
    try:
        excinfo.traceback = excinfo.traceback.filter(lambda entry: entry._rawentry.tb_lineno is not None)
        summary = excinfo.getrepr(funcargs=True, chain=False)
        if summary.reprcrash is not None:
            return summary
    except Exception:
        pass
    try:
        raise KeyboardInterrupt(str(excinfo.value))
    except KeyboardInterrupt:
        return pytest.ExceptionInfo.from_current().getrepr(chain=False)


def progress_line(done: int, total: int, bad: int, elapsed_s: float, ran: int) -> str:
    """``autodiff-semantics: 420/2940 rows, 3 failed, ~4 min left``.

    >>> progress_line(420, 2940, 3, 120.0, 400)
    'autodiff-semantics: 420/2940 rows (14%), 3 failed so far, about 12 min left'
    """
    left = max(total - done, 0)
    per_row = elapsed_s / ran if ran else 0.0
    eta = left * per_row * (ran / done if done else 1.0)  # the share of rows that run, not skip
    when = f"about {round(eta / 60)} min left" if eta >= 90 else f"about {int(eta)} s left"
    return f"autodiff-semantics: {done}/{total} rows ({100 * done // max(total, 1)}%), {bad} failed so far, {when}"


def stream_progress(path, now: float | None = None) -> str:
    """Where the run writing the stream ``path`` (a ``latest.jsonl``) is, as one line: its
    TensorFlow version, rows done of the rows it collected, failures, and the time left
    estimated from its rows so far; or that it finished or was interrupted. For watching a long
    run (``.ci/regen-baselines``'s envs) from outside. Raises ReportError for an unusable stream."""
    report = schema.load(path, coverage=True)
    rows = report["results"]
    bad = sum(r["outcome"] in ("failed", "error", "crashed") for r in rows)
    what = f"{path}: TF {query.tf_version(report)}"
    if "_coverage" not in report:  # a written report, not a stream
        return f"{what}: {'partial' if report.get('partial') else 'finished'}, {len(rows)} rows, {bad} failed"
    cov = report["_coverage"]
    # what it collected and kept, and what has rows (a run resumed after a crash deselects those)
    planned = {t for t, _ in cov["collected"]} - {t for t, _ in cov["deselected"]} | {r["test"] for r in rows}
    total = len(planned)
    last = schema.last_record(path)  # {} while a line is being written
    if last.get("kind") == "footer":
        how = "interrupted" if last.get("interrupted") else "finished"
        return f"{what}: {how}, {len(rows)}/{total} rows, {bad} failed"
    now = time.time() if now is None else now
    try:
        started = dt.datetime.strptime(report["created"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=dt.timezone.utc)
        elapsed = now - started.timestamp()
    except (TypeError, ValueError):  # no start time in the header: no estimate
        elapsed = 0.0
    ran = sum(r["outcome"] != "skipped" for r in rows)
    line = progress_line(len(rows), total, bad, elapsed, ran).removeprefix("autodiff-semantics: ")
    quiet = max(0, round((now - Path(path).stat().st_mtime) / 60))
    return f"{what}: {line}; last written {quiet} min ago"


def is_device_skip(report) -> bool:
    """A row skipped because its device (a GPU) is not there: folded into one note of the
    report, not a character each on the terminal."""
    if not report.skipped or report.when != "setup":
        return False
    text = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
    return "no GPU visible" in text


class ReportWriter:
    """Registered in the process that writes the report (a serial run's pytest, or the
    pytest-xdist controller): streams the header, each row as its teardown report arrives,
    and the footer, then writes latest.{json,md,html}."""

    def __init__(self, config):
        self.config = config
        self.dir = Path(config.getoption("report_dir"))
        self.started = time.time()
        self.header: dict | None = None
        self.deprecations: dict[str, set] = {}
        self.missing: dict[str, str] = {}
        self.stale: list[dict] = []
        self._deselected: list = []
        self._collected: list = []
        self._xdist_ids: list[str] | None = None
        self._worker_environment: dict | None = None
        self._fh = None

    def missing_not_allowed(self) -> dict[str, str]:
        allowed = set(self.config.getoption("allow_missing") or ())
        return {k: v for k, v in self.missing.items() if k not in allowed}

    # session
    def pytest_sessionstart(self, session):
        # SIGTERM ends the run like Ctrl-C: pytest unwinds, the footer says "interrupted"
        # and latest.json is written (marked partial) from what was measured.
        _SIGNALLED.clear()  # a session of its own (in-process pytest runs share the module)
        try:
            for s in (signal.SIGINT, signal.SIGTERM):
                signal.signal(s, _raise_interrupt)
        except ValueError:  # not the main thread
            pass

    def pytest_collection_finish(self, session):
        """Start the report once the session is known to run cases (else stay inert)."""
        cases = [
            (i.nodeid, b.id) for i in session.items if (b := getattr(getattr(i, "module", None), "BEHAVIOUR", None))
        ]
        if cases:
            self._start(cases)

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node, ids):
        """A parallel run: this controller collects nothing itself; every worker collects the
        same tests. The report starts when the first case row (or crash) comes back."""
        if self._xdist_ids is None:
            self._xdist_ids = list(ids)

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node, error):
        found = [tuple(t) for t in (getattr(node, "workeroutput", None) or {}).get(DESELECTED_OUTPUT, [])]
        new = [t for t in found if t not in self._deselected]
        if new and self._fh is not None:
            self._deselected += new
            self._write({"kind": "deselected", "tests": new})

    def _start_parallel(self):
        if self._fh is None and self.header is None and self._xdist_ids is not None:
            self._start([(i, b) for i in self._xdist_ids if (b := _behaviour_of(i))])

    def _start(self, cases):
        self.dir.mkdir(parents=True, exist_ok=True)
        env = frameworks.python_environment()
        env.pop("executable", None)
        # a parallel run's workers measured it (and imported the frameworks); else measure here
        measured = self._worker_environment or measured_environment(self.config)
        env["frameworks"] = measured["frameworks"]
        env["packages"] = measured.get("packages") or {}
        if measured.get("compile_caches"):
            env["compile_caches"] = measured["compile_caches"]
        env["hypothesis"] = {
            "profile": settings.get_current_profile_name(),
            "seed": self.config.getoption("hypothesis_seed", None),
        }
        env["suite_revision"] = _git_sha()
        env["options"] = {k: self.config.getoption(k) for k in ("frameworks", "modes", "devices")}
        # A subject that is asked for and missing fails the run unless --allow-missing names it.
        self.missing = dict(measured["missing"])
        allowed = self.config.getoption("allow_missing")
        if allowed:
            env["allowed_missing"] = list(allowed)
        if self.missing:
            env["missing"] = dict(self.missing)
        injected = getattr(self.config, "_adsem_faults", None)  # set only by -p suite.faults.plugin
        if injected:
            env["faults"] = list(injected)
        ctx = context.of(self.config)
        if ctx.shard:  # pytest-split (run --shard i/n)
            env["shard"] = ctx.shard
        if ctx.role == "controller" and self._xdist_ids is not None:  # pytest-xdist (run --jobs N)
            env["jobs"] = ctx.workers
        self.header = {
            "kind": "header",
            "schema_version": schema.SCHEMA_VERSION,
            "created": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "environment": env,
        }
        append = self.config.getoption("report_append")
        self._fh = open(self.dir / "latest.jsonl", "a" if append else "w", encoding="utf-8")
        self._write(self.header)
        self._collected = list(cases)
        self._write({"kind": "collected", "tests": self._collected})
        self._deselected += explicitly_selected(self.config.args, self._deselected)
        if self._deselected:
            self._write({"kind": "deselected", "tests": self._deselected})

    def pytest_deselected(self, items):
        """Tests left out by ``-k``/``--deselect`` or by another shard: their behaviour did not
        run whole here."""
        for i in items:
            b = getattr(getattr(i, "module", None), "BEHAVIOUR", None)
            if b is not None:
                self._deselected.append((i.nodeid, b.id))

    def pytest_runtest_logstart(self, nodeid, location):
        if self._fh is not None:
            self._write({"kind": "start", "test": nodeid})

    @pytest.hookimpl(tryfirst=True)  # before junitxml, which would copy the row into its XML
    def pytest_runtest_logreport(self, report):
        mine = [(k, v) for k, v in report.user_properties if k in _PROPERTIES]
        if mine:
            report.user_properties = [(k, v) for k, v in report.user_properties if k not in dict(mine)]
        crashed = report.when == "???" and report.failed and _behaviour_of(report.nodeid)  # an xdist worker died
        if not (mine or crashed):
            return
        for k, v in mine:
            if k == ENVIRONMENT_PROPERTY and self._worker_environment is None:
                self._worker_environment = json.loads(v)
        self._start_parallel()
        if self._fh is None:
            return
        for k, v in mine:
            if k == DEPRECATIONS_PROPERTY:
                for test, message in v:
                    self._deprecation(test, message)
            elif k == DECLARED_PROPERTY:
                self._write({"kind": "declared", **v})
            elif k == ENVIRONMENT_PROPERTY:
                continue  # in the header (_start)
            else:
                row = json.loads(v)
                self._write({"kind": "row", **row})
                self._progress(row)
        if crashed:
            print(f"autodiff-semantics: {report.nodeid} crashed its worker; pytest-xdist restarted it", file=sys.stderr)
            self._write({"kind": "row", **schema.Row.crashed(report.nodeid, "unknown", str(report.longrepr)).as_dict()})

    @pytest.hookimpl(tryfirst=True)
    def pytest_report_teststatus(self, report, config):
        if is_device_skip(report):
            return "skipped", "", ""
        return None

    def pytest_warning_recorded(self, warning_message, when, nodeid, location):
        if (
            nodeid
            and issubclass(warning_message.category, deprecations.CATEGORIES)
            and deprecations.from_framework(warning_message.filename)
        ):
            self._deprecation(nodeid, deprecations.normalise(warning_message.message))

    def _deprecation(self, nodeid, message):
        b = _behaviour_of(nodeid)
        if b and self._fh is not None and message not in self.deprecations.setdefault(b, set()):
            self.deprecations[b].add(message)
            self._write({"kind": "deprecation", "behaviour": b, "message": message})

    @pytest.hookimpl(wrapper=True)
    def pytest_keyboard_interrupt(self, excinfo):
        """pytest renders the interrupt's traceback for its summary, and that raised TypeError
        where a frame has ``tb_lineno`` None (Python 3.11: a SIGINT that lands on an instruction
        with no line number): a long internal traceback on stderr and the run's exit status
        lost (CI at 34f9547). The summary is rendered again without those frames."""
        try:
            return (yield)
        except Exception:
            tr = self.config.pluginmanager.get_plugin("terminalreporter")
            if tr is not None:
                tr._keyboardinterrupt_memo = interrupt_summary(excinfo)
            return None

    def pytest_runtest_logfinish(self, nodeid, location):
        if _SIGNALLED:  # the case swallowed the interrupt: stop here, as pytest would have
            raise KeyboardInterrupt(f"signal {signal.Signals(_SIGNALLED[0]).name}")

    #: seconds between two progress lines on the terminal
    PROGRESS_EVERY_S = 30.0

    def _progress(self, row) -> None:
        """Every PROGRESS_EVERY_S: rows done of the total, failures so far and the time left,
        estimated from the rows that ran (skipped ones take no time)."""
        self._done = getattr(self, "_done", 0) + 1
        self._ran = getattr(self, "_ran", 0) + (row.get("outcome") != "skipped")
        self._bad = getattr(self, "_bad", 0) + (row.get("outcome") in ("failed", "error", "crashed"))
        now = time.time()
        if now - getattr(self, "_last_progress", self.started) < self.PROGRESS_EVERY_S:
            return
        self._last_progress = now
        total = len(self._collected) or self._done
        tr = self.config.pluginmanager.get_plugin("terminalreporter")
        if tr is not None:
            tr.write_line(progress_line(self._done, total, self._bad, now - self.started, self._ran))

    def _write(self, obj):
        self._fh.write(json.dumps(obj, default=str) + "\n")
        self._fh.flush()
        os.fsync(self._fh.fileno())

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session, exitstatus):
        if self._fh is None:
            return
        if self.missing_not_allowed() and exitstatus == pytest.ExitCode.OK:
            session.exitstatus = exitstatus = pytest.ExitCode.TESTS_FAILED
        if _SIGNALLED:  # interrupted, even where the KeyboardInterrupt itself was swallowed
            session.exitstatus = exitstatus = pytest.ExitCode.INTERRUPTED
        interrupted = exitstatus == pytest.ExitCode.INTERRUPTED
        footer = {
            "kind": "footer",
            "finished": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "exitstatus": int(exitstatus),
            "interrupted": interrupted,
            "wall_s": round(time.time() - self.started, 2),
        }
        self._write(footer)
        self._fh.close()
        self._fh = None
        # Built from the stream, so rows of earlier (crashed) processes of the same run
        # and the supervisor's ``crashed`` rows are included.
        streamed = schema.load(self.dir / "latest.jsonl", coverage=True)
        # in the order the tests were collected, however the workers' rows came back
        order: dict[str, int] = {}
        for test, _ in streamed["_coverage"]["collected"]:
            order.setdefault(test, len(order))
        rows = sorted(streamed["results"], key=lambda r: order.get(r["test"], len(order)))
        report = schema.assemble(
            self.header,
            rows,
            footer,
            streamed.get("deprecations"),
            streamed["_coverage"],
            streamed["_declared"],
            floors=streamed["_floors"],
        )
        stale = [d for d in report.get("declared", []) if d["status"] == "stale"]
        if stale and settings.get_current_profile_name() in STALE_FAILS_IN:
            self.stale = stale
            if session.exitstatus == pytest.ExitCode.OK:
                session.exitstatus = pytest.ExitCode.TESTS_FAILED
                footer["exitstatus"] = int(session.exitstatus)
        schema.write_json(report, self.dir / "latest.json")
        (self.dir / "latest.md").write_text(pages.markdown(report), encoding="utf-8")

        (self.dir / "latest.html").write_text(html.page([report], [str(self.dir / "latest.json")]), encoding="utf-8")
        self.report = report

    def pytest_terminal_summary(self, terminalreporter):
        for d in self.stale:
            where = "-".join(x for x in (d["framework"], d["mode"], d["device"], d["versions"]) if x) or "everywhere"
            terminalreporter.write_line(
                f"autodiff-semantics: FAILED: stale declaration {d['key']}={d['observed']!r} ({where}, {d['module']}) "
                f"matched no row: {d['reason']}",
                red=True,
                bold=True,
            )
        for what, why in self.missing_not_allowed().items():
            terminalreporter.write_line(
                f"autodiff-semantics: FAILED: {why}; its rows are skipped "
                f"(pass --allow-missing {what} if that is what you mean)",
                red=True,
                bold=True,
            )
        report = getattr(self, "report", None)
        if not report or not report["results"]:
            return
        tr = terminalreporter
        tr.section("autodiff-semantics: behaviour x framework-mode-device")
        for line in pages.terminal_matrix(report):
            tr.write_line(line)
        tr.write_line("")
        for line in pages.speed_lines(report):
            tr.write_line(line)
        tr.write_line(f"report: {self.dir / 'latest.json'} (+ .md, streamed .jsonl)")


#: What a deselected entry of a behaviour selected by node id names instead of a test: the
#: module's tests that the selection did not name were never collected, so none is listed.
NOT_NAMED = "(tests not named by the selection)"


def explicitly_selected(args, already=()) -> list[tuple[str, str]]:
    """Issue 49: a selection by node id (``cases/test_b.py::test_x[...]``, what a printed
    reproducer runs) is a part of its behaviour, like ``-k``: a deselected entry per such
    behaviour, so its declarations read ``unconfirmed``, not ``stale``.

    >>> explicitly_selected(["cases/test_gather_out_of_range.py::test_p[tensorflow-xla-cpu]", "cases"])
    [('cases/test_gather_out_of_range.py::(tests not named by the selection)', 'gather-out-of-range')]
    """
    out = []
    for a in args:
        b = _behaviour_of(str(a))
        entry = (f"{str(a).split('::', 1)[0]}::{NOT_NAMED}", b)
        if b and entry not in out and entry not in already:
            out.append(entry)
    return out
