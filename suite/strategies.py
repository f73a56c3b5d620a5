"""Hypothesis strategies that draw NumPy inputs shared by every framework.

Plural nouns, keyword-only arguments, NumPy out. Values are bounded by default (no
overflow, no subnormals). Shapes come from a small menu so that compiled modes (XLA,
``jax.jit``) compile a handful of programs per test rather than one per example; the
menu still covers scalars, vectors, matrices, a size-1 axis and rank 3.

>>> from hypothesis import given
>>> @given(x=float_arrays())
... def t(x): assert x.dtype in (np.float32, np.float64)
"""

from __future__ import annotations

import dataclasses

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

SHAPE_MENU = ((), (1,), (3,), (5,), (2, 3), (4, 1), (2, 1, 3))
FLOAT_DTYPES = (np.float32, np.float64)


def float_dtypes(*, dtypes=FLOAT_DTYPES) -> st.SearchStrategy[np.dtype]:
    return st.sampled_from([np.dtype(d) for d in dtypes])


def small_shapes(*, menu=SHAPE_MENU, min_dims=0) -> st.SearchStrategy[tuple]:
    return st.sampled_from([s for s in menu if len(s) >= min_dims])


def _elements(dtype, lo, hi, *, halfway):
    width = 32 if np.dtype(dtype) == np.float32 else 64
    plain = st.floats(lo, hi, width=width, allow_subnormal=False, allow_nan=False, allow_infinity=False)
    if not halfway:
        return plain
    # Half-way points (k + 0.5) and integers are where rounding rules and kinks live.
    halves = st.integers(int(np.ceil(2 * lo)), int(np.floor(2 * hi))).map(lambda k: k / 2.0)
    return st.one_of(plain, halves)


@st.composite
def float_arrays(draw, *, dtype=None, shape=None, min_value=-10.0, max_value=10.0, halfway=False) -> np.ndarray:
    """Bounded float arrays; ``halfway=True`` mixes in integers and k + 0.5 points."""
    d = (
        draw(float_dtypes())
        if dtype is None
        else (draw(dtype) if isinstance(dtype, st.SearchStrategy) else np.dtype(dtype))
    )
    s = draw(small_shapes()) if shape is None else (draw(shape) if isinstance(shape, st.SearchStrategy) else shape)
    return draw(hnp.arrays(d, s, elements=_elements(d, min_value, max_value, halfway=halfway)))


def like(x: np.ndarray, *, min_value=-4.0, max_value=4.0) -> st.SearchStrategy[np.ndarray]:
    """Arrays with the shape and dtype of ``x`` (cotangents, weights)."""
    return float_arrays(dtype=x.dtype, shape=x.shape, min_value=min_value, max_value=max_value)


@dataclasses.dataclass(frozen=True)
class MaskedArray:
    x: np.ndarray
    mask: np.ndarray  # bool, same shape as x


@st.composite
def masked_arrays(draw, *, dtype=None, shape=None) -> MaskedArray:
    x = draw(float_arrays(dtype=dtype, shape=shape))
    return MaskedArray(x=x, mask=draw(hnp.arrays(np.bool_, x.shape)))


@dataclasses.dataclass(frozen=True)
class ValueAndCotangent:
    x: np.ndarray
    w: np.ndarray  # cotangent (upstream gradient), same shape and dtype as x


@st.composite
def values_and_cotangents(draw, *, halfway=False, min_value=-10.0, max_value=10.0) -> ValueAndCotangent:
    x = draw(float_arrays(halfway=halfway, min_value=min_value, max_value=max_value), label="x")
    return ValueAndCotangent(x=x, w=draw(like(x), label="cotangent"))


def scalars(*, dtype=np.float64, min_value=-5.0, max_value=5.0, nonzero=False) -> st.SearchStrategy[np.ndarray]:
    """0-d arrays (NumPy scalars keep their dtype across frameworks)."""
    width = 32 if np.dtype(dtype) == np.float32 else 64
    f = st.floats(min_value, max_value, width=width, allow_nan=False, allow_infinity=False, allow_subnormal=False)
    if nonzero:
        f = f.filter(lambda v: abs(v) > 1e-3)
    return f.map(lambda v: np.asarray(v, dtype=dtype))
