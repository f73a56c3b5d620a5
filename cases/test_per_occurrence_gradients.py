"""Per-occurrence gradients: a reused variable's gradient is the sum over its occurrences.

Source: seeds/002 ("How to fetch gradients with respect to certain occurrences of
variables"). In ``Z = X_A * Y_B * Y_A * Y_B`` the gradient with respect to ``Y_B`` is
``2 * X_A * Y_B * Y_A``, the sum of one ``X_A * Y_B * Y_A`` per occurrence;
``stop_gradient`` on one occurrence isolates the other. For a non-commutative chain
``y = B @ A @ B @ x`` the two occurrences of ``B`` get different gradients
(``w (A B x)^T`` and ``(B A)^T w x^T``), which add up to the total. Occurrences can
also meet in one op: in ``t * t``, ``t + t`` and ``t @ t`` each operand slot is an
occurrence (``t @ t`` gives ``W t^T`` and ``t^T W``), and the total is their sum.

The seed's answer: ``l = stop_gradient(wa*x) * (wa*x + b)`` with wa=1.5, b=7 and x=11
fed through a placeholder in a v1 Session gives ``dl/dx = wa*x*wa = 24.75``. The seed's
workaround for a reused *scope*, a custom getter that wraps every variable in
``stop_gradient``, runs as written in ``graph`` mode (``variable_scope(custom_getter=)``);
the TF2 spelling is a module-level wrapper that reads every variable of a ``tf.Module``
through ``stop_gradient``. Either way, the per-scope gradients add up to the total.
"""

import numpy as np
from hypothesis import example, given, strategies as st

from suite import compare as cmp, finite_diff, strategies as ss
from suite.behaviours import Floor, behaviour, on
from suite.expectations import expectations
from suite.program import Program

BEHAVIOUR = behaviour(
    "per-occurrence-gradients",
    sources=["002"],
    links=[
        "https://www.tensorflow.org/api_docs/python/tf/stop_gradient",
        "https://www.tensorflow.org/api_docs/python/tf/compat/v1/variable_scope",
    ],
    floor=Floor(
        "mixed",
        "Per element, relative to |ref_i|: X_A*Y_B*Y_A*Y_B's gradients (X_A Y_B Y_A per occurrence, their sum "
        "two equal terms) and the t * t and t + t slots (w t, w); t @ t's (W t^T, t^T W: sums of products of "
        "either sign) at each element's terms, |W| |t|^T and |t|^T |W|. Array-level: y = B A B x's and the reused "
        "tanh(W tanh(W x)) block's gradients (matrix-vector products of either sign, tanh's 1 - y^2; floored at "
        "the inputs' magnitude), and every finite difference.",
    ),
)

EXPECT = expectations({"occurrences": "sum"})
# Sums of two products rounded separately: a few ulps.
SUM_TOL = cmp.tolerance(float32=1e-5, float64=1e-12)


# ---------------------------------------------------------------- closed forms
# Closed form per operand slot of sum(w * op(t, t)): (first, second).
ONE_OP_GRADS = {
    "mul": lambda t, w: (w * t, w * t),
    "add": lambda t, w: (w, w),
    "matmul": lambda t, w: (w @ t.T, t.T @ w),
}


def numpy_scope(x, w, ct):
    """Closed form per occurrence: (first, second) gradients of sum(ct * tanh(W tanh(W x)))."""
    h = np.tanh(w @ x)
    y = np.tanh(w @ h)
    dy = ct * (1 - y**2)
    second = np.outer(dy, h)
    dh = (w.T @ dy) * (1 - h**2)
    first = np.outer(dh, x)
    return first, second


def differences(record, subject, program, *arrays, got, **kwargs) -> list:
    """``record.finite_differences`` with the floor at the inputs' magnitude: the step is
    eps^(1/3) * max(1, |x|), so a gradient far below the inputs (B = 3e-17 beside A = x = 1,
    stepped by 6e-6, where y = B A B x is ~h^2) carries rounding at the inputs' scale."""
    __tracebackhide__ = True
    before, record.scale = record.scale, "inputs"
    try:
        return record.finite_differences(subject, program, *arrays, got=got, **kwargs)
    finally:
        record.scale = before


# ---------------------------------------------------------------- strategies
@st.composite
def scalar_triples(draw):
    d, s = draw(ss.dtypes_and_shapes(), label="dtype, shape")
    return tuple(
        draw(ss.float_arrays(dtype=d, shape=s, min_value=-3, max_value=3), label=n) for n in ("xa", "yb", "ya")
    )


@st.composite
def chains(draw, *, square=False):
    d, (n,) = draw(ss.dtypes_and_shapes(shapes=((1,), (2,), (3,))), label="dtype, n")
    el = dict(min_value=-2, max_value=2)
    b = draw(ss.float_arrays(dtype=d, shape=(n, n), **el), label="B")
    a = draw(ss.float_arrays(dtype=d, shape=(n, n), **el), label="A")
    x = draw(ss.float_arrays(dtype=d, shape=(n,), **el), label="x")
    w = draw(ss.float_arrays(dtype=d, shape=(n,), **el), label="cotangent")
    return b, a, x, w


@st.composite
def one_op_inputs(draw):
    """(op, t, w): any shape for the elementwise ops, a square matrix for matmul."""
    op = draw(st.sampled_from(sorted(ONE_OP_GRADS)), label="op")
    square = ((1, 1), (2, 2), (3, 3))
    d, shape = draw(ss.dtypes_and_shapes(shapes=square if op == "matmul" else None), label="dtype, shape")
    t = draw(ss.float_arrays(dtype=d, shape=shape, min_value=-3, max_value=3), label="t")
    return op, t, draw(ss.like(t), label="cotangent")


# ---------------------------------------------------------------- the programs
# freeze: which occurrence of the reused variable is wrapped in stop_gradient.
class Product(Program):
    """Z = X_A * Y_B * Y_A * Y_B."""

    def tensorflow(tf, xa, yb, ya, *, freeze=None):
        first = tf.stop_gradient(yb) if freeze == "first" else yb
        second = tf.stop_gradient(yb) if freeze == "second" else yb
        return xa * first * ya * second

    def jax(jax, xa, yb, ya, *, freeze=None):
        sg = jax.lax.stop_gradient
        return xa * (sg(yb) if freeze == "first" else yb) * ya * (sg(yb) if freeze == "second" else yb)

    def torch(torch, xa, yb, ya, *, freeze=None):
        return xa * (yb.detach() if freeze == "first" else yb) * ya * (yb.detach() if freeze == "second" else yb)


class Chain(Program):
    """y = B @ A @ B @ x; ``freeze`` stops the outer ("first") or inner ("second") B."""

    def tensorflow(tf, b, a, x, *, freeze=None):
        outer = tf.stop_gradient(b) if freeze == "first" else b
        inner = tf.stop_gradient(b) if freeze == "second" else b
        return tf.linalg.matvec(outer, tf.linalg.matvec(a, tf.linalg.matvec(inner, x)))

    def jax(jax, b, a, x, *, freeze=None):
        sg = jax.lax.stop_gradient
        outer = sg(b) if freeze == "first" else b
        inner = sg(b) if freeze == "second" else b
        return outer @ (a @ (inner @ x))

    def torch(torch, b, a, x, *, freeze=None):
        outer = b.detach() if freeze == "first" else b
        inner = b.detach() if freeze == "second" else b
        return outer @ (a @ (inner @ x))


class Seed(Program):
    """seeds/002: l = stop_gradient(wa*x) * (wa*x + b)."""

    def tensorflow(tf, wa, x, b):
        return tf.stop_gradient(wa * x) * (wa * x + b)

    def jax(jax, wa, x, b):
        return jax.lax.stop_gradient(wa * x) * (wa * x + b)

    def torch(torch, wa, x, b):
        return (wa * x).detach() * (wa * x + b)


class SeedV1Session(Program):
    """seeds/002 as written: get_variable(1.5), get_variable(7), x fed through a placeholder."""

    def tensorflow(tf, x):
        init = tf.compat.v1.constant_initializer
        wa = tf.compat.v1.get_variable("a", shape=(), dtype=tf.float32, initializer=init(1.5))
        b = tf.compat.v1.get_variable("b", shape=(), dtype=tf.float32, initializer=init(7))
        l = tf.stop_gradient(wa * x) * (wa * x + b)  # noqa: E741  (the seed's name)
        return tf.gradients(l, x)


class OneOp(Program):
    """``t`` as both operands of one op (t * t, t + t, t @ t); ``freeze`` stops one operand."""

    def tensorflow(tf, t, *, op, freeze=None):
        first = tf.stop_gradient(t) if freeze == "first" else t
        second = tf.stop_gradient(t) if freeze == "second" else t
        return {"mul": tf.multiply, "add": tf.add, "matmul": tf.linalg.matmul}[op](first, second)

    def jax(jax, t, *, op, freeze=None):
        jnp, sg = jax.numpy, jax.lax.stop_gradient
        first = sg(t) if freeze == "first" else t
        second = sg(t) if freeze == "second" else t
        return {"mul": jnp.multiply, "add": jnp.add, "matmul": jnp.matmul}[op](first, second)

    def torch(torch, t, *, op, freeze=None):
        first = t.detach() if freeze == "first" else t
        second = t.detach() if freeze == "second" else t
        return {"mul": torch.mul, "add": torch.add, "matmul": torch.matmul}[op](first, second)


# The same forward passes with the reused tensor's occurrences as separate inputs: differences
# in one occurrence alone (the others held where they are) are that occurrence's gradient, the
# finite-difference reading of what stop_gradient on the other occurrences isolates.
class ProductSplit(Program):
    """Z = X_A * Y1 * Y_A * Y2: Product with Y_B's two occurrences as inputs."""

    def tensorflow(tf, xa, y1, ya, y2):
        return xa * y1 * ya * y2

    def jax(jax, xa, y1, ya, y2):
        return xa * y1 * ya * y2

    def torch(torch, xa, y1, ya, y2):
        return xa * y1 * ya * y2


class ChainSplit(Program):
    """y = outer @ A @ inner @ x: Chain with B's two occurrences as inputs."""

    def tensorflow(tf, outer, a, inner, x):
        return tf.linalg.matvec(outer, tf.linalg.matvec(a, tf.linalg.matvec(inner, x)))

    def jax(jax, outer, a, inner, x):
        return outer @ (a @ (inner @ x))

    def torch(torch, outer, a, inner, x):
        return outer @ (a @ (inner @ x))


class OneOpSplit(Program):
    """op(first, second): OneOp with its two operand slots as inputs."""

    def tensorflow(tf, first, second, *, op):
        return {"mul": tf.multiply, "add": tf.add, "matmul": tf.linalg.matmul}[op](first, second)

    def jax(jax, first, second, *, op):
        jnp = jax.numpy
        return {"mul": jnp.multiply, "add": jnp.add, "matmul": jnp.matmul}[op](first, second)

    def torch(torch, first, second, *, op):
        return {"mul": torch.mul, "add": torch.add, "matmul": torch.matmul}[op](first, second)


class TwoBlocks(Program):
    """y = tanh(W2 tanh(W1 x)): the reused block's forward, one weight input per application."""

    def tensorflow(tf, x, w1, w2):
        return tf.tanh(tf.linalg.matvec(w2, tf.tanh(tf.linalg.matvec(w1, x))))

    def jax(jax, x, w1, w2):
        return jax.numpy.tanh(w2 @ jax.numpy.tanh(w1 @ x))

    def torch(torch, x, w1, w2):
        return torch.tanh(w2 @ torch.tanh(w1 @ x))


# Scope wrappers: a reused block of variables applied twice, y = block(block(x)), with every
# variable of one application read through stop_gradient. Each returns the gradient of
# sum(ct * y) with respect to the block's variable W.
class ScopeV1(Program):
    """seeds/002 custom getter, as written for a v1 graph (variable_scope(custom_getter=))."""

    def tensorflow(tf, x, w, ct, *, freeze):
        def stop_getter(getter, *args, **kwargs):
            return tf.stop_gradient(getter(*args, **kwargs))

        def block(h, frozen):
            with tf.compat.v1.variable_scope(
                "block", reuse=tf.compat.v1.AUTO_REUSE, custom_getter=stop_getter if frozen else None
            ):
                W = tf.compat.v1.get_variable("W", initializer=w, dtype=w.dtype)
            return tf.tanh(tf.linalg.matvec(W, h))

        y = block(block(x, freeze == "first"), freeze == "second")
        with tf.compat.v1.variable_scope("block", reuse=True):
            var = tf.compat.v1.get_variable("W", dtype=w.dtype)
        return tf.gradients(y, var, grad_ys=ct)[0]

    tensorflow.exact_shapes = True  # get_variable needs a static shape


class Scope(Program):
    """The TF2 spelling: a module-level wrapper reading every variable through stop_gradient."""

    def tensorflow(tf, x, w, ct, *, freeze):
        class Block(tf.Module):
            def __init__(self):
                super().__init__(name="block")
                self.W = tf.Variable(w)

            def __call__(self, h, frozen=False):
                read = tf.stop_gradient if frozen else tf.identity
                return tf.tanh(tf.linalg.matvec(read(self.W), h))

        block = Block()
        with tf.GradientTape() as tape:
            y = block(block(x, freeze == "first"), freeze == "second")
        return tape.gradient(y, block.trainable_variables, output_gradients=ct)[0]

    def jax(jax, x, w, ct, *, freeze):
        jnp = jax.numpy

        def f(W):
            read = lambda frozen: jax.lax.stop_gradient(W) if frozen else W  # noqa: E731
            return jnp.tanh(read(freeze == "second") @ jnp.tanh(read(freeze == "first") @ x))

        return jax.vjp(f, w)[1](ct)[0]

    def torch(torch, x, w, ct, *, freeze):
        W = torch.nn.Parameter(w)
        read = lambda frozen: W.detach() if frozen else W  # noqa: E731
        y = torch.tanh(read(freeze == "second") @ torch.tanh(read(freeze == "first") @ x))
        return torch.autograd.grad(y, W, grad_outputs=ct)[0]


# ---------------------------------------------------------------- properties
@given(t=scalar_triples())
def test_reused_variable_gradient_is_sum_over_occurrences(subject, oracles, record, t):
    """d/dY_B of X_A*Y_B*Y_A*Y_B is 2*X_A*Y_B*Y_A; each stopped occurrence leaves half."""
    xa, yb, ya = t
    record.example(xa=xa, yb=yb, ya=ya)
    f = Product.of(subject)
    _, (gxa, total, gya) = subject.vjp(f, xa, yb, ya)
    _, (_, g1, _) = subject.vjp(f, xa, yb, ya, freeze="second")
    _, (_, g2, _) = subject.vjp(f, xa, yb, ya, freeze="first")
    # dtype=: under NumPy 1.x the scalars' closed form may come out float64 (value-based casting)
    one = dict(oracle="closed-form", tol=SUM_TOL, dtype=yb.dtype)
    # elementwise products (the total two equal ones): each element held relative to its own magnitude
    per = np.abs(np.asarray(xa, np.float64) * yb * ya)
    record.close(name="total", out=total, ref=2 * xa * yb * ya, scale=2 * per, **one)
    record.close(name="first", out=g1, ref=xa * yb * ya, scale=per, **one)
    record.close(name="second", out=g2, ref=xa * yb * ya, scale=per, **one)
    record.check(EXPECT, occurrences="sum" if cmp.rel_err(g1 + g2, total) <= SUM_TOL.of(yb.dtype) else "not-sum")
    skip = {"Z": ..., "dX_A": ...}  # the oracles' outputs before dY_B are not compared
    record.against(oracles, Product, xa, yb, ya, got={**skip, "total": total}, tol=SUM_TOL, scale=2 * per)
    record.against(oracles, Product, xa, yb, ya, freeze="second", got={**skip, "first": g1}, tol=SUM_TOL, scale=per)
    # the fourth oracle: float64 differences of this framework's own forward passes
    differences(record, subject, Product, xa, yb, ya, got={"dX_A": gxa, "total": total, "dY_A": gya})
    split = {"dX_A": ..., "first": g1, "dY_A": ..., "second": g2}
    differences(record, subject, ProductSplit, xa, yb, ya, yb, got=split)


@given(c=chains())
def test_non_commutative_occurrences_differ_and_add_up(subject, oracles, record, c):
    """y = B A B x: outer B gets w (ABx)^T, inner B gets (BA)^T w x^T; they sum to the total."""
    b, a, x, w = c
    record.example(B=b, A=a, x=x, w=w)
    # (BA)^T w sums products of either sign: it cancels (B = A = x = 1 and w summing to -0.003
    # gave float32 an error of 1.4e-5 of the result), so the floor is at the inputs' magnitude
    record.scale = "inputs"
    f = Chain.of(subject)
    _, (total, ga, gx) = subject.vjp(f, b, a, x, cotangent=w)
    _, (outer, _, _) = subject.vjp(f, b, a, x, cotangent=w, freeze="second")
    _, (inner, _, _) = subject.vjp(f, b, a, x, cotangent=w, freeze="first")
    ref_outer = np.outer(w, a @ b @ x)
    ref_inner = np.outer((b @ a).T @ w, x)
    record.close(name="outer", out=outer, ref=ref_outer, oracle="closed-form", tol=SUM_TOL)
    record.close(name="inner", out=inner, ref=ref_inner, oracle="closed-form", tol=SUM_TOL)
    record.close(name="total", out=total, ref=ref_outer + ref_inner, oracle="closed-form", tol=SUM_TOL)
    t = SUM_TOL.of(b.dtype)
    scale = max(record.input_scale(), float(np.max(np.abs(total))))
    summed = cmp.rel_err(outer + inner, total, rtol=t, scale=scale) <= t
    record.check(EXPECT, occurrences="sum" if summed else "not-sum")
    record.against(oracles, Chain, b, a, x, cotangent=w, got={"y": ..., "total": total}, tol=SUM_TOL)
    record.against(oracles, Chain, b, a, x, cotangent=w, freeze="first", got={"y": ..., "inner": inner}, tol=SUM_TOL)
    differences(record, subject, Chain, b, a, x, cotangent=w, got={"total": total, "dA": ga, "dx": gx})
    split = {"outer": outer, "dA": ..., "inner": inner, "dx": ...}
    differences(record, subject, ChainSplit, b, a, b, x, cotangent=w, got=split)


# A thorough run's draw: W t^T's second row is 3e-12 - 3e-12, exactly 0 (see the test).
CANCELLING_ROW = ("matmul", np.full((2, 2), 3.0), np.array([[0.0, 0.0], [1e-12, -1e-12]]))


@example(c=CANCELLING_ROW)
@given(c=one_op_inputs())
def test_occurrences_inside_one_op_add_up(subject, oracles, record, c):
    """One tensor as both operands of one op (t * t, t + t, t @ t): each operand slot is an
    occurrence; its gradient (the other slot stopped) matches the closed form, and the total
    (nothing stopped) is their sum: 2 w t, 2 w, and W t^T + t^T W."""
    op, t, w = c
    record.example(op=op, t=t, w=w)
    f = OneOp.of(subject)
    _, (total,) = subject.vjp(f, t, cotangent=w, op=op)
    _, (first,) = subject.vjp(f, t, cotangent=w, op=op, freeze="second")
    _, (second,) = subject.vjp(f, t, cotangent=w, op=op, freeze="first")
    ref_first, ref_second = ONE_OP_GRADS[op](t, w)
    # Each element is floored at its terms, the closed form on magnitudes. t * t and t + t are
    # elementwise (w t, w: the terms are the element, so a tiny w beside a large one is held
    # relatively). t @ t's W t^T sums a row's products, which cancel: a thorough run drew t = 3
    # and w's second row [1e-12, -1e-12], whose W t^T row is 3e-12 - 3e-12, exactly 0. NumPy's and
    # XLA's dot fuse it (fma) to the rounding of 3e-12, 2^-92 = 2e-28; TensorFlow and PyTorch give
    # 0. The array's own magnitude (2e-28, or 0) held each to the other; the terms are 6e-12.
    s_first, s_second = ONE_OP_GRADS[op](np.abs(t.astype(np.float64)), np.abs(w.astype(np.float64)))
    s_total = s_first + s_second
    one = dict(oracle="closed-form", tol=SUM_TOL)
    record.close(name=f"first[{op}]", out=first, ref=ref_first, scale=s_first, **one)
    record.close(name=f"second[{op}]", out=second, ref=ref_second, scale=s_second, **one)
    record.close(name=f"total[{op}]", out=total, ref=ref_first + ref_second, scale=s_total, **one)
    tol = SUM_TOL.of(t.dtype)
    summed = cmp.rel_err(first + second, total, rtol=tol, scale=s_total) <= tol
    record.check(EXPECT, occurrences="sum" if summed else "not-sum")
    got = {"y": ..., f"total[{op}]": total}
    record.against(oracles, OneOp, t, cotangent=w, op=op, got=got, tol=SUM_TOL, scale=s_total)
    got = {"y": ..., f"first[{op}]": first}
    record.against(oracles, OneOp, t, cotangent=w, op=op, freeze="second", got=got, tol=SUM_TOL, scale=s_first)
    differences(record, subject, OneOp, t, cotangent=w, op=op, got={f"total[{op}]": total})
    split = {f"first[{op}]": first, f"second[{op}]": second}
    differences(record, subject, OneOpSplit, t, t, cotangent=w, op=op, got=split)


@on("tensorflow", "jax", "torch", modes=("eager", "graph"))
@given(c=chains())
def test_scope_wrapper_per_scope_gradients_add_up(subject, record, c):
    """Every variable of one application of a reused scope read through stop_gradient:
    the two per-scope gradients match the closed form and add up to the total.
    TensorFlow: v1 custom getter in ``graph`` mode, tf.Module wrapper in ``eager``
    (variables are created per call, which tf.function forbids, so not in function/xla)."""
    w, _, x, ct = c
    record.example(x=x, W=w, ct=ct)
    record.scale = "inputs"  # 1 - tanh^2 cancels where tanh saturates
    fn = (ScopeV1 if subject.framework == "tensorflow" and subject.mode == "graph" else Scope).of(subject)
    first = subject.run(fn, x, w, ct, freeze="second")
    second = subject.run(fn, x, w, ct, freeze="first")
    total = subject.run(fn, x, w, ct, freeze=None)
    ref_first, ref_second = numpy_scope(x, w, ct)
    record.close(name="scope1", out=first, ref=ref_first, oracle="closed-form", tol=SUM_TOL)
    record.close(name="scope2", out=second, ref=ref_second, oracle="closed-form", tol=SUM_TOL)
    record.close(name="total", out=total, ref=ref_first + ref_second, oracle="closed-form", tol=SUM_TOL)
    t = SUM_TOL.of(w.dtype)
    summed = cmp.rel_err(first + second, total, rtol=t, scale=record.input_scale()) <= t
    record.check(EXPECT, occurrences="sum" if summed else "not-sum")
    # differences of this framework's own forward: in one application's W (per scope), and in
    # the one W both applications read (the total), through the same compiled TwoBlocks
    split = {"dx": ..., "scope1": first, "scope2": second}
    differences(record, subject, TwoBlocks, x, w, w, cotangent=ct, got=split)
    blocks = TwoBlocks.of(subject)
    x64 = x.astype(np.float64)
    (ref_total,) = finite_diff.vjp(lambda v: subject.run(blocks, x64, v, v), w, cotangent=ct)
    record.close(
        name="total[finite difference, central]",
        out=total.astype(np.float64),
        ref=ref_total,
        oracle="finite-difference",
        tol=cmp.FINITE_DIFF,
        derived_from=total.dtype,
    )


# ---------------------------------------------------------------- seed examples
@on("tensorflow", "jax", "torch")
@given(v=st.just((np.float32(1.5), np.float32(11.0), np.float32(7.0))))
def test_seed_stop_gradient_wa_x(subject, record, v):
    """seeds/002: wa=1.5, b=7, x=11: dl/dx = 24.75, dl/dwa = 181.5, dl/db = 16.5."""
    wa, x, b = (np.asarray(u) for u in v)
    record.example(wa=wa, x=x, b=b)
    out, (gwa, gx, gb) = subject.vjp(Seed.of(subject), wa, x, b)
    record.equal(name="l", out=out, ref=np.float32(16.5 * 23.5), oracle="closed-form")
    record.equal(name="dl/dx", out=gx, ref=np.float32(24.75), oracle="closed-form")
    record.equal(name="dl/dwa", out=gwa, ref=np.float32(181.5), oracle="closed-form")
    record.equal(name="dl/db", out=gb, ref=np.float32(16.5), oracle="closed-form")
    record.observe(dl_dx=float(gx))


@on("tensorflow", modes=("graph",))
@given(x=st.just(np.float32(11.0)))
def test_seed_v1_session_as_written(subject, record, x):
    """seeds/002 run as written: get_variable(1.5), get_variable(7), placeholder x fed 11
    -> sess.run([tf.gradients(l, x)]) == [[24.75]]."""
    record.example(x=x)
    out = subject.run(SeedV1Session.of(subject), x)
    record.equal(name="op_gradient", out=np.asarray(out[0]), ref=np.float32(24.75), oracle="closed-form")
    record.observe(op_gradient=float(out[0]))


@on("tensorflow", "jax", "torch")
@given(v=st.just((2.0, 3.0, 5.0)))
def test_seed_z_xa_yb_ya_yb(subject, record, v):
    """seeds/002: X_A=2, Y_B=3, Y_A=5: Z=90; dZ/dY_B = 60 = 30 (first) + 30 (second)."""
    xa, yb, ya = (np.float64(u) for u in v)
    record.example(xa=xa, yb=yb, ya=ya)
    f = Product.of(subject)
    z, (_, total, _) = subject.vjp(f, xa, yb, ya)
    _, (_, g1, _) = subject.vjp(f, xa, yb, ya, freeze="second")
    _, (_, g2, _) = subject.vjp(f, xa, yb, ya, freeze="first")
    record.equal(name="Z", out=np.float64(z), ref=np.float64(90), oracle="closed-form")
    record.equal(name="dZ/dY_B", out=np.float64(total), ref=np.float64(60), oracle="closed-form")
    record.equal(name="first", out=np.float64(g1), ref=np.float64(30), oracle="closed-form")
    record.equal(name="second", out=np.float64(g2), ref=np.float64(30), oracle="closed-form")
    record.check(EXPECT, occurrences="sum" if g1 + g2 == total else "not-sum")
