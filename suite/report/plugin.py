"""Pytest plugin: fixtures (``subject``, ``oracles``, ``record``), Hypothesis profiles and
the report writer.

Rows stream to ``<report-dir>/latest.jsonl`` as tests finish (a header line first, a
footer line last), so an interrupted or crashed run keeps what it measured; at the end
``latest.json`` and ``latest.md`` are written and the terminal shows the matrix.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from suite import behaviours as bh, context, frameworks
from suite.frameworks import resources
from suite.report import deprecations, render, schema
from suite.report.record import Record

# function_scoped_fixture: ``record`` is meant to be shared by all examples of a test
# (it accumulates observations across them); ``subject``/``oracles`` are stateless
# handles to cached runners. too_slow: the first examples include tracing and XLA
# compilation, which is a one-off cost per test, not slow data generation.
_SUPPRESS = [HealthCheck.function_scoped_fixture, HealthCheck.too_slow]


def register_profiles() -> None:
    """The Hypothesis profiles of ``suite.options.PROFILES`` (registered when a session runs cases)."""
    from suite.options import PROFILE_EXAMPLES as N

    settings.register_profile("dev", max_examples=N["dev"], deadline=None, suppress_health_check=_SUPPRESS)
    settings.register_profile(
        "ci",
        max_examples=N["ci"],
        deadline=None,
        derandomize=True,
        print_blob=True,
        suppress_health_check=_SUPPRESS,
        database=None,
    )
    settings.register_profile("thorough", max_examples=N["thorough"], deadline=None, suppress_health_check=_SUPPRESS)


def pin_constant_pool() -> bool:
    """Make a derandomized example depend on its test alone. Hypothesis mixes into ~5% of its
    choices constants it reads from the *local* modules loaded so far (not site-packages, not
    test files); which of ours are loaded differs between a whole run, one module, a
    pytest-xdist worker, a shard and an installed wheel, so the same ci test drew different
    examples in each (seen: a whole-suite failure that one module's run did not draw, and a
    ``--jobs 2`` run that drew an example the serial run did not). An empty pool, the same
    everywhere, removes that dependence. Returns False where this Hypothesis has no such pool
    (older releases; ``test_derandomized_draws_ignore_local_modules`` checks the draws either way)."""
    try:
        from hypothesis.internal.conjecture import providers
        from hypothesis.internal.constants_ast import Constants
    except ImportError:
        return False
    if not callable(getattr(providers, "_get_local_constants", None)):
        return False
    empty = Constants()
    providers._get_local_constants = lambda: empty
    cache = getattr(getattr(providers, "CONSTANTS_CACHE", None), "cache", None)
    if cache is not None:  # choices permitted per constraint, computed from the old pool
        cache.clear()
    return True


# ---------------------------------------------------------------- fixtures
@pytest.fixture(autouse=True)
def _framework_resources():
    """Close the v1 Sessions, tf.data iterators and thread pools a test made when it ends
    (``suite.frameworks.resources``), so interpreter shutdown has nothing to wait for.
    (Iterators that only a reference cycle still holds are collected once, when the session
    ends: a full collection costs ~0.4 s with three frameworks loaded, too much per test.)"""
    yield
    resources.release()


@pytest.fixture
def subject(request):
    """The runner under test (parametrised by conftest: framework x mode x device)."""
    spec = request.param
    try:
        return frameworks.runner(spec)
    except frameworks.Unavailable as e:
        pytest.skip(str(e))


#: The oracles' answers of the test function now running (``Runner.memoised``): its rows
#: run one after the other, in a serial run and in an xdist worker (``--dist loadfile``).
_ORACLE_ANSWERS: dict = {"test": None, "store": {}}


@pytest.fixture
def oracles(subject, request):
    """Reference runners of the other frameworks (jax-jit, torch-eager), as selected. Each
    answers an example it has already answered for another row of the same test function
    from memory: the four TensorFlow rows draw the same examples (derandomized), so each
    oracle runs once per example, not once per mode."""
    selected = request.config.getoption("frameworks")
    fws = [f for f in ("jax", "torch") if f in selected and f != subject.framework]
    test = (request.node.module.__name__, request.node.originalname)
    if _ORACLE_ANSWERS["test"] != test:
        _ORACLE_ANSWERS.update(test=test, store={})
    store = _ORACLE_ANSWERS["store"]
    return [o.memoised(store) for o in frameworks.reference_oracles(frameworks=fws, device=subject.device)]


@pytest.fixture
def record(subject, request):
    """The row's record, shared by every Hypothesis example of the test."""
    rec = Record(subject)
    request.node._adsem_record = rec
    return rec


# ---------------------------------------------------------------- report writer
def _git_sha() -> str | None:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
            cwd=Path(__file__).resolve().parent,
        )
        return out.stdout.strip() if out.returncode == 0 else None
    except (OSError, subprocess.SubprocessError):
        return None


def _short_error(rep) -> str:
    text = str(rep.longrepr) if rep.longrepr else ""
    m = re.findall(r"^E\s+(.*)$", text, flags=re.M)
    if m:
        return "\n".join(m[:6])
    return text.strip().splitlines()[-1] if text.strip() else ""


def _falsifying(rep) -> str:
    text = str(rep.longrepr) if rep.longrepr else ""
    m = re.search(r"Falsifying (?:explicit )?example: (.*?)(?:\n\n|\n[A-Z]|$)", text, flags=re.S)
    blob = re.search(r"(@reproduce_failure\([^)]*\))", text)
    out = m.group(1).strip() if m else ""
    if blob:
        out += ("\n" if out else "") + blob.group(1)
    return out


def _behaviour_of(nodeid: str) -> str | None:
    """``cases/test_gather_out_of_range.py::...`` -> ``gather-out-of-range`` (None outside cases)."""
    name = nodeid.split("::", 1)[0].rsplit("/", 1)[-1]
    if not name.startswith("test_") or not name.endswith(".py") or "::" not in nodeid:
        return None
    return name[len("test_") : -len(".py")].replace("_", "-")


#: Profiles whose complete runs fail on a stale declaration (their draws are fixed or many;
#: dev's few random draws may miss a rare one).
STALE_FAILS_IN = ("ci", "ci-seeded", "thorough")


def _is_group(e) -> bool:  # BaseExceptionGroup (3.11) or the exceptiongroup backport Hypothesis uses
    return isinstance(getattr(e, "exceptions", None), (tuple, list))


def failure_kind(exc: BaseException) -> str:
    """``assertion`` when an assertion of the suite failed (Hypothesis may group several,
    all assertions); otherwise the exception's class: a crash of the code under test, not
    a check that caught it.

    >>> failure_kind(AssertionError("x")), failure_kind(TypeError("y"))
    ('assertion', 'TypeError')
    """
    leaves = [exc]
    while any(_is_group(e) for e in leaves):
        leaves = [x for e in leaves for x in (e.exceptions if _is_group(e) else [e])]
    if all(isinstance(e, AssertionError) for e in leaves):
        return "assertion"
    return next(type(e).__name__ for e in leaves if not isinstance(e, AssertionError))


#: Signals this process received. A KeyboardInterrupt raised by the handler can be swallowed
#: where it lands (framework C++ boundaries turn a Python error in a callback into an error
#: status, which a case may then record as an observation); the run still stops after the
#: case and ends as interrupted.
_SIGNALLED: list[int] = []


def _raise_interrupt(signum, frame):
    _SIGNALLED.append(signum)
    raise KeyboardInterrupt(f"signal {signal.Signals(signum).name}")


#: The names under which a case's row and the deprecations TensorFlow logged during it
#: travel on pytest's own teardown report (``user_properties``): from the process that ran
#: the case (a serial run's pytest, or a pytest-xdist worker) to the one writing the report.
ROW_PROPERTY = "autodiff_semantics_row"
DEPRECATIONS_PROPERTY = "autodiff_semantics_deprecations"
#: The declared divergences of the case modules a process imported, sent once with its first
#: row: the report's declaration statuses need them where no case module was imported (the
#: pytest-xdist controller).
DECLARED_PROPERTY = "autodiff_semantics_declared"
#: The frameworks' environment block and what is missing, measured by a pytest-xdist worker
#: and sent with its first row: the controller runs no case and need not import TensorFlow,
#: JAX and PyTorch (seconds of CPU at the start, beside the workers' own imports).
ENVIRONMENT_PROPERTY = "autodiff_semantics_environment"
_PROPERTIES = (ROW_PROPERTY, DEPRECATIONS_PROPERTY, DECLARED_PROPERTY, ENVIRONMENT_PROPERTY)
#: What a pytest-xdist worker hands its controller when it ends: the tests it deselected.
DESELECTED_OUTPUT = "autodiff_semantics_deselected"


class RowMaker:
    """Registered where cases run (a serial run's pytest, every pytest-xdist worker): builds
    each case's row when its teardown is reported and puts it on that report, which xdist
    carries to the controller; :class:`ReportWriter` takes it from there. One row type and
    one path, in serial and parallel runs alike."""

    def __init__(self, config):
        self.config = config
        self._declared_sent = False

    def pytest_runtest_logstart(self, nodeid, location):
        deprecations.start_test(nodeid)

    def pytest_deselected(self, items):
        out = getattr(self.config, "workeroutput", None) if context.of(self.config).role == "worker" else None
        if out is not None:  # a worker: the controller learns what was deselected when it ends
            found = out.setdefault(DESELECTED_OUTPUT, [])
            found += [[i.nodeid, b.id] for i in items if (b := getattr(getattr(i, "module", None), "BEHAVIOUR", None))]

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_protocol(self, item, nextitem):
        if context.of(self.config).role == "worker":
            done = crashed_list(self.config)
            if done.exists() and item.nodeid in done.read_text(encoding="utf-8").splitlines():
                return True  # it killed a worker already: its row is the controller's crashed row
        return None

    @pytest.hookimpl(wrapper=True)
    def pytest_pyfunc_call(self, pyfuncitem):
        """Record everything, then assert: a case's checks and comparisons fail at the end
        of their example (each Hypothesis example, or the whole body of a plain test), with
        every key the example observed recorded."""
        rec = getattr(pyfuncitem, "_adsem_record", None)
        if rec is None:
            return (yield)
        rec.defer = True
        handle = getattr(pyfuncitem.obj, "hypothesis", None)
        if handle is not None and not getattr(handle.inner_test, "_adsem_per_example", False):
            handle.inner_test = _per_example(handle.inner_test)
        try:
            result = yield
        except BaseException as e:
            if handle is None:
                rec.end_example(e)
            raise
        if handle is None:
            rec.end_example()
        return result

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_call(self, item):
        planted = os.environ.get("AUTODIFF_SEMANTICS_CRASH")
        if planted and planted in item.nodeid:  # self-check: a case that kills the interpreter
            os.kill(os.getpid(), signal.SIGSEGV)

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item, call):
        outcome = yield
        rep = outcome.get_result()
        reps = item.__dict__.setdefault("_adsem_reports", {})
        reps[call.when] = rep
        if (
            call.when == "call"
            and rep.skipped
            and getattr(item, "_adsem_record", None) is not None
            and not (call.excinfo is not None and str(call.excinfo.value).startswith(bh.DECLARED_SKIP))
        ):
            # The subject was there (its fixture set up): a case that skips itself mid-test
            # would turn a row grey without a reason anyone declared. No silent skips.
            rep.outcome = "failed"
            why = call.excinfo.value if call.excinfo is not None else "?"
            rep.longrepr = (
                f"AssertionError: silently skipped: {item.nodeid} skipped itself with its subject present ({why})"
            )
            item.__dict__.setdefault("_adsem_failures", {})["call"] = "assertion"
        elif call.excinfo is not None and rep.failed:
            item.__dict__.setdefault("_adsem_failures", {})[call.when] = failure_kind(call.excinfo.value)
        if call.when == "teardown":
            row = make_row(item, reps)
            if row is not None:
                if not self._declared_sent:  # every case module was imported at collection
                    from suite.expectations import all_declared

                    self._declared_sent = True
                    rep.user_properties.append((DECLARED_PROPERTY, [e.as_dict() for e in all_declared()]))
                    if context.of(self.config).role == "worker":
                        rep.user_properties.append((ENVIRONMENT_PROPERTY, environment_payload(self.config)))
                rep.user_properties.append((ROW_PROPERTY, json.dumps(row, default=str)))
            logged = deprecations.take()
            if logged:
                rep.user_properties.append((DEPRECATIONS_PROPERTY, [list(x) for x in logged]))


def _per_example(inner):
    """Hypothesis' inner test (what one example runs), ending each example with
    :meth:`Record.end_example` (Hypothesis reads ``inner_test`` when the test is called; the
    attribute is documented for plugins that wrap each example)."""
    import functools

    @functools.wraps(inner)
    def run_example(*args, **kwargs):
        rec = kwargs.get("record")
        if not isinstance(rec, Record):
            return inner(*args, **kwargs)
        try:
            out = inner(*args, **kwargs)
        except BaseException as e:
            rec.end_example(e)
            raise
        rec.end_example()
        return out

    run_example._adsem_per_example = True
    return run_example


def measured_environment(config) -> dict:
    """The frameworks' versions and devices, and what the run asked for and cannot have
    (``frameworks.missing``), measured by importing them in this process."""
    return {
        "frameworks": frameworks.environment(),
        "packages": frameworks.package_versions(),
        "missing": frameworks.missing(frameworks=config.getoption("frameworks"), devices=config.getoption("devices")),
    }


def environment_payload(config) -> str:
    """:func:`measured_environment` as JSON: execnet carries plain types only (PyTorch's
    version is a ``TorchVersion``, which it refuses, and the worker dies of it)."""
    return json.dumps(measured_environment(config), default=str)


def crashed_list(config) -> Path:
    """The tests that killed a pytest-xdist worker in this run (one node id a line)."""
    return Path(config.invocation_params.dir) / config.getoption("report_dir") / ".crashed"


def _skip_reason(rep) -> str:
    text = rep.longrepr[2] if isinstance(rep.longrepr, tuple) else str(rep.longrepr)
    return re.sub(r"^Skipped: ", "", text)


def outcome_of(reps) -> tuple[str, str | None]:
    """(outcome, reason or error) of a test from its setup/call/teardown reports: the first
    phase that skipped or failed decides."""
    for when, bad in (("setup", "error"), ("call", "failed"), ("teardown", "error")):
        rep = reps.get(when)
        if rep is None:
            continue
        if rep.skipped and when != "teardown":
            return "skipped", _skip_reason(rep)
        if rep.failed:
            return bad, _short_error(rep)
    return "passed", None


def make_row(item, reps) -> dict | None:
    """The report row of a case test from its setup/call/teardown reports (None outside cases)."""
    b = getattr(getattr(item, "module", None), "BEHAVIOUR", None)
    if b is None:  # not a case module (self-tests): no report row
        return None
    spec = getattr(getattr(item, "callspec", None), "params", {}).get("subject")
    call = reps.get("call")
    outcome, reason = outcome_of(reps)
    row = {
        "behaviour": b.id,
        "test": item.nodeid,
        "framework": spec.framework if spec else "none",
        "mode": spec.mode if spec else "none",
        "device": spec.device if spec else "cpu",
        "outcome": outcome,
        "observed": {},
        "expected": {},
        "max_rel_err": {},
        "examples": 0,
        "duration_s": round(sum(r.duration for r in reps.values()), 4),
    }
    rec = getattr(item, "_adsem_record", None)
    if rec is not None:
        row.update(rec.row_fields(failed=outcome in ("failed", "error"), error_text=_longrepr(call)))
    call_time = call.duration if call is not None else 0.0
    row["examples_per_s"] = round(row["examples"] / call_time, 2) if row["examples"] and call_time > 0 else None
    if reason:
        row["reason" if outcome == "skipped" else "error"] = reason
    if outcome in ("failed", "error"):
        row["reproducer"] = _reproducer(item, rec, call)
        kinds = getattr(item, "_adsem_failures", {})
        row["failure"] = kinds.get("call") or kinds.get("setup") or kinds.get("teardown") or "unknown"
    return row


def _longrepr(rep) -> str:
    return str(rep.longrepr) if rep is not None and rep.longrepr else ""


def rerun_command(config, nodeid: str) -> str:
    """The command that runs one test again as this run did: its profile and Hypothesis seed
    (a node id is found beside the cases from any directory: ``autodiff-semantics run``
    anchors it there).

    >>> from types import SimpleNamespace
    >>> cfg = SimpleNamespace(getoption=lambda k, default=None: {"profile": "ci", "hypothesis_seed": 7}.get(k))
    >>> rerun_command(cfg, "cases/test_a.py::test_b[tensorflow-xla-cpu]")
    "autodiff-semantics run --profile ci -- 'cases/test_a.py::test_b[tensorflow-xla-cpu]' --hypothesis-seed=7"
    """
    profile = config.getoption("profile", None) or "dev"
    seed = config.getoption("hypothesis_seed", None)
    return f"autodiff-semantics run --profile {profile} -- '{nodeid}'" + (
        f" --hypothesis-seed={seed}" if seed is not None else ""
    )


def _reproducer(item, rec, call) -> str:
    lines = [f"# reproduces {item.nodeid}", f"#   {rerun_command(item.config, item.nodeid)}"]
    fals = _falsifying(call) if call is not None else ""
    if fals:
        lines.append("# falsifying example: " + fals.replace("\n", "\n#   "))
    # the inputs of the example whose error is reported (of several failing @examples,
    # Hypothesis reports one per place of failure; the last one run may pass or differ)
    failing = rec.reported_failure(_longrepr(call)) if rec is not None else None
    inputs = failing["inputs"] if failing is not None else (rec.last_inputs if rec is not None else None)
    if inputs:
        lines += ["import numpy as np", rec.inputs_source(inputs)]
    return "\n".join(lines)


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
        crashed_list(self.config).unlink(missing_ok=True)
        env = frameworks.python_environment()
        env.pop("executable", None)
        # a parallel run's workers measured it (and imported the frameworks); else measure here
        measured = self._worker_environment or measured_environment(self.config)
        env["frameworks"] = measured["frameworks"]
        env["packages"] = measured.get("packages") or {}
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
                self._write({"kind": "declared", "declarations": v})
            elif k == ENVIRONMENT_PROPERTY:
                continue  # in the header (_start)
            else:
                row = json.loads(v)
                self._write({"kind": "row", **row})
                self._progress(row)
        if crashed:
            from suite.supervisor import crashed_row

            print(f"autodiff-semantics: {report.nodeid} crashed its worker; pytest-xdist restarted it", file=sys.stderr)
            self._write({"kind": "row", **crashed_row(report.nodeid, "unknown", str(report.longrepr))})
            # xdist's loadfile scheduler hands the crashed test out again with the rest of its
            # module; the workers read this list and pass over it (RowMaker.pytest_runtest_protocol)
            with open(crashed_list(self.config), "a", encoding="utf-8") as fh:
                fh.write(report.nodeid + "\n")

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
            self.header, rows, footer, streamed.get("deprecations"), streamed["_coverage"], streamed["_declared"]
        )
        stale = [d for d in report.get("declared", []) if d["status"] == "stale"]
        if stale and settings.get_current_profile_name() in STALE_FAILS_IN:
            self.stale = stale
            if session.exitstatus == pytest.ExitCode.OK:
                session.exitstatus = pytest.ExitCode.TESTS_FAILED
                footer["exitstatus"] = int(session.exitstatus)
        schema.write_json(report, self.dir / "latest.json")
        (self.dir / "latest.md").write_text(render.markdown(report), encoding="utf-8")
        from suite.report import html

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
        for line in render.terminal_matrix(report):
            tr.write_line(line)
        tr.write_line("")
        for line in render.speed_lines(report):
            tr.write_line(line)
        tr.write_line(f"report: {self.dir / 'latest.json'} (+ .md, streamed .jsonl)")
