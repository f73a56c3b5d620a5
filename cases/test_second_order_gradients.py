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

Declared surprise: ``tf.gradients`` of ``tf.gradients`` is traced in a v1 graph, in
``tf.function`` and under XLA, but eagerly ``tf.gradients`` raises RuntimeError.
"""

import numpy as np
from hypothesis import given, strategies as st

from suite import compare as cmp, facts, finite_diff, strategies as ss
from suite.behaviours import Floor, behaviour, on
from suite.expectations import expectations
from suite.frameworks.tf_runner import in_v1_graph
from suite.program import Program

BEHAVIOUR = behaviour(
    "second-order-gradients",
    sources=["002"],
    links=[
        "https://www.tensorflow.org/guide/advanced_autodiff#higher-order_gradients",
        "https://www.tensorflow.org/api_docs/python/tf/hessians",
        "https://docs.jax.dev/en/latest/_autosummary/jax.hessian.html",
        "https://docs.pytorch.org/docs/stable/generated/torch.autograd.functional.hessian.html",
    ],
    floor=Floor(
        "mixed",
        "Per element (seed_scales): the seed's first derivative w1 w2 (1 - t^2) and second derivative "
        "-2 w1 w2^2 (1 - t^2) t (times ct for dL/dx), t = tanh(w2 x), are elementwise in x, held at their terms "
        "with sech^2 = 1 at its largest: |w1 w2| and 2 |w1| w2^2 |ct| (1 - t^2 cancels at the magnitude of 1), "
        "capped at the inputs' magnitude they were held at before (capped), at GRAD. "
        "Array-level: dL/dw1 and dL/dw2 (sums over x), the network's (W x, W^T sums: net_scale), the 3x3 Hessian "
        "(each entry another formula of one point, at the largest of their terms) and the finite differences.",
    ),
)

EXPECT = expectations(
    {
        "double_backprop": "second-order",
        "sign_rule": "follows-tanh",
        "curvature": "sign-change",
        "curvature_left": "convex",
        "curvature_right": "concave",
        "weight_hessian": "indefinite",
        "tf_gradients": "available",
    },
    facts.tf_gradients_in_eager("tf_gradients"),
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
