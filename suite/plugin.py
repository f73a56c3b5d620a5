"""The pytest plugin: options, Hypothesis profiles, the report header, parametrisation.

Loaded by ``autodiff-semantics run`` (``-p suite.plugin``), by the ``pytest11`` entry point
of the installed package (so ``pytest --pyargs cases`` works from any directory) and by a
checkout's ``conftest.py``. Fixtures and the report writer live in
``suite.report.plugin``; the options are the table in ``suite.options``.

In a session that collects no case module (somebody else's tests in the same
environment) the plugin changes nothing: no Hypothesis profile is loaded unless
``--profile`` is given, and no report is written.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from suite import behaviours, context, frameworks, options, registry, strategies as ss
from suite.behaviours import DECLARED_SKIP
from suite.frameworks import resources
from suite.report import deprecations, plugin
from suite.report.files import ReportDirError, check_report_dir
from suite.report.plugin import (  # noqa: F401 - fixtures are found in the plugin's namespace
    _framework_resources,
    oracles,
    record,
    subject,
)


def pytest_addoption(parser):
    g = parser.getgroup("autodiff-semantics", "autodiff-semantics")
    options.add_to_pytest(g)
    g.addoption(
        "--report-append",
        action="store_true",
        help="append to latest.jsonl instead of starting it afresh (used when a crashed run resumes)",
    )


def targets_cases(config) -> bool:
    """Does this session run case modules (``cases/``, ``--pyargs cases``, or a parent of it)?"""
    try:
        cases = behaviours.default_cases_dir().resolve()
    except OSError:
        return False
    for arg in config.args:
        target = arg.split("::", 1)[0]
        if target == "cases" or target.startswith("cases."):
            return True
        p = (Path(config.invocation_params.dir) / target).resolve()
        if p == cases or p in cases.parents or cases in p.parents:
            return True
    return False


def pytest_configure(config):
    from hypothesis import settings

    try:
        for name in ("frameworks", "modes", "devices", "allow_missing"):
            opt = next(o for o in options.RUN_OPTIONS if o.dest == name)
            setattr(config.option, name, opt.parse(config.getoption(name)))
        profile = next(o for o in options.RUN_OPTIONS if o.dest == "profile").parse(config.getoption("profile"))
    except options.BadValue as e:
        raise pytest.UsageError(str(e)) from None
    config.addinivalue_line("markers", "gpu: a row that needs a visible GPU")
    config.addinivalue_line("markers", "behaviour(id): the behaviour a case module checks")
    cases = targets_cases(config)
    explicit = any(a == "--profile" or a.startswith("--profile=") for a in config.invocation_params.args)
    if cases or explicit:
        plugin.register_profiles()
        plugin.pin_constant_pool()  # the same examples in any selection, worker or shard

        # one input signature per dtype where the profile says so (issue 46: first calls cost a row most)
        ss.use_signatures("largest" if profile in options.ONE_SIGNATURE_PER_DTYPE else "all")
        if profile in ("quick", "ci") and config.getoption("hypothesis_seed", None) is not None:
            # quick and ci are derandomized; an explicit --hypothesis-seed asks for that seed instead
            settings.register_profile(f"{profile}-seeded", parent=settings.get_profile(profile), derandomize=False)
            profile = f"{profile}-seeded"
        settings.load_profile(profile)
    # TensorFlow's deprecations are collected per behaviour from its import on (in each worker too)
    frameworks.on_load(deprecations.on_load)
    # rows are built where the cases run: here, or in each pytest-xdist worker (run --jobs N)
    config.pluginmanager.register(plugin.RowMaker(config), "adsem-rows")
    ctx = context.of(config)
    if not ctx.writes_report:  # a pytest-xdist worker: the controller writes the report
        pin_worker(config.workerinput)
        return
    if cases:
        try:  # before any test starts: a run that cannot write its report must not run
            check_report_dir(config.getoption("report_dir"))
        except ReportDirError as e:
            raise pytest.UsageError(str(e)) from None
    config._adsem_writer = plugin.ReportWriter(config)
    config.pluginmanager.register(config._adsem_writer, "adsem-report")


def pin_worker(workerinput: dict) -> list[int] | None:
    """A pytest-xdist worker keeps to its own share of this process's CPUs (worker i of n gets
    every n-th from the i-th), set before the frameworks are imported and size their thread pools. Left to
    the scheduler, the workers' thread pools (TensorFlow's, XLA's, OpenMP's) spill onto the
    other workers' cores: two runs of one case module side by side on two cores took 38.6-41.1 s
    of test time each unpinned, 36.6-37.8 s pinned one to a core, and 35.6 s alone (measured).
    Not where there are more workers than CPUs, nor where the platform cannot pin; returns the
    CPUs kept, or None."""
    import os

    n = int(workerinput.get("workercount") or 0)
    if not hasattr(os, "sched_setaffinity") or n < 1:
        return None
    cpus = sorted(os.sched_getaffinity(0))
    if n > len(cpus):
        return None
    # a restarted worker (gw2 of 2) takes slot 2 mod 2, perhaps a live worker's: slower, not wrong
    i = int(str(workerinput.get("workerid", "gw0"))[2:] or 0) % n
    mine = cpus[i::n]
    for tid in os.listdir("/proc/self/task") if os.path.isdir("/proc/self/task") else [0]:
        try:  # every thread started so far (an affinity is per thread); later ones inherit it
            os.sched_setaffinity(int(tid), mine)
        except OSError:
            pass
    return mine


@pytest.hookimpl(optionalhook=True, tryfirst=True)  # before xdist's own
def pytest_xdist_make_scheduler(config, log):
    """``run --jobs N`` distributes by module with :class:`suite.scheduling.CrashSafeLoadFile`: a
    case that kills its worker is not run again and does not strand the rest of the run."""
    if config.getvalue("dist") != "loadfile":
        return None
    from suite import scheduling  # imports pytest-xdist, which only a parallel run has

    return scheduling.CrashSafeLoadFile(config, log)


_EXIT_STATUS = pytest.StashKey[int]()


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session, exitstatus):
    session.config.stash[_EXIT_STATUS] = int(session.exitstatus)  # as the report writer left it


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config):
    """Before the interpreter shuts down: close what is still open and collect the reference
    cycles that may hold tf.data iterators, so ``Py_FinalizeEx`` has nothing to wait for.
    Under the CLI's supervisor (:data:`suite.options.FAST_EXIT_ENV`), end the process without
    the frameworks' teardown (TensorFlow's, JAX's and PyTorch's exit handlers and module
    finalisation take seconds): the supervised pytest with the session's status as the first
    exit handler, after pytest has restored its output; an xdist worker at once, as the last
    unconfigure hook, since xdist's ``workerfinished`` (its results and status) has been sent
    in ``pytest_sessionfinish`` and the controller would otherwise wait for each worker's
    interpreter to finish before it can end."""
    import atexit
    import gc
    import os
    import sys

    resources.release()
    gc.collect()
    status = config.stash.get(_EXIT_STATUS, None)
    if status is None or not os.environ.get(options.FAST_EXIT_ENV):
        return

    def end_now():
        frameworks.remove_own_cache()  # os._exit runs no exit handler
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(status)

    if hasattr(config, "workerinput"):
        end_now()
    atexit.register(end_now)  # registered last, so it runs first


def pytest_runtest_teardown(item):
    """A failed TensorFlow trace's global state must not reach the next test
    (:func:`suite.frameworks.restore_tf_variable_scope`)."""
    frameworks.restore_tf_variable_scope()


@pytest.hookimpl(wrapper=True)
def pytest_pyfunc_call(pyfuncitem):
    """A case test that returns having compared nothing fails (it would otherwise pass green
    with its oracles absent, for example under ``--frameworks tensorflow``)."""
    result = yield
    rec = getattr(pyfuncitem, "_adsem_record", None)
    if rec is not None and rec.compared == 0:
        absent = _allowed_missing_oracles(pyfuncitem)
        if absent:  # the user said these may be missing: the row did not run, it did not pass
            pytest.skip(
                f"{DECLARED_SKIP}compared nothing: its oracle(s) {', '.join(absent)} are not installed "
                f"(--allow-missing {','.join(absent)})"
            )
        raise AssertionError(
            f"compared nothing: {pyfuncitem.nodeid} ran {rec.examples} example(s) and checked no closed form, "
            "finite difference, oracle or declared expectation (are its oracles deselected or not installed?)"
        )
    return result


def _allowed_missing_oracles(item) -> list[str]:
    """The oracle frameworks this row asked for that are not installed, when ``--allow-missing``
    names every one of them (else [])."""
    framework = getattr(getattr(getattr(item, "callspec", None), "params", {}).get("subject"), "framework", None)
    selected = item.config.getoption("frameworks") or ()
    env = frameworks.environment()
    absent = [f for f in registry.ORACLES if f in selected and f != framework and not env.get(f, {}).get("version")]
    allowed = set(item.config.getoption("allow_missing") or ())
    return absent if absent and set(absent) <= allowed else []


def pytest_report_header(config):
    if not targets_cases(config):
        return []
    lines = []
    if context.of(config).role == "controller":
        # the pytest-xdist controller runs no case: the workers import the frameworks and the
        # report's header gets their versions (importing them here delays every worker's start)
        lines.append("frameworks: imported by the pytest-xdist workers (versions in the report header)")
    else:
        for name, info in frameworks.environment().items():
            if info.get("version"):
                lines.append(f"{name} {info['version']} devices={','.join(info['devices'])}")
            else:
                lines.append(f"{name}: {info.get('error')}")
        if "jax" in frameworks.environment():
            lines.append(f"jax compilation cache: {frameworks.compile_cache_used()}")
        if "tensorflow" in frameworks.environment():
            lines.append(f"tensorflow xla cache: {frameworks.tf_xla_cache_used()}")
    from hypothesis import settings

    lines.append(f"hypothesis profile={settings.get_current_profile_name()} max_examples={settings().max_examples}")
    return lines


def pytest_collection_modifyitems(config, items):
    """A test restricted to frameworks (``@on``) of which ``--frameworks`` selects none has no
    subject: pytest keeps it as one item skipped for an empty parameter set, a row of no
    framework that is no case of this run. It is left out, as the rows of the frameworks not
    selected are (not deselected: its behaviour still runs whole for the frameworks chosen)."""
    items[:] = [i for i in items if not _without_subject(i)]


def _without_subject(item) -> bool:
    params = getattr(getattr(item, "callspec", None), "params", {})
    return "subject" in params and not isinstance(params["subject"], frameworks.Spec)


def pytest_generate_tests(metafunc):
    if "subject" not in metafunc.fixturenames:
        return
    b = getattr(metafunc.module, "BEHAVIOUR", None)
    cfg = metafunc.config
    only = getattr(metafunc.function, "tf_modes", None)
    modes = [m for m in cfg.getoption("modes") if (b is None or m in b.modes) and (only is None or m in only)]
    wanted = getattr(metafunc.function, "frameworks", None)  # @on("tensorflow") restricts a test
    fws = [f for f in cfg.getoption("frameworks") if wanted is None or f in wanted]
    params = []
    for spec in frameworks.specs(frameworks=fws, modes=modes, devices=cfg.getoption("devices")):
        marks = [pytest.mark.gpu] if spec.device == "gpu" else []
        params.append(pytest.param(spec, id=spec.id, marks=marks))
    metafunc.parametrize("subject", params, indirect=True)
