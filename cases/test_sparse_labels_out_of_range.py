"""Out-of-range sparse labels: what sparse softmax cross-entropy does with a label outside [0, n).

``tf.nn.sparse_softmax_cross_entropy_with_logits`` (and Keras' ``SparseCategoricalCrossentropy(
from_logits=True)``, which calls it) gives row i the loss ``logsumexp(z_i) - z_i[l_i]`` and the
gradient ``softmax(z_i) - onehot(l_i)``. Its docs: a label outside ``[0, num_classes)`` raises on
CPU ("Received a label value of 7 which is outside the valid range of [0, 5)") and gives NaN loss
and gradient rows on GPU. Labels fall in four out-of-range categories: ``above`` (l >= n),
``negative`` (-n <= l < 0), ``below`` (l < -n) and ``ignore-index`` (-100, PyTorch's default
``ignore_index``). The drawn labels mix them with in-range labels (boundaries 0, n-1, n, -1, -n,
far outside, int32 extremes, duplicates); where a run refuses, each category runs on its own (the
other out-of-range labels set to 0). Each category's loss row is classified as ``raises:<Error>``,
``nan``, ``zero``, ``wrap`` (label l mod n), ``clamp`` (label clip(l, 0, n-1)), ``logsumexp`` (the
label's logit dropped) or ``garbage``; its gradient row (of sum(w * loss)) as ``nan``, ``zero``,
``softmax`` (the one-hot dropped), ``wrap``, ``clamp`` or ``other``. In-range rows must keep
their closed-form loss and gradient (``rows``: a NaN stays in its own row); the batch mean and its
gradient are judged against the same API's rows (``mean-of-rows``, ``mean-of-valid-rows``;
``per-row/batch``, ``per-row/valid``). The oracles: ``optax.softmax_cross_entropy_with_integer_labels``
(and the hand spelling with ``jnp.take_along_axis``), ``torch.nn.functional.cross_entropy``.

Declared surprises:

- XLA (``jit_compile=True``) raises nowhere: every out-of-range row is NaN, loss and gradient, on CPU
  too (the GPU contract); the other rows keep their values, the mean is NaN, and the mean's gradient
  is NaN only in the bad rows.
- On GPU the loss and gradient rows are NaN (the docs; declared, not measured).
- JAX/optax: take_along_axis fills NaN for l >= n and l < -n but wraps a negative label (NumPy),
  and its gradient drops the one-hot (``softmax``): a NaN loss with a finite gradient.
- PyTorch: ``IndexError: Target 7 is out of bounds`` for every out-of-range label but -100, which
  ``ignore_index`` turns into a zero loss and gradient row, excluded from the mean.
- Keras 3 (TF >= 2.16) computes the loss in float32 for float64 logits (its floatx dtype policy).
- Keras' mean of an empty batch is not NaN: Keras 3 returns the empty losses unreduced (0 in a v1 graph,
  where the shape is not static), Keras 2 gives 0 (``divide_no_nan``).
- JAX 0.4.30 (the TF 2.12-2.16 envs' oracle): optax and take_along_axis refuse an empty batch (TypeError).

PyTorch CUDA rows with out-of-range labels are skipped: a device-side assert would poison the
process's CUDA context.

Sources: https://github.com/tensorflow/tensorflow/issues/8484,
https://github.com/tensorflow/tensorflow/issues/10268,
https://github.com/tensorflow/tensorflow/issues/56979,
https://github.com/tensorflow/tensorflow/issues/57173
"""

import dataclasses

import numpy as np
from hypothesis import given, strategies as st

from suite import compare as cmp, out_of_range as oor, strategies as ss
from suite.behaviours import Floor, behaviour, declared_skip
from suite.expectations import expect, expect_keys, expectations, raises
from suite.program import Program

TF_DOC = "https://www.tensorflow.org/api_docs/python/tf/nn/sparse_softmax_cross_entropy_with_logits"
TF_GPU_NAN = "https://github.com/tensorflow/tensorflow/issues/8484"
TF_XLA_NAN = "https://github.com/tensorflow/tensorflow/issues/126005"
OPTAX_NAN = "https://github.com/google-deepmind/optax/issues/1185"
TAKE_ALONG_AXIS = "https://docs.jax.dev/en/latest/_autosummary/jax.numpy.take_along_axis.html"
TORCH_XENT = "https://pytorch.org/docs/stable/generated/torch.nn.functional.cross_entropy.html"
TORCH_CUDA_ASSERT = "https://github.com/pytorch/pytorch/issues/18014"
KERAS_LOSSES = "https://keras.io/api/losses/"
KERAS_REDUCE = "https://github.com/keras-team/keras/blob/master/keras/src/losses/loss.py"
KERAS2_REDUCE = "https://github.com/keras-team/keras/blob/v2.12.0/keras/utils/losses_utils.py"

BEHAVIOUR = behaviour(
    "sparse-labels-out-of-range",
    sources=[],
    links=[
        TF_DOC,
        TF_GPU_NAN,
        "https://github.com/tensorflow/tensorflow/issues/10268",
        "https://github.com/tensorflow/tensorflow/issues/56979",
        "https://github.com/tensorflow/tensorflow/issues/57173",
        TF_XLA_NAN,
        "https://www.tensorflow.org/api_docs/python/tf/keras/losses/SparseCategoricalCrossentropy",
        "https://optax.readthedocs.io/en/latest/api/losses.html",
        TAKE_ALONG_AXIS,
        TORCH_XENT,
    ],
    floor=Floor(
        "array",
        "Every compared quantity mixes a row's logits: the loss lse(z_i) - z_i[l_i] (a reduction over the row "
        "that cancels against the label's logit), the gradient softmax(z_i) - onehot(l_i) (normalised over the "
        "row, cancelling at the label), and the batch mean and its gradient (sums over rows). Their rounding is at "
        "the logits' magnitude, so they are held at the inputs' scale (record.scale = 'inputs', _scale).",
    ),
)

CATEGORIES = (*oor.CATEGORIES, "ignore-index")
IGNORE_INDEX = -100  # PyTorch's default ignore_index
TF_LABEL_IAE = raises(
    "InvalidArgumentError", r"Received a label value of -?\d+ which is outside the valid range of \[0, \d+\)"
)
TORCH_TARGET = raises("IndexError", r"Target -?\d+ is out of bounds")
ISSUE_MESSAGE = "Received a label value of 7 which is outside the valid range of [0, 5)"
APIS = {"tensorflow": ("xent", "keras"), "jax": ("xent", "take_along_axis"), "torch": ("xent",)}


def _keys(kind, api, **by_category):
    return {f"{kind}:{api}[{c}]": v for c, v in by_category.items()}


def _all(kind, api, value):
    return _keys(kind, api, **{c: value for c in CATEGORIES})


# jnp.take_along_axis's documented fill (NaN) with NumPy negatives, for the oracle-only spelling.
_JAX_FILL = {"above": "nan", "negative": "wrap", "below": "nan", "ignore-index": "nan"}
_JAX_FILL_GRAD = {"above": "softmax", "negative": "wrap", "below": "softmax", "ignore-index": "softmax"}
_JAX_MEAN = {"above": "nan", "negative": "mean-of-rows", "below": "nan", "ignore-index": "nan"}

# Defaults: the CPU contract of tf.nn.sparse_softmax_cross_entropy_with_logits (shared by Keras
# and the shared spelling "xent": optax, F.cross_entropy); take_along_axis's documented fill.
EXPECT = expectations(
    {
        **{
            k: v
            for api in ("xent", "keras")
            for kind in ("loss", "grad", "mean", "mean-grad")
            for k, v in _all(kind, api, TF_LABEL_IAE).items()
        },
        **_keys("loss", "take_along_axis", **_JAX_FILL),
        **_keys("grad", "take_along_axis", **_JAX_FILL_GRAD),
        **_keys("mean", "take_along_axis", **_JAX_MEAN),
        **_all("mean-grad", "take_along_axis", "per-row/batch"),
        **{f"rows:{api}": "own-row" for api in ("xent", "keras", "take_along_axis")},
        **{f"empty-mean:{api}": "nan" for api in ("xent", "keras", "take_along_axis")},
        "keras-loss-dtype": "logits",
        "issue-example": raises("InvalidArgumentError", ISSUE_MESSAGE.replace("[", r"\[").replace(")", r"\)")),
    },
    # -- XLA: no check, NaN rows (measured on CPU; the lowering is the same on GPU)
    *expect_keys(
        "loss:{api}[{c}]",
        "nan",
        over={"api": ("xent", "keras"), "c": CATEGORIES},
        framework="tensorflow",
        mode="xla",
        link=TF_XLA_NAN,
        reason="the XLA lowering of SparseSoftmaxCrossEntropyWithLogits checks no label: a one-hot "
        "compare that matches no class, and the row is NaN (the GPU contract) on CPU too, silently",
    ),
    *expect_keys(
        "grad:{api}[{c}]",
        "nan",
        over={"api": ("xent", "keras"), "c": CATEGORIES},
        framework="tensorflow",
        mode="xla",
        link=TF_XLA_NAN,
        reason="XLA: the backprop row of an out-of-range label is NaN, as the loss row",
    ),
    *expect_keys(
        "mean:{api}[{c}]",
        "nan",
        over={"api": ("xent", "keras"), "c": CATEGORIES},
        framework="tensorflow",
        mode="xla",
        link=TF_XLA_NAN,
        reason="XLA: one NaN row makes the batch mean NaN",
    ),
    *expect_keys(
        "mean-grad:{api}[{c}]",
        "per-row/batch",
        over={"api": ("xent", "keras"), "c": CATEGORIES},
        framework="tensorflow",
        mode="xla",
        link=TF_XLA_NAN,
        reason="XLA: the mean's gradient is the rows' backprop over the batch size: "
        "NaN in the bad rows only, the in-range rows keep their gradient although the loss is NaN",
    ),
    # -- GPU: the documented NaN rows (declared, not measured here)
    *expect_keys(
        "loss:{api}[{c}]",
        "nan",
        over={"api": ("xent", "keras"), "c": CATEGORIES},
        framework="tensorflow",
        mode="eager|function|graph",
        device="gpu",
        link=TF_DOC,
        reason="tf.nn.sparse_softmax_cross_entropy_with_logits docs: other "
        "values return NaN for corresponding loss and gradient rows on GPU; declared, not measured here",
    ),
    *expect_keys(
        "grad:{api}[{c}]",
        "nan",
        over={"api": ("xent", "keras"), "c": CATEGORIES},
        framework="tensorflow",
        mode="eager|function|graph",
        device="gpu",
        link=TF_GPU_NAN,
        reason="GPU: NaN gradient rows (the docs, issue 8484); declared, not measured here",
    ),
    *expect_keys(
        "mean:{api}[{c}]",
        "nan",
        over={"api": ("xent", "keras"), "c": CATEGORIES},
        framework="tensorflow",
        mode="eager|function|graph",
        device="gpu",
        link=TF_GPU_NAN,
        reason="GPU: a NaN row makes the mean NaN ('everything in the "
        "model becomes NaN', issue 8484); declared, not measured here",
    ),
    *expect_keys(
        "mean-grad:{api}[{c}]",
        "per-row/batch",
        over={"api": ("xent", "keras"), "c": CATEGORIES},
        framework="tensorflow",
        mode="eager|function|graph",
        device="gpu",
        link=TF_DOC,
        reason="GPU: the mean's gradient is the NaN-rowed backprop over the batch size; declared, not measured",
    ),
    # -- JAX: optax is take_along_axis (fill) minus logsumexp
    *[
        expect(
            f"{kind}:xent[{c}]",
            table[c],
            framework="jax",
            link=OPTAX_NAN if c != "negative" else TAKE_ALONG_AXIS,
            reason=(
                "optax.softmax_cross_entropy_with_integer_labels takes the label's logit with "
                "jnp.take_along_axis, whose default mode='fill' gives NaN out of bounds; no error under "
                "tracing (open optax issue)"
            )
            if c != "negative"
            else "jnp.take_along_axis normalises a negative index as NumPy does: label -1 is class n-1",
        )
        for kind, table in (("loss", _JAX_FILL), ("grad", _JAX_FILL_GRAD), ("mean", _JAX_MEAN))
        for c in CATEGORIES
    ],
    *expect_keys(
        "mean-grad:{api}[{c}]",
        "per-row/batch",
        over={"api": ("xent",), "c": CATEGORIES},
        framework="jax",
        link=TAKE_ALONG_AXIS,
        reason="the filled NaN is a constant: its gradient is dropped, the mean's gradient is the "
        "rows' (softmax in the bad rows, finite) over the batch size, although the mean is NaN",
    ),
    # -- PyTorch: F.cross_entropy checks targets; -100 is ignore_index
    *[
        expect(
            f"{kind}:xent[{c}]",
            TORCH_TARGET,
            framework="torch",
            device="cpu",
            link=TORCH_XENT,
            reason="nll_loss checks every target that is not ignore_index: 'Target 7 is out of bounds.'",
        )
        for kind in ("loss", "grad", "mean", "mean-grad")
        for c in ("above", "negative", "below")
    ],
    *[
        expect(
            f"{kind}:xent[ignore-index]",
            v,
            framework="torch",
            device="cpu",
            link=TORCH_XENT,
            reason="ignore_index=-100 (the default): the row's loss and gradient are 0 and the mean "
            "divides by the number of rows not ignored",
        )
        for kind, v in (
            ("loss", "zero"),
            ("grad", "zero"),
            ("mean", "mean-of-valid-rows"),
            ("mean-grad", "per-row/valid"),
        )
    ],
    expect(
        "keras-loss-dtype",
        "floatx",
        framework="tensorflow",
        versions=">=2.16",
        link=KERAS_LOSSES,
        reason="Keras 3 (with TF >= 2.16) casts y_pred to the loss's dtype, keras.config.floatx() "
        "(float32), so float64 logits give a float32 loss; Keras 2 keeps float64",
    ),
    expect(
        "empty-mean:keras",
        "empty",
        framework="tensorflow",
        versions=">=2.16",
        link=KERAS_REDUCE,
        reason="Keras 3's reduce_values returns the losses unreduced when their shape is (0,): the mean of an "
        "empty batch is an empty array, not a scalar",
    ),
    expect(
        "empty-mean:keras",
        "zero",
        framework="tensorflow",
        mode="graph",
        versions=">=2.16",
        link=KERAS_REDUCE,
        reason="in a v1 graph the fed batch has no static shape, so Keras 3's shape-(0,) shortcut does not fire "
        "and sum_over_batch_size divides by 0 with divide_no_nan: 0",
    ),
    expect(
        "empty-mean:keras",
        "zero",
        framework="tensorflow",
        versions="<2.16",
        link=KERAS2_REDUCE,
        reason="Keras 2's sum_over_batch_size reduction divides with divide_no_nan (_safe_mean): the mean of "
        "no rows is 0",
    ),
    *[
        expect(
            f"empty-mean:{api}",
            raises("TypeError", r"Slice size at index 0 in gather op is out of range"),
            framework="jax",
            versions="<=0.4.30",
            link=TAKE_ALONG_AXIS,
            reason="JAX 0.4.30: take_along_axis on an empty batch builds a gather whose slice size (1) exceeds "
            "the empty axis and refuses at trace time (measured on 0.4.30; 0.10.2 gives the NaN mean; the "
            "release between them that fixed it is not bisected)",
        )
        for api in ("xent", "take_along_axis")
    ],
    expect(
        "issue-example",
        "nan",
        framework="tensorflow",
        mode="xla",
        link=TF_XLA_NAN,
        reason="XLA checks no label: the row of label 7 is NaN, no error",
    ),
    expect(
        "issue-example",
        "nan",
        framework="tensorflow",
        mode="eager|function|graph",
        device="gpu",
        link=TF_GPU_NAN,
        reason="the GPU kernel returns NaN for the row (issue 8484); declared, not measured",
    ),
    expect(
        "issue-example", "nan", framework="jax", link=OPTAX_NAN, reason="optax: take_along_axis fills NaN for label 7"
    ),
    expect(
        "issue-example",
        raises("IndexError", r"Target 7 is out of bounds"),
        framework="torch",
        device="cpu",
        link=TORCH_XENT,
        reason="F.cross_entropy: 'Target 7 is out of bounds.'",
    ),
)

# ---------------------------------------------------------------- strategies
#: (batch, classes), each shape with one dtype: XLA and jax.jit compile once per signature. No single
#: class: Keras 2 squeezes (B, 1) logits and refuses them ("labels.shape must equal logits.shape
#: except for the last dimension", measured on TF 2.12), a question of shapes, not of labels.
LOGIT_SHAPES = ((4, 5), (6, 2), (3, 3))
INT32 = np.iinfo(np.int32)


@dataclasses.dataclass(frozen=True)
class XentCase:
    logits: np.ndarray  # (B, n)
    labels: np.ndarray  # (B,) int32: in-range and out-of-range mixed
    w: np.ndarray  # cotangent (B,), positive (a NaN row stays NaN, rules stay apart)


@st.composite
def xent_cases(draw, *, shapes=LOGIT_SHAPES) -> XentCase:
    dtype, (b, n) = draw(ss.dtypes_and_shapes(shapes=shapes), label="dtype, logits shape")
    logits = draw(ss.arrays(dtype, (b, n), elements=ss.floats(dtype, -8.0, 8.0)), label="logits")
    edges = (0, n - 1, n, n + 5, -1, -n, -n - 1, -7, IGNORE_INDEX, INT32.max, INT32.min)
    label = st.one_of(
        st.just(IGNORE_INDEX),  # a branch of its own: PyTorch's ignore_index must come up in 25 examples
        st.sampled_from(edges),
        st.integers(0, n - 1),
        st.integers(n, n + 6),
        st.integers(-n, -1),
        st.integers(-n - 6, -n - 1),
    )
    labels = np.array(draw(st.lists(label, min_size=b, max_size=b), label="labels"), np.int32)
    w = draw(ss.arrays(dtype, (b,), elements=ss.floats(dtype, 0.5, 4.0)), label="cotangent")
    return XentCase(logits, labels, w)


#: Explicit examples: float64 (6, 2) logits whose labels hold every out-of-range category beside two
#: in-range rows (0 and n-1), so that a row that runs the mixed labels without refusing (XLA, JAX)
#: judges the in-range rows beside them (``rows:<api>``) without waiting for a draw.
XENT_EXAMPLES = (
    XentCase(
        oor.distinct(np.float64, (6, 2)),
        np.array([0, 2, -1, -3, IGNORE_INDEX, 1], np.int32),
        oor.positive(np.float64, (6,)),
    ),
)


#: Class counts of an empty batch. Neither has an element, but each is one more input signature
#: (a trace and compilation per program and API), so ci and quick (ss.SIGNATURES "largest") draw
#: only the largest; dev and thorough draw both.
EMPTY_CLASSES = (5, 2)


@st.composite
def empty_class_counts(draw, *, menu=EMPTY_CLASSES) -> int:
    return draw(st.sampled_from((max(menu),) if ss.SIGNATURES["policy"] == "largest" else menu))


# ---------------------------------------------------------------- the programs
class SparseXent(Program):
    """Per-row loss. ``api``: "xent" (the shared spelling), "keras", "take_along_axis" (JAX by hand)."""

    def tensorflow(tf, logits, labels, *, api="xent", raw=False):
        """``raw``: Keras' loss in its own dtype; otherwise cast to the logits' (Keras 3 computes in
        floatx), so that a cotangent of the logits' dtype applies."""
        if api == "keras":
            loss = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction="none")(labels, logits)
            return loss if raw else tf.cast(loss, logits.dtype)
        return tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits)

    def jax(jax, logits, labels, *, api="xent"):
        if api == "take_along_axis":
            picked = jax.numpy.take_along_axis(logits, labels[:, None], axis=-1)[:, 0]
            return jax.nn.logsumexp(logits, axis=-1) - picked
        import optax

        return optax.softmax_cross_entropy_with_integer_labels(logits, labels)

    def torch(torch, logits, labels, *, api="xent"):
        return torch.nn.functional.cross_entropy(logits, labels.long(), reduction="none")


class MeanXent(Program):
    """The batch mean, as each API spells it: reduce_mean, Keras' default reduction, jnp.mean,
    F.cross_entropy's default ``reduction="mean"`` (which divides by the rows not ignored)."""

    def tensorflow(tf, logits, labels, *, api="xent"):
        if api == "keras":
            return tf.cast(
                tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)(labels, logits), logits.dtype
            )
        return tf.reduce_mean(SparseXent.tensorflow(tf, logits, labels, api=api))

    def jax(jax, logits, labels, *, api="xent"):
        return jax.numpy.mean(SparseXent.jax(jax, logits, labels, api=api))

    def torch(torch, logits, labels, *, api="xent"):
        return torch.nn.functional.cross_entropy(logits, labels.long())


# ---------------------------------------------------------------- closed forms and classifiers
def categories(labels, n) -> np.ndarray:
    """:func:`suite.out_of_range.categories`, with ``ignore-index`` (torch's -100) its own (n < 100)."""
    return np.where(np.asarray(labels) == IGNORE_INDEX, "ignore-index", oor.categories(labels, n))


def isolate(labels, n, category) -> np.ndarray:
    """The labels with every out-of-range label not in ``category`` replaced by 0."""
    cats = categories(labels, n)
    return np.where((cats == category) | (cats == "in-range"), labels, 0).astype(labels.dtype)


def logsumexp(logits) -> np.ndarray:
    """Float64 ``log(sum(exp(z)))`` per row."""
    z = np.asarray(logits, np.float64)
    m = z.max(-1, keepdims=True) if z.size else np.zeros(z.shape[:-1] + (1,))
    return (m + np.log(np.exp(z - m).sum(-1, keepdims=True)))[:, 0]


def closed_form(logits, labels):
    """Float64 ``(loss, softmax)`` per row: ``logsumexp(z) - z[l]`` (NaN where l is out of range)
    and ``softmax(z)``; the gradient of row i is ``softmax(z_i) - onehot(l_i)``.

    >>> loss, p = closed_form(np.array([[0.0, 0.0]]), np.array([1]))
    >>> float(loss[0]), p.tolist()
    (0.6931471805599453, [[0.5, 0.5]])
    """
    z, lse = np.asarray(logits, np.float64), logsumexp(logits)
    inside = categories(labels, z.shape[-1]) == "in-range"
    picked = np.take_along_axis(z, np.where(inside, labels, 0).astype(np.int64)[:, None], -1)[:, 0]
    return np.where(inside, lse - picked, np.nan), np.exp(z - lse[:, None])


def _rules(z, p, lse, lab, n):
    """Each rule's (loss, gradient) for one row with label ``lab``."""
    wrap, clamp, none = lab % n, min(max(lab, 0), n - 1), np.zeros(n)
    return {
        "wrap": (lse - z[wrap], p - np.eye(n)[wrap]),
        "clamp": (lse - z[clamp], p - np.eye(n)[clamp]),
        "logsumexp": (lse, None),
        "softmax": (None, p),
        "zero": (0.0, none),
    }


def classify(loss, grad, logits, labels, w, *, prec, scale) -> tuple[dict, dict]:
    """The loss and gradient observation per out-of-range category present in ``labels``: the
    rules every row of the category fits (``nan``, ``zero``, ``wrap``, ``clamp``, ``logsumexp``;
    gradient rows of sum(w * loss) ``nan``, ``zero``, ``softmax``, ``wrap``, ``clamp``), within
    ``prec``'s gradient tolerance at ``scale``.

    >>> classify(np.array([np.nan]), np.full((1, 2), np.nan), np.zeros((1, 2)), np.array([7]), np.ones(1),
    ...          prec=np.float64, scale=1.0)
    ({'above': 'nan'}, {'above': 'nan'})
    """
    z, n = np.asarray(logits, np.float64), np.shape(logits)[-1]
    lse_rows, p = logsumexp(logits), closed_form(logits, labels)[1]
    t = cmp.GRAD.of(prec)

    def close(out, ref):
        return (
            cmp.rel_err(np.asarray(out, np.float64), np.asarray(ref, np.float64), rtol=t, scale=scale, dtype=prec) <= t
        )

    found_l, found_g = {}, {}
    for i, (lab, c) in enumerate(zip(labels.tolist(), categories(labels, n).tolist())):
        if c == "in-range":
            continue
        fl, fg = set(), set()
        if np.isnan(loss[i]):
            fl.add("nan")
        if np.all(np.isnan(grad[i])):
            fg.add("nan")
        for rule, (ref_l, ref_g) in _rules(z[i], p[i], lse_rows[i], lab, n).items():
            if ref_l is not None and close([loss[i]], [ref_l]):
                fl.add(rule)
            if ref_g is not None and close(grad[i], w[i] * ref_g):
                fg.add(rule)
        found_l[c] = found_l[c] & fl if c in found_l else fl
        found_g[c] = found_g[c] & fg if c in found_g else fg
    return (
        {c: oor.verdict(s, none_fits="garbage") for c, s in found_l.items()},
        {c: oor.verdict(s, none_fits="other") for c, s in found_g.items()},
    )


def classify_mean(mean, mean_grad, loss, grad, logits, labels, *, prec, scale) -> tuple:
    """The batch mean against the same API's rows: ``nan``, ``mean-of-rows`` (sum / B),
    ``mean-of-valid-rows`` (in-range rows only, sum / their count) or ``other``; its gradient
    against the rows' gradient with cotangent 1/B: ``per-row/batch``, ``per-row/valid`` (scaled
    B / valid rows), or ``other``. ``None`` where the example cannot tell."""
    t = cmp.GRAD.of(prec)
    b, inside = len(labels), categories(labels, np.shape(logits)[-1]) == "in-range"
    valid = int(inside.sum())

    def close(out, ref):
        return (
            cmp.rel_err(np.asarray(out, np.float64), np.asarray(ref, np.float64), rtol=t, scale=scale, dtype=prec) <= t
        )

    fits = set()
    if np.isnan(mean):
        fits.add("nan")
    elif close([mean], [np.sum(np.asarray(loss, np.float64)) / b]):
        fits.add("mean-of-rows")
    if valid and not np.isnan(mean) and close([mean], [closed_form(logits, labels)[0][inside].sum() / valid]):
        fits.add("mean-of-valid-rows")
    grad_fits = set()
    if close(mean_grad, grad):
        grad_fits.add("per-row/batch")
    if valid and close(mean_grad, np.asarray(grad, np.float64) * b / valid):
        grad_fits.add("per-row/valid")
    return oor.verdict(fits, none_fits="other"), oor.verdict(grad_fits, none_fits="other")


def _no_torch_cuda(subject):
    if subject.framework == "torch" and subject.device == "gpu":
        declared_skip(
            "PyTorch CUDA nll_loss fails an out-of-range target with a device-side assert "
            "('t >= 0 && t < n_classes') that poisons the CUDA context for the rest of the process",
            link=TORCH_CUDA_ASSERT,
        )


def _scale(record):
    return max(record.input_scale(), 1.0)


_LOSS_DTYPES: dict = {}


def loss_dtype(subject, api, logits) -> np.dtype:
    """The dtype ``api`` computes its loss in for ``logits`` (Keras 3: floatx), measured once per
    row, API and dtype on in-range labels: the precision its rows are held to."""
    key = (subject.id, api, logits.dtype.name)
    if key not in _LOSS_DTYPES:
        zeros = np.zeros(logits.shape[:1], np.int32)
        raw = {"raw": True} if api == "keras" else {}
        _LOSS_DTYPES[key] = np.asarray(subject.run(SparseXent.of(subject), logits, zeros, api=api, **raw)).dtype
    return _LOSS_DTYPES[key]


def _rows(subject, case, labels, api, w):
    """(loss, d sum(w * loss)/d logits) of ``api`` on ``labels``."""
    loss, (grad, _) = subject.vjp(SparseXent.of(subject), case.logits, labels, cotangent=w, api=api)
    return np.asarray(loss), np.asarray(grad)


def _check_in_range_rows(subject, record, case, api, loss, grad, prec):
    """``rows:<api>``: in a batch with out-of-range labels, the in-range rows keep their closed-form
    loss and gradient (``own-row``) or not (``spread``)."""
    __tracebackhide__ = True
    inside = categories(case.labels, case.logits.shape[-1]) == "in-range"
    if not inside.any():
        return
    ref_loss, p = closed_form(case.logits, case.labels)
    ref_grad = case.w[:, None].astype(np.float64) * (p - np.eye(p.shape[-1])[np.where(inside, case.labels, 0)])
    pairs = (("loss", loss[inside], ref_loss[inside]), ("gradient", grad[inside], ref_grad[inside]))
    t = cmp.GRAD.of(prec)
    kept = all(cmp.rel_err(o, r, rtol=t, scale=_scale(record), dtype=prec) <= t for _, o, r in pairs)
    record.check(EXPECT, **{f"rows:{api}": "own-row" if kept else "spread"})
    for name, out, ref in pairs if kept else ():
        record.close(
            name=f"{api} in-range {name} rows",
            out=out.astype(np.float64),
            ref=ref,
            oracle="closed-form",
            derived_from=prec,
        )


# ---------------------------------------------------------------- properties
@ss.explicit("case", XENT_EXAMPLES)
@given(case=xent_cases())
def test_out_of_range_rows_are_declared(subject, record, case):
    """Each API's loss and gradient row per out-of-range category, and the in-range rows beside them."""
    record.example(logits=case.logits, labels=case.labels, w=case.w)
    record.scale = "inputs"  # a loss lse(z) - z[l] cancels: errors are absolute at the logits' magnitude
    _no_torch_cuda(subject)
    n = case.logits.shape[-1]
    present = [c for c in CATEGORIES if c in categories(case.labels, n)]
    for api in APIS[subject.framework]:
        prec = loss_dtype(subject, api, case.logits)
        runs = [(case.labels, present)] if present else []
        while runs:
            labels, cats = runs.pop(0)
            try:
                loss, grad = _rows(subject, case, labels, api, case.w)
            except Exception as e:  # the framework's refusal is the observation
                if len(cats) > 1:
                    runs = [(isolate(case.labels, n, c), [c]) for c in cats]
                    continue
                record.check(EXPECT, **{f"{kind}:{api}[{cats[0]}]": cmp.error_name(e) for kind in ("loss", "grad")})
                continue
            by_loss, by_grad = classify(loss, grad, case.logits, labels, case.w, prec=prec, scale=_scale(record))
            for c in cats:
                for kind, seen in (("loss", by_loss[c]), ("grad", by_grad[c])):
                    if seen is not None:  # None: this example cannot tell two rules apart
                        record.check(EXPECT, **{f"{kind}:{api}[{c}]": seen})
            if labels is case.labels:
                _check_in_range_rows(subject, record, case, api, loss, grad, prec)


@given(case=xent_cases())
def test_batch_mean_with_out_of_range_labels_is_declared(subject, record, case):
    """Per category (alone among in-range labels): the batch mean and its gradient against the API's own rows."""
    record.example(logits=case.logits, labels=case.labels)
    _no_torch_cuda(subject)
    n, b = case.logits.shape[-1], len(case.labels)
    ones = np.full((b,), 1.0 / b, case.logits.dtype)
    for c in [c for c in CATEGORIES if c in categories(case.labels, n)]:
        labels = isolate(case.labels, n, c)
        if not (categories(labels, n) == "in-range").any():  # keep one valid row: PyTorch's mean of
            labels[-1] = 0  # none but ignored rows is 0/0, a question for test_empty_batch
        for api in APIS[subject.framework]:
            try:
                mean, (mean_grad, _) = subject.vjp(MeanXent.of(subject), case.logits, labels, api=api)
            except Exception as e:  # the framework's refusal is the observation
                record.check(EXPECT, **{f"{k}:{api}[{c}]": cmp.error_name(e) for k in ("mean", "mean-grad")})
                continue
            loss, grad = _rows(subject, case, labels, api, ones)
            prec = loss_dtype(subject, api, case.logits)
            seen = classify_mean(
                float(mean), mean_grad, loss, grad, case.logits, labels, prec=prec, scale=_scale(record)
            )
            for kind, label in zip(("mean", "mean-grad"), seen):
                if label is not None:  # None: this example cannot tell two rules apart
                    record.check(EXPECT, **{f"{kind}:{api}[{c}]": label})


@given(case=xent_cases())
def test_in_range_labels_match_closed_form_and_oracles(subject, oracles, record, case):
    """With every label in [0, n): loss logsumexp(z) - z[l], gradient w * (softmax(z) - onehot(l)), per API."""
    n = case.logits.shape[-1]
    labels = (case.labels.astype(np.int64) % n).astype(np.int32)
    record.example(logits=case.logits, labels=labels, w=case.w)
    record.scale = "inputs"  # a loss lse(z) - z[l] cancels: errors are absolute at the logits' magnitude
    ref_loss, p = closed_form(case.logits, labels)
    ref_grad = case.w[:, None].astype(np.float64) * (p - np.eye(n)[labels])
    for api in APIS[subject.framework]:
        loss, grad = _rows(subject, case, labels, api, case.w)
        prec = loss_dtype(subject, api, case.logits)
        if api == "keras" and case.logits.dtype == np.float64:
            record.check(EXPECT, **{"keras-loss-dtype": "logits" if prec == case.logits.dtype else "floatx"})
        for name, out, ref in (("loss", loss, ref_loss), ("grad", grad, ref_grad)):
            if prec == case.logits.dtype:
                record.close(name=f"{api} {name}", out=out, ref=ref.astype(prec), oracle="closed-form")
            else:  # Keras 3: computed in float32 (checked above), cast back to the logits' dtype
                record.close(name=f"{api} {name}", out=out, ref=ref, oracle="closed-form", derived_from=prec)
        if api == "xent":
            record.against(oracles, SparseXent, case.logits, labels, cotangent=case.w, got={"loss": loss, "grad": grad})


@given(dtype=ss.float_dtypes(), n=empty_class_counts())
def test_empty_batch(subject, record, dtype, n):
    """No rows: loss of shape (0,), gradient (0, n), and the batch mean of nothing (NaN, 0, or no value)."""
    logits, labels = np.zeros((0, n), dtype), np.zeros((0,), np.int32)
    record.example(logits=logits, labels=labels)
    for api in APIS[subject.framework]:
        try:
            loss, (grad, _) = subject.vjp(SparseXent.of(subject), logits, labels, api=api)
            mean = np.asarray(subject.run(MeanXent.of(subject), logits, labels, api=api))
        except Exception as e:  # the framework's refusal is the observation
            record.check(EXPECT, **{f"empty-mean:{api}": cmp.error_name(e)})
            continue
        record.equal(name=f"{api} loss", out=np.asarray(loss), ref=np.zeros((0,), dtype), oracle="closed-form")
        record.equal(name=f"{api} grad", out=np.asarray(grad), ref=logits, oracle="closed-form")
        seen = "empty" if mean.size == 0 else "nan" if np.isnan(mean).all() else "zero" if not mean.any() else "other"
        record.check(EXPECT, **{f"empty-mean:{api}": seen})


# ---------------------------------------------------------------- the issue's example
ISSUE_LOGITS = np.array(
    [[1.0, 2.0, 3.0, 0.5, -1.0], [0.2, 0.1, -0.3, 2.0, 1.0], [1.0, 1.0, 1.0, 1.0, 1.0], [3.0, -2.0, 0.0, 1.0, 2.0]],
    np.float32,
)
ISSUE_LABELS = np.array([0, 7, 2, 4], np.int32)


@given(z=st.just(ISSUE_LOGITS))
def test_issue_label_7_of_5_classes(subject, record, z):
    """Label 7 with 5 classes: CPU raises 'Received a label value of 7 which is outside the valid range of [0, 5)'."""
    record.example(logits=z, labels=ISSUE_LABELS)
    _no_torch_cuda(subject)
    try:
        loss = np.asarray(subject.run(SparseXent.of(subject), z, ISSUE_LABELS))
    except Exception as e:  # the documented CPU answer
        record.check(EXPECT, **{"issue-example": cmp.error_name(e)})
        return
    ref = closed_form(z, ISSUE_LABELS)[0]
    keep = np.arange(4) != 1
    record.close(name="issue in-range rows", out=loss[keep], ref=ref[keep].astype(np.float32), oracle="closed-form")
    record.check(EXPECT, **{"issue-example": "nan" if np.isnan(loss[1]) else "garbage"})
