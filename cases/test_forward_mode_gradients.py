"""Forward mode: ForwardAccumulator JVPs agree with the tape's VJPs.

Source: seeds/002 ("you need one call to tf.gradients per column/row" of the Jacobian; ops
without a gradient "generally return 0"; the Hessian is the Jacobian of the gradient) and
the ``tf.autodiff.ForwardAccumulator`` documentation. Forward mode computes ``J v`` (one
Jacobian column per tangent ``v``), reverse mode ``u^T J`` (one row per cotangent ``u``),
so for every smooth program ``u . jvp(v) == vjp(u) . v``. Checked here for a table of
programs (elementwise, matmul, reductions, broadcasting, an unsorted segment mean with fixed ids and
an empty segment) in every TensorFlow mode
(ForwardAccumulator works in a ``tf.compat.v1`` graph too), against ``jax.jvp``,
``torch.func.jvp`` and central finite differences in float64; Jacobians by forward mode
(one JVP per basis vector; ``jax.jacfwd``, ``torch.func.jacfwd``) against reverse mode
(``GradientTape.jacobian``, ``jacrev``); forward-over-reverse Hessian-vector products
(ForwardAccumulator around a GradientTape, as the docs recommend) against
``jax.jvp(jax.grad(f))`` and ``torch.func.jvp(torch.func.grad(f))``; and nested
accumulators (forward over forward).

Measured, not declared: ForwardAccumulator works in every TF mode, a ``tf.compat.v1`` graph
included, and inside tf.function its JVPs (mixed partials too) are not the ``None`` that
tensorflow#60164 reported for TF 2.6 (``forward_api`` says so per mode).

Declared surprises:

- TensorFlow: ``acc.jvp(y)`` is ``None`` where no tangent reached ``y``: an output that does
  not depend on the primal, or one reached only through an op whose gradient is ``None``
  (round, an integer cast, stop_gradient) or does not depend on the upstream gradient
  (``tf.sign``'s ``zeros_like``, tensorflow#60736; reverse mode gives zeros there).
  ``unconnected_gradients=ZERO`` gives zeros; ``jax.jvp`` and ``torch.func.jvp`` have no
  policy and give zeros.
- TensorFlow: a forward-over-reverse JVP of a gradient that does not depend on the primal
  (the Hessian of a linear map; the mixed partial of a term linear in ``a``) is ``None`` too.
- TensorFlow: the second derivative of ``tf.reduce_prod`` drops every term through a zero
  factor (its gradient's cumprods differentiate with ``div_no_nan``; tensorflow#61117).
- TensorFlow eager: a nested ForwardAccumulator returns a wrong (finite) second derivative
  when an intermediate reaches a ``Mul`` both directly and through another op
  (``m = identity(x); (m * m) * m`` gives ``(2x + 1) v w``, not ``6x v w``); tf.function,
  XLA and v1 graphs are right (tensorflow#127753).
"""

import numpy as np
import pytest
from hypothesis import given, strategies as st

from suite import compare as cmp, finite_diff, strategies as ss
from suite.behaviours import Floor, behaviour, on
from suite.expectations import expect, expectations
from suite.program import Program

ACC_LINK = "https://www.tensorflow.org/api_docs/python/tf/autodiff/ForwardAccumulator"
SIGN_ISSUE = "https://github.com/tensorflow/tensorflow/issues/60736"
NESTED_ISSUE = "https://github.com/tensorflow/tensorflow/issues/127753"

BEHAVIOUR = behaviour(
    "forward-mode-gradients",
    sources=["002"],
    links=[
        ACC_LINK,
        "https://github.com/tensorflow/tensorflow/issues/56754",
        "https://github.com/tensorflow/tensorflow/issues/60164",
        "https://docs.jax.dev/en/latest/_autosummary/jax.jvp.html",
        "https://docs.pytorch.org/docs/stable/generated/torch.func.jvp.html",
    ],
    floor=Floor(
        "mixed",
        "Per element: nested accumulators of x^3, sin^3, exp^2 (f'(x) v and f''(x) v w, relative to themselves, "
        "or for sin^3 at the terms 3 s^2 |v| and (6 |s| + 3 |s|^3) |v w|, cos being absolute at 1), the "
        "elementwise program sin(x) a + x tanh(x) (value, J v, u^T J at the terms of their sums) and the "
        "docstring seeds (x^3's derivatives). Array-level, as they mix: matmuls, reduce_prod, logsumexp, "
        "broadcasts, segment means, u.J v (a sum), Hessian-vector products (at |g| |v|), Jacobians, and "
        "central differences (absolute at the function's scale).",
    ),
)

# ---------------------------------------------------------------- the programs
# Smooth programs P(x, a) of x (m, n) and a (m, n); each also spelled in NumPy (float64), the
# forward pass the finite differences take.


class Elementwise(Program):
    def tensorflow(tf, x, a):
        return tf.sin(x) * a + x * tf.tanh(x)

    def jax(jax, x, a):
        return jax.numpy.sin(x) * a + x * jax.numpy.tanh(x)

    def torch(torch, x, a):
        return torch.sin(x) * a + x * torch.tanh(x)

    @staticmethod
    def numpy(x, a):
        return np.sin(x) * a + x * np.tanh(x)


class MatmulLinear(Program):
    """x a^T: linear in x (its Hessian is zero)."""

    def tensorflow(tf, x, a):
        return tf.matmul(x, a, transpose_b=True)

    def jax(jax, x, a):
        return x @ a.T

    def torch(torch, x, a):
        return x @ a.T

    @staticmethod
    def numpy(x, a):
        return x @ a.T


class MatmulQuadratic(Program):
    """(x * a) x^T."""

    def tensorflow(tf, x, a):
        return tf.matmul(x * a, x, transpose_b=True)

    def jax(jax, x, a):
        return (x * a) @ x.T

    def torch(torch, x, a):
        return (x * a) @ x.T

    @staticmethod
    def numpy(x, a):
        return (x * a) @ x.T


class ReduceProd(Program):
    """prod over axis 0: x has exact zeros (prod / x_i is not the derivative there)."""

    def tensorflow(tf, x, a):
        return tf.reduce_prod(x, axis=0) + a[0]

    def jax(jax, x, a):
        return jax.numpy.prod(x, axis=0) + a[0]

    def torch(torch, x, a):
        return torch.prod(x, dim=0) + a[0]

    @staticmethod
    def numpy(x, a):
        return np.prod(x, axis=0) + a[0]


class LogSumExp(Program):
    """Over axis 0 (2 or 3 terms: over a size-1 axis it is the identity, with a zero Hessian)."""

    def tensorflow(tf, x, a):
        return tf.reduce_logsumexp(x * a, axis=0)

    def jax(jax, x, a):
        return jax.nn.logsumexp(x * a, axis=0)

    def torch(torch, x, a):
        return torch.logsumexp(x * a, dim=0)

    @staticmethod
    def numpy(x, a):
        z = x * a
        m = np.max(z, axis=0)
        return m + np.log(np.sum(np.exp(z - m), axis=0))


class Broadcast(Program):
    """A row and a column of x broadcast against (m, n)."""

    def tensorflow(tf, x, a):
        return x * x[:1, :] + tf.tanh(x[:, :1]) * a

    def jax(jax, x, a):
        return x * x[:1, :] + jax.numpy.tanh(x[:, :1]) * a

    def torch(torch, x, a):
        return x * x[:1, :] + torch.tanh(x[:, :1]) * a

    @staticmethod
    def numpy(x, a):
        return x * x[:1, :] + np.tanh(x[:, :1]) * a


def segment_ids(m: int) -> list:
    """Fixed, unsorted ids of m rows into 3 segments, segment 1 empty: [2, 0], [2, 0, 2] (row i: 2 if i
    is even, else 0)."""
    return [2 if i % 2 == 0 else 0 for i in range(m)]


class SegmentMean(Program):
    """unsorted_segment_mean over axis 0 into 3 segments with fixed ids (segment 1 empty: its mean,
    and its tangent, are 0). JAX has no segment mean: a segment sum over the count, as jax.ops'
    docs spell one; PyTorch's is scatter_reduce's mean."""

    def tensorflow(tf, x, a):
        ids = 2 * (1 - tf.range(tf.shape(x)[0]) % 2)  # segment_ids: a v1 graph's placeholder has no static rows
        return tf.math.unsorted_segment_mean(tf.sin(x) * a + x * x, ids, 3)

    def jax(jax, x, a):
        ids = jax.numpy.array(segment_ids(x.shape[0]))
        total = jax.ops.segment_sum(jax.numpy.sin(x) * a + x * x, ids, num_segments=3)
        count = jax.ops.segment_sum(jax.numpy.ones_like(x), ids, num_segments=3)
        return total / jax.numpy.maximum(count, 1)

    def torch(torch, x, a):
        d = torch.sin(x) * a + x * x
        ids = torch.tensor(segment_ids(x.shape[0]), device=x.device).reshape(-1, 1).expand_as(d)
        return torch.zeros((3, d.shape[1]), dtype=d.dtype, device=d.device).scatter_reduce(
            0, ids, d, "mean", include_self=False
        )

    @staticmethod
    def numpy(x, a):
        d, ids = np.sin(x) * a + x * x, np.array(segment_ids(x.shape[0]))
        out = np.zeros((3, d.shape[1]), d.dtype)
        for s in set(ids.tolist()):
            out[s] = d[ids == s].mean(0)
        return out


SMOOTH = {
    "elementwise": Elementwise,
    "matmul_linear": MatmulLinear,
    "matmul_quadratic": MatmulQuadratic,
    "reduce_prod": ReduceProd,
    "logsumexp": LogSumExp,
    "broadcast": Broadcast,
    "segment_mean": SegmentMean,
}
# Forward over reverse is measured on all but reduce_prod, whose second derivative at zero factors
# has a test of its own.
HVP_PROGS = tuple(p for p in SMOOTH if p != "reduce_prod")
JAC_PROGS = ("reduce_prod", "broadcast")  # columns and rows through zero factors, and through broadcasting


class Modes(Program):
    """Every mode at once: (y, J v, the gradients of sum(u * y) with respect to x and a (reverse
    mode), and their JVPs along v (forward over reverse: H_xx v, and the mixed partials H_ax v,
    tensorflow#60164's pattern)). A ForwardAccumulator around a GradientTape, as the docs'
    Hessian-vector product; jax.jvp of jax.grad; torch.func.jvp of torch.func.grad."""

    def tensorflow(tf, x, a, u, v, *, prog):
        with tf.autodiff.ForwardAccumulator(x, v) as acc:
            with tf.GradientTape() as tape:
                tape.watch([x, a])
                y = SMOOTH[prog].tensorflow(tf, x, a)
            gx, ga = tape.gradient(y, [x, a], output_gradients=u)
        return y, acc.jvp(y), gx, ga, acc.jvp(gx), acc.jvp(ga)

    def jax(jax, x, a, u, v, *, prog):
        def loss(x, a):
            return jax.numpy.sum(u * SMOOTH[prog].jax(jax, x, a))

        y, jv = jax.jvp(lambda x: SMOOTH[prog].jax(jax, x, a), (x,), (v,))
        (gx, ga), (hx, ha) = jax.jvp(lambda x: jax.grad(loss, argnums=(0, 1))(x, a), (x,), (v,))
        return y, jv, gx, ga, hx, ha

    def torch(torch, x, a, u, v, *, prog):
        def loss(x, a):
            return torch.sum(u * SMOOTH[prog].torch(torch, x, a))

        y, jv = torch.func.jvp(lambda x: SMOOTH[prog].torch(torch, x, a), (x,), (v,))
        (gx, ga), (hx, ha) = torch.func.jvp(lambda x: torch.func.grad(loss, argnums=(0, 1))(x, a), (x,), (v,))
        return y, jv, gx, ga, hx, ha


def _tf_forward_jacobian(tf, x, a, prog):
    """One ForwardAccumulator per basis vector, by map_fn (shapes may be unknown when traced)."""
    n = tf.size(x)
    basis = tf.reshape(tf.eye(n, dtype=x.dtype), tf.concat([[n], tf.shape(x)], 0))

    def column(e):
        with tf.autodiff.ForwardAccumulator(x, e) as acc:
            y = SMOOTH[prog].tensorflow(tf, x, a)
        return acc.jvp(y)

    cols = tf.map_fn(column, basis)  # (size(x), *y.shape)
    j = tf.transpose(cols, tf.concat([tf.range(1, tf.rank(cols)), [0]], 0))
    return tf.reshape(j, tf.concat([tf.shape(j)[:-1], tf.shape(x)], 0))


class Jacobians(Program):
    """dP/dx (shape y.shape + x.shape) by columns (forward mode) and by rows (reverse mode)."""

    def tensorflow(tf, x, a, *, prog):
        eager = tf.executing_eagerly()  # eagerly the pfor path traces a tf.function per call
        with tf.GradientTape(persistent=eager) as tape:
            tape.watch(x)
            y = SMOOTH[prog].tensorflow(tf, x, a)
        return _tf_forward_jacobian(tf, x, a, prog), tape.jacobian(y, x, experimental_use_pfor=not eager)

    def jax(jax, x, a, *, prog):
        def f(x):
            return SMOOTH[prog].jax(jax, x, a)

        return jax.jacfwd(f)(x), jax.jacrev(f)(x)

    def torch(torch, x, a, *, prog):
        def f(x):
            return SMOOTH[prog].torch(torch, x, a)

        return torch.func.jacfwd(f)(x), torch.func.jacrev(f)(x)


# Zero derivatives: y = g(x) + a, where x reaches y only through g (or not at all).
PATHS = ("unconnected", "int_cast", "round", "sign", "stop_gradient")
POLICIES = ("default", "ZERO")


class ZeroPaths(Program):
    """{path: (y, J v)} for every g, under TF's policy for unconnected JVPs (``jax.jvp`` and
    ``torch.func.jvp`` have none: their one program is built with ``policy=None``)."""

    def tensorflow(tf, x, a, v, *, policy):
        g = {
            "unconnected": lambda x: 0.0,
            "int_cast": lambda x: tf.cast(tf.cast(x, tf.int32), x.dtype),
            "round": tf.round,
            "sign": tf.sign,
            "stop_gradient": tf.stop_gradient,
        }
        kw = {} if policy == "default" else {"unconnected_gradients": tf.UnconnectedGradients.ZERO}
        out = {}
        for path in PATHS:
            with tf.autodiff.ForwardAccumulator(x, v) as acc:
                y = g[path](x) + a
            out[path] = (y, acc.jvp(y, **kw))
        return out

    def jax(jax, x, a, v, *, policy):
        jnp = jax.numpy
        g = {
            "unconnected": lambda x: 0.0,
            "int_cast": lambda x: x.astype(jnp.int32).astype(x.dtype),
            "round": jnp.round,
            "sign": jnp.sign,
            "stop_gradient": jax.lax.stop_gradient,
        }
        return {path: jax.jvp(lambda x: g[path](x) + a, (x,), (v,)) for path in PATHS}

    def torch(torch, x, a, v, *, policy):
        g = {
            "unconnected": lambda x: 0.0,
            "int_cast": lambda x: x.to(torch.int32).to(x.dtype),
            "round": torch.round,
            "sign": torch.sign,
            "stop_gradient": lambda x: x.detach(),
        }
        return {path: torch.func.jvp(lambda x: g[path](x) + a, (x,), (v,)) for path in PATHS}


def zero_paths_closed(x, a):
    """y = g(x) + a in NumPy (round: half to even, as every framework here)."""
    g = {
        "unconnected": 0 * x,
        "int_cast": x.astype(np.int32).astype(x.dtype),
        "round": np.round(x),
        "sign": np.sign(x),
        "stop_gradient": x,
    }
    return {path: g[path] + a for path in PATHS}


# Nested forward mode: elementwise f with closed-form f' and f''. (m * m) * m with m = identity(x)
# is tensorflow#127753's smallest case; x * x * x and exp(x) * exp(x) are its controls.
NESTED = ("cube_of_input", "cube_of_intermediate", "sin_cubed", "exp_squared")


def nested_closed(x):
    s, c, e2 = np.sin(x), np.cos(x), np.exp(2 * x)
    return {
        "cube_of_input": (3 * x**2, 6 * x),
        "cube_of_intermediate": (3 * x**2, 6 * x),
        "sin_cubed": (3 * s**2 * c, 6 * s * c**2 - 3 * s**3),
        "exp_squared": (2 * e2, 4 * e2),
    }


class Nested(Program):
    """{f: (f'(x) v, f''(x)[v, w])}: an accumulator (tangent w) around another (tangent v)."""

    def tensorflow(tf, x, v, w):
        with tf.autodiff.ForwardAccumulator(x, w) as outer:
            with tf.autodiff.ForwardAccumulator(x, v) as inner:
                m, s, e = tf.identity(x), tf.sin(x), tf.exp(x)
                ys = {
                    "cube_of_input": (x * x) * x,
                    "cube_of_intermediate": (m * m) * m,
                    "sin_cubed": (s * s) * s,
                    "exp_squared": e * e,
                }
            jvs = {f: inner.jvp(y) for f, y in ys.items()}
        return {f: (jv, outer.jvp(jv)) for f, jv in jvs.items()}

    def jax(jax, x, v, w):
        jnp = jax.numpy
        fs = {
            "cube_of_input": lambda x: (x * x) * x,
            "cube_of_intermediate": lambda x: (lambda m: (m * m) * m)(jnp.array(x, copy=True)),
            "sin_cubed": lambda x: (lambda s: (s * s) * s)(jnp.sin(x)),
            "exp_squared": lambda x: (lambda e: e * e)(jnp.exp(x)),
        }
        return {f: jax.jvp(lambda x: jax.jvp(fn, (x,), (v,))[1], (x,), (w,)) for f, fn in fs.items()}

    def torch(torch, x, v, w):
        fs = {
            "cube_of_input": lambda x: (x * x) * x,
            "cube_of_intermediate": lambda x: (lambda m: (m * m) * m)(x.clone()),
            "sin_cubed": lambda x: (lambda s: (s * s) * s)(torch.sin(x)),
            "exp_squared": lambda x: (lambda e: e * e)(torch.exp(x)),
        }
        jvp = torch.func.jvp
        return {f: jvp(lambda x: jvp(fn, (x,), (v,))[1], (x,), (w,)) for f, fn in fs.items()}


class DocHvp(Program):
    """The ForwardAccumulator docstring: forward over backward for y = sum(x ** 3)."""

    def tensorflow(tf, x, v):
        with tf.autodiff.ForwardAccumulator(x, v) as acc:
            with tf.GradientTape() as tape:
                tape.watch(x)
                y = tf.reduce_sum(x**3.0)
            backward = tape.gradient(y, x)
        return backward, acc.jvp(backward)

    def jax(jax, x, v):
        return jax.jvp(jax.grad(lambda x: jax.numpy.sum(x**3.0)), (x,), (v,))

    def torch(torch, x, v):
        return torch.func.jvp(torch.func.grad(lambda x: torch.sum(x**3.0)), (x,), (v,))


class DocPower(Program):
    """The docstring's higher-order JVP: y = x ** 3.5 under two accumulators (tangents 1)."""

    def tensorflow(tf, x):
        one = tf.ones_like(x)
        with tf.autodiff.ForwardAccumulator(x, one) as outer:
            with tf.autodiff.ForwardAccumulator(x, one) as inner:
                y = x**3.5
        inner_jvp = inner.jvp(y)
        return inner_jvp, outer.jvp(inner_jvp)

    def jax(jax, x):
        one = jax.numpy.ones_like(x)
        return jax.jvp(lambda x: jax.jvp(lambda x: x**3.5, (x,), (one,))[1], (x,), (one,))

    def torch(torch, x):
        one = torch.ones_like(x)
        return torch.func.jvp(lambda x: torch.func.jvp(lambda x: x**3.5, (x,), (one,))[1], (x,), (one,))


# ---------------------------------------------------------------- expectations
EXPECT = expectations(
    {
        "forward_api": "available",
        **{f"jvp[{p},{q}]": "zero" for p in PATHS for q in POLICIES},
        **{f"hvp[{n},{w}]": "array" for n in SMOOTH for w in "xa"},
        "prod_hvp[no-zero-factor]": "second-derivative",
        "prod_hvp[zero-factor]": "second-derivative",
        **{f"jacobian[{n}]": "forward==reverse" for n in JAC_PROGS},
        **{f"fwd_over_fwd[{n}]": "second-derivative" for n in NESTED},
    },
    *[
        expect(
            f"jvp[{p},default]",
            "none",
            framework="tensorflow",
            reason="ForwardAccumulator.jvp defaults to unconnected_gradients=NONE and returns None when no "
            "tangent reached the tensor; JVP rules are the registered gradients transposed, so ops whose "
            "gradient is None (Round, Cast to int32, StopGradient) or ignores the upstream gradient "
            "(Sign: zeros_like(x), where reverse mode gives zeros) pass no tangent; ZERO gives zeros",
            link=SIGN_ISSUE if p == "sign" else ACC_LINK,
        )
        for p in PATHS
    ],
    expect(
        "hvp[matmul_linear,x]",
        "none",
        framework="tensorflow",
        reason="the gradient of sum(u * x a^T) with respect to x is u a, computed from u and a only: no "
        "tangent of x reaches it, so acc.jvp is None (unconnected) where JAX and PyTorch give zeros",
        link=ACC_LINK,
    ),
    expect(
        "prod_hvp[zero-factor]",
        "differs",
        framework="tensorflow",
        versions="<2.22.0.dev20260627",
        reason="up to 2.21 the second derivative of tf.reduce_prod goes through the gradient of the cumprods its "
        "gradient is built from (math_grad.py _CumprodGrad returns div_no_nan(out, x)): 0 where a factor is "
        "0, so H v drops every term through a zero factor (d2(x*y)/dxdy = 1 at x = 0 comes back as 0; "
        "tensorflow#61117). tf-nightly 2026-06-27 routes _CumprodGrad through zero factors (the linked fix of "
        "tensorflow#119430) "
        "and H v is right (measured on 2.23.0.dev20261026)",
        link="https://github.com/tensorflow/tensorflow/pull/120282",
    ),
    expect(
        "hvp[reduce_prod,a]",
        "none",
        framework="tensorflow",
        reason="a enters prod(x, 0) + a[0] linearly: its gradient (u scattered into row 0) never meets x, "
        "so the mixed partial's JVP is None (unconnected) where JAX and PyTorch give zeros",
        link=ACC_LINK,
    ),
    *[
        expect(
            f"fwd_over_fwd[{n}]",
            "differs",
            framework="tensorflow",
            mode="eager",
            versions="<2.23.0.dev20260930",
            reason="up to 2.21, eagerly, nested ForwardAccumulators return a wrong finite second derivative when an "
            "intermediate reaches a Mul both directly and through another op ((m*m)*m with m = identity(x) "
            "gives (2x+1) v w instead of 6x v w); tf.function, XLA and v1 graphs are right. tf-nightly "
            "2.23.0.dev20261026 is right eagerly too (measured; the change is in the C++ tape, and no pull request "
            "for it turned up in a search: the issue is the link)",
            link=NESTED_ISSUE,
        )
        for n in ("cube_of_intermediate", "sin_cubed")
    ],
)
FD = cmp.FINITE_DIFF


# ---------------------------------------------------------------- strategies
# (dtype, shape) drawn together: every compiled mode (XLA, jax.jit, JAX's and TF's eager per-op
# caches) compiles each program once per pair. Float64 for the finite differences; a size-1 axis.
MENU = ((np.float64, (2, 3)), (np.float32, (3, 1)))
SMALLEST = 1 / 16
SIGNS = st.sampled_from([-1.0, 1.0])


@ss.cached
def values(dtype, *, shape, bound=2.0, halfway=False, unique=False):
    """Arrays of floats in [-bound, bound] whose magnitude is 0 or at least 1/16: an input or a
    tangent of 1e-300 only measures how each framework flushes subnormal products (TF's and
    XLA's CPU kernels flush them to zero, PyTorch's do not). ``halfway`` mixes in integers and
    halves (exact zeros for prod)."""
    el = ss.floats(dtype, -bound, bound, subnormals=True).map(lambda f: 0.0 if abs(f) < SMALLEST else f)
    if halfway:
        el = st.one_of(el, st.integers(int(-2 * bound), int(2 * bound)).map(lambda k: k / 2))
    return ss.arrays(dtype, shape, elements=el, unique=unique)


@st.composite
def points(draw):
    """(x, a, v): x with exact zeros, integers and halves mixed in; a; a tangent v."""
    d, s = draw(ss.choice(MENU), label="dtype, shape")
    x = draw(values(d, shape=s, halfway=True), label="x")
    return x, draw(values(d, shape=s), label="a"), draw(values(d, shape=s), label="v")


@st.composite
def steps(draw, dtype):
    """Exactly on an integer or a half-integer (round's ties, sign's 0, the int cast's steps), one
    ulp below or above one (the smallest normal number either side of 0), or in between."""
    on = dtype.type(draw(st.integers(-6, 6)) / 2)
    side = draw(ss.choice((0.0, -1.0, 1.0)))
    if side == 0:
        return on
    if on == 0:  # one ulp from 0 is subnormal, which TF's CPU kernels read as 0
        return dtype.type(side * np.finfo(dtype).tiny)
    return np.nextafter(on, dtype.type(side * np.inf))


@ss.cached
def _step_elements(d):
    return st.one_of(steps(d), ss.floats(d, -3, 3))


@st.composite
def step_points(draw):
    d, s = draw(ss.choice(MENU), label="dtype, shape")
    d = np.dtype(d)
    x = draw(ss.arrays(d, s, elements=_step_elements(d)), label="x")
    return x, draw(values(d, shape=s), label="a"), draw(values(d, shape=s), label="v")


@st.composite
def nested_points(draw):
    """(x, v, w): x of distinct elements (so no draw sits where a wrong second derivative agrees
    with the right one everywhere), tangents of magnitude in [0.5, 2]."""
    d, s = draw(ss.choice(MENU), label="dtype, shape")
    x = draw(values(d, shape=s, unique=True), label="x")
    signs = ss.arrays(d, s, elements=SIGNS)
    mag = ss.arrays(d, s, elements=ss.floats(d, 0.5, 2))
    v = draw(mag, label="|v|") * draw(signs, label="sign v")
    w = draw(mag, label="|w|") * draw(signs, label="sign w")
    return x, v, w


@st.composite
def prod_points(draw):
    """(x, a, u, v) for prod over axis 0: x with exact zeros (nonzero factors at least 1/16 from 0),
    u and v without zeros (so a second derivative through a zero factor is never 0 by accident)."""
    d, s = draw(ss.choice(MENU), label="dtype, shape")
    x = draw(values(d, shape=s, halfway=True), label="x")
    nonzero = ss.arrays(d, s, elements=ss.floats(d, SMALLEST, 2))
    signs = ss.arrays(d, s, elements=SIGNS)
    v = draw(nonzero, label="|v|") * draw(signs, label="sign v")
    u = (draw(nonzero, label="|u|") * draw(signs, label="sign u"))[0]
    return x, draw(values(d, shape=s), label="a"), u, v


# ---------------------------------------------------------------- references
def prod_hvp_closed(x, u, v):
    """H v of sum(u * prod(x, axis=0)): H_ij = the product of the column's factors other than i and j."""
    x64 = x.astype(np.float64)
    m = x.shape[0]
    out = np.zeros_like(x64)
    for i in range(m):
        for j in range(m):
            if i != j:
                others = np.prod(np.delete(x64, [i, j], axis=0), axis=0)
                out[i] += u * others * v[j]
    return out.astype(x.dtype)


def fd_jvp(f, x, v):
    """J v by central differences of f along v: finite_diff.vjp of t -> f(x + t v) at t = 0,
    one output element at a time (its cotangent a basis vector)."""
    y = np.asarray(f(x))
    out = np.zeros(y.shape)
    for idx in np.ndindex(y.shape):
        e = np.zeros(y.shape)
        e[idx] = 1.0
        (out[idx],) = finite_diff.vjp(lambda t: f(x + t * v), np.zeros(()), cotangent=e)
    return out


def fd_jacobian(f, x):
    """dP/dx (y.shape + x.shape) by central differences, one output element (row) at a time."""
    y = np.asarray(f(x))
    rows = np.zeros(y.shape + x.shape)
    for idx in np.ndindex(y.shape):
        e = np.zeros(y.shape)
        e[idx] = 1.0
        (rows[idx],) = finite_diff.vjp(f, x, cotangent=e)
    return rows


def fd_scale(ref) -> float:
    """Central differences err by about eps |f| / h + h^2 |f'''| absolutely, at the inputs'
    magnitude (O(1) here) whatever the derivative's size: the floor of a comparison with them."""
    return max(1.0, float(np.max(np.abs(ref), initial=0.0)))


def hvp_scale(g, v, ref) -> float:
    """Rounding in H v sits at the magnitude of the gradient's terms times the tangent's, whatever
    the size of H v (a zero Hessian comes back as rounding noise, not as exact zeros)."""
    return max(float(np.max(np.abs(g))) * float(np.max(np.abs(v))), float(np.max(np.abs(ref))))


def elementwise_scales(prog, x, a, u, v) -> dict:
    """Per element, the magnitude of the terms each output of the elementwise program sums (its
    floor, suite.ops.error's rule): sin(x) a + x tanh(x); its derivative cos(x) a + tanh(x) +
    x (1 - tanh^2 x), cos absolute at 1 and 1 - tanh^2 at 1 (times v for J v, u for u^T J); u sin(x)
    for the gradient in a, a product (relative). reduce_prod's J v sums v_i times the other
    factors' product, terms that cancel: each column at sum_i |v_i| prod_{k != i} |x_k| (its
    other comparisons mix nothing that cancels: the array floor). Other programs mix elements:
    {} (array floor)."""
    if prog == "reduce_prod":
        ax, av = np.abs(np.asarray(x, np.float64)), np.abs(np.asarray(v, np.float64))
        others = [np.prod(np.delete(ax, i, axis=0), axis=0) for i in range(ax.shape[0])]
        return {"jvp": sum(av[i] * others[i] for i in range(ax.shape[0]))}
    if prog != "elementwise":
        return {}
    x64, a64, u64, v64 = (np.asarray(t, np.float64) for t in (x, a, u, v))
    th = np.abs(np.tanh(x64))
    d = np.abs(a64) + th + np.abs(x64) * (1 + th**2)
    return {"value": np.abs(np.sin(x64) * a64) + np.abs(x64) * th, "jvp": np.abs(v64) * d,
            "vjp_x": np.abs(u64) * d, "vjp_a": 0.0}  # fmt: skip


def nested_scales(x, v, w) -> dict:
    """{f: (scale of f'(x) v, of f''(x) v w)} per element: x^3 and exp(x)^2 sum terms of one sign
    (relative: 0.0); sin^3's 3 s^2 c v and 6 s c^2 - 3 s^3 at 3 s^2 |v| and (6 |s| + 3 |s|^3) |v w|
    (cos is absolute at 1, and the second derivative cancels)."""
    s = np.abs(np.sin(np.asarray(x, np.float64)))
    vw = np.abs(np.asarray(v, np.float64) * np.asarray(w, np.float64))
    rel = (0.0, 0.0)
    return {"cube_of_input": rel, "cube_of_intermediate": rel, "exp_squared": rel,
            "sin_cubed": (3 * s**2 * np.abs(np.asarray(v, np.float64)), (6 * s + 3 * s**3) * vw)}  # fmt: skip


def tangent_kind(t, like) -> str:
    """``none``, ``zero`` (the shape and dtype of ``like``), ``nonzero``, or what else it was."""
    if t is None:
        return "none"
    t = np.asarray(t)
    if t.shape != like.shape or t.dtype != like.dtype:
        return f"array{t.shape}:{t.dtype}"
    return "nonzero" if t.any() else "zero"


def cotangent(data, prog, x, a):
    """u, shaped like P(x, a)."""
    shape = SMOOTH[prog].numpy(x.astype(np.float64), a.astype(np.float64)).shape
    return data.draw(values(x.dtype, shape=shape), label="u")


def hvp_against_references(subject, oracles, record, prog, x, a, u, v):
    """Observe which HVPs are None; compare the others (and both gradients) with the oracles and,
    in float64, with central differences of the subject's own reverse-mode gradient along v."""
    out = subject.run(Modes.of(subject), x, a, u, v, prog=prog)
    refs = [o.run(Modes.of(o), x, a, u, v, prog=prog) for o in oracles]
    for i, wrt in ((0, "x"), (1, "a")):
        g, h = out[2 + i], out[4 + i]
        record.check(EXPECT, **{f"hvp[{prog},{wrt}]": "none" if h is None else "array"})
        for o, r in zip(oracles, refs):
            record.close(name=f"grad_{wrt}", out=g, ref=r[2 + i], oracle=o.id)
        if h is None:  # declared (TF): the oracles' zeros are not compared with None
            continue
        for o, r in zip(oracles, refs):
            record.close(name=f"hvp_{wrt}", out=h, ref=r[4 + i], oracle=o.id, scale=hvp_scale(g, v, r[4 + i]))
        if x.dtype == np.float64:
            ref = finite_diff.hvp(lambda x: subject.run(Modes.of(subject), x, a, u, v, prog=prog)[2 + i], x, v)
            record.close(name=f"hvp_{wrt}", out=h, ref=ref, oracle="finite-difference", tol=FD, scale=fd_scale(ref))


# ---------------------------------------------------------------- properties
@pytest.mark.parametrize("prog", SMOOTH)
@given(p=points(), data=st.data())
def test_jvp_agrees_with_vjp_and_references(subject, oracles, record, prog, p, data):
    """u . jvp(v) == vjp(u) . v (ForwardAccumulator against GradientTape in the same mode); J v
    and u^T J against JAX, PyTorch and (float64) central differences of the NumPy forward pass."""
    x, a, v = p
    u = cotangent(data, prog, x, a)
    record.example(x=x, a=a, u=u, v=v)
    try:
        y, jv, gx, ga, _, _ = subject.run(Modes.of(subject), x, a, u, v, prog=prog)
    except Exception as e:  # the forward-mode API refused in this mode: the observation says how
        record.check(EXPECT, forward_api=cmp.error_name(e))
        return
    # tensorflow#60164: "the jvp becomes a list of Nones" under tf.function (TF 2.6)
    record.check(EXPECT, forward_api="available" if jv is not None else "jvp-none")
    f = SMOOTH[prog].numpy
    at = elementwise_scales(prog, x, a, u, v)
    record.close(name="value", out=y, ref=f(x, a), oracle="closed-form", tol=cmp.VALUE, scale=at.get("value"))
    terms = u.astype(np.float64) * np.asarray(jv, np.float64)  # their magnitude sets the floor
    rhs_terms = np.asarray(gx, np.float64) * v.astype(np.float64)
    lhs, rhs = np.sum(terms), np.sum(rhs_terms)
    # either side's terms: a segment mean sums rows inside J v, so u . J v may cancel where g . v does not
    scale = max(np.sum(np.abs(terms)), np.sum(np.abs(rhs_terms)))
    record.close(name="u.jvp(v)", out=lhs, ref=rhs, oracle="reverse-mode", derived_from=x.dtype, scale=scale)
    if x.dtype == np.float64:
        fd = [fd_jvp(lambda x: f(x, a), x, v), *finite_diff.vjp(f, x, a, cotangent=u)]
        for name, out, ref in zip(("jvp", "vjp_x", "vjp_a"), (jv, gx, ga), fd):
            record.close(name=name, out=out, ref=ref, oracle="finite-difference", tol=FD, scale=fd_scale(ref))
    got = {"value": y, "jvp": jv, "vjp_x": gx, "vjp_a": ga}
    record.against(oracles, Modes, x, a, u, v, via="run", got=got, prog=prog, scale=at)


@pytest.mark.parametrize("prog", HVP_PROGS)
@given(p=points(), data=st.data())
def test_forward_over_reverse_hvp(subject, oracles, record, prog, p, data):
    """ForwardAccumulator around a GradientTape (jax.jvp(jax.grad), torch.func.jvp(grad)): the JVPs
    of the gradients with respect to x (H v) and to a (mixed partials) equal JAX's, PyTorch's and
    (float64) central differences of the same framework's reverse-mode gradient along v."""
    x, a, v = p
    u = cotangent(data, prog, x, a)
    record.example(x=x, a=a, u=u, v=v)
    hvp_against_references(subject, oracles, record, prog, x, a, u, v)


#: prod_points() draws (float64, the property's (2, 3)), explicit since the ci profile's draws need
#: not reach both keys: x with no zero factor (the gradients and mixed partials against the
#: references), and with a 0 in columns 0 and 2 (two factors: H v there is u times the other
#: factor's tangent, nonzero through the 0); the same a, u and v.
PROD_AUV = (
    np.array([[0.5, -1.25, 0.0], [1.0, 0.125, -2.0]]),
    np.array([1.5, -0.25, 1.0]),
    np.array([[0.5, -1.0, 2.0], [-0.75, 1.25, 0.125]]),
)
PROD_EXAMPLES = tuple(
    (np.array(x), *PROD_AUV) for x in ([[1.5, -0.5, 2.0], [-1.0, 0.75, 0.25]], [[0.0, 1.5, -2.0], [0.5, -1.0, 0.0]])
)


@ss.explicit("p", PROD_EXAMPLES)
@given(p=prod_points())
def test_prod_hvp_through_zero_factors(subject, oracles, record, p):
    """prod over axis 0 with exact zero factors: H v against its closed form (H_ij = the product of
    the other factors) where a nonzero second derivative goes through a zero factor, and without."""
    x, a, u, v = p
    record.example(x=x, a=a, u=u, v=v)
    hx = subject.run(Modes.of(subject), x, a, u, v, prog="reduce_prod")[4]
    ref = prod_hvp_closed(x, u, v)
    zero_cols = (x == 0).any(axis=0)
    key = "prod_hvp[zero-factor]" if ref[:, zero_cols].any() else "prod_hvp[no-zero-factor]"
    same = hx is not None and cmp.rel_err(hx, ref) <= cmp.GRAD.of(x.dtype)
    record.check(EXPECT, **{key: "second-derivative" if same else "differs"})
    if same:
        record.close(name="hvp_x", out=hx, ref=ref, oracle="closed-form")
    if key == "prod_hvp[no-zero-factor]":  # the gradients and the mixed partials, where TF is right
        hvp_against_references(subject, oracles, record, "reduce_prod", x, a, u, v)


@pytest.mark.parametrize("prog", JAC_PROGS)
@given(p=points())
def test_jacobian_by_forward_mode_equals_reverse_mode(subject, oracles, record, prog, p):
    """Columns (one JVP per basis vector; jacfwd) equal rows (GradientTape.jacobian; jacrev), and
    both equal JAX's, PyTorch's and (float64) central differences."""
    x, a, _ = p
    record.example(x=x, a=a)
    fwd, rev = subject.run(Jacobians.of(subject), x, a, prog=prog)
    same = cmp.rel_err(fwd, rev) <= cmp.GRAD.of(x.dtype)
    record.check(EXPECT, **{f"jacobian[{prog}]": "forward==reverse" if same else "differs"})
    record.close(name="forward", out=fwd, ref=rev, oracle="reverse-mode")
    if x.dtype == np.float64:
        ref = fd_jacobian(lambda x: SMOOTH[prog].numpy(x, a), x)
        for name, j in (("forward", fwd), ("reverse", rev)):
            record.close(name=name, out=j, ref=ref, oracle="finite-difference", tol=FD, scale=fd_scale(ref))
    record.against(oracles, Jacobians, x, a, via="run", got={"forward": fwd, "reverse": rev}, prog=prog)


@given(p=step_points())
def test_jvp_through_zero_derivative_is_declared(subject, oracles, record, p):
    """y = g(x) + a with g unconnected, an int cast, round, sign or stop_gradient, x on their
    steps and one ulp either side: TF's default policy gives None; ZERO, JAX and PyTorch zeros."""
    x, a, v = p
    record.example(x=x, a=a, v=v)
    ref = zero_paths_closed(x, a)
    for policy in POLICIES:
        out = subject.run(ZeroPaths.of(subject), x, a, v, policy=policy if subject.framework == "tensorflow" else None)
        for path, (y, jv) in out.items():
            record.close(name=f"value[{path}]", out=y, ref=ref[path], oracle="closed-form", tol=cmp.EXACT)
            kind = tangent_kind(jv, ref[path])
            record.check(EXPECT, **{f"jvp[{path},{policy}]": kind})
            if kind == "zero":
                zeros = 0 * ref[path]
                record.close(name=f"jvp[{path},{policy}]", out=jv, ref=zeros, oracle="closed-form", tol=cmp.EXACT)


@given(p=nested_points())
def test_forward_over_forward_second_derivative(subject, oracles, record, p):
    """outer.jvp(inner.jvp(y)) = f''(x) v w (elementwise f) against the closed form, JAX, PyTorch
    and central differences of the first-order JVP; TF eager differs where declared."""
    x, v, w = p
    record.example(x=x, v=v, w=w)
    out = subject.run(Nested.of(subject), x, v, w)
    closed = nested_closed(x.astype(np.float64))
    refs = [o.run(Nested.of(o), x, v, w) for o in oracles]
    scales = nested_scales(x, v, w)
    for f, (jv, second) in out.items():
        d1, d2 = closed[f]
        s1, s2 = scales[f]  # per element (elementwise f)
        record.close(name=f"jvp[{f}]", out=jv, ref=(d1 * v).astype(x.dtype), oracle="closed-form", scale=s1)
        ref = (d2 * v * w).astype(x.dtype)
        ok = second is not None and cmp.rel_err(second, ref, scale=s2) <= cmp.GRAD.of(x.dtype)
        record.check(EXPECT, **{f"fwd_over_fwd[{f}]": "second-derivative" if ok else "differs"})
        if not ok:  # declared (TF eager): not a second derivative, nothing to compare it with
            continue
        record.close(name=f"second[{f}]", out=second, ref=ref, oracle="closed-form", scale=s2)
        if x.dtype == np.float64:
            fd = finite_diff.hvp(lambda x: subject.run(Nested.of(subject), x, v, w)[f][0], x, w)
            record.close(
                name=f"second[{f}]", out=second, ref=fd, oracle="finite-difference", tol=FD, scale=fd_scale(fd)
            )
        for o, r in zip(oracles, refs):
            record.close(name=f"jvp[{f}]", out=jv, ref=r[f][0], oracle=o.id, scale=s1)
            record.close(name=f"second[{f}]", out=second, ref=r[f][1], oracle=o.id, scale=s2)


# ---------------------------------------------------------------- seed examples
@on("tensorflow", "jax", "torch")
@given(x=st.just(np.array([1.0, 2.0], np.float32)))
def test_seed_docstring_forward_over_backward_hvp(subject, record, x):
    """ForwardAccumulator docs: y = sum(v ** 3) at v = [1, 2], tangent [1, 0]: the gradient is
    [3, 12] and its JVP (the Hessian-vector product) [6, 0]."""
    v = np.array([1.0, 0.0], np.float32)
    record.example(x=x, v=v)
    backward, hvp = subject.run(DocHvp.of(subject), x, v)
    # 3 x^2 and 6 x v, elementwise products: each entry relative to itself
    record.close(name="backward", out=backward, ref=np.array([3.0, 12.0], np.float32), oracle="closed-form", scale=0.0)
    record.close(name="hvp", out=hvp, ref=np.array([6.0, 0.0], np.float32), oracle="closed-form", scale=0.0)


@on("tensorflow", "jax", "torch")
@given(x=st.just(np.float32(1.1)))
def test_seed_docstring_higher_order_jvp(subject, record, x):
    """ForwardAccumulator docs: 1.1 ** 3.5 under two accumulators: inner 3.5 * 1.1 ** 2.5 =
    4.4417057, outer 3.5 * 2.5 * 1.1 ** 1.5 = 10.094786."""
    record.example(x=x)
    inner, outer = subject.run(DocPower.of(subject), np.asarray(x))
    record.close(name="inner", out=inner, ref=np.asarray(4.4417057, np.float32), oracle="closed-form")
    record.close(name="outer", out=outer, ref=np.asarray(10.094786, np.float32), oracle="closed-form")


@on("tensorflow", "jax", "torch")
@given(x=st.just(np.full((2, 3), 0.7)))
def test_seed_nested_accumulators_issue_127753(subject, record, x):
    """tensorflow#127753, float64, x = 0.7 (in every entry of the property's float64 shape, so
    nothing new is compiled): (m * m) * m with m = identity(x) is x ** 3, whose second derivative
    is 6x = 4.2; nested accumulators give 2.4 eagerly (declared)."""
    one = np.ones_like(x)
    record.example(x=x)
    jv, second = subject.run(Nested.of(subject), x, one, one)["cube_of_intermediate"]
    record.close(name="jvp", out=jv, ref=3 * x**2, oracle="closed-form")
    ok = second is not None and cmp.rel_err(second, 6 * x) <= cmp.GRAD.of(x.dtype)
    record.check(EXPECT, **{"fwd_over_fwd[cube_of_intermediate]": "second-derivative" if ok else "differs"})
    record.observe(second=sorted({round(float(s), 6) for s in np.ravel(second)}))


@on("tensorflow", "jax", "torch")
@given(x=st.just(np.ones((3, 1), np.float32)))
def test_seed_sign_jvp_issue_60736(subject, record, x):
    """tensorflow#60736: the JVP of tf.sign at x = 1 (float32, the property's shape) with tangent 1
    is None, not 0."""
    zero = np.zeros_like(x)
    record.example(x=x)
    pol = "default" if subject.framework == "tensorflow" else None
    y, jv = subject.run(ZeroPaths.of(subject), x, zero, np.ones_like(x), policy=pol)["sign"]
    record.close(name="value", out=y, ref=np.ones_like(x), oracle="closed-form", tol=cmp.EXACT)
    record.check(EXPECT, **{"jvp[sign,default]": tangent_kind(jv, x)})
