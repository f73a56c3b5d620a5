"""Summed gradients vs the Jacobian: a non-scalar (or list) target's gradient is the column sum.

Source: seeds/002 ("taking the gradient in Tensorflow, tf.gradient"). The gradient of a
non-scalar target ``y`` (or of a list of targets ``ys``) with respect to ``x`` is the sum
over targets, ``sum_i dy_i/dx = J^T 1``: the column sum of the Jacobian, shaped like ``x``.
The asker read the docs ("a list of Tensor of length len(xs) where each tensor is the
sum(dy/dx) for y in ys") and believed the result had length ``len(ys)``; both
``tf.gradients(ys, xs)`` and ``GradientTape.gradient`` return ``len(xs)`` sums over ``ys``.
An empty target (A of shape (0, n)) sums nothing: the gradient is zeros of x's shape; an
empty source (A of shape (m, 0)) has an empty gradient.
For the seed's ``y = A x`` with ``A = [[1,2],[3,4],[5,6]]`` the gradient is ``[9, 12]``
(column sums), not ``A``.

The Jacobian comes from ``GradientTape.jacobian`` / ``batch_jacobian``, vectorised (pfor,
the default) or as a while loop (``experimental_use_pfor=False``), compared with
``jax.jacrev``/``jacfwd``, ``torch.func.jacrev``/``jacfwd`` and the closed form in every TF
mode (a ``tf.compat.v1`` graph with shape-free placeholders included). The seed's
workaround, one ``tf.gradients`` call per output row, rebuilds the Jacobian; a persistent
tape with one ``gradient`` call per row is its eager spelling.

Declared surprises:

- TensorFlow eager: ``tf.gradients`` raises RuntimeError ("tf.gradients is not supported
  when eager execution is enabled"): the API exists but refuses (list of targets, per row).
- TensorFlow eager: the while-loop Jacobian on a non-persistent tape raises RuntimeError
  (documented); inside tf.function, XLA and v1 graphs it does not.
- JAX: TensorFlow seeds a non-scalar target with ones implicitly, but ``jax.grad`` refuses a
  non-scalar output (TypeError), even one of shape (1,).
- PyTorch: ``torch.autograd.grad`` needs ``grad_outputs`` for a non-scalar output
  (RuntimeError "grad can be implicitly created only for scalar outputs"), except for a
  one-element output, which it seeds with 1.
- TensorFlow: ``batch_jacobian`` of coupled rows silently returns the batch-summed gradient
  ``sum_c J[c, :, b, :]``, not the diagonal blocks (tensorflow#38428).

batch_jacobian of coupled rows (moved from tape-mechanics, issue 48): ``y = x * sum_b x[b]``,
the full Jacobian ``[i == k]([b == c] S_i + x[b, i])`` (``tape.jacobian``, pfor and while loop;
``jax.jacrev``, ``torch.func.jacrev``) against the closed form and the oracles; TensorFlow's
``batch_jacobian`` against the diagonal blocks ``diag(S + x[b])`` and the batch-summed gradient
``2 diag(S)``. Eagerly only the while loop (a pfor jacobian traces per call).
"""

import numpy as np
from hypothesis import given, strategies as st

from suite import compare as cmp, facts, strategies as ss
from suite.behaviours import Floor, behaviour, on
from suite.expectations import expect, expectations, raises
from suite.frameworks.tf_runner import in_v1_graph
from suite.program import Program

TF_GRADIENTS_LINK = "https://www.tensorflow.org/api_docs/python/tf/gradients"
TAPE_LINK = "https://www.tensorflow.org/api_docs/python/tf/GradientTape#jacobian"
BATCH_JACOBIAN_ISSUE = "https://github.com/tensorflow/tensorflow/issues/38428"
JAX_NOT_SCALAR = raises("TypeError", r"Gradient only defined for scalar-output functions")

BEHAVIOUR = behaviour(
    "summed-gradients-vs-jacobian",
    sources=["002"],
    links=[
        TF_GRADIENTS_LINK,
        TAPE_LINK,
        "https://www.tensorflow.org/api_docs/python/tf/GradientTape#batch_jacobian",
        "https://docs.jax.dev/en/latest/_autosummary/jax.jacrev.html",
        "https://docs.pytorch.org/docs/stable/generated/torch.func.jacrev.html",
        BATCH_JACOBIAN_ISSUE,
    ],
    floor=Floor(
        "mixed",
        "Every compared quantity goes through y = tanh(A x): each target sums a row of A x (a matrix product), its "
        "derivative 1 - tanh^2 cancels at the magnitude of 1, and the gradients compared are column sums over the "
        "targets (J^T 1; the list targets add a.T s + x2). Jacobian entries s_i A_ik carry the rounding of their "
        "row's sum, so they are held at the inputs' magnitude (record.scale = 'inputs'), with the same floor for the "
        "jacobian/summed classifier; the finite differences are of the summed objective. Per element: the "
        "coupled rows' Jacobian and batch_jacobian (0, x[b, i] or S_i + x[b, i], sums of positive terms) at "
        "their own size.",
    ),
)

EXPECT = expectations(
    {
        "nonscalar_grad": "summed",
        "implicit": "summed",
        "implicit_one_element": "summed",
        "list_grad": "summed",
        "tf_gradients": "summed",
        "jacobian": "jacobian",
        "batch_jacobian": "jacobian",
        "per_row": "jacobian",
        "per_row_tape": "jacobian",
        "while_nonpersistent": "jacobian",
        **{f"batch-jacobian[{h}]": "diagonal-blocks" for h in ("pfor", "while-loop")},
    },
    expect(
        "implicit",
        JAX_NOT_SCALAR,
        framework="jax",
        reason="jax.grad is defined for scalar outputs only ('Gradient only defined for scalar-output "
        "functions'); a non-scalar needs jax.vjp with an explicit cotangent",
        link="https://docs.jax.dev/en/latest/_autosummary/jax.grad.html",
    ),
    expect(
        "implicit",
        raises("RuntimeError", r"grad can be implicitly created only for scalar outputs"),
        framework="torch",
        reason="torch.autograd.grad creates the output gradient implicitly only for scalar outputs "
        "('grad can be implicitly created only for scalar outputs'); pass grad_outputs",
        link="https://docs.pytorch.org/docs/stable/generated/torch.autograd.grad.html",
    ),
    expect(
        "implicit_one_element",
        JAX_NOT_SCALAR,
        framework="jax",
        reason="jax.grad needs shape () ('which includes arrays with shape () but not arrays with shape "
        "(1,)'); PyTorch seeds any one-element output (numel() == 1) and TF seeds every target",
        link="https://docs.jax.dev/en/latest/_autosummary/jax.grad.html",
    ),
    facts.tf_gradients_in_eager("tf_gradients"),
    facts.tf_gradients_in_eager(
        "per_row", why="the seed's workaround calls it once per row (per_row_tape is the eager spelling)"
    ),  # fmt: skip
    expect(
        "while_nonpersistent",
        raises("RuntimeError", r"GradientTape must be created with persistent=True to compute the jacobian"),
        framework="tensorflow",
        mode="eager",
        reason="jacobian(experimental_use_pfor=False) on a non-persistent tape raises 'GradientTape must "
        "be created with persistent=True ...' when executing eagerly (documented under Raises)",
        link=TAPE_LINK,
    ),
    *[
        expect(
            f"batch-jacobian[{how}]",
            "summed-rows",
            framework="tensorflow",
            link=BATCH_JACOBIAN_ISSUE,
            reason="batch_jacobian assumes row b of the target depends on row b of the source only and computes "
            "the gradient of each output column summed over the batch: for coupled rows it returns "
            "sum_c J[c, :, b, :] (here 2 diag(S)), not the diagonal blocks J[b, :, b, :] (diag(S + x[b])), "
            "silently (pfor and while loop alike)",
        )
        for how in ("pfor", "while-loop")
    ],
)


# ---------------------------------------------------------------- strategies
# (dtype, m, n) drawn together: every compiled mode (XLA, jax.jit, JAX's eager per-primitive
# cache, TF eager pfor) compiles once per combination, so three cover a one-element target,
# m > n and m < n in both dtypes; n <= 4 keeps pfor/while-loop traces cheap.
MN_MENU = ((np.float32, 1, 1), (np.float64, 3, 2), (np.float32, 2, 4))
BMN_MENU = ((np.float64, 2, 3, 2), (np.float32, 3, 1, 4))  # (dtype, b, m, n)
EL = dict(min_value=-2.0, max_value=2.0)
# The summed gradient alone also takes an empty target (m = 0: the gradient is zeros shaped like
# x) and an empty source (n = 0: every y is tanh(0) and the gradient is empty): A's shapes are
# ss.EMPTY_SHAPES' (2, 0) and its transpose. Two more compiled shapes, in that test only.
EMPTY_MN = ((np.float32, 0, 2), (np.float64, 2, 0))
assert {(m, n) for _, m, n in EMPTY_MN} >= {s for s in ss.EMPTY_SHAPES if len(s) == 2}
# ci and quick (signature policy "largest", issue 46) draw one (dtype, m, n) per dtype: each is one
# more trace and compilation of every program in every compiled mode. By default each dtype's
# largest A (float32 (2, 4): m < n, float64 (3, 2): m > n); a test whose point or declared key needs
# another entry names the entries it keeps (``ci=``). dev and thorough draw the whole menu.
ONE_ELEMENT = (np.float32, 1, 1)  # implicit_one_element's target (PyTorch seeds it, JAX refuses)
assert ONE_ELEMENT in MN_MENU


def largest_mn(menu) -> tuple:
    """Each dtype's entry of a (dtype, m, n) ``menu`` with the largest A (:func:`ss.one_per_dtype`)."""
    keep = ss.one_per_dtype([(d, (m, n)) for d, m, n in menu])
    return tuple(e for e in menu if (np.dtype(e[0]), e[1:]) in keep)


# ci/quick for the implicit cotangent: one per dtype still, float32's the one-element target (its
# declared key implicit_one_element needs m = 1), float64's the largest
IMPLICIT_CI = (ONE_ELEMENT, *(e for e in largest_mn(MN_MENU) if e[0] != ONE_ELEMENT[0]))


@st.composite
def problems(draw, *, menu=MN_MENU, ci=None):
    """(A, x) with A of shape (m, n) and x of shape (n,): from ``menu``, or under the ``largest``
    signature policy from ``ci`` (default :func:`largest_mn` of ``menu``)."""
    if ss.SIGNATURES["policy"] == "largest":
        menu = largest_mn(menu) if ci is None else ci
    d, m, n = draw(st.sampled_from(menu), label="dtype, m, n")
    return (
        draw(ss.float_arrays(dtype=d, shape=(m, n), **EL), label="A"),
        draw(ss.float_arrays(dtype=d, shape=(n,), **EL), label="x"),
    )


@st.composite
def batch_problems(draw):
    """(A, x) with A of shape (m, n) and a batch x of shape (b, n)."""
    d, b, m, n = draw(st.sampled_from(BMN_MENU), label="dtype, b, m, n")
    return (
        draw(ss.float_arrays(dtype=d, shape=(m, n), **EL), label="A"),
        draw(ss.float_arrays(dtype=d, shape=(b, n), **EL), label="x"),
    )


@st.composite
def list_problems(draw):
    """(A, x1, x2): A (m, n), two sources of shape (n,)."""
    a, x1 = draw(problems())
    return a, x1, draw(ss.float_arrays(dtype=a.dtype, shape=x1.shape, **EL), label="x2")


# ---------------------------------------------------------------- the programs
class TanhAx(Program):
    """y = tanh(A x): J = diag(1 - y^2) A, the column sum J^T 1 = A^T (1 - y^2).
    linear=True: the seed's y = A x (J = A)."""

    def tensorflow(tf, a, x, *, linear=False):
        y = tf.linalg.matvec(a, x)
        return y if linear else tf.tanh(y)

    def jax(jax, a, x, *, linear=False):
        return a @ x if linear else jax.numpy.tanh(a @ x)

    def torch(torch, a, x, *, linear=False):
        return a @ x if linear else torch.tanh(a @ x)


class Implicit(Program):
    """The gradient of a non-scalar target with no cotangent given, as a user writes it."""

    def tensorflow(tf, a, x):
        if in_v1_graph():
            return tf.gradients(TanhAx.tensorflow(tf, a, x), x)[0]
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = TanhAx.tensorflow(tf, a, x)
        return tape.gradient(y, x)

    def jax(jax, a, x):
        return jax.grad(lambda x: TanhAx.jax(jax, a, x))(x)

    def torch(torch, a, x):
        x.requires_grad_(True)
        return torch.autograd.grad(TanhAx.torch(torch, a, x), x)[0]


def _tf_targets(tf, a, x1, x2):
    return [tf.tanh(tf.linalg.matvec(a, x1)), x1 * x2, tf.reduce_sum(tf.sin(x2))]


class TargetList(Program):
    """The gradient of a list of three targets of different shapes, two sources of shape (n,)."""

    def tensorflow(tf, a, x1, x2):
        with tf.GradientTape() as tape:
            tape.watch([x1, x2])
            ys = _tf_targets(tf, a, x1, x2)
        return tape.gradient(ys, [x1, x2])

    def jax(jax, a, x1, x2):
        jnp = jax.numpy
        ys, pullback = jax.vjp(lambda u, v: (jnp.tanh(a @ u), u * v, jnp.sum(jnp.sin(v))), x1, x2)
        return list(pullback(tuple(jnp.ones_like(y) for y in ys)))

    def torch(torch, a, x1, x2):
        x1.requires_grad_(True)
        x2.requires_grad_(True)
        ys = [torch.tanh(a @ x1), x1 * x2, torch.sum(torch.sin(x2))]
        return list(torch.autograd.grad(ys, [x1, x2], grad_outputs=[torch.ones_like(y) for y in ys]))


class TargetListTfGradients(Program):
    """seeds/002's API: tf.gradients(ys, xs) with len(ys) = 3, len(xs) = 2."""

    def tensorflow(tf, a, x1, x2):
        return tf.gradients(_tf_targets(tf, a, x1, x2), [x1, x2])


class Jacobian(Program):
    """dy/dx of TanhAx; how: TF "pfor" | "while" (experimental_use_pfor); JAX/PyTorch "jacrev" | "jacfwd"."""

    def tensorflow(tf, a, x, *, how, linear=False):
        # The while-loop Jacobian calls tape.gradient once per row: eagerly that needs a
        # persistent tape (see test_while_loop_jacobian_needs_persistent_tape_when_eager).
        with tf.GradientTape(persistent=how != "pfor") as tape:
            tape.watch(x)
            y = TanhAx.tensorflow(tf, a, x, linear=linear)
        return tape.jacobian(y, x, experimental_use_pfor=how == "pfor")

    def jax(jax, a, x, *, how, linear=False):
        return getattr(jax, how)(lambda x: TanhAx.jax(jax, a, x, linear=linear))(x)

    def torch(torch, a, x, *, how, linear=False):
        return getattr(torch.func, how)(lambda x: TanhAx.torch(torch, a, x, linear=linear))(x)


class JacobianNonpersistent(Program):
    """The while-loop Jacobian on a tape that is not persistent."""

    def tensorflow(tf, a, x):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = TanhAx.tensorflow(tf, a, x)
        return tape.jacobian(y, x, experimental_use_pfor=False)


class BatchJacobian(Program):
    """Batches: x (b, n), y[b] = tanh(A x[b]) depends on x[b] only; how as for Jacobian."""

    def tensorflow(tf, a, x, *, how):
        with tf.GradientTape(persistent=how != "pfor") as tape:
            tape.watch(x)
            y = tf.tanh(tf.linalg.matmul(x, a, transpose_b=True))
        return tape.batch_jacobian(y, x, experimental_use_pfor=how == "pfor")

    def jax(jax, a, x, *, how):
        return jax.vmap(getattr(jax, how)(lambda x: TanhAx.jax(jax, a, x)))(x)

    def torch(torch, a, x, *, how):
        return torch.func.vmap(getattr(torch.func, how)(lambda x: TanhAx.torch(torch, a, x)))(x)


class PerRow(Program):
    """The seed's workaround: one gradient call per output row (rows: static, the length of
    y); api: TF "tf.gradients" | "tape", JAX/PyTorch "native"."""

    def tensorflow(tf, a, x, *, rows, api):
        if api == "tf.gradients":
            y = TanhAx.tensorflow(tf, a, x)
            return tf.stack([tf.gradients(y[i], x)[0] for i in range(rows)])
        with tf.GradientTape(persistent=True) as tape:  # one gradient call per row
            tape.watch(x)
            y = TanhAx.tensorflow(tf, a, x)
            ys = [y[i] for i in range(rows)]  # sliced on the tape, or the rows are unconnected
        return tf.stack([tape.gradient(yi, x) for yi in ys])

    def jax(jax, a, x, *, rows, api):
        jnp = jax.numpy
        y, pullback = jax.vjp(lambda x: TanhAx.jax(jax, a, x), x)
        return jnp.stack([pullback(jnp.zeros_like(y).at[i].set(1))[0] for i in range(rows)])

    def torch(torch, a, x, *, rows, api):
        x.requires_grad_(True)
        y = TanhAx.torch(torch, a, x)
        return torch.stack([torch.autograd.grad(y[i], x, retain_graph=True)[0] for i in range(rows)])


class SeedV1Graph(Program):
    """seeds/002 as written in a v1 graph: tf.gradients of the list of rows, and per row."""

    def tensorflow(tf, a, x):
        y = tf.linalg.matvec(a, x)
        ys = [y[0], y[1], y[2]]
        return tf.gradients(ys, x), tf.stack([tf.gradients(yi, x)[0] for yi in ys])


HOWS = {"tensorflow": ("pfor", "while"), "jax": ("jacrev", "jacfwd"), "torch": ("jacrev", "jacfwd")}


# ---------------------------------------------------------------- closed forms
def closed_jacobian(a, x):
    """(dy/dA, dy/dx) of y = tanh(A x): dy_i/dA_jk = delta_ij s_i x_k, dy_i/dx_k = s_i A_ik."""
    s = 1 - np.tanh(a @ x) ** 2
    return np.einsum("ij,k->ijk", np.diag(s), x), s[:, None] * a


def closed_batch_jacobian(a, x):
    s = 1 - np.tanh(x @ a.T) ** 2  # (b, m)
    return s[:, :, None] * a[None]  # (b, m, n)


def closed_list(a, x1, x2):
    """Sum over the three targets, per source."""
    s = 1 - np.tanh(a @ x1) ** 2
    return [a.T @ s + x2, x1 + np.cos(x2)]


def kind(out, jac, *, target_axes, tol, scale=None) -> str:
    """``jacobian`` if ``out`` is the Jacobian ``jac``, ``summed`` if its sum over the
    target axes (the column sum), else ``other`` (``none`` for an unconnected None).

    >>> kind(np.array([4., 6.]), np.array([[1., 2.], [3., 4.]]), target_axes=(0,), tol=cmp.EXACT)
    'summed'
    """
    if out is None:
        return "none"
    out, jac = np.asarray(out), np.asarray(jac)
    t = tol.of(jac.dtype)
    if out.shape == jac.shape and cmp.rel_err(out, jac, rtol=t, scale=scale) <= t:
        return "jacobian"
    summed = jac.sum(axis=target_axes)
    if out.shape == summed.shape and cmp.rel_err(out, summed, rtol=t, scale=scale) <= t:
        return "summed"
    return "other"


def list_kind(out, refs, *, n_targets, tol, scale=None) -> str:
    """``summed``: len(xs) gradients, each the sum over ys; ``per-target``: len(ys) of them."""
    if len(out) == len(refs) and all(
        g is not None and cmp.rel_err(g, r, rtol=tol.of(r.dtype), scale=scale) <= tol.of(r.dtype)
        for g, r in zip(out, refs)
    ):
        return "summed"
    return "per-target" if len(out) == n_targets else "other"


def check_jacobian(subject, oracles, record, program, a, x, jac, *, how, key, name, target_axes):
    """The subject's ``program`` by ``how`` (observed as ``key``) equals the closed form ``jac``
    and each oracle's jacrev; ``target_axes``: the axes of the targets in ``jac``."""
    refs = [(o.id, o.run(program.of(o), a, x, how="jacrev")) for o in oracles]
    out = subject.run(program.of(subject), a, x, how=how)
    obs = kind(out, jac, target_axes=target_axes, tol=cmp.GRAD, scale=record.input_scale())
    record.observe(**{f"{key}[{how}]": obs})
    record.check(EXPECT, **{key: obs})
    record.close(name=name, out=out, ref=jac, oracle="closed-form")
    for oid, ref in refs:
        record.close(name=name, out=out, ref=ref, oracle=oid)


# ---------------------------------------------------------------- properties
# ci/quick: each dtype's largest A and both empty shapes (the empty target and source are this test's)
@given(p=problems(menu=MN_MENU + EMPTY_MN, ci=largest_mn(MN_MENU) + EMPTY_MN))
def test_gradient_of_nonscalar_target_is_column_sum(subject, oracles, record, p):
    """The gradient of y = tanh(A x) (ones cotangent) is A^T (1 - y^2), shaped like x, not J;
    with an empty target or source, zeros of x's and A's shapes."""
    a, x = p
    record.example(A=a, x=x)
    record.scale = "inputs"  # 1 - tanh^2 cancels where tanh saturates
    out, (ga, gx) = subject.vjp(TanhAx.of(subject), a, x)
    ja, jx = closed_jacobian(a, x)
    if a.size == 0:  # nothing to sum: exactly zero, in x's and A's shapes and dtype
        record.equal(name="grad_x (empty)", out=gx, ref=np.zeros_like(x), oracle="closed-form")
        record.equal(name="grad_A (empty)", out=ga, ref=np.zeros_like(a), oracle="closed-form")
    record.close(name="grad_x", out=gx, ref=jx.sum(0), oracle="closed-form")
    record.close(name="grad_A", out=ga, ref=ja.sum(0), oracle="closed-form")
    record.check(EXPECT, nonscalar_grad=kind(gx, jx, target_axes=(0,), tol=cmp.GRAD, scale=record.input_scale()))
    record.against(oracles, TanhAx, a, x, got={"value": ..., "grad_A": ga, "grad_x": gx})
    record.finite_differences(subject, TanhAx, a, x, got={"grad_A": ga, "grad_x": gx})  # ones cotangent


@given(p=problems(ci=IMPLICIT_CI))
def test_implicit_cotangent_for_nonscalar_target(subject, record, p):
    """No cotangent given: TF seeds ones (the column sum); jax.grad and torch.autograd.grad
    refuse, except that PyTorch seeds a one-element target of shape (1,) (JAX does not)."""
    a, x = p
    record.example(A=a, x=x)
    record.scale = "inputs"  # 1 - tanh^2 cancels where tanh saturates
    key = "implicit_one_element" if a.shape[0] == 1 else "implicit"
    try:
        gx = subject.run(Implicit.of(subject), a, x)
    except (TypeError, RuntimeError) as e:  # JAX and PyTorch refuse; checked against the declaration
        record.check(EXPECT, **{key: cmp.error_name(e)})
        return
    _, jx = closed_jacobian(a, x)
    record.check(EXPECT, **{key: kind(gx, jx, target_axes=(0,), tol=cmp.GRAD, scale=record.input_scale())})


@given(p=list_problems())
def test_list_of_targets_gives_len_xs_sums_over_targets(subject, oracles, record, p):
    """gradient([tanh(A x1), x1*x2, sum(sin x2)], [x1, x2]) has length 2 = len(xs), each the sum
    over the 3 targets; TF rows also call tf.gradients (which refuses eagerly)."""
    a, x1, x2 = p
    record.example(A=a, x1=x1, x2=x2)
    record.scale = "inputs"  # 1 - tanh^2 cancels where tanh saturates
    refs = closed_list(a, x1, x2)
    out = subject.run(TargetList.of(subject), a, x1, x2)
    record.check(EXPECT, list_grad=list_kind(out, refs, n_targets=3, tol=cmp.GRAD, scale=record.input_scale()))
    record.observe(returned_len=len(out))
    got = {f"grad_x{i + 1}": g for i, g in enumerate(out)}
    for (name, g), r in zip(got.items(), refs):
        record.close(name=name, out=g, ref=r, oracle="closed-form")
    record.against(oracles, TargetList, a, x1, x2, via="run", got=got)
    if subject.framework == "tensorflow":
        try:
            tg = subject.run(TargetListTfGradients.of(subject), a, x1, x2)
        except (AttributeError, RuntimeError) as e:  # eager: tf.gradients refuses (declared)
            record.check(EXPECT, tf_gradients=cmp.unavailable_or_raised(e, "tf.gradients"))
            return
        record.check(EXPECT, tf_gradients=list_kind(tg, refs, n_targets=3, tol=cmp.GRAD, scale=record.input_scale()))
        for i, (g, r) in enumerate(zip(tg, out)):
            record.close(name=f"tf.gradients_x{i + 1}", out=g, ref=r, oracle=subject.id)


@given(p=problems(), data=st.data())
def test_jacobian_equals_jacrev_and_closed_form(subject, oracles, record, p, data):
    """tape.jacobian (pfor and while loop) / jax.jacrev, jacfwd / torch.func.jacrev, jacfwd
    of tanh(A x) with respect to x equal the closed form diag(1 - y^2) A and each other."""
    a, x = p
    how = data.draw(st.sampled_from(HOWS[subject.framework]), label="how")
    record.example(A=a, x=x, how=how)
    record.scale = "inputs"  # 1 - tanh^2 cancels where tanh saturates
    _, jx = closed_jacobian(a, x)
    name = f"dy/dx[{how}]"
    check_jacobian(subject, oracles, record, Jacobian, a, x, jx, how=how, key="jacobian", name=name, target_axes=(0,))


@given(p=batch_problems(), data=st.data())
def test_batch_jacobian_equals_vmapped_jacrev(subject, oracles, record, p, data):
    """tape.batch_jacobian (pfor and while loop) equals vmap(jacrev) / vmap(jacfwd): (b, m, n)."""
    a, x = p
    how = data.draw(st.sampled_from(HOWS[subject.framework]), label="how")
    record.example(A=a, x=x, how=how)
    record.scale = "inputs"  # 1 - tanh^2 cancels where tanh saturates
    jac = closed_batch_jacobian(a, x)
    name = f"batch_jacobian[{how}]"
    check_jacobian(
        subject, oracles, record, BatchJacobian, a, x, jac, how=how, key="batch_jacobian", name=name, target_axes=(1,)
    )


@given(p=problems())
def test_one_gradient_call_per_row_rebuilds_jacobian(subject, oracles, record, p):
    """seeds/002's workaround: stacking tf.gradients(y[i], x) over rows i gives J (TF eager:
    tf.gradients refuses; a persistent tape per row is measured in every TF mode)."""
    a, x = p
    record.example(A=a, x=x)
    record.scale = "inputs"  # 1 - tanh^2 cancels where tanh saturates
    rows = a.shape[0]
    _, jx = closed_jacobian(a, x)
    refs = [(o.id, o.run(PerRow.of(o), a, x, rows=rows, api="native")) for o in oracles]
    apis = ("tf.gradients", "tape") if subject.framework == "tensorflow" else ("native",)
    for api in apis:
        key = "per_row_tape" if api == "tape" else "per_row"
        try:
            out = subject.run(PerRow.of(subject), a, x, rows=rows, api=api)
        except (AttributeError, RuntimeError) as e:  # eager: tf.gradients refuses (declared)
            record.check(EXPECT, **{key: cmp.unavailable_or_raised(e, "tf.gradients")})
            continue
        record.check(EXPECT, **{key: kind(out, jx, target_axes=(0,), tol=cmp.GRAD, scale=record.input_scale())})
        record.close(name=f"per_row[{api}]", out=out, ref=jx, oracle="closed-form")
        for oid, ref in refs:
            record.close(name=f"per_row[{api}]", out=out, ref=ref, oracle=oid)


@on("tensorflow")
@given(p=st.just((np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]], np.float32), np.array([0.5, -1.0], np.float32))))
def test_while_loop_jacobian_needs_persistent_tape_when_eager(subject, record, p):
    """jacobian(experimental_use_pfor=False) on a non-persistent tape: RuntimeError eagerly,
    the Jacobian inside tf.function/XLA/a v1 graph (TF-only API, so TF rows only)."""
    a, x = p
    record.example(A=a, x=x)
    record.scale = "inputs"  # 1 - tanh^2 cancels where tanh saturates
    try:
        out = subject.run(JacobianNonpersistent.of(subject), a, x)
    except RuntimeError as e:
        record.check(EXPECT, while_nonpersistent=cmp.error_name(e))
        return
    _, jx = closed_jacobian(a, x)
    record.check(EXPECT, while_nonpersistent=kind(out, jx, target_axes=(0,), tol=cmp.GRAD, scale=record.input_scale()))


# ---------------------------------------------------------------- seed examples
SEED_A = np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]], np.float32)


@on("tensorflow", "jax", "torch")
@given(x=st.just(np.array([1.0, 1.0], np.float32)))
def test_seed_linear_gradient_is_column_sum_and_jacobian_is_a(subject, record, x):
    """seeds/002 with y = A x, A = [[1,2],[3,4],[5,6]]: gradient [9, 12] (column sums, shape of
    x, not len(ys) = 3); the Jacobian (every jacobian API) and the per-row rebuild are A."""
    record.example(A=SEED_A, x=x)
    record.scale = "inputs"  # 1 - tanh^2 cancels where tanh saturates
    _, (_, gx) = subject.vjp(TanhAx.of(subject), SEED_A, x, linear=True)
    record.equal(name="grad_x", out=gx, ref=np.array([9.0, 12.0], np.float32), oracle="closed-form")
    record.check(EXPECT, nonscalar_grad=kind(gx, SEED_A, target_axes=(0,), tol=cmp.EXACT))
    for how in HOWS[subject.framework]:
        jx = subject.run(Jacobian.of(subject), SEED_A, x, how=how, linear=True)
        record.equal(name=f"jacobian[{how}]", out=jx, ref=SEED_A, oracle="closed-form")
        record.check(EXPECT, jacobian=kind(jx, SEED_A, target_axes=(0,), tol=cmp.EXACT))


@on("tensorflow", modes=("graph",))
@given(x=st.just(np.array([1.0, 1.0], np.float32)))
def test_seed_v1_tf_gradients_as_written(subject, record, x):
    """seeds/002 in a v1 Session: tf.gradients([y0, y1, y2], x) is a list of length 1 = len(xs)
    holding [9, 12]; one tf.gradients call per row stacks to A (v1 graph API: graph only)."""
    record.example(A=SEED_A, x=x)
    record.scale = "inputs"  # 1 - tanh^2 cancels where tanh saturates
    grads, rows = subject.run(SeedV1Graph.of(subject), SEED_A, x)
    record.observe(returned_len=len(grads))
    record.check(EXPECT, tf_gradients=list_kind(grads, [np.array([9.0, 12.0], np.float32)], n_targets=3, tol=cmp.EXACT))
    record.equal(name="tf.gradients", out=grads[0], ref=np.array([9.0, 12.0], np.float32), oracle="closed-form")
    record.equal(name="per_row", out=rows, ref=SEED_A, oracle="closed-form")
    record.check(EXPECT, per_row=kind(rows, SEED_A, target_axes=(0,), tol=cmp.EXACT))


# ---------------------------------------------------------------- batch_jacobian of coupled rows
# (moved from tape-mechanics, issue 48; the test, its draws and its keys unchanged, but for ci's draw)
DTYPES = (np.float32, np.float64)
COUPLED_SHAPES = ((2, 3), (3, 2))  # (b, n): fewer rows than columns, and more
_own = cmp.own


class CoupledJacobian(Program):
    """The Jacobian (b, n, b, n) of ``y = x * sum_b x[b]`` (every row scaled by the column sums): the
    tape's ``jacobian``, ``jax.jacrev``, ``torch.func.jacrev``."""

    def tensorflow(tf, x, *, pfor):
        with tf.GradientTape(persistent=not pfor) as tape:  # eagerly, the while loop needs a persistent tape
            tape.watch(x)
            y = x * tf.reduce_sum(x, axis=0, keepdims=True)
        return tape.jacobian(y, x, experimental_use_pfor=pfor)

    def jax(jax, x, *, pfor):
        return jax.jacrev(lambda x: x * jax.numpy.sum(x, axis=0, keepdims=True))(x)

    def torch(torch, x, *, pfor):
        return torch.func.jacrev(lambda x: x * x.sum(0, keepdim=True))(x)


class CoupledBatchJacobian(Program):
    """``tape.batch_jacobian`` (b, n, n) of the same coupled program."""

    def tensorflow(tf, x, *, pfor):
        with tf.GradientTape(persistent=not pfor) as tape:  # eagerly, the while loop needs a persistent tape
            tape.watch(x)
            y = x * tf.reduce_sum(x, axis=0, keepdims=True)
        return tape.batch_jacobian(y, x, experimental_use_pfor=pfor)


#: eagerly, a pfor jacobian traces its vectorised loop on every call (measured: about 2 s an example)
JACOBIAN_PFOR = {"eager": (False,)}


@st.composite
def coupled_batches(draw):
    """x of shape (b, n), b >= 2, entries in [0.25, 2] (positive: no column of the other rows sums to 0, so
    the diagonal blocks S + x[b] and the row sums 2 S never coincide)."""
    d = draw(ss.float_dtypes(dtypes=DTYPES), label="dtype")
    # ci/quick: one signature per dtype (issue 46); both shapes have 6 elements, so they are paired
    # with the dtypes (float32 (2, 3), float64 (3, 2)) and both still occur
    s = draw(st.sampled_from(ss.shapes_for(d, COUPLED_SHAPES, DTYPES)), label="shape")
    return draw(ss.float_arrays(dtype=d, shape=s, min_value=0.25, max_value=2.0), label="x")


def _coupled_forms(x):
    """(full Jacobian J[b, i, c, k] = [i == k] ([b == c] S_i + x[b, i]), its diagonal blocks J[b, :, b, :],
    and sum_c J[c, :, b, :], the gradient of the summed rows), S the column sums, in float64."""
    x = np.asarray(x, np.float64)
    b, n = x.shape
    s = x.sum(0)
    eye_n, eye_b = np.eye(n), np.eye(b)
    full = eye_n[None, :, None, :] * (eye_b[:, None, :, None] * s[None, :, None, None] + x[:, :, None, None])
    blocks = np.stack([full[i, :, i, :] for i in range(b)])
    summed = full.sum(0).transpose(1, 0, 2)
    return full, blocks, summed


@given(x=coupled_batches())
def test_batch_jacobian_of_coupled_rows(subject, oracles, record, x):
    """y = x * sum_b x[b] couples the rows: the full Jacobian (tape.jacobian, jacrev) matches its closed form
    and the oracles; TensorFlow's batch_jacobian should be its diagonal blocks J[b, :, b, :] (the documented
    stack of jacobian(y[i], x[i])): per framework which it is."""
    record.example(x=x)
    full, blocks, summed = _coupled_forms(x)
    for pfor in JACOBIAN_PFOR.get(subject.mode, (True, False)) if subject.framework == "tensorflow" else (True,):
        jac = subject.run(CoupledJacobian.of(subject), x, pfor=pfor)
        # every entry is 0, x[b, i] or S_i + x[b, i] (x > 0): a sum of positive terms, held to its own size
        record.close(name=f"jacobian[pfor={pfor}]", out=jac, ref=full.astype(x.dtype), oracle="closed-form",
                     scale=_own(full))  # fmt: skip
        record.against(oracles, CoupledJacobian, x, got={f"jacobian[pfor={pfor}]": jac}, via="run", pfor=True,
                       scale=_own(full))  # fmt: skip
        if subject.framework != "tensorflow":
            continue
        key = f"batch-jacobian[{'pfor' if pfor else 'while-loop'}]"
        bj = subject.run(CoupledBatchJacobian.of(subject), x, pfor=pfor)
        kind = cmp.which(bj, {"diagonal-blocks": blocks, "summed-rows": summed})
        record.check(EXPECT, **{key: kind})
        ref = {"diagonal-blocks": blocks, "summed-rows": summed}.get(kind, blocks)
        record.close(name=key, out=bj, ref=ref.astype(x.dtype), oracle="closed-form", scale=_own(ref))
