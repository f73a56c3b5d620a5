"""Custom backward: every way to replace a backward pass, and whether it takes effect.

Source: seeds/001 (slides "Override Backward-Propagation") and seeds/003 (the blog post).
``e = custom_add(c, k, d)`` has the forward of ``tf.add(c, k)`` (a NumPy ``py_func``)
and the declared backward ``backprop_func(op, grad) = ((e+d)*grad, d*grad, e*grad)``,
attached with ``tf.RegisterGradient`` + ``Graph.gradient_override_map({"PyFunc": ...})``
inside ``a = d*e``, ``d = data + c``, softmax cross-entropy, Adam (lr=0.001, beta1=0.9,
beta2=0.999, epsilon=0.1) via compute_gradients/apply_gradients. The Bernoulli attention
op (seeds/001, 003) samples a mask forward and multiplies the upstream gradient by the
other feature map backward.

Every mechanism applies the declared backward exactly (``tf.custom_gradient``, with and
without variables, under GradientTape and ``tf.gradients``; ``jax.custom_vjp``,
``jax.custom_jvp``; ``torch.autograd.Function``). Without one, ``py_func`` and
``numpy_function`` have no gradient (None) and ``py_function`` differentiates the eager
ops of its body, a scalar 0 for an unused input. The seed's backward receives dL/de, not
the dL/da of its slide's chain rule, and also sends ``e*grad`` into ``d``, so the applied
gradients are not the slide's ((e+d) dL/da, d dL/da); the forward equals the tf.add
model's (the seed's own check).

Declared (TensorFlow): ``tf.gradients`` refuses in eager mode (RuntimeError "tf.gradients
is not supported when eager execution is enabled": graph or tf.function only).
``gradient_override_map`` is ignored by GradientTape in every mode (the tape looks a
gradient up by op type; only ``tf.gradients`` reads the override). Under XLA every Python
op (py_func, py_function, numpy_function) fails to compile (InvalidArgumentError
"Detected unsupported operations": no XLA kernel for PyFunc/EagerPyFunc).
"""

import itertools

import numpy as np
import pytest
from hypothesis import example, given, strategies as st
from hypothesis.extra import numpy as hnp

from suite import compare as cmp, facts, strategies as ss
from suite.behaviours import Floor, behaviour, on
from suite.compare import capped
from suite.expectations import expect, expectations, raises
from suite.program import Program

BEHAVIOUR = behaviour(
    "custom-backward",
    sources=["001", "003"],
    links=[
        "https://www.tensorflow.org/api_docs/python/tf/custom_gradient",
        "https://www.tensorflow.org/api_docs/python/tf/RegisterGradient",
        "https://www.tensorflow.org/api_docs/python/tf/Graph#gradient_override_map",
        "https://www.tensorflow.org/api_docs/python/tf/py_function",
        "https://www.tensorflow.org/api_docs/python/tf/numpy_function",
        "https://docs.jax.dev/en/latest/notebooks/Custom_derivative_rules_for_Python_code.html",
        "https://pytorch.org/docs/stable/autograd.html#torch.autograd.Function",
    ],
    floor=Floor(
        "mixed",
        "Per element: the declared backward ((e+d) w, d w, e w) with e = c + k is elementwise, each gradient held "
        "at its terms ((|c| + |k| + |d|) |w|, |d w|, (|c| + |k|) |w|: the sums cancel) capped at the array's "
        "max |ref| (never looser than before), in the classifier too; the "
        "Bernoulli attention gradient w f is a product (scale 0). Array-level: the seed model's loss and gradients "
        "(a softmax cross-entropy over the model's outputs: every gradient entry goes through the softmax's sum) "
        "and the Adam step (held at the variable's and the step's magnitude).",
    ),
)

APIS = ("tape", "tf.gradients")
PY_OPS = ("py_func", "py_function", "numpy_function")
MECHS = (
    "custom_gradient",
    "custom_gradient_variables",
    *[f"{how}_{op}" for op in PY_OPS for how in ("override_map", "custom_gradient")],
)
DEFAULTS = {"py_func_default": "none", "numpy_function_default": "none", "py_function_default": "autodiff"}
ON_PY_OPS = [m for m in MECHS if m.endswith(PY_OPS)] + list(DEFAULTS)

TAPE_LINK = "https://github.com/tensorflow/tensorflow/blob/master/tensorflow/python/eager/backprop.py"
XLA_LINK = "https://www.tensorflow.org/api_docs/python/tf/py_function"
EXPECT = expectations(
    {
        **{f"{m}/{a}": "applied" for m in MECHS for a in APIS},
        **{f"{k}/{a}": v for k, v in DEFAULTS.items() for a in APIS},
        "custom_vjp": "applied",
        "custom_jvp": "applied",
        "autograd_function": "applied",
        "bernoulli_backward": "applied",
        "seed_backward": "applied",
        "forward": "equals-add",
        "slide_chain_rule": "differs",
        "py_function_unused_input": "scalar-zero",
    },
    *[facts.tf_gradients_in_eager(f"{m}/tf.gradients") for m in MECHS + tuple(DEFAULTS)],
    *[
        expect(
            f"override_map_{op}/tape",
            "ignored",
            framework="tensorflow",
            reason="gradient_override_map only sets the op's _gradient_op_type attr, which tf.gradients "
            "reads (ops.get_gradient_function); GradientTape looks the gradient up by op type "
            "(backprop._gradient_function: _gradient_registry.lookup(op_name)) in every mode, "
            "v1 graph included; see also tensorflow#36870",
            link=TAPE_LINK,
        )
        for op in PY_OPS
    ],
    *[
        expect(
            f"{m}/{a}",
            raises(
                "InvalidArgumentError",
                r"Detected unsupported operations when trying to compile graph[^\n]*No registered '(Eager)?PyFunc'",
            ),
            framework="tensorflow",
            mode="xla",
            reason="PyFunc/EagerPyFunc cannot be compiled: 'Currently tf.py_function (tf.numpy_function) "
            "is not compatible with XLA. Calling it inside tf.function(jit_compile=True) will raise "
            "an error' (Detected unsupported operations)",
            link=XLA_LINK,
        )
        for m in ON_PY_OPS
        for a in APIS
    ],
)


# ---------------------------------------------------------------- closed forms and observations
def declared(c, k, d, w):
    e = c + k
    return (e + d) * w, d * w, e * w


def declared_scales(c, k, d, w):
    """Per-element scales (float64) of :func:`declared`: the terms its sums add, ``(|c| + |k| + |d|) |w|``,
    ``|d w|`` and ``(|c| + |k|) |w|`` (e = c + k and e + d cancel; the products do not)."""
    c, k, d, w = (np.abs(np.asarray(t, np.float64)) for t in (c, k, d, w))
    return (c + k + d) * w, d * w, (c + k) * w


def _matches(grads, refs, dtype, scales=None) -> bool:
    """Every gradient within GRAD of its reference (at ``scales``, one per gradient as
    :func:`suite.compare.rel_err` takes it; default: the array-level floor), at ``dtype``'s rounding
    also where the reference is a float64 closed form (the seed model's); a None reference
    accepts None or zeros of any shape."""
    for g, r, at in zip(grads, refs, scales or (None,) * len(refs)):
        if r is None:
            if g is not None and np.any(np.asarray(g)):
                return False
        elif g is None:
            return False
        # dtype=: the floor at the subject's rounding. Left to the float64 reference's, it was 32 float64 ulps
        # over float32's rtol (0.007 max |ref|): the seed model's dL/dc = 0.0022 from terms of 0.25 (a thorough
        # run's draw), 4e-8 off in JAX and PyTorch (1.5 ulp of its terms), read 'other'
        elif cmp.rel_err(g, r, scale=None if at is None else capped(at, r), dtype=dtype) > cmp.GRAD.of(dtype):
            return False
    return True


def backward_kind(grads, c, k, d, w, *, default) -> str:
    """``applied`` (the declared backward), ``ignored`` (the op's own gradient) or ``other``."""
    if _matches(grads, declared(c, k, d, w), c.dtype, declared_scales(c, k, d, w)):
        return "applied"
    return "ignored" if _matches(grads, default, c.dtype, (0.0, 0.0, 0.0)) else "other"  # w itself: per element


def default_kind(grads, w) -> str:
    if all(g is None for g in grads):
        return "none"
    return "autodiff" if _matches(grads, (w, w, None), w.dtype, (0.0, 0.0, 0.0)) else "other"


def observe_error(e, key) -> str:
    """``unavailable`` only if the API of ``key`` (``.../tape`` or ``.../tf.gradients``) is
    missing; a refusal (tf.gradients eagerly, XLA's compile error) is ``raises:<Error>``."""
    __tracebackhide__ = True
    api = {"tape": "GradientTape", "tf.gradients": "tf.gradients"}.get(key.rsplit("/", 1)[-1])
    return cmp.unavailable_or_raised(e, api) if api else cmp.error_name(e)


def seed_closed_form(c, k, data, labels):
    """The seed's model in float64: loss, the applied gradients (declared backward) and the
    true gradients of the tf.add model (the slide's (e+d) dL/da, d dL/da)."""
    c, k = c.astype(np.float64), k.astype(np.float64)
    d, e = data + c, c + k
    a = d * e
    sm = np.exp(a - a.max())
    sm /= sm.sum()
    ga = sm - labels
    ge = d * ga  # what backprop_func receives as ``grad``
    applied = (e * ga + e * ge + (e + d) * ge, d * ge)
    true = ((e + d) * ga, d * ga)
    return -np.log(sm[labels.astype(bool)][0]), applied, true


# The v1 AdamOptimizer computes 1 - beta2 in float32: 1 - f32(0.999) is 1.3e-5 off (relative),
# so a float32 step meets the float64 closed form to ~1e-5, not to VALUE's 2e-6 (see adam-epsilon).
ADAM_TOL = cmp.tolerance(base=cmp.VALUE_TOL, float32=5e-5)
ADAM_LR_T = 0.001 * np.sqrt(1 - 0.999) / (1 - 0.9)  # the largest step one Adam update takes


def adam_step(var, g, lr=0.001, beta1=0.9, beta2=0.999, epsilon=0.1):
    """One tf.compat.v1.train.AdamOptimizer step from zero slots (epsilon is 'epsilon hat')."""
    m, v = (1 - beta1) * g, (1 - beta2) * g * g
    return var - lr * np.sqrt(1 - beta2) / (1 - beta1) * m / (np.sqrt(v) + epsilon)


# ---------------------------------------------------------------- strategies
# A scalar and a matrix, each with one dtype: one XLA compile per signature x API
SIGNATURES = ss.dtypes_and_shapes(shapes=((), (2, 3)))


def distinguishable(xs) -> bool:
    """The declared backward differs from every op's own gradient somewhere: d*w is neither
    w (autodiff of c + k) nor 0 (no gradient), so ``applied`` and ``ignored`` can be told apart."""
    _, _, d, w = xs
    return bool(np.any((np.abs(w) > 0.1) & (np.abs(d) > 0.1) & (np.abs(d - 1) > 0.1)))


@st.composite
def add_inputs(draw):
    """c, k, d and the cotangent w: one dtype and shape."""
    dt, s = draw(SIGNATURES, label="dtype, shape")
    return tuple(draw(ss.float_arrays(dtype=dt, shape=s, min_value=-3, max_value=3), label=n) for n in "ckdw")


@st.composite
def attention_inputs(draw):
    """Probabilities (with exact 0 and 1, where the sample is certain), a feature map, w, a seed."""
    dt, s = draw(SIGNATURES, label="dtype, shape")
    probs = st.one_of(st.sampled_from([0.0, 1.0]), ss.floats(dt, 0, 1, subnormals=True))
    p = draw(hnp.arrays(dt, s, elements=probs), label="p")
    f = draw(ss.float_arrays(dtype=dt, shape=s, min_value=-3, max_value=3), label="f")
    w = draw(ss.like(f), label="w")
    return p, f, w, np.int32(draw(st.integers(0, 2**20), label="seed"))


# The seed's c, k: truncated_normal(stddev=0.1), which lies in (-0.2, 0.2).
small = ss.floats(np.float32, np.float32(-0.2), np.float32(0.2), subnormals=True)
SEED_DATA, SEED_LABELS = np.array([1, 2], np.float32), np.array([0, 1], np.int32)


# ---------------------------------------------------------------- the programs
# Inputs c, k, d as in the seed: e = custom_add(c, k, d) has the value c + k; d is passed
# only so that the backward can use it.


def forward_func(c, k, d):
    """seeds/001 forward_func (any float dtype rather than float32 only)."""
    e = np.add(c, k)
    return e.astype(c.dtype)


def seed_backprop(tf):
    """seeds/001 backprop_func (``tf`` comes from the runner)."""

    def backprop_func(op, grad):
        c = op.inputs[0]
        k = op.inputs[1]
        d = op.inputs[2]
        e = tf.add(c, k)
        return (e + d) * grad, d * grad, e * grad

    return backprop_func


_REGISTERED = {}


def _override_name(tf):
    """Register backprop_func once: registering a name twice raises KeyError."""
    if "seed" not in _REGISTERED:
        tf.RegisterGradient("CustomBackwardSeed001")(seed_backprop(tf))
        _REGISTERED["seed"] = "CustomBackwardSeed001"
    return _REGISTERED["seed"]


# forward of custom_add by op: TensorFlow ops, or a Python op (the seed's py_func)
TF_FORWARDS = {
    "tf": lambda tf, c, k, d: tf.add(c, k),
    "py_func": lambda tf, c, k, d: tf.compat.v1.py_func(forward_func, [c, k, d], c.dtype),
    "numpy_function": lambda tf, c, k, d: tf.numpy_function(forward_func, [c, k, d], c.dtype),
    "py_function": lambda tf, c, k, d: tf.py_function(lambda c, k, d: tf.add(c, k), [c, k, d], c.dtype),
}


def _gradients(tf, api, forward, watch, sources, w):
    """``e = forward()`` and the gradients of sum(w * e) w.r.t. ``sources`` by ``api``
    (GradientTape, watching ``watch``, or tf.gradients)."""
    if api == "tf.gradients":
        e = forward()
        return e, tf.gradients(e, sources, grad_ys=w)
    with tf.GradientTape() as tape:
        tape.watch(watch)
        e = forward()
    return e, tape.gradient(e, sources, output_gradients=w)


_ORACLE_OPS = {}


def _jax_ops(jax):
    """custom_vjp and custom_jvp spellings of the seed's op, built once."""
    if "vjp" not in _ORACLE_OPS:

        @jax.custom_vjp
        def add_vjp(c, k, d):
            return c + k

        def fwd(c, k, d):
            return c + k, (c, k, d)

        def bwd(res, g):
            c, k, d = res
            e = c + k
            return (e + d) * g, d * g, e * g

        add_vjp.defvjp(fwd, bwd)

        @jax.custom_jvp
        def add_jvp(c, k, d):
            return c + k

        @add_jvp.defjvp
        def _(primals, tangents):  # linear in the tangents, so reverse mode transposes it
            (c, k, d), (dc, dk, dd) = primals, tangents
            e = c + k
            return e, (e + d) * dc + d * dk + e * dd

        @jax.custom_vjp
        def bernoulli(p, f, seed):
            return jax.random.bernoulli(jax.random.key(seed), p).astype(p.dtype)

        bernoulli.defvjp(
            lambda p, f, seed: (bernoulli(p, f, seed), f), lambda f, g: (g * f, jax.numpy.zeros_like(f), None)
        )
        _ORACLE_OPS.update(vjp=add_vjp, jvp=add_jvp, bernoulli=bernoulli)
    return _ORACLE_OPS


def _torch_ops(torch):
    if "torch_add" not in _ORACLE_OPS:

        class CustomAdd(torch.autograd.Function):
            @staticmethod
            def forward(ctx, c, k, d):
                ctx.save_for_backward(c, k, d)
                return c + k

            @staticmethod
            def backward(ctx, g):
                c, k, d = ctx.saved_tensors
                e = c + k
                return (e + d) * g, d * g, e * g

        class Bernoulli(torch.autograd.Function):
            @staticmethod
            def forward(ctx, p, f, seed):
                ctx.save_for_backward(f)
                return torch.bernoulli(p, generator=torch.Generator(p.device).manual_seed(int(seed)))

            @staticmethod
            def backward(ctx, g):
                (f,) = ctx.saved_tensors
                return g * f, torch.zeros_like(f), None

        _ORACLE_OPS.update(torch_add=CustomAdd, torch_bernoulli=Bernoulli)
    return _ORACLE_OPS


class CustomAdd(Program):
    """e = custom_add(c, k, d): value c + k, declared backward ((e+d)g, d g, e g).

    TensorFlow: forward ``op`` (tf.add or a Python op) with the backward attached by ``how``
    (gradient_override_map, tf.custom_gradient, or ``default``: none, the op's own);
    JAX: jax.custom_vjp or jax.custom_jvp; PyTorch: torch.autograd.Function."""

    def tensorflow(tf, c, k, d, *, op="tf", how="custom_gradient"):
        forward = TF_FORWARDS[op]
        if how == "override_map":
            with tf.compat.v1.get_default_graph().gradient_override_map(
                {"EagerPyFunc" if op == "py_function" else "PyFunc": _override_name(tf)}
            ):
                return forward(tf, c, k, d)
        if how == "custom_gradient":

            @tf.custom_gradient
            def add(c, k, d):
                def grad(g):
                    e = tf.add(c, k)
                    return (e + d) * g, d * g, e * g

                return forward(tf, c, k, d), grad

            return add(c, k, d)
        return forward(tf, c, k, d)

    def jax(jax, c, k, d, *, how="custom_vjp"):
        return _jax_ops(jax)["vjp" if how == "custom_vjp" else "jvp"](c, k, d)

    def torch(torch, c, k, d):
        return _torch_ops(torch)["torch_add"].apply(c, k, d)


class CustomAddGradients(Program):
    """TensorFlow: e = custom_add(c, k, d) (:class:`CustomAdd`) and the gradients of
    sum(w * e) by ``api`` (GradientTape or tf.gradients)."""

    def tensorflow(tf, c, k, d, w, *, op, how, api):
        xs = [c, k, d]
        return _gradients(tf, api, lambda: CustomAdd.tensorflow(tf, *xs, op=op, how=how), xs, xs, w)


class CustomGradientVariables(Program):
    """k is a variable read inside the forward: grad_fn(g, variables) returns its gradient."""

    def tensorflow(tf, c, k, d, w, *, api, var_ref=None):
        if var_ref is None:  # v1 graph: the variable lives in the session's graph (initialised from k)
            var = tf.Variable(k, shape=tf.TensorShape(None))
        else:  # eager/function/xla: created eagerly by the test, one per dtype x shape
            var = var_ref.deref()
            var.assign(k)

        @tf.custom_gradient
        def add(c, d):
            e = c + var

            def grad(g, variables=None):
                return ((e + d) * g, e * g), [d * g for _ in variables]

            return e, grad

        return _gradients(tf, api, lambda: add(c, d), [c, d], [c, var, d], w)


_EAGER_VARS = {}


def _eager_variable(tf, k):
    key = (k.dtype.str, k.shape)
    if key not in _EAGER_VARS:
        _EAGER_VARS[key] = tf.Variable(np.zeros_like(k))
    return _EAGER_VARS[key].ref()


class Bernoulli(Program):
    """seeds/003 attention: forward samples Bernoulli(p); backward upstream * feature map."""

    def tensorflow(tf, p, f, seed):
        @tf.custom_gradient
        def bernoulli(p, f):
            u = tf.random.stateless_uniform(tf.shape(p), seed=tf.stack([seed, seed]), dtype=p.dtype)
            return tf.cast(u < p, p.dtype), lambda g: (g * f, tf.zeros_like(f))

        return bernoulli(p, f)

    def jax(jax, p, f, seed):
        return _jax_ops(jax)["bernoulli"](p, f, seed)

    def torch(torch, p, f, seed):
        return _torch_ops(torch)["torch_bernoulli"].apply(p, f, seed)


class SeedModel(Program):
    """seeds/001 model in each framework's own spelling: custom_add with the declared
    backward (TF2: tf.custom_gradient), or ``plain``: tf.add."""

    def tensorflow(tf, c, k, data, labels, *, plain=False):
        d = tf.add(data, c)
        if plain:
            e = tf.add(c, k)
        else:

            @tf.custom_gradient
            def custom_add(c, k, d):
                e = tf.add(c, k)
                return e, lambda g: ((e + d) * g, d * g, e * g)

            e = custom_add(c, k, d)
        a = tf.multiply(d, e)
        return tf.nn.softmax_cross_entropy_with_logits(labels=tf.cast(labels, a.dtype), logits=a)

    def jax(jax, c, k, data, labels, *, plain=False):
        d = data + c
        e = c + k if plain else _jax_ops(jax)["vjp"](c, k, d)
        return -(labels * jax.nn.log_softmax(d * e)).sum()

    def torch(torch, c, k, data, labels, *, plain=False):
        d = data + c
        e = c + k if plain else _torch_ops(torch)["torch_add"].apply(c, k, d)
        return -(labels.to(d.dtype) * torch.log_softmax(d * e, dim=-1)).sum()


_SEED_COUNTER = itertools.count()


def _seed_custom_add(tf, c, k, d, graph, name=None):
    """seeds/001 custom_add as written, with a counter for the seed's random gradient name."""
    with tf.compat.v1.name_scope(name, "AddGrad", [c, k, d]) as name:
        rnd_name = "CustomBackwardPyFuncGrad" + str(next(_SEED_COUNTER))
        inputs = [c, k, d]
        tf.RegisterGradient(rnd_name)(seed_backprop(tf))
        with graph.gradient_override_map({"PyFunc": rnd_name}):
            return tf.compat.v1.py_func(forward_func, inputs, [np.float32], name=name)


class SeedV1Graph(Program):
    """seeds/001 model as written (placeholders are the runner's; c, k start at c0, k0)."""

    def tensorflow(tf, c0, k0, labels_ph, data_ph, *, custom):
        v1 = tf.compat.v1
        c = tf.Variable(c0)
        k = tf.Variable(k0)
        d = tf.add(data_ph, c)
        e = _seed_custom_add(tf, c, k, d, v1.get_default_graph()) if custom else tf.add(c, k)
        a = tf.multiply(d, e)
        loss = v1.losses.softmax_cross_entropy(logits=a, onehot_labels=labels_ph)
        opt = v1.train.AdamOptimizer(learning_rate=0.001, beta1=0.9, beta2=0.999, epsilon=0.1)
        grads = opt.compute_gradients(loss, v1.trainable_variables())
        grads = list(grads)
        train_op = opt.apply_gradients(grads_and_vars=grads)
        with tf.control_dependencies([train_op]):
            after = [tf.identity(c.read_value()), tf.identity(k.read_value())]
        return {"e": e, "loss": loss, "grads": [g for g, _ in grads], "after": after}


SeedV1Graph.tensorflow.exact_shapes = True  # tf.Variable and Adam's slots need static shapes

ORACLE_STATIC = {"jax": {"how": "custom_vjp"}, "torch": {}}  # as the jax-jit row calls it: one compile
# test_custom_gradient_backward_is_applied: what the subject runs, observation key -> static arguments
# (TensorFlow: CustomAddGradients, tape and tf.gradients; JAX and PyTorch: the vjp of CustomAdd)
CUSTOM_ADD_RUNS = {
    "tensorflow": {f"custom_gradient/{a}": {"op": "tf", "how": "custom_gradient", "api": a} for a in APIS},
    "jax": {h: {"how": h} for h in ("custom_vjp", "custom_jvp")},
    "torch": {"autograd_function": {}},
}


# ---------------------------------------------------------------- properties
def recall(subject, method, program, *args, **static):
    """``subject.<method>(program, *args, **static)``; XLA's refusal (a Python op has no XLA
    kernel) is remembered per program, input dtypes and arguments (``Runner.recall``)."""
    return subject.recall(method, program.of(subject), *args, remember=cmp.xla_refusal, **static)


def _observe(record, key, call, xs, *, default, refs=()):
    """Run one mechanism (``call``: method, program, arguments, static arguments), check its
    observation, and (when applied) its numbers against the closed form and ``refs``: (oracle
    id, gradients) pairs."""
    __tracebackhide__ = True
    c, k, d, w = xs
    method, program, args, static = call
    try:
        e, grads = recall(record.subject, method, program, *args, **static)
    except Exception as err:  # XLA cannot compile Python ops; tf.gradients refuses eagerly
        record.check(EXPECT, **{key: observe_error(err, key)})
        return None
    record.close(name=f"value[{key}]", out=e, ref=c + k, oracle="closed-form", tol=cmp.EXACT)  # one rounding
    kind = backward_kind(grads, c, k, d, w, default=default)
    record.check(EXPECT, **{key: kind})
    if kind == "applied":
        scales = declared_scales(c, k, d, w)
        for name, g, r, at in zip(("dc", "dk", "dd"), grads, declared(c, k, d, w), scales):
            record.close(name=f"{name}[{key}]", out=g, ref=r, oracle="closed-form", scale=capped(at, r))
        for oracle, ref in refs:
            for name, g, r, at in zip(("dc", "dk", "dd"), grads, ref, scales):
                record.close(name=f"{name}[{key}]", out=g, ref=r, oracle=oracle, scale=capped(at, r))
    return grads


@given(xs=add_inputs().filter(distinguishable))
def test_custom_gradient_backward_is_applied(subject, oracles, record, xs):
    """e = c + k with declared backward ((e+d)w, d w, e w): tf.custom_gradient (tape and
    tf.gradients), jax.custom_vjp, jax.custom_jvp, torch.autograd.Function."""
    c, k, d, w = xs
    record.example(c=c, k=k, d=d, w=w)

    def call(static):
        if subject.framework == "tensorflow":  # the gradients by tape or tf.gradients, inside the program
            return "run", CustomAddGradients, (c, k, d, w), static
        return "vjp", CustomAdd, (c, k, d), {"cotangent": w, **static}

    refs = [(o.id, o.vjp(CustomAdd.of(o), c, k, d, cotangent=w, **ORACLE_STATIC[o.framework])[1]) for o in oracles]
    for key, static in CUSTOM_ADD_RUNS[subject.framework].items():
        _observe(record, key, call(static), xs, default=(w, w, None), refs=refs)


@on("tensorflow")
@given(xs=add_inputs().filter(distinguishable))
def test_custom_gradient_with_variables_backward_is_applied(subject, record, xs):
    """k read from a variable inside the forward: grad_fn(g, variables) gives its gradient d*w.
    TensorFlow only: JAX has no variables, and a torch Parameter is an ordinary input of
    Function.apply, as in the test above."""
    c, k, d, w = xs
    record.example(c=c, k=k, d=d, w=w)
    ref = None if subject.mode == "graph" else _eager_variable(subject.module, k)
    for a in APIS:
        _observe(
            record,
            f"custom_gradient_variables/{a}",
            ("run", CustomGradientVariables, (c, k, d, w), {"api": a, "var_ref": ref}),
            xs,
            default=(w, w, None),
        )


@pytest.mark.parametrize("op", PY_OPS)
@on("tensorflow")
@given(xs=add_inputs().filter(distinguishable))
def test_python_op_backward_per_mechanism(subject, record, op, xs):
    """The seed's op with a Python forward (py_func, py_function, numpy_function): its own
    gradient, and the declared backward attached by gradient_override_map or
    tf.custom_gradient, under GradientTape and tf.gradients. TensorFlow-only APIs."""
    c, k, d, w = xs
    record.example(c=c, k=k, d=d, w=w, op=op)
    own = (w, w, None) if op == "py_function" else (None, None, None)
    for a in APIS:
        try:
            e, grads = recall(subject, "run", CustomAddGradients, c, k, d, w, op=op, how="default", api=a)
        except Exception as err:
            record.check(EXPECT, **{f"{op}_default/{a}": observe_error(err, f"{op}_default/{a}")})
        else:
            record.close(name=f"value[{op}]", out=e, ref=c + k, oracle="closed-form", tol=cmp.EXACT)
            record.check(EXPECT, **{f"{op}_default/{a}": default_kind(grads, w)})
            if op == "py_function":
                g = grads[2]
                unused = (
                    "none"
                    if g is None
                    else "scalar-zero"
                    if np.shape(g) == () and not np.any(g)
                    else "zero"
                    if np.shape(g) == d.shape and not np.any(g)
                    else "other"
                )
                record.check(EXPECT, py_function_unused_input=unused)
        for how in ("override_map", "custom_gradient"):
            _observe(
                record,
                f"{how}_{op}/{a}",
                ("run", CustomAddGradients, (c, k, d, w), {"op": op, "how": how, "api": a}),
                xs,
                default=own,
            )


@given(inp=attention_inputs())
def test_bernoulli_attention_gradient_is_declared_whatever_the_sample(subject, oracles, record, inp):
    """seeds/003: forward samples Bernoulli(p); the gradient of sum(w * mask) is w * f for two
    different samples; p = 0 and p = 1 give certain samples."""
    p, f, w, seed = inp
    record.example(p=p, f=f, w=w, seed=seed)
    fn = Bernoulli.of(subject)
    for s in (seed, seed + np.int32(1)):
        mask, (gp, gf, _) = subject.vjp(fn, p, f, s, cotangent=w)
        mask = np.asarray(mask)
        record.equal(name="mask in {0, 1}", out=bool(np.isin(mask, (0, 1)).all()), ref=True, oracle="closed-form")
        record.equal(name="mask[p=0]", out=mask[p == 0], ref=np.zeros_like(p[p == 0]), oracle="closed-form")
        record.equal(name="mask[p=1]", out=mask[p == 1], ref=np.ones_like(p[p == 1]), oracle="closed-form")
        ok = _matches((gp, gf), (w * f, np.zeros_like(f)), p.dtype, (0.0, 0.0))
        record.check(EXPECT, bernoulli_backward="applied" if ok else "other")
        # a product, per element (scale 0: relative; a subnormal w*f may be flushed: FLUSHED)
        record.close(name="dp", out=gp, ref=w * f, oracle="closed-form", scale=0.0)
        record.close(name="df", out=gf, ref=np.zeros_like(f), oracle="closed-form", tol=cmp.EXACT)
        for o in oracles if s == seed else ():  # the gradient does not depend on the sample
            _, (rp, rf, _) = o.vjp(Bernoulli.of(o), p, f, s, cotangent=w)
            record.close(name="dp", out=gp, ref=rp, oracle=o.id, scale=0.0)


# ---------------------------------------------------------------- seed examples
SEED_C, SEED_K = np.array([0.05, -0.12], np.float32), np.array([0.13, 0.07], np.float32)


@example(c=SEED_C, k=SEED_K)
@example(  # a thorough run's draw: dL/dc[0] = 0.0022, 4e-8 off, once held at float64's floor ('other')
    c=np.array([-0.13827994, -0.1875], np.float32), k=np.array([-0.1328125, 0.0], np.float32)
)
@given(c=hnp.arrays(np.float32, 2, elements=small), k=hnp.arrays(np.float32, 2, elements=small))
def test_seed_model_gradients_follow_the_declared_backward(subject, record, c, k):
    """seeds/001 model (data [1, 2], labels [0, 1]) in each framework's own spelling: the loss
    equals the tf.add model's; the gradients are the chain rule through the declared
    backward, which is not the slide's (e+d) dL/da, d dL/da."""
    record.example(c=c, k=k)
    fn = SeedModel.of(subject)
    loss, (gc, gk, _, _) = subject.vjp(fn, c, k, SEED_DATA, SEED_LABELS)
    plain, (pc, pk, _, _) = subject.vjp(fn, c, k, SEED_DATA, SEED_LABELS, plain=True)
    ref_loss, applied, true = seed_closed_form(c, k, SEED_DATA, SEED_LABELS)
    record.check(EXPECT, forward="equals-add" if np.array_equal(loss, plain) else "differs")
    record.close(name="loss", out=loss, ref=np.float32(ref_loss), oracle="closed-form", tol=cmp.VALUE)
    record.check(
        EXPECT,
        seed_backward="applied"
        if _matches((gc, gk), applied, c.dtype)
        else "ignored"
        if _matches((gc, gk), true, c.dtype)
        else "other",
    )
    record.close(name="dL/dc", out=gc, ref=applied[0].astype(c.dtype), oracle="closed-form")
    record.close(name="dL/dk", out=gk, ref=applied[1].astype(c.dtype), oracle="closed-form")
    record.close(name="dL/dc[tf.add]", out=pc, ref=true[0].astype(c.dtype), oracle="closed-form")
    record.close(name="dL/dk[tf.add]", out=pk, ref=true[1].astype(c.dtype), oracle="closed-form")
    record.check(EXPECT, slide_chain_rule="matches" if _matches((gc, gk), true, c.dtype) else "differs")


@on("tensorflow", modes=("graph",))
@example(c=SEED_C, k=SEED_K)
@example(  # a thorough run's draw: dL/dc[0] = -0.0098, 4e-8 off, once held at float64's floor ('other')
    c=np.array([-0.1953125, -0.1953125], np.float32), k=np.array([-0.05919345, -0.125], np.float32)
)
@given(c=hnp.arrays(np.float32, 2, elements=small), k=hnp.arrays(np.float32, 2, elements=small))
def test_seed_v1_session_as_written(subject, record, c, k):
    """seeds/001 run as written in a v1 Session (graph only: placeholders, py_func and
    gradient_override_map are TF1 graph code): e equals tf.add(c, k), the gradients follow
    the declared backward, and one Adam step matches the closed form."""
    record.example(c=c, k=k)
    out = subject.run(SeedV1Graph.of(subject), c, k, SEED_LABELS, SEED_DATA, custom=True)
    ref = subject.run(SeedV1Graph.of(subject), c, k, SEED_LABELS, SEED_DATA, custom=False)
    ref_loss, applied, true = seed_closed_form(c, k, SEED_DATA, SEED_LABELS)
    e = np.asarray(out["e"][0])
    record.check(
        EXPECT, forward="equals-add" if np.array_equal(e, ref["e"]) and out["loss"] == ref["loss"] else "differs"
    )
    record.close(name="loss", out=out["loss"], ref=np.float32(ref_loss), oracle="closed-form", tol=cmp.VALUE)
    gc, gk = out["grads"]
    kind = "applied" if _matches((gc, gk), applied, c.dtype) else "ignored" if gk is None else "other"
    record.check(EXPECT, **{"override_map_py_func/tf.gradients": kind})
    record.close(name="dL/dc", out=gc, ref=applied[0].astype(c.dtype), oracle="closed-form")
    record.close(name="dL/dk", out=gk, ref=applied[1].astype(c.dtype), oracle="closed-form")
    record.close(name="dL/dc[tf.add]", out=ref["grads"][0], ref=true[0].astype(c.dtype), oracle="closed-form")
    record.close(name="dL/dk[tf.add]", out=ref["grads"][1], ref=true[1].astype(c.dtype), oracle="closed-form")
    record.check(EXPECT, slide_chain_rule="matches" if _matches((gc, gk), ref["grads"], c.dtype) else "differs")
    for name, var, g, after in zip(("c", "k"), (c, k), applied, out["after"]):
        step = adam_step(var.astype(np.float64), g).astype(c.dtype)
        # the step subtracts up to lr_t from var: rounding is at that magnitude, not the result's
        scale = max(float(np.max(np.abs(var))), ADAM_LR_T)
        record.close(
            name=f"{name} after one Adam step", out=after, ref=step, oracle="closed-form", tol=ADAM_TOL, scale=scale
        )
