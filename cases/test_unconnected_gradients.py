"""Unconnected gradients: None, zeros or an error for a source the target does not depend on.

Source: seeds/002 (answer on tf.gradients: "There are a few operations that do not have a
gradient because it is not well defined or not implemented (in which case it will
generally return 0)"). ``tf.UnconnectedGradients`` chooses what ``GradientTape.gradient``
and ``tf.gradients`` return when no differentiable path joins a source x to the target:
``NONE`` (the default) gives ``None``, ``ZERO`` a zeros tensor in the shape of x. Each
case here is ``y = g(x) + a``: x reaches y only through g (or not at all), a is always
connected, and the gradient of ``sum(w * y)`` is taken by the mode's native API
(GradientTape in eager/function/xla, tf.gradients in graph) with the policy left at its
default, ``NONE`` or ``ZERO``; PyTorch's policies are ``allow_unused=True`` (NONE) and
``materialize_grads=True`` (ZERO); ``jax.vjp`` has none.

TensorFlow registers a None gradient for integer casts, argmax and stop_gradient
(math_grad.py ``_CastGrad``, ``_ArgMaxGrad``; ``NotDifferentiable("StopGradient")``,
although the ``tf.no_gradient`` docstring says such ops "propagate zeros"), so such a
source is ``None`` unless the policy is ``ZERO``; ``tf.sign`` registers ``zeros_like(x)``.
An op with no gradient at all (the seed's "not implemented") raises under every policy.

Declared surprises:

- TensorFlow: ``tf.round`` registers a None gradient (``_RoundGrad``), so the seed's
  "generally return 0" does not hold for it unless the policy is ``ZERO``; JAX and
  PyTorch differentiate round to zeros.
- JAX: ``jax.vjp`` has no policy and no None: a source with no differentiable path gets zeros.
- PyTorch: ``torch.autograd.grad`` defaults to ``allow_unused=False`` and raises RuntimeError
  for a source with no differentiable path.
- TensorFlow function/xla: the op without a gradient raises StagingError (AutoGraph
  re-raises the LookupError it meets while tracing).
- TensorFlow graph: tf.gradients raises its own LookupError for that op ("No gradient
  defined for operation"), not the tape's "gradient registry has no entry for".
- JAX and PyTorch: their op without a gradient raises NotImplementedError.
- TensorFlow eager: ``tf.gradients`` raises RuntimeError (a graph-only API).
"""

import numpy as np
from hypothesis import example, given, strategies as st

from suite import compare as cmp, facts, strategies as ss
from suite.behaviours import Floor, behaviour, on
from suite.expectations import expect, expectations, raises
from suite.frameworks.tf_runner import in_v1_graph
from suite.program import Program

UG_LINK = "https://www.tensorflow.org/api_docs/python/tf/UnconnectedGradients"
MATH_GRAD_LINK = "https://github.com/tensorflow/tensorflow/blob/master/tensorflow/python/ops/math_grad.py"
TORCH_GRAD_LINK = "https://pytorch.org/docs/stable/generated/torch.autograd.grad.html"
JAX_VJP_LINK = "https://docs.jax.dev/en/latest/_autosummary/jax.vjp.html"
AUTOGRAPH_LINK = "https://github.com/tensorflow/tensorflow/blob/master/tensorflow/python/autograph/pyct/error_utils.py"
GRADIENTS_UTIL_LINK = "https://github.com/tensorflow/tensorflow/blob/master/tensorflow/python/ops/gradients_util.py"
# The tape looks the gradient up in the registry (registry.Registry.lookup); tf.gradients
# (gradients_util._GradientsHelper) raises its own LookupError for the same missing entry.
NO_TAPE_GRADIENT = r"gradient registry has no entry for: IgammaGradA"
NO_GRAPH_GRADIENT = r"No gradient defined for operation.*\(op type: IgammaGradA\)"

BEHAVIOUR = behaviour(
    "unconnected-gradients",
    sources=["002"],
    links=[
        UG_LINK,
        "https://www.tensorflow.org/api_docs/python/tf/GradientTape#gradient",
        "https://www.tensorflow.org/api_docs/python/tf/gradients",
        TORCH_GRAD_LINK,
        JAX_VJP_LINK,
    ],
    floor=Floor(
        "none",
        "The connected gradients compared are the cotangent w itself and zeros, held exactly (cmp.EXACT, "
        "record.equal); everything else is a gradient kind (None, zeros, an error), so no tolerance applies.",
    ),
)

POLICIES = ("default", "NONE", "ZERO")
# x reaches y only through a path that has no gradient (or does not reach it at all).
BLOCKED = ("unconnected", "int_cast", "argmax", "stop_gradient")
PATHS = BLOCKED + ("round", "sign", "straight_through")

EXPECT = expectations(
    {
        **{f"{p}[{q}]": "zero" if q == "ZERO" else "none" for p in BLOCKED for q in POLICIES},
        **{f"round[{q}]": "zero" for q in POLICIES},
        **{f"sign[{q}]": "zero" for q in POLICIES},
        **{f"straight_through[{q}]": "upstream" for q in POLICIES},
        **{f"no_gradient[{q}]": raises("LookupError", NO_TAPE_GRADIENT) for q in POLICIES},
        "tf_gradients[NONE]": "none",
        "tf_gradients[ZERO]": "zero",
    },
    *[
        expect(
            f"round[{q}]",
            "none",
            framework="tensorflow",
            reason="tf.round registers a None gradient (math_grad.py _RoundGrad returns [None]), so "
            "the source is unconnected: None unless unconnected_gradients=ZERO; the seed's "
            "'generally return 0' does not hold; JAX and PyTorch differentiate round to zeros",
            link=MATH_GRAD_LINK,
        )
        for q in ("default", "NONE")
    ],
    *[
        expect(
            f"{p}[{q}]",
            "zero",
            framework="jax",
            reason="jax.vjp has no unconnected-gradient policy and no None: the cotangent of an input "
            "the output does not depend on (or depends on only through integers or "
            "stop_gradient) is a zeros array of its shape and dtype",
            link=JAX_VJP_LINK,
        )
        for p in BLOCKED
        for q in ("default", "NONE")
    ],
    *[
        expect(
            f"{p}[default]",
            raises("RuntimeError", r"appears to not have been used in the graph"),
            framework="torch",
            reason="torch.autograd.grad defaults to allow_unused=False and raises 'The differentiated "
            "Tensor at index 0 appears to not have been used in the graph'; "
            "allow_unused=True gives None, materialize_grads=True zeros",
            link=TORCH_GRAD_LINK,
        )
        for p in BLOCKED
    ],
    *[
        expect(
            f"no_gradient[{q}]",
            raises("StagingError", NO_TAPE_GRADIENT),
            framework="tensorflow",
            mode="function|xla",
            reason="the LookupError ('gradient registry has no entry for: IgammaGradA') is raised while "
            "tracing, and AutoGraph re-raises a type outside KNOWN_STRING_CONSTRUCTOR_ERRORS "
            "(LookupError is one) as StagingError; the policy only decides unconnected sources",
            link=AUTOGRAPH_LINK,
        )
        for q in POLICIES
    ],
    *[
        expect(
            f"no_gradient[{q}]",
            raises("LookupError", NO_GRAPH_GRADIENT),
            framework="tensorflow",
            mode="graph",
            reason="the v1 graph row takes tf.gradients, which finds no gradient function for the op "
            "itself and raises 'No gradient defined for operation ... (op type: IgammaGradA)' where the "
            "tape says 'gradient registry has no entry for: IgammaGradA'",
            link=GRADIENTS_UTIL_LINK,
        )
        for q in POLICIES
    ],
    *[
        expect(
            f"no_gradient[{q}]",
            raises("NotImplementedError", r"Differentiation rule for 'igamma_grad_a' not implemented"),
            framework="jax",
            reason="jax.lax.igamma_grad_a has no differentiation rule: 'Differentiation rule for "
            "igamma_grad_a not implemented'; JAX has no policy that turns this into zeros",
            link=JAX_VJP_LINK,
        )
        for q in POLICIES
    ],
    *[
        expect(
            f"no_gradient[{q}]",
            raises("NotImplementedError", r"the derivative for 'igamma: input' is not implemented"),
            framework="torch",
            reason="torch.igamma has no derivative for its first argument ('the derivative for "
            "igamma: input is not implemented'); allow_unused/materialize_grads do not apply",
            link="https://github.com/pytorch/pytorch/blob/main/tools/autograd/derivatives.yaml",
        )
        for q in POLICIES
    ],
    *[facts.tf_gradients_in_eager(f"tf_gradients[{q}]") for q in ("NONE", "ZERO")],
)


# ---------------------------------------------------------------- strategies
SHAPES = ((2, 3),)  # argmax needs an axis; one shape x two dtypes: each is one compile per program


@st.composite
def sources(draw):
    """(x, a, w): x with half-way points (round ties), a, and a cotangent w without zeros."""
    d, s = draw(ss.float_dtypes()), draw(ss.small_shapes(menu=SHAPES))
    x = draw(ss.float_arrays(dtype=d, shape=s, halfway=True), label="x")
    a = draw(ss.float_arrays(dtype=d, shape=s), label="a")
    # w == 0 would make "upstream" and "zero" indistinguishable
    w = draw(ss.like(x).map(lambda w: np.where(w == 0, 1, w).astype(w.dtype)), label="cotangent")
    return x, a, w


# ---------------------------------------------------------------- the programs
# The paths g by which x reaches y = g(x) + a, one small program each.
class Unconnected(Program):
    """x does not reach y at all."""

    def tensorflow(tf, x):
        return 0.0

    def jax(jax, x):
        return 0.0

    def torch(torch, x):
        return 0.0


class IntCast(Program):
    def tensorflow(tf, x):
        return tf.cast(tf.cast(x, tf.int32), x.dtype)

    def jax(jax, x):
        return x.astype(jax.numpy.int32).astype(x.dtype)

    def torch(torch, x):
        return x.to(torch.int32).to(x.dtype)


class ArgMax(Program):
    def tensorflow(tf, x):
        return tf.cast(tf.argmax(x, axis=-1), x.dtype)[..., None]

    def jax(jax, x):
        return jax.numpy.argmax(x, axis=-1, keepdims=True).astype(x.dtype)

    def torch(torch, x):
        return torch.argmax(x, dim=-1, keepdim=True).to(x.dtype)


class Elementwise(Program):
    """``op`` (round, sign): the same name in every framework."""

    def tensorflow(tf, x, *, op):
        return getattr(tf, op)(x)

    def jax(jax, x, *, op):
        return getattr(jax.numpy, op)(x)

    def torch(torch, x, *, op):
        return getattr(torch, op)(x)


class StopGradient(Program):
    def tensorflow(tf, x):
        return tf.stop_gradient(x)

    def jax(jax, x):
        return jax.lax.stop_gradient(x)

    def torch(torch, x):
        return x.detach()


class StraightThrough(Program):
    """Connected: x + stop_gradient(round(x) - x), of the two paths above."""

    def tensorflow(tf, x):
        return x + StopGradient.tensorflow(tf, Elementwise.tensorflow(tf, x, op="round") - x)

    def jax(jax, x):
        return x + StopGradient.jax(jax, Elementwise.jax(jax, x, op="round") - x)

    def torch(torch, x):
        return x + StopGradient.torch(torch, Elementwise.torch(torch, x, op="round") - x)


class NoGradient(Program):
    """An op with no gradient for this argument at all (TF: IgammaGradA has none registered)."""

    def tensorflow(tf, x):
        return tf.raw_ops.IgammaGradA(a=tf.abs(x) + 0.5, x=tf.ones_like(x))

    def jax(jax, x):
        return jax.lax.igamma_grad_a(jax.numpy.abs(x) + 0.5, jax.numpy.ones_like(x))

    def torch(torch, x):  # torch.igamma has no derivative for its first argument
        return torch.igamma(torch.abs(x) + 0.5, torch.ones_like(x))


# path -> (g, its static arguments)
G = {
    "unconnected": (Unconnected, {}),
    "int_cast": (IntCast, {}),
    "argmax": (ArgMax, {}),
    "round": (Elementwise, {"op": "round"}),
    "sign": (Elementwise, {"op": "sign"}),
    "stop_gradient": (StopGradient, {}),
    "straight_through": (StraightThrough, {}),
    "no_gradient": (NoGradient, {}),
}


class Y(Program):
    """y = g(x) + a, g = G[path]."""

    def tensorflow(tf, x, a, *, path):
        g, static = G[path]
        return g.tensorflow(tf, x, **static) + a

    def jax(jax, x, a, *, path):
        g, static = G[path]
        return g.jax(jax, x, **static) + a

    def torch(torch, x, a, *, path):
        g, static = G[path]
        return g.torch(torch, x, **static) + a


TORCH_POLICY = {"default": {}, "NONE": {"allow_unused": True}, "ZERO": {"materialize_grads": True}}


class Grads(Program):
    """(dy/dx, dy/da) of sum(w * y) by the native API, under a policy. subject.vjp always
    takes TF's default policy, so these run with subject.run. ``jax.vjp`` has no policy:
    its one program is built with ``policy=None``."""

    def tensorflow(tf, x, a, w, *, path, policy):
        kw = {} if policy == "default" else {"unconnected_gradients": getattr(tf.UnconnectedGradients, policy)}
        if in_v1_graph():
            return tf.gradients(Y.tensorflow(tf, x, a, path=path), [x, a], grad_ys=w, **kw)
        with tf.GradientTape() as tape:
            tape.watch([x, a])
            y = Y.tensorflow(tf, x, a, path=path)
        return tape.gradient(y, [x, a], output_gradients=w, **kw)

    def jax(jax, x, a, w, *, path, policy):
        _, pullback = jax.vjp(lambda x, a: Y.jax(jax, x, a, path=path), x, a)
        return pullback(w)

    def torch(torch, x, a, w, *, path, policy):
        x, a = x.requires_grad_(True), a.requires_grad_(True)
        y = Y.torch(torch, x, a, path=path)
        return torch.autograd.grad(y, [x, a], grad_outputs=w, **TORCH_POLICY[policy])


class V1Gradients(Program):
    """tf.gradients spelled the same in every mode (a graph-only API)."""

    def tensorflow(tf, x, a, w, *, path, policy):
        ug = getattr(tf.UnconnectedGradients, policy)
        return tf.gradients(Y.tensorflow(tf, x, a, path=path), [x, a], grad_ys=w, unconnected_gradients=ug)


def gradient_kind(g, x, w) -> str:
    """``none``, ``zero`` (shape and dtype of x), ``upstream`` (== w), or what else it was."""
    if g is None:
        return "none"
    g = np.asarray(g)
    if g.shape != x.shape or g.dtype != x.dtype:
        return f"array{g.shape}:{g.dtype}"
    if not g.any():
        return "zero"
    return "upstream" if np.array_equal(g, w) else "other"


def observe_path(runner, record, program, x, a, w, *, path, policy):
    """Run one gradient program; check dy/da == w; return (kind of dy/dx, dy/dx)."""
    fn = program.of(runner)
    try:  # JAX has one program for every policy: compile and cache it once
        gx, ga = runner.run(fn, x, a, w, path=path, policy=None if runner.framework == "jax" else policy)
    except Exception as e:  # the framework's own answer (no gradient, unused input...)
        return cmp.error_name(e), None
    record.close(name=f"dy/da[{path},{policy}]", out=ga, ref=w, oracle="closed-form", tol=cmp.EXACT)
    return gradient_kind(gx, x, w), gx


# ---------------------------------------------------------------- properties
# One fixed input per policy: every policy runs in every profile, whatever is drawn.
FIXED = (
    np.array([[0.5, -1.5, 2.3], [3.0, -0.25, 7.5]], np.float32),
    np.array([[1.0, 2.0, -1.0], [0.5, 0.0, 4.0]], np.float32),
    np.array([[2.0, -1.0, 0.5], [1.5, 3.0, -2.0]], np.float32),
)


@given(xaw=sources(), policy=st.sampled_from(POLICIES))
@example(xaw=FIXED, policy="default")
@example(xaw=FIXED, policy="NONE")
@example(xaw=FIXED, policy="ZERO")
def test_unconnected_source_gradient_per_policy(subject, oracles, record, xaw, policy):
    """Per path: none/zeros/upstream for the policy as declared; dy/da == w always; under
    ZERO every framework's dy/dx agrees exactly with the oracles'."""
    x, a, w = xaw
    record.example(x=x, a=a, w=w, policy=policy)
    for path in PATHS:
        kind, gx = observe_path(subject, record, Grads, x, a, w, path=path, policy=policy)
        if kind == "upstream":
            record.close(name=f"dy/dx[{path},{policy}]", out=gx, ref=w, oracle="closed-form", tol=cmp.EXACT)
        record.check(EXPECT, **{f"{path}[{policy}]": kind})
        if policy == "ZERO":
            for o in oracles:
                _, ref = observe_path(o, record, Grads, x, a, w, path=path, policy=policy)
                record.close(name=f"dy/dx[{path},ZERO]", out=gx, ref=ref, oracle=o.id, tol=cmp.EXACT)


@on("tensorflow")
@given(xaw=sources())
def test_tf_gradients_policy_in_every_mode(subject, record, xaw):
    """tf.gradients(unconnected_gradients=NONE/ZERO) written the same in every mode: None /
    zeros (no path, an integer cut, a None-gradient op) inside tf.function and XLA too;
    eagerly the API refuses.
    TensorFlow only: it is about one TF API, tf.gradients, outside the graph mode."""
    x, a, w = xaw
    record.example(x=x, a=a, w=w)
    for policy in ("NONE", "ZERO"):
        kinds = {
            observe_path(subject, record, V1Gradients, x, a, w, path=p, policy=policy)[0]
            for p in ("unconnected", "int_cast", "round")
        }
        record.check(
            EXPECT,
            **{f"tf_gradients[{policy}]": kinds.pop() if len(kinds) == 1 else f"mixed:{','.join(sorted(kinds))}"},
        )


@given(x=st.just(np.array([0.5, 1.5, 2.0], np.float32)))
def test_op_without_gradient_raises_under_every_policy(subject, record, x):
    """An op with no gradient at all raises under every policy; ZERO does not make it zeros.
    One fixed input: the error is raised while building the backward pass, whatever x is."""
    record.example(x=x)
    ones = np.ones_like(x)
    for policy in POLICIES:
        kind, _ = observe_path(subject, record, Grads, x, ones, ones, path="no_gradient", policy=policy)
        record.check(EXPECT, **{f"no_gradient[{policy}]": kind})


# ---------------------------------------------------------------- seed examples
@on("tensorflow", modes=("graph",))
@given(x=st.just(np.array([0.3, 1.5, -2.5, 2.0], np.float32)))
def test_seed_ops_without_gradient_v1_session(subject, record, x):
    """seeds/002 as written (placeholder, tf.gradients, Session): "ops without a gradient
    generally return 0". tf.gradients(round(x), x) is [None] (sess.run of that fetch raises
    TypeError "Cannot be None"; the harness drops None fetches), as for argmax and the int
    cast; only tf.sign returns [0, 0, 0, 0]; with ZERO every one gives zeros."""
    record.example(x=x)
    ones = np.ones_like(x)
    for path in ("round", "argmax", "int_cast", "sign"):
        for policy in ("default", "ZERO"):
            kind, gx = observe_path(subject, record, Grads, x, ones, ones, path=path, policy=policy)
            if kind == "zero":
                record.equal(name=f"dy/dx[{path},{policy}]", out=gx, ref=np.zeros(4, np.float32), oracle="closed-form")
            record.check(EXPECT, **{f"{path}[{policy}]": kind})
