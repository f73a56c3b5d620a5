"""Self-tests of suite.compare: the error measure and the one message form."""

import numpy as np
import pytest
from hypothesis import given

from suite import compare as cmp, strategies as ss


def test_rel_err_is_relative_above_one_and_absolute_below():
    assert cmp.rel_err([100.0], [101.0]) == pytest.approx(1 / 101)
    assert cmp.rel_err([0.0], [1e-3]) == pytest.approx(1e-3)


def test_rel_err_shape_mismatch_and_nan_disagreement_are_infinite():
    assert cmp.rel_err([1.0, 2.0], [1.0]) == float("inf")
    assert cmp.rel_err([np.nan], [1.0]) == float("inf")
    assert cmp.rel_err([np.nan, np.inf], [np.nan, np.inf]) == 0.0


def test_assert_close_message_form():
    with pytest.raises(AssertionError) as e:
        cmp.assert_close(
            name="grad",
            out=np.array([1.0, 0.0], np.float32),
            ref=np.array([1.0, 1.0], np.float32),
            who="tensorflow-xla-cpu",
            oracle="jax-jit-cpu",
            tol=cmp.GRAD,
        )
    assert (
        str(e.value) == "grad[tensorflow-xla-cpu]=[1. 0.] but jax-jit-cpu gives [1. 1.] (max rel err 1.0e+00 > 2e-05)"
    )


def test_none_only_meets_none():
    assert cmp.assert_close(name="g", out=None, ref=None, who="a", oracle="b", tol=cmp.GRAD) == 0.0
    with pytest.raises(AssertionError, match="None vs array"):
        cmp.assert_close(name="g", out=None, ref=np.zeros(2), who="a", oracle="b", tol=cmp.GRAD)


def test_tolerance_is_per_dtype_and_exact_for_integers():
    tol = cmp.tolerance(float32=1e-3)
    assert tol.of(np.float32) == 1e-3 and tol.of(np.float64) == cmp.GRAD_TOL[np.dtype(np.float64)]
    assert tol.of(np.int32) == 0.0


@given(x=ss.float_arrays())
def test_rel_err_of_an_array_with_itself_is_zero(x):
    assert cmp.rel_err(x, x.copy()) == 0.0


def test_gradient_kind_vocabulary():
    assert [cmp.gradient_kind(g) for g in (None, np.zeros(3), np.array([0.0, 1.0]))] == ["none", "zeros", "nonzero"]
