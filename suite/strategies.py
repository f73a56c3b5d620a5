"""Hypothesis strategies that draw NumPy inputs shared by every framework.

Plural nouns, keyword-only arguments, NumPy out. Values are bounded by default (no
overflow, no subnormals); ``edges=`` mixes in signed zeros, tiny magnitudes, subnormals,
NaN or infinities where a behaviour is about them, and cotangents (``like``) carry zeros
and tiny magnitudes by default. Shapes come from a small menu so that compiled modes (XLA,
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


#: Edge values a strategy can mix in (``edges=``): signed zeros, tiny normal magnitudes
#: (where a gradient zeroed or flushed must show), subnormals, NaN and infinities (only
#: where a behaviour defines what happens to them).
EDGES = ("zero", "tiny", "subnormal", "nan", "inf")
#: Shapes with an empty axis, for ops that allow them (opt in: ``shape=small_shapes(menu=...)``).
EMPTY_SHAPES = ((0,), (2, 0))


def edge_values(dtype, edges, lo=-np.inf, hi=np.inf) -> list[float]:
    """The edge values of ``edges`` representable in ``dtype`` and inside ``[lo, hi]``.

    Each is rounded to ``dtype`` first (NumPy 1.x refuses an element that changes when cast):

    >>> edge_values(np.float32, ("zero", "tiny"))[:4]
    [0.0, -0.0, 9.999999747378752e-06, -9.999999747378752e-06]
    """
    bad = set(edges) - set(EDGES)
    if bad:
        raise ValueError(f"unknown edges {sorted(bad)}; choose from {EDGES}")
    info = np.finfo(dtype)
    vals = []
    if "zero" in edges:
        vals += [0.0, -0.0]
    if "tiny" in edges:
        vals += [s * m for m in (1e-5, 1e-12, 1e-30) for s in (1.0, -1.0) if m >= float(info.tiny)]
    if "subnormal" in edges:
        vals += [s * float(info.smallest_subnormal) * k for k in (1, 3) for s in (1.0, -1.0)]
    if "nan" in edges:
        vals.append(float("nan"))
    if "inf" in edges:
        vals += [float("inf"), float("-inf")]
    vals = [float(np.asarray(v, dtype=dtype)) for v in vals]
    return [v for v in vals if np.isnan(v) or lo <= v <= hi or np.isinf(v)]


def _elements(dtype, lo, hi, *, halfway, edges=()):
    width = {2: 16, 4: 32}.get(np.dtype(dtype).itemsize, 64)
    plain = st.floats(lo, hi, width=width, allow_subnormal=False, allow_nan=False, allow_infinity=False)
    parts = [plain]
    if halfway:
        # Half-way points (k + 0.5) and integers are where rounding rules and kinks live.
        parts.append(st.integers(int(np.ceil(2 * lo)), int(np.floor(2 * hi))).map(lambda k: k / 2.0))
    if edges:
        parts.append(st.sampled_from(edge_values(dtype, edges, lo, hi)))
    return st.one_of(*parts) if len(parts) > 1 else plain


@st.composite
def float_arrays(
    draw, *, dtype=None, shape=None, min_value=-10.0, max_value=10.0, halfway=False, edges=()
) -> np.ndarray:
    """Bounded float arrays; ``halfway=True`` mixes in integers and k + 0.5 points, ``edges``
    the :data:`EDGES` a behaviour is about."""
    d = (
        draw(float_dtypes())
        if dtype is None
        else (draw(dtype) if isinstance(dtype, st.SearchStrategy) else np.dtype(dtype))
    )
    s = draw(small_shapes()) if shape is None else (draw(shape) if isinstance(shape, st.SearchStrategy) else shape)
    return draw(hnp.arrays(d, s, elements=_elements(d, min_value, max_value, halfway=halfway, edges=edges)))


def like(x: np.ndarray, *, min_value=-4.0, max_value=4.0, edges=("zero", "tiny")) -> st.SearchStrategy[np.ndarray]:
    """Arrays with the shape and dtype of ``x`` (cotangents, weights). By default they mix in
    signed zeros and tiny magnitudes, so a gradient that is zeroed or flushed where it is
    small cannot pass as "close"."""
    return float_arrays(dtype=x.dtype, shape=x.shape, min_value=min_value, max_value=max_value, edges=edges)


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
