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

Second order through ``tf.image.resize`` is image-resize-gradients' (its ``second[...]`` rows).
"""

import functools

import numpy as np
from hypothesis import given, strategies as st

from suite import compare as cmp, ops, strategies as ss
from suite.behaviours import behaviour
from suite.expectations import expect, expect_keys, expectations, raises
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
    ],
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
EXPECT = expectations(
    {
        # TensorFlow's eager tape: NumPy's value is a constant it never saw
        "numpy-round-trip[whole]": "none",
        "numpy-round-trip[partial]": "numpy-constant",
        "numpy-round-trip[ufunc]": "numpy-constant",
        "inner-function-stop-gradient": "closed-form",
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
    record.close(name="value", out=out, ref=np.round(x) * x, oracle="closed-form", tol=cmp.VALUE)
    record.check(EXPECT, **{"inner-function-stop-gradient": inner_stop_kind(grad, x, w)})
    record.against(oracles, InnerStop, x, cotangent=w, got={"value": out, "grad": grad})
