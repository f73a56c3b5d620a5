"""Batch-norm moving statistics: updated only when the update actually runs.

Source: seeds/001 ("Control dependencies"): the moving mean/variance ``assign`` ops of batch
normalisation are independent nodes, so a v1 Session that fetches only the train op never
runs them; ``with tf.control_dependencies(get_collection(UPDATE_OPS)): train_op = ...`` or
``sess.run([train_op, extra_update_ops])`` does. Each update is the exponential moving
average ``moving = momentum * moving + (1 - momentum) * batch_stat`` (Keras' convention;
PyTorch's ``momentum=m`` means ``(1 - m) * moving + m * batch``, so the oracle gets
``1 - momentum``), compared here with its closed form over a few steps. Keras
``BatchNormalization`` is called with ``training=True``, ``training=False``,
``trainable=False`` and without ``training``; the seed's pattern is built by hand
(``assign`` ops in ``UPDATE_OPS``, an SGD train op) and run three ways: train op only, with
control_dependencies, fetched together.

Declared surprises:

* In a v1 graph Keras ``BatchNormalization(training=True)`` puts its update ops neither in
  ``UPDATE_OPS`` nor among the output's control inputs: running the output leaves the statistics.
* Keras 2 weights the batch statistic with 1 - momentum rounded to float32, so a float64 layer's
  EMA is about 1e-8 relative off the float64 one (``EMA decay``: ``float32``).
* PyTorch stores the unbiased batch variance in ``running_var``; Keras the biased one.
* PyTorch has no ``trainable`` flag: ``requires_grad_(False)`` freezes the affine parameters
  but the running statistics still move.
* A fresh PyTorch module is in training mode, so a bare call updates the running statistics.
* Eager and ``tf.function``/XLA run an unfetched update anyway (automatic control
  dependencies): the train op alone updates outside a Session.
* ``tf.compat.v1.layers.batch_normalization`` is gone with Keras 3 (``unavailable``).

Variables: in TF2 modes one Keras layer per (features, dtype, momentum) is created eagerly by
the test, before any ``tf.function`` traces; the seed's hand-written variables are the harness'
``Variables`` (made outside any trace on first use; one traced function per dtype and features).
Both are reset with ``assign`` at the start of every call; a v1 graph builds them initialised
from the fed inputs. The seed's Session
pattern needs several ``Session.run`` calls (one per step, then a read), more than the
harness' one run per call: that test drives its own cached Session in ``graph`` mode.
"""

import dataclasses

import numpy as np
from hypothesis import example, given, strategies as st

from suite import compare as cmp, strategies as ss
from suite.behaviours import Floor, behaviour, on
from suite.expectations import expect, expectations
from suite.frameworks import resources
from suite.frameworks.tf_runner import Variables, in_v1_graph
from suite.program import Program

KERAS_BN = "https://keras.io/api/layers/normalization_layers/batch_normalization/"
KERAS_BN_SOURCE = (
    "https://github.com/keras-team/keras/blob/master/keras/src/layers/normalization/batch_normalization.py"
)
TORCH_BN = "https://pytorch.org/docs/stable/generated/torch.nn.BatchNorm1d.html"
TORCH_TRAIN = "https://pytorch.org/docs/stable/generated/torch.nn.Module.html#torch.nn.Module.train"
CONTROL_DEPS = "https://www.tensorflow.org/api_docs/python/tf/control_dependencies"
KERAS2_BN_SOURCE = (
    "https://github.com/keras-team/keras/blob/v2.15.0/keras/src/layers/normalization/batch_normalization.py"
)
KERAS2_ADD_UPDATE = "https://github.com/keras-team/keras/blob/v2.15.0/keras/src/engine/base_layer_v1.py"
LAZY_LOADER = "https://github.com/tensorflow/tensorflow/blob/master/tensorflow/python/util/lazy_loader.py"

BEHAVIOUR = behaviour(
    "batch-norm-update-ops",
    sources=["001"],
    links=[
        KERAS_BN,
        TORCH_BN,
        CONTROL_DEPS,
        "https://www.tensorflow.org/api_docs/python/tf/compat/v1/get_collection",
        "https://www.tensorflow.org/api_docs/python/tf/compat/v1/Session#run",
    ],
    floor=Floor(
        "array",
        "Every compared float is a moving mean or variance: an EMA over steps of batch moments (a sum over the "
        "batch, the variance as E[x^2] - E[x]^2, cancelling at the magnitude of E[x^2]), so each entry rounds "
        "at the magnitude of what it summed; the classifiers (decay, biased or unbiased) compare the same "
        "quantities.",
    ),
)

V1_LAYERS = "tf.compat.v1.layers.batch_normalization"
EXPECT = expectations(
    {
        "training=True": "updated",
        "training=False": "not-updated",
        "trainable=False": "not-updated",
        "no training argument": "not-updated",
        "batch variance": "biased",
        "train op only": "not-updated",
        "control_dependencies": "updated",
        "fetched with train op": "updated",
        "train op": "ran",
        V1_LAYERS: "updated",
        "EMA decay": "input dtype",
    },
    expect(
        "training=True",
        "not-updated",
        framework="tensorflow",
        mode="graph",
        versions=">=2.16",
        link=KERAS_BN_SOURCE,
        reason="Keras 3 BatchNormalization.call does self.moving_mean.assign(...) and returns the "
        "normalised tensor: in a v1 graph the assign ops are neither in UPDATE_OPS (0 measured) "
        "nor control inputs of the output (no layer.updates to group), so running the output "
        "leaves the statistics as initialised",
    ),
    expect(
        "training=True",
        "not-updated",
        framework="tensorflow",
        mode="graph",
        versions="<2.16",
        link=KERAS2_ADD_UPDATE,
        reason="Keras 2 constructs a v1 layer in a v1 graph; its add_update keeps the AssignSubVariableOps "
        "in layer.updates (for Model.fit to run), not in UPDATE_OPS (0 measured), and the output "
        "does not depend on them, so running the output leaves the statistics as initialised",
    ),
    expect(
        "EMA decay",
        "float32",
        framework="tensorflow",
        versions="<2.16",
        link=KERAS2_BN_SOURCE,
        reason="Keras 2 BatchNormalization._assign_moving_average makes decay = "
        "tf.convert_to_tensor(1.0 - momentum), a float32 tensor, then casts it to the variable's "
        "dtype: a float64 layer averages with 1 - momentum rounded to float32 (0.1 -> "
        "0.10000000149), about 1e-8 relative off the float64 EMA; Keras 3 (and JAX, PyTorch) "
        "weight with the float64 1 - momentum",
    ),
    expect(
        "batch variance",
        "unbiased",
        framework="torch",
        link=TORCH_BN,
        reason="'the value stored in the moving average of the variance is calculated via the unbiased "
        "estimator, equivalent to torch.var(input, correction=1)'; Keras stores the biased one",
    ),
    expect(
        "trainable=False",
        "updated",
        framework="torch",
        link=TORCH_BN,
        reason="PyTorch has no trainable flag: requires_grad_(False) freezes weight/bias only, running "
        "statistics follow module.training (Keras 3 trainable=False means inference mode)",
    ),
    expect(
        "no training argument",
        "updated",
        framework="torch",
        link=TORCH_TRAIN,
        reason="a module starts in training mode, so bn(x) updates the running statistics; a Keras "
        "layer called without training= outside fit() runs in inference mode",
    ),
    expect(
        "train op only",
        "updated",
        framework="tensorflow",
        mode="eager|function|xla",
        link=CONTROL_DEPS,
        reason="eager runs every assign when it is written, and tf.function (XLA included) keeps every "
        "stateful op by automatic control dependencies: an unfetched update still runs",
    ),
    expect(
        V1_LAYERS,
        "unavailable",
        framework="tensorflow",
        versions=">=2.16",
        link=LAZY_LOADER,
        reason="with Keras 3 (the default from TF 2.16) tf.compat.v1.layers raises AttributeError "
        "'`batch_normalization` is not available with Keras 3.'",
    ),
)
# EMA of float32 batch moments (Keras: E[x^2] - E[x]^2) against the float64 closed form:
# a few ulps of values up to 30, i.e. the default gradient tolerance.
STAT_TOL = cmp.GRAD
SHAPES = ((1, 4, 3), (3, 2, 1))  # (steps, batch, features); batch > 1 (PyTorch refuses 1)
MOMENTA = (0.0, 0.9, 0.99)  # Keras convention; 0.99 is the Keras default
LR = 0.1  # the v1 train op's SGD step
CALLS = {
    "train": "training=True",
    "infer": "training=False",
    "frozen": "trainable=False",
    "default": "no training argument",
}


# ---------------------------------------------------------------- strategies
@dataclasses.dataclass(frozen=True)
class Batches:
    xs: np.ndarray  # (steps, batch, features) in [-3, 3]
    mean0: np.ndarray  # (features,) in [5, 10]: never a batch mean, so an update always shows
    var0: np.ndarray  # (features,) in [20, 30]: above any batch variance here (at most 18)
    momentum: float  # Keras convention


@st.composite
def batches(draw, *, shapes=SHAPES, momenta=MOMENTA) -> Batches:
    dtype = draw(ss.float_dtypes())
    # ci/quick: one (steps, batch, features) per dtype (issue 46), paired with the dtypes rather
    # than cut to the largest, so that both still occur: (1, 4, 3) has the elements, (3, 2, 1) the
    # several steps that chain the moving averages. dev and thorough draw every shape with each.
    menu = ss.shapes_for(dtype, shapes)
    steps, n, features = draw(st.sampled_from(menu), label="steps, batch, features")
    xs = draw(ss.float_arrays(dtype=dtype, shape=(steps, n, features), min_value=-3, max_value=3), label="xs")
    mean0 = draw(ss.float_arrays(dtype=dtype, shape=(features,), min_value=5, max_value=10), label="mean0")
    var0 = draw(ss.float_arrays(dtype=dtype, shape=(features,), min_value=20, max_value=30), label="var0")
    return Batches(xs, mean0, var0, draw(st.sampled_from(momenta), label="momentum"))


# ---------------------------------------------------------------- the programs
def _keras_call(layer, x, call):
    return layer(x) if call == "default" else layer(x, training=call != "infer")


def _read(tf, variable):
    """A variable's current value as a new tensor (in a v1 graph: a read op made here, under
    the enclosing control dependencies). ``variable.value`` is a property of a Keras 3
    variable but a method of the tf.Variable Keras 2 makes, so convert instead."""
    return tf.identity(tf.convert_to_tensor(variable))


_LAYERS = {}


def keras_layer(tf, *, features, dtype, momentum, frozen):
    """One built layer per configuration; the tests make it eagerly, before any tf.function
    traces (a traced function may create variables only on its first trace).

    Keras 2 (TF < 2.16) picks a layer's base class, v1 or v2, whenever one is constructed by
    rebinding ``__bases__`` of its class (``swap_class`` in
    https://github.com/keras-team/keras/blob/v2.15.0/keras/src/utils/version_utils.py), so a
    layer made in a v1 graph turns the layers made eagerly before it into v1 layers ('Your
    Layer or Model is in an invalid state'). The v1-graph builders therefore empty this cache:
    the next eager request constructs a fresh layer, which swaps the class back."""
    key = (features, dtype, momentum, frozen)
    if key not in _LAYERS:
        layer = tf.keras.layers.BatchNormalization(momentum=momentum, trainable=not frozen, dtype=dtype)
        layer.build((None, features))
        _LAYERS[key] = layer
    return _LAYERS[key]


class MovingStats(Program):
    """Batch norm over the steps xs[0], xs[1], ...: the moving statistics (and, for TF in a v1
    graph, how many ops the layer put in UPDATE_OPS). ``call``: train, infer, frozen or default."""

    def tensorflow(tf, xs, mean0, var0, *, momentum, call="train", features):
        """Keras BatchNormalization: the cached layer, reset to mean0/var0; in a v1 graph a new one."""
        frozen = call == "frozen"
        if in_v1_graph():
            layer = tf.keras.layers.BatchNormalization(
                momentum=momentum,
                trainable=not frozen,
                dtype=xs.dtype.name,
                moving_mean_initializer=lambda shape, dtype=None: mean0,
                moving_variance_initializer=lambda shape, dtype=None: var0,
            )
            _LAYERS.clear()  # Keras 2: a layer made in a v1 graph invalidates those made eagerly
            outs = [_keras_call(layer, x, call) for x in tf.unstack(xs)]
            with tf.control_dependencies(outs):  # read after the steps, as a later sess.run would
                return (
                    _read(tf, layer.moving_mean),
                    _read(tf, layer.moving_variance),
                    len(tf.compat.v1.get_collection(tf.compat.v1.GraphKeys.UPDATE_OPS)),
                )
        layer = keras_layer(tf, features=features, dtype=xs.dtype.name, momentum=momentum, frozen=frozen)
        layer.moving_mean.assign(mean0)
        layer.moving_variance.assign(var0)
        for x in xs:
            _keras_call(layer, x, call)
        return _read(tf, layer.moving_mean), _read(tf, layer.moving_variance), None

    tensorflow.exact_shapes = True  # the v1-graph layer's variables are initialised from mean0/var0

    def jax(jax, xs, mean0, var0, *, momentum, call="train", features):
        """No stateful batch norm in core JAX: the EMA spelled in jnp (jnp.var is biased)."""
        jnp = jax.numpy
        mean, var = mean0, var0
        for x in xs:
            mean = momentum * mean + (1 - momentum) * jnp.mean(x, axis=0)
            var = momentum * var + (1 - momentum) * jnp.var(x, axis=0)
        return mean, var, None

    def torch(torch, xs, mean0, var0, *, momentum, call="train", features):
        bn = torch.nn.BatchNorm1d(
            features, momentum=1.0 - momentum, dtype=xs.dtype, device=xs.device
        )  # torch convention
        with torch.no_grad():
            bn.running_mean.copy_(mean0)
            bn.running_var.copy_(var0)
        if call != "default":
            bn.train(call != "infer")
        bn.requires_grad_(call != "frozen")
        for x in xs:
            bn(x)
        return bn.running_mean, bn.running_var, None


# The seed's pattern by hand: y = gamma * (x - mean) / sqrt(var + eps) + beta with the batch
# moments, assign ops for the moving statistics, an SGD train op on gamma and beta.
def _moments_and_loss(tf, x, gamma, beta):
    mean, var = tf.nn.moments(x, axes=[0])
    y = gamma * (x - mean) * tf.math.rsqrt(var + 1e-3) + beta
    return mean, var, tf.reduce_mean(tf.square(y - 1))


def _ema_assigns(tf, mm, mv, mean, var, momentum):
    return [
        tf.compat.v1.assign(mm, momentum * mm + (1 - momentum) * mean),
        tf.compat.v1.assign(mv, momentum * mv + (1 - momentum) * var),
    ]


VARIABLES = Variables()


def seed_variables(tf, mean0, var0):
    """moving mean, moving variance (not trainable), gamma, beta: ``VARIABLES``', set to mean0,
    var0, ones and zeros."""
    inits = {"moving_mean": mean0, "moving_variance": var0, "gamma": tf.ones_like(mean0), "beta": tf.zeros_like(mean0)}
    return [VARIABLES.get(tf, init, name=n, trainable=n in ("gamma", "beta")) for n, init in inits.items()]


class UpdateOps(Program):
    """TF2 modes: the seed's step per batch; ``variant`` says how the update meets the train op.
    Returns the moving statistics and beta (the train op moves it: dL/dbeta = -2 at beta = 0)."""

    def tensorflow(tf, xs, mean0, var0, momentum, *, variant, sig):
        mm, mv, gamma, beta = seed_variables(tf, mean0, var0)
        opt = tf.compat.v1.train.GradientDescentOptimizer(LR)
        for x in xs:
            with tf.GradientTape() as tape:
                mean, var, loss = _moments_and_loss(tf, x, gamma, beta)
            grads = tape.gradient(loss, [gamma, beta])
            update_ops = _ema_assigns(tf, mm, mv, mean, var, momentum)
            if variant == "control_dependencies":
                with tf.control_dependencies(update_ops):
                    opt.apply_gradients(zip(grads, [gamma, beta]))
            elif variant == "fetched":
                tf.group(opt.apply_gradients(zip(grads, [gamma, beta])), *update_ops)
            else:
                opt.apply_gradients(zip(grads, [gamma, beta]))
        return tf.identity(mm), tf.identity(mv), tf.identity(beta)


_SESSIONS = resources.PerTest()  # one Session per test and variant, closed when the test ends


def tensorflow_v1_session(subject, xs, mean0, var0, momentum, *, variant):
    """graph mode: seeds/001 as written, one ``sess.run`` per step then one to read the
    statistics (and beta, which the train op moves)."""
    tf = subject.module
    key = (subject.id, variant, xs.dtype.str, xs.shape[-1])
    if key not in _SESSIONS:
        g = tf.Graph()
        with g.as_default(), tf.device(subject.device_name):
            v1 = tf.compat.v1
            x = v1.placeholder(xs.dtype, [None, xs.shape[-1]], name="x")
            m0, s0 = (v1.placeholder(xs.dtype, [xs.shape[-1]], name=n) for n in ("mean0", "var0"))
            mom = v1.placeholder(xs.dtype, [], name="momentum")
            mm = v1.get_variable("moving_mean", initializer=m0, trainable=False)
            mv = v1.get_variable("moving_variance", initializer=s0, trainable=False)
            gamma = v1.get_variable("gamma", initializer=tf.ones_like(m0))
            beta = v1.get_variable("beta", initializer=tf.zeros_like(m0))
            mean, var, loss = _moments_and_loss(tf, x, gamma, beta)
            for op in _ema_assigns(tf, mm, mv, mean, var, mom):
                v1.add_to_collection(v1.GraphKeys.UPDATE_OPS, op)
            extra_update_ops = v1.get_collection(v1.GraphKeys.UPDATE_OPS)
            opt = v1.train.GradientDescentOptimizer(LR)
            if variant == "control_dependencies":
                with tf.control_dependencies(extra_update_ops):
                    train_op = opt.minimize(loss)
            else:
                train_op = opt.minimize(loss)
            fetches = [train_op, extra_update_ops] if variant == "fetched" else train_op
            init = v1.global_variables_initializer()
        g.finalize()
        _SESSIONS[key] = (resources.track(v1.Session(graph=g)), x, m0, s0, mom, fetches, init, (mm, mv, beta))
    sess, x, m0, s0, mom, fetches, init, stats = _SESSIONS[key]
    sess.run(init, feed_dict={m0: mean0, s0: var0})
    for batch in xs:
        sess.run(fetches, feed_dict={x: batch, mom: momentum})
    return sess.run(stats)


class V1Layers(Program):
    """The seed-era layer: its update ops in UPDATE_OPS, grouped with control_dependencies."""

    def tensorflow(tf, x, *, momentum):
        _LAYERS.clear()  # Keras 2: its legacy layer subclasses the Keras one (see keras_layer)
        y = tf.compat.v1.layers.batch_normalization(x, momentum=momentum, training=True)
        update_ops = tf.compat.v1.get_collection(tf.compat.v1.GraphKeys.UPDATE_OPS)
        with tf.control_dependencies(update_ops):
            train_op = tf.compat.v1.train.GradientDescentOptimizer(LR).minimize(tf.reduce_mean(tf.square(y - 1)))
        mm, mv = (v for v in tf.compat.v1.global_variables() if "moving_" in v.name)
        with tf.control_dependencies([train_op]):
            return tf.identity(mm), tf.identity(mv)

    tensorflow.exact_shapes = True  # the layer needs the static feature dimension


# ---------------------------------------------------------------- closed forms, classifiers
DECAYS = ("input dtype", "float32")  # the weight 1 - momentum: exact, or rounded to float32 first


def ema(b, *, ddof=0, decay="input dtype"):
    """The moving statistics after every step, in float64 rounded to the input dtype (ddof=1:
    PyTorch's unbiased variance; decay="float32": the batch statistic's weight 1 - momentum
    rounded to float32, as Keras 2 does before casting it to a float64 layer's dtype)."""
    keep, w = b.momentum, 1 - b.momentum
    if decay == "float32":
        w = float(np.float32(w))
        keep = 1 - w
    mean, var = b.mean0.astype(np.float64), b.var0.astype(np.float64)
    for x in b.xs.astype(np.float64):
        mean = keep * mean + w * x.mean(0)
        var = keep * var + w * x.var(0, ddof=ddof)
    return mean.astype(b.xs.dtype), var.astype(b.xs.dtype)


def ema_scales(b):
    """Per feature, the magnitude each step's update rounds at, for the moving mean and the
    moving variance: the largest of the initial value and the batch statistics (either ddof),
    since every moving value is a weighted mean of those. Keras 2 updates by
    ``v - (v - x) * (1 - m)``, which rounds ``v - x`` at that magnitude, not the result's: with
    momentum 0 and a batch mean of 1.19e-07 under an initial 5, float32 gives 0 (``5 - 1.19e-07``
    rounds to 5), 1.19e-07 from the exact EMA: a quarter of an ulp of the 5 it was computed at
    (a ci draw on TF 2.12-2.15, 2026-11-30). Keras 3, JAX and PyTorch weight the two terms and
    keep it."""
    xs = b.xs.astype(np.float64)
    means = np.abs(xs.mean(1))
    var = np.maximum(xs.var(1), xs.var(1, ddof=1)) if xs.shape[1] > 1 else xs.var(1)
    mean_scale = np.maximum(np.abs(b.mean0.astype(np.float64)), means.max(0))
    var_scale = np.maximum(np.abs(b.var0.astype(np.float64)), var.max(0))
    return mean_scale, var_scale


def decays_agree(b) -> bool:
    """Whether the two decay roundings give the same statistics within tolerance (all but
    float64 inputs with momentum not 0)."""
    tol, scales = STAT_TOL.of(b.xs.dtype), ema_scales(b)
    return all(
        cmp.rel_err(e, f, scale=k) <= tol
        for d in (0, 1)
        for e, f, k in zip(ema(b, ddof=d), ema(b, ddof=d, decay="float32"), scales)
    )


def decay_kind(mean, b):
    """Which rounding of 1 - momentum the moving mean was averaged with (None where they agree)."""
    if decays_agree(b):
        return None
    tol, scale = STAT_TOL.of(b.xs.dtype), ema_scales(b)[0]
    return next((d for d in DECAYS if cmp.rel_err(mean, ema(b, decay=d)[0], scale=scale) <= tol), "other")


def variance_kind(var, b, *, decay="input dtype"):
    """Which batch variance the moving variance averages (None where the two agree)."""
    tol, scale = STAT_TOL.of(b.xs.dtype), ema_scales(b)[1]
    (_, biased), (_, unbiased) = ema(b, decay=decay), ema(b, ddof=1, decay=decay)
    if cmp.rel_err(biased, unbiased, scale=scale) <= tol:
        return None
    return next(
        (k for k, ref in (("biased", biased), ("unbiased", unbiased)) if cmp.rel_err(var, ref, scale=scale) <= tol),
        "other",
    )


def update_kind(mean, var, b) -> str:
    """``not-updated`` (exactly the initial values), ``updated`` (the EMA, with either batch
    variance and either rounding of 1 - momentum: which one is checked apart) or ``other``."""
    if np.array_equal(mean, b.mean0) and np.array_equal(var, b.var0):
        return "not-updated"
    tol, (mscale, vscale) = STAT_TOL.of(b.xs.dtype), ema_scales(b)
    ok = any(
        cmp.rel_err(mean, ema(b, decay=c)[0], scale=mscale) <= tol
        and any(cmp.rel_err(var, ema(b, ddof=d, decay=c)[1], scale=vscale) <= tol for d in (0, 1))
        for c in DECAYS
    )
    return "updated" if ok else "other"


def refusal(record, e, api=None) -> str:
    """``unavailable`` only when ``api`` itself is missing (an AttributeError on its name);
    any other error is ``raises:<Error>`` (its message goes to the row's notes)."""
    seen = cmp.unavailable_or_raised(e, api) if api else cmp.error_name(e)
    if seen == "unavailable":
        record.note(f"{type(e).__name__}: {e}")
    return seen


def oracle_name(o) -> str:
    """JAX has no batch-norm layer: its row restates the EMA closed form in jnp, so it is
    named (and filed) as a closed form; PyTorch's BatchNorm1d is the independent oracle."""
    return o.id if o.framework == "torch" else f"closed-form (jnp EMA, {o.id})"


# ---------------------------------------------------------------- properties
def _stats(runner, b, call):
    if runner.framework == "tensorflow" and runner.mode != "graph":
        with runner.module.device(runner.device_name):
            keras_layer(
                runner.module,
                features=b.xs.shape[-1],
                dtype=b.xs.dtype.name,
                momentum=b.momentum,
                frozen=call == "frozen",
            )
    return runner.run(
        MovingStats.of(runner), b.xs, b.mean0, b.var0, momentum=b.momentum, call=call, features=b.xs.shape[-1]
    )


def _example(record, b):
    record.example(xs=b.xs, mean0=b.mean0, var0=b.var0, momentum=b.momentum)


#: float64 with momentum != 0, where the two roundings of 1 - momentum differ beyond tolerance, so
#: every updating row observes "EMA decay" whatever the draws; (3, 2, 1) is float64's shape at ci.
FLOAT64_DECAY = Batches(
    np.array([[[-3.0], [3.0]], [[1.0], [-1.0]], [[2.0], [-2.5]]]), np.array([5.0]), np.array([20.0]), 0.9
)


@example(b=FLOAT64_DECAY)
@given(b=batches())
def test_training_updates_moving_statistics_to_the_ema(subject, oracles, record, b):
    """training=True: moving = m * moving + (1 - m) * batch moment after every step (Keras
    convention); the variance averaged is the biased one (PyTorch: unbiased, declared)."""
    _example(record, b)
    try:
        mean, var, n_update_ops = _stats(subject, b, "train")
    except Exception as e:  # the framework's refusal is the observation
        record.check(EXPECT, **{"training=True": refusal(record, e)})
        return
    if n_update_ops is not None:
        record.observe(update_ops_collected=n_update_ops)
    kind = update_kind(mean, var, b)
    record.check(EXPECT, **{"training=True": kind})
    if kind != "updated":
        return
    rounding = decay_kind(mean, b)
    if rounding is not None:
        record.check(EXPECT, **{"EMA decay": rounding})
    decay = EXPECT.lookup("EMA decay", subject)[0]
    conv = variance_kind(var, b, decay=decay)
    if conv is not None:
        record.check(EXPECT, **{"batch variance": conv})
    want = EXPECT.lookup("batch variance", subject)[0]
    mscale, vscale = ema_scales(b)
    record.close(
        name="moving_mean", out=mean, ref=ema(b, decay=decay)[0], oracle="closed-form", tol=STAT_TOL, scale=mscale
    )
    record.close(
        name="moving_variance",
        out=var,
        ref=ema(b, ddof=int(want == "unbiased"), decay=decay)[1],
        oracle="closed-form",
        tol=STAT_TOL,
        scale=vscale,
    )
    for o in oracles:
        if EXPECT.lookup("EMA decay", o)[0] != decay and not decays_agree(b):
            continue  # a declared rounding difference: each was checked against its closed form
        rmean, rvar, _ = _stats(o, b, "train")
        record.close(name="moving_mean", out=mean, ref=rmean, oracle=oracle_name(o), tol=STAT_TOL, scale=mscale)
        if EXPECT.lookup("batch variance", o)[0] == want:
            record.close(name="moving_variance", out=var, ref=rvar, oracle=oracle_name(o), tol=STAT_TOL, scale=vscale)


@on("tensorflow", "torch")
@given(b=batches(momenta=(0.9,)))  # momentum does not matter when nothing moves: fewer XLA compiles
def test_inference_and_frozen_calls_leave_moving_statistics(subject, record, b):
    """training=False, trainable=False and a call without training=: Keras leaves the moving
    statistics; PyTorch's analogues (eval(), requires_grad_(False), a bare call) are declared.
    Not JAX: core JAX has no stateful batch-norm layer (its EMA row is the oracle above)."""
    _example(record, b)
    for call in ("infer", "frozen", "default"):
        try:
            mean, var, _ = _stats(subject, b, call)
        except Exception as e:  # the framework's refusal is the observation
            record.check(EXPECT, **{CALLS[call]: refusal(record, e)})
            continue
        record.check(EXPECT, **{CALLS[call]: update_kind(mean, var, b)})


def _check_variants(subject, record, b):
    """Run the three variants of the seeds/001 step; check and return {variant: moving mean}."""
    __tracebackhide__ = True
    momentum = np.asarray(b.momentum, b.xs.dtype)
    means = {}
    for variant, key in (
        ("train_op", "train op only"),
        ("control_dependencies", "control_dependencies"),
        ("fetched", "fetched with train op"),
    ):
        if subject.mode == "graph":
            mean, var, beta = tensorflow_v1_session(subject, b.xs, b.mean0, b.var0, momentum, variant=variant)
        else:
            sig = (b.xs.dtype.str, b.xs.shape[-1])  # one traced function per set of VARIABLES
            mean, var, beta = subject.run(
                UpdateOps.of(subject), b.xs, b.mean0, b.var0, momentum, variant=variant, sig=sig
            )
        kind = update_kind(mean, var, b)
        record.check(EXPECT, **{"train op": "not-run" if np.array_equal(beta, 0 * beta) else "ran", key: kind})
        if kind == "updated":
            record.close(name=f"moving_mean[{variant}]", out=mean, ref=ema(b)[0], oracle="closed-form", tol=STAT_TOL)
            record.close(name=f"moving_variance[{variant}]", out=var, ref=ema(b)[1], oracle="closed-form", tol=STAT_TOL)
        means[variant] = mean
    return means


@on("tensorflow")
@given(b=batches())
def test_update_ops_run_only_with_the_train_op_when_grouped(subject, record, b):
    """seeds/001 by hand: assign ops in UPDATE_OPS and an SGD train op. A Session fetching the
    train op alone leaves the statistics; control_dependencies or fetching both updates them.
    TensorFlow only: the question is how TF runs stateful ops a fetch does not need."""
    _example(record, b)
    _check_variants(subject, record, b)


# ---------------------------------------------------------------- seed examples
SEED_X = np.array([[1, 2, 3], [4, 5, 6], [0, 1, 0], [2, 2, 2]], np.float32)


@on("tensorflow", "jax", "torch")
@given(b=st.just(Batches(SEED_X[None], np.zeros(3, np.float32), np.ones(3, np.float32), 0.99)))
def test_seed_one_step_from_keras_defaults(subject, record, b):
    """Algorithm 1 (seeds/001) on the 4x3 batch, momentum 0.99, moving (0, 1): batch mean
    (1.75, 2.5, 2.75), biased variance (2.1875, 2.25, 4.6875) -> moving mean (0.0175, 0.025,
    0.0275), variance (1.011875, 1.0125, 1.036875); PyTorch's unbiased (x 4/3) gives
    (1.0191667, 1.02, 1.0525)."""
    _example(record, b)
    mean, var, _ = _stats(subject, b, "train")
    kind = update_kind(mean, var, b)
    record.check(EXPECT, **{"training=True": kind})
    if kind != "updated":
        return
    variance = {"biased": [1.011875, 1.0125, 1.036875], "unbiased": [1.0191667, 1.02, 1.0525]}
    record.check(EXPECT, **{"batch variance": variance_kind(var, b)})
    record.close(
        name="moving_mean",
        out=mean,
        ref=np.array([0.0175, 0.025, 0.0275], np.float32),
        oracle="closed-form",
        tol=cmp.VALUE,
    )
    record.close(
        name="moving_variance",
        out=var,
        ref=np.array(variance[EXPECT.lookup("batch variance", subject)[0]], np.float32),
        oracle="closed-form",
        tol=cmp.VALUE,
    )


@on("tensorflow")
@given(b=st.just(Batches(np.stack([SEED_X] * 5), np.zeros(3, np.float32), np.ones(3, np.float32), 0.9)))
def test_seed_five_steps_three_ways(subject, record, b):
    """seeds/001's loop ``for i in range(5): session.run(...)`` on the 4x3 batch, momentum 0.9:
    updated means are (1 - 0.9**5) * (1.75, 2.5, 2.75) = (0.7166425, 1.023775, 1.1261525); the
    train op alone leaves (0, 0, 0) in a Session."""
    _example(record, b)
    updated = np.array([0.7166425, 1.023775, 1.1261525], np.float32)
    for variant, mean in _check_variants(subject, record, b).items():
        ref = b.mean0 if np.array_equal(mean, b.mean0) else updated
        record.close(name=f"moving_mean[{variant}]", out=mean, ref=ref, oracle="closed-form", tol=cmp.VALUE)


@on("tensorflow", modes=("graph",))
@given(x=st.just(SEED_X))
def test_v1_layers_batch_normalization_is_declared(subject, record, x):
    """tf.compat.v1.layers.batch_normalization, the seed-era layer (a v1-graph API, so graph
    only): where it exists, its UPDATE_OPS grouped by control_dependencies move (0, 1) to the EMA."""
    record.example(x=x)
    try:
        mean, var = subject.run(V1Layers.of(subject), x, momentum=0.99)
    except Exception as e:  # the framework's refusal is the observation
        record.check(EXPECT, **{V1_LAYERS: refusal(record, e, V1_LAYERS)})
        return
    b = Batches(x[None], np.zeros(3, x.dtype), np.ones(3, x.dtype), 0.99)
    record.check(EXPECT, **{V1_LAYERS: update_kind(mean, var, b)})
