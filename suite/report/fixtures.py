"""The fixtures a case asks for: ``subject`` (the runner under test), ``oracles`` (the
reference runners, memoised per test function), ``record`` (the row's record), and the
per-test release of the frameworks' resources."""

from __future__ import annotations

import pytest

from suite import frameworks, registry
from suite.frameworks import resources
from suite.report.record import Record


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
    fws = [f for f in registry.ORACLES if f in selected and f != subject.framework]
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
