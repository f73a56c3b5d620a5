"""Self-tests of suite.compare: the error measure and the one message form."""

import numpy as np
import pytest
from hypothesis import given

from suite import compare as cmp, strategies as ss


def test_rel_err_is_relative_per_element_with_a_floor_at_the_arrays_magnitude():
    assert cmp.rel_err([100.0], [101.0]) == pytest.approx(1 / 101)
    # a reference below 1 is compared relatively: a tiny gradient zeroed is a 100% error
    assert cmp.rel_err(np.float32([0.0]), np.float32([1e-5]), rtol=2e-5) == pytest.approx(1.0)
    assert cmp.rel_err(np.float32([1.0, 0.0]), np.float32([1.0, 1e-5]), rtol=2e-5) > 2e-5
    # far below the array's magnitude the error is absolute: rounding of O(1) sums passes
    eps32 = float(np.finfo(np.float32).eps)
    assert cmp.rel_err(np.float32([1.0, 2 * eps32]), np.float32([1.0, 0.0]), rtol=2e-5) <= 2e-5
    # the floor follows the magnitude the caller names (the inputs'), not only the reference's
    assert cmp.rel_err([1e-9], [0.0], rtol=1e-12, scale=1.0) > 1e-12
    assert cmp.rel_err([1e-15], [0.0], rtol=1e-12, scale=1.0) <= 1e-12


def test_a_float32_result_against_a_float64_reference_is_held_at_float32s_rounding():
    # 0.1 in float32 is 1.5e-9 off float64's 0.1: float32's own rounding, which its tolerance allows,
    # and float64's would not (the default was the reference's dtype until 2026-11-30)
    out, ref = np.float32([1.0, 0.1]), np.float64([1.0, 0.1])
    assert cmp.rel_err(out, ref) == cmp.rel_err(out, ref, dtype=np.float32) <= cmp.GRAD.of(np.float32)
    assert cmp.rel_err(out, ref, dtype=np.float64) > cmp.GRAD.of(np.float64)
    # the other way round the coarser is still the float32 one
    assert cmp.rel_err(ref, out) == cmp.rel_err(ref, out, dtype=np.float32)
    # a zeroed tiny float32 gradient still fails against the float64 reference
    assert cmp.rel_err(np.float32([1.0, 0.0]), np.float64([1.0, 1e-3])) > cmp.GRAD.of(np.float32)


def test_a_zeroed_small_gradient_fails_assert_close():
    with pytest.raises(AssertionError, match="max rel err 1.0e\\+00"):
        cmp.assert_close(name="g", out=np.float32([0.0]), ref=np.float32([1e-5]), who="a", oracle="b", tol=cmp.GRAD)


def test_dtype_and_shape_are_checked_before_values():
    f32 = np.ones(3, np.float32)
    with pytest.raises(AssertionError, match="has dtype float64 but b gives dtype float32"):
        cmp.assert_close(name="g", out=f32.astype(np.float64), ref=f32, who="a", oracle="b", tol=cmp.GRAD)
    with pytest.raises(AssertionError, match=r"has shape \(2, 3\) but b gives shape \(3,\)"):
        cmp.assert_close(name="g", out=np.ones((2, 3), np.float32), ref=f32, who="a", oracle="b", tol=cmp.GRAD)
    with pytest.raises(AssertionError, match="has dtype float64"):
        cmp.assert_equal(name="g", out=f32.astype(np.float64), ref=f32, who="a", oracle="b")
    # a closed form computed in float64 names the dtype the subject must return
    cmp.assert_close(name="g", out=f32, ref=f32.astype(np.float64), who="a", oracle="b", tol=cmp.GRAD, dtype=np.float32)
    with pytest.raises(AssertionError, match="has dtype float64"):
        cmp.assert_close(
            name="g", out=f32.astype(np.float64), ref=f32, who="a", oracle="b", tol=cmp.GRAD, dtype="float32"
        )


def test_complex_errors_are_on_the_modulus():
    z = np.complex64([1 + 1j])
    assert cmp.rel_err(z, z) == 0.0
    assert cmp.rel_err(np.conj(z), z, rtol=2e-5) == pytest.approx(2 / np.sqrt(2))
    assert cmp.GRAD.of(np.complex64) == cmp.GRAD.of(np.float32)


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
        str(e.value)
        == "grad[tensorflow-xla-cpu]=[1. 0.] but jax-jit-cpu gives [1. 1.] (max rel err 1.0e+00 > 3.8147e-06)"
    )


def test_none_only_meets_none():
    assert cmp.assert_close(name="g", out=None, ref=None, who="a", oracle="b", tol=cmp.GRAD) == 0.0
    with pytest.raises(AssertionError, match="None vs array"):
        cmp.assert_close(name="g", out=None, ref=np.zeros(2), who="a", oracle="b", tol=cmp.GRAD)


def test_tolerance_is_per_dtype_and_exact_for_integers():
    tol = cmp.tolerance(float32=1e-3)
    assert tol.of(np.float32) == 1e-3 and tol.of(np.float64) == cmp.GRAD_TOL["float64"]
    assert tol.of(np.int32) == 0.0


@given(x=ss.float_arrays())
def test_rel_err_of_an_array_with_itself_is_zero(x):
    assert cmp.rel_err(x, x.copy()) == 0.0


def test_gradient_kind_vocabulary():
    assert [cmp.gradient_kind(g) for g in (None, np.zeros(3), np.array([0.0, 1.0]))] == ["none", "zero", "nonzero"]


def test_subnormal_references_may_be_flushed_to_zero_but_normal_ones_not():
    f32 = np.float32
    sub = np.float32(5.877472e-39)  # below float32's smallest normal (flush-to-zero kernels give 0)
    assert cmp.rel_err(f32([0.0]), np.array([sub], f32), rtol=2e-5) <= 2e-5
    assert cmp.rel_err(f32([0.0]), f32([1e-30]), rtol=2e-5) > 2e-5


def test_bfloat16_is_held_to_its_own_row_of_the_table():
    """ml_dtypes gives bfloat16 NumPy's kind 'V': it still gets bfloat16's tolerance and floor
    (not exactness, not float32's); a zeroed element fails (elementwise results, held with
    ``scale=0``, purely relatively: bfloat16's 32-ulp floor is 6x the array's magnitude)."""
    import ml_dtypes

    bf = ml_dtypes.bfloat16
    assert cmp.GRAD.of(bf) == cmp.GRAD_TOL["bfloat16"]
    ref = np.array([1.0, 0.25], bf)
    out = np.array([1.0078125, 0.25], bf)  # one bfloat16 ulp off at 1
    assert cmp.assert_close(name="g", out=out, ref=ref, who="w", oracle="o", tol=cmp.GRAD) <= cmp.GRAD_TOL["bfloat16"]
    with pytest.raises(AssertionError, match="max rel err"):
        cmp.assert_close(name="g", out=np.array([1.0, 0.0], bf), ref=ref, who="w", oracle="o", tol=cmp.GRAD, scale=0)
    with pytest.raises(AssertionError, match="dtype float32"):
        cmp.assert_close(name="g", out=ref.astype(np.float32), ref=ref, who="w", oracle="o", tol=cmp.GRAD)


def test_a_flushed_factor_of_a_product_costs_a_few_smallest_normals_not_more():
    """x * y * z with y * z subnormal: TF's CPU kernels flush y * z, so one occurrence of a
    float64 gradient of 6.7e-308 came back as 3.3e-308 (measured, --hypothesis-seed 3). That
    passes; a 1e-300 gradient zeroed does not."""
    tiny = np.finfo(np.float64).tiny
    assert cmp.rel_err(np.float64(1.5 * tiny), np.float64(3 * tiny)) <= cmp.GRAD_TOL["float64"]
    assert cmp.rel_err(np.float64(0.0), np.float64(1e-300)) > cmp.GRAD_TOL["float64"]


def test_a_failed_comparison_reports_the_error_its_check_measured():
    """A float64 quantity derived from float32 results fails at float32's terms; the row's
    max_rel_err is that error, not one recomputed at float64's floor (0.5 here, not 1.0)."""
    from types import SimpleNamespace

    from suite.report.record import Record

    rec = Record(SimpleNamespace(id="tensorflow-eager-cpu", framework="tensorflow", mode="eager", device="cpu"))
    out, ref = np.array([1.0, 1e-9]), np.array([1.0, 0.5])
    with pytest.raises(AssertionError, match=r"max rel err 5\.0e-01"):
        rec.close(name="d", out=out, ref=ref, oracle="jax-jit-cpu", derived_from=np.float32)
    assert rec.max_rel_err["jax"] == pytest.approx(0.5)
