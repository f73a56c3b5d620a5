"""Fake-quant gradient: tf.quantization.fake_quant_with_min_max_vars, forward and gradients.

Source: seeds/002 ("tf.fake_quant_with_min_max_vars is a differentiable function?", the
thread of tensorflow#22977). Forward, as the CPU kernel computes it in float32
(``fake_quant_ops_functor.h``): quant_min = int(narrow_range), quant_max = 2**num_bits - 1,
``scale = (max - min) / (quant_max - quant_min)``, zero point ``zp = quant_min - min /
scale`` clamped to [quant_min, quant_max] and rounded half away from zero, nudged range
``[(quant_min - zp) * scale, (quant_max - zp) * scale]`` (it always holds 0: [1, 2] becomes
[0, 1]), then ``floor((clamp(x) - nudged_min) / scale - (zp - quant_min) + 0.5) * scale``
(ties round up, 0 maps to exactly 0). Gradients (FakeQuantWithMinMaxVarsGradient):
``dx = dy`` where nudged_min <= x <= nudged_max else 0, ``dmin = sum(dy[x < nudged_min])``,
``dmax = sum(dy[x > nudged_max])``.

The seed's puzzle: ``tf.gradients(fq(x, min=reduce_min(x), max=reduce_max(x),
num_bits=3), x)`` is mostly 1, sometimes 0, 2, 3, 4. The gradient reaching x is the direct
one (1 inside the nudged range, 0 outside) plus dmin and dmax routed back through
reduce_min/reduce_max to the argmin/argmax (ties share equally, math_grad._MinOrMaxGrad).
The nudge moves [min(x), max(x)] by under half a step, so one side clamps, the extreme
element with it: it gets 0 + (number clamped), the other clamped elements 0 (worked
cases in ``SEED_CASES``).

JAX has no fake-quant op: its rows run a jnp port (the kernel's forward, then the op's
gradient as a straight-through ``where``/``stop_gradient``), which checks that JAX's own
min/max gradient reproduces the puzzle; XLA:CPU's vectorised float32 division is not
correctly rounded, so JAX values are compared away from rounding ties. PyTorch runs
``fake_quantize_per_tensor_affine`` with TF's nudged scale and zero point. Both TF
lowerings (CPU kernel, XLA) are emulated bit for bit below; where they differ an example
is checked against the one it matches, and observation ``lowering`` says which
(``zero_point`` where the difference is a half-way zero point's rounding).

Declared: TF under XLA lowers the op with ``scale = (max - min) * (1 / levels)`` and
``k * scale + nudged_min``, so up to TF 2.21 a half-way zero point may round the other way
(tensorflow#117962; tf-nightly rounds it like the kernel from 2026-08-23). JAX under jit gets the same nudge
from XLA's simplifier (A / Const => A * (1 / Const)). TF under XLA maps 0 to nudged_min's
rounding residual, not exactly 0 (tensorflow#47193). TF under XLA gives NaN for min = max = 0, where the kernel returns
zeros and passes the gradient through. PyTorch rounds ties to even (TF: half up). PyTorch
takes its STE mask after rounding, half a step wider on each side than the nudged range.
PyTorch gives min/max no gradient, so the seed's gradient is the mask only.
"""

import numpy as np
from hypothesis import example, given, strategies as st
from hypothesis.extra import numpy as hnp

from suite import compare as cmp, strategies as ss
from suite.behaviours import Floor, behaviour, on
from suite.expectations import expect, expectations
from suite.program import Program

BEHAVIOUR = behaviour(
    "fake-quant-gradient",
    sources=["002"],
    links=[
        "https://www.tensorflow.org/api_docs/python/tf/quantization/fake_quant_with_min_max_vars",
        "https://github.com/tensorflow/tensorflow/blob/master/tensorflow/core/kernels/fake_quant_ops_functor.h",
        "https://github.com/tensorflow/tensorflow/issues/22977",
        "https://pytorch.org/docs/stable/generated/torch.fake_quantize_per_tensor_affine.html",
    ],
    floor=Floor(
        "mixed",
        "Per element: quantized values (each from its own x, an integer times the scale, held relatively; "
        "TensorFlow under XLA at its terms k * scale and nudged_min) and the seed's gradient (w_i inside the range, "
        "plus the clamped cotangents' sum at the tied extremes: scale the same routing of |w|); dx is exact. "
        "dmin and dmax are scalar sums of the clamped cotangents, floored at their own magnitude; the lowering "
        "and mask classifiers tell apart candidates a quantization step or a mask edge apart (array-level).",
    ),
)

XLA_KERNEL = (
    "https://github.com/tensorflow/tensorflow/blob/master/tensorflow/compiler/tf2xla/kernels/fake_quantize_ops.cc"
)
XLA_SIMPLIFIER = "https://github.com/openxla/xla/blob/main/xla/hlo/transforms/simplifiers/algebraic_simplifier.cc"
TORCH_DOC = "https://pytorch.org/docs/stable/generated/torch.fake_quantize_per_tensor_affine.html"
TORCH_NO_QPARAM_GRAD = (
    "scale/zero_point are plain numbers (a scale tensor with requires_grad raises "
    "'not differentiable with respect to argument scale'): no gradient reaches min/max"
)
EXPECT = expectations(
    {
        "lowering": "kernel",
        "zero_point": "kernel",
        "forward": "nudged-grid",
        "x_grad_mask": "nudged-range",
        "min_max_grad": "sum-outside",
        "seed_grad": "mask+routed-counts",
        "tie_rounding": "half-up",
        "zero_maps_to": "exact-zero",
        "zero_range": "zero+passthrough",
    },
    expect(
        "lowering",
        "xla-lowering",
        framework="tensorflow",
        mode="xla",
        reason="tf2xla lowers FakeQuantWithMinMaxVars(Gradient) with scale = (max-min)*(1/levels) and "
        "k*scale + nudged_min, not the CPU kernel's division and (k - zp)*scale: ulp differences and "
        "boundary masks (the half-way zero point is the key zero_point)",
        link="https://github.com/tensorflow/tensorflow/issues/119411",
    ),
    expect(
        "zero_point",
        "xla-lowering",
        framework="tensorflow",
        mode="xla",
        versions="<2.22.0.dev20260823",
        reason="until the tf-nightly of 2026-08-23 the XLA lowering nudges the zero point from its reciprocal-product "
        "scale, so a half-way zero point (2.4999998 for min=-0.5, max=2.5, 4 bits) rounds the other way than the "
        "CPU kernel's 2.5 (tensorflow#117962). PR 117965 (floor(x + 0.5) in XlaNudge) was not what ended it: a "
        "review on tensorflow#124718 (2026-08-05) still saw XLA round a half-way zero point down, and the bisect "
        "places the change between 2.22.0.dev20260809 and 2.22.0.dev20260823 (this compare range)",
        link="https://github.com/tensorflow/tensorflow/compare/8c2da370ce9...64fbb70af66",
    ),
    expect(
        "zero_point",
        "xla-lowering",
        framework="jax",
        mode="jit",
        device="cpu",  # on a GPU the rounding is recorded, not declared: see gpu_rounding
        reason="the jnp port's division by the constant becomes a reciprocal product under jit (XLA's algebraic "
        "simplifier), so the half-way zero point rounds as TF's XLA lowering did up to 2.21",
        link=XLA_SIMPLIFIER,
    ),
    expect(
        "zero_maps_to",
        "rounding-residual",
        framework="tensorflow",
        mode="xla",
        reason="XLA computes k*scale + nudged_min, so 0 is nudged_min's rounding residual (-3.87e-07 for "
        "min=-25, max=20); the CPU kernel computes (k - zp)*scale, exact since the #47193 fix",
        link="https://github.com/tensorflow/tensorflow/issues/47193",
    ),
    expect(
        "zero_range",
        "nan",
        framework="tensorflow",
        mode="xla",
        reason="the CPU kernel special-cases min == max == 0 (zeros, gradient passed through); the XLA "
        "lowering does not and divides 0 by a zero scale",
        link=XLA_KERNEL,
    ),
    expect(
        "tie_rounding",
        "half-to-even",
        framework="torch",
        reason="fake_quantize_per_tensor_affine uses std::nearby_int (half to even); TF floors x + 0.5",
        link=TORCH_DOC,
    ),
    expect(
        "x_grad_mask",
        "rounded-range",
        framework="torch",
        reason="the STE mask is quant_min <= nearby_int(x/scale) + zero_point <= quant_max, half a step "
        "wider on each side than TF's nudged_min <= x <= nudged_max",
        link=TORCH_DOC,
    ),
    expect("min_max_grad", "none", framework="torch", reason=TORCH_NO_QPARAM_GRAD, link=TORCH_DOC),
    expect("seed_grad", "mask-only", framework="torch", reason=TORCH_NO_QPARAM_GRAD, link=TORCH_DOC),
)
LOWERINGS = ("kernel", "xla-lowering")
NUM_BITS = (2, 3, 8, 16)
# Few shapes: the op is elementwise, and each new shape recompiles the JAX port op by op (~2 s).
SHAPES = ((6,), (2, 3))
F32 = np.float32


# ---------------------------------------------------------------- closed forms (float32, as the kernels)
def _round_half_away(v):
    return F32(np.sign(v) * np.floor(np.abs(v) + F32(0.5)))


def nudge(mn, mx, num_bits, narrow_range, lowering="kernel"):
    """(nudged_min, nudged_max, scale, zero_point) as the CPU kernel or the XLA lowering computes them.

    For min=-0.5, max=2.5, num_bits=4 the kernel's zero point is 2.5 -> 3, nudged range
    [-0.6, 2.4]; XLA's scale is one ulp larger, zero point 2.4999998 -> 2, range [-0.4, 2.6].
    """
    qmin, qmax = F32(int(narrow_range)), F32(2**num_bits - 1)
    mn, mx = F32(mn), F32(mx)
    scale = F32((mx - mn) / (qmax - qmin)) if lowering == "kernel" else F32((mx - mn) * (F32(1) / (qmax - qmin)))
    zp = F32(qmin - mn / scale)
    nzp = qmin if zp <= qmin else qmax if zp >= qmax else _round_half_away(zp)
    return F32((qmin - nzp) * scale), F32((qmax - nzp) * scale), scale, nzp


def fake_quant(x, mn, mx, num_bits, narrow_range, lowering="kernel"):
    if F32(mn) == 0 and F32(mx) == 0 and lowering == "kernel":
        return np.zeros_like(x)  # the kernel's special case; XLA divides by the zero scale
    nmin, nmax, scale, _ = nudge(mn, mx, num_bits, narrow_range, lowering)
    shifted = np.maximum(np.minimum(x, nmax), nmin) - nmin
    if lowering == "kernel":
        levels = F32(2**num_bits - 1 - int(narrow_range))
        quant_zero = np.floor(-nmin * F32(levels / (F32(mx) - F32(mn))) + F32(0.5))  # = zp - quant_min
        return (np.floor(shifted / scale - quant_zero + F32(0.5)) * scale).astype(F32)
    k = np.floor(shifted * (F32(1) / scale) + F32(0.5))
    return (k.astype(np.float64) * scale + np.float64(nmin)).astype(F32)  # one rounding: the CPU FMA


def fake_quant_grads(x, w, mn, mx, num_bits, narrow_range, lowering="kernel"):
    """(dx, dmin, dmax) of sum(w * fake_quant(x, mn, mx))."""
    nmin, nmax, _, _ = nudge(mn, mx, num_bits, narrow_range, lowering)
    return (w * ((x >= nmin) & (x <= nmax)), F32(np.sum(w[x < nmin], dtype=F32)), F32(np.sum(w[x > nmax], dtype=F32)))


def unnudged(x, mn, mx, num_bits, narrow_range):
    """The quantizer without the nudge (zero not representable): what a regression would give."""
    scale = F32((F32(mx) - F32(mn)) / F32(2**num_bits - 1 - int(narrow_range)))
    shifted = np.maximum(np.minimum(x, F32(mx)), F32(mn)) - F32(mn)
    return (np.floor(shifted / scale + F32(0.5)) * scale + F32(mn)).astype(F32)


def value_scale(subject, ref, mn, mx, num_bits, narrow_range=False):
    """Per element, the magnitude a quantized value is held at (float64). The kernel's, the jnp port's and
    PyTorch's (k - zp) * scale is one rounding of an integer times the scale (0 is exactly 0): its own
    magnitude. TensorFlow under XLA adds k * scale and nudged_min (0 comes back as nudged_min's rounding
    residual, declared): the larger of those two terms, |ref_i - nudged_min| and |nudged_min|."""
    ref = np.asarray(ref, np.float64)
    if subject.framework != "tensorflow" or subject.mode != "xla":
        return np.abs(ref)
    nmin = np.float64(nudge(mn, mx, num_bits, narrow_range, "xla-lowering")[0])
    return np.maximum(np.maximum(np.abs(ref), np.abs(ref - nmin)), abs(nmin))


def rounded_range(x, mn, mx, num_bits, narrow_range):
    """PyTorch's STE mask, with TF's nudged scale and zero point."""
    _, _, scale, nzp = nudge(mn, mx, num_bits, narrow_range)
    q = np.rint(x * (F32(1) / scale)) + nzp
    return (q >= int(narrow_range)) & (q <= 2**num_bits - 1)


def seed_grad(x, w, num_bits, narrow_range, lowering="kernel"):
    """d/dx of sum(w * fq(x, min(x), max(x))): the direct mask plus dmin/dmax routed to the extremes."""
    dx, dmin, dmax = fake_quant_grads(x, w, x.min(), x.max(), num_bits, narrow_range, lowering)
    at_min, at_max = (x == x.min()).astype(F32), (x == x.max()).astype(F32)
    return dx + at_min / at_min.sum() * dmin + at_max / at_max.sum() * dmax


def near_ties(x, mn, mx, num_bits, narrow_range):
    """Elements within rounding error of a half step (in or outside the range: PyTorch's mask edges),
    where implementations that divide differently may pick either level."""
    nmin, _, scale, _ = nudge(mn, mx, num_bits, narrow_range)
    t = (x.astype(np.float64) - nmin) / np.float64(scale)
    return np.abs(t - np.floor(t) - 0.5) < 2.0 ** (num_bits - 20)


def classify(out, candidates, *, tol, where=None):
    """The label of the candidates ``out`` matches; None where they do not discriminate
    (``out`` matches several labels), ``"other"`` where it matches none.

    >>> classify(np.ones(2), [("a", np.ones(2)), ("b", np.zeros(2))], tol=cmp.EXACT)
    'a'
    """

    def same(ref):
        a, b = np.asarray(out, np.float64), np.asarray(ref, np.float64)
        if where is not None:
            a, b = a[where], b[where]
        return cmp.rel_err(a, b, rtol=tol.of(F32), dtype=F32) <= tol.of(F32)

    hits = {label for label, ref in candidates if same(ref)}
    return hits.pop() if len(hits) == 1 else None if hits else "other"


# ---------------------------------------------------------------- strategies
@ss.cached
def _bounds():
    return st.one_of(ss.floats(F32, -6, 6), st.integers(-24, 24).map(lambda k: k / 4))


RANGES = st.tuples(_bounds(), _bounds()).filter(lambda t: abs(t[0] - t[1]) >= 0.01)


@st.composite
def quantizer_inputs(draw):
    """(x, min, max, cotangent, num_bits, narrow_range). Quarter-integer bounds give half-way zero points;
    x mixes half-integers (ties) with points placed relative to the range (edges, PyTorch's wider mask)."""
    nb = draw(ss.choice(NUM_BITS), label="num_bits")
    nr = draw(st.booleans(), label="narrow_range")
    lo, hi = sorted(draw(RANGES, label="range"))
    shape = draw(ss.choice(SHAPES), label="shape")
    absolute = draw(ss.float_arrays(dtype=F32, shape=shape, min_value=-8, max_value=8, halfway=True), label="x_abs")
    u = draw(ss.arrays(np.float64, shape, elements=st.floats(-0.5, 1.5)), label="x_rel")
    x = np.where(draw(ss.arrays(np.bool_, shape), label="which"), absolute, (lo + (hi - lo) * u).astype(F32))
    x[np.abs(x) < np.finfo(F32).tiny] = 0  # no subnormals: CPU kernels flush them to zero
    return x, F32(lo), F32(hi), draw(ss.like(x), label="cotangent"), nb, nr


@ss.cached
def _non_constant(shape):
    el = st.one_of(ss.floats(F32, -3, 3), st.integers(-6, 6).map(lambda k: k / 2))
    return hnp.arrays(F32, shape, elements=el).filter(lambda a: a.max() > a.min())


@st.composite
def seed_inputs(draw):
    """Non-constant x with repeated values (tied extremes); cotangent ones (the seed) or drawn."""
    shape = draw(ss.choice(SHAPES), label="shape")
    x = draw(_non_constant(shape), label="x")
    w = draw(st.one_of(st.just(np.ones_like(x)), ss.like(x)), label="cotangent")
    return x, w, draw(ss.choice((3, 8)), label="num_bits"), draw(st.booleans(), label="narrow_range")


# ---------------------------------------------------------------- the programs
class FakeQuant(Program):
    """fake_quant_with_min_max_vars(x, min, max): TF's op; a jnp port (JAX has none); PyTorch's op
    with TF's nudged scale and zero point. ``mn``, ``mx``: arrays, or numbers (fixed bounds)."""

    def tensorflow(tf, x, mn, mx, *, num_bits=8, narrow_range=False):
        return tf.quantization.fake_quant_with_min_max_vars(x, mn, mx, num_bits=num_bits, narrow_range=narrow_range)

    def jax(jax, x, mn, mx, *, num_bits=8, narrow_range=False):
        """A jnp port: the kernel's forward, and its gradient rule as a straight-through where."""
        jnp, sg = jax.numpy, jax.lax.stop_gradient
        qmin, qmax = float(narrow_range), float(2**num_bits - 1)
        lo, hi = sg(mn), sg(mx)
        scale = (hi - lo) / (qmax - qmin)
        zp = jnp.clip(jnp.sign(qmin - lo / scale) * jnp.floor(jnp.abs(qmin - lo / scale) + 0.5), qmin, qmax)
        nmin, nmax = (qmin - zp) * scale, (qmax - zp) * scale
        q = jnp.floor((jnp.clip(x, nmin, nmax) - nmin) / scale - (zp - qmin) + 0.5) * scale
        # value nudged_min/x/nudged_max, gradient to min/x/max: what FakeQuantWithMinMaxVarsGradient returns
        through = jnp.where(x < nmin, nmin + (mn - lo), jnp.where(x > nmax, nmax + (mx - hi), x))
        return sg(q) + (through - sg(through))

    def torch(torch, x, mn, mx, *, num_bits=8, narrow_range=False):
        """The native op, with scale and zero point nudged from min/max the way TF does."""
        qmin, qmax = int(narrow_range), 2**num_bits - 1
        lo, hi = torch.as_tensor(mn).detach(), torch.as_tensor(mx).detach()
        scale = (hi - lo) / (qmax - qmin)
        zp = qmin - lo / scale
        zp = int(torch.clamp(torch.sign(zp) * torch.floor(torch.abs(zp) + 0.5), qmin, qmax))
        return torch.fake_quantize_per_tensor_affine(x, float(scale), zp, qmin, qmax)


class SeedFakeQuant(Program):
    """seeds/002: fake_quant_with_min_max_vars(x, min=reduce_min(x), max=reduce_max(x))."""

    def tensorflow(tf, x, *, num_bits=3, narrow_range=False):
        return FakeQuant.tensorflow(
            tf, x, tf.reduce_min(x), tf.reduce_max(x), num_bits=num_bits, narrow_range=narrow_range
        )

    def jax(jax, x, *, num_bits=3, narrow_range=False):
        return FakeQuant.jax(jax, x, jax.numpy.min(x), jax.numpy.max(x), num_bits=num_bits, narrow_range=narrow_range)

    def torch(torch, x, *, num_bits=3, narrow_range=False):
        return FakeQuant.torch(torch, x, x.min(), x.max(), num_bits=num_bits, narrow_range=narrow_range)


class SeedV1Graph(Program):
    """seeds/002 as written: the v1 name tf.compat.v1.fake_quant_with_min_max_vars and tf.gradients."""

    def tensorflow(tf, x):
        x = tf.cast(x, tf.float32)
        x_q = tf.compat.v1.fake_quant_with_min_max_vars(x, min=tf.reduce_min(x), max=tf.reduce_max(x), num_bits=3)
        return tf.gradients(x_q, x)


def oracle_name(o) -> str:
    """JAX has no fake-quant op: its row runs the jnp port of TF's kernel, a closed form, so it
    is named (and filed) as one; PyTorch's fake_quantize ops are the independent oracle."""
    return o.id if o.framework == "torch" else f"closed-form (jnp port, {o.id})"


# ---------------------------------------------------------------- properties
@given(q=quantizer_inputs())
def test_forward_is_the_nudged_quantizer(subject, oracles, record, q):
    """Value equals the closed form: bit-exact for TF (the kernel, or XLA's lowering where the two
    differ); away from rounding ties for the JAX port and PyTorch."""
    x, mn, mx, _, nb, nr = q
    record.example(x=x, min=mn, max=mx, num_bits=nb, narrow_range=nr)
    out = subject.run(FakeQuant.of(subject), x, mn, mx, num_bits=nb, narrow_range=nr)
    refs = {k: fake_quant(x, mn, mx, nb, nr, k) for k in LOWERINGS}
    exact = subject.framework == "tensorflow"
    tol, clean = (cmp.EXACT, np.ones(x.shape, bool)) if exact else (cmp.VALUE, ~near_ties(x, mn, mx, nb, nr))
    lowering = classify(out, refs.items(), tol=tol, where=clean)
    if lowering in refs:
        gpu_rounding(subject, record, lowering, rounding_key(mn, mx, nb, nr))
    ref = refs[lowering if lowering in refs else "kernel"]
    forward = classify(out, [("nudged-grid", ref), ("unnudged", unnudged(x, mn, mx, nb, nr))], tol=tol, where=clean)
    record.check(EXPECT, forward=forward or "nudged-grid")
    at = value_scale(subject, ref, mn, mx, nb, nr)  # elementwise: each value from its own x
    record.close(
        name="value", out=np.asarray(out)[clean], ref=ref[clean], oracle="closed-form", tol=tol, scale=at[clean]
    )
    if cmp.rel_err(*refs.values()) <= cmp.VALUE.of(F32):  # the lowerings agree, so must the oracles
        clean = ~near_ties(x, mn, mx, nb, nr)
        for o in oracles:
            r = o.run(FakeQuant.of(o), x, mn, mx, num_bits=nb, narrow_range=nr)
            record.close(name="value", out=np.asarray(out)[clean], ref=np.asarray(r)[clean], oracle=oracle_name(o),
                         tol=cmp.VALUE, scale=at[clean])  # fmt: skip


#: Found by a dev-profile draw: every x on the lower edge of 2-bit levels, where the kernel's
#: division and the reciprocal product (JAX's jit, TF's XLA) give different gradients.
LOWERING_EDGE = (np.full(6, -1.75, F32), F32(-1.75), F32(1.75), np.ones(6, F32), 2, False)

#: min=-2, max=5, 3 bits (scale 1, zero point 2, nudged range [-2, 5]): -2.3 and 5.4 lie within half a
#: step outside the range, so PyTorch's rounded mask keeps them where TF's drops them (-3 and 6 lie
#: outside both, away from ties): PyTorch's declared x_grad_mask is told in every run.
ROUNDED_RANGE_EDGE = (np.array([-2.3, -3.0, 0.25, 2.0, 5.4, 6.0], F32), F32(-2), F32(5), np.ones(6, F32), 3, False)


@example(q=LOWERING_EDGE)
@example(q=ROUNDED_RANGE_EDGE)
@given(q=quantizer_inputs())
def test_gradients_are_range_mask_and_clamped_sums(subject, oracles, record, q):
    """dx = w inside the nudged range (inclusive), dmin = sum(w) below it, dmax = sum(w) above it."""
    x, mn, mx, w, nb, nr = q
    record.example(x=x, min=mn, max=mx, w=w, num_bits=nb, narrow_range=nr)
    _, (dx, dmin, dmax) = subject.vjp(FakeQuant.of(subject), x, mn, mx, cotangent=w, num_bits=nb, narrow_range=nr)
    refs = {k: fake_quant_grads(x, w, mn, mx, nb, nr, k) for k in LOWERINGS}
    lowering = None
    if dmin is not None and dmax is not None:
        flat = lambda g: np.concatenate([np.ravel(g[0]), [g[1], g[2]]])  # noqa: E731
        lowering = classify(flat((dx, dmin, dmax)), [(k, flat(r)) for k, r in refs.items()], tol=cmp.GRAD)
        if lowering in refs:
            gpu_rounding(subject, record, lowering, rounding_key(mn, mx, nb, nr))
    rdx, rmin, rmax = refs[lowering if lowering in refs else "kernel"]
    torch_mask = w * rounded_range(x, mn, mx, nb, nr)
    clean = ~near_ties(x, mn, mx, nb, nr) if subject.framework == "torch" else np.ones(x.shape, bool)
    mask = classify(
        dx, [("nudged-range", rdx), ("rounded-range", torch_mask), ("identity", w)], tol=cmp.EXACT, where=clean
    )
    if mask:
        record.check(EXPECT, x_grad_mask=mask)
    record.close(
        name="dx",
        out=np.asarray(dx)[clean],
        oracle="closed-form",
        tol=cmp.EXACT,
        ref=(torch_mask if subject.framework == "torch" else rdx)[clean],
    )
    if dmin is None and dmax is None:
        record.check(EXPECT, min_max_grad="none")
    else:
        mm = classify([dmin, dmax], [("sum-outside", [rmin, rmax]), ("zero", [0, 0])], tol=cmp.GRAD)
        if mm:
            record.check(EXPECT, min_max_grad=mm)
        record.close(name="dmin", out=dmin, ref=rmin, oracle="closed-form")
        record.close(name="dmax", out=dmax, ref=rmax, oracle="closed-form")
    if not np.array_equal(refs["kernel"][0], refs["xla-lowering"][0]):
        return  # the lowerings' masks differ here: the oracles' (eager or jit) may too
    for o in oracles:
        _, (odx, omin, omax) = o.vjp(FakeQuant.of(o), x, mn, mx, cotangent=w, num_bits=nb, narrow_range=nr)
        if o.framework == "torch":  # compare where PyTorch's wider mask and TF's agree
            agree = clean & ~near_ties(x, mn, mx, nb, nr) & (rdx == torch_mask)
            record.close(
                name="dx", out=np.asarray(dx)[agree], ref=np.asarray(odx)[agree], oracle=oracle_name(o), tol=cmp.EXACT
            )
        elif dmin is not None:
            record.close(name="dx", out=dx, ref=odx, oracle=oracle_name(o), tol=cmp.EXACT)
            record.close(name="dmin", out=dmin, ref=omin, oracle=oracle_name(o))
            record.close(name="dmax", out=dmax, ref=omax, oracle=oracle_name(o))


# An input where the two emulated lowerings (CPU kernel, XLA) give different seed gradients
# (found by search: [1]*6 against [1, 1, 1, 2, 1, 0]: its zero point 3 / (6/7) = 3.5 is half-way),
# so ``zero_point`` is observed whatever
# the derandomized draws are.
LOWERINGS_DIFFER = (np.array([1.5, 3.0, 0.0625, -3.0, 0.0, -2.875], F32), np.ones(6, F32), 3, False)
#: An x whose maximum PyTorch's rounded mask drops (mask-only gives it 0) while TF's routed
#: counts give it 1: PyTorch's declared seed_grad is told in every run, not in lucky draws.
MASK_ONLY_DIFFERS = (np.array([0.5, 1.5, 0.5, 1.5, 1.5, 2.0], F32), np.ones(6, F32), 3, False)


@example(s=LOWERINGS_DIFFER)
@example(s=MASK_ONLY_DIFFERS)
@given(s=seed_inputs())
def test_seed_gradient_is_mask_plus_counts_routed_to_the_extremes(subject, record, s):
    """d/dx of fq(x, reduce_min(x), reduce_max(x)) = w inside the nudged range, plus the clamped sums
    shared by the tied argmin/argmax elements: the seed's 0/2/3/4 predicted for every element."""
    x, w, nb, nr = s
    record.example(x=x, w=w, num_bits=nb, narrow_range=nr)
    _, (g,) = subject.vjp(SeedFakeQuant.of(subject), x, cotangent=w, num_bits=nb, narrow_range=nr)
    preds = {k: seed_grad(x, w, nb, nr, k) for k in LOWERINGS}
    nmin, nmax, _, _ = nudge(x.min(), x.max(), nb, nr)
    mask_only = [
        ("mask-only", w * ((x >= nmin) & (x <= nmax))),
        ("mask-only", w * rounded_range(x, x.min(), x.max(), nb, nr)),
    ]
    clean = ~near_ties(x, x.min(), x.max(), nb, nr) if subject.framework == "torch" else np.ones(x.shape, bool)
    if subject.device == "gpu":  # see gpu_rounding: an element at a nudged bound may fall either side of it
        clean &= ~at_nudged_bounds(x, nb, nr)
    seed = classify(g, [("mask+routed-counts", p) for p in preds.values()] + mask_only, tol=cmp.GRAD, where=clean)
    if seed:
        record.check(EXPECT, seed_grad=seed)
    lowering = classify(g, preds.items(), tol=cmp.GRAD, where=clean if subject.device == "gpu" else None)
    if lowering in preds:  # where the two differ here, the zero point is half-way (3.5 for LOWERINGS_DIFFER)
        gpu_rounding(subject, record, lowering)
    # per element: w_i inside the range, plus at the argmin/argmax the clamped cotangents' sum over the ties
    # (scale: the same routing of |w|)
    if subject.framework == "torch":
        at = np.abs(mask_only[1][1].astype(np.float64))
        record.close(name="grad", out=np.asarray(g)[clean], ref=mask_only[1][1][clean], oracle="closed-form",
                     scale=at[clean])  # fmt: skip
    else:
        chosen = lowering if lowering in preds else "kernel"
        ref, at = preds[chosen], seed_grad(x, np.abs(w), nb, nr, chosen).astype(np.float64)
        record.close(name="grad", out=np.asarray(g)[clean], ref=ref[clean], oracle="closed-form", scale=at[clean])


def rounding_key(mn, mx, num_bits, narrow_range) -> str:
    """The key a lowering's observation is filed under: ``zero_point`` where the two lowerings
    nudge the zero point to different levels (it is half-way, as in LOWERING_EDGE's 1.5),
    since that is the zero point's rounding (fixed in tf-nightly 2026-08-23), else ``lowering``."""
    zps = {nudge(mn, mx, num_bits, narrow_range, k)[3] for k in LOWERINGS}
    return "zero_point" if len(zps) > 1 else "lowering"


def at_nudged_bounds(x, num_bits, narrow_range):
    """Elements within an ulp of the nudged min or max (inside or out)."""
    nmin, nmax, _, _ = nudge(x.min(), x.max(), num_bits, narrow_range)
    return (np.abs(x - nmin) <= np.spacing(np.abs(nmin))) | (np.abs(x - nmax) <= np.spacing(np.abs(nmax)))


def gpu_rounding(subject, record, lowering, key="zero_point"):
    """Which lowering's rounding (``zero_point``, ``lowering``): held to the declarations on the CPU.
    On a GPU it is recorded only: measured on an H100 (JAX 0.11.2, torch 2.11), GPU float32 arithmetic rounds
    the half-way point 2.5 like the reciprocal product (TF's XLA lowering to 2.21) and 3.5
    like the CPU kernel's division, in eager JAX, jit and PyTorch alike, and puts a drawn max
    one ulp outside its nudged max; neither CPU lowering describes it, so the values are held
    to whichever of the two lowerings' closed forms they match (``other`` fails)."""
    __tracebackhide__ = True
    if subject.device == "gpu" or (subject.framework == "jax" and key == "lowering"):
        # the JAX row runs our jnp port, whose edge-of-level rounding under jit depends on which
        # divisions XLA's simplifier turns into reciprocal products (measured: all -1.75 in
        # [-1.75, 1.75] at 2 bits rounds as XLA, zeros in [-0.25, 0] as the kernel)
        record.observe(**{key: lowering})
    else:
        record.check(EXPECT, **{key: lowering})


# ---------------------------------------------------------------- seed examples
# x, expected tf.gradients(fq(x, reduce_min(x), reduce_max(x), num_bits=3), x)
SEED_CASES = {
    "three-below": ([-1.2, -1.1, -1.05, 0, 1, 2.3], [3, 0, 0, 1, 1, 1]),
    "four-below": ([-1.2, -1.1, -1.05, -1.01, 0, 2.3], [4, 0, 0, 0, 1, 1]),
    "two-above": ([-2.3, -1, 0, 1, 1.1, 1.2], [1, 1, 1, 1, 0, 2]),
    "tied-min": ([-1.2, -1.2, -1.1, 0, 1, 2.3], [1.5, 1.5, 0, 1, 1, 1]),
}


@on("tensorflow", "jax", "torch")
@given(cases=st.just(SEED_CASES))
def test_seed_gradients_0_2_3_4(subject, record, cases):
    """seeds/002's odd gradients, one clamped side at a time (nudged range [-1.0, 2.5] or [-2.5, 1.0]);
    PyTorch's wider mask keeps every clamped element here, so it gives all ones."""
    for name, (x, want) in cases.items():
        x, want = np.asarray(x, F32), np.asarray(want, F32)
        record.example(x=x, case=name)
        _, (g,) = subject.vjp(SeedFakeQuant.of(subject), x, num_bits=3)
        nmin, nmax, _, _ = nudge(x.min(), x.max(), 3, False)
        plain = rounded_range(x, x.min(), x.max(), 3, False).astype(F32)  # PyTorch's mask: all ones here
        candidates = [("mask+routed-counts", want), ("mask-only", (x >= nmin) & (x <= nmax)), ("mask-only", plain)]
        record.check(EXPECT, seed_grad=classify(g, candidates, tol=cmp.EXACT))
        record.equal(
            name=f"grad[{name}]", out=g, ref=want if subject.framework != "torch" else plain, oracle="closed-form"
        )


@on("tensorflow", modes=("graph",))
@given(seeds=st.just({0: [0, 1, 2], 8: [0, 1, 3], 15: [0, 1, 4], 1: [1]}))
def test_seed_v1_session_as_written(subject, record, seeds):
    """seeds/002 as written, so graph mode only (tf.cast(np.random.normal(0, 1, (10, 10))), the v1 name
    tf.compat.v1.fake_quant_with_min_max_vars, tf.gradients): gradient values {0, 1, 2}, {0, 1, 3}, {0, 1, 4}, {1}."""
    for s, values in seeds.items():
        x = np.random.default_rng(s).normal(0, 1, (10, 10))
        record.example(rng_seed=s, x=x)
        g = subject.run(SeedV1Graph.of(subject), x)[0]
        x32, ones = x.astype(F32), np.ones((10, 10), F32)
        nmin, nmax, _, _ = nudge(x32.min(), x32.max(), 3, False)
        candidates = [
            ("mask+routed-counts", seed_grad(x32, ones, 3, False)),
            ("mask-only", (x32 >= nmin) & (x32 <= nmax)),
        ]
        record.check(EXPECT, seed_grad=classify(g, candidates, tol=cmp.EXACT))
        record.equal(name=f"grad[{s}]", out=g, ref=candidates[0][1], oracle="closed-form")
        record.equal(name=f"values[{s}]", out=np.unique(g), ref=np.asarray(values, F32), oracle="closed-form")


@on("tensorflow", "jax", "torch")
@given(x=st.just(np.array([0.0, -0.0, 0.7, -0.7], F32)))
def test_zero_is_exactly_representable(subject, record, x):
    """tensorflow#47193: fq(0, min=-25, max=20, num_bits=8) is exactly 0 (the point of the nudge)."""
    record.example(x=x)
    out = subject.run(FakeQuant.of(subject), x, F32(-25), F32(20), num_bits=8)
    record.observe(zero_value=float(out[0]))
    record.check(EXPECT, zero_maps_to="exact-zero" if not np.any(out[:2]) else "rounding-residual")
    refs = {k: fake_quant(x, -25, 20, 8, False, k) for k in LOWERINGS}  # XLA: 0 -> -3.87e-07
    tol = cmp.EXACT if subject.framework == "tensorflow" else cmp.VALUE  # the JAX port: see the docstring
    lowering = classify(out, refs.items(), tol=tol)
    if lowering in refs:
        gpu_rounding(subject, record, lowering, "lowering")
    ref = refs[lowering if lowering in refs else "kernel"]
    record.close(
        name="value", out=out, ref=ref, oracle="closed-form", tol=tol, scale=value_scale(subject, ref, -25, 20, 8)
    )


@on("tensorflow", "jax", "torch")
@given(x=st.just(np.array([2.579, -0.6, 2.6, 0.0], F32)))
def test_half_way_zero_point(subject, record, x):
    """tensorflow#117962: min=-0.5, max=2.5, num_bits=4: zero point 2.5 rounds away from zero to 3, range
    [-0.6, 2.4]; with XLA's reciprocal-product scale (TF xla, JAX jit) it is 2.4999998 -> [-0.4, 2.6]."""
    record.example(x=x)
    out = subject.run(FakeQuant.of(subject), x, F32(-0.5), F32(2.5), num_bits=4)
    refs = {k: fake_quant(x, -0.5, 2.5, 4, False, k) for k in LOWERINGS}
    lowering = classify(out, refs.items(), tol=cmp.VALUE)
    gpu_rounding(subject, record, lowering)
    ref = refs[lowering if lowering in refs else "kernel"]
    at = value_scale(subject, ref, -0.5, 2.5, 4)
    record.close(name="value", out=out, ref=ref, oracle="closed-form", tol=cmp.VALUE, scale=at)


@on("tensorflow", "jax", "torch")
@given(x=st.just(np.array([-1.5, -0.5, 0.5, 1.5, 2.5], F32)))
def test_half_step_ties(subject, record, x):
    """min=-2, max=5, num_bits=3 (scale 1, zero point 2): TF floors x + 0.5 (ties up), torch rounds to even."""
    record.example(x=x)
    out = subject.run(FakeQuant.of(subject), x, F32(-2), F32(5), num_bits=3)
    rule = classify(out, [("half-up", np.floor(x + F32(0.5))), ("half-to-even", np.rint(x))], tol=cmp.EXACT)
    record.check(EXPECT, tie_rounding=rule)


@on("tensorflow")
@given(x=st.just(np.array([-1.0, 0.0, 0.5], F32)))
def test_degenerate_zero_range(subject, record, x):
    """min = max = 0: the CPU kernel returns zeros and passes the gradient through (dmin = dmax = 0).
    TensorFlow only: the special case is the kernel's, the port and PyTorch's op have no such range."""
    w = np.array([1.0, 2.0, 3.0], F32)
    record.example(x=x, w=w)
    out, (dx, dmin, dmax) = subject.vjp(FakeQuant.of(subject), x, F32(0), F32(0), cotangent=w)
    record.observe(dx=dx, dmin=float(dmin), dmax=float(dmax))
    zero_range = (
        "zero+passthrough"
        if not np.any(out) and np.array_equal(dx, w) and dmin == dmax == 0
        else "nan"
        if np.isnan(out).all()
        else "other"
    )
    record.check(EXPECT, zero_range=zero_range)
