"""Self-tests of suite.strategies: bounded values, the shape menu, half-way points."""

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from suite import strategies as ss


@given(x=ss.float_arrays())
def test_float_arrays_are_bounded_finite_and_from_the_menu(x):
    assert x.dtype in (np.float32, np.float64)
    assert x.shape in ss.SHAPE_MENU
    assert np.all(np.isfinite(x)) and np.all(np.abs(x) <= 10)
    tiny = np.finfo(x.dtype).tiny
    assert not np.any((x != 0) & (np.abs(x) < tiny)), "no subnormals"


@given(xw=ss.values_and_cotangents())
def test_cotangents_match_shape_and_dtype(xw):
    assert xw.w.shape == xw.x.shape and xw.w.dtype == xw.x.dtype


@settings(max_examples=200)
@given(data=st.data())
def test_halfway_arrays_reach_half_way_points(data):
    x = data.draw(ss.float_arrays(shape=(5,), halfway=True))
    assert np.all(np.abs(x) <= 10)


def test_halfway_strategy_can_produce_half_way_points():
    from hypothesis import find

    x = find(ss.float_arrays(shape=(3,), halfway=True), lambda a: np.any(np.abs(a - np.floor(a)) == 0.5))
    assert np.any(np.abs(x - np.floor(x)) == 0.5)


@given(m=ss.masked_arrays())
def test_masks_are_boolean_and_shaped_like_x(m):
    assert m.mask.dtype == np.bool_ and m.mask.shape == m.x.shape


def test_cotangents_reach_signed_zeros_and_tiny_magnitudes():
    """A gradient zeroed where it is small must meet a cotangent that makes it small."""
    from hypothesis import find

    x = np.zeros(5, np.float32)
    tiny = find(ss.like(x), lambda a: np.any((a != 0) & (np.abs(a) < 1e-4)), settings=settings(max_examples=500))
    assert tiny.dtype == np.float32
    neg0 = find(ss.like(x), lambda a: np.any((a == 0) & np.signbit(a)), settings=settings(max_examples=500))
    assert np.signbit(neg0).any()


def test_edge_values_respect_dtype_and_bounds():
    assert all(v >= 0 or v == 0 for v in ss.edge_values(np.float32, ("zero", "tiny"), lo=0.0))
    assert 1e-30 not in ss.edge_values(np.float16, ("tiny",))  # below float16's smallest normal
    assert np.isnan(ss.edge_values(np.float64, ("nan",))[0])
    with pytest.raises(ValueError, match="unknown edges"):
        ss.edge_values(np.float32, ("huge",))


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_edge_values_are_exact_in_their_dtype(dtype):
    """NumPy 1.x (the TF <= 2.17 envs) makes Hypothesis refuse an element that changes when
    cast, so every edge value is already the dtype's own number (1e-5 as float32 is not 1e-5)."""
    for v in ss.edge_values(dtype, ss.EDGES):
        assert np.isnan(v) or float(np.asarray(v, dtype=dtype)) == v, v
