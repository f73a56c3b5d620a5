"""Record everything, then assert (end to end): a row that fails has recorded every key its
failing example observes, so ``diff`` lists every changed key, not the first one; and the
reproducer of a test with several ``@example``s is the example whose error is reported."""

import json

import pytest

from tests.test_end_to_end import run_cli

pytestmark = pytest.mark.slow

PLANTED_DEMO = '''"""Planted demo: one row observes three keys; ADSEM_DEMO_PLANT changes two of them."""
import os

import numpy as np
from hypothesis import given, strategies as st

from suite.behaviours import behaviour, on
from suite.expectations import expectations

BEHAVIOUR = behaviour("planted-demo", sources=[])
EXPECT = expectations({"first": "zero", "second": "one", "third": "two"})
PLANT = os.environ.get("ADSEM_DEMO_PLANT") == "1"


@on("jax")
@given(x=st.sampled_from([np.float32(0), np.float32(1)]))
def test_three_keys(subject, record, x):
    record.example(x=x)
    record.check(EXPECT, first="nan" if PLANT else "zero")
    record.check(EXPECT, second="one")
    record.check(EXPECT, third="inf" if PLANT else "two")
'''

EXAMPLES_DEMO = '''"""Examples demo: three explicit examples, the first and last fail, the middle passes."""
import numpy as np
from hypothesis import example, given, strategies as st

from suite.behaviours import behaviour, on

BEHAVIOUR = behaviour("examples-demo", sources=[])


@on("jax")
@given(x=st.just(np.float32(2)))
@example(x=np.float32(5))
@example(x=np.float32(2))
@example(x=np.float32(7))
def test_explicit_examples(subject, record, x):
    record.example(x=x)
    record.equal(name="x", out=np.float32(x), ref=np.float32(2), oracle="closed-form")
'''

ARGS = ["--frameworks", "jax", "--modes", "eager", "--devices", "cpu", "--profile", "ci"]


def _row(report_dir):
    rows = json.loads((report_dir / "latest.json").read_text())["results"]
    return next(r for r in rows if r["test"].endswith("[jax-eager-cpu]"))


def test_a_planted_change_to_two_keys_of_one_row_shows_both_in_diff(tmp_path):
    cases = tmp_path / "cases"
    cases.mkdir()
    (cases / "test_planted_demo.py").write_text(PLANTED_DEMO)
    run = ["run", "--cases", str(cases), *ARGS, "--report-dir"]
    p = run_cli([*run, str(tmp_path / "old")], tmp_path)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    p = run_cli([*run, str(tmp_path / "new")], tmp_path, env={"ADSEM_DEMO_PLANT": "1"})
    assert p.returncode == 1, p.stdout[-3000:] + p.stderr[-3000:]
    row = _row(tmp_path / "new")
    assert row["outcome"] == "failed" and row["failure"] == "assertion"
    assert row["observed"] == {"first": "nan", "second": "one", "third": "inf"}
    assert "2 mismatches in one example" in row["error"]
    p = run_cli(["diff", str(tmp_path / "old" / "latest.json"), str(tmp_path / "new" / "latest.json")], tmp_path)
    assert p.returncode == 1, p.stdout[-3000:] + p.stderr[-3000:]  # a newly failing row is a regression
    changed = [line for line in p.stdout.splitlines() if line.startswith("| planted-demo ")]
    assert any("| `first` |" in c and "`zero` | `nan`" in c for c in changed), p.stdout
    assert any("| `third` |" in c and "`two` | `inf`" in c for c in changed), p.stdout
    assert not any("| `second` |" in c for c in changed), p.stdout


def test_the_reproducer_of_several_examples_is_the_reported_one(tmp_path):
    """Hypothesis runs every explicit example and reports one failure per place of failure:
    here 5 (run first) and 7 (run last) fail at the same comparison, 2 passes. The reproducer
    must hold the inputs of the example the error names, not the last one run."""
    cases = tmp_path / "cases"
    cases.mkdir()
    (cases / "test_examples_demo.py").write_text(EXAMPLES_DEMO)
    p = run_cli(["run", "--cases", str(cases), *ARGS, "--report-dir", str(tmp_path / "r")], tmp_path)
    assert p.returncode == 1, p.stdout[-3000:] + p.stderr[-3000:]
    row = _row(tmp_path / "r")
    named = [v for v in ("5.", "7.") if f"x[jax-eager-cpu]='{v}'" in row["error"]]
    assert len(named) == 1, row["error"]
    assert f"x = np.float32({named[0]}0)" in row["reproducer"].splitlines(), row["reproducer"]
    # the command runs the test again as this run did (its profile), from any directory
    command = (
        "autodiff-semantics run --profile ci --report-dir reports/repro -- "
        "'cases/test_examples_demo.py::test_explicit_examples[jax-eager-cpu]'"
    )
    assert f"#   {command}" in row["reproducer"].splitlines(), row["reproducer"]
    assert row["observed"] == {}  # the example observed no key; the comparison failed
