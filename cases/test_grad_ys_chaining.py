"""grad_ys / output_gradients: the cotangent that starts reverse mode, and chaining calls.

Source: seeds/002, first question ("What's the meaning of grad_ys of tf.gradients?").
Mathematically ``tf.gradients(ys, xs, grad_ys=w)`` and ``GradientTape.gradient(ys, xs,
output_gradients=w)`` return, for each x, the vector-Jacobian product
``sum_i w_i * dy_i/dx`` (i over every element of every y in ys): the gradient of
``sum(w * y)``. ``jax.vjp``'s pullback and ``torch.autograd.grad(grad_outputs=w)`` compute
the same. Left out, TensorFlow seeds ones ("ys are summed up to make a single scalar y";
tf.gradients docs: "we fill in a tensor of '1's of the shape of y"). Passing one call's
output as the next call's cotangent chains them: with h = tanh(x) and y = A @ tanh(h),
``grad(h, x, grad(y, h, w)) == grad(y, x, w)``. Closed form: y = A @ tanh(x)
has dy_i/dx_j = A_ij sech^2(x_j), so the VJP is ``(w @ A) * sech^2(x)``, and ``w^T tanh(x)``
for A. The seed's example as numbers: ys = [h^2, 3h], h = 2x, x = 1: no grad_ys gives 14;
grad_ys = [2, -1] gives 10; chained, dL/dh = 5 seeds h -> x and gives 10 again.

Saturating functions: the same chain through h = [sigmoid, softplus, exp](x) (one per row)
and y = a * h, at |x| up to 90 (20 in float16, and exp below its overflow), in float16,
bfloat16, float32 and float64 (TensorFlow registers all three gradients for the half types
in every mode, measured), against the float64 closed form ``w * a * f'(x)`` held per element
relatively, JAX and PyTorch in the same dtype. sigmoid's gradient is computed from its
output, ``w * y * (1 - y)``, in all three frameworks, so where y rounds to 1 its error is
absolute (~eps * |w * a|).

Declared surprises:

- ``tf.gradients`` needs a graph: in eager it raises RuntimeError ("tf.gradients is not
  supported when eager execution is enabled").
- ``jax.grad`` has an implicit seed only for shape-() outputs (TypeError for any other,
  (1,) and a tuple of scalars included); ``torch.autograd.grad`` only for one-element
  outputs (RuntimeError otherwise).
- A cotangent of the wrong shape: TensorFlow checks neither grad_ys' nor
  output_gradients' shape, so the first gradient op decides: it is refused
  (InvalidArgumentError at run time, ValueError while tracing with static shapes),
  broadcast silently through ``sin`` (gradient ``w * cos(x)``), or gives the tape a
  gradient whose shape is not x's (which tf.gradients, building a graph, refuses with
  ValueError); JAX raises ValueError and PyTorch RuntimeError for every wrong shape.
- PyTorch's softplus is linear above ``threshold=20`` ("reverts to the linear function"), so
  its gradient there is exactly the cotangent: in float64, 1 - sigmoid(x) = e^-x is visible
  up to x ~ 27.6 (TensorFlow and JAX give sigmoid(x)).
"""

import dataclasses

import ml_dtypes
import numpy as np
from hypothesis import example, given, strategies as st

from suite import compare as cmp, facts, strategies as ss
from suite.behaviours import Floor, behaviour, on
from suite.expectations import expect, expectations, raises
from suite.program import Program

BEHAVIOUR = behaviour(
    "grad-ys-chaining",
    sources=["002"],
    links=[
        "https://www.tensorflow.org/api_docs/python/tf/gradients",
        "https://www.tensorflow.org/api_docs/python/tf/GradientTape#gradient",
        "https://docs.jax.dev/en/latest/_autosummary/jax.vjp.html",
        "https://docs.pytorch.org/docs/stable/generated/torch.autograd.grad.html",
    ],
    floor=Floor(
        "mixed",
        "Per element: the VJPs of y = A @ tanh(x) (dA_ij sums w_bi tanh(x_bj) over the batch; dx_j sums w_i A_ij "
        "times 1 - tanh^2(x_j), which cancels where tanh saturates: scale sum_i |w_i A_ij|), the chained and "
        "one-call gradients and their classifiers at the same scales, and the saturating chain (w a f'(x), "
        "relative; sigmoid's w y (1 - y) at |w a|). Array-level (the inputs' magnitude): the float64 central "
        "differences, whose error is at the function's scale, and the wrong-shape classifier.",
    ),
)

GRADIENTS_LINK = "https://www.tensorflow.org/api_docs/python/tf/gradients"
GRADIENTS_UTIL = "https://github.com/tensorflow/tensorflow/blob/master/tensorflow/python/ops/gradients_util.py"
JAX_GRAD_LINK = "https://docs.jax.dev/en/latest/_autosummary/jax.grad.html"
TORCH_GRAD_LINK = "https://docs.pytorch.org/docs/stable/generated/torch.autograd.grad.html"
TORCH_MAKE_GRADS = "https://github.com/pytorch/pytorch/blob/main/torch/autograd/__init__.py"
MATH_GRAD_LINK = "https://github.com/tensorflow/tensorflow/blob/master/tensorflow/python/ops/math_grad.py"
BACKPROP_LINK = "https://github.com/tensorflow/tensorflow/blob/master/tensorflow/python/eager/backprop.py"
TORCH_SOFTPLUS_LINK = "https://docs.pytorch.org/docs/stable/generated/torch.nn.functional.softplus.html"

# JAX's answer to any wrong-shape cotangent (jax.vjp: vjpfun takes "a cotangent vector with the same
# shape as primals_out"); JAX 0.4 writes "vjp function", later releases "VJP function".
JAX_BAD_COTANGENT = raises(
    "ValueError", r"unexpected JAX type \(e\.g\. shape/dtype\) for argument to (vjp|VJP) function"
)
JAX_NOT_SCALAR = raises("TypeError", r"Gradient only defined for scalar-output functions")
FUNCS, KINDS = ("matvec", "sin"), ("size-one", "wrong-size", "column")
BAD_KEYS = [f"{k}[{f},{kind}]" for k in ("bad_shape", "bad_grad_ys") for f in FUNCS for kind in KINDS]

# TensorFlow with a wrong-shape cotangent (y of shape (3,), float32): per observation key, the
# modes and what they give. The key names GradientTape ("bad_shape") or tf.gradients
# ("bad_grad_ys"), the function and the kind of wrong shape. A refusal is the first gradient
# op's: at run time its kernel's (per function: einsum's dimension check, or the Mul of sin's
# grad * cos(x)), while tracing static shape inference's.
RUNTIME, TRACE = "runtime", "trace"
REFUSED = {
    (RUNTIME, "matvec"): raises("InvalidArgumentError", r"Expected dimension \d+ at axis \d+ of the input shaped"),
    (RUNTIME, "sin"): raises("InvalidArgumentError", r"Incompatible shapes: \[\d+\] vs\. \[\d+\]"),
    **{(TRACE, f): raises("ValueError", r"Dimensions must be equal, but are \d+ and \d+") for f in FUNCS},
    ("column-gradients", "sin"): raises(
        "ValueError", r"Incompatible shapes between op input and calculated input gradient"
    ),
}
TF_BAD = {
    **{f"bad_shape[matvec,{k}]": {"eager|graph": RUNTIME, "function|xla": TRACE} for k in KINDS},
    **{f"bad_grad_ys[matvec,{k}]": {"graph": RUNTIME, "function|xla": TRACE} for k in KINDS},
    "bad_shape[sin,size-one]": {"eager|function|xla|graph": "broadcast"},
    "bad_grad_ys[sin,size-one]": {"function|xla|graph": "broadcast"},
    "bad_shape[sin,wrong-size]": {"eager|graph": RUNTIME, "function|xla": TRACE},
    "bad_grad_ys[sin,wrong-size]": {"graph": RUNTIME, "function|xla": TRACE},
    "bad_shape[sin,column]": {"eager|function|xla|graph": "wrong-shape-gradient"},
    "bad_grad_ys[sin,column]": {"function|xla|graph": "column-gradients"},
}
NO_SHAPE_CHECK = (
    "TensorFlow does not compare grad_ys/output_gradients with y's shape (gradients_util."
    "_DefaultGradYs checks their number and dtype; GradientTape converts them as given): "
)
WHY_BAD = {
    RUNTIME: (
        NO_SHAPE_CHECK + "the first gradient kernel (einsum, or sin's grad * cos(x)) refuses the shapes "
        "when it runs: eagerly, or in a Session fed shape-free placeholders",
        None,
    ),
    TRACE: (
        NO_SHAPE_CHECK + "static shape inference refuses the first gradient op while tf.function "
        "traces with known shapes",
        None,
    ),
    "broadcast": (
        NO_SHAPE_CHECK + "sin's gradient is grad * cos(x) (math_grad._SinGrad), so a (1,) cotangent "
        "broadcasts silently to w * cos(x)",
        MATH_GRAD_LINK,
    ),
    "wrong-shape-gradient": (
        NO_SHAPE_CHECK + "a (3, 1) cotangent broadcasts against cos(x) of shape (3,) and the "
        "tape returns a (3, 3) gradient for a (3,) source",
        MATH_GRAD_LINK,
    ),
}
WHY_COLUMN_GRADIENTS = (
    "tf.gradients sets each op input's gradient to the input's static shape and raises "
    "ValueError 'Incompatible shapes between op input and calculated input gradient' "
    "for the (3, 3) gradient of a (3,) x",
    GRADIENTS_UTIL,
)


def _tf_bad_expectations():
    for k, by_mode in TF_BAD.items():
        func = k[k.index("[") + 1 : k.index(",")]
        for modes, kind in by_mode.items():
            reason, link = WHY_COLUMN_GRADIENTS if kind == "column-gradients" else WHY_BAD[kind]
            link = link or (GRADIENTS_UTIL if k.startswith("bad_grad_ys") else BACKPROP_LINK)
            seen = REFUSED.get((kind, func), kind)
            yield expect(k, seen, framework="tensorflow", mode=modes, reason=reason, link=link)


EXPECT = expectations(
    {
        "cotangent": "applied",
        "grad_ys": "applied",
        "chain": "equal",
        "chain_grad_ys": "equal",
        "default": "ones",
        "default_one_element": "ones",
        "default_ys_list": "ones",
        "default_grad_ys": "ones",
        "saturating_chain": "equal",
        "saturating_chain_grad_ys": "equal",
        "softplus_tail": "sigmoid",
        **{k: JAX_BAD_COTANGENT for k in BAD_KEYS},
    },
    facts.tf_gradients_in_eager("grad_ys"),
    facts.tf_gradients_in_eager("chain_grad_ys"),
    facts.tf_gradients_in_eager("default_grad_ys"),
    facts.tf_gradients_in_eager("saturating_chain_grad_ys"),
    expect(
        "softplus_tail",
        "linear",
        framework="torch",
        link=TORCH_SOFTPLUS_LINK,
        reason="torch.nn.functional.softplus 'reverts to the linear function when input x beta > "
        "threshold' (default 20): its gradient there is the cotangent itself, not w * sigmoid(x)",
    ),
    *[facts.tf_gradients_in_eager(k) for k in BAD_KEYS if k.startswith("bad_grad_ys")],
    *_tf_bad_expectations(),
    expect(
        "default",
        JAX_NOT_SCALAR,
        framework="jax",
        link=JAX_GRAD_LINK,
        reason="jax.grad has no implicit cotangent: fun 'should return a scalar' "
        "(TypeError 'Gradient only defined for scalar-output functions')",
    ),
    expect(
        "default_one_element",
        JAX_NOT_SCALAR,
        framework="jax",
        link=JAX_GRAD_LINK,
        reason="jax.grad's scalar means shape (), 'not arrays with shape (1,)'",
    ),
    expect(
        "default_ys_list",
        JAX_NOT_SCALAR,
        framework="jax",
        link=JAX_GRAD_LINK,
        reason="jax.grad needs one scalar output; a tuple of scalars is refused",
    ),
    expect(
        "default",
        raises("RuntimeError", r"grad can be implicitly created only for scalar outputs"),
        framework="torch",
        link=TORCH_GRAD_LINK,
        reason="grad_outputs None is accepted only for one-element outputs: "
        "'grad can be implicitly created only for scalar outputs'",
    ),
    *[
        expect(
            k,
            raises("RuntimeError", r"Mismatch in shape: grad_output\[0\] has a shape of"),
            framework="torch",
            link=TORCH_MAKE_GRADS,
            reason="autograd.grad checks every grad_output against its output (_make_grads): "
            "'Mismatch in shape: grad_output[0] has a shape of ...'",
        )
        for k in BAD_KEYS
        if k.startswith("bad_shape")
    ],
)
# Sums of up to three products, each rounded: the suite's gradient tolerance holds.
TOL = cmp.GRAD


# ---------------------------------------------------------------- closed forms
def closed_vjp(a, x, w):
    """(dA, dx) of sum(w * y), y = A @ tanh(x), from the Jacobian: dx = sum_i w_i dy_i/dx."""
    a64, x64, w64 = (np.asarray(v, np.float64) for v in (a, x, w))
    jac = a64 * (1 - np.tanh(x64) ** 2)[..., None, :]  # dy_i/dx_j = A_ij sech^2(x_j): (..., m, n)
    dx = np.einsum("...i,...ij->...j", w64, jac)
    da = w64.reshape(-1, a.shape[0]).T @ np.tanh(x64).reshape(-1, a.shape[1])
    return da.astype(a.dtype), dx.astype(x.dtype)


def vjp_scales(a, x, w):
    """Per element, the magnitudes (dA, dx) of sum(w * y), y = A @ tanh(x), are computed from: dA_ij sums
    w_bi tanh(x_bj) over the batch (scale: the sum of their |.|); dx_j sums w_i A_ij (over y's m elements)
    times sech^2(x_j) = 1 - tanh^2(x_j), whose terms are 1 and tanh^2 (it cancels where tanh saturates:
    absolute error ~eps |w @ A|), so dx_j's scale is sum_i |w_i A_ij|. float64, each of its gradient's shape."""
    a64, x64, w64 = (np.abs(np.asarray(v, np.float64)) for v in (a, x, w))
    da = w64.reshape(-1, a.shape[0]).T @ np.tanh(x64).reshape(-1, a.shape[1])
    return da, np.broadcast_to(w64 @ a64, x64.shape)


def magnitude(*arrays) -> float:
    """The inputs' magnitude: the floor for gradients through tanh, whose sech^2 = 1 - tanh^2
    cancels where tanh saturates (absolute error ~eps * |w| * |A|, however small the result)."""
    return max(float(np.max(np.abs(np.asarray(v, np.float64)))) for v in arrays if np.size(v))


def cotangent_use(grads, a, x, w) -> str:
    """applied: sum_i w_i dy_i/dx; ignored: what ones would give (the cotangent was dropped)."""

    def near(cotangent):
        t = TOL.of(x.dtype)
        ref, scales = closed_vjp(a, x, cotangent), vjp_scales(a, x, cotangent)
        return all(
            np.shape(g) == np.shape(r) and cmp.rel_err(g, r, rtol=t, scale=at) <= t
            for g, r, at in zip(grads, ref, scales)
        )

    if near(w):
        return "applied"
    return "ignored" if near(np.ones_like(w)) else "other"


def bad_shape_kind(grad, a, x, w, func) -> str:
    """What an accepted wrong-shape cotangent gave: broadcast to y's shape, or a gradient
    whose shape is not x's at all."""
    if np.shape(grad) != np.shape(x):
        return "wrong-shape-gradient"
    if func == "sin":
        ref = np.cos(x) * np.broadcast_to(w, x.shape)
    else:
        ref = closed_vjp(a, x, np.broadcast_to(w, (a.shape[0],)))[1]
    t = TOL.of(x.dtype)
    return "broadcast" if cmp.rel_err(grad, ref, rtol=t, scale=magnitude(a, x, w)) <= t else "other"


def saturating_derivatives(x):
    """f'(x) per row of x (3, n), in float64: sigmoid' = s(x) s(-x) (no cancellation),
    softplus' = s(x), exp' = exp."""
    x = np.asarray(x, np.float64)

    def s(v):  # sigmoid, relatively accurate in both tails (e^v / (1 + e^v) below 0)
        e = np.exp(-np.abs(v))
        return np.where(v >= 0, 1 / (1 + e), e / (1 + e))

    return np.stack([s(x[0]) * s(-x[0]), s(x[1]), np.exp(x[2])])


def exp_row_scales(x, dtype) -> np.ndarray:
    """Per element of exp's row, the scale of its floor (:func:`suite.compare.floor`): w * a may
    be subnormal (a is drawn down to the smallest normal) and flushed to zero before it meets
    exp(x) (measured: XLA, bfloat16, w a = 5.9e-39 flushed, times e^4), which costs ``FLUSHED``
    smallest normals times that cofactor, beyond ``compare.floor``'s 16; relative above it."""
    return cmp.flushed_scale(dtype, np.maximum(np.exp(np.asarray(x, np.float64)), 1.0))


# ---------------------------------------------------------------- strategies
@dataclasses.dataclass(frozen=True)
class Problem:
    a: np.ndarray  # (m, n)
    x: np.ndarray  # (n,) or (2, n)
    w: np.ndarray  # the cotangent, y's shape: (m,) or (2, m)


@st.composite
def problems(draw):
    # A small menu of (dtype, batch + (m,)) keeps XLA and JAX's eager dispatch to a few compiled
    # signatures; m = 1 without a batch axis is the one-element output PyTorch seeds implicitly
    # and JAX does not. Each dtype has m = 1 and m = 3, with and without a batch axis.
    d, out = draw(ss.dtypes_and_shapes(shapes=((1,), (3,), (2, 3), (2, 1))), label="dtype, batch + (m,)")
    lead, m, n = out[:-1], out[-1], 2
    a = draw(ss.float_arrays(dtype=d, shape=(m, n), min_value=-2, max_value=2), label="A")
    # |x| up to 10 reaches tanh's saturation (sech^2(10) = 8e-9), where a gradient flushed to
    # zero would hide under an absolute tolerance; comparisons there are relative to the inputs
    x = draw(ss.float_arrays(dtype=d, shape=lead + (n,), min_value=-10, max_value=10), label="x")
    w = draw(ss.float_arrays(dtype=d, shape=lead + (m,), min_value=-4, max_value=4), label="cotangent")
    return Problem(a, x, w)


#: Saturating functions, one per row of x, and the (low, high) x per dtype: sigmoid and
#: softplus saturate and their gradients underflow (e^-90 is below float32's smallest
#: normal; float16's range ends near e^-17); exp stops where w * a * e^x (|w * a| <= 8) still
#: fits the dtype (float16's 65504: x <= 8.5; float32 and bfloat16: 85).
SATURATING = ("sigmoid", "softplus", "exp")
HALF_DTYPES = (np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16))
X_RANGE = {
    "float16": ((-20, 20), (-20, 20), (-20, 8.5)),
    "bfloat16": ((-90, 90), (-90, 90), (-90, 85)),
    "float32": ((-90, 90), (-90, 90), (-90, 85)),
    "float64": ((-90, 90), (-90, 90), (-90, 90)),
}
SAT_N = 4  # one shape (3, 4) for every example: one trace per dtype and API


def _cast(draw, dtype, values, label):
    return np.asarray(draw(values, label=label), np.float64).astype(dtype)


@st.composite
def saturating_problems(draw):
    """(a, x, w) of shape (3, SAT_N): row i of x is the input of SATURATING[i], drawn over the
    whole range (the tails), near 0 (|x| <= 4) or exactly 0 / +-1e-3; drawn in float64 and
    rounded to the dtype (Hypothesis has no bfloat16)."""
    d = draw(st.sampled_from([*HALF_DTYPES, *(np.dtype(t) for t in ss.FLOAT_DTYPES)]), label="dtype")
    fl = lambda lo, hi: st.floats(lo, hi, allow_nan=False, allow_subnormal=False)  # noqa: E731
    rows = [
        st.lists(
            st.one_of(fl(lo, hi), fl(-4, 4), st.sampled_from([0.0, -0.0, 1e-3, -1e-3])), min_size=SAT_N, max_size=SAT_N
        )
        for lo, hi in X_RANGE[d.name]
    ]
    x = _cast(draw, d, st.tuples(*rows), "x")
    a = _cast(draw, d, st.lists(fl(-2, 2), min_size=3 * SAT_N, max_size=3 * SAT_N), "a").reshape(3, SAT_N)
    tiny = [v for v in (1e-5, -1e-5, 1e-30) if v >= float(ml_dtypes.finfo(d).tiny)]
    wv = st.one_of(fl(-4, 4), st.sampled_from([0.0, -0.0, *tiny]))
    w = _cast(draw, d, st.lists(wv, min_size=3 * SAT_N, max_size=3 * SAT_N), "cotangent").reshape(3, SAT_N)
    return a, x, w


#: float64 tails at fixed points, run first in every row: softplus at 25 (where PyTorch's
#: threshold shows), exp at its float32 overflow edge, sigmoid where y rounds to 1 in float32.
SAT_FIXED = (
    np.array([[1.5, -0.5, 2.0, 1.0]] * 3),
    np.array([[-90.0, 17.0, 0.0, 40.0], [25.0, -60.0, 21.0, 1e-3], [-90.0, 85.0, -30.0, 0.5]]),
    np.array([[0.75, -2.0, 1.0, 3.0]] * 3),
)


# Wrong-shape cotangents for a y of shape (3,), and one fixed float32 input set (A, x per
# function, w per kind) with no special values.
BAD_W = {"size-one": (1,), "wrong-size": (4,), "column": (3, 1)}
_RNG = np.random.default_rng(2)
BAD_INPUTS = (
    np.round(_RNG.uniform(-2, 2, (3, 2)), 2).astype(np.float32),
    {"matvec": np.array([0.5, -1.25], np.float32), "sin": np.array([0.3, -1.1, 2.0], np.float32)},
    {k: np.round(_RNG.uniform(-2, 2, s), 2).astype(np.float32) for k, s in BAD_W.items()},
)


# ---------------------------------------------------------------- the programs
# y = A @ tanh(x) over x's last axis (x may carry a leading batch axis). ``api`` picks the
# native reverse-mode call (default: the framework's first in APIS, the one oracles use).
# ``default=True``: no cotangent is passed (the API's own default). It is a static argument,
# not only a shorter argument list, so the two calls compile apart: a tf.function
# (reduce_retracing) traced with fewer positional arguments raises IndexError when called
# with more (function_type.most_specific_common_subtype, TF 2.21).
class Forward(Program):
    """y = A @ tanh(x) alone: what finite differences of the subject's own forward pass use."""

    def tensorflow(tf, a, x):
        return tf.einsum("mn,...n->...m", a, tf.tanh(x))

    def jax(jax, a, x):
        return jax.numpy.einsum("mn,...n->...m", a, jax.numpy.tanh(x))

    def torch(torch, a, x):
        return torch.einsum("mn,...n->...m", a, torch.tanh(x))


class Vjp(Program):
    """The gradients (dA, dx) of y = A @ tanh(x) with cotangent w (none if ``default``)."""

    def tensorflow(tf, a, x, *w, api="GradientTape", default=False, summed=False):
        ct = None if default else w[0]
        if api == "tf.gradients":
            y = tf.einsum("mn,...n->...m", a, tf.tanh(x))
            y = tf.reduce_sum(y) if summed else y
            return tuple(tf.gradients(y, [a, x], grad_ys=ct))
        with tf.GradientTape() as tape:
            tape.watch([a, x])
            y = tf.einsum("mn,...n->...m", a, tf.tanh(x))
            y = tf.reduce_sum(y) if summed else y
        return tuple(tape.gradient(y, [a, x], output_gradients=ct))

    def jax(jax, a, x, *w, api="jax.vjp", default=False, summed=False):
        jnp = jax.numpy

        def f(a, x):
            y = jnp.einsum("mn,...n->...m", a, jnp.tanh(x))
            return jnp.sum(y) if summed else y

        if not default:
            return jax.vjp(f, a, x)[1](w[0])
        return jax.grad(f, argnums=(0, 1))(a, x)  # JAX's only implicit seed: scalar outputs

    def torch(torch, a, x, *w, api="autograd.grad", default=False, summed=False):
        a, x = a.requires_grad_(True), x.requires_grad_(True)
        y = torch.einsum("mn,...n->...m", a, torch.tanh(x))
        y = y.sum() if summed else y
        return torch.autograd.grad(y, [a, x], grad_outputs=None if default else w[0])


class ChainedCalls(Program):
    """h = tanh(x), y = A @ tanh(h): (dL/dh, dL/dx seeded with dL/dh, dL/dx in one call)."""

    def tensorflow(tf, a, x, w, *, api="GradientTape"):
        if api == "tf.gradients":
            h = tf.tanh(x)
            y = tf.einsum("mn,...n->...m", a, tf.tanh(h))
            g_h = tf.gradients(y, h, grad_ys=w)[0]
            return g_h, tf.gradients(h, x, grad_ys=g_h)[0], tf.gradients(y, x, grad_ys=w)[0]
        with tf.GradientTape(persistent=True) as tape:
            tape.watch(x)
            h = tf.tanh(x)
            y = tf.einsum("mn,...n->...m", a, tf.tanh(h))
        g_h = tape.gradient(y, h, output_gradients=w)
        return g_h, tape.gradient(h, x, output_gradients=g_h), tape.gradient(y, x, output_gradients=w)

    def jax(jax, a, x, w, *, api="jax.vjp"):
        jnp = jax.numpy
        outer = lambda h: jnp.einsum("mn,...n->...m", a, jnp.tanh(h))  # noqa: E731
        h, pull_h = jax.vjp(jnp.tanh, x)
        (g_h,) = jax.vjp(outer, h)[1](w)
        (g_x,) = pull_h(g_h)
        return g_h, g_x, jax.vjp(lambda x: outer(jnp.tanh(x)), x)[1](w)[0]

    def torch(torch, a, x, w, *, api="autograd.grad"):
        x = x.requires_grad_(True)
        h = torch.tanh(x)
        y = torch.einsum("mn,...n->...m", a, torch.tanh(h))
        (g_h,) = torch.autograd.grad(y, h, grad_outputs=w, retain_graph=True)
        (g_x,) = torch.autograd.grad(h, x, grad_outputs=g_h, retain_graph=True)
        return g_h, g_x, torch.autograd.grad(y, x, grad_outputs=w)[0]


# A cotangent of the wrong shape. ``kind`` is not used in the body: as a static argument it
# gives each wrong shape its own compiled program, so tf.function never relaxes the shapes
# across kinds (reduce_retracing would turn a trace-time ValueError into a run-time
# InvalidArgumentError depending on the order of examples).
class WrongShape(Program):
    """dx of y = A @ tanh(x) (``func="matvec"``) or y = sin(x), with a wrong-shape cotangent w."""

    def tensorflow(tf, a, x, w, *, api, func, kind):
        if api == "tf.gradients":
            y = tf.einsum("mn,...n->...m", a, tf.tanh(x)) if func == "matvec" else tf.sin(x)
            return tf.gradients(y, x, grad_ys=w)[0]
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = tf.einsum("mn,...n->...m", a, tf.tanh(x)) if func == "matvec" else tf.sin(x)
        return tape.gradient(y, x, output_gradients=w)

    def jax(jax, a, x, w, *, api, func, kind):
        jnp = jax.numpy
        f = (lambda x: jnp.einsum("mn,...n->...m", a, jnp.tanh(x))) if func == "matvec" else jnp.sin
        return jax.vjp(f, x)[1](w)[0]

    def torch(torch, a, x, w, *, api, func, kind):
        x = x.requires_grad_(True)
        y = torch.einsum("mn,...n->...m", a, torch.tanh(x)) if func == "matvec" else torch.sin(x)
        return torch.autograd.grad(y, x, grad_outputs=w)[0]


def _saturate(x, nn, exp):
    """(sigmoid, softplus, exp) of the three inputs, with the framework's own ops (``nn``:
    the namespace holding sigmoid and softplus). Three inputs, not rows of one: JAX's eager
    VJP of a stack of slices compiles a dozen more primitives per dtype."""
    return nn.sigmoid(x[0]), nn.softplus(x[1]), exp(x[2])


class SaturatingChain(Program):
    """h = (sigmoid, softplus, exp)(x), y_i = a[i] * h_i: (dL/dh, dL/dx seeded with dL/dh,
    dL/dx in one call), all with cotangents w[i]; each a tuple over the three functions."""

    def tensorflow(tf, a, w, *x, api="GradientTape"):
        ws = [w[i] for i in range(3)]
        if api == "tf.gradients":
            h = _saturate(x, tf.math, tf.exp)
            y = [a[i] * h[i] for i in range(3)]
            g_h = tf.gradients(y, h, grad_ys=ws)
            return tuple(g_h), tuple(tf.gradients(h, x, grad_ys=g_h)), tuple(tf.gradients(y, x, grad_ys=ws))
        with tf.GradientTape(persistent=True) as tape:
            tape.watch(x)
            h = _saturate(x, tf.math, tf.exp)
            y = [a[i] * h[i] for i in range(3)]
        g_h = tape.gradient(y, h, output_gradients=ws)
        chained = tape.gradient(h, x, output_gradients=g_h)
        return tuple(g_h), tuple(chained), tuple(tape.gradient(y, x, output_gradients=ws))

    def jax(jax, a, w, *x, api="jax.vjp"):
        jnp, ws = jax.numpy, tuple(w[i] for i in range(3))
        h, pull_h = jax.vjp(lambda *x: _saturate(x, jax.nn, jnp.exp), *x)
        g_h = jax.vjp(lambda *h: tuple(a[i] * h[i] for i in range(3)), *h)[1](ws)
        whole = jax.vjp(lambda *x: tuple(a[i] * hi for i, hi in enumerate(_saturate(x, jax.nn, jnp.exp))), *x)[1](ws)
        return g_h, pull_h(g_h), whole

    def torch(torch, a, w, *x, api="autograd.grad"):
        # torch.from_numpy has no bfloat16 (TypeError, measured): bfloat16 travels as its bits
        a, w, *x = (v.view(torch.bfloat16) if v.dtype == torch.uint16 else v for v in (a, w, *x))
        x, ws = [v.requires_grad_(True) for v in x], [w[i] for i in range(3)]
        h = _saturate(x, torch.nn.functional, torch.exp)
        y = [a[i] * h[i] for i in range(3)]
        g_h = torch.autograd.grad(y, h, grad_outputs=ws, retain_graph=True)
        chained = torch.autograd.grad(h, x, grad_outputs=g_h, retain_graph=True)
        out = g_h, chained, torch.autograd.grad(y, x, grad_outputs=ws)
        return tuple(tuple(g.view(torch.uint16) if g.dtype == torch.bfloat16 else g for g in gs) for gs in out)


def run_in_dtype(runner, a, x, w, **static):
    """SaturatingChain on ``runner`` with x's rows as the three inputs; each result stacked
    back to (3, n). bfloat16 goes to PyTorch as its bits and back (see SaturatingChain.torch);
    a result of any other dtype comes back as it is."""
    bits = runner.framework == "torch" and x.dtype == ml_dtypes.bfloat16
    arrays = (a, w, *x)
    out = runner.run(SaturatingChain.of(runner), *(v.view(np.uint16) if bits else v for v in arrays), **static)
    back = lambda g: g.view(ml_dtypes.bfloat16) if bits and g.dtype == np.uint16 else g  # noqa: E731
    return tuple(np.stack([back(g) for g in gs]) for gs in out)


def above_threshold(runner, x):
    """PyTorch's softplus elements that are linear (x > threshold 20, declared): a mask of x's
    shape, all False for the other frameworks."""
    mask = np.zeros(x.shape, bool)
    if runner.framework == "torch":
        mask[1] = np.asarray(x[1], np.float64) > 20
    return mask


class Seed(Program):
    """seeds/002: ys = [h^2, 3h], h = 2x. ``default``: no grad_ys; else (with grad_ys=g,
    dL/dh, dL/dx seeded with dL/dh)."""

    def tensorflow(tf, x, *g, api, default=False):
        if api == "tf.gradients":
            h = 2.0 * x
            ys = [h * h, 3.0 * h]
            if default:
                return tf.gradients(ys, x)[0]
            g_h = tf.gradients(ys, h, grad_ys=list(g))[0]
            return tf.gradients(ys, x, grad_ys=list(g))[0], g_h, tf.gradients(h, x, grad_ys=g_h)[0]
        with tf.GradientTape(persistent=True) as tape:
            tape.watch(x)
            h = 2.0 * x
            ys = [h * h, 3.0 * h]
        if default:
            return tape.gradient(ys, x)
        g_h = tape.gradient(ys, h, output_gradients=list(g))
        return tape.gradient(ys, x, output_gradients=list(g)), g_h, tape.gradient(h, x, output_gradients=g_h)

    def jax(jax, x, *g, api, default=False):
        ys_of_h = lambda h: (h * h, 3.0 * h)  # noqa: E731
        if default:  # jax.grad of a tuple of scalars: observed, not assumed
            return jax.grad(lambda x: ys_of_h(2.0 * x))(x)
        h, pull_h = jax.vjp(lambda x: 2.0 * x, x)
        (g_h,) = jax.vjp(ys_of_h, h)[1](g)
        return jax.vjp(lambda x: ys_of_h(2.0 * x), x)[1](g)[0], g_h, pull_h(g_h)[0]

    def torch(torch, x, *g, api, default=False):
        x = x.requires_grad_(True)
        h = 2.0 * x
        ys = [h * h, 3.0 * h]
        if default:
            return torch.autograd.grad(ys, x)[0]
        (g_h,) = torch.autograd.grad(ys, h, grad_outputs=list(g), retain_graph=True)
        weighted = torch.autograd.grad(ys, x, grad_outputs=list(g), retain_graph=True)[0]
        return weighted, g_h, torch.autograd.grad(h, x, grad_outputs=g_h)[0]


#: The native reverse-mode calls per framework; tf.gradients is TensorFlow's second one.
APIS = {"tensorflow": ("GradientTape", "tf.gradients"), "jax": ("jax.vjp",), "torch": ("autograd.grad",)}


def key(api, base, gradients_key):
    """The observation key: ``base`` for the TF2-style call, ``gradients_key`` for tf.gradients."""
    return gradients_key if api == "tf.gradients" else base


def attempt(runner, builder, *arrays, **static):
    """(result, None) or (None, 'raises:<Error>'): an API that is missing or refuses is observed."""
    return runner.attempt("run", builder, *arrays, **static)


# ---------------------------------------------------------------- properties
@given(p=problems())
def test_cotangent_gives_vector_jacobian_product(subject, oracles, record, p):
    """The gradient with cotangent w is sum_i w_i dy_i/d(A, x), for every native API."""
    record.example(A=p.a, x=p.x, w=p.w)
    record.scale = "inputs"  # sech^2 = 1 - tanh^2 cancels where tanh saturates
    ref, scales = closed_vjp(p.a, p.x, p.w), vjp_scales(p.a, p.x, p.w)
    for api in APIS[subject.framework]:
        grads, err = attempt(subject, Vjp.of(subject), p.a, p.x, p.w, api=api)
        record.check(EXPECT, **{key(api, "cotangent", "grad_ys"): err or cotangent_use(grads, p.a, p.x, p.w)})
        if err:
            continue
        for name, g, r, at in zip(("dA", "dx"), grads, ref, scales):
            record.close(name=f"{name}[{api}]", out=g, ref=r, oracle="closed-form", tol=TOL, scale=at)
        got = {f"{name}[{api}]": g for name, g in zip(("dA", "dx"), grads)}
        at = dict(zip(got, scales))
        record.against(oracles, Vjp, p.a, p.x, p.w, via="run", got=got, tol=TOL, scale=at)
        # the fourth oracle: float64 differences of this framework's own forward pass
        record.finite_differences(subject, Forward, p.a, p.x, cotangent=p.w, got=got)


#: A one-element y without a batch axis (m = 1), the output PyTorch seeds implicitly and JAX does not:
#: explicit, since the ci and quick profiles draw each dtype's largest signature only.
ONE_ELEMENT = Problem(
    a=np.array([[0.5, -1.25]], np.float32), x=np.array([0.75, -2.0], np.float32), w=np.array([1.5], np.float32)
)


@example(p=ONE_ELEMENT)
@given(p=problems())
def test_default_cotangent_is_ones(subject, oracles, record, p):
    """No cotangent: TensorFlow seeds ones (the gradient of sum(y)); jax.grad and
    autograd.grad have an implicit seed only for scalar (JAX) / one-element (PyTorch) y."""
    record.example(A=p.a, x=p.x)
    record.scale = "inputs"  # sech^2 = 1 - tanh^2 cancels where tanh saturates
    ones = np.ones_like(p.w)
    ref, at = closed_vjp(p.a, p.x, ones), vjp_scales(p.a, p.x, ones)[1]
    for api in APIS[subject.framework]:
        f = Vjp.of(subject)
        if api == APIS[subject.framework][0]:  # sum(y) is a scalar: every framework seeds it with 1
            summed = subject.run(f, p.a, p.x, api=api, default=True, summed=True)
            record.close(name=f"d sum(y)/dx[{api}]", out=summed[1], ref=ref[1], oracle="closed-form", tol=TOL,
                         scale=at)  # fmt: skip
        grads, err = attempt(subject, f, p.a, p.x, api=api, default=True)
        base = "default" if p.w.size > 1 else "default_one_element"
        seen = err or ("ones" if cotangent_use(grads, p.a, p.x, ones) == "applied" else "not-ones")
        record.check(EXPECT, **{key(api, base, "default_grad_ys"): seen})
        if err:
            continue
        record.close(name=f"dx[{api}]", out=grads[1], ref=ref[1], oracle="closed-form", tol=TOL, scale=at)
        # the oracles with explicit ones (they may have no default)
        record.against(oracles, Vjp, p.a, p.x, ones, via="run", got={"dA": ..., f"dx[{api}]": grads[1]}, tol=TOL,
                       scale={f"dx[{api}]": at})  # fmt: skip


@given(p=problems())
def test_chained_calls_equal_one_call(subject, oracles, record, p):
    """grad(h, x, cotangent=grad(y, h, w)) equals grad(y, x, w), h = tanh(x), y = A @ tanh(h)."""
    record.example(A=p.a, x=p.x, w=p.w)
    record.scale = "inputs"  # sech^2 = 1 - tanh^2 cancels where tanh saturates
    h = np.tanh(p.x.astype(np.float64))
    ref_h = (p.w @ p.a) * (1 - np.tanh(h) ** 2)
    ref_x = (ref_h * (1 - h**2)).astype(p.x.dtype)
    # per element: w @ A times one or two factors 1 - tanh^2 (terms 1 and tanh^2): sum_i |w_i A_ij|
    at = vjp_scales(p.a, p.x, p.w)[1]
    for api in APIS[subject.framework]:
        out, err = attempt(subject, ChainedCalls.of(subject), p.a, p.x, p.w, api=api)
        if err:
            record.check(EXPECT, **{key(api, "chain", "chain_grad_ys"): err})
            continue
        g_h, chained, whole = out
        t = TOL.of(p.x.dtype)
        same = np.shape(chained) == np.shape(whole) and cmp.rel_err(chained, whole, rtol=t, scale=at) <= t
        record.check(EXPECT, **{key(api, "chain", "chain_grad_ys"): "equal" if same else "differs"})
        record.close(name=f"dL/dh[{api}]", out=g_h, ref=ref_h.astype(p.x.dtype), oracle="closed-form", tol=TOL,
                     scale=at)  # fmt: skip
        record.close(name=f"chained dL/dx[{api}]", out=chained, ref=ref_x, oracle="closed-form", tol=TOL, scale=at)
        record.close(name=f"one-call dL/dx[{api}]", out=whole, ref=ref_x, oracle="closed-form", tol=TOL, scale=at)
        got = {"dL/dh": ..., f"chained dL/dx[{api}]": chained, "one-call dL/dx": ...}
        record.against(oracles, ChainedCalls, p.a, p.x, p.w, via="run", got=got, tol=TOL,
                       scale={f"chained dL/dx[{api}]": at})  # fmt: skip


@given(v=st.just(BAD_INPUTS))
def test_wrong_shape_cotangent_is_observed(subject, record, v):
    """A cotangent whose shape is not y's (3,): the error, or what TensorFlow broadcasts it to.
    One fixed float32 example: the observation is about shapes, and a trace that fails is not
    cached, so every further example would trace again in function/xla."""
    a, xs, ws = v
    for func in FUNCS:
        for kind in KINDS:
            x, w = xs[func], ws[kind]
            record.example(A=a, x=x, w=w, func=func, kind=kind)
            record.scale = "inputs"  # sech^2 = 1 - tanh^2 cancels where tanh saturates
            for api in APIS[subject.framework]:
                grad, err = attempt(subject, WrongShape.of(subject), a, x, w, api=api, func=func, kind=kind)
                seen = err or bad_shape_kind(grad, a, x, w, func)
                record.check(EXPECT, **{key(api, f"bad_shape[{func},{kind}]", f"bad_grad_ys[{func},{kind}]"): seen})


@given(p=saturating_problems())
@example(p=SAT_FIXED)
def test_cotangent_chains_through_saturating_functions(subject, oracles, record, p):
    """Through sigmoid, softplus and exp at their tails, in every float dtype: grad(h, x,
    grad(y, h, w)) equals grad(y, x, w) = w * a * f'(x), held relatively per element."""
    a, x, w = p
    record.example(a=a, x=x, w=w)
    ref_h = w.astype(np.float64) * a.astype(np.float64)
    ref_x = ref_h * saturating_derivatives(x)
    # per element: sigmoid's w * y * (1 - y) is absolute near y = 1 (see the docstring), at the
    # scale of its own w * a (suite.ops.error's model: the terms of 1 - y are 1 and y, times the
    # cotangent), not the row's largest; softplus and exp are relative down to the smallest normal,
    # exp's beyond a flushed w * a's cofactor e^x
    scales = (np.abs(ref_h[0]), 0.0, exp_row_scales(x[2], x.dtype))
    t = TOL.of(x.dtype)

    def near(out, ref, i):
        out, ref = np.asarray(out, np.float64), np.asarray(ref, np.float64)
        return cmp.rel_err(out, ref, rtol=t, scale=scales[i], dtype=x.dtype) <= t

    refs = [(o, run_in_dtype(o, a, x, w)) for o in oracles]
    for api in APIS[subject.framework]:
        k = key(api, "saturating_chain", "saturating_chain_grad_ys")
        try:
            g_h, chained, whole = run_in_dtype(subject, a, x, w, api=api)
        except Exception as e:  # noqa: BLE001 - the error's name is the observation
            record.check(EXPECT, **{k: cmp.error_name(e)})
            continue
        same = np.shape(chained) == np.shape(whole) and all(near(chained[i], whole[i], i) for i in range(3))
        record.check(EXPECT, **{k: "equal" if same else "differs"})
        record.close(name=f"dL/dh[{api}]", out=g_h, ref=ref_h, oracle="closed-form", dtype=x.dtype, scale=0.0)
        lin = above_threshold(subject, x)
        x1 = x[1].astype(np.float64)
        visible = (x1 > 20) & (np.exp(-x1) > 2 * t) & (ref_h[1] != 0)  # the two readings differ
        if visible.any():
            g = whole[1][visible].astype(np.float64)
            sig, ones = ref_x[1][visible], ref_h[1][visible]
            tail = "sigmoid" if cmp.rel_err(g, sig, rtol=t, scale=0.0) <= t else "other"
            tail = "linear" if tail == "other" and cmp.rel_err(g, ones, rtol=t, scale=0.0) <= t else tail
            record.check(EXPECT, softplus_tail=tail)
        for i, f in enumerate(SATURATING):
            for name, pos in (("chained", 1), ("one-call", 2)):
                g = (g_h, chained, whole)[pos][i]
                keep = ~lin[i]  # PyTorch's linear tail: declared, observed above
                args = dict(name=f"{name} dL/dx[{f},{api}]", dtype=x.dtype)
                record.close(**args, out=g[keep], ref=ref_x[i][keep], oracle="closed-form", scale=_at(scales[i], keep))
                for o, r in refs:
                    keep = ~(lin[i] | above_threshold(o, x)[i])
                    record.close(**args, out=g[keep], ref=r[pos][i][keep], oracle=o.id, scale=_at(scales[i], keep))


def _at(scale, keep):
    """A per-element scale (an array) where ``keep`` holds; a number as it is."""
    return scale[keep] if np.ndim(scale) else scale


# ---------------------------------------------------------------- seed examples
@on("tensorflow", "jax", "torch")
@given(v=st.just((np.float32(1.0), np.float32(2.0), np.float32(-1.0))))
def test_seed_grad_ys_weights_and_chains(subject, record, v):
    """seeds/002: ys = [h^2, 3h], h = 2x, x = 1: default 14 (ones); grad_ys = [2, -1] -> 10;
    chaining, dL/dh = 5 fed as grad_ys of h -> x, gives 10 again."""
    x, g1, g2 = (np.asarray(u) for u in v)
    record.example(x=x, g1=g1, g2=g2)
    record.scale = "inputs"  # sech^2 = 1 - tanh^2 cancels where tanh saturates
    for api in APIS[subject.framework]:
        default, err = attempt(subject, Seed.of(subject), x, api=api, default=True)
        record.check(
            EXPECT, **{key(api, "default_ys_list", "default_grad_ys"): err or ("ones" if default == 14.0 else "other")}
        )
        if err is None:
            record.equal(name=f"default[{api}]", out=np.asarray(default), ref=np.float32(14.0), oracle="closed-form")
        out, err = attempt(subject, Seed.of(subject), x, g1, g2, api=api)
        if err:
            record.check(EXPECT, **{key(api, "cotangent", "grad_ys"): err})
            continue
        weighted, g_h, chained = out
        for name, got, want in (("weighted", weighted, 10.0), ("dL/dh", g_h, 5.0), ("chained", chained, 10.0)):
            record.equal(name=f"{name}[{api}]", out=np.asarray(got), ref=np.float32(want), oracle="closed-form")
        record.check(
            EXPECT,
            **{
                key(api, "cotangent", "grad_ys"): "applied" if weighted == 10.0 else "other",
                key(api, "chain", "chain_grad_ys"): "equal" if chained == weighted else "differs",
            },
        )
