"""Tape mechanics: unwatched sources, a second gradient, stop_recording, nested tapes, tapes around functions.

How ``tf.GradientTape`` decides what it records, run in every TensorFlow mode that has a tape (eager;
inside a ``tf.function``; under ``jit_compile=True``; and in a v1 graph, where ``GradientTape`` also
works: it records into the graph and ``gradient`` builds the gradient ops, measured), each value held
to a float64 closed form:

- **Unwatched sources.** The gradient of ``sum(w * s * s) + sum(a * a)`` (a watched) with respect to a
  tensor made before the tape and never watched, and to one derived inside the tape from it: ``None``;
  with ``unconnected_gradients=ZERO``: zeros; watched: ``2 w s``. PyTorch's analogue is a tensor
  without ``requires_grad``; JAX has no tape (every argument of a differentiated function is a
  source), so it has no row here.
- **A second gradient.** ``gradient()`` twice on a non-persistent tape raises RuntimeError (eagerly and
  while tracing); ``persistent=True`` gives the same gradient twice (``w cos x``). PyTorch:
  ``autograd.grad`` twice without ``retain_graph`` raises; JAX's pullback is a pure function.
- **stop_recording.** Ops run inside ``tape.stop_recording()`` are not recorded: the gradient of
  ``sum(w * x^2 * sin(x))`` with ``sin(x)`` computed there is ``2 w x sin(x)``, the recorded part only.
  PyTorch ``torch.no_grad()`` and JAX ``lax.stop_gradient`` are the analogues.
- **Nested tapes.** An outer tape sees the inner tape's gradient computation when it runs inside the
  outer context: the gradient of ``sum(c * d/dx sum(w x^3))`` is ``6 w c x``; run after the outer
  context closes, the outer gradient is ``None``. PyTorch's analogue is ``create_graph``; JAX's is a
  ``vjp`` of a ``vjp`` (inside only). ``watch_accessed_variables=False``: a variable read and not
  watched gets ``None``; watched, ``2 w v``. TensorFlow only (variables).
- **A tape around a tf.function call.** An outer tape around a call of a ``tf.function`` (plain and
  ``jit_compile=True``): the gradient flows through the function, ``w cos x``. TensorFlow only.

Declared surprises:

- PyTorch: a source without ``requires_grad`` raises ('One of the differentiated Tensors does not require
  grad') under every policy (``allow_unused``, ``materialize_grads``); TensorFlow gives None or zeros.
- JAX: the pullback of ``jax.vjp`` can be called any number of times; there is nothing to release.
- PyTorch: without ``create_graph`` the first gradient is not differentiable, and the second
  ``autograd.grad`` raises; TensorFlow's outer tape gives None.

The topics that belonged to other behaviours moved out (issue 48: a case module with one job), their
tests, draws and keys unchanged: the global seed, ``tf.random.Generator`` and recompute_grad over dropout to
rng-under-tracing; recompute_grad over variables to custom-gradient-calling-conventions; batch_jacobian of
coupled rows to summed-gradients-vs-jacobian; second order through max_pool and fused batch norm to
second-order-gradients. The 3rd to 5th derivatives of pow at 0 became the point 0 of singular-point-gradients'
op-table entries x**3, x**4 and x**2.5, held by its generic property (keys ``grad3[x**3@0]`` ... ``grad5[...]``).

Sources: https://github.com/tensorflow/tensorflow/issues/29942,
https://github.com/tensorflow/tensorflow/issues/47785, https://github.com/tensorflow/tensorflow/issues/51473
"""

import functools

import numpy as np
from hypothesis import given

from suite import compare as cmp, strategies as ss
from suite.behaviours import Floor, behaviour, on
from suite.expectations import expect, expectations, raises
from suite.frameworks.tf_runner import Variables
from suite.program import Program

TORCH_GRAD = "https://docs.pytorch.org/docs/stable/generated/torch.autograd.grad.html"
JAX_VJP = "https://docs.jax.dev/en/latest/_autosummary/jax.vjp.html"

BEHAVIOUR = behaviour(
    "tape-mechanics",
    sources=[],
    links=[
        "https://github.com/tensorflow/tensorflow/issues/29942",
        "https://github.com/tensorflow/tensorflow/issues/47785",
        "https://github.com/tensorflow/tensorflow/issues/51473",
        TORCH_GRAD,
        JAX_VJP,
    ],
    floor=Floor(
        "element",
        "Per element, relative to |ref_i|: the gradients of sums of elementwise products (2 a, 2 w s, w cos x, "
        "2 w x sin x, 3 w x^2, 6 w c x, 2 w v): each element is a product of its own inputs; no comparison mixes "
        "elements.",
    ),
)

UNWATCHED = {"tensorflow": ("before-tape", "derived"), "torch": ("before-tape",)}
POLICIES = ("none", "zero")
NESTED = {"tensorflow": ("inside", "outside"), "jax": ("inside",), "torch": ("inside", "outside")}
VARIABLE_WATCH = ("default", "unwatched", "explicit-watch")
INNER = ("plain", "xla")
#: the error of a second gradient on a released tape: TensorFlow's and PyTorch's messages
SECOND_CALL = (
    r"A non-persistent GradientTape can only be used to compute one set of gradients"
    r"|Trying to backward through the graph a second time"
)

EXPECT = expectations(
    {
        **{f"unwatched[{s}|{p}]": "none" if p == "none" else "zero" for s in UNWATCHED["tensorflow"] for p in POLICIES},
        "second-gradient[non-persistent]": raises("RuntimeError", SECOND_CALL),
        "second-gradient[persistent]": "same",
        "stop-recording": "recorded-part",
        "nested[inside]": "second-derivative",
        "nested[outside]": "none",
        "accessed-variable[default]": "closed-form",
        "accessed-variable[unwatched]": "none",
        "accessed-variable[explicit-watch]": "closed-form",
        **{f"through-function[{k}]": "closed-form" for k in INNER},
    },
    *[
        expect(
            f"unwatched[before-tape|{p}]",
            raises("RuntimeError", r"One of the differentiated Tensors does not require grad"),
            framework="torch",
            link=TORCH_GRAD,
            reason="torch.autograd.grad refuses an input without requires_grad ('One of the differentiated "
            "Tensors does not require grad') whatever allow_unused/materialize_grads say; TensorFlow's tape "
            "gives None (or zeros under unconnected_gradients=ZERO) for a tensor it never watched",
        )
        for p in POLICIES
    ],
    expect(
        "second-gradient[non-persistent]",
        "same",
        framework="jax",
        link=JAX_VJP,
        reason="jax.vjp returns its pullback as a pure function of the cotangent: nothing is released after a "
        "call, so a second call gives the same gradient; TensorFlow's non-persistent tape (and PyTorch "
        "without retain_graph) raises RuntimeError",
    ),
    expect(
        "nested[outside]",
        raises("RuntimeError", r"element 0 of tensors does not require grad and does not have a grad_fn"),
        framework="torch",
        link=TORCH_GRAD,
        reason="without create_graph=True the first autograd.grad returns a gradient with no grad_fn, and "
        "differentiating it again raises; TensorFlow's outer tape, which did not record the inner "
        "gradient, returns None",
    ),
)


# ---------------------------------------------------------------- strategies
SHAPES = ((3,), (2, 3))
DTYPES = (np.float32, np.float64)
triples = functools.partial(ss.weighted_triples, dtypes=DTYPES, shapes=SHAPES)
_own = cmp.own


def _f64(*xs):
    return [np.asarray(x, np.float64) for x in xs]


# ---------------------------------------------------------------- the programs
class Unwatched(Program):
    """(d/ds, d/da) of ``sum(w * s * s) + sum(a * a)`` with a watched and s: ``before-tape`` (x as given),
    ``derived`` (``s = 1 * x`` made inside the tape from the unwatched x) or ``watched``."""

    def tensorflow(tf, x, w, a, *, source, policy):
        policy = tf.UnconnectedGradients.ZERO if policy == "zero" else tf.UnconnectedGradients.NONE
        with tf.GradientTape() as tape:
            tape.watch(a)
            s = x * tf.ones_like(x) if source == "derived" else x
            if source == "watched":
                tape.watch(s)
            y = tf.reduce_sum(w * s * s) + tf.reduce_sum(a * a)
        return tuple(tape.gradient(y, [s, a], unconnected_gradients=policy))

    def torch(torch, x, w, a, *, source, policy):
        a = a.requires_grad_(True)
        if source == "watched":
            x = x.requires_grad_(True)
        y = (w * x * x).sum() + (a * a).sum()
        kw = {"materialize_grads": True} if policy == "zero" else {"allow_unused": True}
        return tuple(torch.autograd.grad(y, [x, a], **kw))


class SecondGradient(Program):
    """Two gradients of ``sum(w * sin(x))`` from one recording; ``persistent``: TensorFlow's tape flag,
    PyTorch's retain_graph on the first call."""

    def tensorflow(tf, x, w, *, persistent):
        with tf.GradientTape(persistent=persistent) as tape:
            tape.watch(x)
            y = tf.reduce_sum(w * tf.sin(x))
        g1 = tape.gradient(y, x)
        return g1, tape.gradient(y, x)

    def jax(jax, x, w, *, persistent):
        _, pull = jax.vjp(lambda x: jax.numpy.sum(w * jax.numpy.sin(x)), x)
        one = jax.numpy.ones((), x.dtype)
        return pull(one)[0], pull(one)[0]

    def torch(torch, x, w, *, persistent):
        x = x.requires_grad_(True)
        y = (w * torch.sin(x)).sum()
        (g1,) = torch.autograd.grad(y, x, retain_graph=persistent)
        (g2,) = torch.autograd.grad(y, x)
        return g1, g2


class StopRecording(Program):
    """The gradient of ``sum(w * x^2 * sin(x))`` with ``sin(x)`` computed where the tape does not record."""

    def tensorflow(tf, x, w):
        with tf.GradientTape() as tape:
            tape.watch(x)
            a = x * x
            with tape.stop_recording():
                b = tf.sin(x)
            y = tf.reduce_sum(w * a * b)
        return tape.gradient(y, x)

    def jax(jax, x, w):
        f = lambda x: jax.numpy.sum(w * x * x * jax.lax.stop_gradient(jax.numpy.sin(x)))  # noqa: E731
        return jax.grad(f)(x)

    def torch(torch, x, w):
        x = x.requires_grad_(True)
        a = x * x
        with torch.no_grad():
            b = torch.sin(x)
        return torch.autograd.grad((w * a * b).sum(), x)[0]


class Nested(Program):
    """(g, h): g = d/dx sum(w x^3) by an inner tape, h = d/dx sum(c * g) by an outer one; ``where``: the
    inner gradient is taken inside the outer tape's context or after it closes."""

    def tensorflow(tf, x, w, c, *, where):
        with tf.GradientTape() as outer:
            outer.watch(x)
            with tf.GradientTape() as inner:
                inner.watch(x)
                y = tf.reduce_sum(w * x * x * x)
            if where == "inside":
                g = inner.gradient(y, x)
                z = tf.reduce_sum(c * g)
        if where == "outside":
            g = inner.gradient(y, x)
            z = tf.reduce_sum(c * g)
        return g, outer.gradient(z, x)

    def jax(jax, x, w, c, *, where):
        grad = jax.grad(lambda x: jax.numpy.sum(w * x * x * x))
        g, pull = jax.vjp(grad, x)
        return g, pull(c)[0]

    def torch(torch, x, w, c, *, where):
        x = x.requires_grad_(True)
        y = (w * x * x * x).sum()
        (g,) = torch.autograd.grad(y, x, create_graph=where == "inside")
        (h,) = torch.autograd.grad((c * g).sum(), x)
        return g, h


VARIABLES = Variables()


def _tf_variable(tf, x, key):
    """A float variable holding ``x``: in a v1 graph a new one; elsewhere one per ``key`` (dtype, shape,
    static: a trace hides the shape), made outside any trace on its first call."""
    return VARIABLES.get(tf, x, name="x", shape=key[1], use_resource=True, validate_shape=True)


class VariableWatch(Program):
    """The gradient of ``sum(w * v * v)`` for a variable v read inside the tape; ``watch``: the tape's
    default, ``watch_accessed_variables=False``, or that and ``tape.watch(v)``."""

    def tensorflow(tf, x, w, *, watch, key):
        v = _tf_variable(tf, x, key)
        with tf.GradientTape(watch_accessed_variables=watch == "default") as tape:
            if watch == "explicit-watch":
                tape.watch(v)
            y = tf.reduce_sum(w * v * v)
        return tape.gradient(y, v)


_INNER: dict = {}


def _inner_function(tf, kind):
    """``sum(w * sin(x))`` as a tf.function (``xla``: jit_compile=True), one per kind, made once."""
    if kind not in _INNER:
        _INNER[kind] = tf.function(lambda x, w: tf.reduce_sum(w * tf.sin(x)), jit_compile=kind == "xla")
    return _INNER[kind]


class ThroughFunction(Program):
    """The gradient of a tf.function's output by a tape around its call."""

    def tensorflow(tf, x, w, *, inner):
        f = _inner_function(tf, inner)
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = f(x, w)
        return tape.gradient(y, x)


# ---------------------------------------------------------------- classifiers
# ---------------------------------------------------------------- properties
@on("tensorflow", "torch")  # JAX has no tape: every argument of a differentiated function is a source
@given(t=triples())
def test_unwatched_source_gets_none_or_zeros(subject, record, t):
    """A tensor the tape never watched (made before it, or derived inside it from an unwatched one):
    None, zeros under unconnected_gradients=ZERO; the watched control gets 2 w x; a (watched) 2 a."""
    x, w, a = t
    record.example(x=x, w=w, a=a)
    x64, w64, a64 = _f64(x, w, a)
    for source in UNWATCHED[subject.framework]:
        for policy in POLICIES:
            out, err = subject.attempt("run", Unwatched.of(subject), x, w, a, source=source, policy=policy)
            key = f"unwatched[{source}|{policy}]"
            if err is not None:
                record.check(EXPECT, **{key: err})
                continue
            gs, ga = out
            record.check(EXPECT, **{key: cmp.gradient_kind(gs)})
            if gs is not None:
                record.equal(name=f"{key} dtype, shape", out=np.asarray(gs), ref=np.zeros_like(x), oracle="closed-form")
            record.close(name=f"{key} d/da", out=ga, ref=(2 * a64).astype(x.dtype), oracle="closed-form",
                         scale=_own(2 * a64))  # fmt: skip
    gs, ga = subject.run(Unwatched.of(subject), x, w, a, source="watched", policy="none")
    record.close(name="watched d/ds", out=gs, ref=(2 * w64 * x64).astype(x.dtype), oracle="closed-form",
                 scale=_own(2 * w64 * x64))  # fmt: skip


@given(t=triples())
def test_second_gradient_needs_a_persistent_tape(subject, record, t):
    """gradient() twice: RuntimeError on a non-persistent tape (PyTorch without retain_graph); the same
    gradient, w cos x, twice on a persistent one."""
    x, w, _ = t
    record.example(x=x, w=w)
    ref64 = np.asarray(w, np.float64) * np.cos(np.asarray(x, np.float64))
    ref = ref64.astype(x.dtype)
    for persistent in (False, True):
        key = f"second-gradient[{'persistent' if persistent else 'non-persistent'}]"
        out, err = subject.attempt("run", SecondGradient.of(subject), x, w, persistent=persistent)
        if err is not None:
            record.check(EXPECT, **{key: err})
            continue
        g1, g2 = out
        record.check(EXPECT, **{key: "same" if np.array_equal(g1, g2) else "different"})
        record.close(name=f"{key} first", out=g1, ref=ref, oracle="closed-form", scale=_own(ref64))
        record.close(name=f"{key} second", out=g2, ref=ref, oracle="closed-form", scale=_own(ref64))


@given(t=triples())
def test_stop_recording_drops_what_it_computes(subject, record, t):
    """sin(x) computed under stop_recording (no_grad, stop_gradient) is a constant: the gradient of
    sum(w x^2 sin x) is 2 w x sin x, not the full 2 w x sin x + w x^2 cos x."""
    x, w, _ = t
    record.example(x=x, w=w)
    x64, w64 = _f64(x, w)
    recorded = 2 * w64 * x64 * np.sin(x64)
    full = recorded + w64 * x64 * x64 * np.cos(x64)
    g = subject.run(StopRecording.of(subject), x, w)
    record.check(EXPECT, **{"stop-recording": cmp.which(g, {"recorded-part": recorded, "full": full})})
    # 0.25 <= |x| <= 2: sin(x) is away from its zero, the gradient a product (no cancellation)
    record.close(name="d/dx", out=g, ref=recorded.astype(x.dtype), oracle="closed-form", scale=_own(recorded))


@given(t=triples())
def test_nested_tapes_give_the_second_derivative(subject, record, t):
    """The outer tape differentiates the inner tape's gradient 3 w x^2 when it is taken inside the outer
    context: 6 w c x; taken after the outer context closes: None (PyTorch: no create_graph)."""
    x, w, c = t
    record.example(x=x, w=w, c=c)
    x64, w64, c64 = _f64(x, w, c)
    first, second = 3 * w64 * x64 * x64, 6 * w64 * c64 * x64
    for where in NESTED[subject.framework]:
        key = f"nested[{where}]"
        out, err = subject.attempt("run", Nested.of(subject), x, w, c, where=where)
        if err is not None:
            record.check(EXPECT, **{key: err})
            continue
        g, h = out
        record.check(EXPECT, **{key: cmp.which(h, {"second-derivative": second})})
        record.close(name=f"{key} first derivative", out=g, ref=first.astype(x.dtype), oracle="closed-form",
                     scale=_own(first))  # fmt: skip
        if h is not None:
            record.close(name=f"{key} second derivative", out=h, ref=second.astype(x.dtype), oracle="closed-form",
                         scale=_own(second))  # fmt: skip


@on("tensorflow")  # variables, and the tape's watch_accessed_variables
@given(t=triples())
def test_unwatched_variable_gets_none(subject, record, t):
    """A variable read inside a tape with watch_accessed_variables=False: None; watched (by default or
    by tape.watch): 2 w v."""
    x, w, _ = t
    record.example(x=x, w=w)
    ref = 2 * np.asarray(w, np.float64) * np.asarray(x, np.float64)
    for watch in VARIABLE_WATCH:
        g = subject.run(VariableWatch.of(subject), x, w, watch=watch, key=(x.dtype.name, x.shape))
        record.check(EXPECT, **{f"accessed-variable[{watch}]": cmp.which(g, {"closed-form": ref})})
        if g is not None:
            record.close(name=f"{watch} d/dv", out=g, ref=ref.astype(x.dtype), oracle="closed-form", scale=_own(ref))


@on("tensorflow")  # tf.function
@given(t=triples())
def test_tape_sees_through_a_function_call(subject, record, t):
    """A tape around a call of a tf.function (and of a jit_compile=True one): the gradient w cos x flows
    through the call."""
    x, w, _ = t
    record.example(x=x, w=w)
    ref = np.asarray(w, np.float64) * np.cos(np.asarray(x, np.float64))
    for inner in INNER:
        g = subject.run(ThroughFunction.of(subject), x, w, inner=inner)
        record.check(EXPECT, **{f"through-function[{inner}]": cmp.which(g, {"closed-form": ref})})
        record.close(name=f"{inner} d/dx", out=g, ref=ref.astype(x.dtype), oracle="closed-form", scale=_own(ref))
