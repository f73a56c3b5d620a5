"""Masked NaN gradients: what leaks through the branch tf.where did not select.

``tf.where(ok, f(x), 0)`` hides the value of ``f`` where ``ok`` is False, but reverse mode
still runs ``f``'s gradient there with a zero cotangent: where ``f'`` is infinite (sqrt,
log, 1/x, x**0.5, x**-1 at 0; x/|x| at the zero vector) or NaN (sqrt of a negative), ``0 * inf`` gives a
NaN gradient for an entry whose value was never used. The fix is the "double where":
``tf.where(ok, f(tf.where(ok, x, 1)), 0)`` never evaluates ``f`` at a bad point, so its
gradient is finite and equals the closed form (0 on the masked entries; at x = 0 the
left-hand derivative for sqrt and log, and no one-sided derivative for 1/x and x/|x|).
``tf.clip_by_norm`` uses that fix internally, so the zero vector passes its cotangent
through; ``tf.clip_by_global_norm`` returns all-NaN tensors when the global norm is inf or
NaN (also when it overflows although every entry is finite). JAX (``jnp.where``,
``jax.example_libraries.optimizers.clip_grads``) and PyTorch (``torch.where``,
``torch.renorm``, ``torch.nn.utils.clip_grad_norm_``) run the same programs as oracles.
Gradients are compared with closed forms, with the oracles, and (float64) with central
differences of each framework's own forward pass; at x = 0 one-sided differences say which
side, if any, a gradient equals.

Declared surprises:

- TensorFlow eager/function/graph: the CPU kernels of SqrtGrad and ReciprocalGrad return 0
  where the upstream gradient is 0 (``mul_no_nan``), so a masked sqrt or ``tf.math.reciprocal``
  has a zero gradient at its pole; under XLA (and for log, 1/x, x/|x| everywhere, and in
  JAX and PyTorch) the masked entry is NaN.
- TensorFlow ``clip_by_global_norm`` with an infinite norm: every clipped tensor is NaN;
  ``clip_grads`` and ``clip_grad_norm_`` scale by c/inf = 0 (zeros; NaN only at an infinite entry).
- TensorFlow ``clip_by_global_norm`` and JAX ``clip_grads`` have an all-NaN gradient when every
  entry is 0 (min(1/n, 1/c), one where): the identity's gradient there is the cotangent, which
  ``clip_by_norm`` (two-tap where) and ``torch.renorm`` give; ``clip_grads`` of one tensor too.
- PyTorch ``clip_grad_norm_`` rescales ``.grad`` in place without autograd: no gradient.
- tf-nightly (from 2026-10-10): ``where(x > 0, x**0.5, 0)`` and ``where(x != 0, x**-1, 0)`` no
  longer leak NaN at a masked 0 (``_PowGrad`` zeroes an infinite factor where the upstream
  gradient is 0), in every mode; up to 2.21, and in JAX and PyTorch, they do.

Sources: https://github.com/tensorflow/tensorflow/issues/38349,
https://github.com/tensorflow/tensorflow/issues/2540, https://github.com/jax-ml/jax/issues/347,
https://github.com/tensorflow/tensorflow/issues/22048,
https://github.com/tensorflow/tensorflow/issues/21363
"""

import dataclasses

import numpy as np
import pytest
from hypothesis import assume, example, given, strategies as st

from suite import compare as cmp, finite_diff, ops, strategies as ss
from suite.behaviours import Floor, behaviour
from suite.expectations import expect, expectations, raises
from suite.program import Program

TF_KERNEL = "https://github.com/tensorflow/tensorflow/blob/master/tensorflow/core/kernels/cwise_ops_gradients.h"
TF_MATH_GRAD = "https://github.com/tensorflow/tensorflow/blob/master/tensorflow/python/ops/math_grad.py"
TF_XLA_WHERE = "https://github.com/tensorflow/tensorflow/issues/118674"
JAX_FAQ = "https://docs.jax.dev/en/latest/faq.html#gradients-contain-nan-where-using-where"
JAX_OPTIMIZERS = "https://github.com/jax-ml/jax/blob/main/jax/example_libraries/optimizers.py"
TF_GLOBAL_NORM = "https://www.tensorflow.org/api_docs/python/tf/clip_by_global_norm"
TF_CLIP_OPS = "https://github.com/tensorflow/tensorflow/blob/master/tensorflow/python/ops/clip_ops.py"
TORCH_CLIP = "https://pytorch.org/docs/stable/generated/torch.nn.utils.clip_grad_norm_.html"

BEHAVIOUR = behaviour(
    "masked-nan-gradients",
    sources=[],
    links=[
        "https://github.com/tensorflow/tensorflow/issues/38349",
        "https://github.com/tensorflow/tensorflow/issues/2540",
        "https://github.com/jax-ml/jax/issues/347",
        "https://github.com/tensorflow/tensorflow/issues/22048",
        "https://github.com/tensorflow/tensorflow/issues/21363",
        "https://www.tensorflow.org/api_docs/python/tf/where",
        "https://www.tensorflow.org/api_docs/python/tf/clip_by_norm",
        TF_GLOBAL_NORM,
        TF_XLA_WHERE,
        JAX_FAQ,
    ],
    floor=Floor(
        "mixed",
        "Per element: where(ok, f(x), 0) of sqrt, log, 1/x, x**0.5, x**-1, its gradient w f'(x) (products and "
        "quotients, no cancellation) and the seeds' where(x > 0, 0, exp(x)) and where(y > 0, sqrt(y), y) are "
        "held relatively per element (scale 0.0). Array-level where results mix: x/|x| and its gradient "
        "(the row's norm, at |w|), clip_by_norm and clip_by_global_norm (the global norm, at the inputs' "
        "magnitude: c/n (w - t (t.w)/n^2) cancels), jax#347's row norms, and the central differences, whose "
        "error is absolute at the scale of the summed function.",
    ),
)

CLIP_KINDS = ("zero", "tiny", "inside", "outside")
GLOBAL_CASES = ("finite", "zero", "inf", "nan", "overflow")
TF_CPU_KERNEL_MODES = "eager|function|graph"  # XLA lowers SqrtGrad/ReciprocalGrad itself
MUL_NO_NAN = (
    "TensorFlow's CPU kernel ({op}Grad, cwise_ops_gradients.h) returns 0 where the upstream gradient "
    "is 0 (mul_no_nan), so the masked entry's 0 * f'(x) is 0 however bad f'(x) is; XLA lowers the "
    "gradient as dy * f'(x) and gives NaN, as JAX and PyTorch do"
)


# ---------------------------------------------------------------- the ops and their guards
class Positive(Program):
    def tensorflow(tf, x):
        return x > 0

    def jax(jax, x):
        return x > 0

    def torch(torch, x):
        return x > 0


class Nonzero(Program):
    def tensorflow(tf, x):
        return tf.not_equal(x, 0)

    def jax(jax, x):
        return x != 0

    def torch(torch, x):
        return x != 0


class NonzeroRow(Program):
    def tensorflow(tf, x):
        return tf.norm(x, axis=-1, keepdims=True) > 0

    def jax(jax, x):
        return jax.numpy.linalg.norm(x, axis=-1, keepdims=True) > 0

    def torch(torch, x):
        return torch.linalg.vector_norm(x, dim=-1, keepdim=True) > 0


def as_written(name, expression, f, df):
    """An op of this behaviour spelled as the same Python expression in every framework
    (``fn(module, x)``: ``1 / x`` and ``x ** p``, so that each picks its own kernel: RealDiv, Pow,
    integer_pow), with float64 closed forms of f and f'."""
    return ops.register(ops.Op(name, behaviour="masked-nan-gradients", tensorflow=expression, jax=expression,
                               torch=expression, reference=f, derivatives=(df,)))  # fmt: skip


def _rows_normalized(x):
    return x / np.sqrt(np.sum(x**2, axis=-1, keepdims=True))


#: Every op a user hides behind tf.where (an op-table entry: the database's, or one of this
#: behaviour's), by entry name, and the guard written for it: ``Positive`` (x > 0: the op is real
#: on the half line only, so negative x is outside its domain and unselected), ``Nonzero`` or
#: ``NonzeroRow`` (x / |x|). The expectations, the programs and the closed forms all read it, so
#: an op comes with its guard in one line.
GUARDS = {op.name: guard for op, guard in (
    (ops.view("masked-nan-gradients", "sqrt", closed_forms=True), Positive),
    (ops.view("masked-nan-gradients", "log", closed_forms=True), Positive),
    (ops.view("masked-nan-gradients", "reciprocal", closed_forms=True), Nonzero),
    (as_written("divide", lambda m, x: 1 / x, np.reciprocal, lambda x: -1 / x**2), Nonzero),
    (ops.register(ops.Op("normalize", behaviour="masked-nan-gradients",
                         tensorflow=lambda tf, x: x / tf.norm(x, axis=-1, keepdims=True),
                         jax=lambda jax, x: x / jax.numpy.linalg.norm(x, axis=-1, keepdims=True),
                         torch=lambda torch, x: x / torch.linalg.vector_norm(x, dim=-1, keepdim=True),
                         reference=_rows_normalized)), NonzeroRow),
    (as_written("x**0.5", lambda m, x: x**0.5, np.sqrt, lambda x: 0.5 / np.sqrt(x)), Positive),
    (as_written("x**-1", lambda m, x: x**-1, np.reciprocal, lambda x: -1 / x**2), Nonzero),
)}  # fmt: skip
ENTRIES = {op.name: op for op in ops.entries("masked-nan-gradients")}  # GUARDS' ops, as the table holds them


EXPECT = expectations(
    {
        **{f"naive_guarded[{op}]": "finite" for op in GUARDS},
        **{f"naive_masked[{op}]": "zero" for op in GUARDS if op != "normalize"},
        **{f"naive_unselected_zero[{op}]": "nan" for op in GUARDS},
        **{f"naive_unselected_negative[{op}]": "nan" for op, guard in GUARDS.items() if guard is Positive},
        "naive_unselected_negative[log]": "zero",  # 0 * (1/x) with x < 0 is -0: finite
        **{f"naive_side[{op}]": "neither" for op in GUARDS},
        **{f"double_where[{op}]": "finite" for op in GUARDS},
        **{f"double_where_side[{op}]": "left" if guard is Positive else "neither" for op, guard in GUARDS.items()},
        **{f"clip_by_norm_grad[{k}]": "scaled" if k == "outside" else "upstream" for k in CLIP_KINDS},
        **{
            f"global_norm[{c}]": {"finite": "finite", "zero": "zero", "nan": "nan"}.get(c, "+inf") for c in GLOBAL_CASES
        },
        "global_clip_value[finite]": "clipped",
        "global_clip_value[zero]": "clipped",
        "global_clip_value[inf]": "zero-and-nan",
        "global_clip_value[nan]": "all-nan",
        "global_clip_value[overflow]": "zero",
        "global_clip_grad[finite]": "finite",
        "global_clip_grad[zero]": "finite",  # the identity inside the ball: w
        "global_clip_grad[inf]": "all-nan",
        "global_clip_grad[nan]": "all-nan",
        "global_clip_grad[overflow]": "zero",
        "seed_2540": "nan",
        "seed_347_sqrt_then_where": "nan",
        "seed_347_where_then_sqrt": "zero",
        "seed_38349_where": "nan",
        "seed_38349_double_where": "other-branch",
    },
    *[
        expect(
            key,
            observed,
            framework="tensorflow",
            mode=TF_CPU_KERNEL_MODES,
            device="cpu",
            reason=MUL_NO_NAN.format(op=kernel),
            link=TF_KERNEL,
        )
        for key, observed, kernel in (
            ("naive_unselected_zero[sqrt]", "zero", "Sqrt"),
            ("naive_unselected_negative[sqrt]", "zero", "Sqrt"),
            ("naive_side[sqrt]", "left", "Sqrt"),  # the 0 it gives is the left-hand derivative
            ("naive_unselected_zero[reciprocal]", "zero", "Reciprocal"),
            ("seed_347_sqrt_then_where", "zero", "Sqrt"),
            ("seed_38349_where", "other-branch", "Sqrt"),
        )
    ],
    *[
        expect(
            key,
            observed,
            framework="tensorflow",
            versions=">=2.23.0.dev20261010",
            reason="from tf-nightly 2026-10-10 _PowGrad zeroes an infinite x**(p-1) where the upstream gradient is 0 "
            "(_GradCxPow in "
            "math_grad.py of 2.23.0.dev20261026), in every mode: the masked entry at x = 0 gets 0 * p * 0 = 0, not "
            "0 * inf = NaN (up to 2.21, and in JAX and PyTorch, NaN)" + why + "; no pull request for it turned up "
            "in a search, the file is the link",
            link=TF_MATH_GRAD,
        )
        for key, observed, why in (
            ("naive_unselected_zero[x**0.5]", "zero", ""),
            ("naive_unselected_zero[x**-1]", "zero", ""),
            ("naive_side[x**0.5]", "left", ": the 0 it gives is the left-hand derivative of where(x > 0, x**0.5, 0)"),
        )
    ],
    expect(
        "clip_by_norm_grad[zero]",
        "nan",
        framework="jax",
        reason="jax.example_libraries.optimizers.clip_grads is where(norm < c, g, g * (c / norm)) with one "
        "where: at the zero vector the unselected branch's c / norm is inf and its gradient 0 * inf is NaN "
        "(the JAX FAQ's 'gradients contain NaN where using where')",
        link=JAX_OPTIMIZERS,
    ),
    *[
        expect(
            f"global_clip_value[{case}]",
            "all-nan",
            framework="tensorflow",
            reason="clip_by_global_norm adds (use_norm - use_norm) to the scale so that a global norm of "
            "inf (here " + why + ") makes every clipped tensor NaN, 'to signal that an error occurred'; "
            "before issue 21363 it scaled by 1/inf = 0",
            link=TF_GLOBAL_NORM,
        )
        for case, why in (("inf", "an infinite entry"), ("overflow", "finite entries whose squares overflow"))
    ],
    expect(
        "global_clip_grad[zero]",
        "all-nan",
        framework="tensorflow",
        reason="clip_by_global_norm scales by c * min(1 / n, 1 / c) with no two-tap where (clip_by_norm has one): "
        "at n = 0 the unselected 1 / n is inf, its gradient 0 * (-1 / n^2) is NaN, and the NaN reaches every "
        "entry through n = sqrt(2 * l2_loss(t))",
        link=TF_CLIP_OPS,
    ),
    expect(
        "global_clip_grad[zero]",
        "all-nan",
        framework="jax",
        reason="clip_grads is where(norm < c, g, g * (c / norm)): at norm = 0 the unselected branch's gradient "
        "0 * inf is NaN and reaches every leaf through the norm",
        link=JAX_OPTIMIZERS,
    ),
    expect(
        "global_clip_grad[overflow]",
        "all-nan",
        framework="tensorflow",
        reason="the gradient of v * (c * min(1/n, 1/c) + (n - n)) with n = inf: the NaN scale multiplies "
        "every cotangent",
        link=TF_GLOBAL_NORM,
    ),
    *[
        expect(
            f"global_clip_grad[{case}]",
            raises("RuntimeError", r"does not require grad"),
            framework="torch",
            reason="torch.nn.utils.clip_grad_norm_ rescales each parameter's .grad in place under no_grad, "
            "so its result has no grad_fn and autograd.grad refuses it (PyTorch has no differentiable clip "
            "by global norm)",
            link=TORCH_CLIP,
        )
        for case in GLOBAL_CASES
    ],
)
# torch.renorm scales by maxnorm / (norm + 1e-7) and clip_grad_norm_ by max_norm / (norm + 1e-6):
# relative errors of ~1e-7 / norm and ~1e-6 / norm against the exact c / norm, far above float64's
# 1e-12 (https://github.com/pytorch/pytorch/blob/main/aten/src/ATen/native/Normalization.cpp, and
# the clip_grad_norm_ docs).
# Where the exact gradient cancels to ~0 those epsilons are absolute errors (~1e-7 * |w|): the
# floor is set there too (2^29 and 2^32 ulp of float64 at the inputs' scale).
RENORM_TOL = dataclasses.replace(cmp.tolerance(float64=1e-6), floor_ulps={"float64": 2**29})
CLIP_GRAD_NORM_TOL = dataclasses.replace(cmp.tolerance(float64=1e-5), floor_ulps={"float64": 2**32})


# ---------------------------------------------------------------- strategies
SHAPES = ((2, 3), (2, 1, 3))  # two rows of three for x/|x|; rank 2 and 3 for the elementwise ops


@ss.cached
def _elements(dtype, kind):
    """Exact zeros (both signs), points near 0 on both sides, or ordinary values."""
    zero = st.sampled_from([0.0, -0.0])
    near = ss.signed(dtype, 2.0**-20, 2.0**-7)  # ~1e-6 .. ~1e-2, exact in float32
    ordinary = ss.signed(dtype, 0.125, 16.0)
    return {"zero": zero, "near": st.one_of(zero, near), "mixed": st.one_of(zero, near, ordinary)}[kind]


@ss.cached
def _nonzero_like(dtype, shape):
    """Cotangents as :func:`suite.strategies.like` draws them, zeros replaced by 1."""
    return ss.like(np.empty(shape, dtype)).map(lambda w: np.where(w == 0, 1, w).astype(w.dtype))


@st.composite
def guarded_inputs(draw):
    """(x, keep, w): entry 0 (and row 0) of x is an exact zero and kept; rows are zeros, near
    zero or mixed; keep selects and unselects the rest; w has no zeros."""
    d, s = draw(ss.dtypes_and_shapes(shapes=SHAPES), label="dtype, shape")
    rows = []
    for i in range(int(np.prod(s[:-1]))):
        kind = "zero" if i == 0 else draw(ss.choice(("zero", "near", "mixed", "mixed")), label=f"row {i}")
        rows.append(draw(ss.arrays(d, s[-1], elements=_elements(d, kind)), label=f"x[{i}]"))
    x = np.stack(rows).reshape(s)
    keep = draw(ss.arrays(np.bool_, s), label="keep")
    keep.flat[0] = True
    w = draw(_nonzero_like(x.dtype, x.shape), label="cotangent")
    return x, keep, w


FIXED_GUARDED = (
    np.array([[0.0, -0.0, 0.0], [-1e-3, 2.5, 0.5]]),
    np.array([[True, False, True], [True, True, False]]),
    np.array([[1.5, -0.5, 2.0], [1.0, -2.0, 0.25]]),
)
#: A dev draw (2026-11-30): x/|x|'s gradient on the row [0, 0.125, 0.125] cancels to 0 (w along the
#: unmasked x), which central differences give as 3.3e-9, their truncation (:func:`truncation_scale`).
CANCELLING_ROW = (
    np.array([[[0.0, 0.0, 0.0]], [[0.0, 0.125, 0.125]]]),
    np.array([[[True, True, True]], [[False, True, True]]]),
    np.ones((2, 1, 3)),
)


@st.composite
def clip_inputs(draw):
    """(kind, x, c, w): x is the zero vector, tiny, inside the ball of radius c, or outside it."""
    d, s = draw(ss.dtypes_and_shapes(shapes=((3,), (2, 3))), label="dtype, shape")
    c, kind = draw(ss.choice((0.5, 2.0)), label="c"), draw(ss.choice(CLIP_KINDS), label="kind")
    direction = draw(ss.float_arrays(dtype=np.float64, shape=s, min_value=-1, max_value=1), label="direction")
    assume(np.linalg.norm(direction) > 0.1)
    direction /= np.linalg.norm(direction)
    scale = {
        "zero": st.just(0.0),
        "tiny": st.floats(1e-6, 1e-3),
        "inside": st.floats(0.1 * c, 0.9 * c),
        "outside": st.floats(1.1 * c, 10 * c),
    }[kind]
    x = (direction * draw(scale, label="norm")).astype(d)
    if kind == "zero" and draw(st.booleans(), label="negative zero"):
        x = -x
    w = draw(_nonzero_like(x.dtype, x.shape), label="cotangent")
    return kind, x, c, w


BIG = {np.dtype(np.float32): 1e20, np.dtype(np.float64): 1e160}  # finite, but its square overflows


@st.composite
def tensor_lists(draw):
    """(case, a, b, c, w): two tensors whose global norm is finite, zero (every entry +-0), or made
    inf, NaN or overflowing by one entry (an inf of either sign, a NaN, or +-BIG)."""
    d, case = draw(ss.float_dtypes()), draw(ss.choice(GLOBAL_CASES), label="case")
    flat = draw(ss.float_arrays(dtype=d, shape=(5,), min_value=-2, max_value=2), label="a ++ b")
    c = draw(ss.choice((1.0, 4.0)), label="c")
    if case == "finite":
        n = np.linalg.norm(flat.astype(np.float64))
        assume(n > 0 and abs(n - c) > 1e-3)  # not on the kink |t| = c
    elif case == "zero":
        flat = flat * 0  # signed zeros
    else:
        sign = draw(ss.choice((1.0, -1.0)), label="sign")
        flat[draw(st.integers(0, 4), label="position")] = {"inf": sign * np.inf, "nan": np.nan}.get(
            case, sign * BIG[np.dtype(d)]
        )
    w = draw(_nonzero_like(flat.dtype, flat.shape), label="cotangent")
    return case, flat[:3], flat[3:], c, w


# ---------------------------------------------------------------- the programs
class Masked(Program):
    """where(ok & keep, f(x), 0), ok = guard(x); ``double``: f gets where(ok, x, 1) instead of x."""

    def tensorflow(tf, x, keep, *, op, double):
        f, guard = ENTRIES[op].program, GUARDS[op]
        ok = guard.tensorflow(tf, x)
        arg = tf.where(ok, x, tf.ones_like(x)) if double else x
        return tf.where(ok & keep, f.tensorflow(tf, arg), tf.zeros_like(x))

    def jax(jax, x, keep, *, op, double):
        jnp = jax.numpy
        f, guard = ENTRIES[op].program, GUARDS[op]
        ok = guard.jax(jax, x)
        arg = jnp.where(ok, x, jnp.ones_like(x)) if double else x
        return jnp.where(ok & keep, f.jax(jax, arg), jnp.zeros_like(x))

    def torch(torch, x, keep, *, op, double):
        f, guard = ENTRIES[op].program, GUARDS[op]
        ok = guard.torch(torch, x)
        arg = torch.where(ok, x, torch.ones_like(x)) if double else x
        return torch.where(ok & keep, f.torch(torch, arg), torch.zeros_like(x))


class ClipByNorm(Program):
    """Clip the whole tensor to L2 norm <= c (JAX: clip_grads of one array; PyTorch: renorm of one row)."""

    def tensorflow(tf, x, *, c):
        return tf.clip_by_norm(x, c)

    def jax(jax, x, *, c):
        from jax.example_libraries import optimizers

        return optimizers.clip_grads(x, c)

    def torch(torch, x, *, c):
        return torch.renorm(x.reshape(1, -1), p=2, dim=0, maxnorm=c).reshape(x.shape)


class GlobalClip(Program):
    """Clip [a, b] by their global norm: the clipped values (concatenated) or the global norm."""

    def tensorflow(tf, a, b, *, c, part):
        (ca, cb), norm = tf.clip_by_global_norm([a, b], c)
        return tf.concat([tf.reshape(ca, [-1]), tf.reshape(cb, [-1])], 0) if part == "values" else norm

    def jax(jax, a, b, *, c, part):
        from jax.example_libraries import optimizers

        if part == "norm":
            return optimizers.l2_norm((a, b))
        ca, cb = optimizers.clip_grads((a, b), c)
        return jax.numpy.concatenate([ca.ravel(), cb.ravel()])

    def torch(torch, a, b, *, c, part):
        grads = [a.detach().clone(), b.detach().clone()]  # clip_grad_norm_ clips the .grad of parameters
        params = [torch.empty_like(g) for g in grads]
        for p, g in zip(params, grads):
            p.grad = g
        norm = torch.nn.utils.clip_grad_norm_(params, c)
        return torch.cat([g.reshape(-1) for g in grads]) if part == "values" else norm


class SqrtOfNormThenWhere(Program):
    """jax#347 test_fail: where(|x_i| > 0.5, |x_i|, 1) with |x_i| = sqrt(sum(x_i^2))."""

    def tensorflow(tf, x):
        n = tf.sqrt(tf.reduce_sum(x**2, axis=1))
        return tf.reduce_sum(tf.where(n > 0.5, n, tf.ones_like(n)))

    def jax(jax, x):
        jnp = jax.numpy
        n = jnp.sqrt(jnp.sum(x**2, axis=1))
        return jnp.sum(jnp.where(n > 0.5, n, jnp.ones_like(n)))

    def torch(torch, x):
        n = torch.sqrt(torch.sum(x**2, dim=1))
        return torch.sum(torch.where(n > 0.5, n, torch.ones_like(n)))


class WhereThenSqrt(Program):
    """jax#347 test_succeed: sqrt(where(sum(x_i^2) > 0.5, sum(x_i^2), 1))."""

    def tensorflow(tf, x):
        s = tf.reduce_sum(x**2, axis=1)
        return tf.reduce_sum(tf.sqrt(tf.where(s > 0.5, s, tf.ones_like(s))))

    def jax(jax, x):
        jnp = jax.numpy
        s = jnp.sum(x**2, axis=1)
        return jnp.sum(jnp.sqrt(jnp.where(s > 0.5, s, jnp.ones_like(s))))

    def torch(torch, x):
        s = torch.sum(x**2, dim=1)
        return torch.sum(torch.sqrt(torch.where(s > 0.5, s, torch.ones_like(s))))


class ExpOtherwiseZero(Program):
    """tensorflow#2540: where(x > 0, 0, exp(x)) (tf.select then)."""

    def tensorflow(tf, x):
        return tf.where(x > 0, tf.zeros_like(x), tf.exp(x))

    def jax(jax, x):
        return jax.numpy.where(x > 0, jax.numpy.zeros_like(x), jax.numpy.exp(x))

    def torch(torch, x):
        return torch.where(x > 0, torch.zeros_like(x), torch.exp(x))


class SqrtOrIdentity(Program):
    """tensorflow#38349 (the review's example): where(y > 0, sqrt(y), y), or with the double where."""

    def tensorflow(tf, y, *, double):
        return tf.where(y > 0, tf.sqrt(tf.where(y > 0, y, tf.ones_like(y)) if double else y), y)

    def jax(jax, y, *, double):
        jnp = jax.numpy
        return jnp.where(y > 0, jnp.sqrt(jnp.where(y > 0, y, jnp.ones_like(y)) if double else y), y)

    def torch(torch, y, *, double):
        return torch.where(y > 0, torch.sqrt(torch.where(y > 0, y, torch.ones_like(y)) if double else y), y)


# ---------------------------------------------------------------- closed forms (float64)


def guarded_closed(op, x, keep, w):
    """(value, gradient, ok): where(ok & keep, f(x), 0) and its exact gradient (0 where not ok)."""
    x64, w64 = x.astype(np.float64), w.astype(np.float64)
    if op == "normalize":
        n = np.sqrt(np.sum(x64**2, axis=-1, keepdims=True))
        ok = np.broadcast_to(n > 0, x.shape)
        n = np.where(n > 0, n, 1.0)
        mw = np.where(ok & keep, w64, 0.0)
        value = np.where(ok & keep, x64 / n, 0.0)
        grad = np.where(ok, mw / n - x64 * np.sum(x64 * mw, axis=-1, keepdims=True) / n**3, 0.0)
    else:
        ok = x64 > 0 if GUARDS[op] is Positive else x64 != 0
        safe = np.where(ok, x64, 1.0)
        entry = ENTRIES[op]
        value = np.where(ok & keep, entry.reference(safe), 0.0)
        grad = np.where(ok & keep, w64 * entry.derivatives[0](safe), 0.0)
    return value.astype(x.dtype), grad.astype(x.dtype), ok


def clip_closed(t, c, w):
    """t * c / max(|t|, c) and the gradient of sum(w * that) (t, w flat or not; |t| != c)."""
    t64, w64 = t.astype(np.float64), w.astype(np.float64)
    n = np.sqrt(np.sum(t64**2))
    if n <= c:
        return t, w
    return (t64 * c / n).astype(t.dtype), (c / n * (w64 - t64 * np.sum(t64 * w64) / n**2)).astype(t.dtype)


# ---------------------------------------------------------------- observations
def kinds(values, *, zero="zero") -> str | None:
    """One word for a set of entries: ``zero``, ``finite`` (non-zero), ``nan``, ``+inf``, ``-inf``;
    ``mixed:a,b`` when they differ; None when there are none. ``zero="finite"`` merges zeros in."""
    v = np.asarray(values, np.float64).ravel()
    if v.size == 0:
        return None
    words = {
        "nan" if np.isnan(e) else "+inf" if e == np.inf else "-inf" if e == -np.inf else zero if e == 0 else "finite"
        for e in v
    }
    return words.pop() if len(words) == 1 else "mixed:" + ",".join(sorted(words))


def side_at_first(runner, program, x, keep, w, grad, **static) -> str:
    """Which one-sided difference quotient of the runner's own forward pass (float64, in x[0],
    weighted by w[0]: when x[0] is 0 its output is the only one x[0] moves) grad[0] equals:
    ``left``, ``right``, ``both`` or ``neither`` (within ``compare.ONE_SIDED``; :mod:`suite.kinds`)."""

    def f(t):
        moved = x.copy()
        moved.flat[0] = t
        return runner.run(program.of(runner), moved, keep, **static).flat[0]

    t, u = np.asarray(x.flat[0]), np.asarray(w.flat[0])
    rtol, ulps = cmp.ONE_SIDED.of(np.float64), cmp.ONE_SIDED.ulps(np.float64)
    hits = []
    for side in ("left", "right"):
        (fd,) = finite_diff.vjp(f, t, cotangent=u, side=side)
        if cmp.rel_err(grad.flat[0], fd, rtol=rtol, scale=abs(float(u)), ulps=ulps) <= rtol:
            hits.append(side)
    return "both" if len(hits) == 2 else hits[0] if hits else "neither"


def row_scale(op, x):
    """|x_row| for x/|x| (1 on zero rows), else 1: that Jacobian grows as 1/|x| and cancels, so
    rows near 0 are compared at the scale of w (float32 rounds terms of 1e6 to ~0.1)."""
    if op != "normalize":
        return np.ones(x.shape, np.float64)
    n = np.sqrt(np.sum(x.astype(np.float64) ** 2, axis=-1, keepdims=True))
    return np.broadcast_to(np.where(n > 0, n, 1.0), x.shape)


def grad_scales(op, x, w):
    """Per element, the scale of the gradient's floor (:func:`suite.compare.floor`): for x/|x|
    ``max |w|`` (rows scaled by |x| are O(|w|) and cancel); else each entry on its own (1/x spans
    1e12), where only underflow costs accuracy: ``w * c`` may be flushed to zero where it is
    subnormal (XLA's CPU kernels do) before meeting its cofactor, f'(x) up to 512 at x = 2^-20,
    so the floor is ``FLUSHED`` smallest normals times that cofactor (as :mod:`suite.ops.error`
    folds a flushed factor's cofactor into its scale)."""
    if op == "normalize":
        return np.full(x.shape, float(np.abs(w).max()))
    x64 = x.astype(np.float64)
    ok = x64 > 0 if GUARDS[op] is Positive else x64 != 0
    with np.errstate(all="ignore"):
        cofactor = np.abs(ENTRIES[op].derivatives[0](np.where(ok, x64, 1.0)))
    return cmp.flushed_scale(x.dtype, np.maximum(np.where(ok, cofactor, 1.0), 1.0))


def scaled(g, s):
    return (np.asarray(g) * s).astype(np.asarray(g).dtype)


def clip_grad_kind(g, w, ref, *, tol: float, scale=None, ulps=cmp.FLOOR_ULPS) -> str:
    """``upstream`` (== w), ``scaled`` (== the closed form, != w), else :func:`kinds`; ``ulps``
    the tolerance's floor (where the closed form cancels, as for w parallel to x)."""
    if cmp.rel_err(g, w, rtol=tol, scale=scale, ulps=ulps) <= tol:
        return "upstream"
    if cmp.rel_err(g, ref, rtol=tol, scale=scale, ulps=ulps) <= tol:
        return "scaled"
    return kinds(g)


def global_value_kind(out, t, ref, *, tol: float) -> str:
    """``clipped`` (finite, equals the closed form), ``all-nan``, ``zero`` (every entry 0),
    ``zero-and-nan`` (0 for finite entries, NaN for the others), else ``other``."""
    out = np.asarray(out)
    if ref is not None and np.isfinite(out).all() and cmp.rel_err(out, ref, rtol=tol) <= tol:
        return "clipped"
    if np.isnan(out).all():
        return "all-nan"
    finite_in = np.isfinite(t)
    if (out[finite_in] == 0).all():
        return "zero" if finite_in.all() and (out == 0).all() else "zero-and-nan"
    return "other"


def global_grad_kind(g) -> str:
    g = np.asarray(g)
    if np.isnan(g).all():
        return "all-nan"
    if (g == 0).all():
        return "zero"
    return "finite" if np.isfinite(g).all() else kinds(g)


# ---------------------------------------------------------------- properties
@pytest.mark.parametrize("op", list(GUARDS))
@given(xkw=guarded_inputs())
@example(xkw=FIXED_GUARDED)
def test_unselected_branch_gradient(subject, oracles, record, op, xkw):
    """where(ok & keep, f(x), 0): value and gradient where ok holds equal the closed form and the
    oracles; where it does not (x = 0, x < 0 for sqrt/log, the zero row of x/|x|) the gradient's
    entries are observed, and at x = 0 (float64) which one-sided difference it equals."""
    x, keep, w = xkw
    record.example(x=x, keep=keep, w=w, op=op)
    # elementwise: each entry on its own (1/x spans 1e12); x/|x|: rows scaled by |x| are O(|w|) and cancel
    record.scale = float(np.abs(w).max()) if op == "normalize" else 0.0
    out, (grad, _) = subject.vjp(Masked.of(subject), x, keep, cotangent=w, op=op, double=False)
    value, ref, ok = guarded_closed(op, x, keep, w)
    seen = {
        f"naive_guarded[{op}]": kinds(grad[ok], zero="finite"),
        f"naive_masked[{op}]": kinds(grad[ok & ~keep]) if op != "normalize" else None,
        f"naive_unselected_zero[{op}]": kinds(grad[~ok & (x == 0)]),
        f"naive_unselected_negative[{op}]": kinds(grad[x < 0]) if GUARDS[op] is Positive else None,
    }
    if x.dtype == np.float64:
        seen[f"naive_side[{op}]"] = side_at_first(subject, Masked, x, keep, w, grad, op=op, double=False)
    record.check(EXPECT, **{k: v for k, v in seen.items() if v is not None})
    s, g = row_scale(op, x), grad_scales(op, x, w)[ok]
    record.close(name="value", out=out, ref=value, oracle="closed-form", tol=cmp.VALUE)
    record.close(name="grad[ok]", out=scaled(grad, s)[ok], ref=scaled(ref, s)[ok], oracle="closed-form", scale=g)
    raws = record.against(
        oracles, Masked, x, keep, cotangent=w, op=op, double=False, got={"value": out, "grad": ...}, tol=cmp.VALUE
    )
    for o, (_, (ref_grad, _)) in zip(oracles, raws):
        record.close(name="grad[ok]", out=scaled(grad, s)[ok], ref=scaled(ref_grad, s)[ok], oracle=o.id, scale=g)


@pytest.mark.parametrize("op", list(GUARDS))
@given(xkw=guarded_inputs())
@example(xkw=FIXED_GUARDED)
@example(xkw=CANCELLING_ROW)
def test_double_where_gradient_is_finite_and_exact(subject, oracles, record, op, xkw):
    """where(ok & keep, f(where(ok, x, 1)), 0): the gradient is finite everywhere and equals the
    closed form, the oracles and (float64, away from 0) central differences; at x = 0 it is
    observed against the one-sided differences."""
    x, keep, w = xkw
    record.example(x=x, keep=keep, w=w, op=op)
    record.scale = float(np.abs(w).max()) if op == "normalize" else 0.0
    program = Masked.of(subject)
    out, (grad, _) = subject.vjp(program, x, keep, cotangent=w, op=op, double=True)
    value, ref, _ = guarded_closed(op, x, keep, w)
    seen = {f"double_where[{op}]": kinds(grad, zero="finite")}
    if x.dtype == np.float64:
        seen[f"double_where_side[{op}]"] = side_at_first(subject, Masked, x, keep, w, grad, op=op, double=True)
    record.check(EXPECT, **seen)
    s, g = row_scale(op, x), grad_scales(op, x, w)
    record.close(name="value", out=out, ref=value, oracle="closed-form", tol=cmp.VALUE)
    record.close(name="grad", out=scaled(grad, s), ref=scaled(ref, s), oracle="closed-form", scale=g)
    raws = record.against(
        oracles, Masked, x, keep, cotangent=w, op=op, double=True, got={"value": out, "grad": ...}, tol=cmp.VALUE
    )
    for o, (_, (ref_grad, _)) in zip(oracles, raws):
        record.close(name="grad", out=scaled(grad, s), ref=scaled(ref_grad, s), oracle=o.id, scale=g)
    if x.dtype == np.float64:
        # Smooth entries: |x| >= 0.1, or whole rows of norm >= 0.1 for x/|x|. The others get no
        # weight, so their large values (1/x near 0) do not round the differences away.
        norms = np.broadcast_to(np.sqrt(np.sum(x**2, axis=-1, keepdims=True)), x.shape)
        smooth = (norms if op == "normalize" else np.abs(x)) >= 0.1
        (fd,) = finite_diff.vjp(
            lambda v: subject.run(program, v, keep, op=op, double=True), x, cotangent=np.where(smooth, w, 0)
        )
        record.close(
            name="grad[smooth]",
            out=grad[smooth],
            ref=fd[smooth],
            oracle="finite-difference",
            tol=cmp.FINITE_DIFF,
            # the difference's error is absolute at the scale of the function, not of a tiny w entry's share:
            # x/|x| is of size 1 whatever |x| is, so a gradient that cancels to 0 (w along x) is compared
            # with differences that round at |w| * eps / step, and that are truncated at step^2 times the
            # third derivative, which grows as |w| / |x|^3 (truncation_scale)
            scale=max(
                record.input_scale(),
                float(np.abs(fd[smooth]).max(initial=0.0)),
                float(np.abs(np.asarray(out, np.float64) * w)[smooth].max(initial=0.0)),
                truncation_scale(op, norms[smooth], w[smooth]),
            ),
        )


def truncation_scale(op, norms, w) -> float:
    """For x/|x|, the scale at which central differences' truncation (step^2 / 6 times the third
    derivative, up to about 15 |w| / |x|^3) is one unit of compare.FINITE_DIFF's floor; 0 for the
    other ops. A dev draw found it: a row [0, 0.125, 0.125] (norm 0.177) whose gradient cancels to
    0 was differenced to 3.3e-9, above the floor at the function's scale (9.3e-10); at this scale
    (17.8) the floor is 1.7e-8. A closed bound, not finite_diff.vjp_with_error's measured one: these
    differences run the subject's forward pass, and a second pass would double those calls.

    >>> round(truncation_scale("normalize", [0.1768], np.array([1.0])), 1), truncation_scale("log", [], [])
    (17.8, 0.0)
    """
    if op != "normalize" or not len(norms):
        return 0.0
    unit = cmp.FINITE_DIFF.ulps(np.float64) * np.finfo(np.float64).eps
    third = float(np.max(15.0 * np.abs(w) / np.asarray(norms, np.float64) ** 3))
    return float(third * finite_diff.CENTRAL_STEP**2 / 6 / unit)


def _clip_tol(*runners):
    return RENORM_TOL if any(r.framework == "torch" for r in runners) else cmp.GRAD


def clip_scale(x, c, w) -> float:
    """The floor's scale for clip_by_norm's gradient outside the ball (0 inside): c/n (w - x (x.w)/n^2)
    cancels (w parallel to x) among terms up to c (max|w| + max|x| |w|/n)/n, and PyTorch's c/(n + e)
    (renorm's e = 1e-7, about RENORM_TOL's floor units) moves it by up to e c (|w| + 2 |x| |w|/n)/n^2:
    2/n of the terms covers both. A thorough run drew x = 0.255 (1, ..., 1), w = 1, c = 0.5: the exact
    gradient 0, PyTorch's 1.28e-7, above RENORM_TOL's floor at the inputs' scale (1.19e-7)."""
    x64, w64 = np.asarray(x, np.float64), np.asarray(w, np.float64)
    n = float(np.sqrt(np.sum(x64**2)))
    if n <= c:
        return 0.0
    terms = c * (np.max(np.abs(w64)) + np.max(np.abs(x64)) * np.linalg.norm(w64) / n) / n
    return float(terms * max(1.0, 2.0 / n))


@given(p=clip_inputs())
@example(p=("zero", np.zeros(3), 0.5, np.array([1.5, -1e-12, 3.0])))
@example(p=("outside", np.full((2, 3), 0.25515518), 0.5, np.ones((2, 3))))  # w parallel to x: see clip_scale
def test_clip_by_norm_passes_the_gradient_at_the_zero_vector(subject, oracles, record, p):
    """clip_by_norm(x, c) of the whole tensor: value and gradient equal the closed form, the oracles
    and (float64) central differences; around the zero vector it is the identity, so its gradient
    is the cotangent (a NaN gradient there is observed and declared)."""
    kind, x, c, w = p
    record.example(x=x, c=c, w=w, kind=kind)
    program = ClipByNorm.of(subject)
    out, (grad,) = subject.vjp(program, x, cotangent=w, c=c)
    value, ref = clip_closed(x, c, w)
    tol = _clip_tol(subject)
    record.scale = max(record.input_scale(), clip_scale(x, c, w))  # outside the ball c/|x| (w - x (x.w)/|x|^2) cancels
    t, ulps = tol.of(x.dtype), tol.ulps(x.dtype)
    observed = clip_grad_kind(grad, w, ref, tol=t, scale=record.scale, ulps=ulps)
    # Outside the ball, a cotangent within the floor of the scaled closed form (parallel to x,
    # or tiny: w = 1e-12 (1, 1, 1) at x = (1, 1, 1)/sqrt(3) was drawn) cannot tell "scaled"
    # from "upstream": such an example observes nothing; the comparisons below still hold it.
    if kind != "outside" or cmp.rel_err(w, ref, rtol=t, scale=record.scale, ulps=ulps) > t:
        record.check(EXPECT, **{f"clip_by_norm_grad[{kind}]": observed})
    record.close(name="value", out=out, ref=value, oracle="closed-form", tol=cmp.VALUE if tol is cmp.GRAD else tol)
    if observed not in ("upstream", "scaled"):
        return
    record.close(name="grad", out=grad, ref=ref, oracle="closed-form", tol=tol)
    if x.dtype == np.float64:  # smooth at 0 (the identity inside the ball); |x| = c is never drawn
        (fd,) = finite_diff.vjp(lambda v: subject.run(program, v, c=c), x, cotangent=w)
        record.close(name="grad", out=grad, ref=fd, oracle="finite-difference", tol=cmp.FINITE_DIFF)
    if kind != "zero":  # at 0 each framework's own row holds its declared answer
        for o in oracles:
            got = {"value": out, "grad": grad}
            record.against([o], ClipByNorm, x, cotangent=w, c=c, got=got, tol=_clip_tol(subject, o))


GLOBAL_EXAMPLES = {
    "finite": np.array([3.0, 0.0, 4.0, 0.5, -1.0]),
    "zero": np.array([0.0, -0.0, 0.0, 0.0, 0.0]),
    "inf": np.array([1.0, np.inf, 2.0, 0.5, -1.0], np.float32),
    "nan": np.array([1.0, np.nan, 2.0, 0.5, -1.0], np.float32),
    "overflow": np.array([1e20, 1.0, 2.0, 0.5, -1.0], np.float32),
}


def _global_example(case):
    t = GLOBAL_EXAMPLES[case]
    return case, t[:3], t[3:], 1.0, np.array([1.0, -0.5, 2.0, 1e-5, -1.5], t.dtype)


#: a thorough run's draw: w parallel to t, so the clipped gradient c/n (w - t (t.w)/n^2) is 0 (exactly
#: in tf.function, XLA and graph mode; a rounding residue in eager)
PARALLEL_GLOBAL = ("finite", np.full(3, 1.75, np.float32), np.full(2, 1.75, np.float32), 1.0, np.ones(5, np.float32))


@given(p=tensor_lists())
@example(p=_global_example("finite"))
@example(p=_global_example("zero"))
@example(p=_global_example("inf"))
@example(p=_global_example("nan"))
@example(p=_global_example("overflow"))
@example(p=PARALLEL_GLOBAL)
def test_clip_by_global_norm_with_non_finite_norm(subject, oracles, record, p):
    """clip_by_global_norm([a, b], c): the global norm, the clipped values and their gradient when the
    norm is finite or zero (closed form, oracles, central differences), inf, NaN, or inf by overflow."""
    case, a, b, c, w = p
    record.example(a=a, b=b, c=c, w=w, case=case)
    t, program = np.concatenate([a, b]), GlobalClip.of(subject)
    tol = CLIP_GRAD_NORM_TOL if subject.framework == "torch" else cmp.GRAD
    norm = np.asarray(subject.run(program, a, b, c=c, part="norm"))
    out = subject.run(program, a, b, c=c, part="values")
    value = clip_closed(t, c, w)[0] if case in ("finite", "zero") else None
    try:
        _, grads = subject.vjp(program, a, b, cotangent=w, c=c, part="values")
        grad = np.concatenate(grads)
        grad_kind = global_grad_kind(grad)
    except RuntimeError as e:  # PyTorch: clip_grad_norm_ works on .grad, outside autograd
        grad, grad_kind = None, cmp.error_name(e)
    record.scale = record.input_scale()  # the clipped gradient c/n (w - t (t.w)/n^2) cancels
    if case in ("finite", "zero"):
        value, ref = clip_closed(t, c, w)
    # w parallel to t: the exact gradient is 0, so 'zero' is a finite answer and the example cannot
    # tell it from a gradient zeroed by mistake: a zero or finite gradient is not observed there (the
    # comparisons below hold it); a NaN one still is
    t_ = cmp.GRAD.of(t.dtype)
    vanishes = case == "finite" and cmp.rel_err(np.zeros_like(ref), ref, rtol=t_, scale=record.scale) <= t_
    unobserved = vanishes and grad_kind in ("zero", "finite")
    grad_kind = "finite" if unobserved else grad_kind
    keys = {
        f"global_norm[{case}]": kinds(norm),
        f"global_clip_value[{case}]": global_value_kind(out, t, value, tol=tol.of(t.dtype)),
    }
    if not unobserved:
        keys[f"global_clip_grad[{case}]"] = grad_kind
    record.check(EXPECT, **keys)
    if case not in ("finite", "zero"):
        return
    ref_norm = np.linalg.norm(t.astype(np.float64)).astype(t.dtype)
    record.close(name="global_norm", out=norm, ref=ref_norm, oracle="closed-form", tol=cmp.VALUE)
    record.close(name="value", out=out, ref=value, oracle="closed-form", tol=tol)
    for o in oracles:
        o_tol = CLIP_GRAD_NORM_TOL if "torch" in (o.framework, subject.framework) else cmp.GRAD
        record.against([o], GlobalClip, a, b, via="run", c=c, part="values", got={"value": out}, tol=o_tol)
        if case == "finite" and grad_kind == "finite" and o.framework != "torch":  # PyTorch's: declared
            got = {"value": out, "grad[a]": grads[0], "grad[b]": grads[1]}
            record.against([o], GlobalClip, a, b, cotangent=w, c=c, part="values", got=got)
    if grad_kind != "finite":  # the declared NaN at a zero norm, or PyTorch's refusal
        return
    record.close(name="grad", out=grad, ref=ref, oracle="closed-form")
    if t.dtype == np.float64:  # smooth at 0 too: the identity inside the ball
        fd = finite_diff.vjp(lambda a, b: subject.run(program, a, b, c=c, part="values"), a, b, cotangent=w)
        record.close(name="grad", out=grad, ref=np.concatenate(fd), oracle="finite-difference", tol=cmp.FINITE_DIFF)


# ---------------------------------------------------------------- seed examples
@given(x=st.just(np.array([1e10, -1.0], np.float32)))
def test_seed_tf_2540_exp_overflow_in_the_unselected_branch(subject, record, x):
    """tensorflow#2540: where(x > 0, 0, exp(x)) at x = 1e10 is 0 but its gradient is NaN (exp(1e10)
    = inf and 0 * inf), "but should be 0"; at x = -1 the gradient is exp(-1)."""
    record.example(x=x)
    out, (grad,) = subject.vjp(ExpOtherwiseZero.of(subject), x)
    record.check(EXPECT, seed_2540=kinds(grad[:1]))
    ref = np.array([0.0, np.exp(-1.0)], np.float32)
    # elementwise (0, or exp(x)): each entry relative to itself
    record.close(name="value", out=out, ref=ref, oracle="closed-form", tol=cmp.VALUE, scale=0.0)
    record.close(name="grad[x=-1]", out=grad[1:], ref=ref[1:], oracle="closed-form", scale=0.0)


@given(x=st.just(np.array([[1.0, 2.0], [3.0, 4.0], [0.0, 0.0]])))
def test_seed_jax_347_sqrt_before_or_after_where(subject, record, x):
    """jax#347: sum(where(|x_i| > 0.5, |x_i|, 1)) has a NaN gradient in the zero row (sqrt'(0) = inf
    times 0); sum(sqrt(where(|x_i|^2 > 0.5, |x_i|^2, 1))) has 0 there. Both are sqrt 5 + 5 + 1."""
    record.example(x=x)
    n = np.linalg.norm(x, axis=1, keepdims=True)
    for program, key in (
        (SqrtOfNormThenWhere, "seed_347_sqrt_then_where"),
        (WhereThenSqrt, "seed_347_where_then_sqrt"),
    ):
        out, (grad,) = subject.vjp(program.of(subject), x)
        record.check(EXPECT, **{key: kinds(grad[2])})
        record.close(name=f"value[{key}]", out=out, ref=np.float64(np.sqrt(5) + 6), oracle="closed-form", tol=cmp.VALUE)
        record.close(name=f"grad[{key}][:2]", out=grad[:2], ref=x[:2] / n[:2], oracle="closed-form")


@given(y=st.just(np.array([-1.0, 0.0, 4.0], np.float32)))
def test_seed_tf_38349_sqrt_or_identity(subject, record, y):
    """tensorflow#38349 (the review's example): where(y > 0, sqrt(y), y) at y = -1, 0, 4 is -1, 0, 2
    and its gradient should be 1, 1, 1/4 (the other branch where y <= 0): the double where gives it;
    the single where's entries y <= 0 are observed."""
    record.example(y=y)
    for double, key in ((False, "seed_38349_where"), (True, "seed_38349_double_where")):
        out, (grad,) = subject.vjp(SqrtOrIdentity.of(subject), y, double=double)
        record.check(EXPECT, **{key: "other-branch" if np.array_equal(grad[:2], [1, 1]) else kinds(grad[:2])})
        # elementwise (y, or sqrt(y) and its derivative): each entry relative to itself
        ref = np.array([-1, 0, 2], np.float32)
        record.close(name=f"value[{key}]", out=out, ref=ref, oracle="closed-form", scale=0.0)
        ref = np.array([0.25], np.float32)
        record.close(name=f"grad[{key}][y=4]", out=grad[2:], ref=ref, oracle="closed-form", scale=0.0)


@given(a=st.just(np.zeros(3, np.float32)))
def test_seed_tf_22048_clip_by_norm_of_zeros(subject, record, a):
    """tensorflow#22048: the gradient of clip_by_norm(zeros(3), 1.) "should obviously be [1,1,1]"
    (the identity inside the ball); it was [nan, nan, nan] in TF 1.10."""
    record.example(a=a)
    out, (grad,) = subject.vjp(ClipByNorm.of(subject), a, c=1.0)
    ones = np.ones_like(a)
    observed = clip_grad_kind(grad, ones, ones, tol=0.0)
    record.check(EXPECT, **{"clip_by_norm_grad[zero]": observed})
    record.equal(name="value", out=out, ref=a, oracle="closed-form")
    if observed == "upstream":
        record.equal(name="grad", out=grad, ref=ones, oracle="closed-form")


@given(x0=st.just(np.array([[-2.0, 0.0, np.inf], [4.0, 0.0, 0.0]], np.float32)))
def test_seed_tf_21363_clip_by_global_norm_of_inf(subject, record, x0):
    """tensorflow#21363 (the test of its fix): x0 = [[-2, 0, inf], [4, 0, 0]], x1 = [1, -2], clip 6:
    the global norm is inf; "this should return NaN tensors instead of zero tensors"."""
    x1 = np.array([1.0, -2.0], np.float32)
    record.example(x0=x0, x1=x1)
    program = GlobalClip.of(subject)
    norm = np.asarray(subject.run(program, x0, x1, c=6.0, part="norm"))
    out = subject.run(program, x0, x1, c=6.0, part="values")
    t = np.concatenate([x0.ravel(), x1])
    record.check(
        EXPECT,
        **{
            "global_norm[inf]": kinds(norm),
            "global_clip_value[inf]": global_value_kind(out, t, None, tol=0.0),
        },
    )
