"""Hooks only: options, markers, profiles, report header, parametrisation.

Fixtures and the report writer live in ``suite.report.plugin``.
"""
from __future__ import annotations

import pytest

from suite import frameworks

pytest_plugins = ["suite.report.plugin"]


def _csv(value: str, known, what: str) -> list[str]:
    items = [v.strip() for v in value.split(",") if v.strip()]
    bad = [v for v in items if v not in known]
    if bad or not items:
        raise pytest.UsageError(f"--{what}: unknown value(s) {bad or [value]}; choose from {', '.join(known)}")
    return items


def pytest_addoption(parser):
    g = parser.getgroup("autodiff-semantics", "autodiff-semantics")
    g.addoption("--frameworks", default=",".join(("tensorflow", "jax", "torch")),
                help="comma-separated frameworks to run as subjects/oracles (default: tensorflow,jax,torch; "
                     "a framework that is not installed gives skipped rows)")
    g.addoption("--modes", default=",".join(frameworks.MODES["tensorflow"]),
                help="comma-separated TensorFlow modes (default: eager,function,xla,graph)")
    g.addoption("--devices", default="cpu,gpu",
                help="comma-separated devices (default: cpu,gpu; gpu rows are skipped when no GPU is visible)")
    g.addoption("--profile", default="dev", help="Hypothesis profile: dev, ci (derandomized) or thorough (default: dev)")
    g.addoption("--report-dir", default="reports", help="where latest.json/.jsonl/.md go (default: reports)")
    g.addoption("--report-append", action="store_true",
                help="append to latest.jsonl instead of starting it afresh (used when a crashed run resumes)")


def pytest_configure(config):
    from hypothesis import settings

    from suite.report import plugin

    config.option.frameworks = _csv(config.getoption("frameworks"), frameworks.FRAMEWORKS, "frameworks")
    config.option.modes = _csv(config.getoption("modes"), frameworks.MODES["tensorflow"], "modes")
    config.option.devices = _csv(config.getoption("devices"), frameworks.DEVICES, "devices")
    profile = config.getoption("profile")
    if profile not in plugin.PROFILES:
        raise pytest.UsageError(f"--profile: unknown profile {profile!r}; choose from {', '.join(plugin.PROFILES)}")
    if profile == "ci" and config.getoption("hypothesis_seed", None) is not None:
        # ci is derandomized; an explicit --hypothesis-seed asks for that seed instead
        settings.register_profile("ci-seeded", parent=settings.get_profile("ci"), derandomize=False)
        profile = "ci-seeded"
    settings.load_profile(profile)
    if not hasattr(config, "workerinput"):
        from suite.report.files import ReportDirError, check_report_dir

        try:  # before any test starts: a run that cannot write its report must not run
            check_report_dir(config.getoption("report_dir"))
        except ReportDirError as e:
            raise pytest.UsageError(str(e)) from None
    config.addinivalue_line("markers", "gpu: a row that needs a visible GPU")
    if not hasattr(config, "workerinput"):
        config._adsem_writer = plugin.ReportWriter(config)
        config.pluginmanager.register(config._adsem_writer, "adsem-report")


@pytest.hookimpl(hookwrapper=True)
def pytest_pyfunc_call(pyfuncitem):
    """JAX and PyTorch subject rows get the profile's reference budget (suite.report.plugin)."""
    from suite.report import plugin

    with plugin.example_budget(pyfuncitem):
        yield


def pytest_report_header(config):
    lines = []
    for name, info in frameworks.environment().items():
        if info.get("version"):
            lines.append(f"{name} {info['version']} devices={','.join(info['devices'])}")
        else:
            lines.append(f"{name}: {info.get('error')}")
    from hypothesis import settings

    from suite.report import plugin

    ref = plugin.REFERENCE_SUBJECT_EXAMPLES.get(settings.get_current_profile_name())
    lines.append(f"hypothesis profile={config.getoption('profile')} max_examples={settings().max_examples}"
                 + (f" (JAX and PyTorch subjects: {ref})" if ref else ""))
    return lines


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
