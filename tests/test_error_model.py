"""The op table's error model (issue 47): each element is held to the rounding of its own
computation, the tails are drawn, and a 1% error in tanh's saturated tail fails where the old
array-level floor forgave it."""

import importlib

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from suite import compare as cmp, ops
from suite.ops import error, properties

importlib.import_module("cases.test_elementwise_gradients")
TANH = next(op for op in ops.entries("elementwise-gradients") if op.name == "tanh")
EXP = next(op for op in ops.entries("elementwise-gradients") if op.name == "exp")


def _grad_err(op, x, out, ref, w):
    x, w = np.float32(x), np.float32(w)
    tol = error.tolerance(op)
    scale = error.scales(op, "grad0", (x,), weights=w)
    return cmp.rel_err(out, ref, rtol=tol.of(np.float32), scale=scale, ulps=tol.ulps(np.float32)), tol.of(np.float32)


def test_tanh_in_its_tail_a_one_percent_error_fails_and_rounding_passes():
    """The README's worked example: T = |w| (terms 1 and y^2 of 1 - y^2), 16 ulp of 1 = 1.9e-6, which
    is 1.05% of the gradient at x = 5 and 0.4% at x = 4.5, inside the regime every example draws."""
    x = np.float32([0.5, 4.5])
    w = np.float32([1.0, 1.0])
    true = (1 - np.tanh(x.astype(np.float64)) ** 2).astype(np.float32)
    off = true.copy()
    off[1] *= np.float32(1.01)  # 4.9e-6 absolute
    err, tol = _grad_err(TANH, x, off, true, w)
    assert err > tol
    rounded = true.copy()
    rounded[1] += np.float32(4 * 2.0**-23)  # four units of rounding of 1: within the model
    err, tol = _grad_err(TANH, x, rounded, true, w)
    assert err <= tol
    # the old rule (32 ulp at the inputs' magnitude, GRAD's 2e-5) let the 1% error pass
    assert cmp.rel_err(off, true, rtol=2e-5, scale=4.5) <= 2e-5


def test_a_small_element_beside_large_ones_is_held_relatively():
    """A mixed-magnitude array: 0.1% off in its smallest element fails per element (exp's terms
    are its own magnitude) though the array-level floor at the largest element forgave it."""
    x = np.float32([-20.0, 10.0])
    ref = np.exp(x.astype(np.float64)).astype(np.float32)
    out = ref.copy()
    out[0] *= np.float32(1.001)
    err, tol = _grad_err(EXP, x, out, ref, np.float32([1.0, 1.0]))
    assert err > tol
    assert cmp.rel_err(out, ref, rtol=2e-5) <= 2e-5  # the array-level floor


def test_a_flushed_subnormal_costs_its_cofactor_only_where_the_entry_says():
    silu = next(op for op in ops.entries("elementwise-gradients") if op.name == "silu")
    x = np.float32([-88.0])
    with_cofactor = error.scales(silu, "value", (x,))
    without = error.scales(TANH, "value", (x,))
    assert with_cofactor[0] == pytest.approx(88 * without[0])


def test_mixing_entries_keep_an_array_level_floor():
    softmax = next(op for op in ops.entries("elementwise-gradients") if op.name == "softmax")
    assert error.scales(softmax, "grad0", (np.float32([[1.0, 2.0, 3.0]]),), weights=np.float32([[1, 1, 1]])) is None


def test_entry_ulps_split_derivatives_and_values():
    cosh = next(op for op in ops.entries("elementwise-gradients") if op.name == "cosh")
    assert error.ulps(cosh)["float32"] == 64.0 and error.ulps(cosh, "value")["float32"] == 64.0
    expm1 = next(op for op in ops.entries("elementwise-gradients") if op.name == "expm1")
    assert error.ulps(expm1)["float32"] == error.ULPS["float32"] and error.ulps(expm1, "value")["float32"] == 16.0
    with pytest.raises(ValueError, match="quantity"):
        error.scales(TANH, "hessian", (np.float32([1.0]),))


@settings(max_examples=30, deadline=None, database=None)
@given(data=st.data())
def test_every_drawn_example_puts_an_element_in_each_regime(data):
    args, w, tangents, v = data.draw(properties.operands(TANH))
    x = np.asarray(args[0]).ravel()
    regimes = ops.regime_values(TANH, x.dtype.name)
    if x.size == 1:  # a scalar takes one regime
        assert any(lo <= x[0] <= hi for _, lo, hi in regimes)
        return
    for k, (name, lo, hi) in enumerate(regimes[: x.size]):
        assert lo <= x[k] <= hi, (name, x)
        assert np.asarray(w).ravel()[k] != 0 and np.asarray(v).ravel()[k] != 0


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_anchors_reach_each_regime(dtype):
    args, *_ = properties.anchored(TANH, dtype)
    x = np.asarray(args[0], np.float64).ravel()
    for name, lo, hi in ops.regime_values(TANH, dtype)[: x.size]:
        assert np.any((x >= lo) & (x <= hi)), name


def test_regime_grid_spans_domain_and_regimes():
    grid = ops.regime_grid(TANH, "float32", 400)
    assert grid.min() == -20.0 and grid.max() == 20.0
    assert np.sum((grid > 4.1) & (grid < 5.0)) >= 50


def test_headroom_names_an_unknown_entry(capsys):
    from suite.ops import headroom

    with pytest.raises(SystemExit) as e:
        headroom.main(["--ops", "tanhh"])
    assert e.value.code == 2
    assert "no elementwise entry named tanhh" in capsys.readouterr().err


def test_headroom_combines_environments_and_refuses_what_it_cannot_compare(tmp_path, capsys):
    """A tolerance is judged against the largest error any environment saw; a file that is no
    table, or tables measured at different tolerances, are refused with the file named."""
    import json

    from suite.ops import headroom

    def table(path, observed, tol=16.0):
        row = {"behaviour": "b", "op": "tanh", "dtype": "float32", "quantity": "grad0", "tolerance": tol,
               "observed": observed, "subject": "tensorflow-eager-cpu", "oracle": "jax-jit-cpu",
               "at": [4.5], "out": 5e-4, "ref": 5e-4}  # fmt: skip
        path.write_text(json.dumps({"environment": {}, "rows": [row]}))
        return str(path)

    a, b = table(tmp_path / "tf-2.12.1.json", 0.5), table(tmp_path / "tf-2.21.0.json", 20.0)
    out = tmp_path / "all.json"
    assert headroom.main(["--combine", a, b, "-o", str(out)]) == 1  # 20 units against 16: exceeded
    (row,) = json.loads(out.read_text())["rows"]
    assert (row["env"], row["envs"], row["verdict"]) == ("tf-2.21.0", 2, "exceeded")
    assert headroom.main(["--combine", a]) == 0 and "slack" in capsys.readouterr().out
    (tmp_path / "bad.json").write_text("[1, 2")
    other = table(tmp_path / "other.json", 1.0, tol=8.0)
    for args, message in (
        ([str(tmp_path / "bad.json")], "bad.json: not a headroom table"),
        ([a, other], "measure both at one suite revision"),
    ):
        with pytest.raises(SystemExit) as e:
            headroom.main(["--combine", *args])
        assert e.value.code == 2 and message in capsys.readouterr().err


def test_the_report_tabulates_observed_error_beside_the_tolerance():
    from suite.report import model, query

    errors = {"float32": {"jax": [5.0, 16.0], "torch": [0.5, 16.0]}, "float64": {"jax": [0.0, 32.0]}}
    row = {"behaviour": "elementwise-gradients", "framework": "tensorflow", "mode": "xla", "device": "cpu",
           "test": "cases/test_elementwise_gradients.py::test_op_reverse_mode[tensorflow-xla-cpu-tanh]",
           "errors": errors}  # fmt: skip
    other = {**row, "test": "cases/test_tape_mechanics.py::test_x[tensorflow-xla-cpu]"}
    entries = query.headroom({"results": [row, other]})
    assert [(e["op"], e["dtype"], e["oracle"], e["verdict"]) for e in entries] == [
        ("tanh", "float32", "jax", "ok"),
        ("tanh", "float32", "torch", "slack"),
        ("tanh", "float64", "jax", "exact"),
    ]
    by_op = query.headroom_by_op(entries)
    assert [(e["dtype"], e["headroom"], e["slack"]) for e in by_op] == [("float32", 3.2, 1), ("float64", None, 0)]
    assert model._headroom({"results": [row]})["slack"] == query.SLACK


def test_a_record_keeps_the_model_comparison_nearest_its_tolerance():
    from suite.report.record import Record

    class Subject:
        id = "tensorflow-eager-cpu"

    record = Record(Subject())
    tol = error.tolerance(TANH)
    ref = np.float32([1.0, 2.0])
    record.close(name="grad0", out=ref * np.float32(1 + 2**-22), ref=ref, oracle="jax-jit-cpu", tol=tol)
    record.close(name="grad0", out=ref, ref=ref, oracle="torch-eager-cpu", tol=cmp.GRAD)  # not the model's
    assert record.row_fields()["errors"] == {"float32": {"jax": [pytest.approx(2.0), 16.0]}}


def test_array_headroom_names_each_behaviours_floor():
    from suite.report import model, query

    row = {"behaviour": "loss-gradients", "framework": "tensorflow", "mode": "eager", "device": "cpu",
           "outcome": "passed", "test": "cases/test_loss_gradients.py::test_x[tensorflow-eager-cpu]",
           "array_errors": {"float32": {"numpy": [2.0, 168.0]}}}  # fmt: skip
    why = {"kind": "array", "why": "a loss sums over its batch"}
    report = {"results": [row], "floors": {"loss-gradients": why}}
    (line,) = query.array_headroom(report)
    assert (line["floor"], line["headroom"], line["slack"]) == ("array", 84.0, 1)
    assert model._headroom(report)["floors"] == {"loss-gradients": why}
    assert query.array_headroom({"results": [row]})[0]["floor"] is None  # a report from before floors


def test_every_behaviour_states_how_its_comparisons_are_floored():
    """Issue 47: each behaviour judged its float comparisons (elementwise: per element; mixing: an
    array-level floor) and said why, in its module's ``behaviour(..., floor=Floor(kind, why))``."""
    from suite import behaviours as bh

    found = bh.discover()
    assert [b for b, x in found.items() if x.floor is None] == []
    assert all(len(x.floor.why) > 40 for x in found.values()), "a reason, not a word"
