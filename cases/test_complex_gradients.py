"""Complex gradients: which conjugate each framework returns.

For z = x + iy and a real loss L, TensorFlow and PyTorch return dL/dx + i*dL/dy (twice the
conjugate Wirtinger derivative dL/dz*: grad |z|^2 = 2z, grad |z| = z/|z|); JAX's ``grad``
returns its conjugate dL/dx - i*dL/dy (2*conj(z)). For a holomorphic f and a complex
cotangent u, TF's ``output_gradients`` and PyTorch's ``grad_outputs`` give conj(f'(z))*u
(the pullback of Re(sum(conj(u)*f))); ``jax.vjp`` gives f'(z)*u (of Re(sum(u*f))). The two
are tied by TF(u) = conj(JAX(conj(u))) for any f. Without a cotangent, TF seeds a complex
output with 1 (conj(f')), ``jax.grad`` needs ``holomorphic=True`` (then f') and
``torch.autograd.grad`` refuses. At the singular point z = 0, every framework's grad |z| is 0;
just off it (0 < |z| < sqrt(smallest normal)) TF's non-XLA kernels flush it to 0 too.
Each answer is classified against closed forms and against float64 central differences in
x and y of the framework's own forward pass (one-sided at z = 0).

Sources: https://github.com/tensorflow/tensorflow/issues/3348,
https://github.com/pytorch/pytorch/issues/41857, https://github.com/jax-ml/jax/issues/9110,
https://pytorch.org/docs/stable/notes/autograd.html#complex-autograd-doc,
https://jax.readthedocs.io/en/latest/notebooks/autodiff_cookbook.html#complex-numbers-and-differentiation
"""

import dataclasses

import numpy as np
from hypothesis import example, given, strategies as st

from suite import compare as cmp, finite_diff, strategies as ss
from suite.behaviours import Floor, behaviour, on
from suite.expectations import expect, expectations, raises
from suite.frameworks.tf_runner import in_v1_graph
from suite.program import Program

JAX_COOKBOOK = (
    "https://jax.readthedocs.io/en/latest/notebooks/autodiff_cookbook.html#complex-numbers-and-differentiation"
)
JAX_CONVENTION = "https://github.com/jax-ml/jax/issues/4891"
TORCH_COMPLEX = "https://pytorch.org/docs/stable/notes/autograd.html#complex-autograd-doc"
TF_DIV_NO_NAN = "https://github.com/tensorflow/tensorflow/blob/master/tensorflow/core/kernels/cwise_ops.h"

BEHAVIOUR = behaviour(
    "complex-gradients",
    sources=[],
    links=[
        "https://github.com/tensorflow/tensorflow/issues/3348",
        "https://github.com/pytorch/pytorch/issues/41857",
        "https://github.com/jax-ml/jax/issues/9110",
        TORCH_COMPLEX,
        JAX_COOKBOOK,
    ],
    floor=Floor(
        "mixed",
        "Per element: every closed-form and cross-framework comparison, at the terms its element rounds "
        "(LOSS, HOLOMORPHIC): |w| 2|z| for |z|^2, |w| for real, imag and |z| (and FLUSHED smallest normals "
        "over |z|^2 where TF's div_no_nan(w z, |z|) flushes), |u| 2|z| for z^2 and z*z, |u| e^x for exp, "
        "|u| cosh y for sin (cos z's parts may cancel to below |cos z|), each capped at the array's magnitude; "
        "a complex product's parts cancel, but its error's modulus is a few units of rounding of |u| |f'|. "
        "Array-level: the float64 central and one-sided differences (their truncation error is at the "
        "function's scale, compare.FINITE_DIFF's floor) and the convention classifier, which tells apart "
        "forms that differ by O(1) at the witness element 0: a per-element floor there would turn a small "
        "error into the observation 'other' instead of the failed comparison that follows and names it.",
    ),
)
#: The per-element comparisons' tolerance (issue 47), from what the frameworks agree to: 8 units of
#: rounding of each element's terms, rtol and floor alike (the floor is then each element's own
#: scale). complex64: compare.GRAD's 32 left 29.8x headroom at ci on TF 2.21, slack. complex128 was
#: bound by compare.GRAD's floor: there an element's error over its floor is rtol |out - ref| /
#: (units eps scale), so the headroom, units eps scale / |out - ref|, does not move with rtol, only
#: with the floor's units (16x at 32 units and 1e-12). Least headroom at 8 units, TF 2.21
#: (2026-11-30): complex64 8.2x at ci, 4.9x in a dev run, 3.75x thorough; complex128 5.8x at ci,
#: 4.0x dev, 4.4x thorough (the real loss's gradient and the holomorphic vjp, XLA vs PyTorch). The
#: convention classifier keeps compare.GRAD.
TOL = dataclasses.replace(
    cmp.tolerance(float32=2.0**-20, float64=2.0**-49), floor_ulps={"float32": 8.0, "float64": 8.0}
)

REAL_LOSSES = ("abs2", "real", "imag", "abs")
OPS = ("square", "mul", "exp", "sin")
JAX_BILINEAR = (
    "jax.grad(f)(z) is vjp(f, z)[1](1.0) and JAX's pullback is the plain transpose (no conjugation), "
    "so a real loss gets dL/dx - i*dL/dy = 2*dL/dz, the conjugate of TF's and PyTorch's dL/dx + i*dL/dy"
)

EXPECT = expectations(
    {
        "real_loss_grad[abs2]": "2z",
        "real_loss_grad[real]": "1",
        "real_loss_grad[imag]": "i",
        "real_loss_grad[abs]": "z/|z|",
        "fd_convention[real-loss]": "dx+i*dy",
        "fd_convention[holomorphic]": "dx+i*dy",
        **{f"holomorphic_vjp[{op}]": "conj(f')*u" for op in OPS},
        "complex_output_grad": "conj(f')",
        "holomorphic_grad": "f'",
        "abs_grad_at_zero": "zero",
        "abs_zero_vs_sides": "mean",
        "abs_grad_below_sqrt_tiny": "unit",
    },
    expect(
        "real_loss_grad[abs2]",
        "2conj(z)",
        framework="jax",
        reason=JAX_BILINEAR + " (the issue's |z|^2 at 3+4j: JAX 6-8j, PyTorch 6+8j; 'working as intended')",
        link="https://github.com/jax-ml/jax/issues/9110",
    ),
    expect("real_loss_grad[imag]", "-i", framework="jax", reason=JAX_BILINEAR, link=JAX_COOKBOOK),
    expect(
        "real_loss_grad[abs]",
        "conj(z)/|z|",
        framework="jax",
        reason=JAX_BILINEAR + " (grad(jnp.abs)(1j) == -1j)",
        link="https://github.com/jax-ml/jax/issues/1853",
    ),
    *[
        expect(
            f"fd_convention[{family}]",
            "dx-i*dy",
            framework="jax",
            reason="measured against central differences in x and y of JAX's own forward pass: "
            "jax.vjp(f, z)[1](u) = (d/dx - i*d/dy) Re(sum(u*f(z))) (bilinear pairing), where TF and "
            "PyTorch give (d/dx + i*d/dy) Re(sum(conj(u)*f(z))) (the inner product)",
            link=JAX_CONVENTION,
        )
        for family in ("real-loss", "holomorphic")
    ],
    *[
        expect(
            f"holomorphic_vjp[{op}]",
            "f'*u",
            framework="jax",
            reason="jax.vjp pulls a complex cotangent back by the transpose of the complex derivative, "
            "u*f'(z); TensorFlow (and PyTorch, which chose TF's convention in pytorch#41857) use the "
            "conjugate transpose, conj(f'(z))*u",
            link=JAX_CONVENTION,
        )
        for op in OPS
    ],
    expect(
        "complex_output_grad",
        raises("TypeError", r"grad requires real-valued outputs"),
        framework="jax",
        reason="jax.grad requires real-valued outputs: 'For holomorphic differentiation, pass "
        "holomorphic=True. For ... non-holomorphic functions involving complex outputs, use jax.vjp'",
        link="https://docs.jax.dev/en/latest/_autosummary/jax.grad.html",
    ),
    expect(
        "complex_output_grad",
        raises("RuntimeError", r"grad can be implicitly created only for real scalar outputs"),
        framework="torch",
        reason="torch.autograd.grad without grad_outputs: 'grad can be implicitly created only for "
        "real scalar outputs but got torch.complex64'",
        link=TORCH_COMPLEX,
    ),
    expect(
        "complex_output_grad",
        raises("TypeError", r"Gradients of complex tensors .* must set grad_ys"),
        framework="tensorflow",
        mode="graph",
        reason="tf.gradients (the v1 graph API) refuses to seed a complex ys with ones: 'Gradients of "
        "complex tensors must set grad_ys'; GradientTape.gradient (eager, tf.function, XLA) seeds it with "
        "ones and returns conj(f'). tensorflow#3348 (TF 0.9) still seeded it",
        link="https://github.com/tensorflow/tensorflow/blob/master/tensorflow/python/ops/gradients_util.py",
    ),
    expect(
        "abs_grad_below_sqrt_tiny",
        "zero",
        framework="tensorflow",
        mode="eager|function|graph",
        reason="ComplexAbs's gradient is div_no_nan(complex(grad)*z, complex(|z|)); the CPU kernel's "
        "complex DivNoNan returns 0 when the numerator times conj(denominator) is 0, and "
        "w*z*|z| underflows (|z|^2 below the smallest normal, flushed to zero) although |z| != 0; "
        "XLA lowers DivNoNan as select(y == 0, 0, x / y) (tf2xla/kernels/binary_ops.cc) and keeps z/|z|",
        link=TF_DIV_NO_NAN,
    ),
)


# ---------------------------------------------------------------- strategies
COMPLEX_DTYPES = (np.complex64, np.complex128)
# A 0-d array and a matrix, each with one dtype: compiled modes trace few programs per test.
SIGNATURES = ss.dtypes_and_shapes(shapes=((), (2, 3)), dtypes=COMPLEX_DTYPES)
PART = {np.dtype(np.complex64): np.dtype(np.float32), np.dtype(np.complex128): np.dtype(np.float64)}
# A part exactly 0 puts z on an axis (both: the origin, with either sign of zero), where
# z == conj(z) or |z| has its kink; +-2^-7 is just off it on both sides (exact in float32).
EDGES = (0.0, -0.0, 2.0**-7, -(2.0**-7))


def join(re, im, dtype=np.complex128) -> np.ndarray:
    """x + iy without arithmetic, so signed zeros survive (1j * -0.0 does not)."""
    z = np.empty(np.shape(re), dtype)
    z.real, z.imag = re, im
    return z


@ss.cached
def _parts(part, bound):
    plain = ss.floats(part, -bound, bound)
    return st.one_of(st.sampled_from(EDGES), plain)


@ss.cached
def _witness(part, lo=0.25, hi=1.5):
    """A value with both parts in +-[lo, hi]: there the two conventions of every family differ."""
    f = ss.floats(part, lo, hi)
    sign = st.sampled_from((1.0, -1.0))
    return st.builds(lambda a, b, s, t: complex(s * a, t * b), f, f, sign, sign)


@st.composite
def complex_arrays(draw, *, dtype, shape, bound=3.0, label="z"):
    """Complex arrays mixing exact axes/origin, just-off-axis and bounded parts; element 0 is a witness."""
    part = PART[np.dtype(dtype)]
    re = draw(ss.arrays(part, shape, elements=_parts(part, bound)), label=f"Re {label}")
    im = draw(ss.arrays(part, shape, elements=_parts(part, bound)), label=f"Im {label}")
    z = join(re, im, dtype)
    z.flat[0] = draw(_witness(part), label=f"{label}[0]")
    return z


@st.composite
def real_loss_inputs(draw):
    """(z, w): complex z and a real cotangent w (w[0] != 0, so the witness shows the convention)."""
    dtype, shape = draw(SIGNATURES, label="dtype, shape")
    z = draw(complex_arrays(dtype=dtype, shape=shape))
    w = draw(ss.like(z.real), label="w")
    w.flat[0] = draw(ss.choice((-1.5, -0.5, 0.5, 2.0)), label="w[0]")
    return z, w


@st.composite
def holomorphic_inputs(draw):
    """(z, u): complex z and a complex cotangent u (u[0] a witness too)."""
    dtype, shape = draw(SIGNATURES, label="dtype, shape")
    z = draw(complex_arrays(dtype=dtype, shape=shape))
    return z, draw(complex_arrays(dtype=dtype, shape=shape, bound=4.0, label="u"))


@st.composite
def near_zero_inputs(draw):
    """(z, w) of shape (2, 3): z[0] is exactly 0 (any signed zeros); the others are 0 or
    +-r, +-ir, r(+-1 +-i) with r just below sqrt(smallest normal), just above it, or 2^-7."""
    dtype = np.dtype(draw(ss.choice(COMPLEX_DTYPES), label="dtype"))
    part = PART[dtype]
    zero, sign, entry = _near_zero_entries(part)
    z = np.array([draw(zero, label="z[0]")] + [draw(entry) for _ in range(5)], dtype).reshape(2, 3)
    w = draw(ss.arrays(part, (2, 3), elements=ss.floats(part, 0.5, 2)), label="w")
    return z, w * draw(sign, label="sign of w")


@ss.cached
def _near_zero_entries(part):
    """(zero, sign, entry): a complex zero of any signs, a sign, and an entry that is either a
    zero or off 0 (see :func:`near_zero_inputs`)."""
    tiny = np.sqrt(np.finfo(part).tiny)
    sign = st.sampled_from((1.0, -1.0))
    zero = st.builds(complex, st.sampled_from((0.0, -0.0)), st.sampled_from((0.0, -0.0)))
    radius = st.sampled_from((tiny / 4, tiny * 4, 2.0**-7))
    direction = st.sampled_from(((1, 0), (0, 1), (1, 1)))
    off = st.builds(lambda r, d, s, t: complex(s * r * d[0], t * r * d[1]), radius, direction, sign, sign)
    return zero, sign, st.one_of(zero, off)


# ---------------------------------------------------------------- the programs
class Abs2(Program):
    """|z|^2 as z * conj(z) (its gradient goes through Mul and Conj)."""

    def tensorflow(tf, z):
        return tf.math.real(z * tf.math.conj(z))

    def jax(jax, z):
        return jax.numpy.real(z * jax.numpy.conj(z))

    def torch(torch, z):
        return torch.real(z * z.conj())


class Real(Program):
    def tensorflow(tf, z):
        return tf.math.real(z)

    def jax(jax, z):
        return jax.numpy.real(z)

    def torch(torch, z):
        return torch.real(z)


class Imag(Program):
    def tensorflow(tf, z):
        return tf.math.imag(z)

    def jax(jax, z):
        return jax.numpy.imag(z)

    def torch(torch, z):
        return torch.imag(z)


class Abs(Program):
    def tensorflow(tf, z):
        return tf.abs(z)

    def jax(jax, z):
        return jax.numpy.abs(z)

    def torch(torch, z):
        return torch.abs(z)


class Square(Program):
    def tensorflow(tf, z):
        return tf.square(z)

    def jax(jax, z):
        return jax.numpy.square(z)

    def torch(torch, z):
        return torch.square(z)


class SelfMul(Program):
    """z * z, as tensorflow#3348 wrote it."""

    def tensorflow(tf, z):
        return z * z

    def jax(jax, z):
        return z * z

    def torch(torch, z):
        return z * z


class Exp(Program):
    def tensorflow(tf, z):
        return tf.exp(z)

    def jax(jax, z):
        return jax.numpy.exp(z)

    def torch(torch, z):
        return torch.exp(z)


class Sin(Program):
    def tensorflow(tf, z):
        return tf.sin(z)

    def jax(jax, z):
        return jax.numpy.sin(z)

    def torch(torch, z):
        return torch.sin(z)


class ReImSquares(Program):
    """x**2 + y**2, as the JAX cookbook and jax#9110 write |z|^2."""

    def tensorflow(tf, z):
        return tf.math.real(z) ** 2 + tf.math.imag(z) ** 2

    def jax(jax, z):
        return jax.numpy.real(z) ** 2 + jax.numpy.imag(z) ** 2

    def torch(torch, z):
        return torch.real(z) ** 2 + torch.imag(z) ** 2


def _unit(z):
    return np.ones(np.shape(z))


# loss -> (program, {observation: closed form of the gradient of sum(w * loss) / w}, terms), the
# dx + i*dy form first. For real(z) both forms are 1: the convention does not show. terms: per
# element and unit |w|, the magnitude of what the gradient's computation rounds (its floor's scale):
# w*z twice for |z|^2 (2|z|, no cancellation), w itself for real and imag (exact), the unit
# direction w*z/|z| for |z| (1; and what flushing costs: loss_scales).
LOSS = {
    "abs2": (Abs2, {"2z": lambda z: 2 * z, "2conj(z)": lambda z: 2 * np.conj(z)}, lambda z: 2 * np.abs(z)),
    "real": (Real, {"1": lambda z: np.ones_like(z)}, _unit),
    "imag": (Imag, {"i": lambda z: np.full_like(z, 1j), "-i": lambda z: np.full_like(z, -1j)}, _unit),
    "abs": (Abs, {"z/|z|": lambda z: z / np.abs(z), "conj(z)/|z|": lambda z: np.conj(z) / np.abs(z)}, _unit),
}
# op -> (program, f', terms): per element and unit |u|, the magnitude of the terms f'(z) and the
# product u*f'(z) round. A complex product's parts (Re u Re f' - Im u Im f', ...) may cancel, but
# |Re u Re f'| + |Im u Im f'| and |Re u Im f'| + |Im u Re f'| are at most |u| |f'|: the error's
# modulus is a few units of rounding of |u| |f'|. f' = 2z and exp(z) = e^x (cos y + i sin y) are
# computed without cancellation (|f'| = 2|z|, e^x); cos(z) = cos x cosh y - i sin x sinh y at
# cosh y (>= |sinh y|, which a framework may compute as (e^y - e^-y)/2, absolute at cosh y),
# above |cos z| near the zeros of cos (x = +-pi/2, y = 0).
HOLOMORPHIC = {
    "square": (Square, lambda z: 2 * z, lambda z: 2 * np.abs(z)),
    "mul": (SelfMul, lambda z: 2 * z, lambda z: 2 * np.abs(z)),
    "exp": (Exp, np.exp, lambda z: np.exp(z.real)),
    "sin": (Sin, np.cos, lambda z: np.cosh(z.imag)),
}


class ComplexSumGrad(Program):
    """The gradient of the complex scalar sum(f(z)) by each framework's plain API, no cotangent."""

    def tensorflow(tf, z, *, op):
        f = HOLOMORPHIC[op][0].tensorflow
        if in_v1_graph():
            return tf.gradients(tf.reduce_sum(f(tf, z)), z)[0]
        with tf.GradientTape() as tape:
            tape.watch(z)
            s = tf.reduce_sum(f(tf, z))
        return tape.gradient(s, z)

    def jax(jax, z, *, op):
        return jax.grad(lambda z: jax.numpy.sum(HOLOMORPHIC[op][0].jax(jax, z)))(z)

    def torch(torch, z, *, op):
        z = z.requires_grad_(True)
        return torch.autograd.grad(HOLOMORPHIC[op][0].torch(torch, z).sum(), z)[0]


class HolomorphicGrad(Program):
    """``jax.grad(..., holomorphic=True)``: an API only JAX has."""

    def jax(jax, z, *, op):
        return jax.grad(lambda z: jax.numpy.sum(HOLOMORPHIC[op][0].jax(jax, z)), holomorphic=True)(z)


# ---------------------------------------------------------------- helpers
def classify(out, forms: dict, *, tol=cmp.GRAD) -> str:
    """The name of the one form ``out`` equals within ``tol`` (compare.rel_err, complex-aware),
    else ``nan``, ``none``, ``other`` or ``ambiguous:a|b``."""
    if out is None:
        return "none"
    out = np.asarray(out)
    if np.isnan(out).any():
        return "nan"
    t, ulps = tol.of(out.dtype), tol.ulps(out.dtype)
    hits = [k for k, ref in forms.items() if cmp.rel_err(out, ref, rtol=t, dtype=out.dtype, ulps=ulps) <= t]
    return hits[0] if len(hits) == 1 else "other" if not hits else "ambiguous:" + "|".join(hits)


def holomorphic_scales(op, z, u=1.0) -> np.ndarray:
    """Per element, the scale of the floor of u*f'(z) or conj(f'(z))*u (:func:`suite.compare.floor`):
    |u| times the op's terms (HOLOMORPHIC), float64; u = 1 where no cotangent is given.

    >>> holomorphic_scales("sin", np.complex64([1.5707964 + 0j, 2j]), np.complex64([1j, 2])).round(3).tolist()
    [1.0, 7.524]
    """
    return np.abs(np.asarray(u, np.complex128)) * HOLOMORPHIC[op][2](np.asarray(z, np.complex128))


def loss_scales(loss, z, w) -> np.ndarray:
    """Per element, the scale of the floor of grad sum(w L(z)): |w| times the loss's terms (LOSS).
    For |z|, never below what flushing costs: TF's gradient div_no_nan(w*z, |z|) is 0 where
    w*z*|z| is subnormal, and w*z (XLA's too) loses its subnormal parts before the division, so an
    element whose w*z, w*z*|z| or z*|z| underflows may be off by up to FLUSHED smallest normals times
    1/|z|^2 (measured, complex64: TF 0 at w = 1e-30, z = 1e-10 (eager and XLA) and at w = 1e-5,
    z = 1e-17 (eager), where the closed form is w).

    >>> s = loss_scales("abs", np.complex64([1, 2.0**-20]), np.float32([2, 1e-30])).tolist()
    >>> s[0], s[1] == cmp.flushed_scale(np.float32, 2.0**40)   # |w|; above |w| = 1e-30, what flushing costs
    (2.0, True)
    """
    z64 = np.asarray(z, np.complex128)
    scale = np.abs(np.asarray(w, np.float64)) * LOSS[loss][2](z64)
    if loss != "abs":
        return scale
    with np.errstate(divide="ignore", over="ignore"):  # inf at and near 0: capped at the array's magnitude
        cofactor = np.maximum(1.0, 1.0 / np.abs(z64) ** 2)
    return np.maximum(scale, cmp.flushed_scale(z.dtype, cofactor))


def below_sqrt_tiny(z) -> np.ndarray:
    """|z| below the square root of the smallest normal of z's part (0 included): where |z|^2
    underflows, and TF's |z| gradient with it (declared in abs_grad_below_sqrt_tiny)."""
    return np.abs(z) < np.sqrt(np.finfo(PART[z.dtype]).tiny)


def abs_flushed(z, w) -> np.ndarray:
    """Where TF's |z| gradient div_no_nan(w z, |z|) may be flushed to 0: below sqrt(smallest normal)
    (:func:`below_sqrt_tiny`), and where |w| |z|^2 is below the smallest normal, so w z |z| is
    subnormal (FLUSHED_Z: 0 in TF eager at |w| = 1e-5, |z| = 1e-17, where XLA, JAX and PyTorch give
    w z/|z|). Left out of the convention's comparisons: the flush is TF's, declared and held below
    sqrt(smallest normal) by test_abs_gradient_at_and_near_zero (``abs_grad_below_sqrt_tiny``)."""
    z64 = np.abs(np.asarray(z, np.complex128))
    return below_sqrt_tiny(z) | (np.abs(np.asarray(w, np.float64)) * z64**2 < np.finfo(PART[z.dtype]).tiny)


def cast(forms: dict, dtype) -> dict:
    return {k: np.asarray(v).astype(dtype) for k, v in forms.items()}


def differences(f, x, *, side="central"):
    """d f_k / d x_k for every k of an elementwise f, float64, with suite.finite_diff's steps.
    finite_diff.vjp moves one element per pair of evaluations; every program here is
    elementwise (f_k depends on x_k alone), so all elements move at once: 2 runs, not 2*size."""
    h = (finite_diff.CENTRAL_STEP if side == "central" else finite_diff.ONE_SIDED_STEP) * np.maximum(1.0, np.abs(x))
    if side == "central":
        return (f(x + h) - f(x - h)) / (2 * h)
    return (f(x + h) - f(x)) / h if side == "right" else (f(x) - f(x - h)) / h


def fd_forms(runner, program, z, ct, *, side="central", **static) -> dict:
    """{"dx+i*dy": (d/dx + i d/dy) Re(sum(conj(ct) f)), "dx-i*dy": (d/dx - i d/dy) Re(sum(ct f))},
    from differences in x = Re z and y = Im z (float64) of ``runner``'s own forward pass f.
    (record.finite_differences differences real float inputs only; z is complex.)"""
    fn = program.of(runner)
    x, y = z.real.astype(np.float64), z.imag.astype(np.float64)

    def f(x, y):
        return np.asarray(runner.run(fn, join(x, y), **static))

    fx = differences(lambda x: f(x, y), x, side=side)
    fy = differences(lambda y: f(x, y), y, side=side)
    conj_ct = np.conj(ct)
    return {
        "dx+i*dy": np.real(conj_ct * fx) + 1j * np.real(conj_ct * fy),
        "dx-i*dy": np.real(ct * fx) - 1j * np.real(ct * fy),
    }


def against(record, oracles, program, z, ct, *, got, kind, forms, name, scale, mask=Ellipsis, **static):
    """Each oracle's gradient in the subject's convention, per element at ``scale`` (capped at the
    oracle's array). An oracle that measures to the other form is re-run with conj(ct) and
    conjugated: for any f, the dx+i*dy pullback of ct equals conj(the dx-i*dy pullback of
    conj(ct)), so the numbers must then agree."""
    for o in oracles:
        _, (ref,) = o.vjp(program.of(o), z, cotangent=ct, **static)
        theirs = classify(np.asarray(ref)[mask], {k: v[mask] for k, v in forms.items()})
        if theirs != kind and {theirs, kind} <= set(forms):
            _, (ref,) = o.vjp(program.of(o), z, cotangent=np.conj(ct), **static)
            ref = np.conj(ref)
        ref = np.asarray(ref)[mask]
        record.close(
            name=name, out=np.asarray(got)[mask], ref=ref, oracle=o.id, scale=cmp.capped(scale[mask], ref), tol=TOL
        )


# |z| bends with curvature 1/|z|: central differences (step ~6e-6) of |z| are within
# compare.FINITE_DIFF only away from the kink; within 1/16 of z = 0 they are not compared.
FD_RADIUS = 1 / 16
# A fixed complex128 example, so every row (JAX and PyTorch rows draw only 10) meets the
# float64 difference checks: 3+4j (jax#9110), a point on each axis, the origin, off-axis.
FIXED_Z = np.array([3 + 4j, 0.5 + 0j, -1j, 0j, 2.0**-7 - 1.25j, -2.5 + 0.75j], np.complex128)
FIXED_W = np.array([1.0, -2.0, 0.5, 3.0, 1.5, -1.0])
#: Small |w| on |z| above sqrt(smallest normal) where |w| |z|^2 still underflows: TF eager's |z|
#: gradient is 0 there, not w z/|z| (measured, complex64, TF 2.21; XLA gives w z/|z|).
FLUSHED_Z = np.array([1e-17, 3e-17j, 2e-17 + 2e-17j, 3 + 4j, 0.5, -1j], np.complex64)
FLUSHED_W = np.array([1e-5, 1e-5, 1e-5, 1.0, -2.0, 0.5], np.float32)


# ---------------------------------------------------------------- properties
@given(zw=real_loss_inputs())
@example(zw=(FIXED_Z, FIXED_W))
@example(zw=(FLUSHED_Z, FLUSHED_W))
def test_real_loss_gradient_convention(subject, oracles, record, zw):
    """grad of sum(w * L(z)) for L = |z|^2, real, imag, |z|: the closed form it equals (2z or
    2conj(z), ...), the same answer as each oracle's up to its convention, and (complex128)
    which assembly of central differences in x and y it is (dx + i*dy or dx - i*dy)."""
    z, w = zw
    record.example(z=z, w=w)
    for loss in REAL_LOSSES:
        program, closed, _ = LOSS[loss]
        _, (g,) = subject.vjp(program.of(subject), z, cotangent=w)
        g = np.asarray(g)
        # |z| at 0, and where TF's kernel flushes (declared in test_abs_gradient_at_and_near_zero)
        mask = ~abs_flushed(z, w) if loss == "abs" else np.ones(z.shape, bool)
        with np.errstate(invalid="ignore", divide="ignore"):
            forms = cast({k: f(z.astype(np.complex128)) * w for k, f in closed.items()}, z.dtype)
        kind = classify(g[mask], {k: v[mask] for k, v in forms.items()})
        record.check(EXPECT, **{f"real_loss_grad[{loss}]": kind})
        ref, at = forms[kind][mask], loss_scales(loss, z, w)
        record.close(
            name=f"grad[{loss}]", out=g[mask], ref=ref, oracle="closed-form", scale=cmp.capped(at[mask], ref), tol=TOL
        )
        against(
            record, oracles, program, z, w, got=g, kind=kind, forms=forms, name=f"grad[{loss}]", scale=at, mask=mask
        )
        if z.dtype != np.complex128:
            continue
        smooth = np.abs(z) > FD_RADIUS if loss == "abs" else mask
        fd = {k: v[smooth] for k, v in fd_forms(subject, program, z, w).items()}
        fd_kind = classify(g[smooth], fd, tol=cmp.FINITE_DIFF)
        if loss != "real":  # for real(z) the two assemblies coincide
            record.check(EXPECT, **{"fd_convention[real-loss]": fd_kind})
        ref = fd["dx+i*dy" if loss == "real" else fd_kind]
        record.close(name=f"grad[{loss}]", out=g[smooth], ref=ref, oracle="finite-difference", tol=cmp.FINITE_DIFF)


@given(zu=holomorphic_inputs())
@example(zu=(FIXED_Z, FIXED_Z[::-1].copy()))
def test_holomorphic_vjp_with_complex_cotangent(subject, oracles, record, zu):
    """Pullback of a complex cotangent u through f = z^2, z*z, exp, sin (GradientTape
    output_gradients / tf.gradients grad_ys, jax.vjp, torch grad_outputs): conj(f')*u or
    f'*u; each oracle agrees up to its convention; (complex128) which difference form it is."""
    z, u = zu
    record.example(z=z, u=u)
    for op in OPS:
        program, fprime, _ = HOLOMORPHIC[op]
        d = fprime(z.astype(np.complex128))
        forms = cast({"conj(f')*u": np.conj(d) * u, "f'*u": d * u}, z.dtype)
        _, (g,) = subject.vjp(program.of(subject), z, cotangent=u)
        kind = classify(g, forms)
        record.check(EXPECT, **{f"holomorphic_vjp[{op}]": kind})
        at = holomorphic_scales(op, z, u)
        record.close(
            name=f"grad[{op}]", out=g, ref=forms[kind], oracle="closed-form", scale=cmp.capped(at, forms[kind]), tol=TOL
        )
        against(record, oracles, program, z, u, got=g, kind=kind, forms=forms, name=f"grad[{op}]", scale=at)
        if z.dtype == np.complex128:
            fd = fd_forms(subject, program, z, u)
            fd_kind = classify(g, fd, tol=cmp.FINITE_DIFF)
            record.check(EXPECT, **{"fd_convention[holomorphic]": fd_kind})
            record.close(name=f"grad[{op}]", out=g, ref=fd[fd_kind], oracle="finite-difference", tol=cmp.FINITE_DIFF)


@given(zu=holomorphic_inputs())
def test_complex_output_gradient_without_cotangent(subject, record, zu):
    """d sum(f(z)) with no cotangent: TF seeds the complex output with 1 (conj(f')); jax.grad
    and torch.autograd.grad refuse a complex output."""
    z, _ = zu
    record.example(z=z)
    for op in OPS:
        try:
            g = subject.run(ComplexSumGrad.of(subject), z, op=op)
        except Exception as e:  # JAX and PyTorch refuse; anything else is observed and fails the check
            record.check(EXPECT, complex_output_grad=cmp.error_name(e))
            continue
        d = HOLOMORPHIC[op][1](z.astype(np.complex128))
        forms = cast({"conj(f')": np.conj(d), "f'": d}, z.dtype)
        kind = classify(g, forms)
        record.check(EXPECT, complex_output_grad=kind)
        at = cmp.capped(holomorphic_scales(op, z), forms[kind])
        record.close(name=f"grad[{op}]", out=g, ref=forms[kind], oracle="closed-form", scale=at, tol=TOL)


@on("jax")
@given(zu=holomorphic_inputs())
def test_jax_grad_holomorphic_is_the_complex_derivative(subject, record, zu):
    """jax.grad(sum(f), holomorphic=True)(z) = f'(z), not its conjugate (JAX only: the
    holomorphic flag exists only in jax.grad)."""
    z, _ = zu
    record.example(z=z)
    for op in OPS:
        g = subject.run(HolomorphicGrad.of(subject), z, op=op)
        d = HOLOMORPHIC[op][1](z.astype(np.complex128))
        forms = cast({"f'": d, "conj(f')": np.conj(d)}, z.dtype)
        kind = classify(g, forms)
        record.check(EXPECT, holomorphic_grad=kind)
        at = cmp.capped(holomorphic_scales(op, z), forms[kind])
        record.close(name=f"grad[{op}]", out=g, ref=forms[kind], oracle="closed-form", scale=at, tol=TOL)


@given(zw=near_zero_inputs())
def test_abs_gradient_at_and_near_zero(subject, oracles, record, zw):
    """grad of sum(w * |z|): exactly 0 at z = 0 (the mean of the one-sided differences, equal
    to neither side); a unit direction times w just off 0 (|grad| = |w|) except where TF's
    non-XLA kernels flush w*z*|z| to zero."""
    z, w = zw
    record.example(z=z, w=w)
    _, (g,) = subject.vjp(Abs.of(subject), z, cotangent=w)
    g = np.asarray(g)
    at, tiny = z == 0, (z != 0) & below_sqrt_tiny(z)
    zeros = np.zeros_like(g)
    record.check(EXPECT, abs_grad_at_zero=classify(g[at], {"zero": zeros[at]}, tol=cmp.EXACT))
    if tiny.any():
        record.check(
            EXPECT, abs_grad_below_sqrt_tiny=classify(np.abs(g[tiny]), {"unit": np.abs(w[tiny]), "zero": 0 * w[tiny]})
        )
    off = (z != 0) & ~tiny
    # |w z / |z|| = |w|: the unit direction's rounding, each element at its own |w| (in [0.5, 2])
    ref = np.abs(w[off])
    record.close(name="|grad| off zero", out=np.abs(g[off]), ref=ref, oracle="closed-form", scale=cmp.own(ref), tol=TOL)
    for o in oracles:  # at the origin every framework answers the same
        _, (ref,) = o.vjp(Abs.of(o), z, cotangent=w)
        record.equal(name="grad at 0", out=g[at], ref=np.asarray(ref)[at], oracle=o.id)
    if z.dtype == np.complex128:
        sides = {s: fd_forms(subject, Abs, z, w, side=s) for s in ("left", "right")}
        forms = {f"{s}[{k}]": v[at] for s, fd in sides.items() for k, v in fd.items()}
        forms["mean"] = ((sides["left"]["dx+i*dy"] + sides["right"]["dx+i*dy"]) / 2)[at]
        record.check(EXPECT, abs_zero_vs_sides=classify(g[at], forms, tol=cmp.ONE_SIDED).split("[")[0])


# ---------------------------------------------------------------- seed examples
@given(z=st.just(np.array(0.1j, np.complex128)))
def test_seed_tf_issue_3348_gradient_of_z_squared_and_exp(subject, record, z):
    """tensorflow#3348 at z = 0.1j, no cotangent: TF gives -0.2j for z*z and
    0.99500416527802571-0.099833416646828155j for exp (conj(f')); the reporter expected f'.
    (JAX's and PyTorch's runners pass explicit ones; TF's v1 tf.gradients now refuses.)"""
    record.example(z=z)
    seeds = {"mul": -0.2j, "exp": 0.99500416527802571 - 0.099833416646828155j}
    for op, tf_answer in seeds.items():
        try:
            _, (g,) = subject.vjp(HOLOMORPHIC[op][0].of(subject), z)
        except Exception as e:  # tf.gradients without grad_ys; anything else fails the check
            record.check(EXPECT, complex_output_grad=cmp.error_name(e))
            continue
        forms = {"conj(f')*u": np.array(tf_answer), "f'*u": np.conj(np.array(tf_answer))}
        kind = classify(g, forms)
        record.check(EXPECT, **{f"holomorphic_vjp[{op}]": kind})
        record.close(
            name=f"grad[{op}]", out=g, ref=forms[kind], oracle="closed-form", scale=cmp.own(forms[kind]), tol=TOL
        )


@given(z=st.just(np.array([3 + 4j, 1j], np.complex64)))
def test_seed_squared_modulus_and_abs(subject, record, z):
    """jax#9110: x**2 + y**2 at 3+4j is 6+8j in PyTorch, 6-8j in JAX; jax#1853: grad |z| at
    1j is -1j in JAX (1j in TF and PyTorch)."""
    record.example(z=z)
    _, (g,) = subject.vjp(ReImSquares.of(subject), z[:1])
    forms = {"2z": np.array([6 + 8j], np.complex64), "2conj(z)": np.array([6 - 8j], np.complex64)}
    kind = classify(g, forms)
    record.check(EXPECT, **{"real_loss_grad[abs2]": kind})
    record.close(
        name="grad[x**2+y**2]", out=g, ref=forms[kind], oracle="closed-form", scale=cmp.own(forms[kind]), tol=TOL
    )
    _, (g,) = subject.vjp(Abs.of(subject), z[1:])
    forms = {"z/|z|": np.array([1j], np.complex64), "conj(z)/|z|": np.array([-1j], np.complex64)}
    kind = classify(g, forms)
    record.check(EXPECT, **{"real_loss_grad[abs]": kind})
    record.close(name="grad[abs]", out=g, ref=forms[kind], oracle="closed-form", scale=cmp.own(forms[kind]), tol=TOL)
