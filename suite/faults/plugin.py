"""The fault catalogue's pytest plugin: ``-p suite.faults.plugin --fault NAME``.

The only way a fault enters a run (the self-check, ``autodiff-semantics faults``, passes
it). It patches TensorFlow right after it is imported and puts the faults in the report
header (``environment.faults``), where the report writer sees them: a run under a fault
is a self-check, not a measurement, so versioned reports and baselines refuse it.
"""

from __future__ import annotations

import pytest

from suite import faults, frameworks


def pytest_addoption(parser):
    parser.getgroup("autodiff-semantics").addoption(
        "--fault",
        action="append",
        default=[],
        metavar="NAME",
        help="inject this fault from suite.faults (repeatable; self-checks only)",
    )


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config):
    names = config.getoption("fault")
    try:
        hook = faults.applier(names)
    except KeyError as e:
        raise pytest.UsageError(str(e.args[0])) from None
    config._adsem_faults = list(names)  # the report writer puts them in the header
    if names:
        frameworks.on_load(hook)
