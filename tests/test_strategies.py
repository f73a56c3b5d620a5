"""Self-tests of suite.strategies: bounded values, the shape menu, half-way points."""

import numpy as np
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
