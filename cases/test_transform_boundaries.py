"""Transform boundaries: where a loop construct, a NumPy round trip or an inner function meets the tape.

Loop constructs, as op-table entries (the generic properties hold each one's gradient, forward mode
and second order in every mode against JAX, PyTorch and float64 differences): ``tf.map_fn`` and
``tf.vectorized_map`` over the rows of a (3, 4) input (``jax.lax.map`` and ``jax.vmap``,
``torch.func.vmap`` and a Python loop over rows), ``tf.scan`` (a tanh recurrence, against
``jax.lax.scan`` and the unrolled loop), ``tf.foldl`` (a product-and-sum fold, its result scaling
the input), and a ``tf.while_loop`` writing a ``tf.TensorArray`` (``jax.lax.fori_loop`` with
static bounds). Users report gradients of these that raise, vanish or go wrong in a traced mode
(tensorflow#62174, #3972, #7643, #17397, #19897, #47496, #2598); each entry's rows say which hold.

A NumPy round trip inside the tape (tensorflow#20630, #36596, #31919): a term computed from
``x.numpy()`` or by a NumPy function applied to a tensor is a constant to TensorFlow's eager tape,
so its gradient is silently ``None`` (the whole loss through NumPy) or silently wrong (a term
through NumPy drops its derivative); traced, the tensor has no value and the program does not
build. JAX's tracers and PyTorch's ``requires_grad`` tensors refuse the conversion (measured).

``tf.stop_gradient`` inside a ``tf.function`` called under a tape (tensorflow#51473): the
straight-through estimator ``v + stop_gradient(round(v) - v)`` computed by an inner
``tf.function`` (an inner ``jax.jit`` for JAX; PyTorch's spelling has no function boundary and is
the control) gives ``d/dx [ste(x) * x] = x + round(x)``.

``tape.jacobian`` with pfor on and off over a menu of layers (tensorflow#33919, #23397, #36256,
tensorflow#38391, #57343, #37795, #60085): a dilated ``tf.nn.conv2d``, ``tf.nn.conv1d``, leaky
ReLU, a broadcasting binary op, a batch of zero rows and an LSTM (a ``tf.scan`` over three time
steps, as Keras' LSTM loops over time), against float64 central differences, ``jax.jacrev`` and
``torch.func.jacrev``. Measured on TF 2.21: with TensorFlow's own CPU kernels (oneDNN off, the
suite's setting) the dilated convolution has no input gradient at all outside XLA; the
while-loop Jacobian of an empty batch fails eagerly, in a v1 graph and under XLA, each in its own
way, where pfor gives the empty Jacobian; and pfor's vectorised LSTM loop does not compile under
XLA (no TensorListReserve kernel), where the while-loop Jacobian does.

A gradient penalty through a resize (tensorflow#22208, #33751): d/dx of ``sum(g^2)`` with ``g`` the
gradient of a critic of ``tf.image.resize(x)`` or of Keras ``Resizing`` (bilinear, downscaling), the
WGAN-GP program on images. It needs resize's own gradient differentiated: TensorFlow registers
``ResizeBilinearGrad`` as NotDifferentiable (from 2.18; before, no entry at all), so the penalty's
gradient is None in every mode, silently, where JAX and PyTorch give the float64 closed form.
(Second order of the resize alone, which is linear, is image-resize-gradients' ``second[...]``.)

A compiler's algebra at an overflow (openxla/xla#42732, jax#38097, #38098): ``log(exp(x))`` at
x = 89 (exp overflows) and -104 (it underflows). Op by op the value is inf and -inf and the
gradient NaN; under XLA (TensorFlow's ``jit_compile`` and ``jax.jit``) the algebraic simplifier
folds the value to x while the gradient keeps the NaN (measured).

The XLA mismatch of a ``tf.where`` gradient with a shape-polymorphic signature (tensorflow#118713),
measured on TF 2.21: it is not the gradient nor the polymorphism (a static-shape ``jit_compile``
gives it too) but the row mean the mask compares with, which XLA rounds one ulp apart from
TensorFlow's kernel at the issue's near-ties (TF eager, XLA, JAX, PyTorch and NumPy each put a
different element on the other side), so ``tf.where`` takes the other branch there. What is
asserted is what a user can rely on: the gradient follows the branch the value itself took, at
every element of the issue's two inputs, in every mode.
"""

import functools

import numpy as np
from hypothesis import example, given, strategies as st

from suite import compare as cmp, ops, strategies as ss
from suite.behaviours import Floor, behaviour
from suite.expectations import expect, expect_keys, expectations, raises
from suite.interpolation import triangle
from suite.ops import properties
from suite.program import Program

TF_MAP_FN = "https://www.tensorflow.org/api_docs/python/tf/map_fn"
TF_VECTORIZED_MAP = "https://www.tensorflow.org/api_docs/python/tf/vectorized_map"
TF_SCAN = "https://www.tensorflow.org/api_docs/python/tf/scan"
TF_WHILE = "https://www.tensorflow.org/api_docs/python/tf/while_loop"
TF_NUMPY = "https://github.com/tensorflow/tensorflow/issues/36596"
TF_STOP_IN_FUNCTION = "https://github.com/tensorflow/tensorflow/issues/51473"
JAX_TRACER_CONVERSION = "https://docs.jax.dev/en/latest/errors.html#jax.errors.TracerArrayConversionError"
TORCH_NUMPY = "https://pytorch.org/docs/stable/generated/torch.Tensor.numpy.html"
TF_JACOBIAN = "https://www.tensorflow.org/api_docs/python/tf/GradientTape#jacobian"
#: the first tf-nightly whose XLA compiles the while-loop Jacobian of an empty batch (bisected: the
#: nightly before, 2.23.0.dev20261006, refuses the zero-size scatter as 2.21 does;
#: https://github.com/tensorflow/tensorflow/compare/fae4d3f1da0...4b9df52bd8b)
XLA_EMPTY_SCATTER_FROM = "2.23.0.dev20261010"
#: the first tf-nightly whose XLA no longer folds log(exp(x)) to x (bisected: 2.22.0.dev20260727 folds;
#: https://github.com/tensorflow/tensorflow/compare/75879c752e0...323afda8d60)
XLA_LOG_EXP_FROM = "2.22.0.dev20260731"
TF_CONV_GRAD = "https://github.com/tensorflow/tensorflow/blob/master/tensorflow/core/kernels/conv_grad_input_ops.cc"
TF_PFOR_LSTM = "https://github.com/tensorflow/tensorflow/issues/57343"
TF_RESIZE_GRAD_GRAD = "https://github.com/tensorflow/tensorflow/issues/22208"
TF_IMAGE_GRAD = "https://github.com/tensorflow/tensorflow/blob/master/tensorflow/python/ops/image_grad.py"
XLA_INVERSE_PAIRS = "https://github.com/openxla/xla/issues/42732"
JAX_LOG_EXP = "https://github.com/jax-ml/jax/issues/38097"

BEHAVIOUR = behaviour(
    "transform-boundaries",
    sources=[],
    links=[
        TF_MAP_FN,
        TF_VECTORIZED_MAP,
        TF_SCAN,
        TF_WHILE,
        "https://github.com/tensorflow/tensorflow/issues/7643",
        "https://github.com/tensorflow/tensorflow/issues/47496",
        "https://github.com/tensorflow/tensorflow/issues/20630",
        TF_NUMPY,
        TF_STOP_IN_FUNCTION,
        JAX_TRACER_CONVERSION,
        TORCH_NUMPY,
        TF_JACOBIAN,
        TF_PFOR_LSTM,
        TF_RESIZE_GRAD_GRAD,
        "https://github.com/tensorflow/tensorflow/issues/33751",
        XLA_INVERSE_PAIRS,
        JAX_LOG_EXP,
        "https://github.com/tensorflow/tensorflow/issues/118713",
    ],
    floor=Floor(
        "mixed",
        "Per element: the inner-function straight-through test (round(x) x and its gradient (x + round x) w, "
        "no cancellation: scale |ref_i|) and the Jacobians of the leaky-ReLU and broadcast-binary layers "
        "(one exact constant per entry, no sum: scale |ref_i|); the resize gradient penalty at the magnitudes "
        "of the terms each entry sums, tanh's second derivative at its terms of 1 (penalty_scales: JAX forms it "
        "from (1 - t)(1 + t), absolutely accurate only). Array-level: the conv, LSTM and dense Jacobians, whose "
        "entries mix the input; the NumPy round-trip and tf.where classifiers use cmp.near (allclose at the "
        "gradient tolerance, not a floor).",
    ),
)

#: three rows of four: the loops run over the rows (axis 0)
ROWS = ((np.float32, (3, 4)), (np.float64, (3, 4)))
DOMAIN = {"float32": (-2.0, 2.0), "float64": (-2.0, 2.0)}


# ---------------------------------------------------------------- the loop constructs
def _row_numpy(r):
    """Each row's map: sin(r) * sum(r^2), in float64 (rows on the last axis)."""
    return np.sin(r) * np.sum(r * r, axis=-1, keepdims=True)


def _row_tf(tf):
    return lambda r: tf.sin(r) * tf.reduce_sum(r * r)


def _row_jax(jax):
    return lambda r: jax.numpy.sin(r) * jax.numpy.sum(r * r)


def _row_torch(torch):
    return lambda r: torch.sin(r) * (r * r).sum()


def _scan_numpy(x):
    """h_t = tanh(h_{t-1} / 2 + x_t), h_0 = 0: the stacked states."""
    h, out = np.zeros_like(x[0], np.float64), []
    for xt in np.asarray(x, np.float64):
        h = np.tanh(0.5 * h + xt)
        out.append(h)
    return np.stack(out)


def _scan_torch(torch, x):
    h, out = torch.zeros_like(x[0]), []
    for xt in x.unbind(0):
        h = torch.tanh(0.5 * h + xt)
        out.append(h)
    return torch.stack(out)


def _scan_jax(jax, x):
    def step(h, xt):
        h = jax.numpy.tanh(0.5 * h + xt)
        return h, h

    return jax.lax.scan(step, jax.numpy.zeros_like(x[0]), x)[1]


def _fold_numpy(x):
    """a = fold(a * cos(x_t) + x_t) from a = 1 over the rows; the result is x * a."""
    a = np.ones_like(x[0], np.float64)
    for xt in np.asarray(x, np.float64):
        a = a * np.cos(xt) + xt
    return np.asarray(x, np.float64) * a


def _fold_torch(torch, x):
    a = torch.ones_like(x[0])
    for xt in x.unbind(0):
        a = a * torch.cos(xt) + xt
    return x * a


def _fold_jax(jax, x):
    a = jax.lax.scan(lambda a, xt: (a * jax.numpy.cos(xt) + xt, None), jax.numpy.ones_like(x[0]), x)[0]
    return x * a


def _while_numpy(x):
    """h_t = sin(h_{t-1}) * x_t + x_t from h = 1, each state written to row t."""
    h, out = np.ones_like(x[0], np.float64), []
    for xt in np.asarray(x, np.float64):
        h = np.sin(h) * xt + xt
        out.append(h)
    return np.stack(out)


def _while_tf(tf, x):
    n = tf.shape(x)[0]  # a v1 graph's placeholder has no static row count

    def body(i, h, ta):
        h = tf.sin(h) * x[i] + x[i]
        return i + 1, h, ta.write(i, h)

    ta = tf.TensorArray(x.dtype, size=n)
    _, _, ta = tf.while_loop(lambda i, h, ta: i < n, body, (tf.constant(0), tf.ones_like(x[0]), ta))
    return ta.stack()


def _while_jax(jax, x):
    def body(i, carry):
        h, out = carry
        h = jax.numpy.sin(h) * x[i] + x[i]
        return h, out.at[i].set(h)

    # static bounds: fori_loop lowers to a scan, which reverse mode differentiates
    return jax.lax.fori_loop(0, x.shape[0], body, (jax.numpy.ones_like(x[0]), jax.numpy.zeros_like(x)))[1]


def _while_torch(torch, x):
    h, out = torch.ones_like(x[0]), []
    for xt in x.unbind(0):
        h = torch.sin(h) * xt + xt
        out.append(h)
    return torch.stack(out)


TF_FORWARDPROP = "https://github.com/tensorflow/tensorflow/blob/master/tensorflow/python/eager/forwardprop.py"
#: forward mode through a traced loop: the ForwardAccumulator's JVP of the While op (its
#: forward-over-backward fallback) meets the loop's TensorList accumulators (measured: the same
#: TypeError for tf.map_fn, tf.scan, tf.foldl and a tf.while_loop, and none for tf.vectorized_map,
#: which pfor turns into batched ops with no loop; eagerly each loop runs as Python, op by op)
TRACED_LOOP_FORWARD = dict(
    framework="tensorflow",
    mode="function|xla|graph",
    reason='forward mode (ForwardAccumulator) through a While op built in a graph raises "`dtype` <dtype: '
    "'variant'> is not compatible with 1 of dtype int64\": the JVP of the loop's TensorList accumulators fails, "
    "so no traced loop has a forward-mode derivative; eagerly the loop is Python and its ops are differentiated "
    "one by one (JAX's lax.map/scan/fori_loop and PyTorch's loops have one in every mode)",
    link=TF_FORWARDPROP,
)


def _loop(name, declared=(), **spellings):
    return ops.register(
        ops.Op(
            name,
            behaviour="transform-boundaries",
            elementwise=False,  # every element of a loop's output mixes a row or every earlier row
            pairs=ROWS,
            domain=DOMAIN,
            declared=tuple(declared),
            **spellings,
        )
    )


def _traced_forward(name):
    error = raises("TypeError", r"<dtype: 'variant'> is not compatible")
    return [expect(f"forward[{name}]", error, **TRACED_LOOP_FORWARD)]


_loop(
    "map_fn",
    tensorflow=lambda tf, x: tf.map_fn(_row_tf(tf), x),
    jax=lambda jax, x: jax.lax.map(_row_jax(jax), x),
    torch=lambda torch, x: torch.stack([_row_torch(torch)(r) for r in x.unbind(0)]),
    reference=_row_numpy,
    declared=_traced_forward("map_fn"),
)
_loop(
    "vectorized_map",
    tensorflow=lambda tf, x: tf.vectorized_map(_row_tf(tf), x),
    jax=lambda jax, x: jax.vmap(_row_jax(jax))(x),
    torch=lambda torch, x: torch.func.vmap(_row_torch(torch))(x),
    reference=_row_numpy,
    declared=[
        expect(
            "second[vectorized_map]",
            raises("RecursionError", r"maximum recursion depth exceeded"),
            framework="tensorflow",
            mode="graph",
            reason="in a v1 graph with an unknown row count the first gradient of tf.vectorized_map is an "
            "IndexedSlices (the pfor'd row gather's gradient), and tf.gradients of it with grad_ys, a "
            "Hessian-vector product, recurses without end (measured outside the suite too; with reduce_sum as "
            "the target and no grad_ys it returns; tf.function and XLA give the right second derivative)",
            link=TF_VECTORIZED_MAP,
        )
    ],
)
_loop(
    "scan",
    tensorflow=lambda tf, x: tf.scan(lambda h, xt: tf.tanh(0.5 * h + xt), x, initializer=tf.zeros_like(x[0])),
    jax=_scan_jax,
    torch=_scan_torch,
    reference=_scan_numpy,
    declared=_traced_forward("scan"),
)
_loop(
    "foldl",
    tensorflow=lambda tf, x: x * tf.foldl(lambda a, xt: a * tf.cos(xt) + xt, x, initializer=tf.ones_like(x[0])),
    jax=_fold_jax,
    torch=_fold_torch,
    reference=_fold_numpy,
    declared=_traced_forward("foldl"),
)
_loop(
    "while_loop",
    tensorflow=_while_tf,
    jax=_while_jax,
    torch=_while_torch,
    reference=_while_numpy,
    declared=[
        *_traced_forward("while_loop"),
        *expect_keys(
            ["reverse[while_loop]", "second[while_loop]"],
            raises("InvalidArgumentError", r"XLA compilation requires a fixed tensor list size"),
            framework="tensorflow",
            mode="xla",
            reason="a tf.while_loop without maximum_iterations has no bound XLA can size the gradient's "
            "TensorList accumulators by, so its gradient does not compile (the forward does, the TensorArray's "
            "own size is known); tf.scan and tf.map_fn set maximum_iterations themselves",
            link=TF_WHILE,
        ),
    ],
)

properties.bind(globals(), "transform-boundaries")


# ---------------------------------------------------------------- a NumPy round trip inside the tape
#: ``whole``: the output is NumPy's sin(x); ``partial``: x * sin(x), sin from ``x.numpy()``;
#: ``ufunc``: x * np.sin(x), the NumPy function applied to the tensor itself
ROUND_TRIPS = ("whole", "partial", "ufunc")
#: the layers of the Jacobian menu, each with its input shape: a dilated Conv2D (NHWC, 3x3 kernel,
#: dilation 2), a Conv1D (NWC, kernel 3, two channels in and out), leaky ReLU, a broadcasting binary
#: op, a batch of zero rows, and an LSTM over three time steps (batch 2, two features, two units;
#: a loop over time, as Keras' LSTM is: ``tf.scan``, ``jax.lax.scan``, a Python loop)
JAC_LAYERS = {
    "dilated-conv2d": (1, 5, 5, 1),
    "conv1d": (1, 6, 2),
    "leaky-relu": (2, 3),
    "broadcast-binary": (2, 3),
    "empty-batch": (0, 3),
    "lstm": (2, 3, 2),
}
#: layers whose output element i is computed from input element i (and a column of its own row) alone
ELEMENTWISE_LAYERS = ("leaky-relu", "broadcast-binary")
EXPECT = expectations(
    {
        # TensorFlow's eager tape: NumPy's value is a constant it never saw
        "numpy-round-trip[whole]": "none",
        "numpy-round-trip[partial]": "numpy-constant",
        "numpy-round-trip[ufunc]": "numpy-constant",
        "inner-function-stop-gradient": "closed-form",
        **{f"jacobian[{layer}|{how}]": "closed-form" for layer in JAC_LAYERS for how in ("pfor", "while")},
    },
    *expect_keys(
        ["numpy-round-trip[whole]", "numpy-round-trip[partial]"],
        raises("AttributeError", r"object has no attribute 'numpy'"),
        framework="tensorflow",
        mode="function|xla|graph",
        reason="traced, x is a symbolic tensor with no value: .numpy() does not exist and the program does not "
        "build, where eager TensorFlow silently takes the NumPy result as a constant",
        link=TF_NUMPY,
    ),
    expect(
        "numpy-round-trip[ufunc]",
        raises("NotImplementedError", r"Cannot convert a symbolic"),
        framework="tensorflow",
        mode="function|xla|graph",
        reason="traced, NumPy's __array__ conversion of a symbolic tensor refuses ('Cannot convert a symbolic "
        "tf.Tensor to a numpy array'), where eager TensorFlow converts and drops the term's derivative",
        link=TF_NUMPY,
    ),
    *expect_keys(
        ["jacobian[dilated-conv2d|pfor]", "jacobian[dilated-conv2d|while]"],
        raises("InvalidArgumentError", r"Current CPU implementations do not yet support dilation rates larger than 1"),
        framework="tensorflow",
        mode="eager|function|graph",
        device="cpu",
        reason="TensorFlow's own CPU kernel of Conv2DBackpropInput has no dilation (the suite runs TF with oneDNN "
        "off, TF_ENABLE_ONEDNN_OPTS=0, for reproducible numerics; oneDNN's kernel has one): every derivative of "
        "tf.nn.conv2d(dilations=2) with respect to its input raises, its plain gradient too, so no Jacobian, pfor "
        "or not; XLA compiles it",
        link=TF_CONV_GRAD,
    ),
    expect(
        "jacobian[lstm|pfor]",
        raises("InvalidArgumentError", r"TensorListReserve"),
        framework="tensorflow",
        mode="xla",
        reason="pfor vectorises the LSTM's loop over time (tf.scan's While op) into a loop whose TensorList "
        "accumulators have no static size, and XLA has no TensorListReserve kernel for it: the vectorised Jacobian "
        "does not compile, where the while-loop Jacobian (pfor off) does and is right (LSTMs and pfor: "
        "tensorflow#57343, #41042, #37053)",
        link=TF_PFOR_LSTM,
    ),
    expect(
        "jacobian[empty-batch|while]",
        raises("ValueError", r"is not compatible with supplied shape"),
        framework="tensorflow",
        mode="eager",
        versions=">=2.13",
        reason="the while-loop Jacobian of a (0, 2) output of a (0, 3) input stacks zero gradients and reshapes "
        "them to the Jacobian's (0, 2, 0, 3), which eagerly fails its shape check (pfor gives the empty Jacobian)",
        link=TF_JACOBIAN,
    ),
    expect(
        "jacobian[empty-batch|while]",
        raises("TypeError", r"'NoneType' object is not iterable"),
        framework="tensorflow",
        mode="eager",
        versions="<2.13",
        reason="TF 2.12's eager while-loop Jacobian of an empty batch fails before any shape check, on an output "
        "list it never filled (measured; 2.13 and later reach the shape check)",
        link=TF_JACOBIAN,
    ),
    expect(
        "jacobian[empty-batch|while]",
        raises("InvalidArgumentError", r"Tried to stack elements of an empty list"),
        framework="tensorflow",
        mode="graph",
        versions=">=2.13",
        reason="in a v1 graph the row count is unknown, and the while loop's TensorArray of zero gradients cannot be "
        "stacked without an element shape (pfor gives the empty Jacobian; tf.function, whose shapes are known, "
        "the right one)",
        link=TF_JACOBIAN,
    ),
    expect(
        "jacobian[empty-batch|while]",
        raises("InvalidArgumentError", r"All except the first dimension must be fully defined when concating an empty"),
        framework="tensorflow",
        mode="graph",
        versions="<2.13",
        reason="TF 2.12 concatenates the empty TensorList of gradients instead of stacking it, and refuses for the "
        "same reason: the element shape [?, 3] is not fully defined (measured)",
        link=TF_JACOBIAN,
    ),
    expect(
        "jacobian[empty-batch|while]",
        raises("InvalidArgumentError", r"Scatter dimension 0 is of size zero"),
        framework="tensorflow",
        mode="xla",
        versions=f"<{XLA_EMPTY_SCATTER_FROM}",
        reason="XLA refuses the while-loop Jacobian's scatter into a zero-size tensor (pfor gives the empty Jacobian); "
        "from tf-nightly 2.23.0.dev20261010 it compiles and gives the empty Jacobian (bisected)",
        link=TF_JACOBIAN,
    ),
    *expect_keys(
        [f"numpy-round-trip[{how}]" for how in ROUND_TRIPS],
        raises("TracerArrayConversionError", r"__array__|numpy"),
        framework="jax",
        reason="jax.vjp traces the function: a tracer refuses conversion to a NumPy array "
        "(TracerArrayConversionError), eagerly and under jit alike",
        link=JAX_TRACER_CONVERSION,
    ),
    *expect_keys(
        [f"numpy-round-trip[{how}]" for how in ROUND_TRIPS],
        raises("RuntimeError", r"Can't call numpy\(\) on Tensor that requires grad"),
        framework="torch",
        reason="a tensor that requires grad refuses .numpy() and NumPy's __array__ conversion ('Use "
        "tensor.detach().numpy() instead'), so the loss cannot silently leave the graph",
        link=TORCH_NUMPY,
    ),
)


class NumpyRoundTrip(Program):
    """sin computed by NumPy inside the differentiated function, as a user's loss term."""

    def tensorflow(tf, x, *, how):
        if how == "whole":
            return tf.convert_to_tensor(np.sin(x.numpy()))
        if how == "partial":
            return x * tf.convert_to_tensor(np.sin(x.numpy()))
        return x * np.sin(x)

    def jax(jax, x, *, how):
        if how == "whole":
            return jax.numpy.asarray(np.sin(np.asarray(x)))
        if how == "partial":
            return x * jax.numpy.asarray(np.sin(np.asarray(x)))
        return x * np.sin(x)

    def torch(torch, x, *, how):
        if how == "whole":
            return torch.as_tensor(np.sin(x.numpy()))
        if how == "partial":
            return x * torch.as_tensor(np.sin(x.numpy()))
        return x * np.sin(x)


def round_trip_kind(grad, x, w, how) -> str:
    """``closed-form`` (the true derivative), ``numpy-constant`` (the NumPy term's derivative
    dropped), ``none``, or ``other``."""
    if grad is None:
        return "none"
    x64, w64 = np.asarray(x, np.float64), np.asarray(w, np.float64)
    true = np.cos(x64) * w64 if how == "whole" else (np.sin(x64) + x64 * np.cos(x64)) * w64
    if cmp.near(grad, true):
        return "closed-form"
    if how != "whole" and cmp.near(grad, np.sin(x64) * w64):
        return "numpy-constant"
    return "other"


@st.composite
def positives(draw, *, shape=(2, 3), lo=0.25, hi=1.5):
    """(x, w) of one drawn dtype with lo <= x <= hi and 1/2 <= w <= 2: x cos x > 0 and w != 0 everywhere,
    so a dropped NumPy term shows in every element."""
    d = draw(ss.float_dtypes(), label="dtype")
    x = draw(ss.float_arrays(dtype=d, shape=shape, min_value=lo, max_value=hi), label="x")
    return x, draw(ss.float_arrays(dtype=d, shape=shape, min_value=0.5, max_value=2.0), label="w")


@given(xw=positives(), how=st.sampled_from(ROUND_TRIPS))
def test_numpy_round_trip_inside_the_tape(subject, record, xw, how):
    """A NumPy round trip inside the differentiated function: refused, or silently a constant."""
    x, w = xw
    record.example(x=x, w=w, how=how)
    try:
        _, (grad,) = subject.vjp(NumpyRoundTrip.of(subject), x, cotangent=w, how=how)
    except Exception as e:  # the refusals are the observations
        record.check(EXPECT, **{f"numpy-round-trip[{how}]": cmp.error_name(e)})
        return
    record.check(EXPECT, **{f"numpy-round-trip[{how}]": round_trip_kind(grad, x, w, how)})


# ---------------------------------------------------------------- stop_gradient in an inner function
@functools.cache
def _inner_tf(tf):
    """One inner tf.function per process: traced once per signature, not per example."""
    return tf.function(lambda v: v + tf.stop_gradient(tf.round(v) - v))


@functools.cache
def _inner_jax(jax):
    return jax.jit(lambda v: v + jax.lax.stop_gradient(jax.numpy.round(v) - v))


class InnerStop(Program):
    """ste(x) * x with the straight-through estimator computed by an inner function."""

    def tensorflow(tf, x):
        return _inner_tf(tf)(x) * x

    def jax(jax, x):
        return _inner_jax(jax)(x) * x

    def torch(torch, x):  # no function boundary: the control
        return (x + (torch.round(x) - x).detach()) * x


def inner_stop_kind(grad, x, w) -> str:
    """``closed-form`` ((x + round x) w: the stop held), ``stop-ignored`` (round(x) w: the
    estimator differentiated as round), ``none`` or ``other``."""
    if grad is None:
        return "none"
    x64, w64 = np.asarray(x, np.float64), np.asarray(w, np.float64)
    if cmp.near(grad, (x64 + np.round(x64)) * w64):
        return "closed-form"
    if cmp.near(grad, np.round(x64) * w64):
        return "stop-ignored"
    return "other"


@given(xw=positives(lo=0.25, hi=3.0))
def test_stop_gradient_inside_an_inner_function(subject, oracles, record, xw):
    """An inner tf.function's stop_gradient holds under the outer tape: d/dx [ste(x) x] = x + round(x)."""
    x, w = xw
    record.example(x=x, w=w)
    out, (grad,) = subject.vjp(InnerStop.of(subject), x, cotangent=w)
    # elementwise, no cancellation (x, round x >= 0 and w > 0): each element held relatively, at its own
    # magnitude (round(x) x is one product; the gradient round(x) w + x w two positive ones)
    x64, w64 = np.asarray(x, np.float64), np.asarray(w, np.float64)
    scale = {"value": np.abs(np.round(x64) * x64), "grad": np.abs((x64 + np.round(x64)) * w64)}
    record.close(name="value", out=out, ref=np.round(x) * x, oracle="closed-form", tol=cmp.VALUE, scale=scale["value"])
    record.check(EXPECT, **{"inner-function-stop-gradient": inner_stop_kind(grad, x, w)})
    record.against(oracles, InnerStop, x, cotangent=w, got={"value": out, "grad": grad}, scale=scale)


# ---------------------------------------------------------------- tape.jacobian, pfor on and off
K2 = (np.arange(9.0).reshape(3, 3, 1, 1) - 4.0) / 8.0
K1 = (np.arange(12.0).reshape(3, 2, 2) - 6.0) / 8.0
B = np.array([0.5, -1.0, 2.0])
W = np.array([[0.5, -1.0], [1.5, 0.25], [-0.75, 1.0]])
#: the LSTM's input and recurrent kernels and bias, gates in Keras' order (input, forget, cell, output)
LSTM_X = (np.arange(16.0).reshape(2, 8) - 7.5) / 10.0
LSTM_H = (np.arange(16.0)[::-1].reshape(2, 8) - 7.5) / 12.0
LSTM_B = np.array([0.1, -0.1, 0.2, 0.0, 0.5, 0.5, -0.2, 0.1])


def _lstm_step(h, c, xt, const, sigmoid, tanh, split):
    """One LSTM step in any framework: ``const(k)`` (a NumPy constant as the framework's array of
    the input's dtype) and ``split(z)`` (four gates) are its spellings; ``@`` is each one's matmul."""
    i, f, g, o = split(xt @ const(LSTM_X) + h @ const(LSTM_H) + const(LSTM_B))
    c = sigmoid(f) * c + sigmoid(i) * tanh(g)
    return sigmoid(o) * tanh(c), c


def _lstm_numpy(x):
    h = c = np.zeros_like(x[:, 0, :])
    out = []
    for t in range(x.shape[1]):
        h, c = _lstm_step(h, c, x[:, t, :], lambda k: k, lambda v: 1 / (1 + np.exp(-v)), np.tanh,
                          lambda z: np.split(z, 4, axis=-1))  # fmt: skip
        out.append(h)
    return np.stack(out, axis=1)


def _layer_numpy(x, layer):
    """Each layer in float64 NumPy (SAME padding as the frameworks')."""
    x = np.asarray(x, np.float64)
    if layer == "dilated-conv2d":
        xp = np.pad(x, ((0, 0), (2, 2), (2, 2), (0, 0)))
        out = np.zeros_like(x)
        for a in range(3):
            for b in range(3):
                out += K2[a, b, 0, 0] * xp[:, 2 * a : 2 * a + 5, 2 * b : 2 * b + 5, :]
        return out
    if layer == "conv1d":
        xp = np.pad(x, ((0, 0), (1, 1), (0, 0)))
        return sum(xp[:, k : k + 6, :] @ K1[k] for k in range(3))
    if layer == "leaky-relu":
        return np.where(x > 0, x, 0.2 * x)
    if layer == "broadcast-binary":
        return x * B + x[:, :1]
    if layer == "lstm":
        return _lstm_numpy(x)
    return np.tanh(x @ W)


def _layer_tf(tf, x, layer):
    if layer == "dilated-conv2d":
        return tf.nn.conv2d(x, tf.constant(K2, x.dtype), strides=1, padding="SAME", dilations=2)
    if layer == "conv1d":
        return tf.nn.conv1d(x, tf.constant(K1, x.dtype), stride=1, padding="SAME")
    if layer == "leaky-relu":
        return tf.nn.leaky_relu(x, alpha=0.2)
    if layer == "broadcast-binary":
        return x * tf.constant(B, x.dtype) + x[:, :1]
    if layer == "lstm":

        def step(carry, xt):
            const = lambda k: tf.constant(k, x.dtype)  # noqa: E731
            return _lstm_step(*carry, xt, const, tf.sigmoid, tf.tanh, lambda z: tf.split(z, 4, axis=-1))

        zero = tf.zeros_like(x[:, 0, :])
        return tf.transpose(tf.scan(step, tf.transpose(x, [1, 0, 2]), initializer=(zero, zero))[0], [1, 0, 2])
    return tf.tanh(tf.linalg.matmul(x, tf.constant(W, x.dtype)))


def _layer_jax(jax, x, layer):
    jnp, lax = jax.numpy, jax.lax
    if layer == "dilated-conv2d":
        dims = ("NHWC", "HWIO", "NHWC")
        return lax.conv_general_dilated(x, jnp.asarray(K2, x.dtype), (1, 1), "SAME", rhs_dilation=(2, 2),
                                        dimension_numbers=dims)  # fmt: skip
    if layer == "conv1d":
        return lax.conv_general_dilated(
            x, jnp.asarray(K1, x.dtype), (1,), "SAME", dimension_numbers=("NWC", "WIO", "NWC")
        )
    if layer == "leaky-relu":
        return jax.nn.leaky_relu(x, negative_slope=0.2)
    if layer == "broadcast-binary":
        return x * jnp.asarray(B, x.dtype) + x[:, :1]
    if layer == "lstm":

        def step(carry, xt):
            const = lambda k: jnp.asarray(k, x.dtype)  # noqa: E731
            h, c = _lstm_step(*carry, xt, const, jax.nn.sigmoid, jnp.tanh, lambda z: jnp.split(z, 4, axis=-1))
            return (h, c), h

        zero = jnp.zeros_like(x[:, 0, :])
        return jnp.swapaxes(lax.scan(step, (zero, zero), jnp.swapaxes(x, 0, 1))[1], 0, 1)
    return jnp.tanh(x @ jnp.asarray(W, x.dtype))


def _layer_torch(torch, x, layer):
    F = torch.nn.functional
    if layer == "dilated-conv2d":
        k = torch.as_tensor(K2, dtype=x.dtype).permute(3, 2, 0, 1)
        return F.conv2d(x.permute(0, 3, 1, 2), k, padding="same", dilation=2).permute(0, 2, 3, 1)
    if layer == "conv1d":
        k = torch.as_tensor(K1, dtype=x.dtype).permute(2, 1, 0)
        return F.conv1d(x.permute(0, 2, 1), k, padding="same").permute(0, 2, 1)
    if layer == "leaky-relu":
        return F.leaky_relu(x, negative_slope=0.2)
    if layer == "broadcast-binary":
        return x * torch.as_tensor(B, dtype=x.dtype) + x[:, :1]
    if layer == "lstm":
        const = lambda k: torch.as_tensor(k, dtype=x.dtype)  # noqa: E731
        h = c = torch.zeros_like(x[:, 0, :])
        out = []
        for t in range(x.shape[1]):
            h, c = _lstm_step(h, c, x[:, t, :], const, torch.sigmoid, torch.tanh, lambda z: torch.chunk(z, 4, dim=-1))
            out.append(h)
        return torch.stack(out, dim=1)
    return torch.tanh(x @ torch.as_tensor(W, dtype=x.dtype))


class LayerJacobian(Program):
    """The full Jacobian dy/dx of a layer: TF ``tape.jacobian`` with pfor on (``pfor``) or off
    (``while``: one gradient per output in a while loop, on a persistent tape), ``jax.jacrev``,
    ``torch.func.jacrev``."""

    def tensorflow(tf, x, *, layer, how):
        with tf.GradientTape(persistent=how != "pfor") as tape:
            tape.watch(x)
            y = _layer_tf(tf, x, layer)
        return tape.jacobian(y, x, experimental_use_pfor=how == "pfor")

    def jax(jax, x, *, layer, how):
        return jax.jacrev(lambda v: _layer_jax(jax, v, layer))(x)

    def torch(torch, x, *, layer, how):
        return torch.func.jacrev(lambda v: _layer_torch(torch, v, layer))(x)


def reference_jacobian(x, layer) -> np.ndarray:
    """Central differences of the float64 layer, one input element at a time (exact for the
    linear layers up to rounding; the drawn inputs keep 1/8 away from leaky ReLU's kink)."""
    x = np.asarray(x, np.float64)
    y = _layer_numpy(x, layer)
    jac = np.zeros(y.shape + x.shape)
    h = 1e-6
    for idx in np.ndindex(*x.shape):
        e = np.zeros_like(x)
        e[idx] = h
        jac[(Ellipsis, *idx)] = (_layer_numpy(x + e, layer) - _layer_numpy(x - e, layer)) / (2 * h)
    return jac


@st.composite
def layer_inputs(draw):
    """(layer, x): float32, 1/8 <= |x| <= 2 with drawn signs (off leaky ReLU's kink)."""
    layer = draw(st.sampled_from(sorted(JAC_LAYERS)), label="layer")
    shape = JAC_LAYERS[layer]
    mag = draw(ss.float_arrays(dtype=np.float32, shape=shape, min_value=0.125, max_value=2.0), label="|x|")
    sign = draw(ss.arrays(np.bool_, shape), label="sign")
    return layer, np.where(sign, -mag, mag).astype(np.float32)


def _explicit(layer):
    """A fixed input of ``layer``'s shape: 1/8 .. 2 in magnitude, alternating in sign."""
    shape = JAC_LAYERS[layer]
    n = int(np.prod(shape))
    v = (0.125 + 1.875 * np.arange(n) / max(n - 1, 1)) * np.where(np.arange(n) % 2, -1.0, 1.0)
    return layer, v.reshape(shape).astype(np.float32)


def _every_layer(test):
    """Every layer with pfor on and off as an explicit example: no key waits for a draw."""
    for layer in reversed(sorted(JAC_LAYERS)):
        for how in ("while", "pfor"):
            test = example(lx=_explicit(layer), how=how)(test)
    return test


@_every_layer
@given(lx=layer_inputs(), how=st.sampled_from(["pfor", "while"]))
def test_jacobian_of_layers_with_pfor_on_and_off(subject, oracles, record, lx, how):
    """tape.jacobian over a menu of layers, vectorised (pfor) and in a while loop: the float64 Jacobian."""
    layer, x = lx
    record.example(layer=layer, x=x, how=how)
    key = f"jacobian[{layer}|{how}]"
    try:
        jac = subject.run(LayerJacobian.of(subject), x, layer=layer, how=how)
    except Exception as e:  # a refusal is the observation
        record.check(EXPECT, **{key: cmp.error_name(e)})
        return
    ref = reference_jacobian(x, layer)
    record.check(EXPECT, **{key: "closed-form" if cmp.near(jac, ref, factor=5.0) else "other"})
    # an elementwise layer's Jacobian has one exact constant per entry (1, 0.2, B_j, B_0 + 1 or 0), no sum:
    # held per element; the others' entries mix the input (an array-level floor)
    scale = np.abs(ref) if layer in ELEMENTWISE_LAYERS else None
    record.close(name=f"jacobian[{layer}]", out=jac, ref=ref.astype(np.float32), oracle="float64-differences",
                 tol=cmp.FINITE_DIFF, scale=scale)  # fmt: skip
    record.against(oracles, LayerJacobian, x, layer=layer, how=how, got={f"jacobian[{layer}]": jac}, scale=scale)


# ---------------------------------------------------------------- a gradient penalty through a resize
#: an 8x8 one-channel image downscaled to 3x5 (bilinear, half-pixel centres), and the critic's weights
PENALTY_IMAGE, PENALTY_OUT = (1, 8, 8, 1), (3, 5)
CRITIC = (np.arange(15.0).reshape(1, 3, 5, 1) - 7.0) / 5.0
RESIZES = ("image-resize", "keras-resizing")


MH, MW = triangle(8, 3), triangle(8, 5)  # bilinear: the triangle of radius one input pixel


@functools.cache
def _keras_resizing(tf):
    return tf.keras.layers.Resizing(*PENALTY_OUT, interpolation="bilinear")


class ResizePenalty(Program):
    """A critic's gradient penalty through a downscaling resize, ``P(x) = sum(g^2)`` with
    ``g = d/dx sum(tanh(a * resize(x)))``, so dP/dx differentiates resize's own gradient."""

    def tensorflow(tf, x, *, how):
        resize = _keras_resizing(tf) if how == "keras-resizing" else (lambda v: tf.image.resize(v, PENALTY_OUT))
        with tf.GradientTape() as inner:
            inner.watch(x)
            critic = tf.reduce_sum(tf.tanh(tf.constant(CRITIC, x.dtype) * resize(x)))
        g = inner.gradient(critic, x)
        return tf.reduce_sum(g * g)

    def jax(jax, x, *, how):
        jnp = jax.numpy

        def critic(v):
            y = jax.image.resize(v, (1, *PENALTY_OUT, 1), "linear", antialias=False)
            return jnp.sum(jnp.tanh(jnp.asarray(CRITIC, v.dtype) * y))

        g = jax.grad(critic)(x)
        return jnp.sum(g * g)

    def torch(torch, x, *, how):
        f = torch.nn.functional
        y = f.interpolate(x.permute(0, 3, 1, 2), size=PENALTY_OUT, mode="bilinear", align_corners=False)
        critic = torch.tanh(torch.as_tensor(CRITIC, dtype=x.dtype) * y.permute(0, 2, 3, 1)).sum()
        (g,) = torch.autograd.grad(critic, x, create_graph=True)
        return (g * g).sum()


def penalty_scales(x, w) -> np.ndarray:
    """Per element, the magnitude of the terms :func:`penalty_gradient` rounds, float64: tanh's
    second derivative -2 t (1 - t^2) is formed from terms of magnitude 1 ((1 - t)(1 + t)
    differentiated, as JAX's tanh rule does: the op table's tanh Terms), so its rounding is
    absolute at 1, not relative to t. On a small image (t -> 0) the gradient is ~t, and JAX's
    float32 result carries eps-sized absolute errors (measured: 60 units on a constant 1/256
    image, 20% at values of 1e-7; PyTorch's tanh rule keeps them relative)."""
    x = np.asarray(x, np.float64)[0, :, :, 0]
    a = np.abs(CRITIC[0, :, :, 0])
    t = np.tanh(CRITIC[0, :, :, 0] * (MH @ x @ MW.T))
    g = np.abs(MH).T @ (a * (1 + t * t)) @ np.abs(MW)
    dy = (np.abs(MH) @ (2 * g) @ np.abs(MW).T) * (2 * a * a * (1 + np.abs(t) * (1 + t * t)))
    return (abs(float(w)) * (np.abs(MH).T @ dy @ np.abs(MW)))[None, :, :, None]


def penalty_gradient(x, w) -> np.ndarray:
    """dP/dx times the cotangent w, in float64: with y = Mh x Mw^T, t = tanh(a y), c = a (1 - t^2)
    and g = Mh^T c Mw, dP/dy = Mh (2 g) Mw^T * (-2 a^2 t (1 - t^2)) and dP/dx = Mh^T dP/dy Mw."""
    x = np.asarray(x, np.float64)[0, :, :, 0]
    a = CRITIC[0, :, :, 0]
    t = np.tanh(a * (MH @ x @ MW.T))
    g = MH.T @ (a * (1 - t * t)) @ MW
    dy = (MH @ (2 * g) @ MW.T) * (-2 * a * a * t * (1 - t * t))
    return (float(w) * (MH.T @ dy @ MW))[None, :, :, None]


@st.composite
def images(draw):
    """(x, w): a float32 image in [-1, 1] and a scalar cotangent in [1/2, 2]."""
    x = draw(ss.float_arrays(dtype=np.float32, shape=PENALTY_IMAGE, min_value=-1.0, max_value=1.0), label="x")
    return x, np.float32(draw(st.floats(0.5, 2.0, width=32), label="w"))


EXPECT_PENALTY = expectations(
    {f"gradient-penalty[{how}]": "closed-form" for how in RESIZES},
    *expect_keys(
        [f"gradient-penalty[{how}]" for how in RESIZES],
        "none",
        framework="tensorflow",
        versions=">=2.18",
        reason="ResizeBilinearGrad is registered NotDifferentiable, so the penalty, which reaches x only through "
        "resize's own gradient, has no gradient at all: TensorFlow returns None, silently, in every mode, and a "
        "WGAN-GP critic on resized images trains without its penalty (Keras Resizing calls tf.image.resize); JAX's "
        "and PyTorch's resizes are linear ops whose gradients differentiate again",
        link=TF_IMAGE_GRAD,
    ),
    *[
        e
        for how in RESIZES
        for e in ops.missing_gradient(
            how,
            ("gradient-penalty",),
            r"ResizeBilinearGrad",
            versions="<2.18",
            reason="before TF 2.18 ResizeBilinearGrad has no gradient registered at all, so differentiating a "
            "gradient penalty through a bilinear resize raises 'gradient registry has no entry for: "
            "ResizeBilinearGrad' (LookupError; StagingError where a function is traced)",
            link=TF_RESIZE_GRAD_GRAD,
        )
    ],
)
PENALTY_EXAMPLE = (np.linspace(-1.0, 1.0, 64, dtype=np.float32).reshape(PENALTY_IMAGE), np.float32(1.0))


@example(xw=PENALTY_EXAMPLE, how="keras-resizing")
@example(xw=PENALTY_EXAMPLE, how="image-resize")
@given(xw=images(), how=st.sampled_from(RESIZES))
def test_gradient_penalty_through_a_resize(subject, oracles, record, xw, how):
    """d/dx of a gradient penalty through tf.image.resize and Keras Resizing (a WGAN-GP critic on a
    downscaled image): the float64 closed form, or TensorFlow's missing second derivative."""
    x, w = xw
    record.example(x=x, w=w, how=how)
    key = f"gradient-penalty[{how}]"
    try:
        penalty, (grad,) = subject.vjp(ResizePenalty.of(subject), x, cotangent=w, how=how)
    except Exception as e:  # a refusal is the observation
        record.check(EXPECT_PENALTY, **{key: cmp.error_name(e)})
        return
    ref, at = penalty_gradient(x, w), penalty_scales(x, w)
    near = grad is not None and cmp.rel_err(grad, ref, scale=at, dtype=x.dtype) <= cmp.GRAD.of(x.dtype)
    record.check(EXPECT_PENALTY, **{key: "closed-form" if near else cmp.which(grad, {})})
    if near:
        record.close(name="penalty-grad", out=grad, ref=ref.astype(np.float32), oracle="closed-form", scale=at)
        record.against(oracles, ResizePenalty, x, cotangent=w, how=how, got={"penalty": penalty, "grad": grad},
                       scale={"grad": at})  # fmt: skip


# ---------------------------------------------------------------- a compiler's algebra at an overflow
#: log(exp(x)) where exp overflows (x = 89: exp(x) = inf in float32), underflows (x = -104: exp(x) = 0)
#: and neither (x = 1)
REWRITE_POINTS = {"overflow": 89.0, "underflow": -104.0, "normal": 1.0}


class LogExp(Program):
    """log(exp(x)), op by op: inf where exp overflows, -inf where it underflows to 0."""

    def tensorflow(tf, x):
        return tf.math.log(tf.exp(x))

    def jax(jax, x):
        return jax.numpy.log(jax.numpy.exp(x))

    def torch(torch, x):
        return torch.log(torch.exp(x))


def rewrite_value(v, x) -> str:
    """``inf``/``-inf`` (IEEE, op by op), ``x`` (log(exp(x)) within a few ulp of x, or folded to
    x), or ``other``."""
    if np.isinf(v):
        return "inf" if v > 0 else "-inf"
    return "x" if abs(float(v) - float(x)) <= 4 * abs(np.spacing(np.float32(x))) else "other"


def rewrite_grad(g) -> str:
    """``nan`` (exp(x) / exp(x) at inf or 0, op by op), ``one`` (the folded identity's), or ``other``."""
    if g is None:
        return "none"
    return "nan" if np.isnan(g) else "one" if g == 1.0 else "zero" if g == 0.0 else "other"


EXPECT_REWRITE = expectations(
    {
        "log-exp[overflow|value]": "inf",
        "log-exp[overflow|grad]": "nan",
        "log-exp[underflow|value]": "-inf",
        "log-exp[underflow|grad]": "nan",
        "log-exp[normal|value]": "x",
        "log-exp[normal|grad]": "one",
    },
    *expect_keys(
        ["log-exp[overflow|value]", "log-exp[underflow|value]"],
        "x",
        framework="tensorflow",
        mode="xla",
        versions=f"<{XLA_LOG_EXP_FROM}",
        reason="XLA's algebraic simplifier folds log(exp(x)) to x, so exp's overflow (inf) and underflow (0, "
        "log 0 = -inf) vanish from the value; the gradient, built from exp's and log's own derivatives, keeps "
        "IEEE's NaN (measured): value and gradient no longer agree; from tf-nightly 2.22.0.dev20260731 XLA keeps "
        "the inf and -inf (bisected)",
        link=XLA_INVERSE_PAIRS,
    ),
    *expect_keys(
        ["log-exp[overflow|value]", "log-exp[underflow|value]"],
        "x",
        framework="jax",
        mode="jit",
        reason="under jax.jit XLA's algebraic simplifier folds log(exp(x)) to x (eager JAX runs the two ops "
        "apart and gives inf and -inf); the gradient, from the jvp rules of exp and log, keeps the NaN (measured)",
        link=JAX_LOG_EXP,
    ),
)


def test_log_exp_at_an_overflow_is_not_folded_away(subject, record):
    """d/dx log(exp(x)) where exp(x) overflows or underflows: op by op inf and NaN, as IEEE
    arithmetic gives; a compiler that folds log(exp(x)) to x gives x and 1 (openxla/xla#42732)."""
    x = np.array(list(REWRITE_POINTS.values()), np.float32)
    record.example(x=x)
    out, (grad,) = subject.vjp(LogExp.of(subject), x, cotangent=np.ones_like(x))
    out, grad = np.asarray(out), np.asarray(grad)
    for i, point in enumerate(REWRITE_POINTS):
        record.check(EXPECT_REWRITE, **{f"log-exp[{point}|value]": rewrite_value(out[i], x[i])})
        record.check(EXPECT_REWRITE, **{f"log-exp[{point}|grad]": rewrite_grad(grad[i])})


# ---------------------------------------------------------------- tf.where against a row mean (tensorflow#118713)
#: the issue's inputs: rows of a linspace, whose middle element is each row's mean up to rounding
WHERE_INPUTS = (np.linspace(-1.0, 1.0, 15, dtype=np.float32).reshape(3, 5),
                np.linspace(-2.0, 2.0, 30, dtype=np.float32).reshape(6, 5))  # fmt: skip


class WhereAtMean(Program):
    """``where(x > mean of its row, sin x, cos x)``: at a near-tie the branch depends on how the mean
    was rounded, which differs between TensorFlow's kernel, XLA, JAX, PyTorch and NumPy."""

    def tensorflow(tf, x):
        return tf.where(x > tf.reduce_mean(x, axis=1, keepdims=True), tf.sin(x), tf.cos(x))

    def jax(jax, x):
        jnp = jax.numpy
        return jnp.where(x > jnp.mean(x, axis=1, keepdims=True), jnp.sin(x), jnp.cos(x))

    def torch(torch, x):
        return torch.where(x > x.mean(dim=1, keepdim=True), torch.sin(x), torch.cos(x))


def where_kind(x, y, grad, w) -> str:
    """``own-mask``: the gradient is w * (cos x or -sin x) by the branch the value itself took
    (read from the value), ``other-mask`` (a branch the value did not take somewhere), or ``other``."""
    x64, y64, w64 = (np.asarray(a, np.float64) for a in (x, y, w))
    took_sin = np.abs(y64 - np.sin(x64)) < np.abs(y64 - np.cos(x64))
    own = w64 * np.where(took_sin, np.cos(x64), -np.sin(x64))
    if cmp.near(grad, own):
        return "own-mask"
    flipped = w64 * np.where(took_sin, -np.sin(x64), np.cos(x64))
    return "other-mask" if np.all(np.isclose(grad, own) | np.isclose(grad, flipped)) else "other"


EXPECT_WHERE = expectations({"where-at-row-mean": "own-mask"})


@example(x=WHERE_INPUTS[1])
@example(x=WHERE_INPUTS[0])
@given(x=st.sampled_from(WHERE_INPUTS))
def test_where_gradient_follows_the_branch_its_value_took(subject, record, x):
    """tensorflow#118713's program, with its two batch sizes through one function (a shape-polymorphic
    trace where the runner relaxes the shape): the gradient agrees with the value's own branch at every
    element, near-ties included, in every mode; which branch a near-tie takes is the mean's rounding."""
    w = np.linspace(0.17, 1.13, x.size, dtype=np.float32).reshape(x.shape)
    record.example(x=x, w=w)
    y, (grad,) = subject.vjp(WhereAtMean.of(subject), x, cotangent=w)
    record.check(EXPECT_WHERE, **{"where-at-row-mean": where_kind(x, y, grad, w)})
