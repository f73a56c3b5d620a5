"""Tape mechanics: unwatched sources, a second gradient, stop_recording, nested tapes, tapes around functions, RNG.

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
  Over ``f(x) = x * v`` with v a variable: ``d/dv = w x``, ``d/dx = w v``, by a tape in every mode and by
  ``tf.gradients`` in a v1 graph (tensorflow#36981 saw None there).
- **batch_jacobian of coupled rows.** ``y = x * sum_b x[b]``: the full Jacobian ``[i == k]([b == c] S_i +
  x[b, i])`` (``tape.jacobian``, pfor and while loop; ``jax.jacrev``, ``torch.func.jacrev``) against the
  closed form and the oracles; TensorFlow's ``batch_jacobian`` against the diagonal blocks ``diag(S + x[b])``
  and the batch-summed gradient ``2 diag(S)``. Eagerly only the while loop (a pfor jacobian traces per call).
- **Higher derivatives of pow at 0.** The 3rd to 5th derivatives of ``x ** n`` (n = 3, 4, 2.5) by nested
  differentiation: ``n (n-1) ... x^(n-k)`` away from 0; at 0 the closed form (0, k!, or +-inf for 2.5).
- **Second order through max_pool and fused batch norm.** Reverse over reverse through ``max_pool2d``
  (2x2, no ties): ``2 w v`` at each window's maximum for ``maxpool(x)^2``, zeros for ``maxpool(x)``
  (piecewise linear); through training-mode ``fused_batch_norm`` / ``FusedBatchNormV3`` (float32, the
  fused kernels' dtype): the second gradients in x, scale and offset against JAX's formula and PyTorch's
  ``batch_norm``, x's against central differences of the float64 closed-form first derivative;
  max_pool's against differences of the subject's own float64 first derivative.

Declared surprises:

- PyTorch: a source without ``requires_grad`` raises ('One of the differentiated Tensors does not require
  grad') under every policy (``allow_unused``, ``materialize_grads``); TensorFlow gives None or zeros.
- JAX: the pullback of ``jax.vjp`` can be called any number of times; there is nothing to release.
- PyTorch: without ``create_graph`` the first gradient is not differentiable, and the second
  ``autograd.grad`` raises; TensorFlow's outer tape gives None.
- TensorFlow: recompute_grad over ``tf.nn.dropout`` draws a new mask in the recomputation (every mode): the
  gradient belongs to a mask the forward never used; PyTorch too with ``preserve_rng_state=False``. On
  TF 2.18 and 2.19 the first XLA compilation of a process that holds a random op is the exception: there
  the recomputation reproduces the forward's mask (measured in a fresh process; 2.12-2.17, 2.20, 2.21
  and the 2.23 nightly draw anew), so in one process the row depended on what had run before it.
- TensorFlow: ``batch_jacobian`` of coupled rows silently returns the batch-summed gradient
  ``sum_c J[c, :, b, :]``, not the diagonal blocks (tensorflow#38428).
- TensorFlow under XLA: max_pool's second derivative (MaxPoolGradGrad) compiles for float32 only; a float64
  one is refused.
- TensorFlow: the 4th and 5th derivatives of ``x**3`` and the 5th of ``x**4`` at 0 are NaN (``0 * pow(0, -1)``;
  tensorflow#35011); PyTorch's 5th derivative of ``x**3`` raises (its 4th is a constant without grad_fn).

Sources: https://github.com/tensorflow/tensorflow/issues/29942,
https://github.com/tensorflow/tensorflow/issues/47785, https://github.com/tensorflow/tensorflow/issues/51473,
https://github.com/tensorflow/tensorflow/issues/33297, https://github.com/tensorflow/tensorflow/issues/36981,
https://github.com/tensorflow/tensorflow/issues/38428, https://github.com/tensorflow/tensorflow/issues/35011,
https://github.com/tensorflow/tensorflow/issues/11435,
https://github.com/tensorflow/tensorflow/blob/master/tensorflow/python/ops/custom_gradient.py,
https://docs.pytorch.org/docs/stable/checkpoint.html
"""

import functools
import os

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from suite import compare as cmp, finite_diff, frameworks, peers, strategies as ss
from suite.behaviours import Floor, behaviour, on
from suite.expectations import expect, expectations, raises
from suite.frameworks.tf_runner import Variables, in_v1_graph
from suite.program import Program

TORCH_GRAD = "https://docs.pytorch.org/docs/stable/generated/torch.autograd.grad.html"
JAX_VJP = "https://docs.jax.dev/en/latest/_autosummary/jax.vjp.html"
BATCH_JACOBIAN_ISSUE = "https://github.com/tensorflow/tensorflow/issues/38428"
POW_ISSUE = "https://github.com/tensorflow/tensorflow/issues/35011"
TF_MATH_GRAD = "https://github.com/tensorflow/tensorflow/blob/master/tensorflow/python/ops/math_grad.py"
TF_CONSTANT_FOLDING = (
    "https://github.com/tensorflow/tensorflow/blob/master/tensorflow/core/grappler/optimizers/constant_folding.cc"
)
MAX_POOL_ISSUE = "https://github.com/tensorflow/tensorflow/issues/11435"
TF_RECOMPUTE_GRAD = "https://github.com/tensorflow/tensorflow/blob/master/tensorflow/python/ops/custom_gradient.py"
TF_XLA_RANDOM = "https://github.com/tensorflow/tensorflow/blob/master/tensorflow/compiler/tf2xla/kernels/random_ops.cc"
TORCH_CHECKPOINT = "https://docs.pytorch.org/docs/stable/checkpoint.html"
TF_XLA_POOLING = (
    "https://github.com/tensorflow/tensorflow/blob/master/tensorflow/compiler/tf2xla/kernels/pooling_ops.cc"
)

BEHAVIOUR = behaviour(
    "tape-mechanics",
    sources=[],
    links=[
        "https://github.com/tensorflow/tensorflow/issues/29942",
        "https://github.com/tensorflow/tensorflow/issues/47785",
        "https://github.com/tensorflow/tensorflow/issues/51473",
        "https://github.com/tensorflow/tensorflow/issues/33297",
        "https://github.com/tensorflow/tensorflow/issues/36981",
        BATCH_JACOBIAN_ISSUE,
        POW_ISSUE,
        MAX_POOL_ISSUE,
        TF_RECOMPUTE_GRAD,
        TF_XLA_RANDOM,
        TORCH_CHECKPOINT,
        TF_XLA_POOLING,
        TORCH_GRAD,
        JAX_VJP,
    ],
    floor=Floor(
        "mixed",
        "Per element, relative to |ref_i|: the gradients of sums of elementwise products (2 a, 2 w s, w cos x, "
        "2 w x sin x, 3 w x^2, 6 w c x, w v, w x), dropout's values and gradients, pow's higher derivatives away "
        "from 0, max_pool's first and second gradients and the coupled Jacobian (S_i + x[b, i], positive terms): "
        "each element is a product of its own inputs, or a sum without cancellation. Array-level: batch norm's "
        "gradients (batch statistics; floored at their terms' size) and every finite difference.",
    ),
)

UNWATCHED = {"tensorflow": ("before-tape", "derived"), "torch": ("before-tape",)}
POLICIES = ("none", "zero")
NESTED = {"tensorflow": ("inside", "outside"), "jax": ("inside",), "torch": ("inside", "outside")}
VARIABLE_WATCH = ("default", "unwatched", "explicit-watch")
INNER = ("plain", "xla")
SEEDED = ("function-two-calls", "function-retraced", "eager-reset")
BN_SPELLINGS = {"tensorflow": ("compat.v1", "raw-v3"), "jax": ("formula",), "torch": ("functional",)}
POW_EXPONENTS = (3, 4, 2.5)
POW_ORDERS = (3, 4, 5)
POW_NAN_AT_ZERO = ((3, 4), (3, 5), (4, 5))  # (n, k): TensorFlow's k-th derivative of x**n is NaN at 0
RECOMPUTE_DROPOUT = {
    "tensorflow": ("nn.dropout", "stateless"),
    "jax": ("key",),
    "torch": ("preserve-rng", "no-preserve-rng"),
}
#: the error of a second gradient on a released tape: TensorFlow's and PyTorch's messages
SECOND_CALL = (
    r"A non-persistent GradientTape can only be used to compute one set of gradients"
    r"|Trying to backward through the graph a second time"
)

EXPECT = expectations(
    {
        **{
            f"unwatched[{s}|{p}]": "none" if p == "none" else "zeros" for s in UNWATCHED["tensorflow"] for p in POLICIES
        },
        "second-gradient[non-persistent]": raises("RuntimeError", SECOND_CALL),
        "second-gradient[persistent]": "same",
        "stop-recording": "recorded-part",
        "nested[inside]": "second-derivative",
        "nested[outside]": "none",
        "accessed-variable[default]": "closed-form",
        "accessed-variable[unwatched]": "none",
        "accessed-variable[explicit-watch]": "closed-form",
        **{f"through-function[{k}]": "closed-form" for k in INNER},
        "seeded[function-two-calls]": "different",
        "seeded[function-retraced]": "reproduces",
        "seeded[eager-reset]": "reproduces",
        "generator[two-draws]": "different",
        "generator[re-created]": "reproduces",
        "generator[from-seed]": "reproduces",
        "generator[next-calls]": "advances",
        **{f"recompute-dropout[{h}]": "same-mask" for hows in RECOMPUTE_DROPOUT.values() for h in hows},
        "recompute-dropout[nn.dropout|first-xla-compile]": "same-mask",
        **{f"recompute-variables[{h}]": "closed-form" for h in ("tape", "gradients")},
        **{f"batch-jacobian[{h}]": "diagonal-blocks" for h in ("pfor", "while-loop")},
        **{f"pow-at-zero[n={n}|k={k}]": "closed-form" for n in POW_EXPONENTS for k in POW_ORDERS},
        **{f"max-pool-second-order[square|{d}]": "closed-form" for d in ("float32", "float64")},
        **{f"max-pool-second-order[linear|{d}]": "zeros-closed-form" for d in ("float32", "float64")},
        **{f"fused-batch-norm-second-order[{s}]": "finite" for ss_ in BN_SPELLINGS.values() for s in ss_},
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
        "pow-at-zero[n=3|k=5]",
        "closed-form",
        framework="tensorflow",
        versions=">=2.23.0.dev20261010",
        link=TF_MATH_GRAD,
        reason="from tf-nightly 2026-10-10 _PowGrad zeroes an infinite x**(p-1) where the upstream gradient is 0 "
        "(as in "
        "masked-nan-gradients): x**3's 5th derivative at 0 is 0 in every mode; the 4th, and x**4's 5th, stay "
        "NaN (measured on 2.23.0.dev20261026)",
    ),
    expect(
        "max-pool-second-order[linear|float64]",
        "zeros-closed-form",
        framework="tensorflow",
        mode="xla",
        device="cpu",
        versions=">=2.22.0.dev20260713",
        link=TF_XLA_POOLING,
        reason="from tf-nightly 2026-07-13 (measured on 2.23.0.dev20261026) the float64 second derivative of a "
        "linear max_pool "
        "compiles under jit_compile=True (zeros, the closed form); the square one still needs MaxPoolGradGrad, "
        "which XLA_CPU_JIT registers for float32 only",
    ),
    expect(
        "recompute-dropout[no-preserve-rng]",
        "new-mask",
        framework="torch",
        link=TORCH_CHECKPOINT,
        reason="torch.utils.checkpoint stashes and restores the RNG state only with preserve_rng_state=True (the "
        "default); with False the recomputed dropout draws a new mask",
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
    *[
        expect(
            f"pow-at-zero[n={n}|k={k}]",
            "nan",
            framework="tensorflow",
            link=POW_ISSUE,
            reason="TensorFlow's pow gradient is grad * n * pow(x, n - 1) with n a tensor: once the exponent "
            "reaches 0 the next derivative is 0 * pow(0, -1) = 0 * inf = NaN at x = 0 where the closed form "
            "(an integer n below the order) is 0; JAX's integer_pow and PyTorch's pow_backward stop at a zero "
            "exponent",
        )
        for n, k in POW_NAN_AT_ZERO
    ],
    *[
        expect(
            f"pow-at-zero[n={n}|k={k}]",
            "closed-form",
            framework="tensorflow",
            mode="function",
            versions="<2.17",
            link=TF_CONSTANT_FOLDING,
            reason="up to TF 2.16 grappler's constant folding, which runs on a tf.function's graph, removes the "
            "0 * pow(0, -1) factor, so a traced nested tape gives the closed form 0 where eager gives NaN "
            "(measured on 2.12-2.16: NaN again with constant_folding off; 2.17 and later fold no longer, NaN); "
            "a v1 graph fed by placeholders and XLA keep the NaN",
        )
        for n, k in POW_NAN_AT_ZERO
    ],
    *[
        expect(
            f"max-pool-second-order[{how}|float64]",
            raises("InvalidArgumentError", r"No registered 'MaxPoolGradGrad' OpKernel for XLA_CPU_JIT"),
            framework="tensorflow",
            mode="xla",
            device="cpu",
            link=TF_XLA_POOLING,
            reason="XLA_CPU_JIT registers MaxPoolGradGrad (max_pool's second derivative) for float32 only: under "
            "jit_compile=True a float64 second derivative does not compile (measured; float32 compiles)",
        )
        for how in ("square", "linear")
    ],
    expect(
        "pow-at-zero[n=3|k=5]",
        raises("RuntimeError", r"element 0 of tensors does not require grad and does not have a grad_fn"),
        framework="torch",
        link=TORCH_GRAD,
        reason="PyTorch's pow backward returns a constant zero tensor (no grad_fn) once the exponent is 0, so "
        "the 4th derivative of x**3 is zeros and differentiating it again with autograd.grad raises",
    ),
)


# ---------------------------------------------------------------- strategies
SHAPES = ((3,), (2, 3))
DTYPES = (np.float32, np.float64)


@st.composite
def triples(draw):
    """(x, w, c): 0.25 <= |x| <= 2 (no closed form here vanishes, so none is mistaken for zeros); w and
    c, weights in [0.5, 2], of x's dtype and shape."""
    d = draw(ss.float_dtypes(dtypes=DTYPES), label="dtype")
    s = draw(st.sampled_from(SHAPES), label="shape")
    m = draw(ss.float_arrays(dtype=d, shape=s, min_value=0.25, max_value=2.0), label="|x|")
    sign = draw(ss.arrays(np.bool_, s, elements=st.booleans()), label="sign")
    x = np.where(sign, -m, m).astype(d)
    w = draw(ss.float_arrays(dtype=d, shape=s, min_value=0.5, max_value=2.0), label="w")
    c = draw(ss.float_arrays(dtype=d, shape=s, min_value=0.5, max_value=2.0), label="c")
    return x, w, c


def _f64(*xs):
    return [np.asarray(x, np.float64) for x in xs]


def _own(ref):
    """Per-element floor scales for an elementwise closed form computed without cancellation (a product of
    the element's own inputs, or a sum of terms of one sign): each element's own magnitude."""
    return np.abs(np.asarray(ref, np.float64))


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


class RecomputeVariables(Program):
    """(d/dx, d/dv) of ``sum(w * f(x))``, ``f(x) = x * v`` under recompute_grad, v a variable holding c:
    by a tape, or (``gradients``, v1 graph) by ``tf.gradients``."""

    def tensorflow(tf, x, w, c, *, how, key):
        v = VARIABLES.get(tf, c, name="recompute", shape=key[1], use_resource=True, validate_shape=True)
        f = tf.recompute_grad(lambda x: x * v)
        if how == "gradients":
            return tuple(tf.gradients(tf.reduce_sum(w * f(x)), [x, v]))
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = tf.reduce_sum(w * f(x))
        return tuple(tape.gradient(y, [x, v]))


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


@on("tensorflow")  # variables read by a recomputed function
@given(t=triples())
def test_recompute_grad_differentiates_variables(subject, record, t):
    """recompute_grad over f(x) = x * v, v a variable: d/dx = w v and d/dv = w x, by a tape in every mode and
    by tf.gradients in a v1 graph (tensorflow#36981 saw None for the variable there)."""
    x, w, c = t
    record.example(x=x, w=w, c=c)
    x64, w64, c64 = _f64(x, w, c)
    for how in ("tape", "gradients") if subject.mode == "graph" else ("tape",):
        key = f"recompute-variables[{how}]"
        res, err = subject.attempt("run", RecomputeVariables.of(subject), x, w, c, how=how, key=(x.dtype.name, x.shape))
        if err is not None:
            record.check(EXPECT, **{key: err})
            continue
        gx, gv = res
        record.check(EXPECT, **{key: cmp.which(gv, {"closed-form": w64 * x64})})
        record.close(name=f"{key} d/dx", out=gx, ref=(w64 * c64).astype(x.dtype), oracle="closed-form",
                     scale=_own(w64 * c64))  # fmt: skip
        if gv is not None:
            record.close(name=f"{key} d/dv", out=gv, ref=(w64 * x64).astype(x.dtype), oracle="closed-form",
                         scale=_own(w64 * x64))  # fmt: skip


# ---------------------------------------------------------------- batch_jacobian of coupled rows
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
    s = draw(st.sampled_from(((2, 3), (3, 2))), label="shape")
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


# ---------------------------------------------------------------- higher derivatives of pow at 0


class Pow(Program):
    """``x ** n``, n a Python number, as written; its higher derivatives come from
    :meth:`Runner.derivative` (nested tapes, nested ``jax.grad`` of a sum, ``autograd.grad`` with
    ``create_graph``)."""

    def tensorflow(tf, x, *, n):
        return x**n

    def jax(jax, x, *, n):
        return x**n

    def torch(torch, x, *, n):
        return x**n


def _pow_closed_form(x, n, k):
    """n (n-1) ... (n-k+1) x^(n-k) in float64; at 0: 0 where n - k > 0, k! where n == k, 0 for an integer
    n < k (the coefficient vanishes), and +-inf (the coefficient's sign) for a non-integer n < k."""
    x = np.asarray(x, np.float64)
    coeff = float(np.prod([n - i for i in range(k)]))
    with np.errstate(divide="ignore"):
        out = coeff * np.power(x, n - k) if coeff else np.zeros_like(x)
    return out


def _at_zero_kind(g, ref) -> str:
    """At the zeros of x: ``closed-form`` (equal, infinities included), ``nan``, ``inf`` or ``other``."""
    g, ref = np.asarray(g, np.float64), np.asarray(ref, np.float64)
    if np.array_equal(g, ref) or (np.all(np.isfinite(ref)) and cmp.near(g, ref)):
        return "closed-form"
    if np.isnan(g).any():
        return "nan"
    return "inf" if np.isinf(g).any() else "other"


@given(d=ss.float_dtypes(dtypes=DTYPES), data=st.data())
def test_pow_higher_derivatives_at_zero(subject, record, d, data):
    """The 3rd to 5th derivatives of x**n (n = 3, 4, 2.5) by nested differentiation: n (n-1) ... x^(n-k)
    away from 0; at 0 per framework the closed form (0, k!, or +-inf for n = 2.5), NaN, or an error."""
    mags = data.draw(ss.float_arrays(dtype=d, shape=(4,), min_value=0.25, max_value=2.0), label="|x|")
    zero = data.draw(st.integers(0, 3), label="zero at")
    x = mags.copy()
    x[zero] = 0
    record.example(x=x)
    away = x != 0
    for n in POW_EXPONENTS:
        for k in POW_ORDERS:
            key = f"pow-at-zero[n={n}|k={k}]"
            g, err = subject.attempt("derivative", Pow.of(subject), x, n=n, order=k, remember=cmp.xla_refusal)
            if err is not None:
                record.check(EXPECT, **{key: err})
                continue
            ref = _pow_closed_form(x, n, k)
            record.check(EXPECT, **{key: _at_zero_kind(np.asarray(g)[~away], ref[~away])})
            g = np.asarray(g)
            record.close(name=f"{key} away from 0", out=g[away], ref=ref[away].astype(d), oracle="closed-form",
                         scale=_own(ref[away]))  # fmt: skip


# ---------------------------------------------------------------- second order through max_pool, fused batch norm
class MaxPool(Program):
    """max_pool over 2x2 windows, stride 2, VALID, of a 2-D x; ``square``: its square (so that the second
    derivative is 2 w v at each window's maximum, not 0)."""

    def tensorflow(tf, x, *, square):
        y = tf.nn.max_pool2d(x[None, :, :, None], 2, 2, "VALID")[0, :, :, 0]
        return y * y if square else y

    def jax(jax, x, *, square):
        y = jax.lax.reduce_window(x, -jax.numpy.inf, jax.lax.max, (2, 2), (2, 2), "VALID")
        return y * y if square else y

    def torch(torch, x, *, square):
        y = torch.nn.functional.max_pool2d(x[None, None], 2)[0, 0]
        return y * y if square else y


BN_EPSILON = 1e-3


class FusedBatchNorm(Program):
    """Batch norm in training mode over NHWC x (batch statistics, biased variance, epsilon 1e-3):
    ``tf.compat.v1.nn.fused_batch_norm`` or ``tf.raw_ops.FusedBatchNormV3``; JAX by its formula;
    ``torch.nn.functional.batch_norm(training=True)`` on the NCHW transpose."""

    def tensorflow(tf, x, scale, offset, *, spelling):
        if spelling == "raw-v3":
            empty = tf.zeros([0], x.dtype)
            return tf.raw_ops.FusedBatchNormV3(
                x=x, scale=scale, offset=offset, mean=empty, variance=empty, epsilon=BN_EPSILON, is_training=True
            )[0]
        return tf.compat.v1.nn.fused_batch_norm(x, scale, offset, epsilon=BN_EPSILON, is_training=True)[0]

    def jax(jax, x, scale, offset, *, spelling):
        jnp = jax.numpy
        m = jnp.mean(x, axis=(0, 1, 2))
        var = jnp.mean((x - m) ** 2, axis=(0, 1, 2))
        return (x - m) / jnp.sqrt(var + BN_EPSILON) * scale + offset

    def torch(torch, x, scale, offset, *, spelling):
        y = torch.nn.functional.batch_norm(x.permute(0, 3, 1, 2), None, None, scale, offset, True, eps=BN_EPSILON)
        return y.permute(0, 2, 3, 1)


FusedBatchNorm.tensorflow.exact_shapes = True  # the fused kernel's channel dimension must be static in a graph


def _bn_grad_x(x, scale, w):
    """d/dx sum(w * batch_norm(x)) in float64, per channel over N, H, W: scale / sigma * (w - mean(w) -
    xhat * mean(w * xhat))."""
    x, w = np.asarray(x, np.float64), np.asarray(w, np.float64)
    axes = (0, 1, 2)
    mu = x.mean(axes)
    sigma = np.sqrt(((x - mu) ** 2).mean(axes) + BN_EPSILON)
    xhat = (x - mu) / sigma
    return np.asarray(scale, np.float64) / sigma * (w - w.mean(axes) - xhat * (w * xhat).mean(axes))


@st.composite
def pool_cases(draw):
    """(x, w, v): x a 2-D array of distinct values a quarter apart (no ties in any window), w (the
    cotangent of the pooled output) and v (of the first gradient)."""
    d = draw(ss.float_dtypes(dtypes=DTYPES), label="dtype")
    h, wd = draw(st.sampled_from(((4, 4), (4, 6))), label="shape")
    perm = np.asarray(draw(st.permutations(range(h * wd)), label="order"), np.float64)
    x = ((perm - (h * wd - 1) / 2) / 4).reshape(h, wd).astype(d)
    w = draw(ss.float_arrays(dtype=d, shape=(h // 2, wd // 2), min_value=0.5, max_value=2.0), label="w")
    v = draw(ss.float_arrays(dtype=d, shape=(h, wd), min_value=-2.0, max_value=2.0), label="v")
    return x, w, v


def _pool_forms(x, w, v, square):
    """(first, second) gradients of sum(w * maxpool(x)^(2 or 1)) in float64: at each window's maximum
    2 w y (w), and 2 w v there (0); zero elsewhere."""
    x, w, v = (np.asarray(a, np.float64) for a in (x, w, v))
    g, h = np.zeros_like(x), np.zeros_like(x)
    for i in range(w.shape[0]):
        for j in range(w.shape[1]):
            win = x[2 * i : 2 * i + 2, 2 * j : 2 * j + 2]
            a, b = np.unravel_index(np.argmax(win), win.shape)
            at = (2 * i + a, 2 * j + b)
            g[at] = 2 * w[i, j] * x[at] if square else w[i, j]
            h[at] = 2 * w[i, j] * v[at] if square else 0.0
    return g, h


def _second_order_against_oracles(record, oracles, program, *arrays, w, v, first: dict, second: dict, tol=cmp.GRAD,
                                  scales=("inputs", "inputs"), **static):  # fmt: skip
    """Each oracle's reverse-over-reverse of ``program``: ``first`` (name -> the subject's first gradient of
    the first input) and ``second`` (name -> its second gradient with respect to each input, in order);
    ``scales``: the floor's scale for the first and the second gradients (as for ``record.close``)."""
    __tracebackhide__ = True
    for o in oracles:
        _, g, h = o.second_order(program.of(o), *arrays, cotangent=w, cotangent2=v, **static)
        pairs = [*((p, scales[0]) for p in zip(first.items(), g[:1]))]
        pairs += [(p, scales[1]) for p in zip(second.items(), h)]
        for ((name, out), ref), scale in pairs:
            if out is not None and ref is not None:
                record.close(name=name, out=out, ref=ref, oracle=o.id, tol=tol, scale=scale)


@given(case=pool_cases())
def test_max_pool_second_order(subject, oracles, record, case):
    """Reverse over reverse through max_pool2d (no ties): for maxpool(x)^2 the second gradient is 2 w v at
    each window's maximum; for maxpool(x) itself, piecewise linear, it is zero; against the closed forms,
    the oracles and central differences of the subject's own float64 first derivative."""
    x, w, v = case
    record.example(x=x, w=w, v=v)
    for square in (True, False):
        key = f"max-pool-second-order[{'square' if square else 'linear'}|{x.dtype.name}]"
        res, err = subject.attempt(
            "second_order", MaxPool.of(subject), x, cotangent=w, cotangent2=v, square=square, remember=cmp.xla_refusal
        )
        if err is not None:
            record.check(EXPECT, **{key: err})
            continue
        _, (g,), (h,) = res
        first, second = _pool_forms(x, w, v, square)
        forms = {"closed-form": second} if square else {"zeros-closed-form": second}
        record.check(EXPECT, **{key: cmp.which(h, forms)})
        # one window's maximum per element (no ties): 2 w y or w, and 2 w v or 0 there, 0 elsewhere
        record.close(name=f"{key} first", out=g, ref=first.astype(x.dtype), oracle="closed-form", scale=_own(first))
        if h is None:
            continue
        record.close(name=f"{key} second", out=h, ref=second.astype(x.dtype), oracle="closed-form",
                     scale=_own(second))  # fmt: skip
        _second_order_against_oracles(record, oracles, MaxPool, x, w=w, v=v, first={f"{key} first": g},
                                      second={f"{key} second": h}, square=square,
                                      scales=(_own(first), _own(second)))  # fmt: skip
        grad = lambda z: subject.vjp(MaxPool.of(subject), z, cotangent=np.asarray(w, np.float64), square=square)[1][0]  # noqa: E731
        fd = finite_diff.hvp(grad, x, v)
        record.close(name=f"{key} second[difference of the first derivative]", out=np.asarray(h, np.float64), ref=fd,
                     oracle="finite-difference", tol=cmp.FINITE_DIFF, derived_from=h.dtype, scale="inputs")  # fmt: skip


@st.composite
def batch_norm_cases(draw):
    """(x, scale, offset, w, v) in float32 (the fused kernels' dtype): x NHWC (2, 3, 3, 2) or (3, 2, 2, 3)."""
    shape = draw(st.sampled_from(((2, 3, 3, 2), (3, 2, 2, 3))), label="shape")
    f32 = np.float32
    # every channel spread out (std >= 0.25): a constant channel (variance 0) is batch norm's own special
    # point, where float32's residues meet a closed form of 0; it is not what this test is about
    x = draw(
        ss.float_arrays(dtype=f32, shape=shape, min_value=-2.0, max_value=2.0).filter(
            lambda x: float(np.std(np.asarray(x, np.float64), axis=(0, 1, 2)).min()) >= 0.25
        ),
        label="x",
    )
    c = shape[-1]
    scale = draw(ss.float_arrays(dtype=f32, shape=(c,), min_value=0.5, max_value=2.0), label="scale")
    offset = draw(ss.float_arrays(dtype=f32, shape=(c,), min_value=-1.0, max_value=1.0), label="offset")

    # w and v not constant on a channel: batch norm's output is invariant to a per-channel shift, so a
    # constant cotangent or direction gives an exact 0 that float32 meets with residues
    def spread(a):
        return float(np.ptp(np.asarray(a, np.float64), axis=(0, 1, 2)).min()) >= 0.25

    w = draw(ss.float_arrays(dtype=f32, shape=shape, min_value=0.5, max_value=2.0).filter(spread), label="w")
    v = draw(ss.float_arrays(dtype=f32, shape=shape, min_value=-1.0, max_value=1.0).filter(spread), label="v")
    return x, scale, offset, w, v


#: a float32 Hessian-vector product of batch norm sums O(N) terms that cancel; against a float64 difference
BN_HVP = cmp.tolerance(base=cmp.FINITE_DIFF.table, float32=1e-3)


@given(case=batch_norm_cases())
def test_fused_batch_norm_second_order(subject, oracles, record, case):
    """Reverse over reverse through training-mode batch norm (FusedBatchNormGradV3 has a registered
    gradient): the second gradients with respect to x, scale and offset against the oracles; x's against
    central differences of the float64 closed-form first derivative."""
    x, scale, offset, w, v = case
    record.example(x=x, scale=scale, offset=offset, w=w, v=v)
    for spelling in BN_SPELLINGS[subject.framework]:
        key = f"fused-batch-norm-second-order[{spelling}]"
        res, err = subject.attempt(
            "second_order", FusedBatchNorm.of(subject), x, scale, offset, cotangent=w, cotangent2=v, spelling=spelling
        )
        if err is not None:
            record.check(EXPECT, **{key: err})
            continue
        _, (g, _, _), (hx, hs, ho) = res
        fd = finite_diff.hvp(lambda z: _bn_grad_x(z, scale, w), x, v)
        record.check(EXPECT, **{key: "finite" if np.all(np.isfinite(hx)) else "non-finite"})
        # the gradients are sums of terms of size |scale| |w| / sigma (|v| / sigma more for the second) that
        # cancel where w is nearly affine in x on a channel: the floor is at the terms' size, not the result's
        sigma = float(np.sqrt(np.asarray(x, np.float64).var(axis=(0, 1, 2)) + BN_EPSILON).min())
        first_scale = float(np.abs(scale).max() * np.abs(w).max()) / sigma
        scales = (first_scale, first_scale * float(np.abs(v).max()) / sigma)
        record.close(name=f"{key} first", out=g, ref=_bn_grad_x(x, scale, w).astype(x.dtype), oracle="closed-form",
                     scale=scales[0])  # fmt: skip
        record.close(
            name=f"{key} d2/dx[finite difference, of the closed-form first derivative]",
            out=np.asarray(hx, np.float64),
            ref=fd,
            oracle="finite-difference",
            tol=BN_HVP,
            derived_from=hx.dtype,
            scale=scales[1],
        )
        second = {f"{key} d2/dx": hx, f"{key} d2/dscale": hs, f"{key} d2/doffset": ho}
        first = {f"{key} first": g}
        _second_order_against_oracles(record, oracles, FusedBatchNorm, x, scale, offset, w=w, v=v, first=first,
                                      second=second, tol=BN_HVP, scales=scales, spelling=spelling)  # fmt: skip
