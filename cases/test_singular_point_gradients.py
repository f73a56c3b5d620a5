"""Gradients at singular points: sqrt, pow, norms, moments, xlogy and friends where the derivative is undefined.

Where a function has no derivative (sqrt, rsqrt, log and log1p at their boundary, acos and
asin at +-1, x**p at 0, the Euclidean norm at the zero vector, the standard deviation of a
constant, atan2 at the origin) or is defined piecewise (xlogy, xlog1py, xdivy and
divide_no_nan at x = 0 or y = 0), each framework still returns a number: a one-sided limit
(+-inf), a subgradient (0), NaN (0 * inf or 0 / 0 inside the backward formula) or a
convention of its own. Per framework and mode this module records that number
(``grad[op@point]``, ``dx[...]``, ``dy[...]``, ``grad2[...]`` for the second derivative and
``grad3[...]`` to ``grad5[...]`` for the higher ones of x**3, x**4 and x**2.5, by nested
differentiation: the gradient over the upstream gradient, as ``+inf``, ``-inf``, ``nan``,
``zero``, its value (``6``, ``24``: k! at k = p), or the closed form it equals) and which
one-sided difference quotient of the framework's own forward pass it equals (``side...``:
``left``, ``right``, ``both``, ``none``). Near each point (1e-4..1e-1 away, on every side where
the function is defined) and away from it, gradients must equal the closed form, JAX and
PyTorch (where they have the op) and central differences. Signed zeros are points of their
own: sqrt'(-0) = 1 / (2 * -0) = -inf.

Every op is an entry of the op table (``suite.ops``): an elementwise op with a singular point is
one ``elementwise(...)`` call (the op database's spellings and closed forms, its domain, the kind
each point has by default and, in ``declared=``, where a framework answers otherwise), a binary
op or a reduction one ``binary(...)`` or ``reduction(...)`` call the same way. The property that
holds them at, near and away from their points is the op table's (``suite.ops.points``); this
module keeps the entries, their declarations and the issues' own inputs (seed examples).

Declared surprises (details at each declaration):

- TensorFlow up to 2.21 masks x = 0 out of the x-gradient of xlogy and xlog1py (0, not log(y))
  and its y-gradient at y = 0 (0, not 0 / 0); JAX's unmasked rule gives -inf and NaN there.
  xdivy's x-gradient at x = 0 is 0 too, not 1/y (TF alone has xdivy, so that is the default).
- PyTorch returns the subgradient 0 where TF and JAX give NaN: the norm at 0, the std of a
  constant or of one element, atan2 at the origin, d/dx x**0 and d2/dx2 x**1 at 0.
- TF function/graph: grappler rewrites pow(x, -0.5) into rsqrt, so x**0.5's gradient at -0 is
  -inf there and +inf in eager and XLA (PyTorch's pow kernel does the same).
- TensorFlow: the 4th and 5th derivatives of ``x**3`` and the 5th of ``x**4`` at 0 are NaN
  (``0 * pow(0, -1)``; tensorflow#35011); PyTorch's 5th derivative of ``x**3`` raises (its 4th
  is a constant without grad_fn).
- rsqrt'(-0) is -inf in JAX, +inf in TF and PyTorch; l2_normalize at 0 gives 1/sqrt(epsilon)
  in TF, 1/epsilon in PyTorch (F.normalize). JAX has no l2_normalize, xdivy, divide_no_nan
  or moments, PyTorch no xdivy or divide_no_nan (``unavailable``).
- tensorflow#12071: the norm of [1e-19] (float32) has gradient inf in TF's kernels, which
  flush the subnormal square to 0; a compiled program that returns the norm with its gradient
  computes the norm as |x| and gives 1, the gradient alone is +inf there too.
- tf-nightly (the 2.22 line from July 2026, placed nightly by nightly by ``autodiff-semantics
  bisect``): the x-gradients of xlogy and xlog1py (2026-07-17) and xdivy (2026-09-16) are unmasked
  (log(y), log1p(y), 1/y at x = 0, as in JAX), tf.norm's gradient at the zero vector is 0
  (PyTorch's subgradient, 2026-08-23), and the second derivative of x**0 and the 5th of x**3 at
  0 are 0 (2026-10-10); each declared from the first nightly with it, with its change.

Sources: https://github.com/tensorflow/tensorflow/issues/12071,
https://github.com/tensorflow/tensorflow/issues/4914,
https://github.com/tensorflow/tensorflow/issues/2295,
https://github.com/tensorflow/tensorflow/issues/56830,
https://github.com/tensorflow/tensorflow/issues/56873,
https://github.com/tensorflow/tensorflow/issues/60715,
https://github.com/tensorflow/tensorflow/issues/35011, https://github.com/pytorch/pytorch/issues/2421
"""

import numpy as np
import pytest
from hypothesis import given, strategies as st

from suite import ops
from suite.behaviours import Floor, behaviour
from suite.expectations import expect, expect_keys, expectations, raises
from suite.frameworks.tf_runner import in_v1_graph
from suite.ops import db, points
from suite.ops.points import ROWS, Around, Config, label
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
TORCH_GRAD = "https://docs.pytorch.org/docs/stable/generated/torch.autograd.grad.html"
POW_ISSUE = "https://github.com/tensorflow/tensorflow/issues/35011"

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
        POW_ISSUE,
        TF_MATH_GRAD,
    ],
    floor=Floor(
        "mixed",
        "Per element: the elementwise and binary entries' gradients, second and higher derivatives and "
        "first-derivative values (f'(x) w, products and quotients; atan2's x^2 + y^2 adds positive terms) are "
        "held relatively per element (scale 0.0), near the points at NEAR_TOL (the rounding of 1 - x*x in acos' "
        "and asin'). Their values keep the array floor: acos near 1 is computed from 1 - x*x, which cancels. "
        "Array-level: the reductions (norm, l2_normalize, std, variance, moments: a row's sum, at the terms that "
        "cancel) and the central differences (of sum(w f), absolute at its scale).",
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


# ---------------------------------------------------------------- closed forms
_np = db.quiet  # a float64 NumPy closed form that may meet log(0), 0 / 0 or sqrt(-x) quietly


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


# ---------------------------------------------------------------- the entries' declarations
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
# Declarations that two entries (or an entry and a seed) share: the scope, reason and link once.
GRAPPLER_RSQRT = dict(
    framework="tensorflow",
    mode="function|graph",
    reason=f"grappler's arithmetic optimizer (ConvertPowStage) runs in tf.function and v1 graphs: "
    f"{NEG_ZERO_RSQRT}; eager and XLA keep Pow",
    link=TF_GRAPPLER,
)
TORCH_RSQRT = dict(
    framework="torch",
    reason=f"the CPU pow kernel computes a scalar exponent -0.5 as rsqrt: {NEG_ZERO_RSQRT}",
    link=TORCH_POW_KERNEL,
)
POW_FOLDED = dict(
    framework="tensorflow",
    mode="function",
    versions="<2.17",
    reason="up to TF 2.16, grappler's constant folding in tf.function folds pow(x, 0) (and the x**0 in the "
    "derivative of x**1) to ones, so its gradient is 0 where eager and XLA give 0 * x**-1 = NaN (measured per "
    "release: 2.12-2.16 zero, 2.17 on NaN; switching constant folding off, not the arithmetic optimizer, "
    "brings the NaN back); the v1 graph rows give NaN in every release (measured)",
    link=TF_CONSTANT_FOLDING,
)
TORCH_POW_CONSTANT = dict(
    framework="torch",
    reason="x**0 = 1 on both sides, so both one-sided differences are 0, PyTorch's answer",
    link=TORCH_MANUAL,
)
POW_BELOW_ZERO_EXPONENT = dict(
    framework="tensorflow",
    link=POW_ISSUE,
    reason="TensorFlow's pow gradient is grad * n * pow(x, n - 1) with n a tensor: once the exponent reaches 0 the "
    "next derivative is 0 * pow(0, -1) = 0 * inf = NaN at x = 0 where the closed form (an integer n below the "
    "order) is 0; JAX's integer_pow and PyTorch's pow_backward stop at a zero exponent",
)
POW_BELOW_ZERO_FOLDED = dict(
    framework="tensorflow",
    mode="function",
    versions="<2.17",
    link=TF_CONSTANT_FOLDING,
    reason="up to TF 2.16 grappler's constant folding, which runs on a tf.function's graph, removes the "
    "0 * pow(0, -1) factor, so a traced nested tape gives the closed form 0 where eager gives NaN "
    "(measured on 2.12-2.16: NaN again with constant_folding off; 2.17 and later fold no longer, NaN); "
    "a v1 graph fed by placeholders and XLA keep the NaN",
)
NORM_SAFE = dict(
    framework="tensorflow",
    versions=f">={NORM_FROM}",
    reason="from tf-nightly 2026-08-23 tf.norm takes sqrt(maximum(sum(x**2), tiny)) under a where that keeps "
    "the exact 0, and "
    "the EuclideanNorm gradient is div_no_nan(x, norm): the subgradient 0 at the zero vector, PyTorch's answer",
    link=TF_NORM_PR,
)
TORCH_NORM = dict(
    framework="torch",
    reason="norm_backward masks where the norm is 0 (masked_fill_(norm == 0, 0)): the subgradient 0, the fix of "
    "pytorch#2421; TF and JAX compute x / 0 = NaN",
    link="https://github.com/pytorch/pytorch/issues/2421",
)
TORCH_STD = dict(
    framework="torch",
    reason="std_backward masks where the std is 0 (pytorch#4320, fixed by #45468); TF and JAX differentiate "
    "sqrt(variance) at 0: 0 * inf = NaN",
    link="https://github.com/pytorch/pytorch/issues/4320",
)


def xlogy_declared(name, pole, above, below) -> list:
    """The declarations of xlogy and xlog1py, one rule (_XLogyGrad and _XLog1pyGrad; JAX's unmasked
    JVP), at x = 0 with y at log's pole (``pole``: ``y=0``, ``y=-1``), ``above`` and ``below`` it."""
    return [
        expect(
            f"dx[{name}@x=0,{above}]",
            "zero",
            framework="tensorflow",
            versions=f"<{XLOGY_FROM}",
            reason="_XLogyGrad/_XLog1pyGrad compute the x-gradient as xlogy(x != 0, y): 0 wherever x = 0, although "
            "xlogy(x, y) = x*log(y) is linear in x (both one-sided differences are log(y)); JAX and PyTorch give "
            "log(y)",
            link="https://github.com/tensorflow/tensorflow/issues/56873",
        ),
        expect(
            f"side_dx[{name}@x=0,{above}]",
            "neither",
            framework="tensorflow",
            versions=f"<{XLOGY_FROM}",
            reason="the masked 0 is neither one-sided difference (both are log(y), log1p(y))",
            link="https://github.com/tensorflow/tensorflow/issues/119476",
        ),
        expect(
            f"dy[{name}@x=0,{pole}]",
            "zero",
            framework="tensorflow",
            reason="the y-gradient is xdivy(x, y) (xdivy(x, y + 1) for xlog1py): 0 where x = 0 even at y = 0, the "
            "derivative of xlogy(0, y) = 0; JAX and PyTorch compute x / y = 0 / 0 = NaN",
            link=TF_MATH_GRAD,
        ),
        expect(
            f"side_dy[{name}@x=0,{pole}]",
            "both",
            framework="tensorflow",
            reason="xlogy(0, y) is 0 for every y, so both one-sided differences in y are 0, TF's answer",
            link=TF_MATH_GRAD,
        ),
        # since tf-nightly builds of the 2.22 line (measured on 2.23.0.dev20261026; the bound is the first
        # nightly with the new answer, placed by `autodiff-semantics bisect`: reports/nightly/bisect.json)
        expect(
            f"dx[{name}@x=0,{pole}]",
            "-inf",
            framework="tensorflow",
            versions=f">={XLOGY_FROM}",
            reason="from tf-nightly 2026-07-17 _XLogyGrad/_XLog1pyGrad take the x-gradient as log(y) (log1p(y)) "
            "unmasked, for every x: "
            "log(0) = -inf at y = 0, as in JAX (until 2.21 the mask x != 0 gave 0)",
            link=TF_XLOGY_PR,
        ),
        expect(
            f"side_dx[{name}@x=0,{pole}]",
            "both",
            framework="tensorflow",
            versions=f">={XLOGY_FROM}",
            reason="xlogy(+-h, 0) = +-h * log(0) = -+inf: both one-sided differences in x are -inf, TF's unmasked "
            "answer from tf-nightly 2026-07-17",
            link=TF_XLOGY_PR,
        ),
        expect(
            f"dx[{name}@x=0,{below}]",
            "nan",
            framework="tensorflow",
            versions=f">={XLOGY_FROM}",
            reason="the unmasked x-gradient log(y) is NaN for y < 0 (log1p(y) for y < -1), as in JAX; PyTorch still "
            "masks it to 0",
            link=TF_XLOGY_PR,
        ),
        expect(
            f"dx[{name}@x=0,{pole}]",
            "-inf",
            framework="jax",
            reason="xlogy's custom JVP is x_dot * log(y) + y_dot * x / y with no mask: log(0) = -inf for x",
            link=JAX_SPECIAL,
        ),
        expect(
            f"side_dx[{name}@x=0,{pole}]",
            "both",
            framework="jax",
            reason="xlogy(+-h, 0) = +-h * log(0) = -+inf: both one-sided differences in x are -inf, JAX's answer",
            link=JAX_SPECIAL,
        ),
        expect(
            f"dx[{name}@x=0,{below}]",
            "nan",
            framework="jax",
            reason="the unmasked x-gradient log(y) is NaN for y < 0 (log1p(y) for y < -1); TF and PyTorch mask it to 0",
            link=JAX_SPECIAL,
        ),
    ]


def _unavailable(keys, absent) -> list:
    """Every key declared ``unavailable`` for each framework the entry has no spelling in
    (``absent``: reason, link)."""
    return [expect(k, "unavailable", framework=fw, reason=why, link=link)
            for fw, (why, link) in (absent or {}).items() for k in keys]  # fmt: skip


# ---------------------------------------------------------------- the elementwise entries
def elementwise(name, domain, points, declared=(), **own):
    """An elementwise op with singular points, as an op-table entry of this behaviour: the op
    database's ``name`` (its spellings, reference, f' and f'': :mod:`suite.ops.db`), or an op of
    its own (``own``: x**p with a constant p: its spellings, reference, derivatives and order); the
    domain where f is real, and per singular point (-0.0 and 0.0 are distinct) the kinds every
    framework answers by default, ``(point, grad, side)``, or ``(point, grad, side, grad2, grad3,
    ...)`` where the second derivative (and the higher ones, up to the entry's order) is asked
    for; ``declared``: where a framework answers otherwise."""
    fields = dict(
        domain={"float32": domain, "float64": domain},
        points=tuple(
            ops.Point(label(x), (x,), grad, also=(("side", side), *((f"grad{k}", d) for k, d in enumerate(higher, 2))))
            for x, grad, side, *higher in points
        ),
        declared=list(declared),
    )
    if own:
        return ops.register(ops.Op(name, behaviour="singular-point-gradients", **own, **fields))
    return ops.view("singular-point-gradients", name, closed_forms=True, **fields)


def _pow(p, order=2):
    """x ** p with a constant p: the op database's pow with that exponent as given (a Python int
    is JAX's integer_pow, whose derivatives stop at the exponent 0, as ``x**3`` written in JAX
    is; a float its pow), its derivatives up to ``order``, p (p-1) ... (p-k+1) x**(p-k), without
    0 * x**-1 where the coefficient is 0, and the domain (real for x < 0 only for an integer p)."""

    def spelled(pow_):
        def fn(module, x):
            return pow_(module, x, p)

        fn.__name__ = fn.__qualname__ = f"{pow_.__name__}(x, {p:g})"
        return fn

    def derivative(k):
        coeff = float(np.prod([p - i for i in range(k)]))
        return _np((lambda x: coeff * x ** (p - k)) if coeff else (lambda x: 0 * x))

    domain = (-4.0, 4.0) if float(p).is_integer() else (0.0, 4.0)
    tf, jax, torch = (spelled(db.fact("pow").spellings[fw]) for fw in ("tensorflow", "jax", "torch"))
    return dict(tensorflow=tf, jax=jax, torch=torch, reference=_np(lambda x: x**p), domain=domain, order=order,
                derivatives=tuple(derivative(k) for k in range(1, order + 1)))  # fmt: skip


ELEMENTWISE = {op.name: op for op in (
    elementwise("sqrt", (0, 10), ((0.0, "+inf", "right", "-inf"), (-0.0, "-inf", "neither", "+inf"))),
    elementwise(
        "rsqrt", (0, 10), ((0.0, "-inf", "right", "+inf"), (-0.0, "+inf", "right", "-inf")),
        declared=[
            expect(
                "grad[rsqrt@-0]",
                "-inf",
                framework="jax",
                reason="rsqrt's JVP is g * -0.5 * rsqrt(x) / x: at x = -0, (-inf) / (-0) = +inf, times -0.5 = -inf; "
                "TF's RsqrtGrad (-0.5 * g * y**3) and PyTorch give +inf",
                link=JAX_LAX,
            ),
            expect(
                "side[rsqrt@-0]",
                "neither",
                framework="jax",
                reason="rsqrt(-0) = -inf, so the right difference quotient (rsqrt(h) + inf) / h is +inf, not JAX's "
                "-inf",
                link=JAX_LAX,
            ),
        ],
    ),
    elementwise("log", (0, 10), ((0.0, "+inf", "right"), (-0.0, "-inf", "neither"))),
    elementwise("log1p", (-1, 10), ((-1.0, "+inf", "right"),)),
    elementwise("acos", (-1, 1), ((1.0, "-inf", "left"), (-1.0, "-inf", "right"))),
    elementwise("asin", (-1, 1), ((1.0, "+inf", "left"), (-1.0, "+inf", "right"))),
    # x**p at 0 and -0; the second derivative where the brief asks for it (x**2's is 2 everywhere)
    elementwise(
        "x**0", points=((0.0, "nan", "neither", "nan"), (-0.0, "nan", "neither", "nan")), **_pow(0.0),
        declared=[
            *expect_keys(["grad[x**0@0]", "grad[x**0@-0]", "grad2[x**0@0]", "grad2[x**0@-0]"], "zero", **POW_FOLDED),
            *expect_keys(
                ["side[x**0@0]", "side[x**0@-0]"],
                "both",
                framework="tensorflow",
                mode="function",
                versions="<2.17",
                reason="the folded x**0 has gradient 0, which both one-sided differences of x**0 = 1 give",
                link=TF_CONSTANT_FOLDING,
            ),
            *expect_keys(
                ["grad2[x**0@0]", "grad2[x**0@-0]"],
                "zero",
                framework="tensorflow",
                versions=f">={POW_FROM}",
                reason="from tf-nightly 2026-10-10 _PowGrad zeroes an infinite x**(y-1) where the upstream gradient "
                "is 0 (_GradCxPow in "
                "math_grad.py of 2.23.0.dev20261026): differentiating the first derivative 0 * x**-1 again sends a "
                "zero cotangent through it, so the second derivative at 0 is 0, not NaN (the first stays NaN: its "
                "cotangent is 1); no pull request for it turned up in a search, the file is the link",
                link=TF_MATH_GRAD,
            ),
            *expect_keys(
                ["grad[x**0@0]", "grad[x**0@-0]"],
                "zero",
                framework="torch",
                reason="pow_backward returns zeros_like(self) for the exponent 0; TF and JAX compute 0 * x**-1 = "
                "0 * inf = NaN",
                link=TORCH_MANUAL,
            ),
            *expect_keys(["side[x**0@0]", "side[x**0@-0]"], "both", **TORCH_POW_CONSTANT),
            *expect_keys(
                ["grad2[x**0@0]", "grad2[x**0@-0]"],
                raises("RuntimeError", r"does not require grad"),
                framework="torch",
                reason="the zeros pow_backward returns for the exponent 0 have no grad_fn, so differentiating the "
                "first derivative again raises",
                link=TORCH_MANUAL,
            ),
        ],
    ),
    elementwise(
        "x**0.5", points=((0.0, "+inf", "right", "-inf"), (-0.0, "+inf", "right", "-inf")), **_pow(0.5),
        declared=[
            expect("grad[x**0.5@-0]", "-inf", **GRAPPLER_RSQRT),
            expect(
                "side[x**0.5@-0]",
                "neither",
                framework="tensorflow",
                mode="function|graph",
                reason="the -inf that grappler's rsqrt gives at -0 is no one-sided limit (the right one is +inf)",
                link=TF_GRAPPLER,
            ),
            expect("grad[x**0.5@-0]", "-inf", **TORCH_RSQRT),
            expect(
                "side[x**0.5@-0]",
                "neither",
                framework="torch",
                reason="the -inf that rsqrt gives at -0 is no one-sided limit (the right one is +inf)",
                link=TORCH_POW_KERNEL,
            ),
        ],
    ),
    elementwise(
        "x**1", points=((0.0, "1", "both", "nan"), (-0.0, "1", "both", "nan")), **_pow(1.0),
        declared=[
            *expect_keys(["grad2[x**1@0]", "grad2[x**1@-0]"], "zero", **POW_FOLDED),
            *expect_keys(
                ["grad2[x**1@0]", "grad2[x**1@-0]"],
                "zero",
                framework="torch",
                reason="x**1's derivative is 1 * x.pow(0), whose own backward is pow_backward for the exponent 0: "
                "zeros; TF and JAX differentiate y * x**(y-1) to 0 * x**-1 = NaN",
                link=TORCH_MANUAL,
            ),
        ],
    ),
    elementwise(
        "x**1.5", points=((0.0, "zero", "right", "+inf"), (-0.0, "zero", "right", "+inf")), **_pow(1.5),
        declared=[expect("grad2[x**1.5@-0]", "-inf", **GRAPPLER_RSQRT),
                  expect("grad2[x**1.5@-0]", "-inf", **TORCH_RSQRT)],
    ),
    elementwise("x**2", points=((0.0, "zero", "both"), (-0.0, "zero", "both")), **_pow(2.0)),
    # the 3rd to 5th derivatives at 0 (point, grad, side, grad2 ... grad5) of an integer power (JAX's
    # integer_pow) and a fractional one: p! at the order k = p, 0 at the others; +-inf for x**2.5
    elementwise(
        "x**3", points=((0.0, "zero", "both", "zero", "6", "zero", "zero"),), **_pow(3, order=5),
        declared=[
            expect("grad5[x**3@0]", "zero", framework="tensorflow", versions=f">={POW_FROM}", link=TF_MATH_GRAD,
                   reason="from tf-nightly 2026-10-10 _PowGrad zeroes an infinite x**(p-1) where the upstream "
                   "gradient is 0 (as in masked-nan-gradients): x**3's 5th derivative at 0 is 0 in every mode; the "
                   "4th, and x**4's 5th, stay NaN (measured on 2.23.0.dev20261026)"),
            *expect_keys(["grad4[x**3@0]", "grad5[x**3@0]"], "nan", **POW_BELOW_ZERO_EXPONENT),
            *expect_keys(["grad4[x**3@0]", "grad5[x**3@0]"], "zero", **POW_BELOW_ZERO_FOLDED),
            expect("grad5[x**3@0]", raises("RuntimeError", r"element 0 of tensors does not require grad and does "
                                           r"not have a grad_fn"), framework="torch", link=TORCH_GRAD,
                   reason="PyTorch's pow backward returns a constant zero tensor (no grad_fn) once the exponent is 0, "
                   "so the 4th derivative of x**3 is zeros and differentiating it again with autograd.grad raises"),
        ],
    ),
    elementwise(
        "x**4", points=((0.0, "zero", "both", "zero", "zero", "24", "zero"),), **_pow(4, order=5),
        declared=[expect("grad5[x**4@0]", "nan", **POW_BELOW_ZERO_EXPONENT),
                  expect("grad5[x**4@0]", "zero", **POW_BELOW_ZERO_FOLDED)],
    ),
    elementwise("x**2.5", points=((0.0, "zero", "right", "zero", "+inf", "-inf", "+inf"),), **_pow(2.5, order=5)),
)}  # fmt: skip
SECOND_ORDER = [name for name, op in ELEMENTWISE.items() if op.has("grad2")]
HIGHER_ORDER = [name for name, op in ELEMENTWISE.items() if op.order > 2]


# ---------------------------------------------------------------- the binary entries
def binary(name, args, configs, regular, named=(), declared=()):
    """The op database's binary op ``name`` (its spellings, reference and partial derivatives
    ``grads(a, b)``: :mod:`suite.ops.db`) with singular configurations (:class:`Config`),
    as an op-table entry: ``args``, the arguments' own names (atan2 takes y, x); ``regular``, each
    argument's ranges away from every configuration; ``named``, (name, closed form of the second
    argument) the first argument's gradient may equal; ``declared``, where a framework answers
    otherwise. Where a framework has no such op (the database's ``absent``), every key of the
    entry is declared ``unavailable`` for it. Keys: ``d<arg>[<op>@<config>]`` and ``side_d<arg>[...]``."""
    a, b = args
    keys = [k for c in configs for k in (f"d{a}[{name}@{c.label}]", f"d{b}[{name}@{c.label}]")]
    keys += [f"side_{k}" for k in keys]
    around = Around(args=args, regular=regular, named=tuple((k, _np(fn)) for k, fn in named))
    at = tuple(c.point(name, args) for c in configs)
    declared = [*declared, *_unavailable(keys, db.fact(name).absent)]
    return ops.view("singular-point-gradients", name, closed_forms=True, points=at, declared=declared, around=around)


BOTH = ((-4.0, -0.25), (0.25, 4.0))
BINARY = {op.name: op for op in (
    binary("pow", ("x", "y"),
           (Config("x=0,y=0", 0.0, 0.0, ((1,), (1, -1)), ("nan", "zero", "neither", "neither")),
            Config("x=0,0<y<1", 0.0, ((0.2, 0.8),), ((1,), ()), ("+inf", "zero", "right", "both")),
            Config("x=0,y=1", 0.0, 1.0, ((1,), ()), ("1", "zero", "both", "both")),
            Config("x=0,y>1", 0.0, ((1.25, 3.0),), ((1,), ()), ("zero", "zero", "right", "both"))),
           (((0.25, 4.0),), ((-2.0, 3.0),)),
           declared=[
               expect("side_dx[pow@x=0,y=0]", "both", **TORCH_POW_CONSTANT),
               expect("dx[pow@x=0,y=0]", "zero", framework="torch",
                      reason="pow_backward_self is where(exponent == 0, 0, grad * exponent * self**(exponent - 1))",
                      link=TORCH_MANUAL),
           ]),
    binary("xlogy", ("x", "y"),
           (Config("x=0,y=0", 0.0, 0.0, ((1, -1), (1,)), ("zero", "nan", "neither", "neither")),
            Config("x=0,y>0", 0.0, ((1.5, 8.0),), kinds=("log(y)", "zero", "both", "both")),
            Config("x=0,y<0", 0.0, ((-4.0, -0.5),), ((), ()), ("zero", "zero", "neither", "both"))),
           (BOTH, ((0.25, 8.0),)), named=(("log(y)", np.log),),
           declared=xlogy_declared("xlogy", "y=0", "y>0", "y<0")),
    binary("xlog1py", ("x", "y"),
           (Config("x=0,y=-1", 0.0, -1.0, ((1, -1), (1,)), ("zero", "nan", "neither", "neither")),
            Config("x=0,y>-1", 0.0, ((0.5, 8.0),), kinds=("log1p(y)", "zero", "both", "both")),
            Config("x=0,y<-1", 0.0, ((-5.0, -1.5),), ((), ()), ("zero", "zero", "neither", "both"))),
           (BOTH, ((-0.75, 8.0),)), named=(("log1p(y)", np.log1p),),
           declared=xlogy_declared("xlog1py", "y=-1", "y>-1", "y<-1")),
    binary("xdivy", ("x", "y"),
           (Config("x=0,y=0", 0.0, 0.0, ((1, -1), (1, -1)), ("zero", "zero", "neither", "both")),
            Config("x=0,y!=0", 0.0, BOTH, kinds=("zero", "zero", "neither", "both"))),
           (BOTH, BOTH), named=(("1/y", lambda y: 1 / y),),
           declared=[
               expect("dx[xdivy@x=0,y=0]", "+inf", framework="tensorflow", versions=f">={XDIVY_FROM}",
                      reason="from tf-nightly 2026-09-16 _XDivyGrad takes the x-gradient as reciprocal(y) for every "
                      "x, the derivative of x / y: 1 / 0 = +inf at y = 0 (until 2.21 the mask x != 0 gave 0)",
                      link=TF_XDIVY_PR),
               expect("dx[xdivy@x=0,y!=0]", "1/y", framework="tensorflow", versions=f">={XDIVY_FROM}",
                      reason="from tf-nightly 2026-09-16 _XDivyGrad takes the x-gradient as reciprocal(y) for every "
                      "x: 1/y at x = 0",
                      link=TF_XDIVY_PR),
               *expect_keys(["side_dx[xdivy@x=0,y=0]", "side_dx[xdivy@x=0,y!=0]"], "both", framework="tensorflow",
                            versions=f">={XDIVY_FROM}",
                            reason="xdivy(+-h, y) = +-h / y: both one-sided differences in x are 1/y (+inf at y = 0), "
                            "TF's unmasked answer from tf-nightly 2026-09-16",
                            link=TF_XDIVY_PR),
           ]),
    binary("divide_no_nan", ("x", "y"),
           (Config("x=0,y=0", 0.0, 0.0, ((1, -1), (1, -1)), ("zero", "zero", "both", "both")),
            Config("x!=0,y=0", BOTH, 0.0, ((), (1, -1)), ("zero", "zero", "both", "neither"))),
           (BOTH, BOTH)),
    binary("atan2", ("y", "x"),
           (Config("y=0,x=0", 0.0, 0.0, ((1, -1), (1, -1)), ("nan", "nan", "neither", "neither")),), (BOTH, BOTH),
           declared=[
               *expect_keys(["dy[atan2@y=0,x=0]", "dx[atan2@y=0,x=0]"], "zero", framework="torch",
                            reason="atan2_backward fills the reciprocal of y*y + x*x with 0 where it is 0; TF and JAX "
                            "compute 0 / 0",
                            link=TORCH_MANUAL),
               expect("side_dx[atan2@y=0,x=0]", "right", framework="torch",
                      reason="atan2(0, h) = 0 for h > 0: the right difference in x is 0 (the left is unbounded: "
                      "atan2(0, -h) = pi)",
                      link=TORCH_MANUAL),
           ]),
)}  # fmt: skip


# ---------------------------------------------------------------- the reduction entries
NO_NORMALIZE = (
    "JAX has no l2_normalize (jax.nn has standardize, not normalize) and no moments (mean and var are separate calls)",
    "https://docs.jax.dev/en/latest/jax.nn.html",
)


def reduction(name, program, f, vjp, kinds, terms=None, absent=None, declared=()):
    """A reduction over the last axis (or a row-wise normalisation) with singular rows, as an
    op-table entry: ``program``'s spellings (None where it has none: ``absent`` says why, and
    every key is declared ``unavailable`` there), float64 closed forms of f and of ``vjp(x,
    w)``, per singular row (:data:`ROWS`: ``x=0``, the zero vector; ``constant``;
    ``one-element``) the default kinds ``(grad, side)``, ``terms(x, w)``: the size of the terms
    that cancel in its gradient (the absolute floor of its comparisons), where rounding sets
    one; ``declared``: where a framework answers otherwise. Keys: ``grad[<op>@<row>]``,
    ``side[<op>@<row>]``."""
    at = tuple(ops.Point(c, (ROWS[c],), grad, also=(("side", side),)) for c, (grad, side) in kinds.items())
    keys = [f"{k}[{name}@{c}]" for k in ("grad", "side") for c in kinds]
    fw = {f: getattr(program, f, None) for f in ("tensorflow", "jax", "torch")}
    return ops.register(
        ops.Op(name, behaviour="singular-point-gradients", **fw, reference=_np(f), derivatives=(_np(vjp),),
               points=at, declared=[*declared, *_unavailable(keys, absent)], absent=absent or {}, elementwise=False,
               around=Around(cancels=terms))
    )  # fmt: skip


MOMENTS = {"constant": ("zero", "both"), "one-element": ("zero", "both")}
REDUCTIONS = {op.name: op for op in (
    reduction("norm", Norm, lambda x: np.linalg.norm(x, axis=-1),
              lambda x, w: w[:, None] * x / np.linalg.norm(x, axis=-1, keepdims=True), {"x=0": ("nan", "neither")},
              declared=[expect("grad[norm@x=0]", "zero", **NORM_SAFE), expect("grad[norm@x=0]", "zero", **TORCH_NORM)]),
    # l2_normalize of a one-element row is sign(x): its gradient w/|x| - w/|x| cancels to 0, up to rounding
    reduction("l2_normalize", L2Normalize, _l2n, _l2n_vjp, {"x=0": ("1e+06", "both")},
              _np(lambda x, w: np.abs(w) / np.linalg.norm(x, axis=-1, keepdims=True)), {"jax": NO_NORMALIZE},
              declared=[
                  expect("grad[l2_normalize@x=0]", "1e+12", framework="torch",
                         reason="F.normalize is x / max(||x||, eps=1e-12): 1/eps at the zero vector; "
                         "tf.math.l2_normalize is x * rsqrt(max(sum(x**2), epsilon=1e-12)): 1/sqrt(epsilon) = 1e6",
                         link="https://pytorch.org/docs/stable/generated/torch.nn.functional.normalize.html"),
                  expect("side[l2_normalize@x=0]", "neither", framework="torch",
                         reason="the eps only acts below ||x|| = 1e-12, far inside the difference step: "
                         "F.normalize(+-h e_i) = +-e_i and both quotients grow without bound, not 1e12",
                         link="https://pytorch.org/docs/stable/generated/torch.nn.functional.normalize.html"),
              ]),
    reduction("reduce_std", ReduceStd, lambda x: x.std(-1), _moments_vjp(True),
              {"constant": ("nan", "neither"), "one-element": ("nan", "neither")}, _moments_terms(True),
              declared=[
                  *expect_keys(["grad[reduce_std@constant]", "grad[reduce_std@one-element]"], "zero", **TORCH_STD),
                  expect("side[reduce_std@one-element]", "both", framework="torch",
                         reason="the std of one element is 0 whatever it is: both one-sided differences are 0, "
                         "PyTorch's answer",
                         link="https://github.com/pytorch/pytorch/issues/4320"),
              ]),
    reduction("reduce_variance", ReduceVariance, lambda x: x.var(-1), _moments_vjp(False), MOMENTS,
              _moments_terms(False)),
    reduction("moments", Moments, lambda x: x.var(-1), _moments_vjp(False), MOMENTS, absent={"jax": NO_NORMALIZE}),
)}  # fmt: skip
ENTRIES = {**ELEMENTWISE, **BINARY, **REDUCTIONS}


# ---------------------------------------------------------------- the seeds' expectations
# What the frameworks agree on for each issue's own input (the entries above carry their own
# points' kinds: the gradient over the upstream gradient, and which one-sided difference
# quotient of the forward pass it equals), then where a framework answers otherwise.
AGREED = {
    **{f"seed[{k}]": v for k, v in {
        "tensorflow#12071": "1,nan,1,1", "pytorch#2421": "nan", "tensorflow#56830": "nan",
        "tensorflow#56873": "0.693; zero", "tensorflow#60715": "0.5,zero; -2.5,zero",
        "tensorflow#12071:gradient-alone": "1,nan,1,+inf",
        "tensorflow#2295": "zero,+inf,0.624,zero", "tensorflow#4914": "+inf,0.707; nan,0.354",
    }.items()},
}  # fmt: skip
# a declaration's id is its place in this list, which the baselines record: a new one is appended last
EXPECT = expectations(
    AGREED,
    # ---- TensorFlow
    expect(
        "seed[tensorflow#56873]",
        "zero; zero",
        framework="tensorflow",
        versions=f"<{XLOGY_FROM}",
        reason="the issue as reported: d/dx xlog1py(x, 1) at x = 0 is 0, not log1p(1) = 0.693 (x-gradient masked "
        "by x != 0)",
        link="https://github.com/tensorflow/tensorflow/issues/56873",
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
    expect("seed[pytorch#2421]", "zero", **NORM_SAFE),
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
    expect(
        "seed[tensorflow#2295]",
        "nan,+inf,0.624,zero",
        framework="jax",
        reason="jnp.clip's backward multiplies the cotangent by a 0/1 mask (max/min JVP), and pow's +inf at the "
        "clamped 0 times 0 is NaN at y = -0.5; TF's Maximum gradient and torch.clamp select (where) and give 0",
        link=JAX_LAX,
    ),
    # ---- PyTorch
    expect("seed[pytorch#2421]", "zero", **TORCH_NORM),
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
    expect("seed[tensorflow#56830]", "zero", **TORCH_STD),
    # ---- ops a framework does not have
    *(
        expect("seed[tensorflow#60715]", "unavailable", framework=fw, reason=why, link=link)
        for fw, (why, link) in db.NO_XDIVY.items()
    ),
    # appended last
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
)


# ---------------------------------------------------------------- properties (suite.ops.points)
@pytest.mark.parametrize("op", ELEMENTWISE)
@given(data=st.data())
def test_elementwise_gradient_at_singular_point(subject, oracles, record, op, data):
    """sqrt, rsqrt, log, log1p, acos, asin, x**p at each singular point (and -0): the gradient over
    the upstream gradient is the declared kind; near the point and away from it, f'(x) * w,
    the oracles' and (float64) central differences."""
    points.unary(subject, oracles, record, ELEMENTWISE[op], data)


@pytest.mark.parametrize("op", SECOND_ORDER)
@given(data=st.data())
def test_second_derivative_at_singular_point(subject, oracles, record, op, data):
    """d/dx of the framework's own f'(x) (nested tapes, tf.gradients of tf.gradients, jax.grad,
    create_graph): the declared kind at each point; f''(x) * w near and away from it."""
    points.second_derivative(subject, oracles, record, ELEMENTWISE[op], data)


@pytest.mark.parametrize("op", HIGHER_ORDER)
@given(data=st.data())
def test_higher_derivative_at_singular_point(subject, oracles, record, op, data):
    """The 3rd to 5th derivatives of x**3, x**4, x**2.5 by nested differentiation (Runner.derivative):
    the declared kind at 0; p (p-1) ... x**(p-k) near and away from it."""
    points.higher_derivatives(subject, oracles, record, ELEMENTWISE[op], data)


@pytest.mark.parametrize("op", BINARY)
@given(data=st.data())
def test_binary_gradient_at_singular_point(subject, oracles, record, op, data):
    """pow, xlogy, xlog1py, xdivy, divide_no_nan, atan2: both arguments' gradients at each
    configuration (x = 0 with y = 0, y > 0, y < 0; y = 0; the origin) are the declared kinds;
    near them and away from them, the closed form, the oracles and central differences."""
    points.binary(subject, oracles, record, BINARY[op], data)


@pytest.mark.parametrize("op", REDUCTIONS)
@given(data=st.data())
def test_reduction_gradient_at_singular_row(subject, oracles, record, op, data):
    """norm and l2_normalize at the zero vector; std, variance and moments of a constant row and
    of a one-element row: the declared kind; near and away from them, the closed form, the
    oracles and central differences."""
    points.reduction(subject, oracles, record, REDUCTIONS[op], data)


@pytest.mark.parametrize("op", ENTRIES)
@given(dtype=st.just(np.dtype(np.float64)))
def test_one_sided_differences_at_singular_point(subject, record, op, dtype):
    """Float64, exactly at each singular point (upstream gradient 1): the gradient's kind, and
    which one-sided difference quotient of the framework's own forward pass it equals."""
    points.one_sided(subject, record, ENTRIES[op], dtype)


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
    "tensorflow#56873": (BINARY["xlog1py"].program, {}, (np.zeros(1, F32), np.ones(1, F32))),
    "tensorflow#60715": (
        BINARY["divide_no_nan"].program,
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
    record.check(EXPECT, **{"seed[tensorflow#12071:gradient-alone]": ",".join(ops.point_kind(v) for v in np.ravel(g))})


@pytest.mark.parametrize("issue", SEEDS)
@given(data=st.data())
def test_seed_issue_gradients(subject, record, issue, data):
    """Each issue's own input: the kind of every gradient entry, per argument (``;``)."""
    program, static, arrays = SEEDS[issue]
    arrays = data.draw(st.just(arrays), label="inputs")
    record.example(issue=issue, **{f"arg{i}": a for i, a in enumerate(arrays)})
    if subject.framework not in program.frameworks():  # the op is unavailable there
        record.check(EXPECT, **{f"seed[{issue}]": "unavailable"})
        return
    _, grads = subject.vjp(program.of(subject), *arrays, **static)
    record.check(
        EXPECT, **{f"seed[{issue}]": "; ".join(",".join(ops.point_kind(v) for v in np.ravel(g)) for g in grads)}
    )
