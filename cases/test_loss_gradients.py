"""Loss gradients: soft-label cross-entropy, Keras' probability losses at saturation, fully masked softmax rows.

Three programs every classifier runs, each against float64 closed forms and the other frameworks:

- **Soft labels.** ``L_i = -sum_j y_ij log softmax(z_i)_j``. Its gradient is
  ``dL/dz = softmax(z) * sum(y) - y`` (``closed-form``; for rows that sum to 1 it is ``softmax(z) - y``)
  and ``dL/dy = -log softmax(z)``. ``tf.nn.softmax_cross_entropy_with_logits`` (v2) lets the labels'
  gradient through; ``tf.compat.v1.nn.softmax_cross_entropy_with_logits`` stops it (``none``).
  Rows are drawn summing to 1 (soft or one-hot), to something else, or all zero; per kind the logits'
  gradient is classified (``closed-form`` or ``softmax-minus-labels``), and the gradient of
  ``sum(v * dL/dz)`` with respect to the labels (the hypergradient) is classified too.
  Oracles: ``optax.softmax_cross_entropy``, ``F.cross_entropy`` with probability targets.
- **Keras probability losses.** ``CategoricalCrossentropy``/``BinaryCrossentropy(from_logits=False)``
  on ``softmax(z)``/``sigmoid(z)``: the loss clips probabilities to ``[eps, 1 - eps]`` (eps = 1e-7),
  unless it recognises the activation and computes from the logits instead (Keras 3: a
  ``_keras_logits`` attribute, or the producing op's type in traced code). At saturated rows
  (|logit gaps| >= 30) each mode's value and gradient is ``logits``, ``clipped`` (either clip
  formula: Keras 3's ``log(clip(p))``, Keras 2's ``log(clip(p) + eps)`` for the binary loss), ``nan``,
  ``inf``; gradients ``logits``, ``zero`` (the clip's), ``nan``.
- **Fully masked softmax rows** (every logit -inf): per API, the masked row's value (``nan``,
  ``zero``, ``uniform``), its gradient (``nan``, ``zero``), the partially masked rows
  (``closed-form`` or ``nan``: ``0 * log 0``), and whether the rows beside it keep their values
  (``own-row``).

Declared surprises:

- TensorFlow's cross-entropy kernel returns ``softmax(z) - y`` as the logits' gradient whatever the
  labels sum to (it assumes a distribution and does not check): an all-zero row, whose loss is 0,
  gets the gradient ``softmax(z)``; optax and PyTorch give the closed form.
- Its hypergradient with respect to the labels is zero (the gradient of the kernel's backprop output
  drops the labels), where JAX and PyTorch differentiate ``softmax * sum(y) - y``.
- Keras (2 and 3) computes from the logits when it sees them, and clips otherwise: ``tf.nn.softmax``
  and ``tf.nn.sigmoid`` are clipped eagerly and unwrapped when traced (function, XLA, graph), so a
  saturated row's loss differs by mode (``-log(1e-7)`` = 16.1 against the true 30-80) and its eager
  gradient is zero; Keras' own activations carry ``_keras_logits`` and are unwrapped in every mode
  (Keras 2.12 and 3.15 alike).
- A fully masked row is NaN in value and gradient (``tf.nn.softmax``, cross-entropy, ``jax.nn.softmax``,
  optax, ``F.softmax``, ``F.cross_entropy``); Keras 3's ``Softmax`` layer with a mask, ``jax.nn.softmax``
  with ``where=`` and ``F.scaled_dot_product_attention`` (PyTorch >= 2.5) give zeros; Keras 2's layer and
  ``jax.nn.dot_product_attention`` a uniform row (a finite fill), with a zero gradient. The NaN never
  leaves its row.
- TensorFlow's cross-entropy kernel (not XLA's), optax and PyTorch give NaN for a partially masked row
  whose labels are 0 on the masked classes (``0 * -inf``), although its gradient is finite.

Sources: https://github.com/tensorflow/tensorflow/issues/26495,
https://github.com/tensorflow/tensorflow/issues/60314,
https://github.com/tensorflow/tensorflow/issues/34221,
https://github.com/keras-team/keras/issues/17634, https://github.com/pytorch/pytorch/pull/131060
"""

import dataclasses

import numpy as np
from hypothesis import example, given, strategies as st

from suite import compare as cmp, out_of_range as oor, strategies as ss
from suite.behaviours import Floor, behaviour, on
from suite.expectations import expect, expectations
from suite.program import Program

TF_V1_XENT = "https://www.tensorflow.org/api_docs/python/tf/compat/v1/nn/softmax_cross_entropy_with_logits"
TF_V2_XENT = "https://www.tensorflow.org/api_docs/python/tf/nn/softmax_cross_entropy_with_logits"
TF_HYPERGRAD = "https://github.com/tensorflow/tensorflow/issues/26495"
TF_ZERO_LABELS = "https://github.com/tensorflow/tensorflow/issues/60314"
TF_NO_CHECK = "https://github.com/tensorflow/tensorflow/issues/2327"
KERAS2_UNWRAP = "https://github.com/tensorflow/tensorflow/issues/34221"
KERAS_CCE = "https://github.com/keras-team/keras/issues/17634"
KERAS_LOGITS = "https://github.com/keras-team/keras/issues/15271"
KERAS_XLA_BCE = "https://github.com/tensorflow/tensorflow/issues/118313"
TORCH_SAFE_SOFTMAX = "https://github.com/pytorch/pytorch/pull/131060"
TORCH_NAN_SOFTMAX = "https://github.com/pytorch/pytorch/issues/25110"
TF_INF_MASK = "https://github.com/tensorflow/tensorflow/issues/11756"
JAX_DPA_SOURCE = "https://github.com/jax-ml/jax/blob/main/jax/_src/nn/functions.py"
KERAS_SOFTMAX_MASK = "https://github.com/keras-team/keras/pull/21149"

BEHAVIOUR = behaviour(
    "loss-gradients",
    sources=[],
    links=[
        TF_HYPERGRAD,
        TF_ZERO_LABELS,
        KERAS2_UNWRAP,
        KERAS_CCE,
        TORCH_SAFE_SOFTMAX,
        KERAS_LOGITS,
        TF_V2_XENT,
        TF_V1_XENT,
        "https://optax.readthedocs.io/en/latest/api/losses.html",
        "https://pytorch.org/docs/stable/generated/torch.nn.functional.cross_entropy.html",
        "https://keras.io/api/losses/probabilistic_losses/",
    ],
    floor=Floor(
        "mixed",
        "Array-level throughout: softmax cross-entropies, their logits' and labels' gradients, hypergradients "
        "and masked-softmax rows all normalise over a row (softmax, a sum over classes), held at the row's "
        "cotangent or the inputs' magnitude. The binary Keras loss's per-entry gradient w (sigmoid(z) - y) / n "
        "is elementwise but cancels at |w|, and Keras computes it through its own unwrapped, clipped "
        "probabilities: it keeps the array floor at max(w) (not moved to per element).",
    ),
)

KINDS = ("sum-not-1", "zero")  # label rows where the two gradient rules differ
XENT_APIS = {"tensorflow": ("v1", "xent"), "jax": ("xent",), "torch": ("xent",)}
LOSSES = ("categorical", "binary")
ACTIVATIONS = ("tf.nn", "keras")  # tf.nn.softmax/sigmoid, or Keras' own activations
MASK_APIS = {
    "tensorflow": ("softmax", "xent", "keras.Softmax"),
    "jax": ("softmax", "xent", "softmax-where", "dot_product_attention"),
    "torch": ("softmax", "xent", "sdpa"),
}
ALL_MASK_APIS = sorted({a for apis in MASK_APIS.values() for a in apis})
KERAS3 = ">=2.16"


def _keras(key_what, loss, act):
    return f"{key_what}:{loss}[{act}]"


EXPECT = expectations(
    {
        "labels-grad:xent": "-log-softmax",
        "labels-grad:v1": "none",
        **{f"logits-grad:{api}[{k}]": "closed-form" for api in ("v1", "xent") for k in KINDS},
        "hypergrad:xent": "closed-form",
        "hypergrad:v1": "none",
        **{_keras(w, loss, act): "logits" for w in ("value", "grad") for loss in LOSSES for act in ACTIVATIONS},
        **{f"full-row:{api}": "nan" for api in ALL_MASK_APIS},
        **{f"full-row-grad:{api}": "nan" for api in ALL_MASK_APIS},
        **{f"partial-row:{api}": "closed-form" for api in ALL_MASK_APIS},
        **{f"other-rows:{api}": "own-row" for api in ALL_MASK_APIS},
    },
    # -- soft labels: TensorFlow's kernel assumes a distribution
    *[
        expect(
            f"logits-grad:{api}[{k}]",
            "softmax-minus-labels",
            framework="tensorflow",
            link=TF_ZERO_LABELS if k == "zero" else TF_NO_CHECK,
            reason="the SoftmaxCrossEntropyWithLogits kernel (and its XLA lowering) returns softmax(z) - y as the "
            "logits' backprop, which is the gradient only when the labels sum to 1; the precondition is documented "
            "and not checked, so "
            + (
                "an all-zero label row (loss 0) gets the gradient softmax(z), not 0"
                if k == "zero"
                else "a row summing to s gets softmax(z) - y instead of s * softmax(z) - y"
            ),
        )
        for api in ("v1", "xent")
        for k in KINDS
    ],
    expect(
        "hypergrad:xent",
        "zero",
        framework="tensorflow",
        link=TF_HYPERGRAD,
        reason="the gradient registered for SoftmaxCrossEntropyWithLogits differentiates its backprop output "
        "(softmax - y) with respect to the logits only: the gradient of sum(v * dL/dz) with respect to the labels "
        "is zero, not w * (sum(v * p) - v)",
    ),
    # -- Keras: clipped eagerly, unwrapped to the logits when traced
    *[
        expect(
            _keras(w, loss, "tf.nn"),
            label,
            framework="tensorflow",
            mode="eager",
            link=KERAS2_UNWRAP,
            reason="Keras computes from the logits only when it finds them: an eager tf.nn.softmax/sigmoid result "
            "carries no _keras_logits and its op is not inspected (EagerTensor), so the probabilities are clipped "
            "to [1e-7, 1 - 1e-7] and the clip's gradient is zero at a saturated entry; traced code unwraps the "
            "Softmax/Sigmoid op and computes from the logits (the loss differs by mode)",
        )
        for w, label in (("value", "clipped"), ("grad", "zero"))
        for loss in ("categorical", "binary")
    ],
    # -- fully masked rows
    expect(
        "full-row:keras.Softmax",
        "zero",
        framework="tensorflow",
        versions=KERAS3,
        link=KERAS_SOFTMAX_MASK,
        reason="Keras 3's Softmax layer (since keras-team/keras#21149, Keras 3.10; measured with 3.15.1) multiplies "
        "its output by the mask: a fully masked row is zeros, as jax.nn.softmax(where=)",
    ),
    expect(
        "full-row:keras.Softmax",
        "uniform",
        framework="tensorflow",
        versions="<2.16",
        link=KERAS_SOFTMAX_MASK,
        reason="Keras 2's Softmax layer adds -1e9 at masked positions and nothing else: a fully masked row is "
        "the uniform distribution (measured on TF 2.12)",
    ),
    expect(
        "full-row-grad:keras.Softmax",
        "zero",
        framework="tensorflow",
        link="https://github.com/keras-team/keras/blob/master/keras/src/layers/activations/softmax.py",
        reason="the mask is applied by a finite fill (no -inf reaches the softmax), so a fully masked row's "
        "gradient is zero",
    ),
    expect(
        "full-row:softmax-where",
        "zero",
        framework="jax",
        link="https://docs.jax.dev/en/latest/_autosummary/jax.nn.softmax.html",
        reason="jax.nn.softmax(where=mask) excludes masked entries from the sum and returns 0 for them: a row "
        "with none left is zeros",
    ),
    expect(
        "full-row-grad:softmax-where",
        "zero",
        framework="jax",
        link="https://docs.jax.dev/en/latest/_autosummary/jax.nn.softmax.html",
        reason="the where= output is a select: masked entries get no gradient",
    ),
    expect(
        "full-row:dot_product_attention",
        "uniform",
        framework="jax",
        link=JAX_DPA_SOURCE,
        reason="jax.nn.dot_product_attention's XLA implementation fills masked logits with the dtype's lowest "
        "finite value, not -inf: a fully masked row attends uniformly",
    ),
    expect(
        "full-row:dot_product_attention",
        "unavailable",
        framework="jax",
        versions="<=0.4.30",
        link=JAX_DPA_SOURCE,
        reason="jax.nn.dot_product_attention is absent from JAX 0.4.30 (the TF 2.12-2.17 envs' oracle; measured), "
        "so no row of it runs there",
    ),
    expect(
        "full-row-grad:dot_product_attention",
        "zero",
        framework="jax",
        versions=">0.4.30",  # absent before: no gradient to observe
        link=JAX_DPA_SOURCE,
        reason="the masked logits are replaced by a constant: no gradient reaches them",
    ),
    *[
        expect(
            f"{key}:sdpa",
            "zero",
            framework="torch",
            versions=">=2.5",
            link=TORCH_SAFE_SOFTMAX,
            reason="since PyTorch 2.5 scaled_dot_product_attention's math path uses _safe_softmax: a fully masked "
            "row is zeros (value and gradient), not NaN",
        )
        for key in ("full-row", "full-row-grad")
    ],
    *[
        expect(
            "partial-row:xent",
            "nan",
            framework=fw,
            mode=mode,
            link=link,
            reason=reason,
        )
        for fw, mode, link, reason in (
            (
                "tensorflow",
                "eager|function|graph",
                TF_INF_MASK,
                "the CPU kernel sums labels * log_softmax(z) over every class: a masked class with label 0 adds "
                "0 * -inf = NaN to the loss (its backprop softmax - y stays finite); XLA's lowering gives the "
                "closed form",
            ),
            (
                "jax",
                None,
                "https://optax.readthedocs.io/en/latest/api/losses.html",
                "optax.softmax_cross_entropy sums labels * log_softmax(logits): 0 * -inf = NaN at a masked class",
            ),
            (
                "torch",
                None,
                TORCH_NAN_SOFTMAX,
                "F.cross_entropy with probability targets sums target * log_softmax: 0 * -inf = NaN at a masked class",
            ),
        )
    ],
)

# ---------------------------------------------------------------- strategies
#: (batch, classes), each with one dtype (paired): XLA and jax.jit compile once per signature.
LOGIT_SHAPES = ((4, 5), (3, 3), (6, 2))
EPS = 1e-7  # keras.config.epsilon(), the clip of the probability losses


@dataclasses.dataclass(frozen=True)
class SoftCase:
    logits: np.ndarray  # (B, n), moderate and saturating magnitudes
    labels: np.ndarray  # (B, n), rows of KINDS or summing to 1
    kinds: tuple  # per row: one-hot, soft (sum 1), sum-not-1, zero
    w: np.ndarray  # cotangent of the loss (B,), positive
    v: np.ndarray  # cotangent of the logits' gradient (B, n), for the hypergradient


def _soft_row(draw, n, total):
    raw = np.array(draw(st.lists(ss.floats(np.float64, 0.05, 1.0), min_size=n, max_size=n)))
    return raw / raw.sum() * total


@st.composite
def soft_cases(draw) -> SoftCase:
    dtype, (b, n) = draw(ss.dtypes_and_shapes(shapes=LOGIT_SHAPES), label="dtype, logits shape")
    big = ss.either(ss.floats(dtype, -8.0, 8.0), ss.floats(dtype, -60.0, 60.0))
    logits = draw(ss.arrays(dtype, (b, n), elements=big), label="logits")
    kinds = tuple(draw(st.lists(ss.choice(("one-hot", "soft", *KINDS)), min_size=b, max_size=b), label="row kinds"))
    rows = []
    for kind in kinds:
        if kind == "zero":
            rows.append(np.zeros(n))
        elif kind == "one-hot":
            rows.append(np.eye(n)[draw(st.integers(0, n - 1))])
        else:
            off = ss.either(ss.floats(np.float64, 0.25, 0.75), ss.floats(np.float64, 1.5, 3.0))
            rows.append(_soft_row(draw, n, 1.0 if kind == "soft" else draw(off)))
    w = draw(ss.arrays(dtype, (b,), elements=ss.floats(dtype, 0.5, 4.0)), label="cotangent")
    v = draw(ss.arrays(dtype, (b, n), elements=ss.floats(dtype, -2.0, 2.0)), label="second cotangent")
    return SoftCase(logits, np.array(rows).astype(dtype), kinds, w, v)


@dataclasses.dataclass(frozen=True)
class SaturatedCase:
    logits: np.ndarray  # (B, n) float32: base in [-2, 2], saturated rows +S (30..80) on one class
    labels: np.ndarray  # (B, n) rows summing to 1, mass off the saturated class
    saturated: np.ndarray  # (B,) bool
    blogits: np.ndarray  # (B, n) float32: entries in [-4, 4] or +-[20, 80]
    blabels: np.ndarray  # (B, n) in [0, 1]
    bsaturated: np.ndarray  # (B, n) bool
    w: np.ndarray  # (B,)


@st.composite
def saturated_cases(draw) -> SaturatedCase:
    """float32 only: Keras 3 computes its losses in floatx (float32) whatever the input dtype."""
    f32 = np.float32
    _, (b, n) = draw(ss.dtypes_and_shapes(shapes=LOGIT_SHAPES, dtypes=(f32,)), label="logits shape")
    logits = draw(ss.arrays(f32, (b, n), elements=ss.floats(f32, -2.0, 2.0)), label="base logits")
    saturated = np.array(draw(st.lists(st.booleans(), min_size=b, max_size=b), label="saturated rows"))
    labels = np.zeros((b, n))
    for i in range(b):
        c = draw(st.integers(0, n - 1), label="saturated class")
        if saturated[i]:
            logits[i, c] += f32(draw(ss.floats(f32, 30.0, 80.0), label="saturation"))
        if draw(st.booleans(), label="one-hot"):
            hot = draw(st.integers(0, n - 2)) if n > 1 else 0
            labels[i, hot + (hot >= c and n > 1)] = 1.0  # never the saturated class
        else:
            labels[i] = _soft_row(draw, n, 1.0)
    mag = ss.floats(f32, 20.0, 80.0)
    entry = ss.either(ss.floats(f32, -4.0, 4.0), mag, mag.map(lambda x: -x))
    blogits = draw(ss.arrays(f32, (b, n), elements=entry), label="binary logits")
    blabels = draw(
        ss.arrays(f32, (b, n), elements=ss.either(ss.floats(f32, 0.05, 0.95), ss.choice((0.0, 1.0)))),
        label="binary labels",
    )
    w = draw(ss.arrays(f32, (b,), elements=ss.floats(f32, 0.5, 4.0)), label="cotangent")
    return SaturatedCase(logits, labels.astype(f32), saturated, blogits, blabels, np.abs(blogits) >= 20, w)


@dataclasses.dataclass(frozen=True)
class MaskedCase:
    logits: np.ndarray  # (B, n), -inf at masked entries
    labels: np.ndarray  # (B, n) rows summing to 1, 0 at masked classes of partially masked rows
    kinds: tuple  # per row: full, partial, none
    w: np.ndarray  # (B, n) cotangent of a softmax
    wr: np.ndarray  # (B,) cotangent of a loss


@st.composite
def masked_cases(draw) -> MaskedCase:
    dtype, (b, n) = draw(ss.dtypes_and_shapes(shapes=LOGIT_SHAPES), label="dtype, logits shape")
    z = draw(ss.arrays(dtype, (b, n), elements=ss.floats(dtype, -8.0, 8.0)), label="logits")
    kinds = draw(st.lists(ss.choice(("full", "partial", "none")), min_size=b, max_size=b), label="row kinds")
    if "full" not in kinds:
        kinds[draw(st.integers(0, b - 1))] = "full"
    labels = np.zeros((b, n))
    for i, kind in enumerate(kinds):
        keep = np.ones(n, bool)
        if kind == "full":
            keep[:] = False
        elif kind == "partial":
            masked = draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=n - 1, unique=True), label="masked")
            keep[masked] = False
        z[i, ~keep] = -np.inf
        labels[i] = _soft_row(draw, n, 1.0) * (keep if kind == "partial" else 1.0)
        labels[i] /= labels[i].sum()
    w = draw(ss.arrays(dtype, (b, n), elements=ss.floats(dtype, -2.0, 2.0)), label="cotangent")
    wr = draw(ss.arrays(dtype, (b,), elements=ss.floats(dtype, 0.5, 4.0)), label="loss cotangent")
    return MaskedCase(z, labels.astype(dtype), tuple(kinds), w, wr)


# ---------------------------------------------------------------- the programs
class SoftXent(Program):
    """Per-row softmax cross-entropy with probability labels; ``api="v1"``: TensorFlow's v1 spelling."""

    def tensorflow(tf, logits, labels, *, api="xent"):
        if api == "v1":
            return tf.compat.v1.nn.softmax_cross_entropy_with_logits(labels=labels, logits=logits)
        return tf.nn.softmax_cross_entropy_with_logits(labels=labels, logits=logits)

    def jax(jax, logits, labels, *, api="xent"):
        import optax

        return optax.softmax_cross_entropy(logits, labels)

    def torch(torch, logits, labels, *, api="xent"):
        return torch.nn.functional.cross_entropy(logits, labels, reduction="none")


class KerasProbabilityLoss(Program):
    """``loss`` (categorical, binary) with ``from_logits=False`` on ``act``'s softmax/sigmoid of the logits."""

    def tensorflow(tf, logits, labels, *, loss, act):
        keras = tf.keras
        if loss == "categorical":
            p = tf.nn.softmax(logits) if act == "tf.nn" else keras.activations.softmax(logits)
            return keras.losses.CategoricalCrossentropy(reduction="none")(labels, p)
        p = tf.nn.sigmoid(logits) if act == "tf.nn" else keras.activations.sigmoid(logits)
        return keras.losses.BinaryCrossentropy(reduction="none")(labels, p)


class MaskedSoftmax(Program):
    """``api`` on logits with -inf entries: a softmax (B, n) or a cross-entropy (B,). Mask-taking
    spellings get ``isfinite(z)`` as the mask and 0 at the masked logits."""

    def tensorflow(tf, z, y, *, api):
        if api == "xent":
            return tf.nn.softmax_cross_entropy_with_logits(labels=y, logits=z)
        if api == "keras.Softmax":
            mask = tf.math.is_finite(z)
            out = tf.keras.layers.Softmax()(tf.where(mask, z, tf.zeros_like(z)), mask=mask)
            return tf.cast(out, z.dtype)  # Keras 3 computes in floatx: see FLOAT32_APIS
        return tf.nn.softmax(z)

    def jax(jax, z, y, *, api):
        jnp = jax.numpy
        if api == "xent":
            import optax

            return optax.softmax_cross_entropy(z, y)
        mask = jnp.isfinite(z)
        if api == "softmax-where":
            return jax.nn.softmax(z, where=mask)
        if api == "dot_product_attention":  # scores q . k_s = z_s with k = v = I: the output is the softmax
            b, n = z.shape
            eye = jnp.broadcast_to(jnp.eye(n, dtype=z.dtype)[None, :, None, :], (b, n, 1, n))
            q = jnp.where(mask, z, 0)[:, None, None, :]
            return jax.nn.dot_product_attention(q, eye, eye, mask=mask[:, None, None, :], scale=1.0)[:, 0, 0, :]
        return jax.nn.softmax(z)

    def torch(torch, z, y, *, api):
        F = torch.nn.functional
        if api == "xent":
            return F.cross_entropy(z, y, reduction="none")
        if api == "sdpa":  # scores q . k_s = z_s with k = v = I: the output is the softmax
            b, n = z.shape
            mask = torch.isfinite(z)
            eye = torch.eye(n, dtype=z.dtype, device=z.device).expand(b, n, n)
            q = torch.where(mask, z, torch.zeros_like(z))[:, None, :]
            return F.scaled_dot_product_attention(q, eye, eye, attn_mask=mask[:, None, :], scale=1.0)[:, 0, :]
        return F.softmax(z, dim=-1)


# ---------------------------------------------------------------- closed forms
def log_softmax(z) -> np.ndarray:
    """Float64 log softmax per row; -inf entries stay -inf, a row of nothing but -inf is NaN.

    >>> log_softmax(np.array([[0.0, 0.0, -np.inf]])).tolist()
    [[-0.6931471805599453, -0.6931471805599453, -inf]]
    """
    z = np.asarray(z, np.float64)
    m = z.max(-1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        return z - m - np.log(np.exp(z - m).sum(-1, keepdims=True))


def softplus(x) -> np.ndarray:
    x = np.asarray(x, np.float64)
    return np.maximum(x, 0) + np.log1p(np.exp(-np.abs(x)))


def _close(out, ref, dtype, scale) -> bool:
    t = cmp.GRAD.of(dtype)
    return cmp.rel_err(np.asarray(out, np.float64), np.asarray(ref, np.float64), rtol=t, scale=scale, dtype=dtype) <= t


def _clipped(p):
    """p clipped to [eps, 1 - eps] as float32 rounds the bounds (Keras' clip_by_value in floatx)."""
    f32 = np.float32
    return np.clip(np.asarray(p, np.float64).astype(f32), f32(EPS), f32(1) - f32(EPS)).astype(np.float64)


def keras_forms(case: SaturatedCase, loss: str) -> dict:
    """Each rule's (value per row, gradient of sum(w * value) w.r.t. the logits, or None) for ``loss``:
    ``logits`` (the loss computed from the logits), ``clipped`` (Keras 3's clip), ``clipped+eps``
    (Keras 2's binary loss: log(clip(p) + eps), PR 41595's "double epsilon")."""
    w = case.w.astype(np.float64)[:, None]
    if loss == "categorical":
        z, y = case.logits, case.labels.astype(np.float64)
        ls = log_softmax(z)
        p = np.exp(ls)
        value = -(y * ls).sum(-1)
        clip = -(y * np.log(_clipped(p / p.sum(-1, keepdims=True)))).sum(-1)
        return {"logits": (value, w * (p * y.sum(-1, keepdims=True) - y)), "clipped": (clip, None)}
    z, y = np.asarray(case.blogits, np.float64), case.blabels.astype(np.float64)
    n = z.shape[-1]
    value = (softplus(z) - y * z).mean(-1)
    pc = _clipped(1 / (1 + np.exp(-z)))
    clip = -(y * np.log(pc) + (1 - y) * np.log(1 - pc)).mean(-1)
    clip_eps = -(y * np.log(pc + EPS) + (1 - y) * np.log(1 - pc + EPS)).mean(-1)
    grad = w * (1 / (1 + np.exp(-z)) - y) / n
    return {"logits": (value, grad), "clipped": (clip, None), "clipped+eps": (clip_eps, None)}


# ---------------------------------------------------------------- properties
#: One row of each kind (one-hot, soft, summing to 2, all zero) at moderate logits: the all-zero row
#: (TensorFlow's softmax(z) against the closed form's 0) and the row summing to 2 are told in every run.
EVERY_ROW_KIND = SoftCase(
    logits=np.array(
        [
            [1.5, -0.5, 2.0, 0.25, -1.0],
            [-2.0, 0.5, 1.0, 3.0, -0.75],
            [0.75, 1.25, -1.5, 0.0, 2.5],
            [-0.5, 1.0, 0.5, -1.25, 2.0],
        ],
        np.float32,
    ),
    labels=np.array(
        [[0, 0, 1, 0, 0], [0.1, 0.2, 0.3, 0.25, 0.15], [0.2, 0.6, 0.4, 0.3, 0.5], [0, 0, 0, 0, 0]], np.float32
    ),
    kinds=("one-hot", "soft", "sum-not-1", "zero"),
    w=np.array([1.0, 2.5, 0.75, 3.0], np.float32),
    v=np.array(
        [
            [0.5, -1.0, 1.5, 0.25, -0.5],
            [1.0, 0.75, -1.5, 2.0, -0.25],
            [-2.0, 0.5, 1.25, -0.75, 1.0],
            [1.5, -0.5, 0.0, -1.25, 0.75],
        ],
        np.float32,
    ),
)


@example(case=EVERY_ROW_KIND)
@given(case=soft_cases())
def test_soft_label_gradients_are_declared(subject, oracles, record, case):
    """Loss, logits' gradient (per label-row kind), labels' gradient and hypergradient, per API."""
    record.example(logits=case.logits, labels=case.labels, w=case.w, v=case.v)
    z, y, dtype = case.logits, case.labels, case.logits.dtype
    ls = log_softmax(z)
    p, s, w = np.exp(ls), y.sum(-1, keepdims=True).astype(np.float64), case.w.astype(np.float64)[:, None]
    ref_loss = -(y * ls).sum(-1)
    rules = {"closed-form": w * (p * s - y), "softmax-minus-labels": w * (p - y)}
    ref_hyper = w * ((case.v * p).sum(-1, keepdims=True) - case.v)
    gscale = float(np.max(w)) * 4.0  # |dL/dz| <= w * (sum(y) + 1)
    kinds = np.array(case.kinds)
    for api in XENT_APIS[subject.framework]:
        loss, (dz, dy), (_, hy) = subject.second_order(
            SoftXent.of(subject), z, y, cotangent=case.w, cotangent2=case.v, api=api
        )
        record.close(name=f"{api} loss", out=loss, ref=ref_loss.astype(dtype), oracle="closed-form", scale="inputs")
        sum1 = np.isin(kinds, ("one-hot", "soft"))
        record.close(
            name=f"{api} logits grad (rows summing to 1)",
            out=dz[sum1],
            ref=rules["closed-form"][sum1].astype(dtype),
            oracle="closed-form",
            scale=gscale,
        )
        for k in KINDS:
            rows = kinds == k
            if rows.any():
                fits = {rule for rule, ref in rules.items() if _close(dz[rows], ref[rows], dtype, gscale)}
                seen = oor.verdict(fits, none_fits="other")
                if seen is not None:
                    record.check(EXPECT, **{f"logits-grad:{api}[{k}]": seen})
        ref_dy = -w * ls
        seen = cmp.gradient_kind(dy)
        if seen == "nonzero":
            seen = "-log-softmax" if _close(dy, ref_dy, dtype, float(np.max(np.abs(ref_dy)))) else "other"
        record.check(EXPECT, **{f"labels-grad:{api}": seen})
        if seen == "-log-softmax":
            record.close(name=f"{api} labels grad", out=dy, ref=ref_dy.astype(dtype), oracle="closed-form")
        seen = cmp.gradient_kind(hy)
        if seen == "nonzero":
            seen = "closed-form" if _close(hy, ref_hyper, dtype, gscale * 2.0) else "other"
        if seen != "zero" or np.any(ref_hyper):  # a zero closed form cannot tell zeros from it
            record.check(EXPECT, **{f"hypergrad:{api}": seen})
        if api == "xent":
            record.against(oracles, SoftXent, z, y, cotangent=case.w, got={"loss": loss, "dlogits": ..., "dlabels": dy})


@on("tensorflow")
@given(case=saturated_cases())
def test_keras_probability_losses_at_saturation(subject, record, case):
    """Keras' CategoricalCrossentropy/BinaryCrossentropy(from_logits=False) on softmax/sigmoid output: the
    unsaturated rows' closed form, and per mode what a saturated row's value and gradient follow
    (Keras is TensorFlow's: no oracle has its activation-unwrapping)."""
    record.example(logits=case.logits, labels=case.labels, blogits=case.blogits, blabels=case.blabels, w=case.w)
    for loss in LOSSES:
        z, y = (case.logits, case.labels) if loss == "categorical" else (case.blogits, case.blabels)
        sat = case.saturated if loss == "categorical" else case.bsaturated.any(-1)
        forms = keras_forms(case, loss)
        for act in ACTIVATIONS:
            value, (grad, _) = subject.vjp(KerasProbabilityLoss.of(subject), z, y, cotangent=case.w, loss=loss, act=act)
            _close_unsaturated(record, case, loss, act, value, grad, sat, forms["logits"])
            if sat.any():
                _check_saturated(record, case, loss, act, value, grad, sat, forms)


def _close_unsaturated(record, case, loss, act, value, grad, sat, logits_form) -> None:
    """Off saturation, value and gradient are the logits closed form (a binary entry's gradient
    is its own: the unsaturated entries of every row)."""
    f32 = np.float32
    ref_value, ref_grad = logits_form
    calm = ~sat
    if loss == "binary":
        entries = ~case.bsaturated
        record.close(name=f"{loss}[{act}] grad (unsaturated entries)", out=grad[entries],
                     ref=ref_grad[entries].astype(f32), oracle="closed-form", scale=float(np.max(case.w)))  # fmt: skip
    else:
        record.close(name=f"{loss}[{act}] grad (unsaturated rows)", out=grad[calm], ref=ref_grad[calm].astype(f32),
                     oracle="closed-form", scale=float(np.max(case.w)))  # fmt: skip
    record.close(name=f"{loss}[{act}] value (unsaturated rows)", out=value[calm], ref=ref_value[calm].astype(f32),
                 oracle="closed-form")  # fmt: skip


def _check_saturated(record, case, loss, act, value, grad, sat, forms) -> None:
    """Which rule a saturated row's value follows (a closed form, clipped, nan, inf) and whether its
    gradient is the logits closed form, zero or nan."""
    f32 = np.float32
    v, scale = value[sat], max(record.input_scale(), 1.0)
    fits = {"nan"} if np.isnan(v).any() else {"inf"} if np.isinf(v).any() else set()
    for rule, (ref, _) in forms.items():
        if not fits and _close(v, ref[sat], f32, scale):
            fits.add("clipped" if rule.startswith("clipped") else rule)
    seen = oor.verdict(fits, none_fits="other")
    if seen is not None:
        record.check(EXPECT, **{_keras("value", loss, act): seen})
    ref_grad = forms["logits"][1]
    g = grad[sat] if loss == "categorical" else np.where(case.bsaturated, grad, 0)[sat]
    gref = ref_grad[sat] if loss == "categorical" else np.where(case.bsaturated, ref_grad, 0)[sat]
    fits = {"nan"} if np.isnan(g).any() else set()
    if not fits and not np.any(g):
        fits.add("zero")
    if not fits and _close(g, gref, f32, float(np.max(case.w))):
        fits.add("logits")
    seen = oor.verdict(fits, none_fits="other")
    if seen is not None:
        record.check(EXPECT, **{_keras("grad", loss, act): seen})


#: APIs that compute in float32 whatever the input dtype, held to float32's tolerance: Keras 3 layers
#: compute in floatx; jax.nn.dot_product_attention always computes its softmax in float32 (its source).
FLOAT32_APIS = ("keras.Softmax", "dot_product_attention")


def _masked_refs(case: MaskedCase, api: str):
    """Float64 (value, gradient) with each row's softmax over its finite logits (NaN for a full row)."""
    ls = log_softmax(case.logits)
    p = np.exp(ls)
    if api == "xent":
        y = case.labels.astype(np.float64)
        with np.errstate(invalid="ignore"):
            value = -np.where(y > 0, y * ls, 0.0).sum(-1)
        return value, case.wr.astype(np.float64)[:, None] * (p * y.sum(-1, keepdims=True) - y)
    w = case.w.astype(np.float64)
    return p, p * (w - (p * w).sum(-1, keepdims=True))


@given(case=masked_cases())
def test_fully_masked_softmax_rows(subject, record, case):
    """Per API: a fully masked row's value and gradient, the partially masked rows, and the rows beside them."""
    record.example(logits=case.logits, labels=case.labels, w=case.w, wr=case.wr)
    kinds, n = np.array(case.kinds), case.logits.shape[-1]
    full, partial, clear = kinds == "full", kinds == "partial", kinds == "none"
    for api in MASK_APIS[subject.framework]:
        dtype = np.dtype(np.float32) if api in FLOAT32_APIS else case.logits.dtype
        ct = case.wr if api == "xent" else case.w
        try:
            value, (grad, _) = subject.vjp(MaskedSoftmax.of(subject), case.logits, case.labels, cotangent=ct, api=api)
        except AttributeError as e:  # an API this release does not have
            record.check(EXPECT, **{f"full-row:{api}": cmp.unavailable_or_raised(e, api)})
            continue
        ref_value, ref_grad = _masked_refs(case, api)
        scale = max(record.input_scale(), 1.0)
        # the fully masked rows
        v = value[full]
        uniform = (
            np.full(v.shape, 1.0 / n) if api != "xent" else np.log(n) * case.labels[full].astype(np.float64).sum(-1)
        )
        seen = (
            "nan"
            if np.isnan(v).all()
            else "zero"
            if not np.any(v)
            else "uniform"
            if _close(v, uniform, dtype, scale)
            else "other"
        )
        record.check(EXPECT, **{f"full-row:{api}": seen})
        g = grad[full]
        seen = "nan" if np.isnan(g).all() else "zero" if not np.any(g) else "other"
        record.check(EXPECT, **{f"full-row-grad:{api}": seen})
        # the partially masked rows: value by rule, gradient by the closed form
        if partial.any():
            v = value[partial]
            seen = (
                "nan"
                if np.isnan(v).any()
                else "closed-form"
                if _close(v, ref_value[partial], dtype, scale)
                else "other"
            )
            record.check(EXPECT, **{f"partial-row:{api}": seen})
            record.close(
                name=f"{api} grad (partially masked rows)",
                out=grad[partial],
                ref=ref_grad[partial].astype(case.logits.dtype),
                oracle="closed-form",
                scale=scale,
                derived_from=dtype,
            )
        # the rows beside them
        if clear.any():
            pairs = (("value", value[clear], ref_value[clear]), ("grad", grad[clear], ref_grad[clear]))
            kept = all(_close(o, r, dtype, scale) for _, o, r in pairs)
            record.check(EXPECT, **{f"other-rows:{api}": "own-row" if kept else "spread"})
            for name, out, ref in pairs if kept else ():
                record.close(
                    name=f"{api} {name} (unmasked rows)",
                    out=out,
                    ref=ref.astype(case.logits.dtype),
                    oracle="closed-form",
                    scale=scale,
                    derived_from=dtype,
                )
