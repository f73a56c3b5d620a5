"""Second-order gradients: nested tapes, tf.gradients of tf.gradients, double backprop, Hessians.

Source: seeds/002. Question 4 of "taking the gradient in Tensorflow": a loss that uses
the partial derivative of the network with respect to its input ``x`` (a placeholder),
optimised with respect to the weights, "will bring second order derivative" — double
backprop. The answer: "there is no real difference between a placeholder and any other
operation". "Non-Convex Loss Function": for ``y = w1*tanh(w2*x)`` the seed gives
``first_deriv = w1*w2*sech^2(w2*x)`` and ``second_deriv = some_const*sech^2(w2*x)*tanh(w2*x)``;
derived exactly, ``d2y/dx2 = -2*w1*w2^2*sech^2(w2*x)*tanh(w2*x)``. sech^2 > 0, so the
sign follows ``-w1*tanh(w2*x)`` and flips across x = 0: not convex everywhere. The
seed's edit asks for the 2x2 Hessian in (w1, w2): ``[[0, x*s], [x*s, -2*w1*x^2*s*t]]``
(s = sech^2(w2*x), t = tanh(w2*x)), whose determinant ``-(x*s)^2 < 0`` makes it
indefinite for every x != 0.

Second order through max_pool and fused batch norm (moved from tape-mechanics, issue 48).
Reverse over reverse through ``max_pool2d`` (2x2, no ties): ``2 w v`` at each window's maximum
for ``maxpool(x)^2``, zeros for ``maxpool(x)`` (piecewise linear); through training-mode
``fused_batch_norm`` / ``FusedBatchNormV3`` (float32, the fused kernels' dtype): the second
gradients in x, scale and offset against JAX's formula and PyTorch's ``batch_norm``, x's against
central differences of the float64 closed-form first derivative; max_pool's against differences
of the subject's own float64 first derivative.

Declared surprises: ``tf.gradients`` of ``tf.gradients`` is traced in a v1 graph, in
``tf.function`` and under XLA, but eagerly ``tf.gradients`` raises RuntimeError. Under XLA,
max_pool's second derivative (MaxPoolGradGrad) compiles for float32 only; a float64 one is
refused (tensorflow#11435).
"""

import numpy as np
from hypothesis import given, strategies as st

from suite import compare as cmp, facts, finite_diff, strategies as ss
from suite.behaviours import Floor, behaviour, on
from suite.expectations import expect, expectations, raises
from suite.frameworks.tf_runner import in_v1_graph
from suite.program import Program

MAX_POOL_ISSUE = "https://github.com/tensorflow/tensorflow/issues/11435"
TF_XLA_POOLING = (
    "https://github.com/tensorflow/tensorflow/blob/master/tensorflow/compiler/tf2xla/kernels/pooling_ops.cc"
)

BEHAVIOUR = behaviour(
    "second-order-gradients",
    sources=["002"],
    links=[
        "https://www.tensorflow.org/guide/advanced_autodiff#higher-order_gradients",
        "https://www.tensorflow.org/api_docs/python/tf/hessians",
        "https://docs.jax.dev/en/latest/_autosummary/jax.hessian.html",
        "https://docs.pytorch.org/docs/stable/generated/torch.autograd.functional.hessian.html",
        MAX_POOL_ISSUE,
        TF_XLA_POOLING,
    ],
    floor=Floor(
        "mixed",
        "Per element (seed_scales): the seed's first derivative w1 w2 (1 - t^2) and second derivative "
        "-2 w1 w2^2 (1 - t^2) t (times ct for dL/dx), t = tanh(w2 x), are elementwise in x, held at their terms "
        "with sech^2 = 1 at its largest: |w1 w2| and 2 |w1| w2^2 |ct| (1 - t^2 cancels at the magnitude of 1), "
        "capped at the inputs' magnitude they were held at before (capped), at GRAD. "
        "Array-level: dL/dw1 and dL/dw2 (sums over x), the network's (W x, W^T sums: net_scale), the 3x3 Hessian "
        "(each entry another formula of one point, at the largest of their terms) and the finite differences. "
        "max_pool's first and second gradients (one window's maximum per element: 2 w y or w, 2 w v or 0) per "
        "element at their own size; fused batch norm's (batch statistics) at their terms' size, an array floor.",
    ),
)

BN_SPELLINGS = {"tensorflow": ("compat.v1", "raw-v3"), "jax": ("formula",), "torch": ("functional",)}

EXPECT = expectations(
    {
        "double_backprop": "second-order",
        "sign_rule": "follows-tanh",
        "curvature": "sign-change",
        "curvature_left": "convex",
        "curvature_right": "concave",
        "weight_hessian": "indefinite",
        "tf_gradients": "available",
        **{f"max-pool-second-order[square|{d}]": "closed-form" for d in ("float32", "float64")},
        **{f"max-pool-second-order[linear|{d}]": "zero-closed-form" for d in ("float32", "float64")},
        **{f"fused-batch-norm-second-order[{s}]": "finite" for ss_ in BN_SPELLINGS.values() for s in ss_},
    },
    facts.tf_gradients_in_eager("tf_gradients"),
    expect(
        "max-pool-second-order[linear|float64]",
        "zero-closed-form",
        framework="tensorflow",
        mode="xla",
        device="cpu",
        versions=">=2.22.0.dev20260713",
        link=TF_XLA_POOLING,
        reason="from tf-nightly 2026-07-13 (measured on 2.23.0.dev20261026) the float64 second derivative of a "
        "linear max_pool "
        "compiles under jit_compile=True (zeros, the closed form); the square one still needs MaxPoolGradGrad, "
        "which XLA_CPU_JIT registers for float32 only",
    ),
    *[
        expect(
            f"max-pool-second-order[{how}|float64]",
            raises("InvalidArgumentError", r"No registered 'MaxPoolGradGrad' OpKernel for XLA_CPU_JIT"),
            framework="tensorflow",
            mode="xla",
            device="cpu",
            link=TF_XLA_POOLING,
            reason="XLA_CPU_JIT registers MaxPoolGradGrad (max_pool's second derivative) for float32 only: under "
            "jit_compile=True a float64 second derivative does not compile (measured; float32 compiles)",
        )
        for how in ("square", "linear")
    ],
)
# Every second derivative goes through sech^2 = 1 - tanh^2, which cancels in float32
# (absolute error ~eps where |w2*x| is large) and is then scaled by weights, inputs and
# cotangents up to ~100: a few 1e-5 between two float32 frameworks (seen: 2.3e-5, JAX
# against PyTorch, W x = 4, in the thorough profile).
# Only where a comparison's floor is set by the array or the inputs (the seed's sums over x, the
# network, the Hessian): the seed's elementwise derivatives are held at their own terms
# (seed_scales), at GRAD.
SECOND_TOL = cmp.tolerance(float32=1e-4)


# ---------------------------------------------------------------- strategies
# A scalar, a vector and a matrix, each with one dtype: few input signatures, so eager JAX
# and XLA compile few programs.
SIGNATURES = ss.dtypes_and_shapes(shapes=((), (3,), (2, 3)))


@st.composite
def seed_params(draw):
    """(w1, w2, x, ct) for y = w1*tanh(w2*x): 0-d weights, x of a small shape, ct like x."""
    d, shape = draw(SIGNATURES, label="dtype, shape")
    w1, w2 = (draw(ss.float_arrays(dtype=d, shape=(), min_value=-2, max_value=2), label=n) for n in ("w1", "w2"))
    x = draw(ss.float_arrays(dtype=d, shape=shape, min_value=-3, max_value=3), label="x")
    return w1, w2, x, draw(ss.like(x), label="cotangent")


@st.composite
def networks(draw):
    d, (m, n) = draw(ss.dtypes_and_shapes(shapes=((2, 3), (3, 1))), label="dtype, (hidden, inputs)")
    el = dict(dtype=d, min_value=-2, max_value=2)
    return (
        draw(ss.float_arrays(shape=(m, n), **el), label="W"),
        draw(ss.float_arrays(shape=(m,), **el), label="v"),
        draw(ss.float_arrays(shape=(n,), **el), label="x"),
        draw(ss.float_arrays(shape=(n,), **el), label="ct"),
    )


@st.composite
def hessian_points(draw):
    """p = (w1, w2, x) with x != 0, where the weight Hessian is indefinite."""
    d = draw(ss.float_dtypes())
    w = [draw(ss.scalars(dtype=d, min_value=-2, max_value=2), label=n) for n in ("w1", "w2")]
    x = draw(ss.scalars(dtype=d, min_value=-3, max_value=3, nonzero=True), label="x")
    return np.stack(w + [x])


# ---------------------------------------------------------------- the programs
# The inner differentiation of two: the harness's vjp (GradientTape / tf.gradients,
# jax.vjp, torch.autograd.grad) is the outer one.
def _tf_input_gradient(tf, f, x):
    """d sum(f(x))/dx: tf.gradients in a v1 graph, a (nested) GradientTape elsewhere."""
    if in_v1_graph():
        return tf.gradients(f(x), x)[0]
    with tf.GradientTape() as inner:
        inner.watch(x)
        y = f(x)
    return inner.gradient(y, x)


class FirstDeriv(Program):
    """seeds/002: first_deriv = d(w1*tanh(w2*x))/dx, to be differentiated again."""

    def tensorflow(tf, w1, w2, x):
        return _tf_input_gradient(tf, lambda x: w1 * tf.tanh(w2 * x), x)

    def jax(jax, w1, w2, x):
        return jax.grad(lambda x: jax.numpy.sum(w1 * jax.numpy.tanh(w2 * x)))(x)

    def torch(torch, w1, w2, x):
        return torch.autograd.grad((w1 * torch.tanh(w2 * x)).sum(), x, create_graph=True)[0]


class NetInputGradient(Program):
    """seeds/002 question 4: the input gradient of f = v . tanh(W x), used in a loss."""

    def tensorflow(tf, w, v, x):
        return _tf_input_gradient(tf, lambda x: tf.reduce_sum(v * tf.tanh(tf.linalg.matvec(w, x))), x)

    def jax(jax, w, v, x):
        return jax.grad(lambda x: v @ jax.numpy.tanh(w @ x))(x)

    def torch(torch, w, v, x):
        return torch.autograd.grad(v @ torch.tanh(w @ x), x, create_graph=True)[0]


class Hessian(Program):
    """Hessian of w1*tanh(w2*x) in p = (w1, w2, x)."""

    def tensorflow(tf, p):
        """tf.hessians in a v1 graph; the guide's nested tapes (outer.jacobian of
        inner.gradient) elsewhere. Eagerly the jacobian's pfor path traces a new tf.function
        per call (~0.5 s an example), so eager uses its while-loop path (persistent tape);
        function and xla keep pfor, the default."""
        if in_v1_graph():
            return tf.hessians(p[0] * tf.tanh(p[1] * p[2]), p)[0]
        eager = tf.executing_eagerly()
        with tf.GradientTape(persistent=eager) as outer:
            outer.watch(p)
            with tf.GradientTape() as inner:
                inner.watch(p)
                y = p[0] * tf.tanh(p[1] * p[2])
            g = inner.gradient(y, p)
        return outer.jacobian(g, p, experimental_use_pfor=not eager)

    def jax(jax, p):
        return jax.hessian(lambda p: p[0] * jax.numpy.tanh(p[1] * p[2]))(p)

    def torch(torch, p):
        return torch.autograd.functional.hessian(lambda p: p[0] * torch.tanh(p[1] * p[2]), p)


# First-order programs whose gradients (the subject's own vjp, run in float64) are differenced
# for the second order: an oracle that does not use the second backward pass.
class SeedFunction(Program):
    """y = w1*tanh(w2*x), differentiated once."""

    def tensorflow(tf, w1, w2, x):
        return w1 * tf.tanh(w2 * x)

    def jax(jax, w1, w2, x):
        return w1 * jax.numpy.tanh(w2 * x)

    def torch(torch, w1, w2, x):
        return w1 * torch.tanh(w2 * x)


class Net(Program):
    """f = v . tanh(W x), differentiated once."""

    def tensorflow(tf, w, v, x):
        return tf.reduce_sum(v * tf.tanh(tf.linalg.matvec(w, x)))

    def jax(jax, w, v, x):
        return v @ jax.numpy.tanh(w @ x)

    def torch(torch, w, v, x):
        return v @ torch.tanh(w @ x)


class Packed(Program):
    """y = p[0]*tanh(p[1]*p[2]), the Hessian's function, differentiated once."""

    def tensorflow(tf, p):
        return p[0] * tf.tanh(p[1] * p[2])

    def jax(jax, p):
        return p[0] * jax.numpy.tanh(p[1] * p[2])

    def torch(torch, p):
        return p[0] * torch.tanh(p[1] * p[2])


class GradientsOfGradients(Program):
    """The v1 spelling in any mode: (first_deriv, second_deriv) by tf.gradients twice."""

    def tensorflow(tf, w1, w2, x):
        g = tf.gradients(w1 * tf.tanh(w2 * x), x)[0]
        return g, tf.gradients(g, x)[0]


# ---------------------------------------------------------------- closed forms (float64)
def seed_closed(w1, w2, x, ct):
    """first_deriv, d2/dx2, and d/dw of L = sum(ct * first_deriv), split into the term
    through the explicit weights ("first-order-only") and the full second-order one."""
    w1, w2, x, ct = (np.asarray(a, np.float64) for a in (w1, w2, x, ct))
    t = np.tanh(w2 * x)
    s = 1 - t**2  # sech^2(w2 x)
    return dict(
        first=w1 * w2 * s,
        second=-2 * w1 * w2**2 * s * t,
        dw1=np.sum(ct * w2 * s),
        dw2=np.sum(ct * w1 * s * (1 - 2 * w2 * x * t)),
        dw2_first_only=np.sum(ct * w1 * s),
    )


def seed_scales(w1, w2, x, ct) -> dict:
    """Per-element scales (float64) of the seed's elementwise derivatives: their terms where
    sech^2 = 1 - tanh^2 cancels (an ulp of tanh near +-1 is ~eps absolute in sech^2), at s = |t| = 1:
    ``|w1 w2|`` for first_deriv, ``2 |w1| w2^2 |ct|`` for ct * d2y/dx2 (``second``: ct = 1). The sums
    over x, dL/dw1 = sum(ct w2 s) and dL/dw2 = sum(ct w1 s (1 - 2 w2 x t)), at the sum of their terms'
    magnitudes (one number each: they mix every element), ``sum |ct w2|`` and ``sum |ct w1| (1 + 2 |w2 x|)``:
    the inputs' magnitude missed that each term carries sech^2's rounding at 1 times |ct w1| (a dev draw,
    w1 = 1, w2 = x = ct = 2 in six elements: TF and JAX -0.112569, closed form -0.112554, 1.3e-4 apart
    relatively, 1.5 units of rounding of the terms' sum of 84)."""
    w1, w2, x, ct = (np.abs(np.asarray(a, np.float64)) for a in (w1, w2, x, ct))
    ones = np.ones_like(x)
    return dict(
        first=w1 * w2 * ones,
        second=2 * w1 * w2**2 * ones,
        dx=2 * w1 * w2**2 * ct * ones,
        dw1=float(np.sum(ct * w2 * ones)),
        dw2=float(np.sum(ct * w1 * (1 + 2 * w2 * x))),
    )


def capped(scale, ref, record):
    """Per-element ``scale`` no larger than the floor these comparisons had (``record.scale = "inputs"``:
    the inputs' magnitude or ``max |ref|``): no element is held more loosely than before."""
    old = max(record.input_scale(), float(np.max(np.abs(np.asarray(ref, np.float64)))))
    return np.minimum(np.asarray(scale, np.float64), old)


def net_closed(w, v, x, ct):
    """g = W^T (v*s); L = ct . g: dL/dW, dL/dv, dL/dx (= H ct) and dL/dW without tanh''."""
    w, v, x, ct = (np.asarray(a, np.float64) for a in (w, v, x, ct))
    t = np.tanh(w @ x)
    s = 1 - t**2
    u = w @ ct
    curv = u * v * (-2 * s * t)
    return dict(
        g=w.T @ (v * s),
        dw=np.outer(v * s, ct) + np.outer(curv, x),
        dv=u * s,
        dx=w.T @ curv,
        dw_first_only=np.outer(v * s, ct),
    )


def net_scale(w, v, x, ct) -> float:
    """The magnitude the network's second-order terms are summed from, where sech^2 = 1 - tanh^2
    cancels (an ulp of tanh near +-1 is an absolute error of ~eps in sech^2): dL/dW and dL/dv
    scale as |v| (|ct| + 2 |W ct| |x|), dL/dx as 2 |W| |W ct| |v|. Seen: float32 W x = 4.4,
    v = ct = 2, where TensorFlow and JAX differ by 8e-6 on 0.019, 1e-4 relative (2 ulps at that
    scale, beside the 32 a comparison allows)."""
    m = lambda a: float(np.max(np.abs(np.asarray(a, np.float64))))  # noqa: E731
    u = m(np.asarray(w, np.float64) @ np.asarray(ct, np.float64))
    return max(m(w), m(v), m(x), m(ct), m(v) * (m(ct) + 2 * u * m(x)), 2 * m(w) * u * m(v))


def hessian_closed(w1, w2, x):
    w1, w2, x = (np.float64(a) for a in (w1, w2, x))
    t = np.tanh(w2 * x)
    s = 1 - t**2
    mixed = w1 * s * (1 - 2 * w2 * x * t)
    return np.array(
        [[0.0, x * s, w2 * s], [x * s, -2 * w1 * x**2 * s * t, mixed], [w2 * s, mixed, -2 * w1 * w2**2 * s * t]]
    )


def differenced_hvp(subject, program, *arrays, along: int, v) -> list:
    """``H v`` by central differences (``finite_diff.hvp``) of the subject's own gradient of
    ``program`` (its vjp of sum(y), run in float64), moving input ``along`` in direction ``v``;
    one float64 product per input, shaped like it (row ``along`` of the Hessian's blocks).

    >>> dw, dv, dx = differenced_hvp(subject, Net, w, v, x, along=2, v=ct)  # doctest: +SKIP
    """
    fn = program.of(subject)
    base = [np.asarray(a, np.float64) for a in arrays]

    def gradient(z):
        _, grads = subject.vjp(fn, *base[:along], z, *base[along + 1 :])
        return np.concatenate([np.ravel(g) for g in grads])

    # a unit-sized direction: hvp's step is eps^(1/3) * max(1, |x|) along it
    s = max(1.0, float(np.max(np.abs(v)))) if np.size(v) else 1.0
    hv = finite_diff.hvp(gradient, base[along], np.asarray(v, np.float64) / s) * s
    parts = np.split(hv, np.cumsum([a.size for a in base])[:-1])
    return [part.reshape(a.shape) for part, a in zip(parts, base)]


# ---------------------------------------------------------------- observations
def double_backprop_kind(out, *, full, first_only, tol, scale=None) -> str:
    """``second-order``: the outer gradient has the term through tanh''; ``first-order-only``:
    the inner gradient's own dependence on the weights was lost; ``none``: unconnected."""
    if out is None:
        return "none"
    dtype = np.asarray(out).dtype
    if cmp.rel_err(out, full, rtol=tol, scale=scale, dtype=dtype) <= tol:
        return "second-order"
    first = cmp.rel_err(out, first_only, rtol=tol, scale=scale, dtype=dtype)
    return "first-order-only" if first <= tol else "other"


def curvature(d2) -> str:
    """``sign-change`` (neither convex nor concave), ``convex`` (all >= 0), ``concave``."""
    if d2 is None:
        return "none"
    d2 = np.asarray(d2)
    if (d2 > 0).any() and (d2 < 0).any():
        return "sign-change"
    return "convex" if (d2 >= 0).all() else "concave"


def definiteness(h) -> str:
    """2x2 symmetric block: det < 0 is ``indefinite`` (a saddle), else by the trace."""
    h = np.asarray(h, np.float64)
    det = h[0, 0] * h[1, 1] - h[0, 1] * h[1, 0]
    if det < 0:
        return "indefinite"
    return "convex" if h[0, 0] + h[1, 1] >= 0 else "concave"


# ---------------------------------------------------------------- properties
@given(p=seed_params())
def test_double_backprop_seed_function(subject, oracles, record, p):
    """L = sum(ct * dy/dx) for y = w1*tanh(w2*x), differentiated w.r.t. w1, w2 (double
    backprop) and x (ct * d2y/dx2): nested tapes / tf.gradients of tf.gradients."""
    w1, w2, x, ct = p
    record.example(w1=w1, w2=w2, x=x, ct=ct)
    record.scale = "inputs"  # tanh'' and sech^2 cancel where tanh saturates
    tol = SECOND_TOL.of(x.dtype)
    ref = seed_closed(w1, w2, x, ct)
    sc = seed_scales(w1, w2, x, ct)
    g, (dw1, dw2, dx) = subject.vjp(FirstDeriv.of(subject), w1, w2, x, cotangent=ct)
    record.check(
        EXPECT,
        double_backprop=double_backprop_kind(
            dw2, full=ref["dw2"], first_only=ref["dw2_first_only"], tol=tol, scale=sc["dw2"]
        ),
    )
    # sign(d2y/dx2) = sign(-w1*tanh(w2*x)) (sech^2 > 0), read off dL/dx = ct * d2y/dx2
    # where neither factor is near 0
    clear = (np.abs(ref["second"]) > 1e-3) & (np.abs(ct) > 1e-3)
    record.check(
        EXPECT,
        sign_rule="none"
        if dx is None
        else "follows-tanh"
        if np.array_equal(np.sign(dx)[clear], (np.sign(ct) * np.sign(-w1 * np.tanh(w2 * x)))[clear])
        else "other",
    )
    got = {"first_deriv": g, "dL/dw1": dw1, "dL/dw2": dw2, "dL/dx": dx}
    # the elementwise ones at their own terms (GRAD); the sums over x at the inputs' magnitude
    tols = {"first_deriv": cmp.GRAD, "dL/dw1": SECOND_TOL, "dL/dw2": SECOND_TOL, "dL/dx": cmp.GRAD}
    at = {
        "first_deriv": capped(sc["first"], ref["first"], record),
        "dL/dx": capped(sc["dx"], ct * ref["second"], record),
        "dL/dw1": sc["dw1"],
        "dL/dw2": sc["dw2"],
    }
    for name, want in zip(got, (ref["first"], ref["dw1"], ref["dw2"], ct * ref["second"])):
        close = dict(oracle="closed-form", dtype=x.dtype, tol=tols[name], scale=at.get(name))
        record.close(name=name, out=got[name], ref=want, **close)
    record.against(oracles, FirstDeriv, w1, w2, x, cotangent=ct, got=got, tol=tols, scale=at)
    # the second order against differences of the subject's own first derivative (float64);
    # PyTorch's spelling differentiates inputs that require grad, which only vjp() gives it
    second = {k: got[k] for k in ("dL/dw1", "dL/dw2", "dL/dx")}
    if subject.framework != "torch":
        record.finite_differences(subject, FirstDeriv, w1, w2, x, cotangent=ct, got=second)
    else:  # L = ct . grad_x sum(y): the Hessian of sum(y) along (0, 0, ct), from PyTorch's own gradient
        hv = differenced_hvp(subject, SeedFunction, w1, w2, x, along=2, v=ct)
        record.against_differences(second, label="hvp", refs=hv)


@given(n=networks())
def test_double_backprop_reaches_network_weights(subject, oracles, record, n):
    """seeds/002 q4: L = ct . grad_x(v . tanh(W x)); dL/dW includes the tanh'' term."""
    w, v, x, ct = n
    record.example(W=w, v=v, x=x, ct=ct)
    record.scale = net_scale(w, v, x, ct)  # tanh'' and sech^2 cancel where tanh saturates
    ref = net_closed(w, v, x, ct)
    g, (dw, dv, dx) = subject.vjp(NetInputGradient.of(subject), w, v, x, cotangent=ct)
    record.check(
        EXPECT,
        double_backprop=double_backprop_kind(
            dw,
            full=ref["dw"],
            first_only=ref["dw_first_only"],
            tol=SECOND_TOL.of(x.dtype),
            scale=record.scale,  # as the comparisons: sech^2 cancels where W x saturates tanh
        ),
    )
    got = {"g": g, "dw": dw, "dv": dv, "dx": dx}
    for name, out in got.items():
        record.close(name=name, out=out, ref=ref[name], oracle="closed-form", tol=SECOND_TOL, dtype=x.dtype)
    record.against(oracles, NetInputGradient, w, v, x, cotangent=ct, got=got, tol=SECOND_TOL)
    # L = ct . grad_x f is the Hessian of f along (0, 0, ct): differences of the subject's own gradient of f
    second = {k: got[k] for k in ("dw", "dv", "dx")}
    record.against_differences(second, label="hvp", refs=differenced_hvp(subject, Net, w, v, x, along=2, v=ct))


@given(p=hessian_points())
def test_hessian_matches_closed_form_and_weight_block_is_indefinite(subject, oracles, record, p):
    """3x3 Hessian of w1*tanh(w2*x) in (w1, w2, x) (tape.jacobian of tape.gradient, tf.hessians,
    jax.hessian, torch.autograd.functional.hessian); the (w1, w2) block is indefinite."""
    record.example(p=p)
    # sech^2 = 1 - tanh^2 cancels where tanh saturates: tanh's rounding (an ulp of 1) enters each
    # entry times its factors in (w1, w2, x), so the floor is at the entries' size where s = t = 1
    # (p = (2, 2, 2.96), float32: TF and JAX differ by 1.7e-5 on -1.0e-3, a few ulps of tanh(5.9))
    w1, w2, x = (abs(float(a)) for a in p)
    record.scale = max(record.input_scale(), x, w2, 2 * w1 * x * x, 2 * w1 * w2 * w2, w1 * (1 + 2 * w2 * x))
    h = subject.run(Hessian.of(subject), p)
    record.check(EXPECT, weight_hessian="none" if h is None else definiteness(np.asarray(h)[:2, :2]))
    record.close(name="hessian", out=h, ref=hessian_closed(*p), oracle="closed-form", tol=SECOND_TOL, dtype=p.dtype)
    record.against(oracles, Hessian, p, via="run", got={"hessian": h}, tol=SECOND_TOL)
    # column i is H e_i: differences of the subject's own gradient along each axis
    cols = [differenced_hvp(subject, Packed, p, along=0, v=e)[0] for e in np.eye(p.size)]
    record.against_differences({"hessian": h}, label="hvp", refs=[np.stack(cols, axis=1)])


@on("tensorflow")
@given(p=seed_params())
def test_tf_gradients_of_tf_gradients_in_every_mode(subject, record, p):
    """tf.gradients(tf.gradients(y, x), x) as the seed would write it, in every TF mode
    (TF-only: it is about the tf.gradients API): graph, function and xla trace it; eager raises."""
    w1, w2, x, _ = p
    record.example(w1=w1, w2=w2, x=x)
    record.scale = "inputs"  # tanh'' and sech^2 cancel where tanh saturates
    try:
        first, second = subject.run(GradientsOfGradients.of(subject), w1, w2, x)
    except Exception as e:  # eager: RuntimeError (declared); anything else fails the check
        record.check(EXPECT, tf_gradients=cmp.error_name(e))
        return
    record.check(EXPECT, tf_gradients="available")
    ref, at = seed_closed(w1, w2, x, np.ones_like(x)), seed_scales(w1, w2, x, np.ones_like(x))
    close = dict(oracle="closed-form", dtype=x.dtype)  # elementwise: at their own terms, GRAD
    record.close(
        name="first_deriv", out=first, ref=ref["first"], scale=capped(at["first"], ref["first"], record), **close
    )
    record.close(
        name="second_deriv", out=second, ref=ref["second"], scale=capped(at["second"], ref["second"], record), **close
    )


# ---------------------------------------------------------------- seed examples
@on("tensorflow", "jax", "torch")
@given(x=st.just(np.array([-2.0, -1.0, -0.5, 0.0, 0.5, 1.0, 2.0], np.float32)))
def test_seed_second_derivative_changes_sign_across_zero(subject, record, x):
    """seeds/002 at w1 = w2 = 1: first_deriv = sech^2(x), second_deriv = -2 sech^2(x) tanh(x):
    positive for x < 0, 0 at 0, negative for x > 0, so not convex everywhere."""
    w1, w2 = np.float32(1.0), np.float32(1.0)
    record.example(w1=w1, w2=w2, x=x)
    record.scale = "inputs"  # tanh'' and sech^2 cancel where tanh saturates
    first, (_, _, second) = subject.vjp(FirstDeriv.of(subject), w1, w2, x)
    record.check(EXPECT, curvature=curvature(second))
    record.check(
        EXPECT,
        curvature_left=curvature(None if second is None else second[x < 0]),
        curvature_right=curvature(None if second is None else second[x > 0]),
    )
    ref, at = seed_closed(w1, w2, x, np.ones_like(x)), seed_scales(w1, w2, x, np.ones_like(x))
    close = dict(oracle="closed-form", dtype=x.dtype)  # elementwise: at their own terms
    record.close(
        name="first_deriv", out=first, ref=ref["first"], scale=capped(at["first"], ref["first"], record), **close
    )
    record.close(
        name="second_deriv", out=second, ref=ref["second"], scale=capped(at["second"], ref["second"], record), **close
    )
    record.equal(
        name="sign(second_deriv)",
        out=np.sign(second),
        ref=np.sign(ref["second"]).astype(np.float32),
        oracle="closed-form",
    )
    record.observe(second_deriv=np.round(second.astype(np.float64), 3))


@on("tensorflow", "jax", "torch")
@given(p=st.just(np.array([1.0, 1.0, 1.0], np.float32)))
def test_seed_weight_hessian_at_one(subject, record, p):
    """seeds/002 edit, w1 = w2 = x = 1: the (w1, w2) Hessian [[0, sech^2 1], [sech^2 1,
    -2 sech^2(1) tanh 1]] = [[0, 0.420], [0.420, -0.640]] is indefinite; d2y/dx2 = -0.640."""
    record.example(p=p)
    record.scale = "inputs"  # tanh'' and sech^2 cancel where tanh saturates
    h = subject.run(Hessian.of(subject), p)
    record.check(EXPECT, weight_hessian="none" if h is None else definiteness(np.asarray(h)[:2, :2]))
    ref = hessian_closed(*p)
    record.close(name="hessian[w1,w2]", out=np.asarray(h)[:2, :2], ref=ref[:2, :2], oracle="closed-form", dtype=p.dtype)
    record.close(name="d2y/dx2", out=np.asarray(h)[2, 2], ref=ref[2, 2], oracle="closed-form", dtype=p.dtype)
    cols = [differenced_hvp(subject, Packed, p, along=0, v=e)[0] for e in np.eye(p.size)]
    record.against_differences({"hessian": h}, label="hvp", refs=[np.stack(cols, axis=1)])
    record.observe(weight_hessian_eigenvalues=np.round(np.linalg.eigvalsh(np.asarray(h, np.float64)[:2, :2]), 3))


# ---------------------------------------------------------------- second order through max_pool, fused batch norm
# (moved from tape-mechanics, issue 48; the tests, their draws and their keys unchanged)
DTYPES = (np.float32, np.float64)
_own = cmp.own


class MaxPool(Program):
    """max_pool over 2x2 windows, stride 2, VALID, of a 2-D x; ``square``: its square (so that the second
    derivative is 2 w v at each window's maximum, not 0)."""

    def tensorflow(tf, x, *, square):
        y = tf.nn.max_pool2d(x[None, :, :, None], 2, 2, "VALID")[0, :, :, 0]
        return y * y if square else y

    def jax(jax, x, *, square):
        y = jax.lax.reduce_window(x, -jax.numpy.inf, jax.lax.max, (2, 2), (2, 2), "VALID")
        return y * y if square else y

    def torch(torch, x, *, square):
        y = torch.nn.functional.max_pool2d(x[None, None], 2)[0, 0]
        return y * y if square else y


BN_EPSILON = 1e-3


class FusedBatchNorm(Program):
    """Batch norm in training mode over NHWC x (batch statistics, biased variance, epsilon 1e-3):
    ``tf.compat.v1.nn.fused_batch_norm`` or ``tf.raw_ops.FusedBatchNormV3``; JAX by its formula;
    ``torch.nn.functional.batch_norm(training=True)`` on the NCHW transpose."""

    def tensorflow(tf, x, scale, offset, *, spelling):
        if spelling == "raw-v3":
            empty = tf.zeros([0], x.dtype)
            return tf.raw_ops.FusedBatchNormV3(
                x=x, scale=scale, offset=offset, mean=empty, variance=empty, epsilon=BN_EPSILON, is_training=True
            )[0]
        return tf.compat.v1.nn.fused_batch_norm(x, scale, offset, epsilon=BN_EPSILON, is_training=True)[0]

    def jax(jax, x, scale, offset, *, spelling):
        jnp = jax.numpy
        m = jnp.mean(x, axis=(0, 1, 2))
        var = jnp.mean((x - m) ** 2, axis=(0, 1, 2))
        return (x - m) / jnp.sqrt(var + BN_EPSILON) * scale + offset

    def torch(torch, x, scale, offset, *, spelling):
        y = torch.nn.functional.batch_norm(x.permute(0, 3, 1, 2), None, None, scale, offset, True, eps=BN_EPSILON)
        return y.permute(0, 2, 3, 1)


FusedBatchNorm.tensorflow.exact_shapes = True  # the fused kernel's channel dimension must be static in a graph


def _bn_grad_x(x, scale, w):
    """d/dx sum(w * batch_norm(x)) in float64, per channel over N, H, W: scale / sigma * (w - mean(w) -
    xhat * mean(w * xhat))."""
    x, w = np.asarray(x, np.float64), np.asarray(w, np.float64)
    axes = (0, 1, 2)
    mu = x.mean(axes)
    sigma = np.sqrt(((x - mu) ** 2).mean(axes) + BN_EPSILON)
    xhat = (x - mu) / sigma
    return np.asarray(scale, np.float64) / sigma * (w - w.mean(axes) - xhat * (w * xhat).mean(axes))


@st.composite
def pool_cases(draw):
    """(x, w, v): x a 2-D array of distinct values a quarter apart (no ties in any window), w (the
    cotangent of the pooled output) and v (of the first gradient)."""
    d = draw(ss.float_dtypes(dtypes=DTYPES), label="dtype")
    h, wd = draw(st.sampled_from(((4, 4), (4, 6))), label="shape")
    perm = np.asarray(draw(st.permutations(range(h * wd)), label="order"), np.float64)
    x = ((perm - (h * wd - 1) / 2) / 4).reshape(h, wd).astype(d)
    w = draw(ss.float_arrays(dtype=d, shape=(h // 2, wd // 2), min_value=0.5, max_value=2.0), label="w")
    v = draw(ss.float_arrays(dtype=d, shape=(h, wd), min_value=-2.0, max_value=2.0), label="v")
    return x, w, v


def _pool_forms(x, w, v, square):
    """(first, second) gradients of sum(w * maxpool(x)^(2 or 1)) in float64: at each window's maximum
    2 w y (w), and 2 w v there (0); zero elsewhere."""
    x, w, v = (np.asarray(a, np.float64) for a in (x, w, v))
    g, h = np.zeros_like(x), np.zeros_like(x)
    for i in range(w.shape[0]):
        for j in range(w.shape[1]):
            win = x[2 * i : 2 * i + 2, 2 * j : 2 * j + 2]
            a, b = np.unravel_index(np.argmax(win), win.shape)
            at = (2 * i + a, 2 * j + b)
            g[at] = 2 * w[i, j] * x[at] if square else w[i, j]
            h[at] = 2 * w[i, j] * v[at] if square else 0.0
    return g, h


def _second_order_against_oracles(record, oracles, program, *arrays, w, v, first: dict, second: dict, tol=cmp.GRAD,
                                  scales=("inputs", "inputs"), **static):  # fmt: skip
    """Each oracle's reverse-over-reverse of ``program``: ``first`` (name -> the subject's first gradient of
    the first input) and ``second`` (name -> its second gradient with respect to each input, in order);
    ``scales``: the floor's scale for the first and the second gradients (as for ``record.close``)."""
    __tracebackhide__ = True
    for o in oracles:
        _, g, h = o.second_order(program.of(o), *arrays, cotangent=w, cotangent2=v, **static)
        pairs = [*((p, scales[0]) for p in zip(first.items(), g[:1]))]
        pairs += [(p, scales[1]) for p in zip(second.items(), h)]
        for ((name, out), ref), scale in pairs:
            if out is not None and ref is not None:
                record.close(name=name, out=out, ref=ref, oracle=o.id, tol=tol, scale=scale)


@given(case=pool_cases())
def test_max_pool_second_order(subject, oracles, record, case):
    """Reverse over reverse through max_pool2d (no ties): for maxpool(x)^2 the second gradient is 2 w v at
    each window's maximum; for maxpool(x) itself, piecewise linear, it is zero; against the closed forms,
    the oracles and central differences of the subject's own float64 first derivative."""
    x, w, v = case
    record.example(x=x, w=w, v=v)
    for square in (True, False):
        key = f"max-pool-second-order[{'square' if square else 'linear'}|{x.dtype.name}]"
        res, err = subject.attempt(
            "second_order", MaxPool.of(subject), x, cotangent=w, cotangent2=v, square=square, remember=cmp.xla_refusal
        )
        if err is not None:
            record.check(EXPECT, **{key: err})
            continue
        _, (g,), (h,) = res
        first, second = _pool_forms(x, w, v, square)
        forms = {"closed-form": second} if square else {"zero-closed-form": second}
        record.check(EXPECT, **{key: cmp.which(h, forms)})
        # one window's maximum per element (no ties): 2 w y or w, and 2 w v or 0 there, 0 elsewhere
        record.close(name=f"{key} first", out=g, ref=first.astype(x.dtype), oracle="closed-form", scale=_own(first))
        if h is None:
            continue
        record.close(name=f"{key} second", out=h, ref=second.astype(x.dtype), oracle="closed-form",
                     scale=_own(second))  # fmt: skip
        _second_order_against_oracles(record, oracles, MaxPool, x, w=w, v=v, first={f"{key} first": g},
                                      second={f"{key} second": h}, square=square,
                                      scales=(_own(first), _own(second)))  # fmt: skip
        grad = lambda z: subject.vjp(MaxPool.of(subject), z, cotangent=np.asarray(w, np.float64), square=square)[1][0]  # noqa: E731
        fd = finite_diff.hvp(grad, x, v)
        record.close(name=f"{key} second[difference of the first derivative]", out=np.asarray(h, np.float64), ref=fd,
                     oracle="finite-difference", tol=cmp.FINITE_DIFF, derived_from=h.dtype, scale="inputs")  # fmt: skip


@st.composite
def batch_norm_cases(draw):
    """(x, scale, offset, w, v) in float32 (the fused kernels' dtype): x NHWC (2, 3, 3, 2) or (3, 2, 2, 3)."""
    shape = draw(st.sampled_from(((2, 3, 3, 2), (3, 2, 2, 3))), label="shape")
    f32 = np.float32
    # every channel spread out (std >= 0.25): a constant channel (variance 0) is batch norm's own special
    # point, where float32's residues meet a closed form of 0; it is not what this test is about
    x = draw(
        ss.float_arrays(dtype=f32, shape=shape, min_value=-2.0, max_value=2.0).filter(
            lambda x: float(np.std(np.asarray(x, np.float64), axis=(0, 1, 2)).min()) >= 0.25
        ),
        label="x",
    )
    c = shape[-1]
    scale = draw(ss.float_arrays(dtype=f32, shape=(c,), min_value=0.5, max_value=2.0), label="scale")
    offset = draw(ss.float_arrays(dtype=f32, shape=(c,), min_value=-1.0, max_value=1.0), label="offset")

    # w and v not constant on a channel: batch norm's output is invariant to a per-channel shift, so a
    # constant cotangent or direction gives an exact 0 that float32 meets with residues
    def spread(a):
        return float(np.ptp(np.asarray(a, np.float64), axis=(0, 1, 2)).min()) >= 0.25

    w = draw(ss.float_arrays(dtype=f32, shape=shape, min_value=0.5, max_value=2.0).filter(spread), label="w")
    v = draw(ss.float_arrays(dtype=f32, shape=shape, min_value=-1.0, max_value=1.0).filter(spread), label="v")
    return x, scale, offset, w, v


#: a float32 Hessian-vector product of batch norm sums O(N) terms that cancel; against a float64 difference
BN_HVP = cmp.tolerance(base=cmp.FINITE_DIFF.table, float32=1e-3)


@given(case=batch_norm_cases())
def test_fused_batch_norm_second_order(subject, oracles, record, case):
    """Reverse over reverse through training-mode batch norm (FusedBatchNormGradV3 has a registered
    gradient): the second gradients with respect to x, scale and offset against the oracles; x's against
    central differences of the float64 closed-form first derivative."""
    x, scale, offset, w, v = case
    record.example(x=x, scale=scale, offset=offset, w=w, v=v)
    for spelling in BN_SPELLINGS[subject.framework]:
        key = f"fused-batch-norm-second-order[{spelling}]"
        res, err = subject.attempt(
            "second_order", FusedBatchNorm.of(subject), x, scale, offset, cotangent=w, cotangent2=v, spelling=spelling
        )
        if err is not None:
            record.check(EXPECT, **{key: err})
            continue
        _, (g, _, _), (hx, hs, ho) = res
        fd = finite_diff.hvp(lambda z: _bn_grad_x(z, scale, w), x, v)
        record.check(EXPECT, **{key: "finite" if np.all(np.isfinite(hx)) else "non-finite"})
        # the gradients are sums of terms of size |scale| |w| / sigma (|v| / sigma more for the second) that
        # cancel where w is nearly affine in x on a channel: the floor is at the terms' size, not the result's
        sigma = float(np.sqrt(np.asarray(x, np.float64).var(axis=(0, 1, 2)) + BN_EPSILON).min())
        first_scale = float(np.abs(scale).max() * np.abs(w).max()) / sigma
        scales = (first_scale, first_scale * float(np.abs(v).max()) / sigma)
        record.close(name=f"{key} first", out=g, ref=_bn_grad_x(x, scale, w).astype(x.dtype), oracle="closed-form",
                     scale=scales[0])  # fmt: skip
        record.close(
            name=f"{key} d2/dx[finite difference, of the closed-form first derivative]",
            out=np.asarray(hx, np.float64),
            ref=fd,
            oracle="finite-difference",
            tol=BN_HVP,
            derived_from=hx.dtype,
            scale=scales[1],
        )
        second = {f"{key} d2/dx": hx, f"{key} d2/dscale": hs, f"{key} d2/doffset": ho}
        first = {f"{key} first": g}
        _second_order_against_oracles(record, oracles, FusedBatchNorm, x, scale, offset, w=w, v=v, first=first,
                                      second=second, tol=BN_HVP, scales=scales, spelling=spelling)  # fmt: skip
