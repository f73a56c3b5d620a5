"""The examples in the harness's docstrings are tests too: the progress line, the run context,
the report queries and model, the version rule and the pages' inline Markdown are each shown
by one."""

import doctest
import importlib

import pytest

MODULES = [
    "suite.context",
    "suite.registry",
    "suite.versions",
    "suite.report.writer",
    "suite.report.rows",
    "suite.report.model",
    "suite.report.query",
    "suite.report.schema",
    "suite.report.pages",
    "suite.report.diff",
    "suite.ops",
    "suite.ops.properties",
    "suite.ops.points",
    "suite.ops.error",
    "suite.strategies",
    "suite.cli",
    "suite.out_of_range",
    "suite.interpolation",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_hold(name):
    mod = importlib.import_module(name)
    result = doctest.testmod(mod, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.attempted, f"{name} has no docstring example"
    assert not result.failed, f"{result.failed} of {result.attempted} docstring examples in {name} failed"
