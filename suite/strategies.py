"""Hypothesis strategies that draw NumPy inputs shared by every framework.

Plural nouns, keyword-only arguments, NumPy out. Values are bounded by default (no
overflow, no subnormals); ``edges=`` mixes in signed zeros, tiny magnitudes, subnormals,
NaN or infinities where a behaviour is about them, and cotangents (``like``) carry zeros
and tiny magnitudes by default. Dtype and shape are drawn together from a small menu of
pairs (:data:`PAIR_MENU`, :func:`paired`) so that compiled modes (XLA, ``jax.jit``,
``tf.function``, JAX's per-primitive eager kernels) build a handful of programs per test
rather than one per example or one per dtype x shape; the menu still gives each dtype a
scalar, a vector and a matrix, and covers a size-1 axis and rank 3.

>>> from hypothesis import given
>>> @given(x=float_arrays())
... def t(x): assert x.dtype in (np.float32, np.float64)
"""

from __future__ import annotations

import dataclasses
import functools
import math
import operator

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

SHAPE_MENU = ((), (1,), (3,), (5,), (2, 3), (4, 1), (2, 1, 3))
FLOAT_DTYPES = (np.float32, np.float64)
#: The default (dtype, shape) menu: each dtype with a scalar, a vector and a matrix, and
#: between them a size-1 axis and rank 3 (8 input signatures, not the 14 of every dtype
#: with every shape of :data:`SHAPE_MENU`).
PAIR_MENU = (
    (np.float32, ()),
    (np.float64, ()),
    (np.float32, (3,)),
    (np.float64, (5,)),
    (np.float32, (2, 3)),
    (np.float64, (4, 1)),
    (np.float32, (2, 1, 3)),
    (np.float64, (1,)),
)


def cached(factory):
    """A strategy factory that returns one strategy object per argument set. Composites call
    their factories on every draw, and Hypothesis validates each new strategy object and
    computes its properties again; the same object draws the same values, so caching a factory
    leaves the examples unchanged. Arguments are told apart by type and sign: ``0.0 == -0.0``
    and ``1 == 1.0 == True``, but each is a different strategy (lists count as tuples)."""
    memo: dict = {}

    @functools.wraps(factory)
    def one(*args, **kwargs):
        try:
            key = _key((args, tuple(sorted(kwargs.items()))))
            hash(key)
        except TypeError:  # an unhashable argument: a new strategy, as without the cache
            return factory(*args, **kwargs)
        if key not in memo:
            if len(memo) >= 4096:  # arguments that are new every time (a fresh strategy): bounded
                memo.clear()
            memo[key] = factory(*args, **kwargs)
        return memo[key]

    return one


def _key(v):
    if isinstance(v, (float, np.floating)):
        return (type(v), float(v), math.copysign(1.0, v))
    if isinstance(v, (tuple, list)):
        return (tuple, *map(_key, v))
    return (type(v), v)


def float_dtypes(*, dtypes=FLOAT_DTYPES) -> st.SearchStrategy[np.dtype]:
    return st.sampled_from([np.dtype(d) for d in dtypes])


def small_shapes(*, menu=SHAPE_MENU, min_dims=0) -> st.SearchStrategy[tuple]:
    return st.sampled_from([s for s in menu if len(s) >= min_dims])


def paired(shapes, dtypes=FLOAT_DTYPES) -> tuple:
    """(dtype, shape) pairs in which every shape and every dtype occurs: as many as the
    longer of the two, not their product. A compiled mode (XLA, ``jax.jit``, ``tf.function``,
    JAX's per-primitive eager kernels) builds one program per input signature, so a test
    that draws dtype and shape together builds half as many (or fewer) as one that draws
    them apart, and its 25 examples reuse them more often.

    >>> [(d.name, s) for d, s in paired(((), (3,), (2, 3)))]
    [('float32', ()), ('float64', (3,)), ('float32', (2, 3))]
    >>> [(d.name, s) for d, s in paired(((2, 3),))]
    [('float32', (2, 3)), ('float64', (2, 3))]
    """
    shapes, dtypes = [tuple(s) for s in shapes], [np.dtype(d) for d in dtypes]
    if not shapes or not dtypes:
        raise ValueError("paired() needs at least one shape and one dtype")
    n = max(len(shapes), len(dtypes))
    return tuple((dtypes[i % len(dtypes)], shapes[i % len(shapes)]) for i in range(n))


#: How many input signatures a row draws from its menu: ``all`` of them, or ``largest`` (one
#: per dtype, the largest: :func:`one_per_dtype`). The plugin sets it from the profile (the ci
#: and quick profiles draw ``largest``, dev and thorough ``all``): every signature is one more
#: trace and compilation per program and compiled mode, the first calls that cost a row most
#: of its time (issue 46), while the largest shape keeps the element coverage.
SIGNATURES = {"policy": "all"}
POLICIES = ("all", "largest")


def use_signatures(policy: str) -> None:
    """Draw ``policy``'s signatures (:data:`POLICIES`) from now on."""
    if policy not in POLICIES:
        raise ValueError(f"unknown signature policy {policy!r}; choose from {POLICIES}")
    SIGNATURES["policy"] = policy


def one_per_dtype(menu) -> tuple:
    """Of a (dtype, shape) menu, each dtype's largest shape (most elements; of equal sizes, one
    without a size-1 axis, then the lower rank), in the menu's order.

    >>> [(d.name, s) for d, s in one_per_dtype(PAIR_MENU)]
    [('float64', (5,)), ('float32', (2, 3))]
    >>> [(d.name, s) for d, s in one_per_dtype(paired(((), (3,))))]
    [('float32', ()), ('float64', (3,))]
    """
    menu = [(np.dtype(d), tuple(s)) for d, s in menu]
    best = {}
    for d, s in menu:
        rank = (math.prod(s), 1 not in s, -len(s))
        if d not in best or rank > best[d][0]:
            best[d] = (rank, s)
    return tuple((d, s) for d, s in menu if best[d][1] == s)


def signature_menu(menu) -> tuple:
    """``menu`` under the current policy (:data:`SIGNATURES`)."""
    return one_per_dtype(menu) if SIGNATURES["policy"] == "largest" else tuple(menu)


def shapes_for(dtype, shapes, dtypes=FLOAT_DTYPES) -> tuple:
    """The shapes a row that draws its dtype first may draw with ``dtype``, under the current
    policy (call it at draw time): every shape under ``all``; under ``largest``, the shapes
    :func:`paired` gives ``dtype``, so that every shape still occurs, spread over the dtypes (one
    signature per dtype where there are no more shapes than dtypes), where
    :func:`one_per_dtype` would keep only the largest.

    >>> f32 = np.dtype(np.float32)
    >>> shapes_for(f32, ((1, 4, 3), (3, 2, 1)))
    ((1, 4, 3), (3, 2, 1))
    >>> use_signatures("largest"); shapes_for(f32, ((1, 4, 3), (3, 2, 1))); use_signatures("all")
    ((1, 4, 3),)
    """
    shapes = tuple(tuple(s) for s in shapes)
    if SIGNATURES["policy"] != "largest":
        return shapes
    return tuple(s for d, s in paired(shapes, dtypes) if d == np.dtype(dtype))


def dtypes_and_shapes(*, shapes=None, dtypes=FLOAT_DTYPES, dtype=None, min_dims=0) -> st.SearchStrategy[tuple]:
    """A (dtype, shape) pair: from :data:`PAIR_MENU` by default, from :func:`paired`
    ``(shapes, dtypes)`` when shapes are given; ``dtype=`` keeps that dtype's pairs,
    ``min_dims`` the shapes of at least that rank; then the current signature policy
    (:data:`SIGNATURES`). Composites call it on every draw, so one strategy object per
    argument set is kept (see :func:`_arrays`)."""
    shapes = None if shapes is None else tuple(tuple(s) for s in shapes)
    dtype = None if dtype is None else np.dtype(dtype)
    return _pairs(shapes, tuple(np.dtype(d) for d in dtypes), dtype, min_dims, SIGNATURES["policy"])


def every_dtype_and_shape(*, shapes, dtypes=FLOAT_DTYPES) -> st.SearchStrategy[tuple]:
    """A (dtype, shape) pair from the product of ``dtypes`` and ``shapes`` (every dtype with every
    shape, where :func:`dtypes_and_shapes` pairs them), under the current signature policy: the
    whole product under ``all``, each dtype's largest shape under ``largest`` (ci and quick: one
    input signature per dtype, as every other row draws).

    >>> f32, f64 = np.dtype(np.float32), np.dtype(np.float64)
    >>> [(d.name, s) for d, s in _product(((3,), (2, 3)), (f32, f64), "largest").elements]
    [('float32', (2, 3)), ('float64', (2, 3))]
    >>> len(_product(((3,), (2, 3)), (f32, f64), "all").elements)
    4
    """
    shapes = tuple(tuple(s) for s in shapes)
    return _product(shapes, tuple(np.dtype(d) for d in dtypes), SIGNATURES["policy"])


@cached
def _product(shapes, dtypes, policy) -> st.SearchStrategy[tuple]:
    menu = [(d, s) for d in dtypes for s in shapes]
    return st.sampled_from(one_per_dtype(menu) if policy == "largest" else menu)


@cached
def _pairs(shapes, dtypes, dtype, min_dims, policy) -> st.SearchStrategy[tuple]:
    menu = PAIR_MENU if shapes is None else paired(shapes, dtypes)
    menu = [(np.dtype(d), s) for d, s in menu if len(s) >= min_dims]
    if dtype is not None:
        menu = [(d, s) for d, s in menu if d == dtype]
    if not menu:
        raise ValueError(f"no (dtype, shape) pair with dtype={dtype} and min_dims={min_dims}")
    return st.sampled_from(one_per_dtype(menu) if policy == "largest" else menu)


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


@cached
def _arrays(dtype, shape, lo, hi, halfway, edges) -> st.SearchStrategy[np.ndarray]:
    """One strategy object per argument set (:func:`cached`): a fresh one per draw would be
    validated again on every draw, a third of a small array's cost."""
    return hnp.arrays(dtype, shape, elements=_elements(dtype, lo, hi, halfway=halfway, edges=edges))


@cached
def arrays(dtype, shape, *, elements=None, unique=False) -> st.SearchStrategy[np.ndarray]:
    """:func:`hypothesis.extra.numpy.arrays`, one object per argument set (see :func:`cached`)."""
    return hnp.arrays(dtype, shape, elements=elements, unique=unique)


@cached
def choice(options) -> st.SearchStrategy:
    """``st.sampled_from(options)``, one object per sequence of options (see :func:`cached`)."""
    return st.sampled_from(tuple(options))


@cached
def either(*strategies) -> st.SearchStrategy:
    """``st.one_of(*strategies)``, one object per argument set (see :func:`cached`)."""
    return st.one_of(*strategies)


@cached
def floats(dtype, min_value=None, max_value=None, *, subnormals=False) -> st.SearchStrategy[float]:
    """Finite values of ``dtype`` (``hypothesis.extra.numpy.from_dtype``: the width follows the
    dtype) in [min_value, max_value], bounds included, so a domain's tails are drawn. Cases use
    this instead of ``st.floats(width=32 if ... else 64)``.

    >>> from hypothesis import given
    >>> @given(v=floats(np.float32, -88.7, 1e4))
    ... def t(v): assert np.float32(v) == v and -88.7 <= v <= 1e4
    >>> t()
    """
    t = np.dtype(dtype).type
    if min_value is not None:  # bounds rounded inward to values of the dtype
        lo = t(min_value)
        min_value = float(lo if lo >= min_value else np.nextafter(lo, t(np.inf)))
    if max_value is not None:
        hi = t(max_value)
        max_value = float(hi if hi <= max_value else np.nextafter(hi, t(-np.inf)))
    values = hnp.from_dtype(
        np.dtype(dtype),
        min_value=min_value,
        max_value=max_value,
        allow_nan=False,
        allow_infinity=False,
        allow_subnormal=subnormals,
    )
    return values.map(float)  # Python floats, as st.floats gives (the same draws: arithmetic on them is not narrowed)


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
    if dtype is None and shape is None:
        d, s = draw(dtypes_and_shapes(), label="dtype, shape")
    else:
        d = (
            draw(float_dtypes())
            if dtype is None
            else (draw(dtype) if isinstance(dtype, st.SearchStrategy) else np.dtype(dtype))
        )
        if shape is None:
            s = draw(dtypes_and_shapes(dtype=d), label="shape")[1]
        else:
            s = draw(shape) if isinstance(shape, st.SearchStrategy) else shape
    return draw(_arrays(d, tuple(s), min_value, max_value, halfway, tuple(edges)))


def like(x: np.ndarray, *, min_value=-4.0, max_value=4.0, edges=("zero", "tiny")) -> st.SearchStrategy[np.ndarray]:
    """Arrays with the shape and dtype of ``x`` (cotangents, weights). By default they mix in
    signed zeros and tiny magnitudes, so a gradient that is zeroed or flushed where it is
    small cannot pass as "close"."""
    return float_arrays(dtype=x.dtype, shape=x.shape, min_value=min_value, max_value=max_value, edges=edges)


@cached
def signed(dtype, lo, hi, *, zero=False) -> st.SearchStrategy[float]:
    """Values of ``dtype`` of either sign whose magnitude is in [lo, hi] (no subnormals), and
    exact zeros with ``zero``: where a value of 0 (or a tiny one) would make a closed form
    collapse onto another, or products underflow where the frameworks flush differently.

    >>> from hypothesis import given
    >>> @given(v=signed(np.float32, 0.25, 4.0))
    ... def t(v): assert 0.25 <= abs(v) <= 4.0 and np.float32(v) == v
    >>> t()
    """
    magnitude = floats(dtype, lo, hi)
    return st.one_of(magnitude, magnitude.map(operator.neg), *[st.just(0.0)] * bool(zero))


@cached
def signed_arrays(shape, dtype, lo=0.25, hi=4.0, *, zero=False, unique=False) -> st.SearchStrategy[np.ndarray]:
    """Arrays of ``shape`` and ``dtype`` whose elements are :func:`signed` (``unique``: distinct)."""
    return arrays(np.dtype(dtype), tuple(shape), elements=signed(dtype, lo, hi, zero=zero), unique=unique)


def cotangents(shape, dtype, lo=0.25, hi=4.0, *, zero=False) -> st.SearchStrategy[np.ndarray]:
    """Upstream gradients of either sign, ``lo <= |w| <= hi``: nonzero by default, so a position
    that gets no gradient cannot pass for one whose cotangent is 0, and ``g / w`` keeps the
    class of the derivative (where a behaviour mixes in zeros and tiny values, :func:`like`)."""
    return signed_arrays(shape, dtype, lo, hi, zero=zero)


@st.composite
def weighted_triples(draw, *, dtypes=FLOAT_DTYPES, shapes=((3,), (2, 3))):
    """(x, w, c): 0.25 <= |x| <= 2 of either sign (no closed form of a product of x, w and c, nor of sin
    or cos of x, vanishes, so none is mistaken for zeros); w and c, weights in [0.5, 2], of x's dtype
    and shape (one of ``shapes``)."""
    d, s = draw(every_dtype_and_shape(shapes=shapes, dtypes=dtypes), label="dtype, shape")
    m = draw(float_arrays(dtype=d, shape=s, min_value=0.25, max_value=2.0), label="|x|")
    sign = draw(arrays(np.bool_, s, elements=st.booleans()), label="sign")
    x = np.where(sign, -m, m).astype(d)
    w = draw(float_arrays(dtype=d, shape=s, min_value=0.5, max_value=2.0), label="w")
    c = draw(float_arrays(dtype=d, shape=s, min_value=0.5, max_value=2.0), label="c")
    return x, w, c


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


def explicit(argname: str, values):
    """``@example(argname=v)`` for each of ``values``, in order: a row's explicit examples (run in
    every profile, before the drawn ones).

    >>> from hypothesis import given
    >>> seen = []
    >>> @explicit("v", [7, 8])
    ... @given(v=st.integers(0, 3))
    ... def t(v): seen.append(v)
    >>> t(); seen[:2]
    [7, 8]
    """
    from hypothesis import example

    def apply(test):
        for v in reversed(list(values)):
            test = example(**{argname: v})(test)
        return test

    return apply
