"""Gradients at singular points: sqrt, pow, norms, moments, xlogy and friends where the derivative is undefined.

Where a function has no derivative (sqrt, rsqrt, log and log1p at their boundary, acos and
asin at +-1, x**p at 0, the Euclidean norm at the zero vector, the standard deviation of a
constant, atan2 at the origin) or is defined piecewise (xlogy, xlog1py, xdivy and
divide_no_nan at x = 0 or y = 0), each framework still returns a number: a one-sided limit
(+-inf), a subgradient (0), NaN (0 * inf or 0 / 0 inside the backward formula) or a
convention of its own. Per framework and mode this module records that number
(``grad[op@point]``, ``dx[...]``, ``dy[...]``, ``grad2[...]`` for the second derivative: the
gradient over the upstream gradient, as ``+inf``, ``-inf``, ``nan``, ``zero``, its value, or
the closed form it equals) and which one-sided difference quotient of the framework's own
forward pass it equals (``side...``: ``left``, ``right``, ``both``, ``none``). Near each point
(1e-4..1e-1 away, on every side where the function is defined) and away from it, gradients
must equal the closed form, JAX and PyTorch (where they have the op) and central
differences. Signed zeros are points of their own: sqrt'(-0) = 1 / (2 * -0) = -inf.

The elementwise ops are entries of the op table (``suite.ops``, section "the elementwise
entries" below): an op with a singular point is one ``elementwise(...)`` call, its spellings,
closed forms, domain and the kind each point has by default; its divergences are declared in
DECLARED under its keys and reach the entry from there.

Declared surprises (details at each declaration):

- TensorFlow up to 2.21 masks x = 0 out of the x-gradient of xlogy and xlog1py (0, not log(y))
  and its y-gradient at y = 0 (0, not 0 / 0); JAX's unmasked rule gives -inf and NaN there.
  xdivy's x-gradient at x = 0 is 0 too, not 1/y (TF alone has xdivy, so that is the default).
- PyTorch returns the subgradient 0 where TF and JAX give NaN: the norm at 0, the std of a
  constant or of one element, atan2 at the origin, d/dx x**0 and d2/dx2 x**1 at 0.
- TF function/graph: grappler rewrites pow(x, -0.5) into rsqrt, so x**0.5's gradient at -0 is
  -inf there and +inf in eager and XLA (PyTorch's pow kernel does the same).
- rsqrt'(-0) is -inf in JAX, +inf in TF and PyTorch; l2_normalize at 0 gives 1/sqrt(epsilon)
  in TF, 1/epsilon in PyTorch (F.normalize). JAX has no l2_normalize, xdivy, divide_no_nan
  or moments, PyTorch no xdivy or divide_no_nan (``unavailable``).
- tensorflow#12071: the norm of [1e-19] (float32) has gradient inf in TF's kernels, which
  flush the subnormal square to 0; a compiled program that returns the norm with its gradient
  computes the norm as |x| and gives 1, the gradient alone is +inf there too.
- tf-nightly (the 2.22 line from July 2026, placed nightly by nightly by ``autodiff-semantics
  bisect``): the x-gradients of xlogy and xlog1py (2026-07-17) and xdivy (2026-09-16) are unmasked
  (log(y), log1p(y), 1/y at x = 0, as in JAX), tf.norm's gradient at the zero vector is 0
  (PyTorch's subgradient, 2026-08-23), and the second derivative of x**0 at 0 is 0 (2026-10-10);
  each declared from the first nightly with it, with its change.

Sources: https://github.com/tensorflow/tensorflow/issues/12071,
https://github.com/tensorflow/tensorflow/issues/4914,
https://github.com/tensorflow/tensorflow/issues/2295,
https://github.com/tensorflow/tensorflow/issues/56830,
https://github.com/tensorflow/tensorflow/issues/56873,
https://github.com/tensorflow/tensorflow/issues/60715, https://github.com/pytorch/pytorch/issues/2421
"""

import dataclasses
from typing import Callable

import numpy as np
import pytest
from hypothesis import given, strategies as st

from suite import compare as cmp, finite_diff, ops, strategies as ss
from suite.behaviours import Floor, behaviour
from suite.expectations import expect, expect_keys, expectations, raises
from suite.frameworks.tf_runner import in_v1_graph
from suite.ops import db
from suite.program import Program

TF_MATH_GRAD = "https://github.com/tensorflow/tensorflow/blob/master/tensorflow/python/ops/math_grad.py"
TF_GRAPPLER = (
    "https://github.com/tensorflow/tensorflow/blob/master/tensorflow/core/grappler/optimizers/arithmetic_optimizer.cc"
)
TF_XLOGY_PR = "https://github.com/tensorflow/tensorflow/pull/119869"
TF_XDIVY_PR = "https://github.com/tensorflow/tensorflow/pull/127294"
TF_NORM_PR = "https://github.com/tensorflow/tensorflow/pull/112634"
TF_CONSTANT_FOLDING = (
    "https://github.com/tensorflow/tensorflow/blob/master/tensorflow/core/grappler/optimizers/constant_folding.cc"
)
JAX_LAX = "https://github.com/jax-ml/jax/blob/main/jax/_src/lax/lax.py"
JAX_SPECIAL = "https://github.com/jax-ml/jax/blob/main/jax/_src/scipy/special.py"
TORCH_MANUAL = "https://github.com/pytorch/pytorch/blob/main/torch/csrc/autograd/FunctionsManual.cpp"
TORCH_POW_KERNEL = "https://github.com/pytorch/pytorch/blob/main/aten/src/ATen/native/cpu/PowKernel.cpp"

BEHAVIOUR = behaviour(
    "singular-point-gradients",
    sources=[],
    links=[
        "https://github.com/tensorflow/tensorflow/issues/12071",
        "https://github.com/tensorflow/tensorflow/issues/4914",
        "https://github.com/tensorflow/tensorflow/issues/2295",
        "https://github.com/tensorflow/tensorflow/issues/56830",
        "https://github.com/tensorflow/tensorflow/issues/56873",
        "https://github.com/tensorflow/tensorflow/issues/60715",
        "https://github.com/pytorch/pytorch/issues/2421",
        TF_MATH_GRAD,
    ],
    floor=Floor(
        "mixed",
        "Per element: the elementwise and binary entries' gradients, second derivatives and first-derivative "
        "values (f'(x) w, products and quotients; atan2's x^2 + y^2 adds positive terms) are held relatively per "
        "element (scale 0.0), near the points at NEAR_TOL (the rounding of 1 - x*x in acos' and asin'). Their "
        "values keep the array floor: acos near 1 is computed from 1 - x*x, which cancels. Array-level: the "
        "reductions (norm, l2_normalize, std, variance, moments: a row's sum, at the terms that cancel) and "
        "the central differences (of sum(w f), absolute at its scale).",
    ),
)


# ---------------------------------------------------------------- the programs
class Norm(Program):
    """The Euclidean norm of each row (tf.norm is tf.linalg.norm: one function)."""

    def tensorflow(tf, x):
        return tf.norm(x, axis=-1)

    def jax(jax, x):
        return jax.numpy.linalg.norm(x, axis=-1)

    def torch(torch, x):
        return torch.linalg.norm(x, dim=-1)


class L2Normalize(Program):
    """x / ||x|| per row; JAX has no such op (unavailable)."""

    def tensorflow(tf, x):
        return tf.math.l2_normalize(x, axis=-1)

    def torch(torch, x):
        return torch.nn.functional.normalize(x, dim=-1)


class ReduceStd(Program):
    def tensorflow(tf, x):
        return tf.math.reduce_std(x, axis=-1)

    def jax(jax, x):
        return jax.numpy.std(x, axis=-1)

    def torch(torch, x):
        return torch.std(x, dim=-1, correction=0)


class ReduceVariance(Program):
    def tensorflow(tf, x):
        return tf.math.reduce_variance(x, axis=-1)

    def jax(jax, x):
        return jax.numpy.var(x, axis=-1)

    def torch(torch, x):
        return torch.var(x, dim=-1, correction=0)


class Moments(Program):
    """The variance of (mean, variance); JAX has no moments op (unavailable)."""

    def tensorflow(tf, x):
        return tf.nn.moments(x, axes=[-1])[1]

    def torch(torch, x):
        return torch.var_mean(x, dim=-1, correction=0)[0]


class FirstDerivative(Program):
    """f'(x) of the elementwise entry ``op`` by the framework's own reverse mode, to be differentiated again."""

    def tensorflow(tf, x, *, op):
        f = ELEMENTWISE[op].program.tensorflow
        if in_v1_graph():
            return tf.gradients(f(tf, x), x)[0]
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = f(tf, x)
        return tape.gradient(y, x)

    def jax(jax, x, *, op):
        return jax.grad(lambda x: jax.numpy.sum(ELEMENTWISE[op].program.jax(jax, x)))(x)

    def torch(torch, x, *, op):
        return torch.autograd.grad(ELEMENTWISE[op].program.torch(torch, x).sum(), x, create_graph=True)[0]


def spelled(program, runner, static) -> bool:
    """Has the runner's framework this op? (``unavailable`` where it has not)."""
    return runner.framework in program.frameworks()


# ---------------------------------------------------------------- the tables
_np = db.quiet  # a float64 NumPy closed form that may meet log(0), 0 / 0 or sqrt(-x) quietly


@dataclasses.dataclass(frozen=True)
class Config:
    """A singular configuration of a binary op: each argument exactly a value (a float) or
    drawn from ranges ((lo, hi), ...); ``near``: per argument, the signs it may move off its
    fixed value and stay where the op is defined; ``kinds``: what every framework answers there
    by default, (d/d first argument, d/d second, which side each is)."""

    label: str
    a: object
    b: object
    near: tuple = ((1, -1), ())
    kinds: tuple = ()

    def representative(self):
        """One float64 point of the configuration (a range's midpoint)."""
        return tuple(np.array([v if isinstance(v, float) else sum(v[0]) / 2]) for v in (self.a, self.b))


def _moments_vjp(std):
    def vjp(x, w):
        dev = x - x.mean(-1, keepdims=True)
        g = 2 * dev / x.shape[-1]
        return w[:, None] * (g / (2 * np.sqrt((dev**2).mean(-1, keepdims=True))) if std else g)

    return _np(vjp)


def _l2n(x):
    """tf.math.l2_normalize as documented: x / sqrt(max(sum(x**2), epsilon = 1e-12)), 0 at the zero vector."""
    return x / np.sqrt(np.maximum((x * x).sum(-1, keepdims=True), 1e-12))


def _l2n_vjp(x, w):
    n = np.linalg.norm(x, axis=-1, keepdims=True)
    y = x / n
    return (w - y * (y * w).sum(-1, keepdims=True)) / n


def _moments_terms(std):
    """The float32 rounding of ``x - mean`` (|x| eps) reaches the gradient divided by n (and by
    the row's std for std): near a constant row that is the floor, not the small gradient."""

    def terms(x, w):
        x, w = np.asarray(x, np.float64), np.asarray(w, np.float64)
        s = x.std(-1)
        ok = s > 0 if std else np.ones(s.shape, bool)  # a singular row is held to its declaration instead
        if not ok.any():
            return 0.0
        size = np.abs(w[ok]) * np.abs(x[ok]).max(-1) / x.shape[-1]
        return float(np.max(size / s[ok] if std else 2 * size))

    return terms


# ---------------------------------------------------------------- expectations
def _label(p) -> str:
    return "-0" if p == 0 and np.signbit(p) else f"{p:g}"


# What the frameworks agree on for each issue's own input (the entries below carry their own
# points' kinds: the gradient over the upstream gradient, and which one-sided difference
# quotient of the forward pass it equals). Declared divergences follow, each reaching the
# entry whose key it declares.
AGREED = {
    **{f"seed[{k}]": v for k, v in {
        "tensorflow#12071": "1,nan,1,1", "pytorch#2421": "nan", "tensorflow#56830": "nan",
        "tensorflow#56873": "0.693; zero", "tensorflow#60715": "0.5,zero; -2.5,zero",
        "tensorflow#12071:gradient-alone": "1,nan,1,+inf",
        "tensorflow#2295": "zero,+inf,0.624,zero", "tensorflow#4914": "+inf,0.707; nan,0.354",
    }.items()},
}  # fmt: skip


#: The first tf-nightly with each change of 2.21 -> 2.23.0.dev20261026 (``autodiff-semantics bisect``,
#: reports/nightly/bisect.json: the last nightly before it, the compare link between the two)
XLOGY_FROM = "2.22.0.dev20260717"  # after 2.22.0.dev20260716
NORM_FROM = "2.22.0.dev20260823"  # after 2.22.0.dev20260809
XDIVY_FROM = "2.22.0.dev20260916"  # after 2.22.0.dev20260914
POW_FROM = "2.23.0.dev20261010"  # after 2.23.0.dev20261006
NEG_ZERO_RSQRT = (
    "pow(x, -0.5) becomes rsqrt(x), and rsqrt(-0) = -inf where IEEE pow(-0, -0.5) = +inf: the derivative "
    "p * x**(p - 1) of x**0.5 (first order) and x**1.5 (second order) at x = -0 is -inf, not +inf"
)
DECLARED = [
    # ---- TensorFlow
    *expect_keys(
        ["grad[x**0.5@-0]", "grad2[x**1.5@-0]"],
        "-inf",
        framework="tensorflow",
        mode="function|graph",
        reason=f"grappler's arithmetic optimizer (ConvertPowStage) runs in tf.function and v1 graphs: "
        f"{NEG_ZERO_RSQRT}; eager and XLA keep Pow",
        link=TF_GRAPPLER,
    ),
    expect(
        "side[x**0.5@-0]",
        "none",
        framework="tensorflow",
        mode="function|graph",
        reason="the -inf that grappler's rsqrt gives at -0 is no one-sided limit (the right one is +inf)",
        link=TF_GRAPPLER,
    ),
    *expect_keys(
        ["dx[xlogy@x=0,y>0]", "dx[xlog1py@x=0,y>-1]"],
        "zero",
        framework="tensorflow",
        versions=f"<{XLOGY_FROM}",
        reason="_XLogyGrad/_XLog1pyGrad compute the x-gradient as xlogy(x != 0, y): 0 wherever x = 0, although "
        "xlogy(x, y) = x*log(y) is linear in x (both one-sided differences are log(y)); JAX and PyTorch give log(y)",
        link="https://github.com/tensorflow/tensorflow/issues/56873",
    ),
    expect(
        "seed[tensorflow#56873]",
        "zero; zero",
        framework="tensorflow",
        versions=f"<{XLOGY_FROM}",
        reason="the issue as reported: d/dx xlog1py(x, 1) at x = 0 is 0, not log1p(1) = 0.693 (x-gradient masked "
        "by x != 0)",
        link="https://github.com/tensorflow/tensorflow/issues/56873",
    ),
    *expect_keys(
        ["side_dx[xlogy@x=0,y>0]", "side_dx[xlog1py@x=0,y>-1]"],
        "none",
        framework="tensorflow",
        versions=f"<{XLOGY_FROM}",
        reason="the masked 0 is neither one-sided difference (both are log(y), log1p(y))",
        link="https://github.com/tensorflow/tensorflow/issues/119476",
    ),
    *expect_keys(
        ["dy[xlogy@x=0,y=0]", "dy[xlog1py@x=0,y=-1]"],
        "zero",
        framework="tensorflow",
        reason="the y-gradient is xdivy(x, y) (xdivy(x, y + 1) for xlog1py): 0 where x = 0 even at y = 0, the "
        "derivative of xlogy(0, y) = 0; JAX and PyTorch compute x / y = 0 / 0 = NaN",
        link=TF_MATH_GRAD,
    ),
    *expect_keys(
        ["side_dy[xlogy@x=0,y=0]", "side_dy[xlog1py@x=0,y=-1]"],
        "both",
        framework="tensorflow",
        reason="xlogy(0, y) is 0 for every y, so both one-sided differences in y are 0, TF's answer",
        link=TF_MATH_GRAD,
    ),
    expect(
        "seed[tensorflow#12071]",
        "1,nan,1,+inf",
        framework="tensorflow",
        mode="eager|function|graph",
        versions=f"<{NORM_FROM}",
        reason="(1e-19)**2 = 1e-38 is a float32 subnormal and TF's CPU kernels flush it to 0: norm 0, gradient "
        "x / 0 = inf, as the issue reports; under XLA (TF xla, jax.jit) a program that returns the norm with its "
        "gradient computes the norm as |x| = 1e-19 and the gradient 1, while the gradient alone still divides by "
        "the flushed sqrt(x*x) and is +inf (seed[tensorflow#12071:gradient-alone], every release to 2.21)",
        link="https://github.com/tensorflow/tensorflow/issues/12071",
    ),
    expect(
        "seed[tensorflow#12071]",
        "1,nan,1,+inf",
        framework="tensorflow",
        mode="xla",
        versions=">=2.22.0.dev20260731,<2.22.0.dev20260823",
        reason="for three weeks of nightlies XLA's gradient of the row [1e-19] divided by the flushed norm again "
        "(+inf), until the safe norm of 2026-08-23 (placed by autodiff-semantics bisect: last 1 on "
        "2.22.0.dev20260727, first +inf on 2.22.0.dev20260731)",
        link="https://github.com/tensorflow/tensorflow/compare/75879c752e0...323afda8d60",
    ),
    expect(
        "seed[tensorflow#12071]",
        "1,nan,1,+inf",
        framework="tensorflow",
        mode="xla",
        versions="<2.13",
        reason="TF 2.12's XLA computes the returned norm as |x| = 1e-19 too, but its gradient of the row [1e-19] "
        "still divides by the flushed sqrt(x*x): +inf (measured in the baselines: 2.12 +inf, 2.13-2.21 1)",
        link="https://github.com/tensorflow/tensorflow/issues/12071",
    ),
    *expect_keys(
        ["grad[x**0@0]", "grad[x**0@-0]", "grad2[x**0@0]", "grad2[x**0@-0]", "grad2[x**1@0]", "grad2[x**1@-0]"],
        "zero",
        framework="tensorflow",
        mode="function",
        versions="<2.17",
        reason="up to TF 2.16, grappler's constant folding in tf.function folds pow(x, 0) (and the x**0 in the "
        "derivative of x**1) to ones, so its gradient is 0 where eager and XLA give 0 * x**-1 = NaN (measured per "
        "release: 2.12-2.16 zero, 2.17 on NaN; switching constant folding off, not the arithmetic optimizer, "
        "brings the NaN back); the v1 graph rows give NaN in every release (measured)",
        link=TF_CONSTANT_FOLDING,
    ),
    *expect_keys(
        ["side[x**0@0]", "side[x**0@-0]"],
        "both",
        framework="tensorflow",
        mode="function",
        versions="<2.17",
        reason="the folded x**0 has gradient 0, which both one-sided differences of x**0 = 1 give",
        link=TF_CONSTANT_FOLDING,
    ),
    # ---- since tf-nightly builds of the 2.22 and 2.23 lines (measured on 2.23.0.dev20261026; each bound is the
    # first nightly with the new answer, placed by `autodiff-semantics bisect`: reports/nightly/bisect.json)
    *expect_keys(
        ["dx[xlogy@x=0,y=0]", "dx[xlog1py@x=0,y=-1]"],
        "-inf",
        framework="tensorflow",
        versions=f">={XLOGY_FROM}",
        reason="from tf-nightly 2026-07-17 _XLogyGrad/_XLog1pyGrad take the x-gradient as log(y) (log1p(y)) "
        "unmasked, for every x: "
        "log(0) = -inf at y = 0, as in JAX (until 2.21 the mask x != 0 gave 0)",
        link=TF_XLOGY_PR,
    ),
    *expect_keys(
        ["side_dx[xlogy@x=0,y=0]", "side_dx[xlog1py@x=0,y=-1]"],
        "both",
        framework="tensorflow",
        versions=f">={XLOGY_FROM}",
        reason="xlogy(+-h, 0) = +-h * log(0) = -+inf: both one-sided differences in x are -inf, TF's unmasked answer "
        "from tf-nightly 2026-07-17",
        link=TF_XLOGY_PR,
    ),
    *expect_keys(
        ["dx[xlogy@x=0,y<0]", "dx[xlog1py@x=0,y<-1]"],
        "nan",
        framework="tensorflow",
        versions=f">={XLOGY_FROM}",
        reason="the unmasked x-gradient log(y) is NaN for y < 0 (log1p(y) for y < -1), as in JAX; PyTorch still "
        "masks it to 0",
        link=TF_XLOGY_PR,
    ),
    expect(
        "dx[xdivy@x=0,y=0]",
        "+inf",
        framework="tensorflow",
        versions=f">={XDIVY_FROM}",
        reason="from tf-nightly 2026-09-16 _XDivyGrad takes the x-gradient as reciprocal(y) for every x, the "
        "derivative of x / y: "
        "1 / 0 = +inf at y = 0 (until 2.21 the mask x != 0 gave 0)",
        link=TF_XDIVY_PR,
    ),
    expect(
        "dx[xdivy@x=0,y!=0]",
        "1/y",
        framework="tensorflow",
        versions=f">={XDIVY_FROM}",
        reason="from tf-nightly 2026-09-16 _XDivyGrad takes the x-gradient as reciprocal(y) for every x: 1/y at x = 0",
        link=TF_XDIVY_PR,
    ),
    *expect_keys(
        ["side_dx[xdivy@x=0,y=0]", "side_dx[xdivy@x=0,y!=0]"],
        "both",
        framework="tensorflow",
        versions=f">={XDIVY_FROM}",
        reason="xdivy(+-h, y) = +-h / y: both one-sided differences in x are 1/y (+inf at y = 0), TF's unmasked "
        "answer from tf-nightly 2026-09-16",
        link=TF_XDIVY_PR,
    ),
    *expect_keys(
        ["grad[norm@x=0]", "seed[pytorch#2421]"],
        "zero",
        framework="tensorflow",
        versions=f">={NORM_FROM}",
        reason="from tf-nightly 2026-08-23 tf.norm takes sqrt(maximum(sum(x**2), tiny)) under a where that keeps "
        "the exact 0, and "
        "the EuclideanNorm gradient is div_no_nan(x, norm): the subgradient 0 at the zero vector, PyTorch's answer",
        link=TF_NORM_PR,
    ),
    expect(
        "seed[tensorflow#12071]",
        "1,zero,1,zero",
        framework="tensorflow",
        versions=f">={NORM_FROM}",
        reason="the safe norm (tf-nightly 2026-08-23) in every mode: the flushed 1e-38 row is a zero norm with "
        "gradient 0 (under "
        "XLA too, whose returned norm is now 0 rather than |x|)",
        link=TF_NORM_PR,
    ),
    expect(
        "seed[tensorflow#12071:gradient-alone]",
        "1,zero,1,zero",
        framework="tensorflow",
        versions=f">={NORM_FROM}",
        reason="the safe norm (tf-nightly 2026-08-23): a zero (flushed) norm has gradient 0, in every mode",
        link=TF_NORM_PR,
    ),
    *expect_keys(
        ["grad2[x**0@0]", "grad2[x**0@-0]"],
        "zero",
        framework="tensorflow",
        versions=f">={POW_FROM}",
        reason="from tf-nightly 2026-10-10 _PowGrad zeroes an infinite x**(y-1) where the upstream gradient is 0 "
        "(_GradCxPow in "
        "math_grad.py of 2.23.0.dev20261026): differentiating the first derivative 0 * x**-1 again sends a zero "
        "cotangent through it, so the second derivative at 0 is 0, not NaN (the first stays NaN: its cotangent "
        "is 1); no pull request for it turned up in a search, the file is the link",
        link=TF_MATH_GRAD,
    ),
    # ---- JAX
    expect(
        "seed[tensorflow#12071:gradient-alone]",
        "1,nan,1,1",
        framework="jax",
        mode="eager",
        versions="<0.11",
        reason="eager JAX runs the norm's forward as a program of its own whose output (the norm, kept for the "
        "backward pass) XLA computes as |x| = 1e-19, so the gradient is 1; jax.jit of the gradient alone divides by "
        "sqrt(x*x) with the subnormal 1e-38 flushed to 0 (XLA:CPU's denormals-are-zero): +inf, as TF",
        link="https://github.com/jax-ml/jax/issues/37762",
    ),
    expect(
        "seed[tensorflow#12071:gradient-alone]",
        "1,nan,1,+inf",
        framework="jax",
        mode="eager",
        device="cpu",
        versions=">=0.11",
        reason="measured with JAX 0.11.2 on the CPU (0.10.2 gave 1): eager JAX too now divides by sqrt(x*x) with "
        "the subnormal 1e-38 flushed to 0 by XLA:CPU's denormals-are-zero, so the gradient is +inf as under jit "
        "and in TF; the JAX change that moved it was not traced",
        link="https://github.com/jax-ml/jax/issues/37762",
    ),
    expect(
        "seed[tensorflow#12071]",
        "1,nan,1,+inf",
        framework="jax",
        mode="eager|jit",
        device="cpu",
        versions=">=0.11",
        reason="measured with JAX 0.11.2 on the CPU (0.10.2 gave 1): with the norm among the outputs too, the "
        "gradient now divides by the flushed sqrt(x*x) (XLA:CPU's denormals-are-zero) and is +inf, as in TF up "
        "to 2.21; the JAX change that moved it was not traced",
        link="https://github.com/jax-ml/jax/issues/37762",
    ),
    expect(
        "seed[tensorflow#12071:gradient-alone]",
        "1,nan,1,1",
        framework="jax",
        mode="jit",
        device="gpu",
        reason="XLA:GPU keeps float32 subnormals (denormals-are-zero is XLA:CPU's mode), so sqrt(x*x) of 1e-19 is "
        "1e-19 and the gradient 1 (measured on an H100, JAX 0.11.2)",
        link="https://github.com/jax-ml/jax/issues/19689",
    ),
    *expect_keys(
        ["grad[rsqrt@-0]"],
        "-inf",
        framework="jax",
        reason="rsqrt's JVP is g * -0.5 * rsqrt(x) / x: at x = -0, (-inf) / (-0) = +inf, times -0.5 = -inf; "
        "TF's RsqrtGrad (-0.5 * g * y**3) and PyTorch give +inf",
        link=JAX_LAX,
    ),
    expect(
        "side[rsqrt@-0]",
        "none",
        framework="jax",
        reason="rsqrt(-0) = -inf, so the right difference quotient (rsqrt(h) + inf) / h is +inf, not JAX's -inf",
        link=JAX_LAX,
    ),
    *expect_keys(
        ["dx[xlogy@x=0,y=0]", "dx[xlog1py@x=0,y=-1]"],
        "-inf",
        framework="jax",
        reason="xlogy's custom JVP is x_dot * log(y) + y_dot * x / y with no mask: log(0) = -inf for x",
        link=JAX_SPECIAL,
    ),
    *expect_keys(
        ["side_dx[xlogy@x=0,y=0]", "side_dx[xlog1py@x=0,y=-1]"],
        "both",
        framework="jax",
        reason="xlogy(+-h, 0) = +-h * log(0) = -+inf: both one-sided differences in x are -inf, JAX's answer",
        link=JAX_SPECIAL,
    ),
    *expect_keys(
        ["dx[xlogy@x=0,y<0]", "dx[xlog1py@x=0,y<-1]"],
        "nan",
        framework="jax",
        reason="the unmasked x-gradient log(y) is NaN for y < 0 (log1p(y) for y < -1); TF and PyTorch mask it to 0",
        link=JAX_SPECIAL,
    ),
    expect(
        "seed[tensorflow#2295]",
        "nan,+inf,0.624,zero",
        framework="jax",
        reason="jnp.clip's backward multiplies the cotangent by a 0/1 mask (max/min JVP), and pow's +inf at the "
        "clamped 0 times 0 is NaN at y = -0.5; TF's Maximum gradient and torch.clamp select (where) and give 0",
        link=JAX_LAX,
    ),
    # ---- PyTorch
    *expect_keys(
        ["grad[x**0@0]", "grad[x**0@-0]"],
        "zero",
        framework="torch",
        reason="pow_backward returns zeros_like(self) for the exponent 0; TF and JAX compute 0 * x**-1 = 0 * inf = NaN",
        link=TORCH_MANUAL,
    ),
    *expect_keys(
        ["side[x**0@0]", "side[x**0@-0]", "side_dx[pow@x=0,y=0]"],
        "both",
        framework="torch",
        reason="x**0 = 1 on both sides, so both one-sided differences are 0, PyTorch's answer",
        link=TORCH_MANUAL,
    ),
    *expect_keys(
        ["grad2[x**0@0]", "grad2[x**0@-0]"],
        raises("RuntimeError", r"does not require grad"),
        framework="torch",
        reason="the zeros pow_backward returns for the exponent 0 have no grad_fn, so differentiating the first "
        "derivative again raises",
        link=TORCH_MANUAL,
    ),
    *expect_keys(
        ["grad2[x**1@0]", "grad2[x**1@-0]"],
        "zero",
        framework="torch",
        reason="x**1's derivative is 1 * x.pow(0), whose own backward is pow_backward for the exponent 0: zeros; TF "
        "and JAX differentiate y * x**(y-1) to 0 * x**-1 = NaN",
        link=TORCH_MANUAL,
    ),
    *expect_keys(
        ["grad[x**0.5@-0]", "grad2[x**1.5@-0]"],
        "-inf",
        framework="torch",
        reason=f"the CPU pow kernel computes a scalar exponent -0.5 as rsqrt: {NEG_ZERO_RSQRT}",
        link=TORCH_POW_KERNEL,
    ),
    expect(
        "side[x**0.5@-0]",
        "none",
        framework="torch",
        reason="the -inf that rsqrt gives at -0 is no one-sided limit (the right one is +inf)",
        link=TORCH_POW_KERNEL,
    ),
    expect(
        "dx[pow@x=0,y=0]",
        "zero",
        framework="torch",
        reason="pow_backward_self is where(exponent == 0, 0, grad * exponent * self**(exponent - 1))",
        link=TORCH_MANUAL,
    ),
    *expect_keys(
        ["dy[atan2@y=0,x=0]", "dx[atan2@y=0,x=0]"],
        "zero",
        framework="torch",
        reason="atan2_backward fills the reciprocal of y*y + x*x with 0 where it is 0; TF and JAX compute 0 / 0",
        link=TORCH_MANUAL,
    ),
    expect(
        "side_dx[atan2@y=0,x=0]",
        "right",
        framework="torch",
        reason="atan2(0, h) = 0 for h > 0: the right difference in x is 0 (the left is unbounded: atan2(0, -h) = pi)",
        link=TORCH_MANUAL,
    ),
    *expect_keys(
        ["grad[norm@x=0]", "seed[pytorch#2421]"],
        "zero",
        framework="torch",
        reason="norm_backward masks where the norm is 0 (masked_fill_(norm == 0, 0)): the subgradient 0, the fix of "
        "pytorch#2421; TF and JAX compute x / 0 = NaN",
        link="https://github.com/pytorch/pytorch/issues/2421",
    ),
    expect(
        "seed[tensorflow#12071:gradient-alone]",
        "1,zero,1,1",
        framework="torch",
        reason="norm_backward gives the zero row the subgradient 0 and torch does not flush 1e-38: gradient 1",
        link=TORCH_MANUAL,
    ),
    expect(
        "seed[tensorflow#12071]",
        "1,zero,1,1",
        framework="torch",
        reason="norm_backward gives the zero row the subgradient 0, and torch's vector norm of [1e-19] is 1e-19 "
        "(no flush to zero), so its gradient is 1",
        link=TORCH_MANUAL,
    ),
    *expect_keys(
        ["grad[reduce_std@constant]", "grad[reduce_std@one-element]", "seed[tensorflow#56830]"],
        "zero",
        framework="torch",
        reason="std_backward masks where the std is 0 (pytorch#4320, fixed by #45468); TF and JAX differentiate "
        "sqrt(variance) at 0: 0 * inf = NaN",
        link="https://github.com/pytorch/pytorch/issues/4320",
    ),
    expect(
        "side[reduce_std@one-element]",
        "both",
        framework="torch",
        reason="the std of one element is 0 whatever it is: both one-sided differences are 0, PyTorch's answer",
        link="https://github.com/pytorch/pytorch/issues/4320",
    ),
    expect(
        "grad[l2_normalize@x=0]",
        "1e+12",
        framework="torch",
        reason="F.normalize is x / max(||x||, eps=1e-12): 1/eps at the zero vector; tf.math.l2_normalize is "
        "x * rsqrt(max(sum(x**2), epsilon=1e-12)): 1/sqrt(epsilon) = 1e6",
        link="https://pytorch.org/docs/stable/generated/torch.nn.functional.normalize.html",
    ),
    expect(
        "side[l2_normalize@x=0]",
        "none",
        framework="torch",
        reason="the eps only acts below ||x|| = 1e-12, far inside the difference step: F.normalize(+-h e_i) = "
        "+-e_i and both quotients grow without bound, not 1e12",
        link="https://pytorch.org/docs/stable/generated/torch.nn.functional.normalize.html",
    ),
    # ---- ops a framework does not have
    # (xdivy's and divide_no_nan's own keys: declared by their entries, from their absent spellings)
    *(
        expect("seed[tensorflow#60715]", "unavailable", framework=fw, reason=why, link=link)
        for fw, (why, link) in db.NO_XDIVY.items()
    ),
    # (l2_normalize's and moments' own keys: declared by their entries, from their absent spellings)
    # appended last: a declaration's id is its place in this list, which the baselines record
    expect(
        "seed[tensorflow#12071:gradient-alone]",
        "1,nan,1,1",
        framework="jax",
        mode="eager",
        device="gpu",
        reason="on the GPU, eager JAX (0.11.2, measured on an H100) keeps computing the norm as |x| = 1e-19 "
        "(XLA:GPU keeps float32 subnormals), so the gradient is 1",
        link="https://github.com/jax-ml/jax/issues/19689",
    ),
]


# ---------------------------------------------------------------- the elementwise entries
ZEROS = (0.0, -0.0)


def _entry_name(key: str) -> str | None:
    """The op a key is about (``grad2[x**0@-0]`` -> ``x**0``; None for a seed's key)."""
    inner = key.partition("[")[2]
    return inner.partition("@")[0] if "@" in inner else None


def _declared(name, keys=(), absent=None):
    """The entry ``name``'s declarations: DECLARED's under its keys, and every key declared
    ``unavailable`` for each framework the entry has no spelling in (``absent``: reason, link)."""
    own = [e for e in DECLARED if _entry_name(e.key) == name]
    return own + [expect(k, "unavailable", framework=fw, reason=why, link=link)
                  for fw, (why, link) in (absent or {}).items() for k in keys]  # fmt: skip


def elementwise(name, domain, points, **own):
    """An elementwise op with singular points, as an op-table entry of this behaviour: the op
    database's ``name`` (its spellings, reference, f' and f'': :mod:`suite.ops.db`), or an op of
    its own (``own``: x**p with a constant p: its spellings, reference and derivatives); the
    domain where f is real, and per singular point (-0.0 and 0.0 are distinct) the kinds every
    framework answers by default, ``(point, grad, side)``, or ``(point, grad, side, grad2)``
    where the second derivative is asked for. Its declared divergences are DECLARED's under its keys."""
    fields = dict(
        domain={"float32": domain, "float64": domain},
        points=tuple(
            ops.Point(_label(at), (at,), grad, also=(("side", side), *(("grad2", k) for k in grad2)))
            for at, grad, side, *grad2 in points
        ),
        declared=_declared(name),
    )
    if own:
        return ops.register(ops.Op(name, behaviour="singular-point-gradients", **own, **fields))
    return ops.view("singular-point-gradients", name, closed_forms=True, **fields)


def _pow(p):
    """x ** p with a constant p: the op database's pow with that exponent, f' and f'' without
    0 * x**-1, the domain (real for x < 0 only for an integer p)."""

    def spelled(pow_):
        def fn(module, x):
            return pow_(module, x, p)

        fn.__name__ = fn.__qualname__ = f"{pow_.__name__}(x, {p:g})"
        return fn

    df = (lambda x: p * x ** (p - 1)) if p != 0 else (lambda x: 0 * x)
    d2f = (lambda x: p * (p - 1) * x ** (p - 2)) if p not in (0, 1) else (lambda x: 0 * x)
    domain = (-4.0, 4.0) if float(p).is_integer() else (0.0, 4.0)
    tf, jax, torch = (spelled(db.fact("pow").spellings[fw]) for fw in ("tensorflow", "jax", "torch"))
    return dict(tensorflow=tf, jax=jax, torch=torch, reference=_np(lambda x: x**p), derivatives=(_np(df), _np(d2f)),
                domain=domain)  # fmt: skip


POWERS = (  # x**p at 0 and -0; the second derivative where the brief asks for it (x**2's is 2 everywhere)
    (0.0, ((0.0, "nan", "none", "nan"), (-0.0, "nan", "none", "nan"))),
    (0.5, ((0.0, "+inf", "right", "-inf"), (-0.0, "+inf", "right", "-inf"))),
    (1.0, ((0.0, "1", "both", "nan"), (-0.0, "1", "both", "nan"))),
    (1.5, ((0.0, "zero", "right", "+inf"), (-0.0, "zero", "right", "+inf"))),
    (2.0, ((0.0, "zero", "both"), (-0.0, "zero", "both"))),
)
ELEMENTWISE = {op.name: op for op in (
    elementwise("sqrt", (0, 10), ((0.0, "+inf", "right", "-inf"), (-0.0, "-inf", "none", "+inf"))),
    elementwise("rsqrt", (0, 10), ((0.0, "-inf", "right", "+inf"), (-0.0, "+inf", "right", "-inf"))),
    elementwise("log", (0, 10), ((0.0, "+inf", "right"), (-0.0, "-inf", "none"))),
    elementwise("log1p", (-1, 10), ((-1.0, "+inf", "right"),)),
    elementwise("acos", (-1, 1), ((1.0, "-inf", "left"), (-1.0, "-inf", "right"))),
    elementwise("asin", (-1, 1), ((1.0, "+inf", "left"), (-1.0, "+inf", "right"))),
    *(elementwise(f"x**{p:g}", points=points, **_pow(p)) for p, points in POWERS),
)}  # fmt: skip
SECOND_ORDER = [name for name, op in ELEMENTWISE.items() if op.has("grad2")]


# ---------------------------------------------------------------- the binary entries
@dataclasses.dataclass(frozen=True)
class Binary:
    """A binary entry and how its property draws: ``configs`` (Config: each argument a value or
    ranges, the directions it may move, the default kinds), ``regular``: each argument's ranges
    away from every configuration, ``named``: (name, closed form of the second argument) the
    first argument's gradient may equal."""

    op: ops.Op
    args: tuple
    configs: tuple
    regular: tuple
    named: tuple = ()


def binary(name, args, configs, regular, named=()):
    """The op database's binary op ``name`` (its spellings, reference and partial derivatives
    ``grads(a, b)``: :mod:`suite.ops.db`) with singular configurations, as an op-table entry:
    ``args``, the arguments' own names (atan2 takes y, x). Where a framework has no such op
    (the database's ``absent``), every key of the entry is declared ``unavailable`` for it.
    Keys: ``d<arg>[<op>@<config>]`` and ``side_d<arg>[...]``."""
    a, b = args
    points = tuple(
        ops.Point(c.label, (c.a, c.b), c.kinds[0], key=f"d{a}[{name}@{c.label}]",
                  also=((f"d{b}", c.kinds[1]), (f"side_d{a}", c.kinds[2]), (f"side_d{b}", c.kinds[3])))
        for c in configs
    )  # fmt: skip
    keys = [k for c in configs for k in (f"d{a}[{name}@{c.label}]", f"d{b}[{name}@{c.label}]")]
    keys += [f"side_{k}" for k in keys]
    declared = _declared(name, keys, db.fact(name).absent)
    op = ops.view("singular-point-gradients", name, closed_forms=True, points=points, declared=declared)
    return Binary(op, args, configs, regular, tuple((k, _np(fn)) for k, fn in named))


BOTH = ((-4.0, -0.25), (0.25, 4.0))
BINARY = {b.op.name: b for b in (
    binary("pow", ("x", "y"),
           (Config("x=0,y=0", 0.0, 0.0, ((1,), (1, -1)), ("nan", "zero", "none", "none")),
            Config("x=0,0<y<1", 0.0, ((0.2, 0.8),), ((1,), ()), ("+inf", "zero", "right", "both")),
            Config("x=0,y=1", 0.0, 1.0, ((1,), ()), ("1", "zero", "both", "both")),
            Config("x=0,y>1", 0.0, ((1.25, 3.0),), ((1,), ()), ("zero", "zero", "right", "both"))),
           (((0.25, 4.0),), ((-2.0, 3.0),))),
    binary("xlogy", ("x", "y"),
           (Config("x=0,y=0", 0.0, 0.0, ((1, -1), (1,)), ("zero", "nan", "none", "none")),
            Config("x=0,y>0", 0.0, ((1.5, 8.0),), kinds=("log(y)", "zero", "both", "both")),
            Config("x=0,y<0", 0.0, ((-4.0, -0.5),), ((), ()), ("zero", "zero", "none", "both"))),
           (BOTH, ((0.25, 8.0),)), named=(("log(y)", np.log),)),
    binary("xlog1py", ("x", "y"),
           (Config("x=0,y=-1", 0.0, -1.0, ((1, -1), (1,)), ("zero", "nan", "none", "none")),
            Config("x=0,y>-1", 0.0, ((0.5, 8.0),), kinds=("log1p(y)", "zero", "both", "both")),
            Config("x=0,y<-1", 0.0, ((-5.0, -1.5),), ((), ()), ("zero", "zero", "none", "both"))),
           (BOTH, ((-0.75, 8.0),)), named=(("log1p(y)", np.log1p),)),
    binary("xdivy", ("x", "y"),
           (Config("x=0,y=0", 0.0, 0.0, ((1, -1), (1, -1)), ("zero", "zero", "none", "both")),
            Config("x=0,y!=0", 0.0, BOTH, kinds=("zero", "zero", "none", "both"))),
           (BOTH, BOTH), named=(("1/y", lambda y: 1 / y),)),
    binary("divide_no_nan", ("x", "y"),
           (Config("x=0,y=0", 0.0, 0.0, ((1, -1), (1, -1)), ("zero", "zero", "both", "both")),
            Config("x!=0,y=0", BOTH, 0.0, ((), (1, -1)), ("zero", "zero", "both", "none"))),
           (BOTH, BOTH)),
    binary("atan2", ("y", "x"),
           (Config("y=0,x=0", 0.0, 0.0, ((1, -1), (1, -1)), ("nan", "nan", "none", "none")),), (BOTH, BOTH)),
)}  # fmt: skip


# ---------------------------------------------------------------- the reduction entries
@dataclasses.dataclass(frozen=True)
class Reduction:
    """A reduction entry and ``terms(x, w)``: the size of the terms that cancel in its gradient
    (the absolute floor of its comparisons), where rounding sets one."""

    op: ops.Op
    terms: Callable = None

    @property
    def configs(self) -> tuple:
        return tuple(p.name for p in self.op.points)


#: Each singular row as it is checked alone (row 0 of ROW_SHAPES).
ROWS = {"x=0": (0.0,) * 4, "constant": (2.0,) * 4, "one-element": (2.0,)}
NO_NORMALIZE = (
    "JAX has no l2_normalize (jax.nn has standardize, not normalize) and no moments (mean and var are separate calls)",
    "https://docs.jax.dev/en/latest/jax.nn.html",
)


def reduction(name, program, f, vjp, kinds, terms=None, absent=None):
    """A reduction over the last axis (or a row-wise normalisation) with singular rows, as an
    op-table entry: ``program``'s spellings (None where it has none: ``absent`` says why, and
    every key is declared ``unavailable`` there), float64 closed forms of f and of ``vjp(x,
    w)``, and per singular row (``x=0``: the zero vector; ``constant``; ``one-element``) the
    default kinds ``(grad, side)``. Keys: ``grad[<op>@<row>]``, ``side[<op>@<row>]``."""
    points = tuple(ops.Point(c, (ROWS[c],), grad, also=(("side", side),)) for c, (grad, side) in kinds.items())
    keys = [f"{k}[{name}@{c}]" for k in ("grad", "side") for c in kinds]
    fw = {f: getattr(program, f, None) for f in ("tensorflow", "jax", "torch")}
    op = ops.register(
        ops.Op(name, behaviour="singular-point-gradients", **fw, reference=_np(f), derivatives=(_np(vjp),),
               points=points, declared=_declared(name, keys, absent),
               absent=absent or {})
    )  # fmt: skip
    return Reduction(op, terms)


MOMENTS = {"constant": ("zero", "both"), "one-element": ("zero", "both")}
REDUCTIONS = {r.op.name: r for r in (
    reduction("norm", Norm, lambda x: np.linalg.norm(x, axis=-1),
              lambda x, w: w[:, None] * x / np.linalg.norm(x, axis=-1, keepdims=True), {"x=0": ("nan", "none")}),
    # l2_normalize of a one-element row is sign(x): its gradient w/|x| - w/|x| cancels to 0, up to rounding
    reduction("l2_normalize", L2Normalize, _l2n, _l2n_vjp, {"x=0": ("1e+06", "both")},
              _np(lambda x, w: np.abs(w) / np.linalg.norm(x, axis=-1, keepdims=True)), {"jax": NO_NORMALIZE}),
    reduction("reduce_std", ReduceStd, lambda x: x.std(-1), _moments_vjp(True),
              {"constant": ("nan", "none"), "one-element": ("nan", "none")}, _moments_terms(True)),
    reduction("reduce_variance", ReduceVariance, lambda x: x.var(-1), _moments_vjp(False), MOMENTS,
              _moments_terms(False)),
    reduction("moments", Moments, lambda x: x.var(-1), _moments_vjp(False), MOMENTS, absent={"jax": NO_NORMALIZE}),
)}  # fmt: skip
ENTRIES = {**ELEMENTWISE, **{k: b.op for k, b in BINARY.items()}, **{k: r.op for k, r in REDUCTIONS.items()}}
EXPECT = expectations(AGREED, *(e for e in DECLARED if _entry_name(e.key) not in ENTRIES))


def binary_keys(op):
    """The first-derivative keys of a binary entry, per configuration and argument."""
    case = BINARY[op]
    return [f"d{a}[{op}@{c.label}]" for c in case.configs for a in case.args]


def expectations_of(op) -> object:
    """Where ``op``'s keys are declared: its entry's."""
    return ENTRIES[op].expect


# ---------------------------------------------------------------- observations
def kind(d, named=None) -> str:
    """The kind of a gradient at a point: the op table's vocabulary (:func:`suite.ops.point_kind`)."""
    return ops.point_kind(d, named)


def side(g, f, arrays, i) -> str:
    """Which one-sided difference quotient of ``f`` in ``arrays[i]`` (float64) each gradient entry
    ``g`` equals: ``left``, ``right``, ``both`` or ``none`` (``mixed:...`` when entries differ).
    A side's limit is its quotient at finite_diff's step; +-inf where the quotient is infinite
    or grows without bound as the step shrinks 100-fold; NaN where f is undefined there.
    Agreement allows the quotient's own change between the two steps."""
    g = np.ravel(g).astype(np.float64)
    hits = [set() for _ in g]
    for where in ("left", "right"):
        steps = (finite_diff.ONE_SIDED_STEP, finite_diff.ONE_SIDED_STEP / 100)
        q1, q2 = (finite_diff.vjp(f, *arrays, side=where, eps=h)[i].ravel() for h in steps)
        for j, (v, a, b) in enumerate(zip(g, q1, q2)):
            lim = np.copysign(np.inf, b) if np.isfinite(b) and abs(b) > max(1e3, 5 * abs(a)) else a
            if np.isinf(v) or np.isinf(lim):
                close = v == lim
            else:
                close = abs(v - lim) <= max(finite_diff.ONE_SIDED_TOL * max(1.0, abs(lim)), 2 * abs(a - b))
            if close:
                hits[j].add(where)
    words = {"both" if len(h) == 2 else h.pop() if h else "none" for h in hits}
    return words.pop() if len(words) == 1 else "mixed:" + ",".join(sorted(words))


# Near a singular point the derivative's condition number grows like 1/distance: at 1e-4
# (float32) acos' = -1/sqrt(1 - x*x) loses ~3e-4 to the cancellation in 1 - x*x.
NEAR = (1e-4, 1e-1)
FAR = 0.25
NEAR_TOL = cmp.tolerance(float32=1e-3, float64=1e-9)


def close_off_singular(record, *, name, out, ref, tags, oracle, scale=None):
    """``out`` against ``ref`` near the singular points (NEAR_TOL) and away from them (GRAD); on
    them each framework's own answer is an observation, not a comparison. ``scale``: per
    entry, the size of the terms that cancel to ``ref`` (sets the absolute floor)."""
    out, ref = np.asarray(out), np.asarray(ref)
    for where, tol in (("near", NEAR_TOL), ("regular", cmp.GRAD)):
        on = tags == where
        if on.any():
            s = None if scale is None else float(np.max(np.broadcast_to(scale, out.shape)[on]))
            record.close(name=f"{name}[{where}]", out=out[on], ref=ref[on], oracle=oracle, tol=tol, scale=s)


def hold(record, oracles, *, op, program, static, arrays, w, tags, out, grads, names, f, vjp, value=None,
         named=None, scale=None):  # fmt: skip
    """The property every family shares, given the subject's ``out`` and ``grads``: on each
    singular point (``tags`` names it per entry, or per row) the gradient's kind is declared
    (``{name}[{op}@{tag}]``); near the points and away from them, value and gradients equal the
    closed forms ``f``/``vjp`` (float64) and the oracles that have the op, and (float64, away
    from them) central differences of ``f``. ``value``: the closed form of ``out`` when it is
    not ``f`` but a first derivative (``d1``), compared off the singular points only."""
    dtype, as64 = arrays[0].dtype, [a.astype(np.float64) for a in arrays]
    whole = value is None
    if whole:
        record.close(name="value", out=out, ref=f(*as64).astype(dtype), oracle="closed-form", tol=cmp.VALUE)
    else:
        close_off_singular(record, name="d1", out=out, ref=value(*as64).astype(dtype), tags=tags, oracle="closed-form",
                           scale=scale)  # fmt: skip
    refs = vjp(*as64, w)
    for i, (name, g, ref) in enumerate(zip(names, grads, refs)):
        g = np.asarray(g, np.float64)
        d = g / (w if w.ndim == g.ndim else w[..., None])
        _check_kinds(record, op, name, d, tags, named if i == 0 else None)
        close_off_singular(record, name=name, out=grads[i], ref=ref.astype(dtype), tags=tags, oracle="closed-form",
                           scale=scale)  # fmt: skip
    have = [o for o in oracles if spelled(program, o, static)]
    raws = record.against(have, program, *arrays, cotangent=w, got={"value": out} if whole else {}, tol=cmp.VALUE,
                          **static)  # fmt: skip
    for o, (ref_out, ref_grads) in zip(have, raws):
        if not whole:
            close_off_singular(record, name="d1", out=out, ref=ref_out, tags=tags, oracle=o.id, scale=scale)
        for name, g, ref in zip(names, grads, ref_grads):
            close_off_singular(record, name=name, out=g, ref=ref, tags=tags, oracle=o.id, scale=scale)
    if dtype == np.float64:
        _against_differences(record, f, as64, w, tags, names, grads)


def _check_kinds(record, op, name, d, tags, named) -> None:
    """The declared kind of the derivative ``d`` at each singular point ``tags`` names (against
    the closed forms ``named`` where given)."""
    for label in dict.fromkeys(t for t in tags.ravel() if t not in ("near", "regular")):
        on = tags == label
        ref_named = {k: v[on] for k, v in (named or {}).items()}
        record.check(expectations_of(op), **{f"{name}[{op}@{label}]": kind(d[on], ref_named)})


def _against_differences(record, f, as64, w, tags, names, grads) -> None:
    """Away from the points (float64), each gradient against central differences of ``f``."""
    regular = tags == "regular"
    if not regular.any():
        return
    sub = [a[regular] for a in as64]
    fds = finite_diff.vjp(f, *sub, cotangent=w[regular])
    for name, g, fd in zip(names, grads, fds):
        record.close(name=f"{name}[regular]", out=g[regular], ref=fd, oracle="finite-difference",
                     tol=cmp.FINITE_DIFF, scale=np.max(np.abs(f(*sub) * w[regular])))  # fmt: skip


# ---------------------------------------------------------------- strategies
@ss.cached
def _floats(lo, hi):
    """Float32-representable values, so a float32 and a float64 draw hold the same numbers."""
    lo, hi = float(np.float32(lo)), float(np.float32(hi))
    return ss.floats(np.float32, lo, hi)


@ss.cached
def _values(spec):
    return st.just(spec) if isinstance(spec, float) else st.one_of(*(_floats(lo, hi) for lo, hi in spec))


# One shape per family (XLA and jax.jit compile per shape); reductions need a one-element axis too.
ELEMENT_SHAPES = ((2, 3),)
PAIR_SHAPES = ((2, 4),)
ROW_SHAPES = ((3, 4), (3, 1))


def _at(op) -> tuple:
    """The singular points of an elementwise entry (-0.0 and 0.0 distinct)."""
    return tuple(p.at[0] for p in op.points)


@ss.cached
def _elements(domain, points):
    """An entry of x: on a singular point, near one on a side where f is real, or regular."""
    lo, hi = domain
    sides = [(p, s) for p in points for s in (1, -1) if lo <= p + s * NEAR[1] <= hi]
    near = st.sampled_from(sides).flatmap(lambda ps: _floats(*NEAR).map(lambda e: ps[0] + ps[1] * e))
    regular = _floats(lo, hi).filter(lambda v: min(abs(v - p) for p in points) >= FAR)
    return st.one_of(st.sampled_from(points), near, regular)


@st.composite
def elementwise_inputs(draw, op):
    """(x, tags, w): x's first entries are the singular points, the others on them, near them on
    every side where f is real, or at least FAR away; ``tags``: each entry's point, ``near``
    or ``regular``."""
    d, shape = draw(ss.float_dtypes()), draw(ss.choice(ELEMENT_SHAPES), label="shape")
    points = _at(op)
    element = _elements(op.domain["float64"], points)
    x = np.array([*points, *(draw(element, label="x") for _ in range(np.prod(shape) - len(points)))], d)
    dist = np.min([np.abs(x.astype(np.float64) - p) for p in points], axis=0)
    at = [next(_label(p) for p in points if v == p and np.signbit(v) == np.signbit(p)) if v in points
          else "near" if e < FAR else "regular" for v, e in zip(x, dist)]  # fmt: skip
    return x.reshape(shape), np.array(at).reshape(shape), draw(ss.cotangents(shape, d))


@st.composite
def binary_inputs(draw, case):
    """(a, b, tags, w): one entry per configuration first, then configurations, points near
    them (a fixed argument moved 1e-4..1e-1 where the op is defined) and regular points."""
    d, shape = draw(ss.float_dtypes()), draw(ss.choice(PAIR_SHAPES), label="shape")
    movable = [c for c in case.configs if any(c.near)]

    def entry(i):
        how = "at" if i < len(case.configs) else draw(ss.choice(("at", "near", "regular")))
        if how == "regular" or (how == "near" and not movable):
            return (*(draw(_values(r)) for r in case.regular), "regular")
        c = case.configs[i] if i < len(case.configs) else draw(ss.choice(case.configs if how == "at" else movable))
        ab = [draw(_values(c.a)), draw(_values(c.b))]
        for k, signs in enumerate(c.near if how == "near" else ()):
            if signs:
                ab[k] += draw(ss.choice(signs)) * draw(_floats(*NEAR))
        return (*ab, c.label if how == "at" else "near")

    a, b, tags = zip(*(entry(i) for i in range(int(np.prod(shape)))))
    return (*(np.array(v, d).reshape(shape) for v in (a, b)), np.array(tags).reshape(shape),
            draw(ss.cotangents(shape, d)))  # fmt: skip


ZERO = st.just(0.0)


@st.composite
def reduction_inputs(draw, op):
    """(x, tags, w): rows c + s * v with v = +-(1, -1, u...) (std >= 0.7 s): the first row singular
    (s = 0: the zero vector, or a constant c), the others singular, near (s = 1e-4..1e-1, from
    1e-2 for moments, whose deviations lose |c| * eps to the mean) or regular (0.5..4);
    ``tags`` per row."""
    d, (rows, n) = draw(ss.dtypes_and_shapes(shapes=ROW_SHAPES), label="dtype, shape")
    moments = REDUCTIONS[op].configs == tuple(MOMENTS)
    x = np.zeros((rows, n))
    for r in range(rows):
        c = draw(ss.either(ZERO, _floats(-2.0, 2.0)), label="c") if moments and n > 1 else 0.0
        v = np.array([1.0, -1.0, *(draw(_floats(-1.0, 1.0)) for _ in range(n - 2))][:n]) * draw(ss.choice((1, -1)))
        near = _floats(1e-2 if moments else NEAR[0], NEAR[1])
        x[r] = c + (0.0 if r == 0 else draw(ss.either(ZERO, near, _floats(0.5, 4.0)), label="s")) * v
    dist = x.std(-1) if moments else np.linalg.norm(x, axis=-1)
    at = REDUCTIONS[op].configs[n == 1] if moments else "x=0"
    tags = np.where(dist == 0, at, np.where(dist < FAR, "near", "regular"))
    return x.astype(d), tags, draw(ss.cotangents((rows, n) if op == "l2_normalize" else (rows,), d))


# ---------------------------------------------------------------- properties
@pytest.mark.parametrize("op", ELEMENTWISE)
@given(data=st.data())
def test_elementwise_gradient_at_singular_point(subject, oracles, record, op, data):
    """sqrt, rsqrt, log, log1p, acos, asin, x**p at each singular point (and -0): the gradient over
    the upstream gradient is the declared kind; near the point and away from it, f'(x) * w,
    the oracles' and (float64) central differences."""
    entry = ELEMENTWISE[op]
    df, _ = entry.derivatives
    x, tags, w = data.draw(elementwise_inputs(entry), label="x, tags, w")
    record.example(x=x, w=w, op=op)
    out, grads = subject.vjp(entry.program.of(subject), x, cotangent=w)
    # f'(x) w per element, relative to itself (a product: no cancellation)
    hold(record, oracles, op=op, program=entry.program, static={}, arrays=[x], w=w, tags=tags, out=out, grads=grads,
         names=["grad"], f=entry.reference, vjp=lambda x, w: [df(x) * w], scale=0.0)  # fmt: skip


@pytest.mark.parametrize("op", SECOND_ORDER)
@given(data=st.data())
def test_second_derivative_at_singular_point(subject, oracles, record, op, data):
    """d/dx of the framework's own f'(x) (nested tapes, tf.gradients of tf.gradients, jax.grad,
    create_graph): the declared kind at each point; f''(x) * w near and away from it."""
    entry = ELEMENTWISE[op]
    df, d2f = entry.derivatives
    x, tags, w = data.draw(elementwise_inputs(entry), label="x, tags, w")
    record.example(x=x, w=w, op=op)
    try:
        d1, grads = subject.vjp(FirstDerivative.of(subject), x, cotangent=w, op=op)
    except Exception as e:  # PyTorch: x**0's first derivative is a constant with no graph
        record.check(entry.expect, **{entry.also_key("grad2", p): cmp.error_name(e) for p in entry.points})
        return
    good = [o for o in oracles if not (o.framework == "torch" and op == "x**0")]  # it raises (declared)
    # f'(x) and f''(x) w per element, relative to themselves (products and quotients of x)
    hold(record, good, op=op, program=FirstDerivative, static={"op": op}, arrays=[x], w=w, tags=tags, out=d1,
         grads=grads, names=["grad2"], f=df, value=df, vjp=lambda x, w: [d2f(x) * w], scale=0.0)  # fmt: skip


@pytest.mark.parametrize("op", BINARY)
@given(data=st.data())
def test_binary_gradient_at_singular_point(subject, oracles, record, op, data):
    """pow, xlogy, xlog1py, xdivy, divide_no_nan, atan2: both arguments' gradients at each
    configuration (x = 0 with y = 0, y > 0, y < 0; y = 0; the origin) are the declared kinds;
    near them and away from them, the closed form, the oracles and central differences."""
    case = BINARY[op]
    entry, (grads_of,) = case.op, case.op.derivatives
    a, b, tags, w = data.draw(binary_inputs(case), label="a, b, tags, w")
    record.example(**{case.args[0]: a, case.args[1]: b, "w": w, "op": op})
    if not entry.spelled(subject.framework):
        record.check(entry.expect, **{k: "unavailable" for k in binary_keys(op)})
        return
    out, grads = subject.vjp(entry.program.of(subject), a, b, cotangent=w)
    named = {k: fn(b) for k, fn in case.named}
    # each partial per element, relative to itself: products and quotients (atan2's x^2 + y^2 adds positive terms)
    hold(record, oracles, op=op, program=entry.program, static={}, arrays=[a, b], w=w, tags=tags, out=out,
         grads=grads, names=[f"d{arg}" for arg in case.args], f=entry.reference, named=named,
         vjp=lambda a, b, w: [g * w for g in grads_of(a, b)], scale=0.0)  # fmt: skip


@pytest.mark.parametrize("op", REDUCTIONS)
@given(data=st.data())
def test_reduction_gradient_at_singular_row(subject, oracles, record, op, data):
    """norm and l2_normalize at the zero vector; std, variance and moments of a constant row and
    of a one-element row: the declared kind; near and away from them, the closed form, the
    oracles and central differences."""
    case = REDUCTIONS[op]
    entry, (vjp,) = case.op, case.op.derivatives
    x, tags, w = data.draw(reduction_inputs(op), label="x, tags, w")
    record.example(x=x, w=w, op=op)
    if not entry.spelled(subject.framework):
        record.check(entry.expect, **{entry.key(p): "unavailable" for p in entry.points})
        return
    out, grads = subject.vjp(entry.program.of(subject), x, cotangent=w)
    scale = None if case.terms is None else case.terms(x, w)
    hold(record, oracles, op=op, program=entry.program, static={}, arrays=[x], w=w, tags=tags, out=out, grads=grads,
         names=["grad"], f=entry.reference, vjp=lambda x, w: [vjp(x, w)], scale=scale)  # fmt: skip


# ---------------------------------------------------------------- edge examples
@dataclasses.dataclass(frozen=True)
class Edge:
    """One singular point of ``op`` and one argument (``i``) of its program, in float64: the
    point's own ``arrays`` (one entry, or one row), placed at ``at`` in ``padded`` arrays of the
    shapes the properties above draw, whose other entries (rows) are regular. The upstream
    gradient ``w`` is 1 at the point and 0 elsewhere, so the gradient there is the one of the
    point alone; running the property's own signature reuses what the compiled modes built
    for it (a signature of the point's own would be traced and compiled once more per op)."""

    key: str
    program: type
    static: dict
    arrays: list
    i: int
    named: dict
    padded: list
    at: tuple
    w: np.ndarray

    def embed(self, *arrays):
        out = [p.copy() for p in self.padded]
        for o, a in zip(out, arrays):
            o[self.at] = a
        return out

    def run(self, subject, fn, *arrays):
        """(value, gradients) at the point, through the padded signature."""
        y, grads = subject.vjp(fn, *self.embed(*arrays), cotangent=self.w, **self.static)
        return np.asarray(y)[self.at], [None if g is None else np.asarray(g)[self.at] for g in grads]


def _regular(op):
    """An entry where the elementwise ``op``'s f and f' are finite, FAR from every singular point."""
    lo, hi = op.domain["float64"]

    def fits(c):
        with np.errstate(all="ignore"):
            c1 = np.array([c])
            finite = np.isfinite(op.reference(c1)).all() and np.isfinite(op.derivatives[0](c1)).all()
        return lo <= c <= hi and min(abs(c - p) for p in _at(op)) >= FAR and finite

    return next(c for c in (0.5, 2.0, -0.5, -2.0) if fits(c))


def _one_hot(shape, at):
    w = np.zeros(shape)
    w[at] = 1.0
    return w


def edge_points(op) -> list[Edge]:
    """Per singular point and argument of ``op`` (one point each: an infinite value elsewhere
    would swamp the sums the differences take), in the float64 signature of its property."""
    first = (0, slice(0, 1))  # the point is entry [0, 0] of the property's (rows, columns)
    if op in ELEMENTWISE:
        entry = ELEMENTWISE[op]
        (shape,) = ELEMENT_SHAPES
        padded, w = [np.full(shape, _regular(entry))], _one_hot(shape, first)
        return [Edge(entry.key(p), entry.program, {}, [np.array(p.at)], 0, {}, padded, first, w)
                for p in entry.points]  # fmt: skip
    if op in BINARY:
        case = BINARY[op]
        (shape,) = PAIR_SHAPES
        padded = [np.full(shape, float(np.mean(r[-1]))) for r in case.regular]
        w = _one_hot(shape, first)
        return [Edge(f"d{arg}[{op}@{c.label}]", case.op.program, {}, list(c.representative()), i,
                     {k: fn(c.representative()[1]) for k, fn in case.named} if i == 0 else {}, padded, first, w)
                for c in case.configs for i, arg in enumerate(case.args)]  # fmt: skip
    entry = REDUCTIONS[op].op
    regular = {4: [1.0, -1.0, 0.5, 2.0], 1: [1.5]}  # rows 1 and 2
    edges = []
    for p in entry.points:
        row = np.array(p.at)
        shape = next(s for s in ROW_SHAPES if s[1] == row.shape[1])
        padded = [np.array([p.at[0], *[regular[shape[1]]] * (shape[0] - 1)])]
        w = _one_hot(shape if op == "l2_normalize" else shape[:1], slice(0, 1))
        edges.append(Edge(entry.key(p), entry.program, {}, [row], 0, {}, padded, slice(0, 1), w))
    return edges


@pytest.mark.parametrize("op", [*ELEMENTWISE, *BINARY, *REDUCTIONS])
@given(dtype=st.just(np.dtype(np.float64)))
def test_one_sided_differences_at_singular_point(subject, record, op, dtype):
    """Float64, exactly at each singular point (upstream gradient 1): the gradient's kind, and
    which one-sided difference quotient of the framework's own forward pass it equals."""
    record.example(op=op, dtype=dtype)
    for e in edge_points(op):
        key_side = "side[" + e.key[5:] if e.key.startswith("grad[") else "side_" + e.key
        if not spelled(e.program, subject, e.static):
            record.check(expectations_of(op), **{e.key: "unavailable", key_side: "unavailable"})
            continue
        fn = e.program.of(subject)
        g = e.run(subject, fn, *e.arrays)[1][e.i]
        record.check(expectations_of(op), **{e.key: kind(g, e.named)})
        record.check(expectations_of(op), **{key_side: side(g, lambda *a: e.run(subject, fn, *a)[0], e.arrays, e.i)})


# ---------------------------------------------------------------- seed examples
class ClippedPow(Program):
    """tensorflow#2295: clamp to [0, 1], then y ** (1 / 2.4) (sRGB gamma)."""

    def tensorflow(tf, y):
        return tf.pow(tf.minimum(tf.maximum(y, 0.0), 1.0), 1 / 2.4)

    def jax(jax, y):
        return jax.numpy.power(jax.numpy.clip(y, 0.0, 1.0), 1 / 2.4)

    def torch(torch, y):
        return torch.pow(torch.clamp(y, 0.0, 1.0), 1 / 2.4)


class SqrtProduct(Program):
    """tensorflow#4914: sqrt(c * x) with c = 0."""

    def tensorflow(tf, c, x):
        return tf.sqrt(c * x)

    def jax(jax, c, x):
        return jax.numpy.sqrt(c * x)

    def torch(torch, c, x):
        return torch.sqrt(c * x)


F32 = np.float32
SEEDS = {  # issue: (program, static, the issue's own inputs)
    "tensorflow#12071": (Norm, {}, (np.array([[1.0], [0.0], [1e-16], [1e-19]], F32),)),
    "pytorch#2421": (Norm, {}, (np.zeros(1, F32),)),
    "tensorflow#56830": (ReduceStd, {}, (np.array([-0.83151082]),)),
    "tensorflow#56873": (BINARY["xlog1py"].op.program, {}, (np.zeros(1, F32), np.ones(1, F32))),
    "tensorflow#60715": (
        BINARY["divide_no_nan"].op.program,
        {},
        (np.array([10.0, 20.0], F32), np.array([2.0, 0.0], F32)),
    ),
    "tensorflow#2295": (ClippedPow, {}, (np.array([-0.5, 0.0, 0.5, 2.0], F32),)),
    "tensorflow#4914": (SqrtProduct, {}, (np.array([0.0, 1.0], F32), np.array([2.0, 2.0], F32))),
}


class NormGradientAlone(Program):
    """tensorflow#12071's program as the issue runs it: the gradient of the rows' norms, with the
    norm itself not returned. What a compiled program returns decides what XLA rewrites: with
    the norm among the outputs it is computed as |x| (1e-19 for the float32 row [1e-19], whose
    square 1e-38 is flushed to 0), without it the gradient divides by the flushed sqrt(x*x)."""

    def tensorflow(tf, x):
        if in_v1_graph():
            return tf.gradients(tf.norm(x, axis=-1), x)[0]
        with tf.GradientTape() as tape:
            tape.watch(x)
            n = tf.norm(x, axis=-1)
        return tape.gradient(n, x)

    def jax(jax, x):
        return jax.grad(lambda x: jax.numpy.sum(jax.numpy.linalg.norm(x, axis=-1)))(x)

    def torch(torch, x):
        x = x.detach().requires_grad_(True)
        return torch.autograd.grad(torch.linalg.norm(x, dim=-1).sum(), x)[0]


@given(data=st.data())
def test_seed_norm_gradient_alone(subject, record, data):
    """tensorflow#12071's input, the gradient computed and returned alone (each entry's kind)."""
    (x,) = data.draw(st.just(SEEDS["tensorflow#12071"][2]), label="inputs")
    record.example(x=x)
    g = subject.run(NormGradientAlone.of(subject), x)
    record.check(EXPECT, **{"seed[tensorflow#12071:gradient-alone]": ",".join(kind(v) for v in np.ravel(g))})


@pytest.mark.parametrize("issue", SEEDS)
@given(data=st.data())
def test_seed_issue_gradients(subject, record, issue, data):
    """Each issue's own input: the kind of every gradient entry, per argument (``;``)."""
    program, static, arrays = SEEDS[issue]
    arrays = data.draw(st.just(arrays), label="inputs")
    record.example(issue=issue, **{f"arg{i}": a for i, a in enumerate(arrays)})
    if not spelled(program, subject, static):
        record.check(EXPECT, **{f"seed[{issue}]": "unavailable"})
        return
    _, grads = subject.vjp(program.of(subject), *arrays, **static)
    record.check(EXPECT, **{f"seed[{issue}]": "; ".join(",".join(kind(v) for v in np.ravel(g)) for g in grads)})
