"""Subgradients at kinks and ties: which one each framework picks.

At a kink (``relu`` at 0, ``abs`` at 0, ``clip_by_value`` at a bound) or a tie (``maximum(x, y)``
with ``x == y``, two equal maxima in ``reduce_max``, ``max_pool``, ``top_k``, ``sort`` or a
segment) the derivative does not exist and each framework returns one element of the
subdifferential by convention. Away from kinks and ties every framework must agree with
the closed form, with central finite differences and with each other. At a kink the
observation says which one-sided difference quotient the answer equals (``left``,
``right``, their ``mean``, ``both`` where they agree, ``zero``); at a tie, where the
gradient goes (``first-argument``, ``split-evenly``, ``first-occurrence``, ``stable``...).
The elementwise ops with kinks are entries of the op table (``suite.ops``): the generic
properties (``test_op_*``) hold them in every mode, forward and second order included, and
classify the gradient at each kink (at 0 both 0.0 and -0.0) under this module's keys.

Measured (TF 2.21, JAX 0.10, PyTorch 2.13; all TF modes alike) and declared below:

- ``maximum``/``minimum`` ties: TensorFlow gives the whole gradient to the first argument
  (``math_grad.py``: ``grad * (x >= y)``); JAX and PyTorch split it evenly (jax PR 2342,
  pytorch issue 56734). So ``maximum(x, 0)`` at 0 is 1 in TF and 0.5 elsewhere, while
  ``relu`` at 0 is 0 everywhere: the two spellings of relu differ at 0 in every framework.
- ``clip_by_value`` at a bound: TF and ``torch.clamp`` pass the gradient (the inner side);
  ``jnp.clip`` is ``minimum(maximum(...))`` and gives 0.5.
- ``leaky_relu`` at 0: TF and PyTorch take the negative slope (left), JAX 1 (``x >= 0``).
- ``abs`` at 0: TF and PyTorch 0 (``sign(0)``), JAX 1 (jax issue 37820).
- ``reduce_max``/``reduce_min``/segment max and min split ties evenly everywhere (tf issues
  4886, 51681; pytorch PR 43519); ``torch.max(x, dim)`` sends it to the first index;
  ``max_pool`` sends each window's gradient to its first maximum in every framework.
- ``top_k``/``sort``: TF and JAX document "the lower-index element appears first", so the
  gradient of tied elements follows input order; ``jnp.sort(descending=True)`` reverses an
  ascending sort, so its ties come out in reverse order; ``torch.topk`` leaves the order of
  ties unspecified (recorded, not compared).
- ``tf.math.segment_max`` has no XLA kernel (only ``SegmentMaxV2``): XLA refuses to compile it
  (``raises:InvalidArgumentError``, "Detected unsupported operations").

Found on the way (not TensorFlow's tie rules, so kept out of the oracles; see ``_scatter``):
``torch.segment_reduce(reduce="max")`` gives every tied element the whole upstream gradient
when that gradient is negative (and half of it when positive), and ``scatter_reduce`` with
``include_self=False`` still counts the untouched base value as a tie in its backward pass.
TF's ``leaky_relu`` stores ``alpha`` as a float32 attribute, so float64 inputs get
``float32(alpha)``.
"""

import numpy as np
from hypothesis import example, given, strategies as st

from suite import compare as cmp, finite_diff, ops, strategies as ss
from suite.behaviours import Floor, behaviour
from suite.expectations import expect, expect_each, expectations, raises
from suite.ops import properties
from suite.program import Program

TF_MATH_GRAD = "https://github.com/tensorflow/tensorflow/blob/master/tensorflow/python/ops/math_grad.py"
JAX_MAX_CONVENTION = "https://github.com/jax-ml/jax/pull/2342"
TORCH_MAXIMUM_TIES = "https://github.com/pytorch/pytorch/issues/56734"
TORCH_DERIVATIVES = "https://github.com/pytorch/pytorch/blob/main/tools/autograd/derivatives.yaml"
TORCH_TOPK = "https://docs.pytorch.org/docs/stable/generated/torch.topk.html"
XLA_TOTAL_ORDER = (
    "XLA's sort and TopK compare floats with comparator type TOTALORDER, where -0.0 < 0.0: signed zeros are not "
    "tied but ordered by sign (jnp.sort and TensorFlow's own kernels treat them as equal and keep input order)"
)
XLA_TOTAL_ORDER_LINK = "https://github.com/openxla/xla/issues/48119"
TF_RELU_KERNELS = "https://github.com/tensorflow/tensorflow/blob/master/tensorflow/core/kernels/relu_op_functor.h"
TF_CLIP = "https://github.com/tensorflow/tensorflow/blob/master/tensorflow/python/ops/clip_ops.py"

BEHAVIOUR = behaviour(
    "kink-subgradients",
    sources=[],
    links=[
        "https://github.com/tensorflow/tensorflow/issues/4886",
        "https://github.com/tensorflow/tensorflow/issues/51681",
        TORCH_MAXIMUM_TIES,
        "https://github.com/pytorch/pytorch/pull/43519",
        "https://github.com/jax-ml/jax/pull/2195",
        JAX_MAX_CONVENTION,
        "https://github.com/jax-ml/jax/issues/13600",
    ],
    floor=Floor(
        "mixed",
        "Per element: values (exact picks) and gradients against closed forms and oracles, each element a routed "
        "cotangent w_i, w_i / k at a k-way tie, or a sum of w over broadcast rows or overlapping pooling windows, "
        "scaled by the same routing of |w| (so sums of mixed sign are held at sum |w|). Array-level: the float64 "
        "central differences (their rounding is at the function's scale) and the tie classifier kind(), which "
        "tells candidates apart that differ by w / 2 or more (for maximum/minimum it holds each candidate at the "
        "same routing of |w| as the comparisons: a broadcast dy's terms may cancel).",
    ),
)


TF_FIRST = "math_grad.py _MaximumGrad/_MinimumGrad return grad*(x >= y) (x <= y for minimum) to x and the rest to y"
JAX_SPLIT = "lax.max/min's JVP gives each argument half at a tie, Autograd's symmetric convention, kept on purpose"
TORCH_SPLIT = "derivatives.yaml maximum/minimum: grad/2 to each side where self == other (since issue 56734)"
EXPECT = expectations(
    {
        **{k: "split-evenly" for k in ("maximum", "minimum")},
        "maximum(x,0)-vs-relu@0": "differs",
        **{k: "split-evenly" for k in ("reduce_max", "reduce_min", "max(dim)")},
        "max_pool": "first-occurrence",
        **{k: "stable" for k in ("top_k[k=1]", "top_k[k=3]", "sort[ascending]", "sort[descending]")},
        **{f"{k}[signed zeros]": "stable" for k in ("top_k[k=1]", "top_k[k=3]", "sort[ascending]", "sort[descending]")},
        **{k: "split-evenly" for k in ("segment_max", "unsorted_segment_max", "unsorted_segment_min")},
    },
    *expect_each(
        "maximum",
        tensorflow=("first-argument", TF_FIRST, TF_MATH_GRAD),
        jax=("split-evenly", JAX_SPLIT, JAX_MAX_CONVENTION),
        torch=("split-evenly", TORCH_SPLIT, TORCH_MAXIMUM_TIES),
    ),
    *expect_each(
        "minimum",
        tensorflow=("first-argument", TF_FIRST, TF_MATH_GRAD),
        jax=("split-evenly", JAX_SPLIT, JAX_MAX_CONVENTION),
        torch=("split-evenly", TORCH_SPLIT, TORCH_MAXIMUM_TIES),
    ),
    *expect_each(
        "max(dim)",
        tensorflow=("split-evenly", "tf.reduce_max's _MinOrMaxGrad divides by the number of maxima", TF_MATH_GRAD),
        jax=(
            "split-evenly",
            "jnp.max's JVP averages over the tied locations",
            "https://github.com/jax-ml/jax/issues/13600",
        ),
        torch=(
            "first-occurrence",
            "'amax/amin evenly distributes gradient between equal values, while max(dim)/min(dim) propagates "
            "gradient only to a single index' (the first maximal index it returns)",
            "https://docs.pytorch.org/docs/stable/generated/torch.amax.html",
        ),
    ),
    *expect_each(
        "sort[descending]",
        tensorflow=(
            "stable",
            "tf.sort is top_k: 'the lower-index element appears first'",
            "https://www.tensorflow.org/api_docs/python/tf/math/top_k",
        ),
        jax=(
            "reversed",
            "jnp.sort(descending=True) is lax.rev of the stable ascending sort, so tied elements come out in "
            "reverse input order (jnp.argsort reverses twice and stays stable)",
            "https://github.com/jax-ml/jax/blob/main/jax/_src/numpy/sorting.py",
        ),
        torch=(
            "stable",
            "torch.sort(stable=True) keeps the order of equivalent elements",
            "https://docs.pytorch.org/docs/stable/generated/torch.sort.html",
        ),
    ),
    # -0.0 and 0.0 are equal, so by value they are ties; XLA's sort and top_k compare floats in
    # IEEE total order (-0.0 < 0.0), so under XLA they are not (measured: TF's XLA mode, JAX's top_k)
    *(
        expect(
            f"{k}[signed zeros]",
            "total-order",
            framework="tensorflow",
            mode="xla",
            reason=XLA_TOTAL_ORDER,
            link=XLA_TOTAL_ORDER_LINK,
        )  # fmt: skip
        for k in ("top_k[k=1]", "top_k[k=3]", "sort[ascending]", "sort[descending]")
    ),
    *(
        expect(f"{k}[signed zeros]", "total-order", framework="jax", reason=XLA_TOTAL_ORDER, link=XLA_TOTAL_ORDER_LINK)
        for k in ("top_k[k=1]", "top_k[k=3]")
    ),
    expect(
        "sort[descending][signed zeros]",
        "reversed",
        framework="jax",
        reason="jnp.sort(descending=True) reverses the stable ascending sort, which treats -0.0 and 0.0 as equal",
        link="https://github.com/jax-ml/jax/blob/main/jax/_src/numpy/sorting.py",
    ),
    expect(
        "segment_max",
        raises("InvalidArgumentError", r"Detected unsupported operations"),
        framework="tensorflow",
        mode="xla",
        reason="tf.math.segment_max builds SegmentMax, which tf2xla does not compile (its output size depends on "
        "the ids); only SegmentMaxV2 (num_segments given) and UnsortedSegmentMax have XLA kernels",
        link="https://github.com/tensorflow/tensorflow/blob/master/tensorflow/compiler/tf2xla/kernels/segment_reduction_ops.cc",
    ),
)
#: float64 central differences of a piecewise-linear function away from its kinks (FD_MARGIN): no
#: truncation error, only rounding of the function's values over the step, ~eps |f| / h (1e-10 of the
#: function's scale), held at the suite's difference tolerance with an array-level floor
FD_TOL = cmp.tolerance(float64=finite_diff.FD_TOL)
# A central difference at x steps ~6e-6 * max(1, |x|): values closer than this to a kink or
# to a competing value are compared with the closed form and the oracles, not with differences.
FD_MARGIN = 1e-3


# ---------------------------------------------------------------- strategies
# A near point is a kink or tie value moved by DELTA: exactly representable in float32, and
# far outside a central difference's step, so a difference at it never crosses the kink.
DELTA = 2.0**-6
KINK_POINTS = (-1.0, 0.0, 6.0)  # clip's bounds, relu6's, and 0
TIE_VALUES = (-1.0, 0.0, 1.0, 2.0)


@ss.cached
def _on_and_near(points, dtype, lo, hi, *, signed_zero=False):
    """Elements exactly on ``points``, DELTA to either side of them, or anywhere in [lo, hi]."""
    grid = sorted({p + s * DELTA for p in points for s in (-1, 0, 1)}) + ([-0.0] if signed_zero else [])
    return st.one_of(st.sampled_from(grid), ss.floats(dtype, lo, hi))


#: the cotangents' magnitudes: a zero would hide which subgradient was picked, a tiny one would
#: make the candidates indistinguishable (and differences noisy)
W_MAGNITUDES = (0.5, 4.0)


@st.composite
def kink_inputs(draw, *, shape=(2, 3)):
    d = draw(ss.float_dtypes())
    x = draw(ss.arrays(d, shape, elements=_on_and_near(KINK_POINTS, d, -8, 8, signed_zero=True)), label="x")
    return x, draw(ss.cotangents(shape, d, *W_MAGNITUDES), label="cotangent")


@st.composite
def tied_pairs(draw, *, x_shape=(2, 3), y_shapes=((), (3,), (2, 3))):
    """(x, y, w): y broadcasts against x; x = y + offset, the offset 0 (a tie), +-DELTA or any."""
    d, ys = draw(ss.dtypes_and_shapes(shapes=y_shapes), label="dtype, y shape")
    y = draw(ss.arrays(d, ys, elements=_on_and_near(TIE_VALUES, d, -4, 4)), label="y")
    offset = draw(ss.arrays(d, x_shape, elements=_on_and_near((0.0,), d, -4, 4)), label="offset")
    x = (np.broadcast_to(y, x_shape) + offset).astype(d)
    return x, y, draw(ss.cotangents(x_shape, d, *W_MAGNITUDES), label="cotangent")


@st.composite
def tied_arrays(draw, *, shape, out_shape=None):
    """x, elements often equal (a few small integers), DELTA apart, or anything; with a
    cotangent of ``out_shape``, (x, w)."""
    d = draw(ss.float_dtypes())
    x = draw(ss.arrays(d, shape, elements=_on_and_near(TIE_VALUES, d, -3, 3)), label="x")
    return x if out_shape is None else (x, draw(ss.cotangents(out_shape, d, *W_MAGNITUDES), label="cotangent"))


# ---------------------------------------------------------------- the programs
class Extremum(Program):
    """``op`` is maximum or minimum, with broadcasting: the same name everywhere."""

    def tensorflow(tf, x, y, *, op):
        return getattr(tf, op)(x, y)

    def jax(jax, x, y, *, op):
        return getattr(jax.numpy, op)(x, y)

    def torch(torch, x, y, *, op):
        return getattr(torch, op)(x, y)


# ---------------------------------------------------------------- the kinks: op-table entries
# Each elementwise op with a kink is an entry of the op table: the generic properties hold it (value,
# gradients, forward mode and second order against the closed form, the oracles and central
# differences off its kinks) and classify its gradient at each kink (0 and -0 at 0) by which
# one-sided derivative it is. A point's kind is TensorFlow's answer; the declarations, where JAX
# and PyTorch answer otherwise.
#: what every kink entry shares: drawn over [-8, 8], compared with differences FD_MARGIN off its
#: kinks, and judged at a kink by which one-sided derivative its gradient is
KINK_ENTRY = dict(domain={"float32": (-8.0, 8.0), "float64": (-8.0, 8.0)}, margin=FD_MARGIN, sides=True)


def kink(at: float, kind: str) -> ops.Point:
    """The kink at ``at`` (at 0 the array 0.0, -0.0, 0.0: both signed zeros), where the
    gradient is by default the ``kind`` one-sided derivative (:func:`suite.ops.side_kind`); its key
    is the table's ``grad[<entry>@<at>]`` (reports of schema 1 said ``relu@0``: :func:`suite.kinds.current_key`).
    """
    return ops.Point(f"{at:g}", ((0.0, -0.0, 0.0) if at == 0 else at,), kind)


RELU = ops.view("kink-subgradients", "relu", closed_forms=True, **KINK_ENTRY, excluded=(0.0,),
                points=(kink(0.0, "left"),))  # fmt: skip
ops.view("kink-subgradients", "relu6", **KINK_ENTRY, excluded=(0.0, 6.0),
         points=(kink(0.0, "left"), kink(6.0, "right")))  # fmt: skip
ops.view(
    "kink-subgradients",
    "leaky_relu",
    **KINK_ENTRY,
    excluded=(0.0,),
    points=(kink(0.0, "left"),),
    declared=expect_each(
        "grad[leaky_relu@0]",
        tensorflow=("left", "LeakyReluGrad is (x > 0).select(grad, grad*alpha): alpha at 0", TF_RELU_KERNELS),
        jax=(
            "right",
            "jax.nn.leaky_relu is where(x >= 0, x, negative_slope*x): slope 1 at 0",
            "https://docs.jax.dev/en/latest/_autosummary/jax.nn.leaky_relu.html",
        ),
        torch=("left", "leaky_relu_backward: grad * where(x > 0, 1, negative_slope)", TORCH_DERIVATIVES),
    ),
)
ops.view(
    "kink-subgradients",
    "elu",
    **KINK_ENTRY,
    excluded=(0.0,),
    points=(kink(0.0, "both"),),
    # exp(x) - 1 and y + 1 from the rounded output cancel for x < 0 (the database's terms): drawn there
    regimes={"saturated": (-8.0, -7.0)},
    ulps={"float32": 4.0, "float64": 4.0, "value": {"float32": 4.0, "float64": 4.0}},
)
ops.view(
    "kink-subgradients",
    "abs",
    **KINK_ENTRY,
    excluded=(0.0,),
    points=(kink(0.0, "mean"),),
    declared=expect_each(
        "grad[abs@0]",
        tensorflow=("mean", "_AbsGrad is grad*sign(x): 0 at 0, the mean of -1 and 1", TF_MATH_GRAD),
        jax=("right", "abs's JVP is select(x >= 0, g, -g): 1 at 0", "https://github.com/jax-ml/jax/issues/37820"),
        torch=("mean", "abs: grad * self.sgn(): 0 at 0", TORCH_DERIVATIVES),
    ),
)
ops.view("kink-subgradients", "sign", **KINK_ENTRY, excluded=(0.0,), points=(kink(0.0, "zero"),))
MAXIMUM_WITH_ZERO = ops.register(
    ops.Op(
        "maximum(x,0)",  # relu spelled as a maximum: relu's closed forms
        behaviour="kink-subgradients",
        tensorflow=lambda tf, x: tf.maximum(x, 0.0),
        jax=lambda jax, x: jax.numpy.maximum(x, 0.0),
        torch=lambda torch, x: torch.maximum(x, x.new_zeros(())),
        reference=RELU.reference,
        derivatives=RELU.derivatives,
        **KINK_ENTRY,
        excluded=(0.0,),
        points=(kink(0.0, "mean"),),
        declared=expect_each(
            "grad[maximum(x,0)@0]",
            tensorflow=(
                "right",
                "tf.maximum's tie goes to the first argument, x: 1, the right derivative",
                TF_MATH_GRAD,
            ),
            jax=("mean", "jnp.maximum splits the tie: 0.5, not relu's 0", "https://github.com/jax-ml/jax/issues/37821"),
            torch=("mean", TORCH_SPLIT, TORCH_MAXIMUM_TIES),
        ),
    )
)
ops.register(
    ops.Op(
        "clip",
        behaviour="kink-subgradients",
        tensorflow=lambda tf, x: tf.clip_by_value(x, -1.0, 6.0),
        jax=lambda jax, x: jax.numpy.clip(x, -1.0, 6.0),
        torch=lambda torch, x: torch.clamp(x, -1.0, 6.0),
        reference=lambda x: np.clip(x, -1, 6),
        **KINK_ENTRY,
        excluded=(-1.0, 6.0),
        points=(kink(-1.0, "right"), kink(6.0, "left")),
        declared=[
            e
            for bound, inner in (("grad[clip@-1]", "right"), ("grad[clip@6]", "left"))
            for e in expect_each(
                bound,
                tensorflow=(
                    inner,
                    "clip_by_value is maximum(minimum(x, hi), lo), x first: a tie keeps the gradient",
                    TF_CLIP,
                ),
                jax=(
                    "mean",
                    "jnp.clip is maximum(min, minimum(max, x)) (lax_numpy.py): the tie is split",
                    JAX_MAX_CONVENTION,
                ),
                torch=(inner, "clamp_backward passes grad where min <= x <= max (bounds included)", TORCH_DERIVATIVES),
            )
        ],
    )
)


# The reductions and the segment extrema are this behaviour's own ops, not entries of the table (the
# properties below observe their ties): their spellings and float64 references.
REDUCTIONS = {op.name: op for op in (  # along the last axis
    ops.Op("reduce_max", behaviour="kink-subgradients", tensorflow=lambda tf, x: tf.reduce_max(x, axis=-1),
           jax=lambda jax, x: jax.numpy.max(x, axis=-1), torch=lambda torch, x: torch.amax(x, dim=-1),
           reference=lambda x: np.max(x, axis=-1)),
    ops.Op("reduce_min", behaviour="kink-subgradients", tensorflow=lambda tf, x: tf.reduce_min(x, axis=-1),
           jax=lambda jax, x: jax.numpy.min(x, axis=-1), torch=lambda torch, x: torch.amin(x, dim=-1),
           reference=lambda x: np.min(x, axis=-1)),
    # the maximum as PyTorch users often write it (values and indices)
    ops.Op("max(dim)", behaviour="kink-subgradients", tensorflow=lambda tf, x: tf.reduce_max(x, axis=-1),
           jax=lambda jax, x: jax.numpy.max(x, axis=-1), torch=lambda torch, x: torch.max(x, dim=-1).values,
           reference=lambda x: np.max(x, axis=-1)),
)}  # fmt: skip
REDUCED = (2, 4)  # two rows of four


class MaxPool(Program):
    """2-D max pooling of one single-channel image, VALID padding, ``k`` x ``k`` windows, stride ``s``."""

    def tensorflow(tf, x, *, k, s):
        return tf.nn.max_pool2d(x[None, :, :, None], k, s, "VALID")[0, :, :, 0]

    def jax(jax, x, *, k, s):
        return jax.lax.reduce_window(x, -jax.numpy.inf, jax.lax.max, (k, k), (s, s), "VALID")

    def torch(torch, x, *, k, s):
        return torch.nn.functional.max_pool2d(x[None, None], k, s)[0, 0]


POOLS = ((4, 2, 2), (3, 2, 1))  # (image side, window, stride): disjoint and overlapping windows


class TopK(Program):
    """The k largest values along the last axis."""

    #: frameworks whose documentation leaves the order of tied elements unspecified
    unspecified_tie_order = {"torch": TORCH_TOPK}

    def tensorflow(tf, x, *, k):
        return tf.math.top_k(x, k=k).values

    def jax(jax, x, *, k):
        return jax.lax.top_k(x, k)[0]

    def torch(torch, x, *, k):
        return torch.topk(x, k).values


class Sort(Program):
    """Sort along the last axis. PyTorch's sort is stable only when asked (``stable=True``);
    TF's (top_k) and ``jnp.sort`` are stable by default."""

    def tensorflow(tf, x, *, descending):
        return tf.sort(x, direction="DESCENDING" if descending else "ASCENDING")

    def jax(jax, x, *, descending):
        return jax.numpy.sort(x, descending=descending)

    def torch(torch, x, *, descending):
        return torch.sort(x, descending=descending, stable=True).values


# name -> (program, its static arguments, outputs kept (None: all), descending)
ORDERINGS = {
    "top_k[k=1]": (TopK, {"k": 1}, 1, True),
    "top_k[k=3]": (TopK, {"k": 3}, 3, True),
    "sort[ascending]": (Sort, {"descending": False}, None, False),
    "sort[descending]": (Sort, {"descending": True}, None, True),
}
ORDERED = (2, 5)

N_SEGMENTS = 3


def _scatter(torch, x, ids, how):
    """Segment max/min by scatter_reduce. The base is -inf/+inf, not zeros: its backward counts a
    base value equal to the result as one more tie even with include_self=False (measured, 2.13);
    torch.segment_reduce's max backward gives each tied element the whole upstream gradient when
    that is negative (measured), so neither is used as the oracle."""
    base = x.new_full((N_SEGMENTS,), float("-inf") if how == "amax" else float("inf"))
    return base.scatter_reduce(0, ids.long(), x, how, include_self=False)


SEGMENTS = {op.name: op for op in (  # data and int32 segment ids
    ops.Op("segment_max", behaviour="kink-subgradients", arity=2,
           tensorflow=lambda tf, x, ids: tf.math.segment_max(x, ids),
           jax=lambda jax, x, ids: jax.ops.segment_max(x, ids, num_segments=N_SEGMENTS, indices_are_sorted=True),
           torch=lambda torch, x, ids: _scatter(torch, x, ids, "amax"),
           reference=lambda x, ids: group_values(x, segments(ids), (N_SEGMENTS,), pick=np.max)),
    ops.Op("unsorted_segment_max", behaviour="kink-subgradients", arity=2,
           tensorflow=lambda tf, x, ids: tf.math.unsorted_segment_max(x, ids, N_SEGMENTS),
           jax=lambda jax, x, ids: jax.ops.segment_max(x, ids, num_segments=N_SEGMENTS),
           torch=lambda torch, x, ids: _scatter(torch, x, ids, "amax"),
           reference=lambda x, ids: group_values(x, segments(ids), (N_SEGMENTS,), pick=np.max)),
    ops.Op("unsorted_segment_min", behaviour="kink-subgradients", arity=2,
           tensorflow=lambda tf, x, ids: tf.math.unsorted_segment_min(x, ids, N_SEGMENTS),
           jax=lambda jax, x, ids: jax.ops.segment_min(x, ids, num_segments=N_SEGMENTS),
           torch=lambda torch, x, ids: _scatter(torch, x, ids, "amin"),
           reference=lambda x, ids: group_values(x, segments(ids), (N_SEGMENTS,), pick=np.min)),
)}  # fmt: skip
# Every segment non-empty (an empty segment's value differs by framework: another behaviour).
SORTED_IDS = ((0, 0, 1, 1, 1, 2), (0, 1, 1, 1, 2, 2), (0, 0, 0, 1, 2, 2))
UNSORTED_IDS = ((2, 0, 1, 0, 2, 1), (1, 1, 0, 2, 0, 2), (0, 2, 2, 1, 0, 1))
IDS = {"segment_max": SORTED_IDS, "unsorted_segment_max": UNSORTED_IDS, "unsorted_segment_min": UNSORTED_IDS}


# ---------------------------------------------------------------- closed forms and observations
def kind(out, candidates: dict, dtype, scales: dict | None = None) -> str:
    """The name of the first candidate gradient ``out`` equals (within the dtype's tolerance);
    a candidate may be a tuple (one array per input). ``scales``: per candidate, the per-element
    floor scales of its comparison (as :func:`magnitudes` gives them; default: the array's)."""
    if out is None:
        return "none"
    tol = cmp.GRAD.of(dtype)
    for name, ref in candidates.items():
        refs, outs = (ref, out) if isinstance(ref, tuple) else ((ref,), (out,))
        at = (scales or {}).get(name)
        ats = (None,) * len(refs) if at is None else at if isinstance(at, tuple) else (at,)
        if all(
            np.shape(o) == np.shape(r) and cmp.rel_err(o, r, rtol=tol, scale=a) <= tol
            for o, r, a in zip(outs, refs, ats)
        ):
            return name
    return "other"


def extremum_candidates(x, y, w, *, op) -> tuple[dict, bool]:
    """(dx, dy) for each way of sharing w at the ties of op(x, y) (dy summed over broadcasting),
    and whether there is a tie."""
    x64, y64, w64 = (np.asarray(a, np.float64) for a in (x, y, w))
    yb = np.broadcast_to(y64, x64.shape)
    wins = np.greater if op == "maximum" else np.less
    tie = x64 == yb

    def share(cx, cy):
        gy = w64 * (wins(yb, x64) + cy * tie)
        gy = np.sum(gy, axis=tuple(range(gy.ndim - y64.ndim))).reshape(y64.shape)
        return (w64 * (wins(x64, yb) + cx * tie)).astype(x.dtype), gy.astype(x.dtype)

    shares = {"first-argument": (1, 0), "split-evenly": (0.5, 0.5), "second-argument": (0, 1), "all-ties": (1, 1)}
    return {k: share(*c) for k, c in shares.items()}, bool(tie.any())


def group_candidates(x, w, groups, values) -> tuple[dict, bool]:
    """Where each output's cotangent goes when ``out[j] = values[j]``, the extremum of
    ``x.flat[groups[j]]`` (``groups[j]`` lists flat indices in row-major order: a row, a window,
    a segment), has ties, and whether any group has a tie."""
    flat, wf, vf = (np.asarray(a, np.float64).ravel() for a in (x, w, values))
    names = ("split-evenly", "first-occurrence", "last-occurrence", "all-ties")
    g = {n: np.zeros(flat.shape) for n in names}
    tied = False
    for j, grp in enumerate(groups):
        t = grp[flat[grp] == vf[j]]
        tied |= len(t) > 1
        g["split-evenly"][t] += wf[j] / len(t)
        g["first-occurrence"][t[0]] += wf[j]
        g["last-occurrence"][t[-1]] += wf[j]
        g["all-ties"][t] += wf[j]
    return {n: v.reshape(x.shape).astype(x.dtype) for n, v in g.items()}, tied


def group_values(x, groups, shape, *, pick):
    flat = np.asarray(x, np.float64).ravel()
    return np.array([pick(flat[grp]) for grp in groups], np.float64).reshape(shape)


def segments(ids):
    """The flat indices of each segment's elements, segment by segment."""
    return [np.flatnonzero(np.asarray(ids) == j) for j in range(N_SEGMENTS)]


def row_groups(shape):
    return list(np.arange(int(np.prod(shape))).reshape(-1, shape[-1]))


def window_groups(n, k, s):
    idx = np.arange(n * n).reshape(n, n)
    m = (n - k) // s + 1
    return [idx[i * s : i * s + k, j * s : j * s + k].ravel() for i in range(m) for j in range(m)], (m, m)


def order_candidates(x, w, *, m, descending) -> tuple[dict, bool]:
    """Gradient of sum(w * sorted(x)[..., :m]) with tied elements taken in input order
    (``stable``), in reverse, or in IEEE total order (``total-order``: -0.0 before 0.0, then input
    order), and whether the first two differ (the order of ties matters)."""
    rows = np.asarray(x, np.float64).reshape(-1, x.shape[-1])
    wr = np.asarray(w, np.float64).reshape(rows.shape[0], -1)
    out = {}
    # total-order: IEEE totalOrder, where -0.0 < 0.0 (XLA's comparator), then input order
    for name, sign, by_sign in (("stable", 1, False), ("reversed", -1, False), ("total-order", 1, True)):
        g = np.zeros(rows.shape)
        for r, (row, wrow) in enumerate(zip(rows, wr)):
            negative_zero = (np.signbit(row) & (row == 0)).astype(float) if by_sign else np.zeros(row.size)
            key = -negative_zero if not descending else negative_zero  # -0.0 first ascending, last descending
            perm = np.lexsort((sign * np.arange(row.size), key, -row if descending else row))[:m]
            g[r, perm] = wrow
        out[name] = g.reshape(x.shape).astype(x.dtype)
    return out, not np.array_equal(out["stable"], out["reversed"])


def tie_group_sums(x, g):
    """Each element's gradient summed over the elements of its row equal to it: the same for
    every order of tied elements, so every framework must give the closed form's."""
    rows, grows = np.asarray(x).reshape(-1, x.shape[-1]), np.asarray(g).reshape(-1, x.shape[-1])
    return np.stack([(r[:, None] == r[None, :]) @ gr for r, gr in zip(rows, grows)]).reshape(x.shape).astype(g.dtype)


def magnitudes(candidates: dict, seen: str, default: str):
    """Per-element scales from candidates computed with |w|: each element's cotangents summed without
    their signs (a routed w, a split w / k, the sum over broadcast rows or overlapping windows), float64;
    a tuple of them for a candidate with one array per input."""
    picked = candidates.get(seen, candidates[default])
    if isinstance(picked, tuple):
        return tuple(np.asarray(m, np.float64) for m in picked)
    return np.asarray(picked, np.float64)


def separated(*groups) -> bool:
    """Every two different values within each group are far apart for a central difference."""
    for v in groups:
        u = np.unique(np.asarray(v, np.float64))
        if u.size > 1 and np.min(np.diff(u)) <= FD_MARGIN * max(1.0, float(np.max(np.abs(u)))):
            return False
    return True


def attempt(runner, program, *arrays, cotangent, **static):
    """(value, grads), or the error where the mode cannot compile the op (remembered: a failed
    XLA compilation is not cached by TensorFlow). The op exists, so that is ``raises:...``, not
    ``unavailable`` (a missing API)."""
    return runner.attempt(
        "vjp",
        program.of(runner),
        *arrays,
        cotangent=cotangent,
        remember=cmp.xla_refusal,
        **static,
    )


# ---------------------------------------------------------------- properties
X1 = np.array([[1.0, 2.0, 3.0], [0.0, -1.0, 2.0]], np.float32)
#: a thorough run's draw: ties at a broadcast scalar y whose gradient's terms cancel (dy = -0.035 from
#: terms of up to 4), which the tie classifier held at dy's own magnitude and read as 'other'
CANCELLING_DY = (
    np.array([[-1.03125, -1.03125, -1.015625], [-1.03125, -1.015625, -1.03125]], np.float32),
    np.array(-1.015625, np.float32),
    np.array([[1.0, -2.2848132, 1.0], [-2.75, 1.0, 4.0]], np.float32),
)


@given(p=tied_pairs(), op=st.sampled_from(["maximum", "minimum"]))
@example(p=CANCELLING_DY, op="maximum")
@example(p=(X1, np.array([1.0, -1.0, 2.0], np.float32), np.ones((2, 3), np.float32)), op="maximum")
@example(p=(X1, np.array(2.0, np.float32), np.full((2, 3), -3.0, np.float32)), op="minimum")
def test_maximum_minimum_share_ties(subject, oracles, record, p, op):
    """At x == y (y broadcast against x) the gradient of maximum/minimum goes to the first
    argument, is split evenly, ... (observed); off ties it is the closed form's, the oracles'
    and the central differences'."""
    x, y, w = p
    record.example(x=x, y=y, w=w, op=op)
    out, (dx, dy) = subject.vjp(Extremum.of(subject), x, y, cotangent=w, op=op)
    record.close(name=op, out=out, ref=getattr(np, op)(x, y), oracle="closed-form", tol=cmp.EXACT)
    candidates, tied = extremum_candidates(x, y, w, op=op)
    # per element: dx routes w_i (or w_i / 2) alone, dy sums w over the broadcast rows (scale: sum |w|),
    # for the tie classifier too: a dy whose terms cancel (1 - 2.28 - 2.75 + 4 = -0.035) is held at
    # sum |w|, not at its own magnitude (a thorough run read TF's first-argument rule as 'other' there)
    routed = {
        k: tuple(np.asarray(m, np.float64) for m in c)
        for k, c in extremum_candidates(x, y, np.abs(w), op=op)[0].items()
    }
    seen = kind((dx, dy), candidates, x.dtype, scales=routed)
    if tied:
        record.check(EXPECT, **{op: seen})
    ref_dx, ref_dy = candidates.get(seen, candidates["split-evenly"])
    at_dx, at_dy = magnitudes(routed, seen, "split-evenly")
    record.close(name=f"d{op}/dx", out=dx, ref=ref_dx, oracle="closed-form", scale=at_dx)
    record.close(name=f"d{op}/dy", out=dy, ref=ref_dy, oracle="closed-form", scale=at_dy)
    record.against(
        oracles,
        Extremum,
        x,
        y,
        cotangent=w,
        op=op,
        got={"value": out, "dx": dx, "dy": dy} if not tied else {"value": out},
        scale={"value": np.abs(getattr(np, op)(x, y).astype(np.float64)), "dx": at_dx, "dy": at_dy},
    )
    if not tied and x.dtype == np.float64 and separated(*np.stack(np.broadcast_arrays(x, y), -1).reshape(-1, 2)):
        fx, fy = finite_diff.vjp(getattr(np, op), x, y, cotangent=w)
        record.close(name=f"d{op}/dx", out=dx, ref=fx, oracle="finite-difference", tol=FD_TOL)
        record.close(name=f"d{op}/dy", out=dy, ref=fy, oracle="finite-difference", tol=FD_TOL)


KINKED = np.array([[0.0, -0.0, 6.0], [-1.0, 0.5, -DELTA]], np.float32)


@given(xw=kink_inputs())
@example(xw=(KINKED, np.ones_like(KINKED)))
def test_maximum_with_zero_is_relu_except_at_zero(subject, record, xw):
    """relu(x) and maximum(x, 0) have the same value everywhere and the same gradient off 0;
    at 0, relu's gradient is 0 and maximum's is its tie rule (observed: same or differs)."""
    x, w = xw
    record.example(x=x, w=w)
    x64 = x.astype(np.float64)
    zero = x == 0
    grads = {}
    for entry in (RELU, MAXIMUM_WITH_ZERO):
        name, f, df = entry.name, entry.reference, entry.derivatives[0]
        out, (grads[name],) = subject.vjp(entry.program.of(subject), x, cotangent=w)
        record.close(name=name, out=out, ref=f(x64).astype(x.dtype), oracle="closed-form", tol=cmp.EXACT)
        ref = (w * df(x64)).astype(x.dtype)
        at = np.abs(ref[~zero].astype(np.float64))  # w_i times a slope of 0 or 1: elementwise, exact
        record.close(name=f"d{name} off 0", out=grads[name][~zero], ref=ref[~zero], oracle="closed-form", scale=at)
    if zero.any():
        same = np.array_equal(grads["maximum(x,0)"][zero], grads["relu"][zero])
        record.check(EXPECT, **{"maximum(x,0)-vs-relu@0": "same" if same else "differs"})


@given(xw=tied_arrays(shape=REDUCED, out_shape=REDUCED[:-1]))
@example(xw=(np.array([[3, 1, 3, 2], [0, 0, 0, 0]], np.float32), np.array([1.0, -2.0], np.float32)))
def test_reductions_share_tied_extrema(subject, oracles, record, xw):
    """reduce_max, reduce_min and torch's max(dim) along the last axis: tied extrema split the
    gradient evenly, or give it to the first occurrence, ... (observed); without ties all
    agree with the closed form, each other and central differences."""
    x, w = xw
    record.example(x=x, w=w)
    groups = row_groups(x.shape)
    for name, op in REDUCTIONS.items():
        out, (g,) = subject.vjp(op.program.of(subject), x, cotangent=w)
        ref = op.reference(x.astype(np.float64)).astype(x.dtype)
        record.close(name=name, out=out, ref=ref, oracle="closed-form", tol=cmp.EXACT)
        candidates, tied = group_candidates(x, w, groups, ref)
        seen = kind(g, candidates, x.dtype)
        if tied:
            record.check(EXPECT, **{name: seen})
        # per element: each element receives its row's w (or w / k at a k-way tie) alone
        at = magnitudes(group_candidates(x, np.abs(w), groups, ref)[0], seen, "split-evenly")
        record.close(name=f"d{name}", out=g, ref=candidates.get(seen, candidates["split-evenly"]), oracle="closed-form",
                     scale=at)  # fmt: skip
        record.against(oracles, op.program, x, cotangent=w, got={"value": out, "grad": ... if tied else g},
                       scale={"value": np.abs(ref.astype(np.float64)), "grad": at})  # fmt: skip
        if not tied and x.dtype == np.float64 and separated(*x.reshape(-1, x.shape[-1])):
            (fd,) = finite_diff.vjp(op.reference, x, cotangent=w)
            record.close(name=f"d{name}", out=g, ref=fd, oracle="finite-difference", tol=FD_TOL)


@given(pool=st.sampled_from(POOLS), data=st.data())
@example(pool=(3, 2, 1), data=None)
def test_max_pool_sends_a_tied_window_to_one_element(subject, oracles, record, pool, data):
    """max_pool2d (VALID): each window's gradient goes to its first maximum, is split, or goes
    to every tied element (observed; overlapping windows add up); without ties all agree."""
    n, k, s = pool
    groups, shape = window_groups(n, k, s)
    if data is None:
        x, w = np.array([[1, 1, 0], [1, 1, 0], [2, 0, 2]], np.float32), np.array([[1, 2], [3, 4]], np.float32)
    else:
        x, w = data.draw(tied_arrays(shape=(n, n), out_shape=shape))
    record.example(x=x, w=w, k=k, s=s)
    out, (g,) = subject.vjp(MaxPool.of(subject), x, cotangent=w, k=k, s=s)
    ref = group_values(x, groups, shape, pick=np.max).astype(x.dtype)
    record.close(name="max_pool", out=out, ref=ref, oracle="closed-form", tol=cmp.EXACT)
    candidates, tied = group_candidates(x, w, groups, ref)
    seen = kind(g, candidates, x.dtype)
    if tied:
        record.check(EXPECT, max_pool=seen)
    # per element: the sum of the w of the (overlapping) windows it is the maximum of (scale: sum |w|)
    at = magnitudes(group_candidates(x, np.abs(w), groups, ref)[0], seen, "first-occurrence")
    record.close(
        name="dmax_pool",
        out=g,
        ref=candidates.get(seen, candidates["first-occurrence"]),
        oracle="closed-form",
        scale=at,
    )
    record.against(oracles, MaxPool, x, cotangent=w, k=k, s=s, got={"value": out, "grad": ... if tied else g},
                   scale={"value": np.abs(ref.astype(np.float64)), "grad": at})  # fmt: skip
    if not tied and x.dtype == np.float64 and separated(*(x.ravel()[grp] for grp in groups)):
        (fd,) = finite_diff.vjp(lambda v: group_values(v, groups, shape, pick=np.max), x, cotangent=w)
        record.close(name="dmax_pool", out=g, ref=fd, oracle="finite-difference", tol=FD_TOL)


@given(x=tied_arrays(shape=ORDERED))
@example(x=np.array([[3, 1, 3, 2, 3], [0, 0, 0, 0, 0]], np.float32))
@example(x=np.array([[-0.0, 0.0, -1.0, 0.0, -0.0], [0.0, 2.0, -0.0, 0.0, -0.0]], np.float32))
# a thorough run's draw: top_k k=1 of [.., -0.0, 0.0] picks 0.0 both by reversed ties and by the total order
@example(
    x=np.array(
        [[-1.015625, -1.015625, -1.015625, -1.015625, -1.0], [-1.015625, -1.015625, -1.015625, -0.0, 0.0]], np.float32
    )
)
def test_top_k_and_sort_route_ties_by_position(subject, oracles, record, x):
    """top_k and sort: tied elements receive the cotangents of their output positions in input
    order (stable) or in reverse (observed; torch.topk's order is unspecified: recorded, not
    compared); for every order, the gradient summed over each group of equal elements is the
    closed form's. The cotangent labels output positions 1, 2, 3, ..."""
    record.example(x=x)
    for name, (program, static, m, descending) in ORDERINGS.items():
        m = m or x.shape[-1]
        w = np.broadcast_to(np.arange(1, m + 1), (*x.shape[:-1], m)).astype(x.dtype)
        out, (g,) = subject.vjp(program.of(subject), x, cotangent=w, **static)
        ordered = np.sort(x, axis=-1)
        sorted_ref = (ordered[..., ::-1] if descending else ordered)[..., :m]
        record.close(name=name, out=out, ref=sorted_ref, oracle="closed-form", tol=cmp.EXACT)
        candidates, order_matters = order_candidates(x, w, m=m, descending=descending)
        at = np.abs(candidates["stable"].astype(np.float64))  # each element one routed w (or 0): its own magnitude
        # signed zeros that a total order would separate: observed under their own key
        signed = not np.array_equal(candidates["stable"], candidates["total-order"])
        if signed:
            name, order_matters = f"{name}[signed zeros]", True
        stable_sums = tie_group_sums(x, candidates["stable"])
        # per element: w holds positive integers (output positions), routed one each and summed over a tie group
        # without cancellation, so every element is held at its own magnitude
        record.close(name=f"d{name} per tie group", out=tie_group_sums(x, g), ref=stable_sums, oracle="closed-form",
                     scale=np.abs(stable_sums.astype(np.float64)))  # fmt: skip
        seen = kind(g, candidates, x.dtype).replace("other", "other-order")
        unspecified = getattr(program, "unspecified_tie_order", {})
        if (
            signed
            and seen in ("reversed", "total-order")
            and np.array_equal(candidates["reversed"], candidates["total-order"])
        ):
            # 0.0 after -0.0 among the picked ties (top_k k=1 of [.., -0.0, 0.0]): reversed ties and the total
            # order pick the same elements, so the example cannot tell them apart (a thorough run's draw)
            record.note(f"{name}: reversed ties and the total order coincide on this example (not observed)")
        elif order_matters and subject.framework in unspecified:
            record.observe_racy(**{name: seen})
            record.note(f"{name}: tie order unspecified by {subject.framework} ({unspecified[subject.framework]})")
        elif order_matters:
            record.check(EXPECT, **{name: seen})
        else:
            record.close(name=f"d{name}", out=g, ref=candidates["stable"], oracle="closed-form", scale=at)
        record.against(
            oracles,
            program,
            x,
            cotangent=w,
            **static,
            got={"value": out, "grad": ... if order_matters else g},
            scale={"value": np.abs(sorted_ref.astype(np.float64)), "grad": at},
        )
        if not order_matters and x.dtype == np.float64 and separated(*x.reshape(-1, x.shape[-1])):
            f = (lambda v, m=m: -np.sort(-v, axis=-1)[..., :m]) if descending else (lambda v: np.sort(v, axis=-1))
            (fd,) = finite_diff.vjp(f, x, cotangent=w)
            record.close(name=f"d{name}", out=g, ref=fd, oracle="finite-difference", tol=FD_TOL)


@given(xw=tied_arrays(shape=(6,), out_shape=(N_SEGMENTS,)), which=st.integers(0, 2))
@example(xw=(np.array([3, 3, 1, 2, 2, 5], np.float32), np.array([1, -2, 3], np.float32)), which=0)
def test_segment_extrema_share_ties(subject, oracles, record, xw, which):
    """segment_max, unsorted_segment_max/min: ties within a segment split its gradient evenly,
    or give it to the first occurrence, ... (observed); without ties all agree with the
    closed form, each other and central differences."""
    x, w = xw
    record.example(x=x, w=w, which=which)
    for name, op in SEGMENTS.items():
        ids = np.array(IDS[name][which], np.int32)
        groups = segments(ids)
        result, failed = attempt(subject, op.program, x, ids, cotangent=w)
        if failed:
            record.check(EXPECT, **{name: failed})
            continue
        out, (g, _) = result
        ref = op.reference(x, ids).astype(x.dtype)
        record.close(name=name, out=out, ref=ref, oracle="closed-form", tol=cmp.EXACT)
        candidates, tied = group_candidates(x, w, groups, ref)
        seen = kind(g, candidates, x.dtype)
        if tied:
            record.check(EXPECT, **{name: seen})
        # per element: each element receives its segment's w (or w / k at a k-way tie) alone
        at = magnitudes(group_candidates(x, np.abs(w), groups, ref)[0], seen, "split-evenly")
        record.close(name=f"d{name}", out=g, ref=candidates.get(seen, candidates["split-evenly"]), oracle="closed-form",
                     scale=at)  # fmt: skip
        record.against(oracles, op.program, x, ids, cotangent=w, got={"value": out, "grad": ... if tied else g},
                       scale={"value": np.abs(ref.astype(np.float64)), "grad": at})  # fmt: skip
        if not tied and x.dtype == np.float64 and separated(*(x[grp] for grp in groups)):
            (fd,) = finite_diff.vjp(lambda v, op=op, ids=ids: op.reference(v, ids), x, cotangent=w)
            record.close(name=f"d{name}", out=g, ref=fd, oracle="finite-difference", tol=FD_TOL)


# ---------------------------------------------------------------- seed examples
@given(x=st.just(np.array([1.0, 2.0, 2.0, 2.0], np.float32)))
def test_seed_reduce_max_and_max_pool_disagree(subject, record, x):
    """tensorflow#4886: a = [1, 2, 2, 2]: reduce_max's gradient is [0, 1/3, 1/3, 1/3], a 2x2
    max_pool over the same four values gives [0, 1, 0, 0]; tensorflow#51681: reduce_max of
    [0.6, 0.6, 0.3] gives [0.5, 0.5, 0]."""
    record.example(x=x)
    reduce_max = REDUCTIONS["reduce_max"]
    _, (g,) = subject.vjp(reduce_max.program.of(subject), x)
    record.check(EXPECT, reduce_max=kind(g, group_candidates(x, [1.0], row_groups(x.shape), [x.max()])[0], x.dtype))
    record.equal(
        name="dreduce_max", out=g, ref=np.array([0, 1, 1, 1], np.float32) / np.float32(3), oracle="closed-form"
    )
    image = x.reshape(2, 2)
    _, (gp,) = subject.vjp(MaxPool.of(subject), image, k=2, s=2)
    record.check(EXPECT, max_pool=kind(gp, group_candidates(image, [1.0], [np.arange(4)], [image.max()])[0], x.dtype))
    record.equal(name="dmax_pool", out=gp, ref=np.array([[0, 1], [0, 0]], np.float32), oracle="closed-form")
    x2 = np.array([0.6, 0.6, 0.3], np.float32)
    _, (g2,) = subject.vjp(reduce_max.program.of(subject), x2)
    record.equal(
        name="dreduce_max[0.6, 0.6, 0.3]", out=g2, ref=np.array([0.5, 0.5, 0], np.float32), oracle="closed-form"
    )


@given(x=st.just(np.array([4.0, 5.0, 3.0], np.float32)))
def test_seed_minimum_tie(subject, record, x):
    """tensorflow/swift-apis#479 quotes Python TF: the gradients of sum(minimum(x, y)) at
    x = [4, 5, 3], y = [4, 2, 6] are [1, 0, 1] and [0, 1, 0]; JAX and PyTorch give
    [0.5, 0, 1] and [0.5, 1, 0]."""
    y = np.array([4.0, 2.0, 6.0], np.float32)
    record.example(x=x, y=y)
    _, (dx, dy) = subject.vjp(Extremum.of(subject), x, y, op="minimum")
    candidates, _ = extremum_candidates(x, y, np.ones_like(x), op="minimum")
    record.check(EXPECT, minimum=kind((dx, dy), candidates, x.dtype))
    record.observe(dx=dx, dy=dy)


properties.bind(globals(), "kink-subgradients")
