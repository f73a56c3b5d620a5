"""Out-of-range gather: what tf.gather does with indices outside [0, n), forward and backward.

Source: seeds/001 (the tf.gather slides): ``tf.gather([1, 2, 3, 4, 5], [0, 1, 6])`` gives
``[1 2 0]`` on GPU and raises ``InvalidArgumentError: indices[2] = 6 is not in [0, 5)
[Op:GatherV2]`` on CPU. Indices fall in three out-of-range categories: ``above``
(i >= n), ``negative`` (-n <= i < 0, NumPy's "count from the end") and ``below``
(i < -n). The drawn indices mix them; where a run refuses, each category runs on its own
(the other out-of-range positions set to 0) to see which one is refused. The forward is
classified per category as ``raises:<Error>``, ``zero-fill``, ``clamp`` (row clip(i, 0,
n-1)), ``wrap`` (row i mod n), ``nan-fill`` or ``garbage``; the gradient of ``sum(w * y)``
with respect to params (only the gradient fetched, densified inside the mode) as
``dropped``, ``clamped-row``, ``wrapped-row``, ``raises:<Error>`` or ``other`` (see
:func:`classify` and :func:`classify_grad`). In-range positions must be exact everywhere.
The APIs: the shared spelling ``gather`` (tf.gather, ``x[idx]`` in JAX and PyTorch),
``jnp.take`` (default, fill, clip) and ``.at[].get``, ``torch.gather`` and
``index_select``, and tf.gather_nd ([k, 1] and [k, 2] index vectors) with each
``bad_indices_policy``.

Declared surprises:

- XLA (``jit_compile=True``) clamps every out-of-range index, negatives to row 0, and raises nowhere.
- On GPU tf.gather and tf.gather_nd zero-fill (the docs' and the seed's ``[1 2 0]``; declared, not measured).
- JAX indexing clamps above and below; JAX and PyTorch ``x[idx]`` wrap negatives as NumPy does.
- PyTorch indexing raises IndexError above and below, as NumPy does.
- In ``function``/``graph`` on CPU the forward is pruned from a gradient-only fetch, and the
  unsorted_segment_sum that densifies the IndexedSlices gradient drops negative ids.
- There it raises for i >= n: the refusal comes from segment_ids, not from the gather.
- tf.gather_nd with [k, 2] vectors densifies its gradient with scatter_nd instead, which refuses
  all three categories there (its own message, not GatherNd's).
- XLA Scatter skips out-of-bounds updates, so XLA's gradients drop what its forward clamped.
- On GPU unsorted_segment_sum and scatter_nd ignore out-of-bound ids: gradients drop (declared, not measured).
- JAX's gradient drops above and below (the transpose of a clamping gather); a negative's cotangent
  reaches row i + n in JAX and PyTorch, and PyTorch has no gradient where its forward raises.
- tf.gather_nd matches tf.gather, and XLA ignores ``bad_indices_policy="ERROR"`` (it clamps).
- TF 2.18-2.20: XLA also ignores ``"IGNORE"`` and clamps; TF 2.18: the [k, 2] gradient's scatter_nd
  drops the policy and refuses on CPU.
- ``"IGNORE"`` with [k, 1] vectors: the IndexedSlices gradient ignores the policy (CPU still raises for i >= n).
- The oracle-only APIs keep their documented behaviour: ``jnp.take`` NaN-fills above and below and wraps
  negatives, ``mode="clip"`` clamps, ``.at[].get`` is ``x[idx]``, torch.gather and index_select refuse
  negatives too.

PyTorch CUDA rows are skipped: a device-side assert would poison the process's CUDA context.
"""

import dataclasses
import inspect
import re

import numpy as np
from hypothesis import given, strategies as st
from hypothesis.extra import numpy as hnp

from suite import compare as cmp, out_of_range as oor, strategies as ss
from suite.behaviours import Floor, behaviour, on
from suite.expectations import expect, expect_keys, expectations, raises
from suite.frameworks.tf_runner import in_v1_graph
from suite.out_of_range import CATEGORIES, categories, classify, classify_grad
from suite.program import Program

TF_GATHER = "https://www.tensorflow.org/api_docs/python/tf/gather"
GATHER_ND = "https://www.tensorflow.org/api_docs/python/tf/raw_ops/GatherNd"
SEGMENT_SUM = "https://www.tensorflow.org/api_docs/python/tf/math/unsorted_segment_sum"
SCATTER_ND = "https://www.tensorflow.org/api_docs/python/tf/scatter_nd"
XLA_GATHER = "https://github.com/tensorflow/tensorflow/issues/115254"
XLA_NEGATIVE = "https://github.com/tensorflow/tensorflow/issues/118076"
XLA_GATHER_ND = "https://github.com/tensorflow/tensorflow/issues/112068"
XLA_SCATTER = "https://openxla.org/xla/operation_semantics#scatter"
ARRAY_GRAD = "https://github.com/tensorflow/tensorflow/blob/master/tensorflow/python/ops/array_grad.py"
JAX_OOB = "https://docs.jax.dev/en/latest/notebooks/Common_Gotchas_in_JAX.html#out-of-bounds-indexing"
NUMPY_INDEXING = "https://numpy.org/doc/stable/user/basics.indexing.html"

BEHAVIOUR = behaviour(
    "gather-out-of-range",
    sources=["001"],
    links=[
        TF_GATHER,
        GATHER_ND,
        SEGMENT_SUM,
        XLA_GATHER,
        JAX_OOB,
        "https://docs.jax.dev/en/latest/_autosummary/jax.numpy.take.html",
        "https://docs.jax.dev/en/latest/_autosummary/jax.Array.at.html",
        "https://pytorch.org/docs/stable/generated/torch.gather.html",
        "https://pytorch.org/docs/stable/generated/torch.index_select.html",
    ],
    floor=Floor(
        "element",
        "Values are compared exactly (a gather copies). The in-range gradient is the scatter-add of the cotangent "
        "onto the rows its indices name: element i sums only the positive cotangents (drawn in [0.5, 4]) gathered "
        "from row i, with no cancellation, so it is held relative to its own magnitude (scale |ref_i|; rows no "
        "index names must be exact zeros); the out-of-range classifiers (suite.out_of_range) are left as they are.",
    ),
)

SEED_MESSAGE = "indices[2] = 6 is not in [0, 5)"
# Each refusal by the kernel that raises it (CPU): GatherV2, GatherNd, and in a gradient whose
# forward was pruned the UnsortedSegmentSum or ScatterNd that densifies it; PyTorch's bounds
# checks (x[idx] and torch.gather, index_select).
GATHER_IAE = raises("InvalidArgumentError", r"indices\[\d+\] = -?\d+ is not in \[0, \d+\)")
GATHER_ND_IAE = raises("InvalidArgumentError", r"\] does not index into param shape \[")
SEGMENT_IDS_IAE = raises("InvalidArgumentError", r"segment_ids\[\d+\] = -?\d+ is out of range \[0, \d+\)")
SCATTER_ND_IAE = raises("InvalidArgumentError", r"\] does not index into shape \[")
TORCH_OUT_OF_BOUNDS = r"index -?\d+ is out of bounds for dimension 0 with size \d+"


def _keys(kind, api, above, negative, below):
    return {f"{kind}:{api}[above]": above, f"{kind}:{api}[negative]": negative, f"{kind}:{api}[below]": below}


#: tf.gather_nd's bad_indices_policy appeared in TF 2.18: before it, the keys that name a policy
#: are not observed (the row records ``bad_indices_policy: unavailable``), so their
#: declarations do not apply there (else a complete run on 2.12-2.17 calls them stale).
POLICY_VERSIONS = ">=2.18"


# Defaults: tf.gather's CPU contract for the shared spelling "gather" (tf.gather, and x[idx]
# in JAX/PyTorch); each oracle-only API's documented behaviour (jnp.take: fill (NaN) with
# NumPy negatives; mode="clip" clamps; .at[].get is x[idx]; torch.gather/index_select
# refuse negatives).
EXPECT = expectations(
    {
        **_keys("forward", "gather", GATHER_IAE, GATHER_IAE, GATHER_IAE),
        **_keys("grad", "gather", GATHER_IAE, GATHER_IAE, GATHER_IAE),
        **_keys("forward", "jnp.take", "nan-fill", "wrap", "nan-fill"),
        **_keys("grad", "jnp.take", "dropped", "wrapped-row", "dropped"),
        **_keys("forward", "jnp.take(fill)", "nan-fill", "wrap", "nan-fill"),
        **_keys("grad", "jnp.take(fill)", "dropped", "wrapped-row", "dropped"),
        **_keys("forward", "jnp.take(clip)", "clamp", "clamp", "clamp"),
        **_keys("grad", "jnp.take(clip)", "clamped-row", "clamped-row", "clamped-row"),
        **_keys("forward", "x.at[].get", "clamp", "wrap", "clamp"),
        **_keys("grad", "x.at[].get", "dropped", "wrapped-row", "dropped"),
        **_keys("forward", "torch.gather", *[raises("RuntimeError", TORCH_OUT_OF_BOUNDS)] * 3),
        **_keys("grad", "torch.gather", *[raises("RuntimeError", TORCH_OUT_OF_BOUNDS)] * 3),
        **_keys("forward", "torch.index_select", *[raises("IndexError", r"index out of range in self")] * 3),
        **_keys("grad", "torch.index_select", *[raises("IndexError", r"index out of range in self")] * 3),
        **_keys("forward", "tf.gather_nd", GATHER_ND_IAE, GATHER_ND_IAE, GATHER_ND_IAE),
        **_keys("grad", "tf.gather_nd", GATHER_ND_IAE, GATHER_ND_IAE, GATHER_ND_IAE),
        **_keys("forward", "tf.gather_nd(ERROR)", GATHER_ND_IAE, GATHER_ND_IAE, GATHER_ND_IAE),
        **_keys("forward", "tf.gather_nd(IGNORE)", "zero-fill", "zero-fill", "zero-fill"),
        **_keys("grad", "tf.gather_nd(IGNORE)", SEGMENT_IDS_IAE, "dropped", "dropped"),
        **_keys("forward", "tf.gather_nd/2", GATHER_ND_IAE, GATHER_ND_IAE, GATHER_ND_IAE),
        **_keys("grad", "tf.gather_nd/2", GATHER_ND_IAE, GATHER_ND_IAE, GATHER_ND_IAE),
        **_keys("forward", "tf.gather_nd/2(IGNORE)", "zero-fill", "zero-fill", "zero-fill"),
        **_keys("grad", "tf.gather_nd/2(IGNORE)", "dropped", "dropped", "dropped"),
        "seed": raises("InvalidArgumentError", re.escape(SEED_MESSAGE)),
        "in_range": "exact",
    },
    # -- the shared spelling, forward
    expect(
        "forward:gather[above]",
        "clamp",
        framework="tensorflow",
        mode="xla",
        link=XLA_GATHER,
        reason="the XLA lowering of GatherV2 uses XLA Gather, which clamps start indices into range "
        "and checks nothing: [1 2 3 4 5][[0, 1, 6]] -> [1 2 5] (open issue, TF 2.21)",
    ),
    *expect_keys(
        "forward:gather[{c}]",
        "clamp",
        over={"c": ("negative", "below")},
        framework="tensorflow",
        mode="xla",
        link=XLA_NEGATIVE,
        reason="XLA clamps negative indices to row 0 (no NumPy wrap, no error)",
    ),
    *expect_keys(
        "forward:gather[{c}]",
        "zero-fill",
        over={"c": CATEGORIES},
        framework="tensorflow",
        mode="eager|function|graph",
        device="gpu",
        link=TF_GATHER,
        reason="tf.gather docs: on GPU an out-of-bound index stores 0 in the output "
        "(the GPU kernel does not check indices); declared, not measured here",
    ),
    *expect_keys(
        "forward:gather[{c}]",
        "clamp",
        over={"c": ("above", "below")},
        framework="jax",
        link=JAX_OOB,
        reason="JAX indexing clamps out-of-bound retrievals into range (XLA Gather semantics)",
    ),
    *[
        expect(
            "forward:gather[negative]",
            "wrap",
            framework=fw,
            device="cpu" if fw == "torch" else None,  # torch's CUDA rows are declared skips
            link=NUMPY_INDEXING,
            reason="x[idx] follows NumPy: an index in [-n, 0) counts from the end",
        )
        for fw in ("jax", "torch")
    ],
    *expect_keys(
        "forward:gather[{c}]",
        raises("IndexError", TORCH_OUT_OF_BOUNDS),
        over={"c": ("above", "below")},
        framework="torch",
        device="cpu",
        link=NUMPY_INDEXING,
        reason="PyTorch indexing checks bounds like NumPy: 'index 6 is out of bounds for dimension 0'",
    ),
    # -- the shared spelling, gradient (only the gradient fetched)
    *expect_keys(
        "grad:gather[{c}]",
        "dropped",
        over={"c": ("negative", "below")},
        framework="tensorflow",
        mode="function|graph",
        device="cpu",
        link=SEGMENT_SUM,
        reason="the forward GatherV2 is pruned (nothing fetched needs it), and the IndexedSlices "
        "gradient is densified by unsorted_segment_sum, which drops negative segment ids",
    ),
    expect(
        "grad:gather[above]",
        SEGMENT_IDS_IAE,
        framework="tensorflow",
        mode="function|graph",
        device="cpu",
        link=SEGMENT_SUM,
        reason="the forward is pruned, but unsorted_segment_sum validates ids < num_segments on CPU: "
        "'segment_ids[2] = 6 is out of range [0, 5)' comes from the gradient, not the gather",
    ),
    *expect_keys(
        "grad:gather[{c}]",
        "dropped",
        over={"c": CATEGORIES},
        framework="tensorflow",
        mode="xla",
        link=XLA_SCATTER,
        reason="the gradient's segment sum lowers to XLA Scatter, which skips out-of-bounds updates: "
        "the forward read row clip(i) but no gradient flows there",
    ),
    *expect_keys(
        "grad:gather[{c}]",
        "dropped",
        over={"c": CATEGORIES},
        framework="tensorflow",
        mode="eager|function|graph",
        device="gpu",
        link=SEGMENT_SUM,
        reason="GPU gather does not raise and unsorted_segment_sum on GPU ignores "
        "out-of-bound ids (docs: 'safe but unspecified'); declared, not measured here",
    ),
    *expect_keys(
        "grad:gather[{c}]",
        "dropped",
        over={"c": ("above", "below")},
        framework="jax",
        link=JAX_OOB,
        reason="the transpose of JAX's clamped gather is a scatter-add that drops out-of-bound "
        "cotangents: forward clamps, backward drops",
    ),
    *[
        expect(
            "grad:gather[negative]",
            "wrapped-row",
            framework=fw,
            device="cpu" if fw == "torch" else None,  # torch's CUDA rows are declared skips
            link=NUMPY_INDEXING,
            reason="a NumPy negative index is a real index: its cotangent goes to row i + n",
        )
        for fw in ("jax", "torch")
    ],
    *expect_keys(
        "grad:gather[{c}]",
        raises("IndexError", TORCH_OUT_OF_BOUNDS),
        over={"c": ("above", "below")},
        framework="torch",
        device="cpu",
        link=NUMPY_INDEXING,
        reason="the forward raises, so there is no gradient",
    ),
    # -- tf.gather_nd and bad_indices_policy
    *expect_keys(
        "forward:tf.gather_nd[{c}]",
        "clamp",
        over={"c": CATEGORIES},
        framework="tensorflow",
        mode="xla",
        link=XLA_GATHER_ND,
        reason="XLA lowers GatherNd to a clamping XLA Gather; nothing is checked",
    ),
    *expect_keys(
        "forward:tf.gather_nd/2[{c}]",
        "clamp",
        over={"c": CATEGORIES},
        framework="tensorflow",
        mode="xla",
        link=XLA_GATHER_ND,
        reason="XLA lowers GatherNd to a clamping XLA Gather; nothing is checked",
    ),
    *expect_keys(
        "forward:tf.gather_nd(ERROR)[{c}]",
        "clamp",
        over={"c": CATEGORIES},
        framework="tensorflow",
        mode="xla",
        versions=POLICY_VERSIONS,
        link=XLA_GATHER_ND,
        reason="bad_indices_policy='ERROR' promises an error, but the XLA lowering ignores it and clamps",
    ),
    *expect_keys(
        "forward:tf.gather_nd[{c}]",
        "zero-fill",
        over={"c": CATEGORIES},
        framework="tensorflow",
        mode="eager|function|graph",
        device="gpu",
        link=GATHER_ND,
        reason="GatherNd docs: the default policy ignores bad indices on GPU (output 0); declared, not measured here",
    ),
    *expect_keys(
        "forward:tf.gather_nd/2[{c}]",
        "zero-fill",
        over={"c": CATEGORIES},
        framework="tensorflow",
        mode="eager|function|graph",
        device="gpu",
        link=GATHER_ND,
        reason="GatherNd docs: the default policy ignores bad indices on GPU (output 0); declared, not measured here",
    ),
    *expect_keys(
        "grad:tf.gather_nd[{c}]",
        "dropped",
        over={"c": ("negative", "below")},
        framework="tensorflow",
        mode="function|graph",
        device="cpu",
        link=SEGMENT_SUM,
        reason="[k, 1] index vectors: _GatherNdGrad returns IndexedSlices (as tf.gather); the forward is "
        "pruned and unsorted_segment_sum drops negative ids",
    ),
    expect(
        "grad:tf.gather_nd[above]",
        SEGMENT_IDS_IAE,
        framework="tensorflow",
        mode="function|graph",
        device="cpu",
        link=SEGMENT_SUM,
        reason="[k, 1] index vectors: the forward is pruned, and the refusal is unsorted_segment_sum's "
        "'segment_ids[i] = j is out of range [0, n)' from the gradient, as for tf.gather",
    ),
    *expect_keys(
        "grad:tf.gather_nd/2[{c}]",
        SCATTER_ND_IAE,
        over={"c": CATEGORIES},
        framework="tensorflow",
        mode="function|graph",
        device="cpu",
        link=SCATTER_ND,
        reason="[k, 2] index vectors: _GatherNdGrad densifies with scatter_nd and the forward is pruned, so "
        "the CPU ScatterNd kernel refuses every out-of-range index: 'indices[i] = [j, 0] does not "
        "index into shape [...]' (eager runs the GatherNd forward, which refuses first)",
    ),
    *expect_keys(
        "grad:tf.gather_nd[{c}]",
        "dropped",
        over={"c": CATEGORIES},
        framework="tensorflow",
        mode="xla",
        link=XLA_SCATTER,
        reason="XLA Scatter skips out-of-bounds updates",
    ),
    *expect_keys(
        "grad:tf.gather_nd/2[{c}]",
        "dropped",
        over={"c": CATEGORIES},
        framework="tensorflow",
        mode="xla",
        link=XLA_SCATTER,
        reason="XLA Scatter skips out-of-bounds updates",
    ),
    expect(
        "grad:tf.gather_nd(IGNORE)[above]",
        "dropped",
        framework="tensorflow",
        versions=POLICY_VERSIONS,
        mode="xla",
        link=XLA_SCATTER,
        reason="XLA Scatter skips out-of-bounds updates",
    ),
    *expect_keys(
        "grad:tf.gather_nd[{c}]",
        "dropped",
        over={"c": CATEGORIES},
        framework="tensorflow",
        device="gpu",
        mode="eager|function|graph",
        link=SEGMENT_SUM,
        reason="GPU: no forward error, and unsorted_segment_sum ignores out-of-bound ids; declared, not measured here",
    ),
    expect(
        "grad:tf.gather_nd(IGNORE)[above]",
        "dropped",
        framework="tensorflow",
        versions=POLICY_VERSIONS,
        device="gpu",
        mode="eager|function|graph",
        link=SEGMENT_SUM,
        reason="GPU unsorted_segment_sum ignores out-of-bound ids; declared, not measured here",
    ),
    *expect_keys(
        "grad:tf.gather_nd/2[{c}]",
        "dropped",
        over={"c": CATEGORIES},
        framework="tensorflow",
        device="gpu",
        mode="eager|function|graph",
        link=SCATTER_ND,
        reason="scatter_nd docs: on GPU an out-of-bound index is ignored; declared, not measured here",
    ),
    # -- version differences of bad_indices_policy (added in 2.18), measured on 2.18.1-2.21.0
    *expect_keys(
        "forward:tf.gather_nd(IGNORE)[{c}]",
        "clamp",
        over={"c": CATEGORIES},
        framework="tensorflow",
        mode="xla",
        versions=">=2.18,<2.21",
        link=XLA_GATHER_ND,
        reason="TF 2.18-2.20: the XLA lowering of GatherNd ignores the policy and clamps "
        "(2.21 zero-fills as the policy promises)",
    ),
    *expect_keys(
        "forward:tf.gather_nd/2(IGNORE)[{c}]",
        "clamp",
        over={"c": CATEGORIES},
        framework="tensorflow",
        mode="xla",
        versions=">=2.18,<2.21",
        link=XLA_GATHER_ND,
        reason="TF 2.18-2.20: the XLA lowering of GatherNd ignores the policy and clamps "
        "(2.21 zero-fills as the policy promises)",
    ),
    *expect_keys(
        "grad:tf.gather_nd/2(IGNORE)[{c}]",
        SCATTER_ND_IAE,
        over={"c": CATEGORIES},
        framework="tensorflow",
        mode="eager|function|graph",
        device="cpu",
        versions=">=2.18,<2.19",
        link=ARRAY_GRAD,
        reason="TF 2.18: _GatherNdGrad builds its scatter_nd without the forward's bad_indices_policy, so "
        "the CPU scatter_nd refuses every out-of-range index the forward ignored; 2.19 passes it on",
    ),
    # -- the seed, tf.gather([1, 2, 3, 4, 5], [0, 1, 6]) (int32)
    expect(
        "seed", "clamp", framework="tensorflow", mode="xla", link=XLA_GATHER, reason="XLA clamps: [1 2 5], no error"
    ),
    expect(
        "seed",
        "zero-fill",
        framework="tensorflow",
        mode="eager|function|graph",
        device="gpu",
        link=TF_GATHER,
        reason="the seed's GPU claim [1 2 0], as the tf.gather docs say; declared, not measured here",
    ),
    expect("seed", "clamp", framework="jax", link=JAX_OOB, reason="JAX indexing clamps: [1 2 5]"),
    expect(
        "seed",
        raises("IndexError", r"index 6 is out of bounds for dimension 0 with size 5"),
        framework="torch",
        device="cpu",  # CUDA rows are declared skips (oor.skip_torch_cuda)
        link=NUMPY_INDEXING,
        reason="PyTorch indexing raises 'index 6 is out of bounds for dimension 0 with size 5'",
    ),
)

# The APIs each framework's rows run; "gather" is the spelling shared across frameworks.
GATHER_APIS = {
    "tensorflow": ("gather",),
    "jax": ("gather", "jnp.take", "jnp.take(fill)", "jnp.take(clip)", "x.at[].get"),
    "torch": ("gather", "torch.gather", "torch.index_select"),
}
ND_FORWARD_APIS = (
    "tf.gather_nd",
    "tf.gather_nd(ERROR)",
    "tf.gather_nd(IGNORE)",
    "tf.gather_nd/2",
    "tf.gather_nd/2(IGNORE)",
)
ND_GRAD_APIS = ("tf.gather_nd", "tf.gather_nd(IGNORE)", "tf.gather_nd/2", "tf.gather_nd/2(IGNORE)")
SEED_PARAMS, SEED_INDICES = np.array([1, 2, 3, 4, 5], np.int32), np.array([0, 1, 6], np.int32)
SEED_MESSAGE = "indices[2] = 6 is not in [0, 5)"
SEED_VALUES = {
    "clamp": np.array([1, 2, 5], np.int32),
    "zero-fill": np.array([1, 2, 0], np.int32),
    "wrap": np.array([1, 2, 2], np.int32),
}

# ---------------------------------------------------------------- strategies
K = 5  # indices per example: one length, so XLA and jax.jit compile once per params shape


@dataclasses.dataclass(frozen=True)
class GatherCase:
    params: np.ndarray  # (n,) or (n, 2), distinct nonzero values
    indices: np.ndarray  # (K,) int32: in-range, >= n, [-n, 0) and < -n mixed
    w: np.ndarray  # cotangent (K,) + params.shape[1:], positive (so no two rules coincide)


# (n,) or (n, 2) params, n from 1 to 6, each shape with one dtype: XLA and JAX's eager
# dispatch compile per input signature, and indices already cover every region of every n.
PARAM_SHAPES = ((1,), (3, 2), (6,), (2, 2), (4,), (1, 2))


@st.composite
def gather_cases(draw) -> GatherCase:
    dtype, shape = draw(ss.dtypes_and_shapes(shapes=PARAM_SHAPES), label="dtype, params shape")
    n = shape[0]
    size = ss.floats(dtype, 0.25, 10.0)
    signed = st.tuples(st.booleans(), size).map(lambda t: -t[1] if t[0] else t[1])
    params = draw(hnp.arrays(dtype, shape, elements=signed, unique=True), label="params")
    index = st.one_of(st.integers(0, n - 1), st.integers(n, n + 6), st.integers(-n, -1), st.integers(-n - 6, -n - 1))
    indices = np.array(draw(st.lists(index, min_size=K, max_size=K), label="indices"), np.int32)
    w = draw(hnp.arrays(dtype, (K,) + shape[1:], elements=ss.floats(dtype, 0.5, 4.0)), label="cotangent")
    return GatherCase(params, indices, w)


#: Explicit examples: each dtype's signature with every out-of-range category among its ids.
GATHER_EXAMPLES = [
    GatherCase(oor.distinct(d, s, 0.25, 10.0), oor.every_category(s[0], K), oor.positive(d, (K,) + s[1:]))
    for d, s in ss.one_per_dtype(ss.paired(PARAM_SHAPES))
]


# ---------------------------------------------------------------- the programs
class Gather(Program):
    """The spelling shared across frameworks: tf.gather along axis 0, ``x[idx]`` in JAX and PyTorch."""

    def tensorflow(tf, params, indices):
        return tf.gather(params, indices)

    def jax(jax, params, indices):
        return params[indices]

    def torch(torch, params, indices):
        return params[indices]


class GatherNd(Program):
    """tf.gather_nd with [k, 1] index vectors, or (``pairs``) [k, 2] vectors into params[:, None]
    (same rows, but its gradient goes through scatter_nd); ``policy`` is its bad_indices_policy."""

    def tensorflow(tf, params, indices, *, pairs=False, policy=None):
        kw = {"bad_indices_policy": policy} if policy else {}
        if not pairs:
            return tf.gather_nd(params, tf.expand_dims(indices, -1), **kw)
        two = tf.stack([indices, tf.zeros_like(indices)], axis=-1)
        return tf.gather_nd(tf.expand_dims(params, 1), two, **kw)


class JnpTake(Program):
    def jax(jax, params, indices, *, mode=None):
        return jax.numpy.take(params, indices, axis=0, mode=mode)


class AtGet(Program):
    def jax(jax, params, indices):
        return params.at[indices].get()


class TorchGather(Program):
    def torch(torch, params, indices):
        index = indices.long().reshape((-1,) + (1,) * (params.ndim - 1)).expand((-1,) + tuple(params.shape[1:]))
        return torch.gather(params, 0, index)


class IndexSelect(Program):
    def torch(torch, params, indices):
        return torch.index_select(params, 0, indices)


# api -> (program, static arguments)
APIS = {
    "gather": (Gather, {}),
    "jnp.take": (JnpTake, {}),
    "jnp.take(fill)": (JnpTake, {"mode": "fill"}),
    "jnp.take(clip)": (JnpTake, {"mode": "clip"}),
    "x.at[].get": (AtGet, {}),
    "torch.gather": (TorchGather, {}),
    "torch.index_select": (IndexSelect, {}),
    "tf.gather_nd": (GatherNd, {}),
    "tf.gather_nd(ERROR)": (GatherNd, {"policy": "ERROR"}),
    "tf.gather_nd(IGNORE)": (GatherNd, {"policy": "IGNORE"}),
    "tf.gather_nd/2": (GatherNd, {"pairs": True}),
    "tf.gather_nd/2(IGNORE)": (GatherNd, {"pairs": True, "policy": "IGNORE"}),
}


def gather(module, params, indices, *, fw, api):
    """``api`` on ``fw``'s ``module``."""
    program, static = APIS[api]
    return program.of(fw)(module, params, indices, **static)


class GatherGrad(Program):
    """d sum(w * y)/d params of ``api`` with only the gradient fetched (a train step that does not
    fetch the loss), densified inside the mode as an optimizer's dense update would."""

    def tensorflow(tf, params, indices, w, *, api):
        if in_v1_graph():
            g = tf.gradients(gather(tf, params, indices, fw="tensorflow", api=api), params, grad_ys=w)[0]
        else:
            with tf.GradientTape() as tape:
                tape.watch(params)
                y = gather(tf, params, indices, fw="tensorflow", api=api)
            g = tape.gradient(y, params, output_gradients=w)
        return tf.convert_to_tensor(g)

    def jax(jax, params, indices, w, *, api):
        return jax.vjp(lambda p: gather(jax, p, indices, fw="jax", api=api), params)[1](w)[0]

    def torch(torch, params, indices, w, *, api):
        params = params.requires_grad_(True)
        return torch.autograd.grad(gather(torch, params, indices, fw="torch", api=api), params, grad_outputs=w)[0]


def all_forwards(module, params, indices, *, fw, apis):
    """Every API in one program, so that XLA and jax.jit compile once per params shape."""
    return tuple(gather(module, params, indices, fw=fw, api=api) for api in apis)


def all_grads(module, params, indices, w, *, fw, apis):
    return tuple(GatherGrad.of(fw)(module, params, indices, w, api=api) for api in apis)


def _observe(subject, record, case, apis, kind, run, judge):
    __tracebackhide__ = True
    oor.observe(subject, record, EXPECT, case.indices, len(case.params), apis, kind, run, judge)


def _observe_forward(subject, record, case, apis):
    __tracebackhide__ = True
    n = len(case.params)

    def run(apis, idx):
        return subject.run(all_forwards, case.params, idx, fw=subject.framework, apis=apis)

    def judge(api, idx, out):
        out, inside = np.asarray(out), categories(idx, n) == "in-range"
        record.equal(name=f"{api} in-range rows", out=out[inside], ref=case.params[idx[inside]], oracle="closed-form")
        return classify(out, case.params, idx)

    _observe(subject, record, case, apis, "forward", run, judge)


def _observe_grad(subject, record, case, apis):
    __tracebackhide__ = True
    tol = cmp.GRAD.of(case.params.dtype)

    def run(apis, idx):
        return subject.run(all_grads, case.params, idx, case.w, fw=subject.framework, apis=apis)

    def judge(api, idx, grad):
        return classify_grad(grad, case.params, idx, case.w, tol=tol)

    _observe(subject, record, case, apis, "grad", run, judge)


# ---------------------------------------------------------------- properties
@ss.explicit("case", GATHER_EXAMPLES)
@given(case=gather_cases())
def test_gather_forward_out_of_range_is_declared(subject, record, case):
    """Each API's forward per out-of-range category: raises, zero-fill, clamp, wrap, nan-fill or garbage."""
    record.example(params=case.params, indices=case.indices)
    oor.skip_torch_cuda(subject)
    _observe_forward(subject, record, case, GATHER_APIS[subject.framework])


@ss.explicit("case", GATHER_EXAMPLES)
@given(case=gather_cases())
def test_gather_gradient_rows_are_declared(subject, record, case):
    """Which params row each out-of-range cotangent of sum(w * gather) reaches, or the refusal."""
    record.example(params=case.params, indices=case.indices, w=case.w)
    oor.skip_torch_cuda(subject)
    _observe_grad(subject, record, case, GATHER_APIS[subject.framework])


@on("tensorflow")  # TF APIs: the oracles' own spellings are observed in the gather tests
@ss.explicit("case", GATHER_EXAMPLES)
@given(case=gather_cases())
def test_gather_nd_and_bad_indices_policy_are_declared(subject, record, case):
    """tf.gather_nd ([k, 1] and [k, 2] vectors) with each bad_indices_policy, forward and gradient."""
    record.example(params=case.params, indices=case.indices, w=case.w)
    if "bad_indices_policy" not in inspect.signature(subject.module.gather_nd).parameters:
        record.observe(bad_indices_policy="unavailable")  # before the argument existed
        fwd, grad = ("tf.gather_nd", "tf.gather_nd/2"), ("tf.gather_nd", "tf.gather_nd/2")
    else:
        fwd, grad = ND_FORWARD_APIS, ND_GRAD_APIS
    _observe_forward(subject, record, case, fwd)
    _observe_grad(subject, record, case, grad)


@given(case=gather_cases(), data=st.data())
def test_in_range_gather_matches_closed_form_and_oracles(subject, oracles, record, case, data):
    """With every index in [0, n): value params[idx] exactly, gradient the scatter-add of w."""
    idx = (case.indices % len(case.params)).astype(np.int32)
    record.example(params=case.params, indices=idx, w=case.w)
    out = subject.run(Gather.of(subject), case.params, idx)
    grad = subject.run(GatherGrad.of(subject), case.params, idx, case.w, api="gather")
    ref_grad = np.zeros(case.params.shape, np.float64)
    np.add.at(ref_grad, idx, case.w)
    record.close(name="value", out=out, ref=case.params[idx], oracle="closed-form", tol=cmp.EXACT)
    # each element sums positive cotangents (no cancellation): its own magnitude is its rounding's scale
    own = np.abs(ref_grad)
    record.close(name="grad", out=grad, ref=ref_grad.astype(case.params.dtype), oracle="closed-form", scale=own)
    dtype = case.params.dtype
    grad_err = cmp.rel_err(grad, ref_grad, scale=own, dtype=dtype)
    exact = np.array_equal(out, case.params[idx]) and grad_err <= cmp.GRAD.of(dtype)
    record.check(EXPECT, in_range="exact" if exact else "wrong")
    record.against(oracles, Gather, case.params, idx, via="run", got={"value": out}, tol=cmp.EXACT)
    record.against(oracles, GatherGrad, case.params, idx, case.w, via="run", got={"grad": grad}, api="gather",
                   scale=own)  # fmt: skip


# ---------------------------------------------------------------- seed examples
@given(a=st.just(SEED_PARAMS))
def test_seed_gather_0_1_6(subject, record, a):
    """seeds/001 tf.gather([1, 2, 3, 4, 5], [0, 1, 6]): CPU raises 'indices[2] = 6 is not in [0, 5)', GPU [1 2 0]."""
    record.example(params=a, indices=SEED_INDICES)
    oor.skip_torch_cuda(subject)
    try:
        out = subject.run(Gather.of(subject), a, SEED_INDICES)
    except Exception as e:  # the seed's CPU answer
        record.check(EXPECT, seed=cmp.error_name(e))
        if subject.framework == "tensorflow":
            assert SEED_MESSAGE in str(e), (
                f"seed message[{subject.id}]={str(e)[:200]!r} but seeds/001 gives {SEED_MESSAGE!r}"
            )
            record.observe(seed_message=SEED_MESSAGE)
        return
    record.observe(seed_value=np.asarray(out))
    label = classify(out, a, SEED_INDICES)["above"]
    record.equal(name=f"seed value ({label})", out=np.asarray(out), ref=SEED_VALUES.get(label), oracle="closed-form")
    record.check(EXPECT, seed=label)
