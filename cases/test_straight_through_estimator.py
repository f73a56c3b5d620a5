"""Straight-through estimator: forward f(x), backward the gradient of g(x).

Source: seeds/000 (``round_through``: ``x + K.stop_gradient(K.round(x) - x)``, "forward
uses the rounded value, backward keeps the fractional precision") and seeds/002 (the
STE asked about for fake-quant). The general trick is ``t = g(x); y = t +
stop_gradient(f(x) - t)``: the value is f(x) (up to one rounding of ``t + (f - t)``)
and the gradient is g'(x) times the upstream gradient.

The seed calls ``K.round`` "四舍五入" (round half up); every framework here rounds half
to even (``tf.round`` docs: "banker's rounding"), so 0.5 -> 0, 1.5 -> 2, 2.5 -> 2.
``tf.round`` by itself registers a ``None`` gradient (an unconnected gradient), where
JAX and PyTorch give zeros: a declared divergence, asserted below.
"""

import numpy as np
from hypothesis import example, given, strategies as st

from suite import compare as cmp, strategies as ss
from suite.behaviours import Floor, behaviour, on
from suite.expectations import expect, expectations
from suite.program import Program

BEHAVIOUR = behaviour(
    "straight-through-estimator",
    sources=["000", "002"],
    links=[
        "https://www.tensorflow.org/api_docs/python/tf/stop_gradient",
        "https://www.tensorflow.org/api_docs/python/tf/math/round",
    ],
    floor=Floor(
        "element",
        "Every result is elementwise: y_i = t_i + stop_gradient(f(x_i) - t_i) and its gradient g'(x_i) w_i. "
        "Round-through values and gradients are exact; the trick's value is held per element at "
        "max(|f(x_i)|, |t_i|) (the terms f - t and t + (f - t) round at), its gradient relatively to w_i, or at "
        "|w_i| for tanh (the terms of w (1 - tanh^2)).",
    ),
)

ROUND_GRAD_LINK = "https://github.com/tensorflow/tensorflow/blob/master/tensorflow/python/ops/math_grad.py"
EXPECT = expectations(
    {"round_grad": "zero", "ste_grad": "upstream", "rounding": "half-to-even"},
    expect(
        "round_grad",
        "none",
        framework="tensorflow",
        reason="tf.round has gradient None registered (math_grad.py _RoundGrad returns [None]): "
        "tape.gradient/tf.gradients report it as unconnected, not zeros; "
        "jax.grad and torch give zeros",
        link=ROUND_GRAD_LINK,
    ),
)
# t + (f(x) - t) rounds once more than f(x): about one ulp of max(|f(x)|, |t|) per element, t = x or
# tanh(x) (the comparisons' per-element scale, value_scale).
VALUE_TOL = cmp.tolerance(base=cmp.VALUE_TOL, float32=4e-7, float64=5e-16)

# closed forms of f (the forward) and g' (the surrogate whose gradient the backward takes)
# (clip's bounds in x's dtype: NumPy 1.x promotes a 0-d float32 clipped by Python floats to float64)
CLOSED_F = {
    "round": np.round,
    "sign": np.sign,
    "floor": np.floor,
    "clip": lambda x: np.clip(x, x.dtype.type(-1), x.dtype.type(1)),
}
CLOSED_DG = {"identity": lambda x: np.ones_like(x), "tanh": lambda x: 1 - np.tanh(x) ** 2}


# ---------------------------------------------------------------- the programs
class RoundThrough(Program):
    """seeds/000 ``round_through`` (Keras' K.round is tf.round)."""

    def tensorflow(tf, x):
        return x + tf.stop_gradient(tf.round(x) - x)

    def jax(jax, x):
        return x + jax.lax.stop_gradient(jax.numpy.round(x) - x)

    def torch(torch, x):
        return x + (torch.round(x) - x).detach()


class Trick(Program):
    """t = g(x); y = t + stop_gradient(f(x) - t), f in round/sign/floor/clip, g in identity/tanh."""

    def tensorflow(tf, x, *, f, g):
        t = tf.tanh(x) if g == "tanh" else x
        fx = tf.clip_by_value(x, -1.0, 1.0) if f == "clip" else getattr(tf.math, f)(x)
        return t + tf.stop_gradient(fx - t)

    def jax(jax, x, *, f, g):
        jnp = jax.numpy
        t = jnp.tanh(x) if g == "tanh" else x
        fx = jnp.clip(x, -1.0, 1.0) if f == "clip" else getattr(jnp, f)(x)
        return t + jax.lax.stop_gradient(fx - t)

    def torch(torch, x, *, f, g):
        t = torch.tanh(x) if g == "tanh" else x
        fx = torch.clamp(x, -1.0, 1.0) if f == "clip" else getattr(torch, f)(x)
        return t + (fx - t).detach()


class RoundAlone(Program):
    def tensorflow(tf, x):
        return tf.round(x)

    def jax(jax, x):
        return jax.numpy.round(x)

    def torch(torch, x):
        return torch.round(x)


def value_scale(x, f, g):
    """Per element, the terms t + (f(x) - t) rounds at: max(|f(x)|, |t|), t = x or tanh(x)."""
    x64 = x.astype(np.float64)
    t = np.tanh(x64) if g == "tanh" else x64
    return np.maximum(np.abs(CLOSED_F[f](x64)), np.abs(t))


def rounding_rule(x, out):
    """Which half-way rule ``out`` follows where the two rules disagree (None if nowhere)."""
    where = (np.abs(x - np.floor(x)) == 0.5) & (np.round(x) != np.floor(x + 0.5))
    if not where.any():
        return None
    if np.array_equal(out[where], np.round(x)[where]):
        return "half-to-even"
    if np.array_equal(out[where], np.floor(x + 0.5)[where]):
        return "half-up"
    return "other"


#: Half-way points where round-half-to-even and round-half-up disagree (0.5, 2.5, -1.5) beside
#: ones where they agree (1.5, -0.5) and a point off the half-way grid: the rounding rule is
#: observed whatever the drawn examples reach. float32 (2, 3), the signature ci draws for float32,
#: so the example reuses the row's traced programs.
HALFWAY = ss.ValueAndCotangent(
    x=np.array([[0.5, 1.5, 2.5], [-0.5, -1.5, 0.3]], np.float32),
    w=np.array([[1.0, -2.0, 0.5], [3.0, -1.0, 2.0]], np.float32),
)


# ---------------------------------------------------------------- properties
@example(xw=HALFWAY)
@given(xw=ss.values_and_cotangents(halfway=True))
def test_round_through_value_is_round_and_gradient_is_upstream(subject, oracles, record, xw):
    """Value equals round-half-to-even(x); the gradient of sum(w * y) equals w exactly."""
    record.example(x=xw.x, w=xw.w)
    out, (grad,) = subject.vjp(RoundThrough.of(subject), xw.x, cotangent=xw.w)
    record.close(name="value", out=out, ref=np.round(xw.x), oracle="closed-form", tol=cmp.EXACT)
    record.close(name="grad", out=grad, ref=xw.w, oracle="closed-form", tol=cmp.EXACT)
    rule = rounding_rule(xw.x, out)
    if rule:
        record.check(EXPECT, rounding=rule)
    record.check(EXPECT, ste_grad="upstream" if np.array_equal(grad, xw.w) else "other")
    record.against(oracles, RoundThrough, xw.x, cotangent=xw.w, got={"value": out, "grad": grad}, tol=cmp.EXACT)


@given(
    xw=ss.values_and_cotangents(halfway=True, min_value=-3.0, max_value=3.0),
    f=st.sampled_from(sorted(CLOSED_F)),
    g=st.sampled_from(sorted(CLOSED_DG)),
)
def test_trick_value_is_f_and_gradient_is_g_prime(subject, oracles, record, xw, f, g):
    """t = g(x); y = t + stop_gradient(f(x) - t): value f(x), gradient g'(x) * w."""
    record.example(x=xw.x, w=xw.w, f=f, g=g)
    out, (grad,) = subject.vjp(Trick.of(subject), xw.x, cotangent=xw.w, f=f, g=g)
    # the value per element: t + (f(x) - t) rounds at max(|f(x)|, |t|) (at |x| where f(x) = 0)
    vs = value_scale(xw.x, f, g)
    ref = CLOSED_F[f](xw.x)
    record.close(name=f"value[{f},{g}]", out=out, ref=ref, oracle="closed-form", tol=VALUE_TOL, scale=vs)
    # the gradient per element (suite.ops.error): w itself, or w (1 - tanh^2) at |w|, the terms of 1 - y^2
    at = np.abs(xw.w.astype(np.float64)) if g == "tanh" else 0.0
    record.close(name=f"grad[{f},{g}]", out=grad, ref=CLOSED_DG[g](xw.x) * xw.w, oracle="closed-form", scale=at)
    got = {f"value[{f},{g}]": out, f"grad[{f},{g}]": grad}
    tol = {f"value[{f},{g}]": VALUE_TOL}
    scale = {f"value[{f},{g}]": vs, f"grad[{f},{g}]": at}
    record.against(oracles, Trick, xw.x, cotangent=xw.w, f=f, g=g, got=got, tol=tol, scale=scale)


@given(x=ss.float_arrays(halfway=True))
def test_round_alone_gradient_is_declared(subject, oracles, record, x):
    """The gradient of round(x) by itself: zeros in JAX/PyTorch, None (unconnected) in TF."""
    record.example(x=x)
    out, (grad,) = subject.vjp(RoundAlone.of(subject), x)
    record.close(name="value", out=out, ref=np.round(x), oracle="closed-form", tol=cmp.EXACT)
    record.check(EXPECT, round_grad=cmp.gradient_kind(grad))


# ---------------------------------------------------------------- seed examples
@on("tensorflow", "jax", "torch")
@given(x=st.just(np.array([0.5, 1.5, 2.5, -0.5, -1.5, 0.4, 0.6, 3.7], np.float32)))
def test_seed_round_through_halfway_points(subject, record, x):
    """seeds/000 round_through on half-way points: [0, 2, 2, -0, -2, 0, 1, 4], gradient ones."""
    record.example(x=x)
    out, (grad,) = subject.vjp(RoundThrough.of(subject), x)
    record.equal(name="value", out=out, ref=np.array([0, 2, 2, -0.0, -2, 0, 1, 4], np.float32), oracle="closed-form")
    record.equal(name="grad", out=grad, ref=np.ones(8, np.float32), oracle="closed-form")
    record.check(
        EXPECT,
        rounding=rounding_rule(x, out),
        ste_grad="upstream" if np.array_equal(grad, np.ones(8, np.float32)) else "other",
    )
