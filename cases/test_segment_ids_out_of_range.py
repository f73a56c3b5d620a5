"""Segment ids out of range: what segment reductions do with an id outside [0, num_segments).

``tf.math.unsorted_segment_sum`` documents that a negative id is dropped and that on CPU an id
>= num_segments raises (on GPU: unchecked); under XLA nothing raises (tensorflow#120245). JAX's
``jax.ops.segment_*`` drop every id outside [0, num_segments) (``FILL_OR_DROP``); PyTorch's
``index_add``/``scatter_reduce`` refuse them. The sorted ``tf.math.segment_*`` ops want sorted,
non-negative ids. Source issues: tensorflow#52063, #44700, #32755, #72785, #59356, jax#14179,
pytorch#9998 (in :data:`BEHAVIOUR`'s links).

The APIs, an entry each in :data:`UNSORTED` and :data:`SORTED` (every property runs over the
table): ``unsorted_segment_{sum,max,min,prod,mean,sqrt_n}`` with their oracles
``jax.ops.segment_{sum,max,min,prod}`` and ``torch.zeros(n).index_add`` (sum) /
``scatter_reduce(..., include_self=False)`` (``amax``, ``amin``, ``prod``, ``mean``); and
``segment_{sum,mean,max,min,prod}`` against ``jax.ops.segment_*(indices_are_sorted=True)``.
Ids fall in the categories of :mod:`suite.out_of_range` (``above`` i >= n, ``negative`` -n <= i
< 0, ``below`` i < -n). Observed per category: the forward (``dropped``, ``clamped-row``,
``wrapped-row``, ``raises:<Error>``), and the gradient of ``sum(w * out)`` at the out-of-range
elements (``dropped``: zero, ``leaks``: a segment's cotangent reaches it, ``nan``) with the
in-range elements kept at their closed form (``rows``); the same gradient with the category's
rows all NaN (``nan-row``: ``isolated`` when the kept rows keep their closed form and the NaN
rows get 0, ``spreads`` when a NaN reaches a kept row); the value of an empty segment
(``empty``); for the sorted ops unsorted, negative (-1 and below -n) and gapped ids.

Declared surprises:

- XLA raises nowhere: an id >= n is dropped from the forward, but the gradient is a gather of
  the cotangent, which XLA clamps, so the dropped element receives the last segment's cotangent
  (sum, mean, sqrt_n, prod; max and min compare with the clamped segment's value and give 0).
- The empty segment of ``unsorted_segment_max`` is the dtype's lowest finite value (not -inf,
  JAX's), of ``min`` its highest; PyTorch's ``include_self=False`` leaves the zeros it starts
  from (0 for prod too). The sorted ``segment_max/min`` fill a missing segment with 0.
- JAX has no gradient for ``segment_prod`` (scatter_mul with repeated indices: NotImplementedError).
- A NaN in a dropped row never reaches a kept row's gradient, but ``unsorted_segment_prod``'s
  gradient gives the NaN row itself NaN (0 * prod / NaN), where the closed form is 0.
- The sorted ``segment_*`` ops have no XLA kernel (their output shape is data-dependent).
- JAX's ``indices_are_sorted=True`` is a promise it does not check: unsorted ids still reduce
  per segment on CPU, where TensorFlow refuses them.

``tf.sparse.segment_{sum,mean,sqrt_n}(data, indices, segment_ids, num_segments=n)`` (:data:`SPARSE`):
rows ``data[indices]`` reduced by sorted segment ids; an empty segment holds 0. A row index out
of [0, R), a segment id >= n or < 0 and unsorted ids are refused on CPU: eagerly by the forward
kernel, in a function or graph that fetches only the gradient by the gradient kernel ("Index 5
out of range"), which does not check the order, so unsorted ids get their gradient silently
there. No XLA kernel. PyTorch's ``embedding_bag`` (one bag per segment) refuses out-of-range rows
too; JAX has no such op (a gather then ``segment_sum`` is its spelling, run in range only).

Out of scope here: ``tf.SparseTensor`` with duplicate indices (structured-tensor-gradients);
ties of max/min gradients (kink-subgradients covers them).

``tf.math.bincount`` (weighted, ``minlength=maxlength=n``): a value >= n is ignored, a negative one
refused on CPU; XLA dropped negatives until the tf-nightly of 2026-06-18, which refuses them too; up to TF 2.14
(an unsorted_segment_sum underneath) negatives were dropped, values >= n refused, and the weights
had a gradient, which 2.15's DenseBincount has not. ``jnp.bincount`` counts a negative value into
bin 0 and is differentiable; ``torch.bincount`` refuses negatives, grows past n, has no derivative.
PyTorch CUDA rows with out-of-range ids are skipped: a device-side assert would poison the
process's CUDA context.
"""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import numpy as np
from hypothesis import given, strategies as st
from hypothesis.extra import numpy as hnp

from suite import compare as cmp, out_of_range as oor, strategies as ss
from suite.behaviours import Floor, behaviour, on
from suite.expectations import Expectations, expect, expect_keys, expectations, raises
from suite.frameworks.tf_runner import in_v1_graph
from suite.program import Program

TF_UNSORTED = "https://www.tensorflow.org/api_docs/python/tf/math/unsorted_segment_sum"
TF_UNSORTED_MAX = "https://www.tensorflow.org/api_docs/python/tf/math/unsorted_segment_max"
TF_SEGMENT_MAX = "https://www.tensorflow.org/api_docs/python/tf/math/segment_max"
TF_XLA_UNCHECKED = "https://github.com/tensorflow/tensorflow/issues/120245"
XLA_GATHER_CLAMPS = "https://github.com/jax-ml/jax/issues/7538"  # XLA gather and scatter out of bounds
TF_XLA_NO_SEGMENT = "https://github.com/tensorflow/tensorflow/issues/50713"
JAX_SEGMENT_SUM = "https://docs.jax.dev/en/latest/_autosummary/jax.ops.segment_sum.html"
JAX_SEGMENT_MAX = "https://docs.jax.dev/en/latest/_autosummary/jax.ops.segment_max.html"
JAX_PROD_GRAD = "https://github.com/jax-ml/jax/issues/9296"
TORCH_SCATTER_REDUCE = "https://pytorch.org/docs/stable/generated/torch.Tensor.scatter_reduce_.html"
TORCH_INDEX_ADD = "https://pytorch.org/docs/stable/generated/torch.Tensor.index_add_.html"
TF_PROD_GRAD = "https://github.com/tensorflow/tensorflow/blob/v2.21.0/tensorflow/python/ops/math_grad.py#L604-L645"

BEHAVIOUR = behaviour(
    "segment-ids-out-of-range",
    sources=[],
    links=[
        "https://github.com/tensorflow/tensorflow/issues/52063",
        "https://github.com/jax-ml/jax/issues/14179",
        "https://github.com/tensorflow/tensorflow/issues/44700",
        "https://github.com/tensorflow/tensorflow/issues/32755",
        "https://github.com/tensorflow/tensorflow/issues/72785",
        "https://github.com/tensorflow/tensorflow/issues/59356",
        "https://github.com/pytorch/pytorch/issues/9998",
        TF_UNSORTED,
        JAX_SEGMENT_SUM,
        TORCH_SCATTER_REDUCE,
    ],
    floor=Floor(
        "mixed",
        "Values (segment and sparse-segment sums, means, sqrt_n, products, extremes of signed data) are held per "
        "segment: a sum, mean or sqrt_n at the rounding of its own rows' magnitudes (the same reduction of |data|, "
        "value_scales), a product or an extreme at |value|; the classifiers that tell which out-of-range rule a "
        "value follows keep the array-level floor. Gradients are held per element, purely relatively (scale |ref_i|): "
        "each is the positive cotangent of its segment gathered and divided by the count or its square root, times "
        "the segment's other elements for prod, summed with positive weights over repeated sparse indices (bincount: "
        "gathered alone), so no formula cancels; classifiers of gradient rows use the same scales.",
    ),
)

CATEGORIES = oor.CATEGORIES


# ---------------------------------------------------------------- the table of APIs
def _torch_reduce(reduce):
    def run(torch, d, i, n):
        if reduce == "sum":  # the common spelling of a segment sum in PyTorch
            return torch.zeros((n, *d.shape[1:]), dtype=d.dtype, device=d.device).index_add(0, i.long(), d)
        index = i.long().reshape(-1, *[1] * (d.dim() - 1)).expand_as(d)
        base = torch.zeros((n, *d.shape[1:]), dtype=d.dtype, device=d.device)
        return base.scatter_reduce(0, index, d, reduce, include_self=False)

    return run


def _op(tf_name, reduce, jax_name=None, torch_reduce=None):
    """A table entry: the native spelling per framework (``None``: the framework has no such API)
    and the float64 closed form of one non-empty segment."""
    return SimpleNamespace(
        reduce=reduce,
        tensorflow=lambda tf, d, i, n: getattr(tf.math, tf_name)(d, i, n),
        jax=None if jax_name is None else lambda jax, d, i, n: getattr(jax.ops, jax_name)(d, i, num_segments=n),
        torch=None if torch_reduce is None else _torch_reduce(torch_reduce),
    )


def _sqrt_n(rows):
    return rows.sum(0) / np.sqrt(len(rows))


UNSORTED = {
    "sum": _op("unsorted_segment_sum", lambda r: r.sum(0), "segment_sum", "sum"),
    "max": _op("unsorted_segment_max", lambda r: r.max(0), "segment_max", "amax"),
    "min": _op("unsorted_segment_min", lambda r: r.min(0), "segment_min", "amin"),
    "prod": _op("unsorted_segment_prod", lambda r: r.prod(0), "segment_prod", "prod"),
    "mean": _op("unsorted_segment_mean", lambda r: r.mean(0), None, "mean"),
    "sqrt_n": _op("unsorted_segment_sqrt_n", _sqrt_n),
}


def _sorted_op(name, reduce):
    return SimpleNamespace(
        reduce=reduce,
        tensorflow=lambda tf, d, i, n: getattr(tf.math, f"segment_{name}")(d, i),  # n rows: max(i) + 1
        jax=None
        if name == "mean"
        else lambda jax, d, i, n: getattr(jax.ops, f"segment_{name}")(d, i, num_segments=n, indices_are_sorted=True),
        torch=None,
    )


SORTED = {name: _sorted_op(name, UNSORTED[name].reduce) for name in ("sum", "mean", "max", "min", "prod")}
TABLES = {"unsorted": UNSORTED, "sorted": SORTED}


def apis(table, framework) -> tuple:
    return tuple(api for api, op in TABLES[table].items() if getattr(op, framework) is not None)


class Segment(Program):
    """``table[api]`` of ``data`` by ``ids`` into ``n`` segments (the sorted ops infer n)."""

    def tensorflow(tf, data, ids, *, api, n, table="unsorted"):
        return TABLES[table][api].tensorflow(tf, data, ids, n)

    def jax(jax, data, ids, *, api, n, table="unsorted"):
        return TABLES[table][api].jax(jax, data, ids, n)

    def torch(torch, data, ids, *, api, n, table="unsorted"):
        return TABLES[table][api].torch(torch, data, ids, n)


# ---------------------------------------------------------------- declarations
IDS_IAE = raises("InvalidArgumentError", r"segment_ids\[\d+\] = -?\d+ is out of range \[0, \d+\)")
#: a gradient's refusal: the forward's segment kernel or the gradient's gather of the cotangent, whichever
#: of the two (independent in a graph) runs first
GRAD_IAE = raises(
    "InvalidArgumentError",
    r"(segment_ids\[\d+\] = -?\d+ is out of range|indices\[\d+\] = -?\d+ is not in) \[0, \d+\)",
)
TORCH_OOB = raises("RuntimeError", r"index -?\d+ is out of bounds for dimension 0 with size \d+")
XLA_NO_KERNEL = raises("InvalidArgumentError", r"unsupported operations.*Segment(Sum|Mean|Max|Min|Prod)")
NOT_INCREASING = raises("InvalidArgumentError", r"segment ids are not increasing")
SORTED_NEGATIVE = raises("InvalidArgumentError", r"Segment id -\d+ out of range \[0, \d+\)")
JAX_PROD_NO_GRAD = raises("NotImplementedError", r"scatter_mul gradients are only implemented if `unique_indices=True`")
EMPTY = {"sum": "zero", "max": "lowest", "min": "highest", "prod": "one", "mean": "zero", "sqrt_n": "zero"}
LEAKING = ("sum", "prod", "mean", "sqrt_n")  # gradient = a gather of the cotangent (XLA clamps it)


#: the JAX observations FILL_OR_DROP decides (segment_prod has no gradient at all)
JAX_KEYS = [
    (k, api) for k in ("forward", "grad") for api in ("sum", "max", "min", "prod") if (k, api) != ("grad", "prod")
]


EXPECT = expectations(
    {
        # TensorFlow's CPU answers: ids >= n refused by the kernel, negative ids dropped (the docs)
        **{f"forward:{api}[above]": IDS_IAE for api in UNSORTED},
        **{f"grad:{api}[above]": GRAD_IAE for api in UNSORTED},
        **{
            f"{k}:{api}[{c}]": "dropped" for k in ("forward", "grad") for api in UNSORTED for c in ("negative", "below")
        },
        **{f"rows:{api}": "closed-form" for api in UNSORTED},
        # a NaN in a dropped row: the kept rows keep their gradient, the dropped row's own is 0
        **{f"nan-row:{api}[above]": GRAD_IAE for api in UNSORTED},
        **{f"nan-row:{api}[{c}]": "isolated" for api in UNSORTED for c in ("negative", "below")},
        **{f"empty:{api}": v for api, v in EMPTY.items()},
        **{f"empty-input:{api}": "fill" for api in UNSORTED},
        **{f"in-range-grad:{t}:{api}": "closed-form" for t in TABLES for api in TABLES[t]},
        # sorted ops: unsorted and negative ids refused, a missing segment is 0 (the docs)
        **{f"sorted:{api}[in-range]": "closed-form" for api in SORTED},
        **{f"sorted:{api}[unsorted]": NOT_INCREASING for api in SORTED},
        **{f"sorted:{api}[{c}]": SORTED_NEGATIVE for api in SORTED for c in ("negative", "below")},
        **{f"sorted:{api}[gap]": "zero" if api != "prod" else "one" for api in SORTED},
    },
    # -- XLA: nothing raises; the forward drops, the gradient's gather clamps
    *expect_keys(
        "forward:{api}[{c}]",
        "dropped",
        over={"api": UNSORTED, "c": ("above",)},
        framework="tensorflow",
        mode="xla",
        link=TF_XLA_UNCHECKED,
        reason="the XLA lowering of UnsortedSegment* is an XLA Scatter, which skips out-of-bounds updates: "
        "no error, the id >= n is dropped (eager and graph raise)",
    ),
    *expect_keys(
        "grad:{api}[{c}]",
        "leaks",
        over={"api": LEAKING, "c": ("above",)},
        framework="tensorflow",
        mode="xla",
        link=XLA_GATHER_CLAMPS,
        reason="the gradient gathers the cotangent at the ids, and XLA Gather clamps an id >= n to n-1: the "
        "element the forward dropped receives the last segment's cotangent (gather and scatter are not duals "
        "out of bounds; JAX fixed the same bug in its segment_sum, jax#8634)",
    ),
    *expect_keys(
        "grad:{api}[{c}]",
        "dropped",
        over={"api": ("max", "min"), "c": ("above",)},
        framework="tensorflow",
        mode="xla",
        link=XLA_GATHER_CLAMPS,
        reason="the max/min gradient compares the element with the gathered (clamped) segment's value, which "
        "it did not reach: the mask is false and the gradient 0",
    ),
    # -- GPU (declared from the docs; no TensorFlow GPU here)
    *expect_keys(
        [f"{k}:{api}[above]" for k in ("forward", "grad") for api in UNSORTED],
        "dropped",
        framework="tensorflow",
        mode="eager|function|graph",
        device="gpu",
        link=TF_UNSORTED,
        reason="unsorted_segment_sum docs: on GPU out-of-bound ids are not checked ('safe but unspecified "
        "behavior, which may include ignoring out-of-bound indices'); declared, not measured",
    ),
    # -- empty segments
    *[
        expect(
            f"empty:{api}",
            v,
            framework="jax",
            link=JAX_SEGMENT_MAX,
            reason="jax.ops.segment_max/min start from the reduction's identity, -inf/+inf for floats, where "
            "TensorFlow uses numeric_limits<T>::lowest()/max()",
        )
        for api, v in (("max", "-inf"), ("min", "+inf"))
    ],
    *[
        expect(
            f"empty:{api}",
            "zero",
            framework="torch",
            link=TORCH_SCATTER_REDUCE,
            reason="scatter_reduce with include_self=False leaves a position no index reaches at the value of "
            "self, here the zeros it starts from (no identity of the reduction, 0 for prod too)",
        )
        for api in ("max", "min", "prod")
    ],
    *[
        expect(
            f"sorted:{api}[gap]",
            v,
            framework="jax",
            link=JAX_SEGMENT_MAX,
            reason="jax.ops.segment_* with indices_are_sorted=True is the same scatter: a segment no id names "
            "holds the reduction's identity (-inf/+inf for max/min, 1 for prod), TensorFlow's sorted ops 0",
        )
        for api, v in (("max", "-inf"), ("min", "+inf"))
    ],
    # -- JAX drops every out-of-range id
    *expect_keys(
        [f"{k}:{api}[{c}]" for k, api in JAX_KEYS for c in CATEGORIES],
        "dropped",
        framework="jax",
        link=JAX_SEGMENT_SUM,
        reason="jax.ops.segment_* default to mode FILL_OR_DROP: 'values outside of the range [0, num_segments) "
        "are dropped and do not contribute', and their gradient drops them too (jax#8634 fixed)",
    ),
    *expect_keys(
        "grad:prod[{c}]",
        JAX_PROD_NO_GRAD,
        over={"c": CATEGORIES},
        framework="jax",
        link=JAX_PROD_GRAD,
        reason="segment_prod is scatter_mul, whose gradient JAX implements only with unique_indices=True "
        "(it was wrong before, jax#9296): no gradient",
    ),
    expect(
        "in-range-grad:unsorted:prod",
        JAX_PROD_NO_GRAD,
        framework="jax",
        link=JAX_PROD_GRAD,
        reason="scatter_mul has no gradient with repeated indices",
    ),
    expect(
        "in-range-grad:sorted:prod",
        JAX_PROD_NO_GRAD,
        framework="jax",
        link=JAX_PROD_GRAD,
        reason="scatter_mul has no gradient with repeated indices, sorted or not",
    ),
    *[
        expect(
            f"sorted:{api}[{c}]",
            v,
            framework="jax",
            link=JAX_SEGMENT_SUM,
            reason="indices_are_sorted is a promise JAX does not check: on CPU the scatter reduces unsorted ids "
            "per segment; a negative id is dropped (FILL_OR_DROP)",
        )
        for api in apis("sorted", "jax")
        for c, v in (("unsorted", "as-unsorted"), ("negative", "dropped"), ("below", "dropped"))
    ],
    # -- PyTorch refuses every out-of-range id
    *expect_keys(
        [f"{k}:{api}[{c}]" for k in ("forward", "grad") for api in apis("unsorted", "torch") for c in CATEGORIES],
        TORCH_OOB,
        framework="torch",
        device="cpu",
        link=TORCH_SCATTER_REDUCE,
        reason="index_add and scatter_reduce check every index on CPU ('index 3 is out of bounds for "
        "dimension 0 with size 3'), negatives too: no value, no gradient",
    ),
    # -- a NaN in a dropped row (kept rows are isolated everywhere; the dropped row's own gradient differs)
    *expect_keys(
        "nan-row:prod[{c}]",
        "nan",
        over={"c": ("negative", "below")},
        framework="tensorflow",
        link=TF_PROD_GRAD,
        reason="_UnsortedSegmentProdGrad multiplies the gathered cotangent (0 at a dropped id) by "
        "prod / x, which is NaN where x is: 0 * NaN, so the dropped NaN row's own gradient is NaN (the kept "
        "rows keep theirs)",
    ),
    *expect_keys(
        "nan-row:{api}[{c}]",
        "leaks",
        over={"api": ("sum", "mean", "sqrt_n"), "c": ("above",)},
        framework="tensorflow",
        mode="xla",
        link=XLA_GATHER_CLAMPS,
        reason="the gradient gathers the cotangent at the ids, and XLA Gather clamps an id >= n to n-1: the "
        "dropped NaN row receives the last segment's cotangent (the kept rows keep theirs)",
    ),
    *expect_keys(
        "nan-row:{api}[{c}]",
        "isolated",
        over={"api": ("max", "min"), "c": ("above",)},
        framework="tensorflow",
        mode="xla",
        link=TF_XLA_UNCHECKED,
        reason="XLA raises nowhere: the id >= n is dropped from the forward, and the max/min gradient compares "
        "the NaN row with the clamped segment's value, which it did not reach: 0 there, the kept rows keep theirs",
    ),
    *expect_keys(
        "nan-row:{api}[{c}]",
        "isolated",
        over={"api": ("sum", "max", "min"), "c": ("above",)},
        framework="jax",
        link=JAX_SEGMENT_SUM,
        reason="jax.ops.segment_* drop every id outside [0, num_segments) (FILL_OR_DROP), in the gradient too: the "
        "NaN row gets 0 and the kept rows keep theirs",
    ),
    *expect_keys(
        "nan-row:prod[{c}]",
        "nan",
        over={"c": ("above",)},
        framework="tensorflow",
        mode="xla",
        link=TF_PROD_GRAD,
        reason="XLA's gather clamps the id >= n to the last segment, whose cotangent times prod / x at the NaN "
        "row is NaN (the kept rows keep theirs)",
    ),
    *expect_keys(
        "nan-row:{api}[above]",
        "isolated",
        over={"api": ("sum", "mean", "sqrt_n", "max", "min")},
        framework="tensorflow",
        mode="eager|function|graph",
        device="gpu",
        link=TF_UNSORTED,
        reason="unsorted_segment_sum docs: on GPU out-of-bound ids are not checked ('may include ignoring "
        "out-of-bound indices'); declared as this module's GPU 'dropped' gradients are, not measured",
    ),
    expect(
        "nan-row:prod[above]",
        "nan",
        framework="tensorflow",
        mode="eager|function|graph",
        device="gpu",
        link=TF_PROD_GRAD,
        reason="on GPU the id >= n is not checked and its cotangent is dropped, but prod / x is NaN at the "
        "NaN row (0 * NaN, as for a negative id); declared, not measured",
    ),
    *expect_keys(
        "nan-row:prod[{c}]",
        JAX_PROD_NO_GRAD,
        over={"c": CATEGORIES},
        framework="jax",
        link=JAX_PROD_GRAD,
        reason="segment_prod is scatter_mul, whose gradient JAX implements only with unique_indices=True",
    ),
    *expect_keys(
        "nan-row:{api}[{c}]",
        TORCH_OOB,
        over={"api": apis("unsorted", "torch"), "c": CATEGORIES},
        framework="torch",
        device="cpu",
        link=TORCH_INDEX_ADD,
        reason="index_add and scatter_reduce check every index on CPU, negatives too: no gradient to isolate",
    ),
    # -- XLA: no kernel for the sorted ops
    *[
        expect(
            key,
            XLA_NO_KERNEL,
            framework="tensorflow",
            mode="xla",
            link=TF_XLA_NO_SEGMENT,
            reason="tf.math.segment_* have no XLA kernel (the output's length is max(id) + 1, data-dependent): "
            "jit_compile=True refuses the function",
        )
        for api in SORTED
        for key in (
            f"sorted:{api}[in-range]",
            f"sorted:{api}[unsorted]",
            f"sorted:{api}[negative]",
            f"sorted:{api}[below]",
            f"sorted:{api}[gap]",
            f"in-range-grad:sorted:{api}",
        )
    ],
)


# ---------------------------------------------------------------- strategies
#: (K, d) data shapes, each with its num_segments (static: XLA and jax.jit compile once per shape)
N_OF = {(5, 2): 3, (4, 1): 2, (6, 3): 4}


@dataclasses.dataclass(frozen=True)
class SegmentCase:
    data: np.ndarray  # (K, d), distinct nonzero values: no ties, no rule mistaken for another
    ids: np.ndarray  # (K,) int32: in range, >= n, [-n, 0) and < -n mixed, with repeats
    n: int
    w: np.ndarray  # cotangent (n, d), positive


@st.composite
def segment_cases(draw, *, in_range_only=False) -> SegmentCase:
    dtype, shape = draw(ss.dtypes_and_shapes(shapes=tuple(N_OF)), label="dtype, data shape")
    n = N_OF[shape]
    size = ss.floats(dtype, 0.5, 4.0)  # products of up to 6 stay far from overflow
    signed = st.tuples(st.booleans(), size).map(lambda t: -t[1] if t[0] else t[1])
    data = draw(hnp.arrays(dtype, shape, elements=signed, unique=True), label="data")
    ids = draw(st.lists(oor.ids(n, in_range_only=in_range_only), min_size=shape[0], max_size=shape[0]), label="ids")
    w = draw(hnp.arrays(dtype, (n, shape[1]), elements=ss.floats(dtype, 0.5, 4.0)), label="cotangent")
    return SegmentCase(data, np.array(ids, np.int32), n, w)


#: Explicit examples: each dtype's data signature with every out-of-range category among its ids.
SEGMENT_EXAMPLES = [
    SegmentCase(oor.distinct(d, s), oor.every_category(N_OF[s], s[0]), N_OF[s], oor.positive(d, (N_OF[s], s[1])))
    for d, s in ss.one_per_dtype(ss.paired(tuple(N_OF)))
]
#: Every category again, with the -1 on the last row, whose values are the extremes of the data (the
#: lowest of columns 0 and 2, the highest of column 1): sent to segment 0 (clamped) or n-1 (wrapped) it
#: would move that segment's min and max, so only ``dropped`` fits the negative id (in SEGMENT_EXAMPLES
#: the -1 sits on a row that is no segment's extreme: min and max cannot tell dropped from clamped there).
NEGATIVE_ON_EXTREME_ROW = SegmentCase(
    oor.distinct(np.float32, (6, 3)), np.array([2, 4, 0, -5, 6, -1], np.int32), 4, oor.positive(np.float32, (4, 3))
)


# ---------------------------------------------------------------- closed forms and classifiers
def closed_form(api, data, ids, n):
    """Float64 ``(out, nonempty)``: ``api``'s reduction of each segment in [0, n) (ids outside it
    dropped) and which segments any id reaches; an empty segment's row is left 0.

    >>> out, full = closed_form("max", np.array([[1.], [3.], [2.]]), np.array([0, 0, 5]), 2)
    >>> out.tolist(), full.tolist()
    ([[3.0], [0.0]], [True, False])
    """
    data = np.asarray(data, np.float64)
    out, nonempty = np.zeros((n, *data.shape[1:])), np.zeros(n, bool)
    for s in range(n):
        rows = data[np.asarray(ids) == s]
        if len(rows):
            out[s], nonempty[s] = UNSORTED[api].reduce(rows), True
    return out, nonempty


def closed_form_grad(api, data, ids, n, w) -> np.ndarray:
    """Float64 gradient of ``sum(w * out)`` w.r.t. ``data`` with out-of-range ids dropped (their
    rows 0). Max/min: the element that is its segment's extreme (data has no ties)."""
    data, ids = np.asarray(data, np.float64), np.asarray(ids)
    out, _ = closed_form(api, data, ids, n)
    g = np.zeros_like(data)
    for p, s in enumerate(ids.tolist()):
        if not 0 <= s < n:
            continue
        members = ids == s
        k, ws = members.sum(), np.asarray(w[s], np.float64)
        if api == "sum":
            g[p] = ws
        elif api == "mean":
            g[p] = ws / k
        elif api == "sqrt_n":
            g[p] = ws / np.sqrt(k)
        elif api == "prod":
            others = members.copy()
            others[p] = False
            g[p] = ws * data[others].prod(0)
        else:  # max, min
            g[p] = np.where(data[p] == out[s], ws, 0.0)
    return g


def relative(ref) -> np.ndarray:
    """Per-element scales of a gradient of this module: ``|ref_i|`` (each element is a gathered positive
    cotangent times factors, or a sum of such, so no formula cancels: held relatively per element)."""
    return np.abs(np.asarray(ref, np.float64))


def value_scales(api, data, ids, n) -> np.ndarray:
    """Per segment, the scale of a reduction's value (:func:`suite.compare.floor`): a sum, mean
    or sqrt_n sums its own segment's rows, so it is held at the rounding of that sum of
    magnitudes (the same reduction of ``|data|``), not at the largest segment's; a product
    rounds relatively and an extreme is one of its inputs: ``|value|``."""
    if api in ("sum", "mean", "sqrt_n"):
        return closed_form(api, np.abs(np.asarray(data, np.float64)), ids, n)[0]
    return np.abs(closed_form(api, data, ids, n)[0])


def effective_ids(ids, n, rule: dict) -> np.ndarray:
    """The ids each out-of-range category is sent to under ``rule`` (category -> a
    :data:`suite.out_of_range.GRAD_RULES` name; ``dropped`` becomes -1, which no segment is)."""
    out = []
    for i, c in zip(np.asarray(ids).tolist(), oor.categories(ids, n).tolist()):
        row = i if c == "in-range" else oor.GRAD_RULES[rule[c]](i, n)
        out.append(-1 if row is None else row)
    return np.array(out, np.int64)


def fill_label(values, dtype) -> str:
    """What an empty segment holds: ``zero``, ``one``, ``lowest``/``highest`` (the dtype's finite
    extremes), ``-inf``/``+inf``, ``nan``, ``other`` (or several different values: ``mixed``)."""
    v = np.unique(np.asarray(values, np.float64))
    if v.size != 1:
        return "nan" if np.isnan(values).all() else "mixed"
    v, f = v[0], np.finfo(dtype)
    names = {0.0: "zero", 1.0: "one", float(f.min): "lowest", float(f.max): "highest", -np.inf: "-inf", np.inf: "+inf"}
    return "nan" if np.isnan(v) else names.get(float(v), "other")


def _fits(out, ref, nonempty, fill, dtype) -> bool:
    out = np.asarray(out)
    if out.shape != ref.shape:
        return False
    if cmp.rel_err(out[nonempty], ref[nonempty], dtype=dtype) > cmp.GRAD.of(dtype):
        return False
    return (~nonempty).sum() == 0 or fill_label(out[~nonempty], dtype) == fill


def classify_forward(api, out, data, ids, n, fill) -> dict:
    """Per out-of-range category present, the rule (``dropped``, ``clamped-row``, ``wrapped-row``)
    whose closed form the output matches, its empty segments holding ``fill`` (a
    :func:`fill_label`); ``other`` if none does, ``None`` if several do."""

    def fits(rule):
        return _fits(out, *closed_form(api, data, effective_ids(ids, n, rule), n), fill, data.dtype)

    matches = oor.fitting_rules(ids, n, oor.GRAD_RULES, fits)
    return oor.label_rules(matches, [c for c in CATEGORIES if c in oor.categories(ids, n)])


def classify_grad_rows(grad, ids, n) -> dict:
    """Per out-of-range category, the gradient rows of its elements: ``dropped`` (0), ``nan``, or
    ``leaks`` (a nonzero gradient reaches an element the forward did not use)."""
    found: dict = {}
    for p, c in enumerate(oor.categories(ids, n).tolist()):
        if c == "in-range":
            continue
        row = np.asarray(grad[p])
        seen = {"dropped"} if not np.any(row) else {"nan"} if np.isnan(row).all() else {"leaks"}
        found[c] = found[c] & seen if c in found else seen
    return {c: oor.verdict(s, none_fits="mixed") for c, s in found.items()}


_FILLS: dict = {}


def fill_of(subject, api, data, n):
    """The value ``api`` gives an empty segment on this row, measured once per (row, API, dtype,
    shape) with every id 0 (segments 1..n-1 empty): a :func:`fill_label`."""
    key = (subject.id, api, data.dtype.str, data.shape)
    if key not in _FILLS:
        out = np.asarray(subject.run(Segment.of(subject), data, np.zeros(len(data), np.int32), api=api, n=n))
        _FILLS[key] = fill_label(out[1:], data.dtype)
    return _FILLS[key]


def _grad(subject, case, ids, api, **static):
    return subject.vjp(Segment.of(subject), case.data, ids, cotangent=case.w, api=api, n=case.n, **static)[1][0]


def _attempt_grad(runner, case, ids, api, **static):
    """``(gradient, None)``, or ``(None, raises:<Error>)`` where the framework refuses (a function XLA
    cannot compile is refused again without compiling)."""
    res, seen = runner.attempt(
        "vjp",
        Segment.of(runner),
        case.data,
        ids,
        cotangent=case.w,
        remember=cmp.xla_refusal,
        api=api,
        n=case.n,
        **static,
    )
    return (None if res is None else np.asarray(res[1][0])), seen


# ---------------------------------------------------------------- properties: unsorted_segment_*
@ss.explicit("case", [*SEGMENT_EXAMPLES, NEGATIVE_ON_EXTREME_ROW])
@given(case=segment_cases())
def test_unsorted_forward_out_of_range_is_declared(subject, record, case):
    """Each unsorted_segment_* op per out-of-range category: dropped, clamped, wrapped, or refused."""
    record.example(data=case.data, ids=case.ids)
    oor.skip_torch_cuda(subject, case.ids, case.n)
    names = apis("unsorted", subject.framework)
    fills = {api: fill_of(subject, api, case.data, case.n) for api in names}

    def run(apis_, idx):
        return tuple(subject.run(Segment.of(subject), case.data, idx, api=api, n=case.n) for api in apis_)

    def judge(api, idx, out):
        return classify_forward(api, out, case.data, idx, case.n, fills[api])

    oor.observe(subject, record, EXPECT, case.ids, case.n, names, "forward", run, judge)


@ss.explicit("case", SEGMENT_EXAMPLES)
@given(case=segment_cases())
def test_unsorted_gradient_out_of_range_is_declared(subject, record, case):
    """The gradient of sum(w * out): zero at dropped elements, and the closed form at the in-range ones."""
    record.example(data=case.data, ids=case.ids, w=case.w)
    oor.skip_torch_cuda(subject, case.ids, case.n)
    names = apis("unsorted", subject.framework)

    def run(apis_, idx):
        return tuple(_grad(subject, case, idx, api) for api in apis_)

    def judge(api, idx, grad):
        grad, inside = np.asarray(grad), oor.categories(idx, case.n) == "in-range"
        ref = closed_form_grad(api, case.data, idx, case.n, case.w)
        if inside.any():
            t = cmp.GRAD.of(case.data.dtype)
            kept = cmp.rel_err(grad[inside], ref[inside], dtype=case.data.dtype, scale=relative(ref[inside])) <= t
            record.check(EXPECT, **{f"rows:{api}": "closed-form" if kept else "spread"})
            if kept:
                record.close(
                    name=f"{api} in-range grad rows",
                    out=grad[inside],
                    ref=ref[inside].astype(grad.dtype),
                    oracle="closed-form",
                    scale=relative(ref[inside]),
                )
        return classify_grad_rows(grad, idx, case.n)

    oor.observe(subject, record, EXPECT, case.ids, case.n, names, "grad", run, judge, sites=False)


def nan_row_label(grad, ref, inside, nan_rows, dtype) -> str:
    """``spreads`` where a kept (in-range) row's gradient is not its closed form ``ref``; else what
    the NaN rows' own gradient is: ``isolated`` (0), ``nan``, or ``leaks`` (a segment's cotangent)."""
    grad = np.asarray(grad)
    at = relative(ref[inside])
    if inside.any() and cmp.rel_err(grad[inside], ref[inside], dtype=dtype, scale=at) > cmp.GRAD.of(dtype):
        return "spreads"
    own = grad[nan_rows]
    return "isolated" if not np.any(own) else "nan" if np.isnan(own).all() else "leaks"


@ss.explicit("case", SEGMENT_EXAMPLES)
@given(case=segment_cases())
def test_nan_in_dropped_row_stays_out_of_kept_gradients(subject, record, case):
    """Per out-of-range category, its rows all NaN (the other out-of-range ids set to 0): the kept rows'
    gradient of sum(w * out) is their closed form, and the NaN rows' own gradient is 0."""
    record.example(data=case.data, ids=case.ids, w=case.w)
    oor.skip_torch_cuda(subject, case.ids, case.n)
    cats = oor.categories(case.ids, case.n)
    for c in (c for c in CATEGORIES if c in cats):
        ids, nan_rows = oor.isolate(case.ids, case.n, c), cats == c
        data = case.data.copy()
        data[nan_rows] = np.nan
        inside = oor.categories(ids, case.n) == "in-range"
        for api in apis("unsorted", subject.framework):
            grad, seen = _attempt_grad(subject, dataclasses.replace(case, data=data), ids, api)
            if seen is None:
                ref = closed_form_grad(api, data, ids, case.n, case.w).astype(case.data.dtype)
                seen = nan_row_label(grad, ref, inside, nan_rows, case.data.dtype)
                if seen != "spreads":
                    record.close(
                        name=f"{api} kept rows [{c}]",
                        out=grad[inside],
                        ref=ref[inside],
                        oracle="closed-form",
                        scale=relative(ref[inside]),
                    )
            record.check(EXPECT, **{f"nan-row:{api}[{c}]": seen})


@given(case=segment_cases(in_range_only=True))
def test_unsorted_in_range_match_closed_form_and_oracles(subject, oracles, record, case):
    """Every id in [0, n): each op's non-empty segments and its gradient, against the closed form and the oracles."""
    record.example(data=case.data, ids=case.ids, w=case.w)
    for api in apis("unsorted", subject.framework):
        out = np.asarray(subject.run(Segment.of(subject), case.data, case.ids, api=api, n=case.n))
        ref, full = closed_form(api, case.data, case.ids, case.n)
        at = value_scales(api, case.data, case.ids, case.n)[full]
        record.close(name=f"{api} value", out=out[full], ref=ref[full].astype(out.dtype), oracle="closed-form",
                     scale=at)  # fmt: skip
        grad, seen = _attempt_grad(subject, case, case.ids, api)
        record.check(EXPECT, **{f"in-range-grad:unsorted:{api}": seen or "closed-form"})
        if seen is None:
            ref_g = closed_form_grad(api, case.data, case.ids, case.n, case.w)
            record.close(
                name=f"{api} grad", out=grad, ref=ref_g.astype(grad.dtype), oracle="closed-form", scale=relative(ref_g)
            )
        for o in oracles:
            if api not in apis("unsorted", o.framework):
                continue
            theirs = np.asarray(o.run(Segment.of(o), case.data, case.ids, api=api, n=case.n))
            record.close(name=f"{api} value", out=out[full], ref=theirs[full], oracle=o.id, scale=at)
            g_o, seen_o = _attempt_grad(o, case, case.ids, api)
            if seen is None and seen_o is None:
                record.close(name=f"{api} grad", out=grad, ref=g_o, oracle=o.id, scale=relative(g_o))


@given(case=segment_cases(in_range_only=True))
def test_empty_segment_value_is_declared(subject, record, case):
    """What a segment no id reaches holds: 0, 1, the dtype's lowest/highest value, or -inf/+inf."""
    record.example(data=case.data, ids=case.ids)
    for api in apis("unsorted", subject.framework):
        record.check(EXPECT, **{f"empty:{api}": fill_of(subject, api, case.data, case.n)})
        _, full = closed_form(api, case.data, case.ids, case.n)
        if not full.all():  # the drawn ids leave a segment empty: the same value there
            out = np.asarray(subject.run(Segment.of(subject), case.data, case.ids, api=api, n=case.n))
            record.check(EXPECT, **{f"empty:{api}": fill_label(out[~full], case.data.dtype)})


@given(pair=ss.dtypes_and_shapes(shapes=tuple(N_OF)))
def test_empty_input(subject, record, pair):
    """No elements at all: every segment holds the op's empty value and the gradient has shape (0, d)."""
    dtype, shape = pair
    n = N_OF[shape]
    data, ids, w = np.zeros((0, shape[1]), dtype), np.zeros((0,), np.int32), np.ones((n, shape[1]), dtype)
    record.example(data=data, ids=ids, w=w)
    for api in apis("unsorted", subject.framework):
        fill = fill_of(subject, api, np.ones(shape, dtype), n)
        res, seen = subject.attempt("vjp", Segment.of(subject), data, ids, cotangent=w, api=api, n=n)
        if seen is None:
            out, (grad, _) = res
            ok = np.shape(out) == (n, shape[1]) and fill_label(out, dtype) == fill and np.shape(grad) == data.shape
            seen = "fill" if ok else "other"
        record.check(EXPECT, **{f"empty-input:{api}": seen})


# ---------------------------------------------------------------- properties: sorted segment_*
@st.composite
def sorted_cases(draw) -> SegmentCase:
    """In-range ids, sorted, the last one n-1 (so that the sorted ops' n rows match num_segments)."""
    case = draw(segment_cases(in_range_only=True))
    ids = np.sort(case.ids)
    ids[-1] = case.n - 1
    return dataclasses.replace(case, ids=ids)


#: Sorted ids with a gap: segment 1 is named by no id (data and cotangent as in SEGMENT_EXAMPLES'
#: float32 signature), so each segment_* op shows what a missing segment holds.
SORTED_GAP_EXAMPLE = SegmentCase(
    oor.distinct(np.float32, (6, 3)), np.array([0, 0, 2, 2, 3, 3], np.int32), 4, oor.positive(np.float32, (4, 3))
)


def _sorted_run(subject, case, ids, api):
    res, seen = subject.attempt(
        "run", Segment.of(subject), case.data, ids, remember=cmp.xla_refusal, api=api, n=case.n, table="sorted"
    )
    return (None if res is None else np.asarray(res)), seen


@on("tensorflow", "jax")  # PyTorch has no sorted segment reduction with these semantics
@ss.explicit("case", [SORTED_GAP_EXAMPLE])
@given(case=sorted_cases())
def test_sorted_segments_in_range_and_gaps(subject, oracles, record, case):
    """Sorted ids: each segment_* op's non-empty segments, its gradient, and what a gap (a missing id) holds."""
    record.example(data=case.data, ids=case.ids, w=case.w)
    for api in apis("sorted", subject.framework):
        out, seen = _sorted_run(subject, case, case.ids, api)
        ref, full = closed_form(api, case.data, case.ids, case.n)
        if seen is None:
            seen = (
                "closed-form"
                if _fits(out, ref, full, fill_label(out[~full], case.data.dtype), case.data.dtype)
                else "other"
            )
            if seen == "closed-form" and not full.all():
                record.check(EXPECT, **{f"sorted:{api}[gap]": fill_label(out[~full], case.data.dtype)})
        elif not full.all():
            record.check(EXPECT, **{f"sorted:{api}[gap]": seen})
        record.check(EXPECT, **{f"sorted:{api}[in-range]": seen})
        if seen == "closed-form":
            at = value_scales(api, case.data, case.ids, case.n)[full]
            record.close(name=f"{api} value", out=out[full], ref=ref[full].astype(out.dtype), oracle="closed-form",
                         scale=at)  # fmt: skip
            for o in oracles:
                if api in apis("sorted", o.framework):
                    theirs = np.asarray(o.run(Segment.of(o), case.data, case.ids, api=api, n=case.n, table="sorted"))
                    record.close(name=f"{api} value", out=out[full], ref=theirs[full], oracle=o.id, scale=at)
        grad, seen = _attempt_grad(subject, case, case.ids, api, table="sorted")
        record.check(EXPECT, **{f"in-range-grad:sorted:{api}": seen or "closed-form"})
        if seen is None:
            ref_g = closed_form_grad(api, case.data, case.ids, case.n, case.w)
            record.close(
                name=f"{api} grad", out=grad, ref=ref_g.astype(grad.dtype), oracle="closed-form", scale=relative(ref_g)
            )


@on("tensorflow", "jax")  # PyTorch has no sorted segment reduction with these semantics
@given(case=sorted_cases())
def test_sorted_segments_unsorted_or_negative_ids_are_declared(subject, record, case):
    """Sorted ops given unsorted ids (reversed), a first id of -1 or one far below -n: refused, reduced as
    unsorted, or dropped."""
    variants = {
        "negative": np.concatenate([[-1], case.ids[1:]]).astype(np.int32),
        "below": np.concatenate([[-case.n - 3], case.ids[1:]]).astype(np.int32),
    }
    if case.ids[0] != case.ids[-1]:
        variants["unsorted"] = case.ids[::-1].copy()
    record.example(data=case.data, ids=case.ids, **{f"ids[{k}]": v for k, v in variants.items()})
    for api in apis("sorted", subject.framework):
        for kind, ids in variants.items():
            out, seen = _sorted_run(subject, case, ids, api)
            if seen is None:
                ref, full = closed_form(api, case.data, ids, case.n)
                fits = out.shape == ref.shape and cmp.rel_err(
                    out[full], ref[full], dtype=case.data.dtype
                ) <= cmp.GRAD.of(case.data.dtype)
                seen = ("as-unsorted" if kind == "unsorted" else "dropped") if fits else "other"
            record.check(EXPECT, **{f"sorted:{api}[{kind}]": seen})


# ---------------------------------------------------------------- sparse_segment_*
TF_SPARSE_SEGMENT = "https://www.tensorflow.org/api_docs/python/tf/sparse/segment_sum"
TORCH_EMBEDDING_BAG = "https://pytorch.org/docs/stable/generated/torch.nn.functional.embedding_bag.html"
SPARSE_APIS = {"tensorflow": ("sum", "mean", "sqrt_n"), "jax": ("sum", "mean", "sqrt_n"), "torch": ("sum", "mean")}
#: what a row index (into data) or a segment id out of range is refused with, per TensorFlow kernel
INDEX_IAE = r"(Bad: indices\[\d+\] == -?\d+ out of range|Index -?\d+ out of range) \[0, ?\d+\)"
SPARSE_REFUSALS = {
    "above": raises("InvalidArgumentError", INDEX_IAE),
    "negative": raises("InvalidArgumentError", INDEX_IAE),
    "below": raises("InvalidArgumentError", INDEX_IAE),
    "seg-above": raises("InvalidArgumentError", r"(segment ids must be < num_segments|Invalid number of segments)"),
    "seg-negative": raises("InvalidArgumentError", r"Segment id -\d+ out of range \[0, \d+\)"),
    "seg-unsorted": raises("InvalidArgumentError", r"segment ids are not increasing"),
}
SPARSE_XLA = raises("InvalidArgumentError", r"unsupported operations.*SparseSegment(Sum|Mean|SqrtN)")
TORCH_BAG_OOB = raises(
    "RuntimeError",
    r"(Index \d+ of input takes value -?\d+ which is not in the valid range|idx < num_embeddings"
    r"|Expected i < index_size to be true)",  # far below -R: the offsets check fires first
)

#: ``tf.sparse.segment_{sum,mean,sqrt_n}(data, indices, segment_ids, num_segments=n)``: rows
#: ``data[indices]`` reduced by sorted segment ids. Keys: ``{kind}:{api}[{c}]`` with kind ``forward``
#: (the value) or ``grad`` (the gradient with respect to data, fetched alone), ``c`` an out-of-range
#: category of the row indices or ``seg-above``/``seg-negative``/``seg-unsorted`` (segment ids >= n,
#: below 0, not sorted); ``empty:{api}``, a segment no id names; ``in-range:{api}`` and
#: ``in-range-grad:{api}`` against the closed form.
SPARSE = Expectations(
    {
        **{
            f"{k}:{api}[{c}]": r
            for k in ("forward", "grad")
            for api in SPARSE_APIS["tensorflow"]
            for c, r in SPARSE_REFUSALS.items()
        },
        **{f"empty:{api}": "zero" for api in SPARSE_APIS["tensorflow"]},
        **{f"in-range:{api}": "closed-form" for api in SPARSE_APIS["tensorflow"]},
        **{f"in-range-grad:{api}": "closed-form" for api in SPARSE_APIS["tensorflow"]},
    },
    [
        *[
            expect(
                key,
                SPARSE_XLA,
                framework="tensorflow",
                mode="xla",
                link=TF_XLA_NO_SEGMENT,
                reason="tf.sparse.segment_* have no XLA kernel (SparseSegmentSumWithNumSegments and its kin are "
                "not registered for XLA_CPU_JIT): jit_compile=True refuses the function",
            )
            for api in SPARSE_APIS["tensorflow"]
            for key in (
                *[f"{k}:{api}[{c}]" for k in ("forward", "grad") for c in SPARSE_REFUSALS],
                f"in-range:{api}",
                f"in-range-grad:{api}",
                f"empty:{api}",
            )
        ],
        *[
            expect(
                f"grad:{api}[seg-unsorted]",
                "as-unsorted",
                framework="tensorflow",
                mode="function|graph",
                device="cpu",
                link=TF_SPARSE_SEGMENT,
                reason="with only the gradient fetched the forward op, which checks the order, is pruned; the "
                "gradient kernel gathers the cotangent at each segment id without checking it: the gradient is "
                "the one of the unsorted ids (eagerly the forward runs under the tape and refuses them)",
            )
            for api in SPARSE_APIS["tensorflow"]
        ],
        *[
            expect(
                f"{k}:{api}[{c}]",
                TORCH_BAG_OOB,
                framework="torch",
                device="cpu",  # CUDA rows with out-of-range ids are declared skips
                link=TORCH_EMBEDDING_BAG,
                reason="embedding_bag checks every index on CPU, negatives too (no wrap, no fill); its bags are "
                "offsets, so out-of-range or unsorted segment ids cannot be spelled",
            )
            for k in ("forward", "grad")
            for api in SPARSE_APIS["torch"]
            for c in CATEGORIES
        ],
    ],
    __name__,
    scope="sparse",
)


class SparseSegment(Program):
    """``tf.sparse.segment_<api>`` of rows ``data[indices]`` by sorted ``segment_ids`` into ``n`` segments.
    PyTorch: ``embedding_bag`` with one bag per segment (offsets from the sorted ids); JAX has no such op,
    and its spelling is a gather then ``segment_sum`` (run in range only)."""

    def tensorflow(tf, data, indices, segment_ids, *, api, n):
        return getattr(tf.sparse, f"segment_{api}")(data, indices, segment_ids, num_segments=n)

    def jax(jax, data, indices, segment_ids, *, api, n):
        jnp = jax.numpy
        total = jax.ops.segment_sum(data[indices], segment_ids, num_segments=n, indices_are_sorted=True)
        count = jax.ops.segment_sum(jnp.ones(segment_ids.shape, data.dtype), segment_ids, num_segments=n)
        scale = {"sum": jnp.ones_like(count), "mean": count, "sqrt_n": jnp.sqrt(count)}[api]
        return total / jnp.maximum(scale, 1)[:, None]

    def torch(torch, data, indices, segment_ids, *, api, n):
        offsets = torch.searchsorted(segment_ids.long(), torch.arange(n, device=data.device))
        return torch.nn.functional.embedding_bag(indices.long(), data, offsets, mode=api)


class SparseSegmentGrad(Program):
    """The gradient of ``sum(w * SparseSegment)`` with respect to ``data``, fetched alone (densified)."""

    def tensorflow(tf, data, indices, segment_ids, w, *, api, n):
        if in_v1_graph():
            g = tf.gradients(SparseSegment.tensorflow(tf, data, indices, segment_ids, api=api, n=n), data, grad_ys=w)[0]
        else:
            with tf.GradientTape() as tape:
                tape.watch(data)
                y = SparseSegment.tensorflow(tf, data, indices, segment_ids, api=api, n=n)
            g = tape.gradient(y, data, output_gradients=w)
        return tf.convert_to_tensor(g)

    def jax(jax, data, indices, segment_ids, w, *, api, n):
        return jax.vjp(lambda d: SparseSegment.jax(jax, d, indices, segment_ids, api=api, n=n), data)[1](w)[0]

    def torch(torch, data, indices, segment_ids, w, *, api, n):
        data = data.requires_grad_(True)
        y = SparseSegment.torch(torch, data, indices, segment_ids, api=api, n=n)
        return torch.autograd.grad(y, data, grad_outputs=w)[0]


@dataclasses.dataclass(frozen=True)
class SparseCase:
    data: np.ndarray  # (R, d), distinct nonzero rows
    indices: np.ndarray  # (K,) int32 rows of data: in range, or mixed with out-of-range ones
    segment_ids: np.ndarray  # (K,) int32, sorted, in [0, n), with gaps drawn
    n: int
    w: np.ndarray  # cotangent (n, d), positive


@st.composite
def sparse_cases(draw, *, in_range_only=False) -> SparseCase:
    case = draw(segment_cases(in_range_only=True))
    rows, k = len(case.data), len(case.ids)
    indices = draw(st.lists(oor.ids(rows, in_range_only=in_range_only), min_size=k, max_size=k), label="indices")
    return SparseCase(case.data, np.array(indices, np.int32), np.sort(case.ids), case.n, case.w)


#: Explicit examples: rows indexed with every out-of-range category, sorted in-range segment ids.
SPARSE_EXAMPLES = [
    SparseCase(c.data, oor.every_category(len(c.data), len(c.ids)), np.sort(np.arange(len(c.ids)) % c.n), c.n, c.w)
    for c in SEGMENT_EXAMPLES
]


def sparse_closed_form(api, data, indices, segment_ids, n, *, drop=()):
    """Float64 ``(value, gradient of sum(w * value) as a function of w)``; positions in ``drop`` take no part."""
    keep = [p for p in range(len(indices)) if p not in drop]
    data = np.asarray(data, np.float64)
    count = np.bincount(segment_ids[keep], minlength=n).astype(np.float64)
    scale = {"sum": np.ones(n), "mean": np.maximum(count, 1), "sqrt_n": np.sqrt(np.maximum(count, 1))}[api]
    out = np.zeros((n, data.shape[1]))
    for p in keep:
        out[segment_ids[p]] += data[indices[p]] / scale[segment_ids[p]]

    def grad(w):
        g = np.zeros_like(data)
        for p in keep:
            g[indices[p]] += np.asarray(w, np.float64)[segment_ids[p]] / scale[segment_ids[p]]
        return g

    return out, grad


def sparse_rules(api, out, case, indices, *, grad=False) -> dict:
    """Per out-of-range category of the row ``indices``: the rule the result fits (``dropped``: the
    position takes no part; ``clamp``/``wrap``: it reads/writes row clip(i)/i mod R), ``other``, or
    None where two rules give the same result."""
    rows = len(case.data)
    ids, cats = indices.tolist(), oor.categories(indices, rows).tolist()
    moved = {"clamp": oor.GRAD_RULES["clamped-row"], "wrap": oor.GRAD_RULES["wrapped-row"]}

    def fits(rule):
        idx = [i if c == "in-range" or rule[c] == "dropped" else moved[rule[c]](i, rows) for i, c in zip(ids, cats)]
        drop = {p for p, c in enumerate(cats) if c != "in-range" and rule[c] == "dropped"}
        value, g = sparse_closed_form(api, case.data, np.array(idx), case.segment_ids, case.n, drop=drop)
        ref, dtype = (g(case.w) if grad else value), case.data.dtype
        scale = relative(ref) if grad else None  # values sum signed rows: the array-level floor
        return np.shape(out) == ref.shape and cmp.rel_err(out, ref, dtype=dtype, scale=scale) <= cmp.GRAD.of(dtype)

    matches = oor.fitting_rules(indices, rows, ("dropped", "clamp", "wrap"), fits)
    return oor.label_rules(matches, [c for c in CATEGORIES if c in cats])


def _sparse_attempt(subject, case, indices, segment_ids, api, kind):
    program, extra = (SparseSegment, ()) if kind == "forward" else (SparseSegmentGrad, (case.w,))
    res, seen = subject.attempt(
        "run", program.of(subject), case.data, indices, segment_ids, *extra, remember=cmp.xla_refusal, api=api, n=case.n
    )
    return (None if res is None else np.asarray(res)), seen


@given(case=sparse_cases(in_range_only=True))
def test_sparse_segments_in_range_and_empty(subject, oracles, record, case):
    """Row indices in range, sorted segment ids with gaps: each tf.sparse.segment_* value, its empty segments
    and its gradient (fetched alone) against the closed form and the oracles."""
    record.example(data=case.data, indices=case.indices, segment_ids=case.segment_ids, w=case.w)
    for api in SPARSE_APIS[subject.framework]:
        value, grad_of = sparse_closed_form(api, case.data, case.indices, case.segment_ids, case.n)
        # each segment at the rounding of its own rows' magnitudes (as value_scales)
        at = sparse_closed_form(api, np.abs(case.data), case.indices, case.segment_ids, case.n)[0]
        out, seen = _sparse_attempt(subject, case, case.indices, case.segment_ids, api, "forward")
        empty = np.bincount(case.segment_ids, minlength=case.n) == 0
        if seen is None:
            record.close(name=f"{api} value", out=out, ref=value.astype(out.dtype), oracle="closed-form", scale=at)
            if empty.any():
                record.check(SPARSE, **{f"empty:{api}": fill_label(out[empty], case.data.dtype)})
        else:
            record.check(SPARSE, **{f"empty:{api}": seen})
        record.check(SPARSE, **{f"in-range:{api}": seen or "closed-form"})
        grad, seen_g = _sparse_attempt(subject, case, case.indices, case.segment_ids, api, "grad")
        record.check(SPARSE, **{f"in-range-grad:{api}": seen_g or "closed-form"})
        if seen_g is None:
            ref_g = grad_of(case.w)
            record.close(
                name=f"{api} grad", out=grad, ref=ref_g.astype(grad.dtype), oracle="closed-form", scale=relative(ref_g)
            )
        for o in oracles:
            if api not in SPARSE_APIS[o.framework] or seen is not None:
                continue
            theirs = np.asarray(
                o.run(SparseSegment.of(o), case.data, case.indices, case.segment_ids, api=api, n=case.n)
            )
            record.close(name=f"{api} value", out=out, ref=theirs, oracle=o.id, scale=at)
            if seen_g is None:
                g_o = o.run(
                    SparseSegmentGrad.of(o), case.data, case.indices, case.segment_ids, case.w, api=api, n=case.n
                )
                record.close(name=f"{api} grad", out=grad, ref=np.asarray(g_o), oracle=o.id, scale=relative(g_o))


@on("tensorflow", "torch")  # JAX has no sparse segment op (its spelling gathers first)
@ss.explicit("case", SPARSE_EXAMPLES)
@given(case=sparse_cases())
def test_sparse_segments_out_of_range_are_declared(subject, record, case):
    """Row indices out of [0, R) per category, and segment ids >= n, negative or unsorted (TensorFlow): the
    value and the gradient fetched alone are refused, or which rule they follow."""
    record.example(data=case.data, indices=case.indices, segment_ids=case.segment_ids, w=case.w)
    oor.skip_torch_cuda(subject, case.indices, len(case.data))
    rows = len(case.data)
    for kind in ("forward", "grad"):
        program = SparseSegment if kind == "forward" else SparseSegmentGrad
        extra = () if kind == "forward" else (case.w,)

        def run(apis_, idx, program=program, extra=extra):
            return tuple(
                np.asarray(
                    subject.recall(
                        "run",
                        program.of(subject),
                        case.data,
                        idx,
                        case.segment_ids,
                        *extra,
                        remember=cmp.xla_refusal,  # compiled once, refused: not again per example
                        api=a,
                        n=case.n,
                    )
                )
                for a in apis_
            )

        def judge(api, idx, out, kind=kind):
            return sparse_rules(api, out, case, idx, grad=kind == "grad")

        oor.observe(subject, record, SPARSE, case.indices, rows, SPARSE_APIS[subject.framework], kind, run, judge)
        if subject.framework != "tensorflow":
            continue  # PyTorch's bags are offsets: segment ids out of range cannot be spelled
        inside = np.where(oor.categories(case.indices, rows) == "in-range", case.indices, 0).astype(np.int32)
        variants = {
            "seg-above": np.concatenate([case.segment_ids[:-1], [case.n + 1]]),
            "seg-negative": np.concatenate([[-1], case.segment_ids[1:]]),
        }
        if case.segment_ids[0] != case.segment_ids[-1]:
            variants["seg-unsorted"] = case.segment_ids[::-1]
        for c, seg in variants.items():
            for api in SPARSE_APIS["tensorflow"]:
                out, seen = _sparse_attempt(subject, case, inside, seg.astype(np.int32), api, kind)
                if seen is None:  # accepted: as the ids say (unsorted), or without the ids outside [0, n)
                    drop = {p for p, i in enumerate(seg.tolist()) if not 0 <= i < case.n}
                    value, grad_of = sparse_closed_form(api, case.data, inside, seg, case.n, drop=drop)
                    ref = grad_of(case.w) if kind == "grad" else value
                    scale = relative(ref) if kind == "grad" else None  # values: the array-level floor
                    fits = cmp.rel_err(out, ref, dtype=case.data.dtype, scale=scale) <= cmp.GRAD.of(case.data.dtype)
                    seen = ("dropped" if drop else "as-unsorted") if fits else "other"
                record.check(SPARSE, **{f"{kind}:{api}[{c}]": seen})


# ---------------------------------------------------------------- bincount
TF_BINCOUNT = "https://www.tensorflow.org/api_docs/python/tf/math/bincount"
JNP_BINCOUNT = "https://docs.jax.dev/en/latest/_autosummary/jax.numpy.bincount.html"
TORCH_BINCOUNT = "https://pytorch.org/docs/stable/generated/torch.bincount.html"
BINCOUNT_NEGATIVE = raises("InvalidArgumentError", r"Input arr must be non-negative")
#: eagerly and in a trace: "gradient registry has no entry for: DenseBincount"; tf.gradients in a
#: v1 graph: "No gradient defined for operation '...' (op type: DenseBincount)"
NO_BINCOUNT_GRAD = r"(gradient registry has no entry for: DenseBincount|\(op type: DenseBincount\))"

#: bincount of the ids (length n: ``minlength=maxlength=n``) weighted by |data[:, 0]|: which bin an
#: out-of-range value's weight lands in (``dropped``, ``clamped-row``, ``wrapped-row``), or the
#: refusal; and whether the weights have a gradient (``closed-form`` where they do).
BINCOUNT = Expectations(
    {
        "bincount[above]": "dropped",
        "bincount[negative]": BINCOUNT_NEGATIVE,
        "bincount[below]": BINCOUNT_NEGATIVE,
        "bincount-grad": raises("LookupError", NO_BINCOUNT_GRAD),
    },
    [
        *[
            expect(
                f"bincount[{c}]",
                "dropped",
                framework="tensorflow",
                mode="xla",
                versions="<2.22.0.dev20260618",
                link="https://github.com/tensorflow/tensorflow/compare/ebc4e33f56f...3161fd65377",
                reason="XLA's DenseBincount checked nothing: a negative value's weight is dropped (a scatter out of "
                "bounds), no error (tensorflow#117960). From the tf-nightly of 2026-06-18 (the bisect's compare "
                "range: last drop on 2.22.0.dev20260616) it raises 'Input arr must be non-negative!' for these "
                "values, as eager does; the description of merged PR 122706 says XLA drops negative values "
                "passed at run time, which is not what the nightly does with the values these rows pass "
                "(measured on every nightly the bisect probed after 2026-06-18)",
            )
            for c in ("negative", "below")
        ],
        expect(
            "bincount[above]",
            IDS_IAE,
            framework="tensorflow",
            mode="eager|function|graph",
            versions="<2.15",
            link="https://github.com/tensorflow/tensorflow/issues/85065",
            reason="up to TF 2.14 a weighted bincount with maxlength=n was an unsorted_segment_sum of the weights "
            "into n segments, which refuses ids >= n on CPU; 2.15's DenseBincount ignores values >= maxlength "
            "(measured on 2.12 and 2.15)",
        ),
        *[
            expect(
                f"bincount[{c}]",
                "dropped",
                framework="tensorflow",
                versions="<2.15",
                link="https://github.com/tensorflow/tensorflow/issues/85065",
                reason="up to TF 2.14 a weighted bincount was an unsorted_segment_sum of the weights, which drops "
                "negative ids; 2.15's DenseBincount refuses them (measured on 2.12 and 2.15)",
            )
            for c in ("negative", "below")
        ],
        expect(
            "bincount-grad",
            "closed-form",
            framework="tensorflow",
            versions="<2.15",
            link="https://github.com/tensorflow/tensorflow/issues/85065",
            reason="up to TF 2.14 a weighted bincount was an unsorted_segment_sum of the weights, which has a "
            "gradient; 2.15 moved it to the DenseBincount kernel, which has none (measured on 2.12-2.14 and 2.15)",
        ),
        expect(
            "bincount-grad",
            raises("StagingError", NO_BINCOUNT_GRAD),
            framework="tensorflow",
            mode="function|xla",
            link=TF_BINCOUNT,
            reason="DenseBincount has no registered gradient; in a tf.function the LookupError surfaces at trace "
            "time, wrapped in a StagingError",
        ),
        *[
            expect(
                f"bincount[{c}]",
                "clamped-row",
                framework="jax",
                link=JNP_BINCOUNT,
                reason="jnp.bincount clips negative values to 0 before counting (no error under tracing): a "
                "negative value's weight lands in bin 0",
            )
            for c in ("negative", "below")
        ],
        expect(
            "bincount-grad",
            "closed-form",
            framework="jax",
            link=JNP_BINCOUNT,
            reason="jnp.bincount is a segment sum of the weights, differentiable: d/dw[p] = cotangent[bin(p)]",
        ),
        expect(
            "bincount[above]",
            "extends",
            framework="torch",
            device="cpu",
            link=TORCH_BINCOUNT,
            reason="torch.bincount has minlength but no maxlength: a value >= n adds bins up to max + 1",
        ),
        *[
            expect(
                f"bincount[{c}]",
                raises("RuntimeError", r"bincount only supports 1-d non-negative integral inputs"),
                framework="torch",
                device="cpu",
                link=TORCH_BINCOUNT,
                reason="torch.bincount refuses negative values",
            )
            for c in ("negative", "below")
        ],
        expect(
            "bincount-grad",
            raises("RuntimeError", r"derivative for aten::bincount is not implemented"),
            framework="torch",
            link=TORCH_BINCOUNT,
            reason="torch.bincount has no derivative with respect to its weights",
        ),
    ],
    __name__,
    scope="bincount",
)


class Bincount(Program):
    """Weighted bincount of ``values`` into ``n`` bins (PyTorch: at least ``n``; it has no maxlength)."""

    def tensorflow(tf, values, weights, *, n):
        return tf.math.bincount(values, weights=weights, minlength=n, maxlength=n)

    def jax(jax, values, weights, *, n):
        return jax.numpy.bincount(values, weights=weights, length=n)

    def torch(torch, values, weights, *, n):
        return torch.bincount(values.long(), weights=weights, minlength=n)


def _bincount_gradient(subject, record, case, weights):
    """The weights' gradient with every value in range, against the closed form, or its absence."""
    inside = (case.ids % case.n).astype(np.int32)
    cot = case.w[:, 0]
    try:
        _, (_, grad) = subject.vjp(Bincount.of(subject), inside, weights, cotangent=cot, n=case.n)
    except Exception as e:  # no gradient is the framework's answer
        record.check(BINCOUNT, **{"bincount-grad": cmp.error_name(e)})
        return
    record.close(name="bincount grad", out=grad, ref=cot[inside], oracle="closed-form", scale=relative(cot[inside]))
    record.check(BINCOUNT, **{"bincount-grad": "closed-form"})


@given(case=segment_cases())
def test_bincount_out_of_range_is_declared(subject, record, case):
    """Weighted bincount with values out of [0, n): where each out-of-range weight lands, or the refusal;
    with values in range, the weights' gradient (or its absence) against the closed form."""
    weights = np.abs(case.data[:, 0])
    record.example(values=case.ids, weights=weights, n=case.n)
    _bincount_gradient(subject, record, case, weights)  # in range: also a PyTorch CUDA row
    oor.skip_torch_cuda(subject, case.ids, case.n)

    def run(apis_, idx):
        return (subject.run(Bincount.of(subject), idx, weights, n=case.n),)

    def judge(api, idx, out):
        out = np.asarray(out, np.float64)
        if len(out) > case.n:  # more bins than asked for: the out-of-range values made them
            return {c: "extends" if c == "above" else None for c in CATEGORIES if c in oor.categories(idx, case.n)}
        return oor.classify_rows(
            out, np.zeros(case.n), idx, weights, tol=cmp.GRAD.of(weights.dtype), dtype=weights.dtype
        )

    # no refused-by site: the refusal names no index ("Input arr must be non-negative!")
    oor.observe(
        subject,
        record,
        BINCOUNT,
        case.ids,
        case.n,
        ("bincount",),
        "bincount",
        run,
        judge,
        key="{api}[{c}]",
        sites=False,
    )
