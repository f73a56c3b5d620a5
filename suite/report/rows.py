"""Rows, built where the cases run (a serial run's pytest, every pytest-xdist worker): the
outcome of a test from its phase reports, its record's fields, the reproducer, and the
properties a row travels on to the process that writes the report."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import signal

import pytest

from suite import behaviours as bh, context, frameworks, options
from suite.expectations import all_declared
from suite.report import deprecations
from suite.report.query import behaviour_of_module
from suite.report.record import Record
from suite.report.schema import Row

#: The error lines a row keeps: every line of one example's mismatches (issue 49: six cut them
#: after "4 mismatches in one example:"), bounded for a failure that prints a whole array.
ERROR_LINES = 60


def _short_error(rep) -> str:
    r"""The assertion's message (pytest's ``E`` lines), every mismatch of the example included.

    >>> from types import SimpleNamespace
    >>> text = "x\nE   AssertionError: 4 mismatches in one example:\n" + "".join(f"E     m{i}\n" for i in range(8))
    >>> _short_error(SimpleNamespace(longrepr=text)).splitlines()[-1]
    'm7'
    """
    text = str(rep.longrepr) if rep.longrepr else ""
    m = re.findall(r"^E\s+(.*)$", text, flags=re.M)
    if m:
        more = [f"... ({len(m) - ERROR_LINES} more lines)"] if len(m) > ERROR_LINES else []
        return "\n".join(m[:ERROR_LINES] + more)
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
    return behaviour_of_module(name.removesuffix(".py"))


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


#: The names under which a case's row and the deprecations TensorFlow logged during it
#: travel on pytest's own teardown report (``user_properties``): from the process that ran
#: the case (a serial run's pytest, or a pytest-xdist worker) to the one writing the report.
ROW_PROPERTY = "autodiff_semantics_row"
DEPRECATIONS_PROPERTY = "autodiff_semantics_deprecations"
#: The declared divergences of the case modules a process imported, and their behaviours'
#: floors, sent once with its first row: the report's declaration statuses need them where no
#: case module was imported (the pytest-xdist controller).
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
        self._environment: str | None = None

    def pytest_collection_finish(self, session):
        """A pytest-xdist worker measures its environment, and so imports the frameworks, before
        its first test, as a serial run's report does when it starts (``ReportWriter._start``).
        What a framework warns while it is imported is then no behaviour's: measured at the
        first row's teardown instead, TensorFlow 2.12-2.17's import-time deprecations (its lite
        module calling ``jax.xla_computation``, Python's ``sre_constants``, ml_dtypes'
        ``float8_e4m3b11``) were recorded under whichever behaviour each worker ran first, so a
        report's deprecations depended on the number of workers and the schedule."""
        if context.of(self.config).role == "worker" and any(
            getattr(getattr(i, "module", None), "BEHAVIOUR", None) for i in session.items
        ):
            self._environment = environment_payload(self.config)

    def pytest_runtest_logstart(self, nodeid, location):
        deprecations.start_test(nodeid)

    def pytest_deselected(self, items):
        out = getattr(self.config, "workeroutput", None) if context.of(self.config).role == "worker" else None
        if out is not None:  # a worker: the controller learns what was deselected when it ends
            found = out.setdefault(DESELECTED_OUTPUT, [])
            found += [[i.nodeid, b.id] for i in items if (b := getattr(getattr(i, "module", None), "BEHAVIOUR", None))]

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
                    self._declared_sent = True
                    declared = {"declarations": [e.as_dict() for e in all_declared()], "floors": bh.floors()}
                    rep.user_properties.append((DECLARED_PROPERTY, declared))
                    if context.of(self.config).role == "worker":
                        env = self._environment or environment_payload(self.config)
                        rep.user_properties.append((ENVIRONMENT_PROPERTY, env))
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
        # the shared caches compiled programs were loaded from (a warm run's timings are not a cold one's)
        "compile_caches": {"jax": frameworks.compile_cache_used(), "tensorflow-xla": frameworks.tf_xla_cache_used()},
        "missing": frameworks.missing(frameworks=config.getoption("frameworks"), devices=config.getoption("devices")),
    }


def environment_payload(config) -> str:
    """:func:`measured_environment` as JSON: execnet carries plain types only (PyTorch's
    version is a ``TorchVersion``, which it refuses, and the worker dies of it)."""
    return json.dumps(measured_environment(config), default=str)


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
    row = Row(
        behaviour=b.id,
        test=item.nodeid,
        framework=spec.framework if spec else "none",
        mode=spec.mode if spec else "none",
        device=spec.device if spec else "cpu",
        outcome=outcome,
        duration_s=round(sum(r.duration for r in reps.values()), 4),
    )
    rec = getattr(item, "_adsem_record", None)
    if rec is not None:
        row = dataclasses.replace(
            row, **rec.row_fields(failed=outcome in ("failed", "error"), error_text=_longrepr(call))
        )
    call_time = call.duration if call is not None else 0.0
    row.examples_per_s = round(row.examples / call_time, 2) if row.examples and call_time > 0 else None
    if reason:
        setattr(row, "reason" if outcome == "skipped" else "error", reason)
    if outcome in ("failed", "error"):
        row.reproducer = _reproducer(item, rec, call)
        kinds = getattr(item, "_adsem_failures", {})
        row.failure = kinds.get("call") or kinds.get("setup") or kinds.get("teardown") or "unknown"
    return row.as_dict()


def _longrepr(rep) -> str:
    return str(rep.longrepr) if rep is not None and rep.longrepr else ""


def rerun_command(config, nodeid: str, environ=os.environ) -> str:
    """The command that runs one test again as this run did: its profile, Hypothesis seed and the
    other pytest arguments the run was given (a node id is found beside the cases from any
    directory: ``autodiff-semantics run`` anchors it there), writing its report to
    ``reports/repro`` so the run it came from keeps its own.

    >>> from types import SimpleNamespace
    >>> cfg = SimpleNamespace(getoption=lambda k, default=None: {"profile": "ci", "hypothesis_seed": 7}.get(k))
    >>> print(rerun_command(cfg, "cases/test_a.py::t[cpu]", {options.RERUN_ARGS_ENV: "-x"}))
    autodiff-semantics run --profile ci --report-dir reports/repro -- 'cases/test_a.py::t[cpu]' -x --hypothesis-seed=7
    """
    profile = config.getoption("profile", None) or "dev"
    seed = config.getoption("hypothesis_seed", None)
    extra = environ.get(options.RERUN_ARGS_ENV, "").strip()
    return (
        f"autodiff-semantics run --profile {profile} --report-dir {options.REPRO_REPORT_DIR} -- '{nodeid}'"
        + (f" {extra}" if extra else "")
        + (f" --hypothesis-seed={seed}" if seed is not None else "")
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
