"""Dtype gradients: integer sources, rounding ops, NaN in max/min, mixed-dtype promotion.

Four places where a gradient's existence, destination or dtype follows from dtypes rather than
from calculus, each held to float64 closed forms and observed per framework and mode:

- **Integer and bool sources.** The gradient of ``sum(float(x)^2)`` with respect to an int32
  tensor the tape watches, an int32 variable, and a bool tensor: TensorFlow gives ``None`` (the tape
  logs "The dtype of the watched tensor must be floating" and does not watch it; ``tf.gradients``
  stops at the integer cast); ``jax.grad`` raises TypeError (``allow_int=True`` gives a ``float0``
  cotangent); PyTorch refuses ``requires_grad`` on an integer tensor (RuntimeError).
- **Rounding ops.** ``floor``/``ceil``/``round``/``rint`` (PyTorch spells rint ``torch.round``:
  both round half to even): values against NumPy, and the gradient of ``sum(w * op(x))``:
  ``none``/``zero`` per framework, and under ``unconnected_gradients=ZERO`` in TensorFlow.
- **NaN in maximum/minimum/reduce_max.** Per position where exactly one operand is NaN, which
  value comes out (``nan`` or ``other-operand``) and where the cotangent goes (``to-x``, ``to-y``,
  ``both``, ``neither``); for a reduction with NaN, its value (``nan``, ``max-of-rest``) and its
  gradient (``nan`` everywhere, ``to-max``...). The default is the closed form of a NaN-propagating
  max: the output is the NaN operand, so the cotangent goes to it.
- **Mixed dtypes.** ``x * y`` with x float32, y float64: the product's dtype and each gradient's
  dtype (``tf.experimental.numpy.multiply`` is TensorFlow's promoting spelling). This suite turns
  JAX's x64 on (suite.frameworks), so JAX's rows measure that configuration only.
- **NumPy behaviour.** A float32 variable times a Python float, a NumPy float64 scalar, a Python
  int and a NumPy int64 scalar: the product's dtype and its gradient's, in TensorFlow after
  ``tf.experimental.numpy.experimental_enable_numpy_behavior()`` with ``prefer_float32`` off and on,
  against JAX's weak types and PyTorch's scalar promotion. Enabling it patches Tensor's operators
  and sets process-wide flags that nothing undoes, so TensorFlow's rows ask two peer processes
  (``cases/_numpy_behavior_peer.py``), one per setting.

Declared surprises:

- TensorFlow's rounding ops register a None gradient (``_FloorGrad``, ``_CeilGrad``, ``_RoundGrad``,
  ``_RintGrad``): ``None`` unless ``unconnected_gradients=ZERO``; JAX and PyTorch give zeros.
- TensorFlow's Maximum/Minimum gradient sends the cotangent to y wherever ``x >= y`` is false, so
  at a NaN x it goes to y, whose value was not chosen; JAX sends it nowhere; PyTorch to both.
- Under XLA (``jit_compile=True``) TensorFlow's maximum/minimum return x where y is NaN, and
  ``reduce_max`` drops NaN (the largest other element, which gets the gradient); eager, function and
  graph propagate NaN, and the eager reduce_max gradient is NaN everywhere (0/0 in its tie count).
- float32 * float64 raises in TensorFlow (InvalidArgumentError eagerly, TypeError while tracing or
  building a graph); JAX and PyTorch promote to float64 and return each gradient in its input's dtype.
- With NumPy behaviour on, TensorFlow promotes a float32 tensor times a NumPy float64 scalar to float64
  (float32 with ``prefer_float32=True``) and times a NumPy int64 scalar to float64 with either setting; a
  Python float or int keeps float32. JAX (x64 on) promotes the NumPy float64 scalar too (NumPy scalars are
  not weakly typed); PyTorch keeps float32 for every scalar. Every gradient is float32, the variable's dtype.
- TF32 is a GPU matter (TensorFlow, PyTorch and JAX matmuls on Ampere and later): the suite turns it off
  in its own process (``NVIDIA_TF32_OVERRIDE=0``, each framework's switch), so the float32 matmul check
  holds float32 on every device; the TF32 rows run in a peer process without the override, with each
  framework's switch at its default, on and off, and observe the gradient's relative error against float64:
  ``float32`` or ``tf32`` (~1e-3, 10 mantissa bits). On a CPU every switch gives float32; on a GPU,
  TensorFlow and JAX default to TF32, PyTorch does not (declared, GPU rows).

Sources: https://github.com/tensorflow/tensorflow/issues/27378,
https://github.com/tensorflow/tensorflow/issues/127346, https://github.com/jax-ml/jax/issues/14022,
https://github.com/pytorch/pytorch/issues/53635
"""

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from suite import compare as cmp, peers, strategies as ss
from suite.behaviours import Floor, behaviour, on
from suite.expectations import expect, expectations, raises
from suite.frameworks.tf_runner import Variables, in_v1_graph
from suite.program import Program

TF_INT_VARIABLE = "https://github.com/tensorflow/tensorflow/issues/27378"
TF_INT_TAPE = "https://github.com/tensorflow/tensorflow/issues/26143"
JAX_INT_GRAD = "https://github.com/jax-ml/jax/issues/424"
JAX_FLOAT0 = "https://github.com/jax-ml/jax/pull/4039"
TORCH_INT_GRAD = "https://github.com/pytorch/pytorch/pull/7034"
MATH_GRAD = "https://github.com/tensorflow/tensorflow/blob/master/tensorflow/python/ops/math_grad.py"
TF_MAX_NAN = "https://github.com/tensorflow/tensorflow/issues/12659"
XLA_MAX_NAN = "https://github.com/openxla/xla/issues/49174"
XLA_REDUCE_MAX_NAN = "https://github.com/tensorflow/tensorflow/issues/118077"
JAX_MAX_NAN = "https://github.com/jax-ml/jax/issues/13600"
TORCH_MAX_GRAD = "https://github.com/pytorch/pytorch/pull/42579"
TF_MIXED = "https://github.com/tensorflow/tensorflow/issues/53405"
TF_NUMPY_BEHAVIOR = (
    "https://www.tensorflow.org/api_docs/python/tf/experimental/numpy/experimental_enable_numpy_behavior"
)
JAX_WEAK_TYPES = "https://docs.jax.dev/en/latest/type_promotion.html"
TORCH_PROMOTION = "https://docs.pytorch.org/docs/stable/tensor_attributes.html#type-promotion-doc"
TF32 = "https://tensorflow.org/versions/r2.13/api_docs/python/tf/config/experimental/enable_tensor_float_32_execution"
JAX_TF32 = "https://github.com/jax-ml/jax/issues/14022"
TORCH_TF32 = "https://github.com/pytorch/pytorch/issues/53635"

BEHAVIOUR = behaviour(
    "dtype-gradients",
    sources=[],
    links=[
        TF_INT_VARIABLE,
        "https://github.com/tensorflow/tensorflow/issues/127346",
        "https://github.com/jax-ml/jax/issues/14022",
        "https://github.com/pytorch/pytorch/issues/53635",
        TF_INT_TAPE,
        JAX_INT_GRAD,
        TORCH_INT_GRAD,
        TF_MAX_NAN,
        XLA_REDUCE_MAX_NAN,
        TF32,
    ],
    floor=Floor(
        "mixed",
        "Per element: the products of the mixed-dtype and NumPy-behaviour rows (x * y, x * c) and their "
        "gradients (y, x, c), each one rounding of its own element, are held relative to |ref_i|. Array-level: "
        "the integer-source values are sums of squares (one scalar), and the matmul gradients w @ b.T sum "
        "products over the inner axis (signed terms in the float32 row, floored at the inputs' magnitude).",
    ),
)

#: How each framework spells an integer source: a watched int32 tensor, an int32 variable, a bool
#: tensor; JAX has no variables, and its ``allow_int`` is its own.
SOURCES = {
    "tensorflow": ("watch", "variable", "bool"),
    "jax": ("watch", "bool", "allow_int"),
    "torch": ("watch", "variable", "bool"),
}
ROUNDINGS = ("floor", "ceil", "round", "rint")
MINMAX = ("maximum", "minimum")
SIDES = ("x-nan", "y-nan")
MIXED_APIS = {"tensorflow": ("operator", "tnp"), "jax": ("operator",), "torch": ("operator",)}
TF_TRACED = "function|xla|graph"
TF32_SWITCHES = ("default", "on", "off")
#: NumPy behaviour with prefer_float32 off and on (TensorFlow's rows; JAX and PyTorch have the first only)
NUMPY_KEYS = ("numpy-behavior", "numpy-behavior-prefer-float32")
#: The scalars multiplied into a float32 tensor, by name
OPERANDS = {"python-float": 2.5, "numpy-float64": np.float64(2.5), "python-int": 3, "numpy-int64": np.int64(3)}

EXPECT = expectations(
    {
        **{f"int-grad[{s}]": "none" for s in ("watch", "variable", "bool")},
        "int-grad[allow_int]": "float0",
        **{f"rounding-grad[{op}]": "zero" for op in ROUNDINGS},
        **{f"rounding-grad-zero-policy[{op}]": "zero" for op in ROUNDINGS},
        **{f"{op}-value[{side}]": "nan" for op in MINMAX for side in SIDES},
        # the closed form of a NaN-propagating max: the output is the NaN operand, so is the cotangent's target
        **{f"{op}-grad[x-nan]": "to-x" for op in MINMAX},
        **{f"{op}-grad[y-nan]": "to-y" for op in MINMAX},
        "reduce_max-value": "nan",
        "reduce_max-grad": "nan",
        **{f"mixed-dtype[{api}]": "float64" for api in ("operator", "tnp")},
        **{f"mixed-grad-dtypes[{api}]": "float32/float64" for api in ("operator", "tnp")},
        # a float32 matmul keeps float32's precision: a CPU has no TF32, and TF32 is off unless switched on
        **{f"tf32[{switch}]": "float32" for switch in TF32_SWITCHES},
        # a scalar keeps a float32 tensor's dtype (JAX's weak types, PyTorch's scalars); the gradient is float32
        **{f"{key}[{name}]": "float32/float32" for key in NUMPY_KEYS for name in OPERANDS},
    },
    # -- TF32 (GPU rows, Ampere and later): the relative error of a float32 matmul gradient is ~1e-3 with it
    *[
        expect(
            f"tf32[{switch}]",
            "tf32",
            framework=fw,
            device="gpu",
            link=link,
            reason=reason,
        )
        for fw, switches, link, reason in (
            (
                "tensorflow",
                ("default", "on"),
                TF32,
                "TensorFlow runs float32 matmuls in TF32 on Ampere and later "
                "GPUs by default (enable_tensor_float_32_execution, on since 2.4): 10 mantissa bits",
            ),
            (
                "jax",
                ("default", "on"),
                JAX_TF32,
                "JAX's default matmul precision on a GPU is TF32 for float32 "
                "(jax_default_matmul_precision unset); 'float32' or 'highest' turns it off",
            ),
            (
                "torch",
                ("on",),
                TORCH_TF32,
                "PyTorch runs float32 matmuls in TF32 only with "
                "torch.backends.cuda.matmul.allow_tf32 = True (off by default since 1.12)",
            ),
        )
        for switch in switches
    ],
    # -- integer sources
    *[
        expect(
            f"int-grad[{s}]",
            raises("TypeError", r"grad requires real- or complex-valued inputs"),
            framework="jax",
            link=JAX_INT_GRAD,
            reason="jax.grad refuses an integer or bool input ('grad requires real- or complex-valued inputs (input "
            "dtype that is a sub-dtype of np.inexact)') unless allow_int=True, which gives a float0 cotangent; "
            "TensorFlow quietly gives None",
        )
        for s in ("watch", "bool")
    ],
    *[
        expect(
            f"int-grad[{s}]",
            raises("RuntimeError", r"(?i)only Tensors of floating point .*can require gradients"),
            framework="torch",
            link=TORCH_INT_GRAD,
            reason="PyTorch refuses requires_grad on a non-floating tensor (requires_grad_, nn.Parameter): 'only "
            "Tensors of floating point and complex dtype can require gradients'; TensorFlow quietly gives None",
        )
        for s in ("watch", "variable", "bool")
    ],
    # -- rounding
    *[
        expect(
            f"rounding-grad[{op}]",
            "none",
            framework="tensorflow",
            link=MATH_GRAD,
            reason=f"TensorFlow registers a None gradient for {op} (math_grad.py returns [None]): the source is "
            "unconnected, None unless unconnected_gradients=ZERO; JAX and PyTorch differentiate it to zeros",
        )
        for op in ROUNDINGS
    ],
    # -- NaN in maximum/minimum
    *[
        expect(
            f"{op}-grad[x-nan]",
            "to-y",
            framework="tensorflow",
            link=TF_MAX_NAN,
            reason="TensorFlow's Maximum/Minimum gradient masks with x >= y (x <= y) and gives y the rest: a NaN x "
            "fails the comparison, so the cotangent goes to y although the output is x's NaN",
        )
        for op in MINMAX
    ],
    *[
        expect(
            f"{op}-value[y-nan]",
            "other-operand",
            framework="tensorflow",
            mode="xla",
            link=XLA_MAX_NAN,
            reason="XLA's lowering of TensorFlow's Maximum/Minimum returns x where only y is NaN (NaN propagates "
            "from x alone); eager, tf.function and graph kernels propagate NaN from either side",
        )
        for op in MINMAX
    ],
    *[
        expect(
            f"{op}-grad[{side}]",
            "neither",
            framework="jax",
            link=JAX_MAX_NAN,
            reason="lax.max/min's JVP selects by comparisons with the output (x > y, x == ans): every one is "
            "false at a NaN, so neither operand gets the cotangent",
        )
        for op in MINMAX
        for side in SIDES
    ],
    *[
        expect(
            f"{op}-grad[{side}]",
            "both",
            framework="torch",
            link=TORCH_MAX_GRAD,
            reason="torch.maximum/minimum's backward zeroes each operand's gradient by masked_fill with a "
            "comparison (self <= other, self > other...) that is false at a NaN: both operands get the cotangent",
        )
        for op in MINMAX
        for side in SIDES
    ],
    expect(
        "reduce_max-value",
        "max-of-rest",
        framework="tensorflow",
        mode="xla",
        link=XLA_REDUCE_MAX_NAN,
        reason="under jit_compile=True tf.reduce_max drops NaN and returns the largest other element; eager "
        "returns NaN",
    ),
    expect(
        "reduce_max-grad",
        "to-max",
        framework="tensorflow",
        mode="xla",
        link=XLA_REDUCE_MAX_NAN,
        reason="the Max gradient sends the cotangent to the elements equal to the output: under XLA that is the "
        "largest non-NaN element (eagerly no element equals NaN, and the 0/0 of its count is NaN everywhere)",
    ),
    expect(
        "reduce_max-grad",
        "zero",
        framework="jax",
        mode="jit",
        link=JAX_MAX_NAN,
        reason="jnp.max's gradient divides the cotangent among the elements equal to the output: with a NaN "
        "none is, and op by op the 0/0 is NaN everywhere; the jit-compiled gradient is zeros instead (measured "
        "with JAX 0.10.2 for every NaN position drawn)",
    ),
    # -- NumPy behaviour
    expect(
        "numpy-behavior[numpy-float64]",
        "float64/float32",
        framework="tensorflow",
        versions=">=2.18",
        link=TF_NUMPY_BEHAVIOR,
        reason="with NumPy behaviour on, a NumPy float64 scalar is a float64 operand, not a weak one: the float32 "
        "tensor is promoted to float64 (prefer_float32=True keeps float32); the gradient is cast back to the "
        "variable's float32. From TF 2.18: 2.12-2.17 convert the NumPy scalar to the tensor's "
        "float32 (float32/float32, measured)",
    ),
    *[
        expect(
            f"{key}[numpy-int64]",
            "float64/float32",
            framework="tensorflow",
            versions=">=2.18",
            link=TF_NUMPY_BEHAVIOR,
            reason="with NumPy behaviour on, a NumPy int64 scalar is an int64 operand, and float32 with int64 "
            "promotes to float64 (as in NumPy), prefer_float32 or not; the gradient is cast back to float32. From "
            "TF 2.18: 2.12-2.17 convert it to the tensor's float32 (float32/float32, measured)",
        )
        for key in NUMPY_KEYS
    ],
    expect(
        "numpy-behavior[numpy-float64]",
        "float64/float32",
        framework="jax",
        link=JAX_WEAK_TYPES,
        reason="only Python scalars are weakly typed in JAX: a NumPy float64 scalar is a float64 operand (x64 on, "
        "as in this suite), so float32 * it is float64; the gradient has the input's float32",
    ),
    # -- mixed dtypes
    expect(
        "mixed-dtype[operator]",
        raises("InvalidArgumentError", r"cannot compute Mul as input #1\(zero-based\) was expected to be a float"),
        framework="tensorflow",
        mode="eager",
        link=TF_MIXED,
        reason="TensorFlow does not promote: an eager float32 * float64 fails in the Mul kernel's type check; "
        "JAX (x64 on) and PyTorch promote to float64",
    ),
    expect(
        "mixed-dtype[operator]",
        raises("TypeError", r"Input 'y' of 'Mul' Op has type float64 that does not match type float32"),
        framework="tensorflow",
        mode=TF_TRACED,
        link=TF_MIXED,
        reason="TensorFlow does not promote: building a Mul of float32 and float64 (traced or in a v1 graph) "
        "fails op construction with TypeError; JAX (x64 on) and PyTorch promote to float64",
    ),
)


# ---------------------------------------------------------------- strategies
INT_SHAPES = ((3,), (2, 3))


@dataclasses.dataclass(frozen=True)
class IntCase:
    x: np.ndarray  # int32
    b: np.ndarray  # bool, same shape


@st.composite
def int_cases(draw) -> IntCase:
    shape = draw(st.sampled_from(INT_SHAPES), label="shape")
    x = draw(ss.arrays(np.int32, shape, elements=st.integers(-50, 50)), label="x")
    b = draw(ss.arrays(np.bool_, shape, elements=st.booleans()), label="b")
    return IntCase(x, b)


@dataclasses.dataclass(frozen=True)
class NanCase:
    x: np.ndarray  # (n,), NaN at some positions
    y: np.ndarray  # (n,), NaN at some positions; never equal to x where both are finite
    w: np.ndarray  # (n,) cotangent, in [0.5, 2]
    r: np.ndarray  # (m,) for the reduction: NaN somewhere, a unique largest finite element


NAN_LEN = 6


@st.composite
def nan_cases(draw) -> NanCase:
    dtype = draw(ss.float_dtypes(), label="dtype")
    n = NAN_LEN
    kinds = draw(st.lists(st.sampled_from(("x-nan", "y-nan", "both", "none")), min_size=n, max_size=n), label="kinds")
    kinds[draw(st.integers(0, n - 1))] = draw(st.sampled_from(SIDES))  # some position with one NaN
    base = draw(ss.arrays(dtype, (n,), elements=ss.floats(dtype, -4.0, 4.0)), label="x")
    gap = draw(ss.arrays(dtype, (n,), elements=ss.floats(dtype, 0.25, 2.0)), label="gap")
    sign = np.array(draw(st.lists(st.sampled_from((1.0, -1.0)), min_size=n, max_size=n)), dtype)
    x, y = base.copy(), (base + sign * gap).astype(dtype)
    k = np.array(kinds)
    x[np.isin(k, ("x-nan", "both"))] = np.nan
    y[np.isin(k, ("y-nan", "both"))] = np.nan
    w = draw(ss.arrays(dtype, (n,), elements=ss.floats(dtype, 0.5, 2.0)), label="cotangent")
    r = draw(ss.arrays(dtype, (5,), elements=ss.floats(dtype, -4.0, 4.0), unique=True), label="reduction input").copy()
    r[draw(st.lists(st.integers(0, 4), min_size=1, max_size=3, unique=True), label="NaN positions")] = np.nan
    return NanCase(x, y, w, r)


# ---------------------------------------------------------------- the programs
VARIABLES = Variables()


def _tf_int_variable(tf, x, dims):
    """An int32 variable holding ``x``: in a v1 graph a new one; elsewhere one per shape ``dims`` (static:
    XLA cannot reshape a variable), made outside any trace on its first call."""
    return VARIABLES.get(tf, x, name="source", shape=dims, use_resource=True, validate_shape=True)


class IntSource(Program):
    """(sum(float(s)^2), its gradient with respect to the integer or bool source s)."""

    def tensorflow(tf, x, b, *, source, dims):
        """``dims``: x's shape, static (traced rows see unknown dimensions)."""
        if source == "variable":
            s = _tf_int_variable(tf, x, dims)
        else:
            s = b if source == "bool" else x
        if in_v1_graph():
            y = tf.reduce_sum(tf.square(tf.cast(s, tf.float32)))
            return y, tf.gradients(y, [s])[0]
        with tf.GradientTape() as tape:
            if source != "variable":  # a variable is watched (or not) by the tape itself
                tape.watch(s)
            y = tf.reduce_sum(tf.square(tf.cast(s, tf.float32)))
        return y, tape.gradient(y, s)

    def jax(jax, x, b, *, source):
        jnp = jax.numpy
        s = b if source == "bool" else x
        f = lambda s: jnp.sum(jnp.square(s.astype(jnp.float32)))  # noqa: E731
        return f(s), jax.grad(f, allow_int=source == "allow_int")(s)

    def torch(torch, x, b, *, source):
        s = b if source == "bool" else x
        s = torch.nn.Parameter(s) if source == "variable" else s.requires_grad_(True)
        y = s.float().square().sum()
        (g,) = torch.autograd.grad(y, s)
        return y, g


class Rounding(Program):
    """(op(x), the gradient of sum(w * op(x))); ``policy``: TensorFlow's unconnected_gradients."""

    def tensorflow(tf, x, w, *, op, policy="none"):
        f = getattr(tf.math, op)
        if in_v1_graph():
            y = f(x)
            return y, tf.gradients(y, [x], grad_ys=w, unconnected_gradients=policy)[0]
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = f(x)
        return y, tape.gradient(y, x, output_gradients=w, unconnected_gradients=policy)

    def jax(jax, x, w, *, op):
        y, pull = jax.vjp(getattr(jax.numpy, op), x)
        return y, pull(w)[0]

    def torch(torch, x, w, *, op):
        x = x.requires_grad_(True)
        y = (torch.round if op == "rint" else getattr(torch, op))(x)  # torch has no rint: round is half-to-even
        (g,) = torch.autograd.grad(y, x, grad_outputs=w)
        return y, g


class MinMax(Program):
    """(op(x, y), d/dx, d/dy of sum(w * op(x, y)))."""

    def tensorflow(tf, x, y, w, *, op):
        f = getattr(tf.math, op)
        if in_v1_graph():
            z = f(x, y)
            return (z, *tf.gradients(z, [x, y], grad_ys=w))
        with tf.GradientTape() as tape:
            tape.watch([x, y])
            z = f(x, y)
        return (z, *tape.gradient(z, [x, y], output_gradients=w))

    def jax(jax, x, y, w, *, op):
        z, pull = jax.vjp(getattr(jax.numpy, op), x, y)
        return (z, *pull(w))

    def torch(torch, x, y, w, *, op):
        x, y = x.requires_grad_(True), y.requires_grad_(True)
        z = getattr(torch, op)(x, y)
        return (z, *torch.autograd.grad(z, [x, y], grad_outputs=w))


class ReduceMax(Program):
    """(max of r, its gradient)."""

    def tensorflow(tf, r):
        if in_v1_graph():
            m = tf.reduce_max(r)
            return m, tf.gradients(m, [r])[0]
        with tf.GradientTape() as tape:
            tape.watch(r)
            m = tf.reduce_max(r)
        return m, tape.gradient(m, r)

    def jax(jax, r):
        return jax.numpy.max(r), jax.grad(jax.numpy.max)(r)

    def torch(torch, r):
        r = r.requires_grad_(True)
        m = torch.amax(r)
        return m, torch.autograd.grad(m, r)[0]


class MixedMul(Program):
    """(x * y, d/dx, d/dy of sum(x * y)) for float32 x and float64 y."""

    def tensorflow(tf, x, y, *, api):
        mul = tf.experimental.numpy.multiply if api == "tnp" else (lambda a, b: a * b)
        if in_v1_graph():
            z = mul(x, y)
            return (z, *tf.gradients(z, [x, y]))
        with tf.GradientTape() as tape:
            tape.watch([x, y])
            z = mul(x, y)
        return (z, *tape.gradient(z, [x, y]))

    def jax(jax, x, y, *, api):
        z, pull = jax.vjp(lambda a, b: a * b, x, y)
        return (z, *pull(jax.numpy.ones_like(z)))

    def torch(torch, x, y, *, api):
        x, y = x.requires_grad_(True), y.requires_grad_(True)
        z = x * y
        return (z, *torch.autograd.grad(z.sum(), [x, y]))


class MatmulGrad(Program):
    """The gradient of sum(w * (a @ b)) with respect to a."""

    def tensorflow(tf, a, b, w):
        if in_v1_graph():
            return tf.gradients(tf.linalg.matmul(a, b), [a], grad_ys=w)[0]
        with tf.GradientTape() as tape:
            tape.watch(a)
            z = tf.linalg.matmul(a, b)
        return tape.gradient(z, a, output_gradients=w)

    def jax(jax, a, b, w):
        return jax.vjp(lambda a: a @ b, a)[1](w)[0]

    def torch(torch, a, b, w):
        a = a.requires_grad_(True)
        return torch.autograd.grad(a @ b, a, grad_outputs=w)[0]


# ---------------------------------------------------------------- properties
def _kind(g) -> str:
    """``none``, ``zero``, ``nonzero`` or JAX's ``float0``."""
    if g is not None and getattr(np.asarray(g).dtype, "names", None) == ("float0",):
        return "float0"
    return cmp.gradient_kind(g)


@given(case=int_cases())
def test_integer_sources_get_no_gradient(subject, record, case):
    """Per spelling of an integer or bool source: None, a float0, or an error; the value against NumPy."""
    record.example(x=case.x, b=case.b)
    for source in SOURCES[subject.framework]:
        try:
            static = {"dims": case.x.shape} if subject.framework == "tensorflow" else {}
            y, g = subject.run(IntSource.of(subject), case.x, case.b, source=source, **static)
        except Exception as e:  # the refusal is the observation
            record.check(EXPECT, **{f"int-grad[{source}]": cmp.error_name(e)})
            continue
        record.check(EXPECT, **{f"int-grad[{source}]": _kind(g)})
        s = (case.b if source == "bool" else case.x).astype(np.float64)
        record.close(name=f"value[{source}]", out=y, ref=np.float32(np.sum(s * s)), oracle="closed-form")


@given(
    x=ss.every_dtype_and_shape(shapes=((3,), (2, 3))).flatmap(
        lambda ds: ss.float_arrays(dtype=ds[0], shape=ds[1], halfway=True)
    ),
    data=st.data(),
)
def test_rounding_gradients(subject, record, x, data):
    """floor/ceil/round/rint: values against NumPy (half to even), and the gradient's kind per framework
    and (TensorFlow) under unconnected_gradients=ZERO."""
    w = data.draw(ss.like(x, min_value=0.5, max_value=2.0, edges=()), label="cotangent")
    record.example(x=x, w=w)
    policies = ("none", "zero") if subject.framework == "tensorflow" else (None,)
    for op in ROUNDINGS:
        ref = {"rint": np.rint, "round": np.round}.get(op, getattr(np, op))(x)
        for policy in policies:
            static = {"op": op, **({"policy": policy} if policy else {})}
            y, g = subject.run(Rounding.of(subject), x, w, **static)
            record.equal(name=f"{op}(x)", out=np.asarray(y), ref=ref, oracle="closed-form")
            key = "rounding-grad-zero-policy" if policy == "zero" else "rounding-grad"
            record.check(EXPECT, **{f"{key}[{op}]": cmp.gradient_kind(g)})
            if g is not None:
                record.equal(
                    name=f"{op} grad dtype", out=np.asarray(g).dtype.name, ref=x.dtype.name, oracle="closed-form"
                )


def _where_to(gx, gy, w) -> str:
    """Where the cotangent went at some positions: to-x, to-y, both, neither, nan or other."""
    if np.isnan(gx).any() or np.isnan(gy).any():
        return "nan"
    got_x, got_y = np.array_equal(gx, w), np.array_equal(gy, w)
    zero_x, zero_y = not np.any(gx), not np.any(gy)
    if got_x and got_y:
        return "both"
    if got_x and zero_y:
        return "to-x"
    if got_y and zero_x:
        return "to-y"
    return "neither" if zero_x and zero_y else "other"


@given(case=nan_cases())
def test_nan_in_maximum_minimum_and_reduce_max(subject, record, case):
    """Per side holding the only NaN: the value and where the cotangent goes; the NaN-free positions
    against the closed form; reduce_max's value and gradient with NaN in its input."""
    record.example(x=case.x, y=case.y, w=case.w, r=case.r)
    xn, yn = np.isnan(case.x), np.isnan(case.y)
    sides = {"x-nan": xn & ~yn, "y-nan": yn & ~xn}
    clean = ~xn & ~yn
    for op in MINMAX:
        z, gx, gy = subject.run(MinMax.of(subject), case.x, case.y, case.w, op=op)
        for side, sel in sides.items():
            if not sel.any():
                continue
            other = (case.y if side == "x-nan" else case.x)[sel]
            v = z[sel]
            seen = "nan" if np.isnan(v).all() else "other-operand" if np.array_equal(v, other) else "other"
            record.check(
                EXPECT, **{f"{op}-value[{side}]": seen, f"{op}-grad[{side}]": _where_to(gx[sel], gy[sel], case.w[sel])}
            )
        if clean.any():
            x, y = case.x[clean], case.y[clean]
            pick_x = x > y if op == "maximum" else x < y
            w = case.w[clean]
            record.equal(name=f"{op}(x, y)", out=z[clean], ref=np.where(pick_x, x, y), oracle="closed-form")
            record.equal(
                name=f"{op} d/dx", out=gx[clean], ref=np.where(pick_x, w, 0).astype(w.dtype), oracle="closed-form"
            )
            record.equal(
                name=f"{op} d/dy", out=gy[clean], ref=np.where(pick_x, 0, w).astype(w.dtype), oracle="closed-form"
            )
    m, g = subject.run(ReduceMax.of(subject), case.r)
    finite = ~np.isnan(case.r)
    top = np.nanmax(case.r)
    seen = "nan" if np.isnan(m) else "max-of-rest" if m == top else "other"
    record.check(EXPECT, **{"reduce_max-value": seen})
    g = np.asarray(g)
    onehot = np.where(finite & (case.r == top), 1.0, 0.0)
    if np.isnan(g).all():
        seen = "nan"
    elif np.array_equal(g, onehot):
        seen = "to-max"
    elif not np.any(g[finite]) and np.any(g[~finite]):
        seen = "to-nan"
    else:
        seen = "zero" if not np.any(g) else "other"
    record.check(EXPECT, **{"reduce_max-grad": seen})


@given(
    x=ss.float_arrays(dtype=np.float32, shape=(3,)),
    y=ss.float_arrays(dtype=np.float64, shape=(3,)),
)
def test_mixed_dtype_gradient_dtypes(subject, record, x, y):
    """float32 * float64: the product's dtype (or the error), each gradient's dtype, and the values
    against float64 closed forms."""
    record.example(x=x, y=y)
    for api in MIXED_APIS[subject.framework]:
        try:
            z, gx, gy = subject.run(MixedMul.of(subject), x, y, api=api)
        except Exception as e:  # TensorFlow does not promote
            record.check(EXPECT, **{f"mixed-dtype[{api}]": cmp.error_name(e)})
            continue
        z, gx, gy = np.asarray(z), np.asarray(gx), np.asarray(gy)
        record.check(
            EXPECT, **{f"mixed-dtype[{api}]": z.dtype.name, f"mixed-grad-dtypes[{api}]": f"{gx.dtype}/{gy.dtype}"}
        )
        x64 = x.astype(np.float64)
        # one product (or its cofactor) per element, no cancellation: each held relative to its own magnitude
        record.close(name=f"{api} x*y", out=z, ref=x64 * y, oracle="closed-form", dtype=z.dtype, scale=np.abs(x64 * y))
        record.close(name=f"{api} d/dx", out=gx, ref=y.astype(gx.dtype), oracle="closed-form", scale=np.abs(y))
        record.close(name=f"{api} d/dy", out=gy, ref=x64.astype(gy.dtype), oracle="closed-form", scale=np.abs(x64))


@given(
    a=ss.float_arrays(dtype=np.float32, shape=(4, 8), min_value=-2.0, max_value=2.0),
    b=ss.float_arrays(dtype=np.float32, shape=(8, 3), min_value=-2.0, max_value=2.0),
    w=ss.float_arrays(dtype=np.float32, shape=(4, 3), min_value=-2.0, max_value=2.0),
)
def test_float32_matmul_gradient_keeps_float32_precision(subject, record, a, b, w):
    """The gradient w @ b.T of a float32 matmul at float32's tolerance (a TF32 matmul, 10 mantissa bits,
    would miss it): the suite's process runs with TF32 off on every device (the TF32 rows below switch it)."""
    record.example(a=a, b=b, w=w)
    g = subject.run(MatmulGrad.of(subject), a, b, w)
    ref = w.astype(np.float64) @ b.astype(np.float64).T
    record.close(name="d/da", out=g, ref=ref.astype(np.float32), oracle="closed-form", scale="inputs")


# ---------------------------------------------------------------- TF32, in a peer without the override
@pytest.fixture(scope="module")
def tf32_peers():
    """One peer per (framework, device), started on first use, without NVIDIA_TF32_OVERRIDE."""
    with peers.lazy_groups(
        lambda fd: peers.PeerGroup(
            f"tf32-{fd[0]}-{fd[1]}",
            "cases._tf32_peers:matmul",
            env={"NVIDIA_TF32_OVERRIDE": None},
            configs={"framework": fd[0], "device": fd[1]},
        )
    ) as get:
        yield lambda subject: get((subject.framework, subject.device))


def _precision(g, ref) -> str:
    """``float32`` (max error / max |ref| <= 1e-5), ``tf32`` (<= 1e-2: 10 mantissa bits), or ``other``."""
    err = float(np.max(np.abs(np.asarray(g, np.float64) - ref)) / np.max(np.abs(ref)))
    return "float32" if err <= 1e-5 else "tf32" if err <= 1e-2 else "other"


@on("tensorflow", "jax", "torch", modes=("eager", "function", "xla"))  # the switch is process-wide: no v1 graph
@settings(max_examples=max(3, settings.default.max_examples // 5))  # each example crosses a process
@given(
    a=ss.float_arrays(dtype=np.float32, shape=(16, 64), min_value=0.5, max_value=2.0),
    b=ss.float_arrays(dtype=np.float32, shape=(64, 8), min_value=0.5, max_value=2.0),
    w=ss.float_arrays(dtype=np.float32, shape=(16, 8), min_value=0.5, max_value=2.0),
)
def test_tf32_switch_and_the_matmul_gradient(subject, record, tf32_peers, a, b, w):
    """The gradient w @ b.T of a float32 matmul with each framework's TF32 switch at its default, on and off,
    in a process of its own: its relative error against float64 says ``float32`` or ``tf32``; positive
    entries (no cancellation), so the error is the rounding of the inputs and of the products."""
    record.example(a=a, b=b, w=w)
    ref = w.astype(np.float64) @ b.astype(np.float64).T
    seen = {}
    for switch in TF32_SWITCHES:
        (out,) = tf32_peers(subject).request({"a": a, "b": b, "w": w, "mode": subject.mode, "tf32": switch})
        record.note(f"tf32[{switch}]: the switch read {out['setting']}")
        seen[f"tf32[{switch}]"] = _precision(out["grad"], ref)
        want, _ = EXPECT.lookup(f"tf32[{switch}]", subject)
        if want == "float32":
            record.close(name=f"tf32[{switch}] d/da", out=out["grad"], ref=ref.astype(np.float32),
                         oracle="closed-form", scale="inputs")  # fmt: skip
    record.check(EXPECT, **seen)


# ---------------------------------------------------------------- NumPy behaviour, in peers
class ScalarMul(Program):
    """(x * c, the gradient of sum(x * c) with respect to x) for the operand c named ``operand``
    (TensorFlow's rows run in the NumPy-behaviour peers instead)."""

    def jax(jax, x, *, operand):
        z, pull = jax.vjp(lambda v: v * OPERANDS[operand], x)
        return z, pull(jax.numpy.ones_like(z))[0]

    def torch(torch, x, *, operand):
        x = x.requires_grad_(True)
        z = x * OPERANDS[operand]
        return z, torch.autograd.grad(z.sum(), x)[0]


@pytest.fixture(scope="module")
def numpy_behavior_peers(request):
    """Two peers, NumPy behaviour with prefer_float32 off (rank 0) and on (rank 1), with the run's
    TensorFlow faults; started on first use."""
    faults = list(getattr(request.config, "_adsem_faults", ()))
    configs = [{"prefer_float32": prefer, "faults": faults} for prefer in (False, True)]
    with peers.lazy_groups(
        lambda _: peers.PeerGroup("numpy-behavior", "cases._numpy_behavior_peer:promotion", size=2, configs=configs)
    ) as get:
        yield lambda: get("tensorflow")


@given(x=st.just(np.array([1.5, -2.0, 0.25], np.float32)))
def test_numpy_behavior_promotion_and_gradient_dtypes(subject, record, numpy_behavior_peers, x):
    """A float32 tensor times each scalar of OPERANDS: the product's dtype and its gradient's (TensorFlow
    with NumPy behaviour on, prefer_float32 off and on, one request to its peers), against closed forms."""
    record.example(x=x)
    if subject.framework == "tensorflow":
        answers = numpy_behavior_peers().request({"x": x, "mode": subject.mode, "operands": OPERANDS})
        runs = dict(zip(NUMPY_KEYS, answers))
    else:
        runs = {NUMPY_KEYS[0]: {name: subject.run(ScalarMul.of(subject), x, operand=name) for name in OPERANDS}}
    for key, out in runs.items():
        for name, (z, g) in out.items():
            z, g, c = np.asarray(z), np.asarray(g), float(OPERANDS[name])
            record.check(EXPECT, **{f"{key}[{name}]": f"{z.dtype}/{g.dtype}"})
            ref64 = x.astype(np.float64) * c  # one product per element: held relative to its own magnitude
            record.close(name=f"{key}[{name}] value", out=z, ref=ref64.astype(z.dtype), oracle="closed-form",
                         scale=np.abs(ref64))  # fmt: skip
            record.close(name=f"{key}[{name}] grad", out=g, ref=np.full(x.shape, c, g.dtype), oracle="closed-form",
                         scale=np.full(x.shape, abs(c)))  # fmt: skip
