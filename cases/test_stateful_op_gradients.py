"""Gradients through state and control flow: assign, scatter updates with duplicates, cond, switch_case, while_loop.

Sources: tensorflow#17735 and #30234 (no gradient through ``tf.assign``), #56961 (the gradient of
``tf.tensor_scatter_nd_update`` with duplicate indices), #43631 (a persistent tape's second
gradient through ``tf.cond``), #5985 (second-order gradients through a while loop), the
``tf.tensor_scatter_nd_update`` docs ("If indices contains duplicates, then we pick the last
update for the index"; the order is nondeterministic on GPU).

Variable updates: ``v.assign(x)`` / ``assign_add`` / ``assign_sub`` and then a read of ``v``, all
on one tape. The maths (JAX's ``.at[...]``, PyTorch's ``copy_``/``add_``/``sub_`` on a copy) has
the read depend on ``x`` and, except after ``assign``, on the old value; TensorFlow gives no
gradient for ``x`` and gives the read's gradient to the variable whatever it held.
Overwriting scatters with repeated indices (``tf.tensor_scatter_nd_update``,
``tf.compat.v1.scatter_nd_update`` on a variable): which update is kept (``winner``), which
updates get a gradient (``update_grad``: ``winner-only`` is the derivative of the forward, found
by finite differences of each framework's own forward; ``every-duplicate``; ``none``), and the
tensor's gradient (``zero-where-written`` or the whole ``upstream``). Control flow: first and
second order through ``tf.cond``/``jax.lax.cond``/Python ``if``, ``tf.switch_case``/
``jax.lax.switch``/a Python list, and ``tf.while_loop`` (``unbounded``; ``bounded`` by
``maximum_iterations``)/``jax.lax.while_loop`` or a masked ``fori_loop`` of static length/a
Python loop, against closed forms and float64 finite differences. Edges: the ``cond`` predicate
exactly at its kink (``boundary``: which one-sided derivative the gradient equals), switch
indices out of range, loops that run zero times, XLA and JAX refusing reverse mode through
unbounded loops.

Variables: a v1 graph builds them and the harness re-initialises them from the fed inputs;
elsewhere each (name, device, dtype, shape) gets one variable created eagerly (``tf.init_scope``)
and assigned the inputs at the start of every call; TensorFlow programs take the input
signature as a static ``sig``, so a ``tf.function`` traces once per dtype and shape.
"""

import numpy as np
import pytest
from hypothesis import example, given, strategies as st

from suite import compare as cmp, finite_diff, strategies as ss
from suite.behaviours import Floor, behaviour, on
from suite.expectations import expect, expectations, raises
from suite.frameworks.tf_runner import Variables, in_v1_graph
from suite.program import Program

ASSIGN_NONE = "https://github.com/tensorflow/tensorflow/issues/30234"
VARIABLE_READ = "https://github.com/tensorflow/tensorflow/blob/v2.21.0/tensorflow/python/ops/resource_variable_ops.py"
STATE_GRAD = "https://github.com/tensorflow/tensorflow/blob/v2.21.0/tensorflow/python/ops/state_grad.py"
SCATTER_GRAD = "https://github.com/tensorflow/tensorflow/issues/56961"
TORCH_INDEX_PUT = "https://github.com/pytorch/pytorch/blob/main/tools/autograd/derivatives.yaml"
JAX_SWITCH = "https://docs.jax.dev/en/latest/_autosummary/jax.lax.switch.html"
PY_INDEX = "https://docs.python.org/3/library/stdtypes.html#common-sequence-operations"
XLA_WHILE = "https://www.tensorflow.org/xla/known_issues"
JAX_WHILE = "https://docs.jax.dev/en/latest/_autosummary/jax.lax.while_loop.html"
EAGER_WHILE = "https://github.com/tensorflow/tensorflow/blob/v2.21.0/tensorflow/python/ops/while_loop.py"
TORCH_GRAD = "https://pytorch.org/docs/stable/generated/torch.autograd.grad.html"

BEHAVIOUR = behaviour(
    "stateful-op-gradients",
    sources=[],
    links=[
        "https://github.com/tensorflow/tensorflow/issues/17735",
        SCATTER_GRAD,
        "https://github.com/tensorflow/tensorflow/issues/43631",
        "https://github.com/tensorflow/tensorflow/issues/5985",
        "https://www.tensorflow.org/api_docs/python/tf/tensor_scatter_nd_update",
        "https://www.tensorflow.org/api_docs/python/tf/switch_case",
        "https://www.tensorflow.org/api_docs/python/tf/while_loop",
        JAX_SWITCH,
        "https://docs.jax.dev/en/latest/_autosummary/jax.lax.fori_loop.html",
    ],
    floor=Floor(
        "mixed",
        "Per element: the value read after v.assign/assign_add/assign_sub(x) (one rounding of x or v0 +- x, at "
        "|v0_i| + |x_i|) and the persistent tape's d cond/dx (2 cos x or 2 x, relative to |ref_i|); gradients "
        "across frameworks and the scatters are exact. Array-level: the control-flow rows (cond, switch_case, "
        "while_loop) floor every output at magnitudes_of, the size of the terms the steps and orders multiply "
        "(d/da and the second orders sum over x; not split per element), and every finite difference.",
    ),
)

UPDATES = ("assign", "assign_add", "assign_sub")
SPELLINGS = ("tensor", "variable")  # tensor_scatter_nd_update; compat.v1.scatter_nd_update on a variable
BRANCHES = 3
LOOPS = ("unbounded", "bounded")
CONSTRUCTS = ("cond", "switch_case", "while_loop")
MAX_TRIPS = 3

EXPECT = expectations(
    {
        **{f"value_grad[{op}]": "-upstream" if op == "assign_sub" else "upstream" for op in UPDATES},
        **{f"variable_grad[{op}]": "zero" if op == "assign" else "upstream" for op in UPDATES},
        "seed_delta_grad": "6.0",
        **{f"{k}[{s}]": v for s in SPELLINGS for k, v in (("winner", "last-wins"), ("update_grad", "winner-only"))},
        **{f"tensor_grad[{s}]": "zero-where-written" for s in SPELLINGS},
        "boundary[cond]": "left",
        "out_of_range[-1]": "last-branch",
        f"out_of_range[{BRANCHES}]": "last-branch",
        **{f"reverse_mode[{v}]": "available" for v in LOOPS},
        **{f"zero_trip[{v}]": "zero" for v in LOOPS},
        **{f"second_call[{c}]": "same" for c in CONSTRUCTS},
    },
    *[
        expect(
            f"value_grad[{op}]",
            "none",
            framework="tensorflow",
            reason="assignments to a tf.Variable are not recorded as differentiable ops (state_grad.py: "
            "NotDifferentiable('Assign'...); the resource ops have no gradient): the value written reaches "
            "a later read through the variable's state, which no tape follows ('TF doesn't track "
            "assignments to tf.Variables to their source operations')",
            link=ASSIGN_NONE,
        )
        for op in UPDATES
    ],
    expect(
        "variable_grad[assign]",
        "upstream",
        framework="tensorflow",
        reason="the gradient w.r.t. a variable is the sum of its reads' gradients (ReadVariableOp's gradient "
        "is the identity onto the handle), whatever value the variable held when read: the value the "
        "assign overwrote is no separate input, where JAX and PyTorch (copy_ on a copy) give it zeros",
        link=VARIABLE_READ,
    ),
    expect(
        "seed_delta_grad",
        "none",
        framework="tensorflow",
        reason="tensorflow#30234: v.assign_add(x); loss = v * v: 't.gradient(loss, x) is None' because "
        "assignments are not tracked to their source",
        link=ASSIGN_NONE,
    ),
    expect(
        "update_grad[tensor]",
        "every-duplicate",
        framework="tensorflow",
        reason="_TensorScatterUpdateGrad returns gather_nd(grad, indices) for the updates: every update "
        "at a repeated index gets the upstream of that index, also those the forward discarded "
        "(maintainer on #56961: 'gradients are broken on any device' with duplicate indices)",
        link=SCATTER_GRAD,
    ),
    *[
        expect(
            f"update_grad[{s}]",
            "every-duplicate",
            framework="torch",
            reason="index_put(_)'s derivative for values is grad.index(indices) (derivatives.yaml): every "
            "duplicate gets the upstream; the docs call accumulate=False with duplicates undefined",
            link=TORCH_INDEX_PUT,
        )
        for s in SPELLINGS
    ],
    expect(
        "update_grad[variable]",
        "none",
        framework="tensorflow",
        reason="scatter updates of a variable are not differentiable (state_grad.py: "
        "NotDifferentiable('ScatterNdUpdate'); the resource scatter has no gradient): the updates "
        "reach the read only through the variable's state",
        link=STATE_GRAD,
    ),
    expect(
        "tensor_grad[variable]",
        "upstream",
        framework="tensorflow",
        reason="the variable gets its read's whole gradient (ReadVariableOp's gradient is the identity), "
        "the entries the scatter overwrote included",
        link=VARIABLE_READ,
    ),
    expect(
        "out_of_range[-1]",
        "first-branch",
        framework="jax",
        reason="jax.lax.switch clamps the index into range: -1 runs branch 0 (tf.switch_case runs its "
        "default, the last branch; a Python list wraps -1 to the last)",
        link=JAX_SWITCH,
    ),
    expect(
        f"out_of_range[{BRANCHES}]",
        raises("IndexError", r"list index out of range"),
        framework="torch",
        reason="PyTorch has no switch op: the Python list of branches raises IndexError past its end",
        link=PY_INDEX,
    ),
    expect(
        "reverse_mode[unbounded]",
        raises("InvalidArgumentError", r"XLA compilation requires a fixed tensor list size"),
        framework="tensorflow",
        mode="xla",
        reason="'XLA compilation requires a fixed tensor list size': the while loop's gradient "
        "accumulates every iteration in a TensorList, which XLA needs bounded; set maximum_iterations",
        link=XLA_WHILE,
    ),
    expect(
        "reverse_mode[unbounded]",
        raises("ValueError", r"Reverse-mode differentiation does not work for lax\.while_loop"),
        framework="jax",
        reason="'Reverse-mode differentiation does not work for lax.while_loop or lax.fori_loop with "
        "dynamic start/stop values': while_loop is not reverse-mode differentiable (XLA needs static "
        "memory bounds); fori_loop with a static trip count (scan) is",
        link=JAX_WHILE,
    ),
    *[
        expect(
            f"zero_trip[{v}]",
            "none",
            framework="tensorflow",
            mode="eager",
            reason="eagerly tf.while_loop is a Python loop ('while cond(*loop_vars): loop_vars = "
            "body(*loop_vars)'): run zero times, the parameter never reaches the tape, so it is "
            "unconnected (None); a traced loop is a While op whose gradient is zeros",
            link=EAGER_WHILE,
        )
        for v in LOOPS
    ],
    *[
        expect(
            f"zero_trip[{v}]",
            "none",
            framework="torch",
            reason="a Python loop that runs zero times never uses the parameter: autograd.grad("
            "allow_unused=True) gives None (and the first gradient, the upstream itself, has no graph "
            "to differentiate again)",
            link=TORCH_GRAD,
        )
        for v in LOOPS
    ],
)
# Second derivatives through up to three steps of a*sin(y) + y in float32, against float64 references
# (each order multiplies the terms' rounding again); values and first derivatives keep cmp.VALUE and
# cmp.GRAD (:func:`tol_of`). All are floored at magnitudes_of, the size of the terms they sum.
SECOND_TOL = cmp.tolerance(float32=1e-4)
FD_TOL = {"central": cmp.tolerance(float64=finite_diff.FD_TOL), "left": None, "right": None}
FD_TOL["left"] = FD_TOL["right"] = cmp.tolerance(float64=finite_diff.ONE_SIDED_TOL)
MARGIN = 1e-4
# One shape: a retrace for another shape (reduce_retracing) leaves the input's shape or rank
# unknown, and then XLA cannot compile the gradients of tf.cond and tf.switch_case (InvalidArgumentError:
# branch shapes differ; AddN of [0] and [3]) and aborts the process on some of tf.switch_case's
# (Check failed in DynamicConditional), measured on TF 2.21.
FLOW_SHAPE = (3,)  # |p| above this: a central difference does not straddle the kink at p = 0


# ---------------------------------------------------------------- strategies
@st.composite
def updates_and_values(draw):
    """(v0, x, w): the variable's value, the value written (sometimes equal to v0), a cotangent."""
    d, s = draw(ss.dtypes_and_shapes(shapes=((3,), (2, 3))), label="dtype, shape")
    v0 = draw(ss.float_arrays(dtype=d, shape=s), label="v0")
    x = draw(st.one_of(ss.float_arrays(dtype=d, shape=s), st.just(v0.copy())), label="x")
    return v0, x, draw(ss.cotangents(x.shape, x.dtype), label="w")


@st.composite
def duplicate_scatters(draw):
    """(t, idx, u, w): 6 row updates into 4 rows (some index repeats), distinct update values."""
    d, cols = draw(ss.dtypes_and_shapes(shapes=((), (2,))), label="dtype, row shape")
    t = draw(ss.float_arrays(dtype=d, shape=(4, *cols)), label="t")
    idx = draw(ss.arrays(np.int32, (6, 1), elements=st.integers(0, 3)), label="indices")
    el = ss.floats(d, -10, 10)
    u = draw(ss.arrays(d, (6, *cols), elements=el, unique=True), label="u")
    return t, idx, u, draw(ss.cotangents(t.shape, t.dtype), label="w")


@st.composite
def flow_inputs(draw, selector):
    """(x, a, s, w, v): x in [-2, 2], a weight |a| in [0.25, 1.5], the construct's selector, two cotangents."""
    d = draw(ss.float_dtypes())
    x = draw(ss.signed_arrays(FLOW_SHAPE, d, 2**-10, 2, zero=True), label="x")
    a = draw(ss.signed_arrays((), d, 0.25, 1.5), label="a")
    s = draw(selector(d), label="selector")
    return x, a, s, draw(ss.cotangents(x.shape, x.dtype), label="w"), draw(ss.cotangents(x.shape, x.dtype), label="v")


@ss.cached
def predicates(d):
    """p exactly at the kink (both zeros), just either side of it, and anywhere but subnormal: a
    subnormal p is moved to the smallest normal number of its sign. TensorFlow's CPU kernels and XLA
    flush subnormal operands, so p = 5e-324 > 0 is false there (the false branch runs in TF's graph,
    tf.function and XLA modes and under JAX, the true one in PyTorch and NumPy: a thorough run's draws,
    5e-324 and 1.1e-308): flush-to-zero, not this behaviour's control flow."""
    near = st.sampled_from([1e-6, -1e-6, 1e-3, -1e-3])
    return st.one_of(st.sampled_from([0.0, -0.0]), near, st.floats(-2, 2)).map(lambda p: _normal(p, d))


def _normal(p, d) -> np.ndarray:
    """``p`` in dtype ``d``, a subnormal moved to the smallest normal number of its sign.

    >>> _normal(5e-324, np.float64).item(), _normal(-1e-40, np.float32).item() == -cmp.TINY["float32"]
    (2.2250738585072014e-308, True)
    """
    v = np.asarray(p, d)
    tiny = cmp.TINY[cmp.real_name(v.dtype)]
    return np.asarray(np.copysign(tiny, v), d) if 0 < abs(v) < tiny else v


@ss.cached
def indices(d):
    return st.integers(-1, BRANCHES).map(lambda i: np.asarray(i, np.int32))  # out of range on both sides


@ss.cached
def trips(d):
    return st.integers(0, MAX_TRIPS + 1).map(lambda n: np.asarray(n, np.int32))  # 0 and past the bound


# ---------------------------------------------------------------- variables
VARIABLES = Variables()


def _sig(runner, *arrays) -> dict:
    if runner.framework != "tensorflow":
        return {}
    return {"sig": tuple((a.dtype.str, a.shape) for a in arrays)}


# ---------------------------------------------------------------- the programs: variable updates
JAX_UPDATE = {"assign": lambda v, x: v.at[...].set(x), "assign_add": lambda v, x: v.at[...].add(x)}
JAX_UPDATE["assign_sub"] = lambda v, x: v.at[...].add(-x)
TORCH_UPDATE = {"assign": "copy_", "assign_add": "add_", "assign_sub": "sub_"}
NUMPY_UPDATE = {"assign": lambda v, x: x, "assign_add": np.add, "assign_sub": np.subtract}


class VariableUpdate(Program):
    """``v.<op>(x)``, then read ``v``: (read, d/dx, d/dv) of sum(w * read). TensorFlow
    differentiates w.r.t. the variable, JAX and PyTorch w.r.t. the value it held before."""

    def tensorflow(tf, v0, x, w, *, op, sig=None):
        v = VARIABLES.get(tf, v0, name=op)
        if in_v1_graph():
            with tf.control_dependencies([getattr(v, op)(x)]):
                y = v.read_value()
            return (y, *tf.gradients(y, [x, v], grad_ys=w))
        with tf.GradientTape() as tape:
            tape.watch(x)
            getattr(v, op)(x)
            y = v.read_value()
        return (y, *tape.gradient(y, [x, v], output_gradients=w))

    def jax(jax, v0, x, w, *, op):
        y, pullback = jax.vjp(JAX_UPDATE[op], v0, x)
        gv, gx = pullback(w)
        return y, gx, gv

    def torch(torch, v0, x, w, *, op):
        v0, x = v0.requires_grad_(True), x.requires_grad_(True)
        v = v0.clone()  # PyTorch refuses an in-place update of a leaf that requires grad
        getattr(v, TORCH_UPDATE[op])(x)
        gx, gv = torch.autograd.grad(v, [x, v0], grad_outputs=w, allow_unused=True)
        return v.detach(), gx, gv


class SeedAssignAdd(Program):
    """tensorflow#30234: v = 1.0; v.assign_add(x); loss = v * v: (d loss/dx, d loss/dv)."""

    def tensorflow(tf, v0, x, *, sig=None):
        v = VARIABLES.get(tf, v0, name="seed")
        if in_v1_graph():
            with tf.control_dependencies([v.assign_add(x)]):
                loss = v * v
            return tuple(tf.gradients(loss, [x, v]))
        with tf.GradientTape() as t:
            t.watch(x)
            v.assign_add(x)
            loss = v * v
        return tuple(t.gradient(loss, [x, v]))

    def jax(jax, v0, x):
        return jax.grad(lambda x, v: (v + x) ** 2, argnums=(0, 1))(x, v0)

    def torch(torch, v0, x):
        v0, x = v0.requires_grad_(True), x.requires_grad_(True)
        v = v0.clone()
        v.add_(x)
        return torch.autograd.grad(v * v, [x, v0])


# ---------------------------------------------------------------- the programs: overwriting scatters
def _tf_scatter(tf, t, idx, u, spelling):
    """(the value, the thing whose gradient is the tensor's: t itself or the variable holding it)."""
    if spelling == "tensor":
        return tf.tensor_scatter_nd_update(t, idx, u), t
    v = VARIABLES.get(tf, t, name="scatter")
    with tf.control_dependencies([tf.compat.v1.scatter_nd_update(v, idx, u)]):
        return tf.identity(v.read_value()), v


def _torch_scatter(torch, t, idx, u, spelling):
    if spelling == "tensor":
        return t.index_put((idx[:, 0].long(),), u)
    v = t.clone()
    return v.index_put_((idx[:, 0].long(),), u)


class Scatter(Program):
    """Rows ``idx`` of t overwritten by u: (value, d/dt, d/du) of sum(w * value). JAX has no
    variables: .at[].set for both spellings; PyTorch's ``variable`` is index_put_ on a copy."""

    def tensorflow(tf, t, idx, u, w, *, spelling, sig=None):
        if in_v1_graph():
            y, source = _tf_scatter(tf, t, idx, u, spelling)
            return (y, *tf.gradients(y, [source, u], grad_ys=w))
        with tf.GradientTape() as tape:
            tape.watch([t, u])
            y, source = _tf_scatter(tf, t, idx, u, spelling)
        return (y, *tape.gradient(y, [source, u], output_gradients=w))

    def jax(jax, t, idx, u, w, *, spelling):
        y, pullback = jax.vjp(lambda t, u: t.at[idx[:, 0]].set(u), t, u)
        return (y, *pullback(w))

    def torch(torch, t, idx, u, w, *, spelling):
        t, u = t.requires_grad_(True), u.requires_grad_(True)
        y = _torch_scatter(torch, t, idx, u, spelling)
        return (y.detach(), *torch.autograd.grad(y, [t, u], grad_outputs=w, allow_unused=True))


# ---------------------------------------------------------------- the programs: control flow
def two_orders(runner, program, *args, w, v, **static):
    """(y, first gradient per float input..., second per float input...): ``runner.second_order``
    (reverse over reverse; the second is the gradient of ``sum(v * dy/d first input)``)."""
    y, g, h = runner.second_order(program.of(runner), *args, cotangent=w, cotangent2=v, **static)
    floats = [k for k, a in enumerate(args) if np.asarray(a).dtype.kind == "f"]
    return (y, *(g[k] for k in floats), *(h[k] for k in floats))


class Cond(Program):
    """a*sin(x) + p*x**2 if p > 0 else a*sin(x) - p*exp(x): continuous, with a kink in p at 0."""

    def tensorflow(tf, x, a, p):
        return tf.cond(p > 0, lambda: a * tf.sin(x) + p * x * x, lambda: a * tf.sin(x) - p * tf.exp(x))

    def jax(jax, x, a, p):
        jnp = jax.numpy
        return jax.lax.cond(p > 0, lambda: a * jnp.sin(x) + p * x * x, lambda: a * jnp.sin(x) - p * jnp.exp(x))

    def torch(torch, x, a, p):
        return a * torch.sin(x) + p * x * x if p > 0 else a * torch.sin(x) - p * torch.exp(x)


class Switch(Program):
    """Branch i of [a*sin(x), a*x**2, a*exp(x)]."""

    def tensorflow(tf, x, a, i):
        return tf.switch_case(i, [lambda: a * tf.sin(x), lambda: a * x * x, lambda: a * tf.exp(x)])

    def jax(jax, x, a, i):
        jnp = jax.numpy
        return jax.lax.switch(i, [lambda: a * jnp.sin(x), lambda: a * x * x, lambda: a * jnp.exp(x)])

    def torch(torch, x, a, i):
        return [lambda: a * torch.sin(x), lambda: a * x * x, lambda: a * torch.exp(x)][i]()


class Loop(Program):
    """n steps of y <- a*sin(y) + y from x. ``bounded``: at most MAX_TRIPS steps
    (maximum_iterations; in JAX a fori_loop of static length MAX_TRIPS masked by k < n)."""

    def tensorflow(tf, x, a, n, *, bounded):
        body = lambda k, y: (k + 1, a * tf.sin(y) + y)  # noqa: E731
        limit = MAX_TRIPS if bounded else None
        return tf.while_loop(lambda k, y: k < n, body, (tf.constant(0), x), maximum_iterations=limit)[1]

    def jax(jax, x, a, n, *, bounded):
        lax, jnp = jax.lax, jax.numpy
        if bounded:
            return lax.fori_loop(0, MAX_TRIPS, lambda k, y: jnp.where(k < n, a * jnp.sin(y) + y, y), x)
        return lax.while_loop(lambda c: c[0] < n, lambda c: (c[0] + 1, a * jnp.sin(c[1]) + c[1]), (0, x))[1]

    def torch(torch, x, a, n, *, bounded):
        y, k = x, 0
        while k < n and not (bounded and k >= MAX_TRIPS):
            y, k = a * torch.sin(y) + y, k + 1
        return y


class TapeTwice(Program):
    """tensorflow#43631: two gradient() calls of one persistent tape, per construct (tf.gradients
    twice in a v1 graph): (first, second) for cond, switch_case, while_loop."""

    def tensorflow(tf, x, p, i, n):
        fs = (
            lambda: tf.cond(p > 0, lambda: tf.sin(x) * 2.0, lambda: x * x),
            lambda: tf.switch_case(i, [lambda: tf.sin(x), lambda: x * x, lambda: tf.exp(x)]),
            lambda: tf.while_loop(
                lambda k, y: k < n, lambda k, y: (k + 1, tf.sin(y) + y), (0, x), maximum_iterations=3
            )[1],
        )
        out = []
        for f in fs:
            if in_v1_graph():
                y = f()
                out += [tf.gradients(y, x)[0], tf.gradients(y, x)[0]]
                continue
            with tf.GradientTape(persistent=True) as tape:
                tape.watch(x)
                y = f()
            out += [tape.gradient(y, x), tape.gradient(y, x)]
        return tuple(out)


# ---------------------------------------------------------------- closed forms (float64)
def cond_np(x, a, p):
    return a * np.sin(x) + (p * x * x if p > 0 else -p * np.exp(x))


def cond_first(x, a, p, w, *, side=None):
    """(d/dx, d/da, d/dp) of sum(w * y); ``side`` forces a branch (the one-sided derivatives at p = 0)."""
    right = p > 0 if side is None else side == "right"
    return (
        w * (a * np.cos(x) + (2 * p * x if right else -p * np.exp(x))),
        np.sum(w * np.sin(x)),
        np.sum(w * (x * x if right else -np.exp(x))),
    )


def cond_second(x, a, p, w, v):
    """d sum(v * d/dx)/d(x, a, p)."""
    right = p > 0
    return (
        v * w * (-a * np.sin(x) + (2 * p if right else -p * np.exp(x))),
        np.sum(v * w * np.cos(x)),
        np.sum(v * w * (2 * x if right else -np.exp(x))),
    )


BRANCH = (lambda x, a: a * np.sin(x), lambda x, a: a * x * x, lambda x, a: a * np.exp(x))
BRANCH_DX = (lambda x, a: a * np.cos(x), lambda x, a: 2 * a * x, lambda x, a: a * np.exp(x))
BRANCH_DXX = (lambda x, a: -a * np.sin(x), lambda x, a: 2 * a + 0 * x, lambda x, a: a * np.exp(x))


def switch_np(x, a, b):
    return BRANCH[b](x, a)


def switch_first(x, a, b, w):
    return w * BRANCH_DX[b](x, a), np.sum(w * BRANCH[b](x, 1.0))


def switch_second(x, a, b, w, v):
    return v * w * BRANCH_DXX[b](x, a), np.sum(v * w * BRANCH_DX[b](x, 1.0))


def loop_np(x, a, n):
    for _ in range(n):
        x = a * np.sin(x) + x
    return x


def loop_first(x, a, n, w):
    """Reverse accumulation through n steps of a*sin(y) + y (the second order: differences of this)."""
    ys = [x]
    for _ in range(n):
        ys.append(a * np.sin(ys[-1]) + ys[-1])
    gy, ga = w, 0.0
    for y in reversed(ys[:-1]):
        ga += np.sum(gy * np.sin(y))
        gy = gy * (a * np.cos(y) + 1)
    return gy, np.asarray(ga)


def references(forward, first, second, args, w, v, side):
    """[value, first order..., second order...] in closed form (second order None without one) and by
    float64 differences: of the forward for the first order, of the closed-form d/dx for the second."""
    closed = [forward(*args), *first(*args, w)]
    closed += list(second(*args, w, v)) if second else [None] * (len(closed) - 1)
    m1, m2 = np.sum(np.abs(w * closed[0])), np.sum(np.abs(v * closed[1]))
    fd = [(g, m1) for g in finite_diff.vjp(forward, *args, cotangent=w, side=side) if g is not None]
    fd += [(g, m2) for g in finite_diff.vjp(lambda *z: first(*z, w)[0], *args, cotangent=v, side=side) if g is not None]
    return closed, [None, *fd]


# ---------------------------------------------------------------- observations
def grad_kind(g, w) -> str:
    """``none``, ``upstream`` (== w), ``-upstream``, ``zero`` or ``other``."""
    if g is None:
        return "none"
    g = np.asarray(g)
    if g.shape == w.shape and np.array_equal(g, w):
        return "upstream"
    if g.shape == w.shape and np.array_equal(g, -w):
        return "-upstream"
    return "zero" if not g.any() else "other"


def _classify(g, refs: dict) -> str:
    return "none" if g is None else next((k for k, r in refs.items() if np.array_equal(g, r)), "other")


def scatter_kinds(out, gt, gu, t, idx, u, w) -> dict:
    """``winner`` read off the value; ``update_grad`` given the winners; ``tensor_grad``."""
    rows = idx[:, 0]
    won = np.array([np.array_equal(out[r], u[j]) for j, r in enumerate(rows)])
    last = np.array([j == np.flatnonzero(rows == r).max() for j, r in enumerate(rows)])
    first = np.array([j == np.flatnonzero(rows == r).min() for j, r in enumerate(rows)])
    written = np.isin(np.arange(len(t)), rows).reshape(-1, *[1] * (t.ndim - 1))
    return {
        "winner": "last-wins" if (won == last).all() else "first-wins" if (won == first).all() else "other",
        "update_grad": _classify(
            gu, {"winner-only": w[rows] * won.reshape(-1, *[1] * (u.ndim - 1)), "every-duplicate": w[rows]}
        ),
        "tensor_grad": _classify(gt, {"zero-where-written": np.where(written, 0, w), "upstream": w}),
    }


def scatter_np(t, idx, u):
    """Sequential overwrites: the last of repeated indices stays."""
    out = np.array(t, np.float64)
    for j, r in enumerate(idx[:, 0]):
        out[r] = u[j]
    return out


def branch_taken(out, x, a, w) -> int | None:
    """The branch whose closed-form value and first derivatives ``out`` (y, d/dx, d/da) matches."""
    dtype = np.asarray(out[0]).dtype
    tol, scale = SECOND_TOL.of(dtype), (1 + np.max(np.abs(x))) * (1 + abs(a)) * np.max(np.abs(w))
    x, a, w = (np.asarray(z, np.float64) for z in (x, a, w))
    for b in range(BRANCHES):
        refs = (switch_np(x, a, b), *switch_first(x, a, b, w))
        errs = [cmp.rel_err(o, r, rtol=tol, scale=scale, dtype=dtype) for o, r in zip(out[:3], refs) if o is not None]
        if len(errs) == 3 and max(errs) <= tol:
            return b
    return None


# ---------------------------------------------------------------- checking
def _float64(*arrays):
    return [np.asarray(z, np.float64) if np.asarray(z).dtype.kind == "f" else int(z) for z in arrays]


def _names(variables):
    return ("value", *(f"d/d{n}" for n in variables), *(f"d2/dx d{n}" for n in variables))


def fd_close(record, name, out, ref, side, magnitude):
    """Compare with a float64 difference. Its own error is absolute, about eps * magnitude / step
    (magnitude: the size of the summed terms of sum(w * f)); a hundred times that is the floor
    (``scale``) below which elements are compared absolutely."""
    step = finite_diff.CENTRAL_STEP if side == "central" else finite_diff.ONE_SIDED_STEP
    scale = cmp.units_scale(100, (1 + magnitude) / step)
    record.close(name=name, out=out, ref=ref, oracle="finite-difference", tol=FD_TOL[side], scale=scale)


def tol_of(name):
    """The tolerance of an output: values cmp.VALUE, first derivatives cmp.GRAD, second SECOND_TOL."""
    return cmp.VALUE if name == "value" else cmp.GRAD if name.startswith("d/") else SECOND_TOL


def _compare(record, names, out, closed, fd, side, dtype, scales, *, upto=None):
    """Closed forms (value, first, second order) and float64 differences (``fd``: pairs of the
    difference and its magnitude), the first ``upto`` outputs."""
    for name, o, c, d in list(zip(names, out, closed, fd))[:upto]:
        if c is not None:
            ref = np.asarray(c).astype(dtype)
            record.close(name=name, out=o, ref=ref, oracle="closed-form", tol=tol_of(name), scale=scales[name])
        if d is not None and dtype == np.float64:
            fd_close(record, name, o, d[0], side, d[1])


def _against(record, oracles, program, args, got, scales, **static):
    """Each oracle's outputs, name by name (``...``: not compared), errors floored at ``scale`` (the
    inputs' magnitude); an oracle that refuses the program is noted (its own row declares it)."""
    for o in oracles:
        try:
            *inputs, w, v = args
            refs = two_orders(o, program, *inputs, w=w, v=v, **static)
        except Exception as e:  # noqa: BLE001 - e.g. JAX's while_loop in reverse mode
            record.note(f"{o.id} refuses {program.__name__} {static}: {cmp.error_name(e)}")
            continue
        for (name, out), ref in zip(got.items(), refs):
            if out is not ...:
                record.close(name=name, out=out, ref=ref, oracle=o.id, tol=tol_of(name), scale=scales[name])


def magnitudes_of(names, x, a, w, v, steps=1) -> dict:
    """The size of the terms each output sums (the comparisons' absolute floor, ``scale``): each
    step multiplies by at most 1 + |a|, each order by it again and by a cotangent."""
    grow = 1 + float(abs(a))
    value = (1 + float(np.max(np.abs(x)))) * grow**steps
    first = value * float(np.max(np.abs(w)))
    second = first * float(np.max(np.abs(v))) * grow**steps
    return {n: value if n == "value" else first if n.startswith("d/") else second for n in names}


# ---------------------------------------------------------------- properties: variable updates
@pytest.mark.parametrize("op", UPDATES)
@given(vxw=updates_and_values())
def test_gradient_through_variable_update(subject, oracles, record, op, vxw):
    """Read after v.<op>(x): the value is the update's; d/dx and d/dv are the maths' (JAX, PyTorch,
    finite differences of the update) or TensorFlow's declared answer."""
    v0, x, w = vxw
    record.example(v0=v0, x=x, w=w, op=op)
    y, gx, gv = subject.run(VariableUpdate.of(subject), v0, x, w, op=op, **_sig(subject, v0, x, w))
    ref = NUMPY_UPDATE[op](v0.astype(np.float64), x).astype(x.dtype)
    # one rounding of x or v0 +- x per element (it may cancel): at the terms' size, |v0_i| + |x_i|
    terms = np.abs(np.asarray(x, np.float64)) + (0.0 if op == "assign" else np.abs(np.asarray(v0, np.float64)))
    record.close(name="value", out=y, ref=ref, oracle="closed-form", tol=cmp.VALUE, scale=terms)
    kinds = {"value_grad": grad_kind(gx, w), "variable_grad": grad_kind(gv, w)}
    record.check(EXPECT, **{f"{k}[{op}]": kind for k, kind in kinds.items()})
    if x.dtype == np.float64:  # the maths, by differences of the update alone
        fd_v, fd_x = finite_diff.vjp(NUMPY_UPDATE[op], v0, x, cotangent=w)
        for k, g, d in (("value_grad", gx, fd_x), ("variable_grad", gv, fd_v)):
            if kinds[k] == EXPECT.defaults[f"{k}[{op}]"]:
                fd_close(record, k, g, d, "central", np.sum(np.abs(w * y)))
    for o in oracles:  # gradients that read the same are equal
        ry, rx, rv = o.run(VariableUpdate.of(o), v0, x, w, op=op)
        record.close(name="value", out=y, ref=ry, oracle=o.id, tol=cmp.VALUE, scale=terms)
        for k, g, r in (("value_grad", gx, rx), ("variable_grad", gv, rv)):
            if kinds[k] == grad_kind(r, w) != "none":
                record.close(name=k, out=g, ref=r, oracle=o.id, tol=cmp.EXACT)


# ---------------------------------------------------------------- properties: overwriting scatters
@pytest.mark.parametrize("spelling", SPELLINGS)
@given(s=duplicate_scatters())
def test_scatter_update_with_duplicate_indices(subject, oracles, record, spelling, s):
    """Repeated indices: the update kept (the last, on CPU), which updates get a gradient, the
    tensor's gradient; a gradient that is the derivative of the framework's own forward equals
    the finite difference of that forward."""
    t, idx, u, w = s
    record.example(t=t, indices=idx, u=u, w=w, spelling=spelling)
    y, gt, gu = subject.run(Scatter.of(subject), t, idx, u, w, spelling=spelling, **_sig(subject, t, idx, u, w))
    kinds = scatter_kinds(y, gt, gu, t, idx, u, w)
    if subject.device == "gpu":  # the docs: nondeterministic order on GPU; recorded, not compared
        record.observe_racy(**{f"winner[{spelling}]": kinds.pop("winner")})
    record.check(EXPECT, **{f"{k}[{spelling}]": v for k, v in kinds.items()})
    if kinds.get("winner") == "last-wins":  # the documented CPU rule, and its derivatives by differences
        record.equal(name="value", out=y, ref=scatter_np(t, idx, u).astype(t.dtype), oracle="closed-form")
        if t.dtype == np.float64:
            fd_t, _, fd_u = finite_diff.vjp(scatter_np, t, idx, u, cotangent=w)
            derivatives = (("tensor_grad", gt, fd_t, "zero-where-written"), ("update_grad", gu, fd_u, "winner-only"))
            for k, g, d, want in derivatives:
                if kinds[k] == want:
                    fd_close(record, k, g, d, "central", np.sum(np.abs(w * y)))
    for o in oracles:  # the same value; gradients that read the same are equal
        ref = o.run(Scatter.of(o), t, idx, u, w, spelling=spelling)
        theirs = scatter_kinds(*ref, t, idx, u, w)
        record.equal(name="value", out=y, ref=ref[0], oracle=o.id)
        for k, g, r in (("tensor_grad", gt, ref[1]), ("update_grad", gu, ref[2])):
            if kinds[k] == theirs[k] != "none":
                record.equal(name=k, out=g, ref=r, oracle=o.id)


# ---------------------------------------------------------------- properties: control flow
EDGE = (np.array([0.5, -1.0, 2.0]), np.float64(1.25))  # x, a for the examples every row runs


@given(f=flow_inputs(predicates))
@example(f=(*EDGE, np.float64(0.0), np.ones(3), np.ones(3)))
def test_cond_first_and_second_order(subject, oracles, record, f):
    """tf.cond / lax.cond / Python if: the taken branch's first and second derivatives; at p = +-0
    (the false branch runs) d/dp is the left derivative."""
    x, a, p, w, v = f
    record.example(x=x, a=a, p=p, w=w, v=v)
    out = two_orders(subject, Cond, x, a, p, w=w, v=v)
    args = _float64(x, a, p)
    w64, v64 = _float64(w, v)
    side = "central" if abs(p) > MARGIN else "right" if p > 0 else "left"
    names = _names("xap")
    scales = magnitudes_of(names, x, a, w, v)
    if p == 0:  # which one-sided derivative d/dp is
        tol = SECOND_TOL.of(x.dtype)
        sides = {s: cond_first(*args, w64, side=s)[2] for s in ("left", "right")}
        near = {s: cmp.rel_err(out[3], r, rtol=tol, scale=scales["d/dp"], dtype=x.dtype) for s, r in sides.items()}
        record.check(EXPECT, **{"boundary[cond]": next((s for s, e in near.items() if e <= tol), "neither")})
    closed, fd = references(cond_np, cond_first, cond_second, args, w64, v64, side)
    _compare(record, names, out, closed, fd, side, x.dtype, scales)
    _against(record, oracles, Cond, (x, a, p, w, v), dict(zip(names, out)), scales)


@given(f=flow_inputs(indices))
@example(f=(*EDGE, np.int32(-1), np.ones(3), np.ones(3)))
@example(f=(*EDGE, np.int32(BRANCHES), np.ones(3), np.ones(3)))
def test_switch_case_first_and_second_order(subject, oracles, record, f):
    """tf.switch_case / lax.switch / a Python list: the selected branch's first and second
    derivatives; an index out of range runs a declared branch (or raises)."""
    x, a, i, w, v = f
    record.example(x=x, a=a, i=i, w=w, v=v)
    key = None if 0 <= i < BRANCHES else f"out_of_range[{int(i)}]"
    try:
        out = two_orders(subject, Switch, x, a, i, w=w, v=v)
    except Exception as e:
        if key is None:
            raise
        record.check(EXPECT, **{key: cmp.error_name(e)})
        return
    b = branch_taken(out, x, a, w)
    if key is not None:
        record.check(EXPECT, **{key: {0: "first-branch", BRANCHES - 1: "last-branch"}.get(b, f"branch-{b}")})
    b = int(i) if key is None else b
    if b is None:
        return  # no branch matched: the check above failed already
    closed, fd = references(switch_np, switch_first, switch_second, [*_float64(x, a), b], *_float64(w, v), "central")
    names = _names("xa")
    scales = magnitudes_of(names, x, a, w, v)
    _compare(record, names, out, closed, fd, "central", x.dtype, scales)
    if key is None:  # out of range the frameworks run different branches by design
        _against(record, oracles, Switch, (x, a, i, w, v), dict(zip(names, out)), scales)


@pytest.mark.parametrize("variant", LOOPS)
@given(f=flow_inputs(trips))
@example(f=(*EDGE, np.int32(0), np.ones(3), np.ones(3)))
def test_while_loop_first_and_second_order(subject, oracles, record, variant, f):
    """tf.while_loop / lax.while_loop or a static-length fori_loop / a Python loop: first and second
    order through n steps; reverse mode where the framework allows it; zero trips: zeros or None."""
    x, a, n, w, v = f
    record.example(x=x, a=a, n=n, w=w, v=v, variant=variant)
    bounded = variant == "bounded"
    try:
        out = two_orders(subject, Loop, x, a, n, w=w, v=v, bounded=bounded)
    except Exception as e:  # XLA and JAX refuse reverse mode through an unbounded loop (declared)
        record.check(EXPECT, **{f"reverse_mode[{variant}]": cmp.error_name(e)})
        return
    record.check(EXPECT, **{f"reverse_mode[{variant}]": "available"})
    steps = min(int(n), MAX_TRIPS) if bounded else int(n)
    names = _names("xa")
    upto = None
    if steps == 0:  # y = x: d/da and the second order are zeros, or None where a never reached the tape
        kinds = {cmp.gradient_kind(g) for g in out[2:]}
        record.check(EXPECT, **{f"zero_trip[{variant}]": kinds.pop() if len(kinds) == 1 else "mixed"})
        upto = 2
    closed, fd = references(loop_np, loop_first, None, [*_float64(x, a), steps], *_float64(w, v), "central")
    scales = magnitudes_of(names, x, a, w, v, steps=max(steps, 1))
    _compare(record, names, out, closed, fd, "central", x.dtype, scales, upto=upto)
    got = {n: o if k < (upto or len(out)) else ... for k, (n, o) in enumerate(zip(names, out))}
    _against(record, oracles, Loop, (x, a, n, w, v), got, scales, bounded=bounded)


@on("tensorflow")
@given(f=flow_inputs(predicates), i=st.integers(0, BRANCHES - 1), n=st.integers(0, MAX_TRIPS))
def test_persistent_tape_gradient_twice(subject, record, f, i, n):
    """tensorflow#43631: a persistent tape's second gradient() through tf.cond (and switch_case,
    while_loop) equals its first. TensorFlow only: it is about GradientTape(persistent=True)."""
    x, _, p, _, _ = f
    i, n = np.int32(i), np.int32(n)
    record.example(x=x, p=p, i=i, n=n)
    try:
        out = subject.run(TapeTwice.of(subject), x, p, i, n)
    except Exception as e:  # the AssertionError, were it back
        record.check(EXPECT, **{f"second_call[{c}]": cmp.error_name(e) for c in CONSTRUCTS})
        return
    for c, first, second in zip(CONSTRUCTS, out[::2], out[1::2]):
        same = (first is None and second is None) or (first is not None and np.array_equal(first, second))
        record.check(EXPECT, **{f"second_call[{c}]": "same" if same else "differs"})
    want = 2 * np.cos(np.asarray(x, np.float64)) if p > 0 else 2 * np.asarray(x, np.float64)
    record.close(name="d cond/dx", out=out[0], ref=want.astype(x.dtype), oracle="closed-form", tol=cmp.GRAD,
                 scale=np.abs(want))  # fmt: skip


# ---------------------------------------------------------------- seed examples
@on("tensorflow", "jax", "torch")
@given(v0=st.just(np.float32(1.0)))
def test_seed_assign_add_then_square(subject, record, v0):
    """tensorflow#30234: v = 1.0; v.assign_add(2.0); loss = v * v: d loss/dx is None in TensorFlow
    (6.0 in JAX and PyTorch); d loss/dv is 6.0 everywhere."""
    x = np.float32(2.0)
    record.example(v0=v0, x=x)
    gx, gv = subject.run(SeedAssignAdd.of(subject), v0, x, **_sig(subject, np.asarray(v0), np.asarray(x)))
    record.check(EXPECT, seed_delta_grad="none" if gx is None else str(float(gx)))
    record.equal(name="d loss/dv", out=np.asarray(gv), ref=np.asarray(np.float32(6.0)), oracle="closed-form")


SEED_SCATTER = (
    np.array([10.0, 20.0, 30.0, 40.0], np.float32),
    np.array([[1], [3], [1], [1]], np.int32),
    np.array([1.0, 2.0, 3.0, 4.0], np.float32),
    np.array([1.0, 10.0, 100.0, 1000.0], np.float32),
)


@on("tensorflow", "jax", "torch")
@given(s=st.just(SEED_SCATTER))
def test_seed_tensor_scatter_nd_update_duplicates(subject, record, s):
    """#56961, the docs' rule: updates 1, 3, 4 all go to index 1; 4 (the last) is kept: value
    [10, 4, 30, 2]. The tensor's gradient is [1, 0, 100, 0]; the updates' [0, 1000, 0, 10]
    (winner only) or [10, 1000, 10, 10] (every duplicate)."""
    t, idx, u, w = s
    record.example(t=t, indices=idx, u=u, w=w)
    y, gt, gu = subject.run(Scatter.of(subject), t, idx, u, w, spelling="tensor", **_sig(subject, t, idx, u, w))
    kinds = scatter_kinds(y, gt, gu, t, idx, u, w)
    won = 3  # the last of updates 0, 2, 3 (all to index 1), the documented CPU rule
    if subject.device == "gpu":  # the docs: nondeterministic order on GPU; one of the writes is kept
        record.observe_racy(**{"winner[tensor]": kinds.pop("winner")})
        won = next((j for j in (0, 2, 3) if u[j] == y[1]), won)  # none of them: the value check fails
    record.check(EXPECT, **{f"{k}[tensor]": v for k, v in kinds.items()})
    value = np.array([10, u[won], 30, 2], np.float32)
    record.equal(name="value", out=y, ref=value, oracle="closed-form")
    record.equal(name="tensor_grad", out=gt, ref=np.array([1, 0, 100, 0], np.float32), oracle="closed-form")
    winner_only = [0, 1000, 0, 0]
    winner_only[won] = 10
    want = {"winner-only": winner_only, "every-duplicate": [10, 1000, 10, 10]}.get(kinds["update_grad"])
    if want is not None:
        record.equal(name="update_grad", out=gu, ref=np.array(want, np.float32), oracle="closed-form")
