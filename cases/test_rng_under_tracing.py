"""RNG under tracing: the global seed at trace time, tf.random.Generator state, recompute_grad over dropout.

Where a random op's state lives decides what a traced or recomputed program draws, in every TensorFlow mode
that has it (eager; inside a ``tf.function``; under ``jit_compile=True``; in a v1 graph), each draw held to
its own closed form (in [0, 1), x's shape and dtype; a dropout's value and gradient against the mask it
shows):

- **A global seed and a tf.function.** ``tf.random.set_seed(s)`` then a ``tf.function`` holding
  ``tf.random.uniform``: the op's seed is fixed when the function is traced, and its kernel's state
  advances, so two calls of the traced function give different values; setting the same seed and
  tracing a new function reproduces both calls; eagerly, resetting the seed reproduces the draw. Run
  from the eager row only (the program traces its own functions; the global seed is restored to None
  after it). JAX's keys are explicit and PyTorch has no tracing here: TensorFlow only.
- **tf.random.Generator.** A philox generator at state ``[s, 0, 0]`` (what ``from_seed(s)`` makes, checked
  eagerly): its two draws differ, a generator re-created (reset) at the same state reproduces both, within
  one call of a traced function and without retracing (the state is a variable, not a trace-time constant
  as the global seed is); later calls of a traced function draw anew (eager, function, XLA; a v1 graph
  re-initialises its variables each call). PyTorch's ``torch.Generator().manual_seed(s)`` alike.
- **recompute_grad over dropout.** The gradient of ``sum(w * recompute(dropout)(x))`` is ``w * m / (1 - rate)``
  for the forward's mask m (read off the value): ``same-mask``, or ``new-mask`` where the recomputation draws
  again (then the gradient is that form for another 0/1 mask). ``tf.nn.dropout`` and a stateless dropout;
  ``jax.checkpoint`` with an explicit key; ``torch.utils.checkpoint`` with and without ``preserve_rng_state``.
  Under XLA the answer for ``tf.nn.dropout`` depends on the process (below): the ``nn.dropout`` row runs
  after a warm-up compilation of a random op, and ``nn.dropout|first-xla-compile`` is measured in a peer
  process whose first XLA compilation is the program.

Declared surprises:

- TensorFlow: recompute_grad over ``tf.nn.dropout`` draws a new mask in the recomputation (every mode): the
  gradient belongs to a mask the forward never used; PyTorch too with ``preserve_rng_state=False``. On
  TF 2.18 and 2.19 the first XLA compilation of a process that holds a random op is the exception: there
  the recomputation reproduces the forward's mask (measured in a fresh process; 2.12-2.17, 2.20, 2.21
  and the 2.23 nightly draw anew), so in one process the row depended on what had run before it.

Moved from tape-mechanics (issue 48: a case module with one job); the tests, their draws and their keys
are unchanged. Sources: https://github.com/tensorflow/tensorflow/issues/33297,
https://github.com/tensorflow/tensorflow/blob/master/tensorflow/python/ops/custom_gradient.py,
https://github.com/tensorflow/tensorflow/blob/master/tensorflow/compiler/tf2xla/kernels/random_ops.cc,
https://docs.pytorch.org/docs/stable/checkpoint.html
"""

import functools
import os

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from suite import compare as cmp, frameworks, peers, strategies as ss
from suite.behaviours import Floor, behaviour, on
from suite.expectations import expect, expectations
from suite.frameworks.tf_runner import Variables, in_v1_graph
from suite.program import Program

TF_RECOMPUTE_GRAD = "https://github.com/tensorflow/tensorflow/blob/master/tensorflow/python/ops/custom_gradient.py"
TF_XLA_RANDOM = "https://github.com/tensorflow/tensorflow/blob/master/tensorflow/compiler/tf2xla/kernels/random_ops.cc"
TORCH_CHECKPOINT = "https://docs.pytorch.org/docs/stable/checkpoint.html"

BEHAVIOUR = behaviour(
    "rng-under-tracing",
    sources=[],
    links=[
        "https://github.com/tensorflow/tensorflow/issues/33297",
        "https://www.tensorflow.org/api_docs/python/tf/random/set_seed",
        "https://www.tensorflow.org/api_docs/python/tf/random/Generator",
        TF_RECOMPUTE_GRAD,
        TF_XLA_RANDOM,
        TORCH_CHECKPOINT,
    ],
    floor=Floor(
        "element",
        "Per element, relative to |ref_i|: a dropout's value x m / (1 - rate) and gradient w m / (1 - rate) are "
        "products of the element's own inputs and its mask; the draws are compared exactly (equal or not, and "
        "inside [0, 1)).",
    ),
)

SHAPES = ((3,), (2, 3))
DTYPES = (np.float32, np.float64)
SEEDED = ("function-two-calls", "function-retraced", "eager-reset")
RECOMPUTE_DROPOUT = {
    "tensorflow": ("nn.dropout", "stateless"),
    "jax": ("key",),
    "torch": ("preserve-rng", "no-preserve-rng"),
}

EXPECT = expectations(
    {
        "seeded[function-two-calls]": "different",
        "seeded[function-retraced]": "reproduces",
        "seeded[eager-reset]": "reproduces",
        "generator[two-draws]": "different",
        "generator[re-created]": "reproduces",
        "generator[from-seed]": "reproduces",
        "generator[next-calls]": "advances",
        **{f"recompute-dropout[{h}]": "same-mask" for hows in RECOMPUTE_DROPOUT.values() for h in hows},
        "recompute-dropout[nn.dropout|first-xla-compile]": "same-mask",
    },
    expect(
        "recompute-dropout[nn.dropout]",
        "new-mask",
        framework="tensorflow",
        link=TF_RECOMPUTE_GRAD,
        reason="tf.recompute_grad reruns the function under a tape in the backward pass without saving or restoring "
        "any random state (custom_gradient.py), so a stateful tf.nn.dropout draws a second mask: the gradient is "
        "w * m' / (1 - rate) for a mask m' the forward never used; a stateless dropout (its seed an input) "
        "reproduces the mask, as jax.checkpoint with its explicit key and torch.utils.checkpoint do",
    ),
    *[
        expect(
            "recompute-dropout[nn.dropout|first-xla-compile]",
            "new-mask",
            framework="tensorflow",
            versions=versions,
            link=TF_XLA_RANDOM,
            reason="as in any later compilation, the recomputed stateful dropout draws a second mask; only on "
            "TF 2.18 and 2.19 does a process's first XLA compilation holding a random op reproduce the "
            "forward's mask (tf2xla lowers an unseeded RandomUniform to XLA's RNG, seeded per compilation; "
            "measured per release in a fresh process)",
        )
        for versions in ("<2.18", ">=2.20")
    ],
    expect(
        "recompute-dropout[no-preserve-rng]",
        "new-mask",
        framework="torch",
        link=TORCH_CHECKPOINT,
        reason="torch.utils.checkpoint stashes and restores the RNG state only with preserve_rng_state=True (the "
        "default); with False the recomputed dropout draws a new mask",
    ),
)


# ---------------------------------------------------------------- strategies
triples = functools.partial(ss.weighted_triples, dtypes=DTYPES, shapes=SHAPES)
_own = cmp.own

# ---------------------------------------------------------------- the global seed
VARIABLES = Variables()


class SeededDraws(Program):
    """Draws of ``tf.random.uniform`` in x's shape and dtype after ``tf.random.set_seed(seed)``: two calls
    of one tf.function, two calls of a function traced after setting the seed again, and two eager
    draws each after setting it. The global seed is set back to None."""

    def tensorflow(tf, x, *, seed):
        draw = lambda: tf.random.uniform(tf.shape(x), dtype=x.dtype)  # noqa: E731
        try:
            tf.random.set_seed(seed)
            f = tf.function(draw)
            a, b = f(), f()
            tf.random.set_seed(seed)
            g = tf.function(draw)
            c, d = g(), g()
            tf.random.set_seed(seed)
            e1 = draw()
            tf.random.set_seed(seed)
            e2 = draw()
        finally:
            tf.random.set_seed(None)
        return a, b, c, d, e1, e2


@on("tensorflow", modes=("eager",))  # the program traces its own tf.functions; tf.random.set_seed
@given(t=triples(), seed=st.integers(0, 2**31 - 1))
def test_global_seed_is_read_when_a_function_is_traced(subject, record, t, seed):
    """After tf.random.set_seed, a traced random op draws anew on every call; setting the seed again and
    tracing again reproduces the sequence; eagerly, setting it again reproduces the draw. Every draw
    lies in [0, 1) with x's shape and dtype."""
    x = t[0]
    record.example(x=x, seed=seed)
    a, b, c, d, e1, e2 = subject.run(SeededDraws.of(subject), x, seed=seed)
    for name, v in zip("abcd", (a, b, c, d)):
        v = np.asarray(v)
        record.equal(name=f"draw {name} shape, dtype", out=np.zeros_like(v), ref=np.zeros_like(x), oracle="closed-form")
        record.equal(
            name=f"draw {name} in [0, 1)", out=bool(np.all((v >= 0) & (v < 1))), ref=True, oracle="closed-form"
        )
    same = lambda p, q: "reproduces" if np.array_equal(p, q) else "differs"  # noqa: E731
    record.check(
        EXPECT,
        **{
            "seeded[function-two-calls]": "same" if np.array_equal(a, b) else "different",
            "seeded[function-retraced]": same(a, c) if np.array_equal(b, d) else "differs",
            "seeded[eager-reset]": same(e1, e2),
        },
    )


# ---------------------------------------------------------------- tf.random.Generator
def _generator(tf, state, key):
    """A philox ``tf.random.Generator`` at ``state`` (what ``from_seed(s)`` makes is ``[s, 0, 0]``): in a v1
    graph a new one made from the fed state (the runner initialises it before each call); elsewhere one per
    ``key`` (dtype, shape), made outside any trace on its first use, then ``reset(state)``."""
    if in_v1_graph():
        return tf.random.Generator.from_state(state, "philox")
    gen = _kept_generator(tf, key)
    gen.reset(state)
    return gen


def _kept_generator(tf, key):
    """The generator kept for ``key`` (made from seed 0 on the first call, outside any trace)."""
    return VARIABLES.once(tf, ("generator", *key), lambda: tf.random.Generator.from_seed(0, alg="philox"))


class GeneratorDraws(Program):
    """(a, b, c, d): two uniform draws in x's shape and dtype from a generator at ``state``, then two from
    one re-created at the same state (PyTorch: ``torch.Generator().manual_seed(state[0])``)."""

    def tensorflow(tf, x, state, *, key):
        out = []
        for _ in range(2):
            gen = _generator(tf, state, key)
            with tf.control_dependencies(out[-1:]):  # a v1 graph orders stateful ops only by dependencies
                a = gen.uniform(tf.shape(x), dtype=x.dtype)
            with tf.control_dependencies([a]):
                b = gen.uniform(tf.shape(x), dtype=x.dtype)
            out += [a, b]
        return tuple(out)

    def torch(torch, x, state, *, key):
        out = []
        for _ in range(2):
            gen = torch.Generator().manual_seed(int(state[0]))
            out += [torch.rand(x.shape, generator=gen, dtype=x.dtype) for _ in range(2)]
        return tuple(out)


class GeneratorNext(Program):
    """One more draw from the generator :class:`GeneratorDraws` left for ``key`` (not reset)."""

    def tensorflow(tf, x, *, key):
        return _kept_generator(tf, key).uniform(tf.shape(x), dtype=x.dtype)


class GeneratorFromSeed(Program):
    """Two draws of ``tf.random.Generator.from_seed(seed)`` (eagerly: a static seed would retrace)."""

    def tensorflow(tf, x, *, seed):
        gen = tf.random.Generator.from_seed(seed, alg="philox")
        return gen.uniform(tf.shape(x), dtype=x.dtype), gen.uniform(tf.shape(x), dtype=x.dtype)


GENERATOR_NEXT_MODES = ("eager", "function", "xla")  # a v1 graph re-initialises its variables on every call


@on("tensorflow", "torch")  # JAX's keys are explicit: a draw is a pure function of its key
@given(t=triples(), seed=st.integers(0, 2**31 - 1))
def test_generator_state_advances_per_call(subject, record, t, seed):
    """A generator's two draws differ; one re-created at the same seed reproduces both (within one call of a
    traced function: no retracing, unlike the global seed); its state lives in a variable, so each later call
    of a traced function draws anew."""
    x = t[0]
    record.example(x=x, seed=seed)
    key = (x.dtype.name, x.shape)
    state = np.array([seed, 0, 0], np.int64)
    a, b, c, d = subject.run(GeneratorDraws.of(subject), x, state, key=key)
    for name, v in zip("abcd", (a, b, c, d)):
        v = np.asarray(v)
        record.equal(name=f"draw {name} shape, dtype", out=np.zeros_like(v), ref=np.zeros_like(x), oracle="closed-form")
        inside = bool(np.all((v >= 0) & (v < 1)))
        record.equal(name=f"draw {name} in [0, 1)", out=inside, ref=True, oracle="closed-form")
    obs = {
        "generator[two-draws]": "same" if np.array_equal(a, b) else "different",
        "generator[re-created]": "reproduces" if np.array_equal(a, c) and np.array_equal(b, d) else "differs",
    }
    if subject.framework == "tensorflow" and subject.mode == "eager":
        e1, e2 = subject.run(GeneratorFromSeed.of(subject), x, seed=seed)
        obs["generator[from-seed]"] = "reproduces" if np.array_equal(a, e1) and np.array_equal(b, e2) else "differs"
    if subject.framework == "tensorflow" and subject.mode in GENERATOR_NEXT_MODES:
        n1 = subject.run(GeneratorNext.of(subject), x, key=key)
        n2 = subject.run(GeneratorNext.of(subject), x, key=key)
        seen = [np.asarray(v) for v in (c, d, n1)]
        fresh = not any(np.array_equal(n2, v) for v in seen) and not any(np.array_equal(n1, v) for v in seen[:2])
        obs["generator[next-calls]"] = "advances" if fresh else "repeats"
    record.check(EXPECT, **obs)


# ---------------------------------------------------------------- recompute_grad
RATE = 0.5


class RecomputeDropout(Program):
    """dropout(x) (rate :data:`RATE`) under recompute_grad / jax.checkpoint / torch.utils.checkpoint:
    ``nn.dropout`` (stateful, as Keras' layer draws), ``stateless`` (its mask a function of ``seed``);
    JAX's mask from ``PRNGKey(seed[0])``; PyTorch's global generator seeded with ``seed[0]``, with or
    without ``preserve_rng_state``."""

    def tensorflow(tf, x, seed, *, how):
        if how == "stateless":
            drop = lambda x: tf.nn.experimental.stateless_dropout(x, RATE, seed=seed)  # noqa: E731
        else:
            drop = lambda x: tf.nn.dropout(x, rate=RATE)  # noqa: E731
        return tf.recompute_grad(drop)(x)

    def jax(jax, x, seed, *, how):
        key = jax.random.PRNGKey(seed[0])
        keep = lambda x: jax.random.bernoulli(key, 1 - RATE, x.shape)  # noqa: E731
        return jax.checkpoint(lambda x: jax.numpy.where(keep(x), x / (1 - RATE), 0))(x)

    def torch(torch, x, seed, *, how):
        from torch.utils.checkpoint import checkpoint

        with torch.random.fork_rng():
            torch.manual_seed(int(seed[0]))
            drop = lambda x: torch.nn.functional.dropout(x, RATE, training=True)  # noqa: E731
            return checkpoint(drop, x, use_reentrant=False, preserve_rng_state=how == "preserve-rng")


DROPOUT_SHAPE = (4, 8)  # 32 elements: two independent masks at rate 1/2 coincide with probability 2^-32


def _mask_kind(g, mask, w) -> str:
    """``same-mask`` where ``g`` is ``w * mask / (1 - RATE)`` (the forward's mask), ``new-mask`` where it is
    that for another 0/1 mask, else ``other``."""
    scaled = np.asarray(w, np.float64) / (1 - RATE)
    if cmp.near(g, scaled * mask):
        return "same-mask"
    return "new-mask" if cmp.near(g, scaled * (np.asarray(g) != 0)) else "other"


@given(
    d=ss.float_dtypes(dtypes=DTYPES),
    data=st.data(),
    seed=st.integers(0, 2**31 - 1),
)
def test_recompute_grad_dropout_mask(subject, record, d, data, seed):
    """The gradient of sum(w * recompute(dropout)(x)) is w * m / (1 - rate) for the mask m the forward used
    (read off its value), or, where the recomputation draws again, for another mask."""
    x = data.draw(ss.float_arrays(dtype=d, shape=DROPOUT_SHAPE, min_value=0.25, max_value=2.0), label="x")
    w = data.draw(ss.float_arrays(dtype=d, shape=DROPOUT_SHAPE, min_value=0.5, max_value=2.0), label="w")
    record.example(x=x, w=w, seed=seed)
    if subject.framework == "tensorflow" and subject.mode == "xla":
        _compile_a_random_op_first()
    seeds = np.array([seed, 0], np.int64)
    for how in RECOMPUTE_DROPOUT[subject.framework]:
        key = f"recompute-dropout[{how}]"
        res, err = subject.attempt("vjp", RecomputeDropout.of(subject), x, seeds, cotangent=w, how=how)
        if err is not None:
            record.check(EXPECT, **{key: err})
            continue
        out, (g, _) = res
        _judge_mask(record, key, out, g, x, w)


def _judge_mask(record, key, out, g, x, w):
    """The value against x * m / (1 - rate) for the mask m it shows, which mask the gradient belongs to,
    and the gradient against the closed form for that mask (the forward's where same-mask)."""
    mask = np.asarray(out) != 0
    ref = np.asarray(x, np.float64) * mask / (1 - RATE)
    record.close(name=f"{key} value", out=out, ref=ref.astype(x.dtype), oracle="closed-form", scale=_own(ref))
    kind = _mask_kind(g, mask, w)
    record.check(EXPECT, **{key: kind})
    used = mask if kind == "same-mask" else np.asarray(g) != 0
    ref = np.asarray(w, np.float64) * used / (1 - RATE)
    record.close(name=f"{key} d/dx", out=g, ref=ref.astype(x.dtype), oracle="closed-form", scale=_own(ref))


@functools.cache
def _compile_a_random_op_first():
    """Compile one random op under XLA in this process (once): on TF 2.18/2.19 the first such compilation
    reproduces a recomputed stateful dropout's mask and later ones do not, so without this the xla row
    would say what ran before it (that first compilation is measured in a peer, below). The program holds
    this process's id, so TensorFlow's persistent XLA cache never has it: it is compiled, not loaded."""
    import tensorflow as tf

    with tf.init_scope(), tf.device("/CPU:0"):
        tf.function(lambda: tf.random.uniform([1]) + float(os.getpid()), jit_compile=True)()


@pytest.fixture(scope="module")
def first_compile_peer():
    """One TensorFlow peer per device, started on first use: its first XLA compilation is the program."""
    with peers.lazy_groups(
        lambda device: peers.PeerGroup(
            f"xla-rng-{device}",
            "cases._xla_rng_peer:first_compile",
            configs={"rate": RATE, "device": device},
            # a compilation, not an executable loaded from the persistent XLA cache
            env={"TF_XLA_FLAGS": frameworks.without_tf_xla_cache(os.environ.get("TF_XLA_FLAGS", ""))},
        )
    ) as get:
        yield lambda subject: get(subject.device)


@on("tensorflow", modes=("xla",))  # a fresh process per run: its first compilation is this program
@settings(max_examples=max(3, settings.default.max_examples // 5))  # each example crosses a process
@given(
    x=ss.float_arrays(dtype=np.float32, shape=DROPOUT_SHAPE, min_value=0.25, max_value=2.0),
    w=ss.float_arrays(dtype=np.float32, shape=DROPOUT_SHAPE, min_value=0.5, max_value=2.0),
)
def test_recompute_grad_dropout_in_a_first_xla_compile(subject, record, first_compile_peer, x, w):
    """recompute_grad over tf.nn.dropout, compiled as the first XLA program of a fresh process (float32, one
    compilation for every example): the mask its gradient belongs to, as in test_recompute_grad_dropout_mask."""
    record.example(x=x, w=w)
    key = "recompute-dropout[nn.dropout|first-xla-compile]"
    (res,) = first_compile_peer(subject).request({"x": x, "w": w})
    _judge_mask(record, key, res["out"], res["grad"], x, w)
