"""The op table: an entry added by a file is tested in every TensorFlow mode and by both
oracles, by the generic properties, with its special point's declarations asserted."""

import collections
import importlib
import json
import pathlib

import pytest

from suite import ops
from suite.ops import db
from tests.test_end_to_end import run_cli

pytestmark = pytest.mark.slow

DEMO = '''"""Demo ops: an op-table entry added by a test file."""

import numpy as np

from suite import ops
from suite.behaviours import behaviour
from suite.expectations import expect
from suite.ops import properties

BEHAVIOUR = behaviour("demo-ops", sources=[])

ops.register(
    ops.Op(
        "maximum",
        behaviour="demo-ops",
        arity=2,
        tensorflow=lambda tf, x, y: tf.maximum(x, y),
        jax=lambda jax, x, y: jax.numpy.maximum(x, y),
        torch=lambda torch, x, y: torch.maximum(x, y),
        reference=np.maximum,
        excluded=lambda x, y, margin: np.abs(x - y) <= margin,
        points=(ops.Point("tie", (1.0, 1.0), "1"),),
        declared=(
            expect("grad[maximum@tie]", JAX_TIE, framework="jax", reason="JAX splits a tie",
                   link="https://github.com/jax-ml/jax/pull/2342"),
            expect("grad[maximum@tie]", "0.5", framework="torch", reason="PyTorch splits a tie",
                   link="https://github.com/pytorch/pytorch/issues/56734"),
        ),
    )
)
properties.bind(globals(), "demo-ops")
'''

SUBJECTS = {
    "tensorflow-eager-cpu",
    "tensorflow-function-cpu",
    "tensorflow-xla-cpu",
    "tensorflow-graph-cpu",
    "jax-eager-cpu",
    "jax-jit-cpu",
    "torch-eager-cpu",
}


def _run(tmp_path, jax_tie):
    cases = tmp_path / "cases"
    cases.mkdir()
    (cases / "test_demo_ops.py").write_text(DEMO.replace("JAX_TIE", repr(jax_tie)))
    out = tmp_path / "out"
    p = run_cli(
        ["run", "--cases", str(cases), "--profile", "ci", "--devices", "cpu", "--report-dir", str(out)], tmp_path
    )
    return p, json.loads((out / "latest.json").read_text())


def test_an_entry_is_rows_of_its_behaviour_in_every_mode_and_both_oracles(tmp_path):
    p, report = _run(tmp_path, "0.5")
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-2000:]
    rows = report["results"]
    by_test = {}
    for r in rows:
        assert r["behaviour"] == "demo-ops" and r["outcome"] == "passed", r["test"]
        by_test.setdefault(r["test"].split("::")[1].split("[")[0], set()).add(f"{r['framework']}-{r['mode']}-cpu")
    assert by_test == {t: SUBJECTS for t in ("test_op_reverse_mode", "test_op_forward_mode",
                                             "test_op_second_order", "test_op_special_points")}  # fmt: skip
    reverse = [r for r in rows if "reverse_mode[tensorflow-xla" in r["test"]][0]
    assert set(reverse["max_rel_err"]) == {"jax", "torch", "finite-difference", "numpy"}
    ties = {
        r["framework"] + "-" + r["mode"]: r["observed"]["grad[maximum@tie]"] for r in rows if "special" in r["test"]
    }
    assert ties["tensorflow-graph"] == "1" and ties["jax-jit"] == ties["torch-eager"] == "0.5"
    assert {(d["framework"], d["status"]) for d in report["declared"]} == {("jax", "matched"), ("torch", "matched")}


def test_a_wrong_declaration_at_a_special_point_fails_its_rows(tmp_path):
    p, report = _run(tmp_path, "1")
    assert p.returncode == 1
    failed = {r["test"].split("::")[1] for r in report["results"] if r["outcome"] == "failed"}
    assert failed == {"test_op_special_points[jax-eager-cpu-maximum]", "test_op_special_points[jax-jit-cpu-maximum]"}


#: Entries of the same name in two behaviours that are different ops: masked-nan's x**0.5 is the
#: operator as written (each framework picks its kernel), singular-point's is pow(x, 0.5)
SPELLED_APART = {"x**0.5"}


def test_an_op_in_several_behaviours_is_spelled_once_in_the_op_database():
    """Every op the case modules enter in more than one behaviour takes its spellings and
    reference from suite/ops/db.py (ops.view), so 'log' is one fact, not three copies."""
    ours = set()
    for path in sorted(pathlib.Path("cases").glob("test_*.py")):
        importlib.import_module(f"cases.{path.stem}")
        ours.add(path.stem.removeprefix("test_").replace("_", "-"))
    behaviours = collections.defaultdict(set)
    for behaviour, name in ops._TABLE:  # the case modules' entries (doctests register demo ones)
        if behaviour in ours:
            behaviours[name].add(behaviour)
    shared = {name for name, bs in behaviours.items() if len(bs) > 1} - SPELLED_APART
    assert shared and shared <= set(db.names()), sorted(shared - set(db.names()))
    for name in shared:
        fact = db.fact(name)
        for behaviour in behaviours[name]:
            entry = ops._TABLE[(behaviour, name)]
            assert entry.reference is fact.reference, (behaviour, name)
            assert all(getattr(entry, fw) is s for fw, s in fact.spellings.items()), (behaviour, name)
