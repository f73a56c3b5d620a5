"""Training-step semantics: what a hand-written training step does differently from ``fit()``.

A small model, ``Dense(2) -> BatchNormalization -> Dropout(1/2)`` on a (4, 3) float32 batch, run the
ways users run it:

* ``model(x)`` under a tape without ``training=True`` (tensorflow#31184, #36073, #32864, #28028,
  #36936): Keras runs BatchNormalization and Dropout in inference mode (moving statistics, no dropout,
  no update), so the custom loop trains another function than ``fit()``, which runs them in training
  mode. ``training=True``/``False``, the bare call and ``fit()`` are held to the float64 closed forms
  (batch or moving statistics, the observed dropout mask); PyTorch's ``train()``/``eval()`` (a fresh
  module is in training mode) and a hand-written JAX batch norm with a ``train`` flag (flax is not
  installed) are the oracles.
* ``BatchNormalization(trainable=False)`` called with ``training=True`` (keras#4762, keras PR 9965):
  Keras runs it in inference mode (moving statistics, no update) and the tape still gives gamma a
  gradient; PyTorch's ``requires_grad_(False)`` freezes gamma and beta only.
* ``trainable`` changed after ``compile()`` (keras#4674, #7965, #3804, #8121, #9157): Keras 2 freezes
  the trainable set into ``fit()`` at compile time, Keras 3 when ``fit()`` first makes its train
  function; a tape over ``model.trainable_variables`` and PyTorch's ``requires_grad_`` see the change
  at once. The GAN recipe (``D.trainable`` toggled between steps) trains D in its own step and not in
  the combined model's.
* A seeded Keras ``Dropout`` (keras#17548, tf-keras#60, tensorflow#44614): two ``tf.function``s of one
  model draw different masks; with Keras 3 ``predict()`` drops nothing in a model built with
  ``Dropout(...)(x, training=True)``; two fresh copies called eagerly agree with Keras 3, not Keras 2.
  JAX's explicit key and ``torch.manual_seed`` repeat a mask.
* Gradients of a model restored from a SavedModel or a ``.keras`` file, plain and with a
  ``tf.custom_gradient`` layer (tensorflow#34211, keras#16601, tf-keras#589): saved in one peer process,
  restored in another, equal to those before saving (the custom backward included) in every mode;
  a SavedModel written with ``experimental_custom_gradients=False`` refuses to differentiate the custom
  layer (tensorflow#34211's ``No gradient defined for operation ... IdentityN``).
* Gradient accumulation into a ``MirroredVariable`` (huggingface/transformers#2794, tensorflow#37834,
  #34203, #23792), two logical CPUs in a peer: SUM, MEAN and ONLY_FIRST_REPLICA leave the sum, the mean
  and the first replica's sum in every copy; without an aggregation the refusal users met is gone and
  each copy silently keeps its own replica's sum. JAX's explicit ``psum`` and DDP's ``no_sync``
  accumulation (an average) are the oracles.

Modes: eager, ``tf.function`` and XLA (``fit()``: ``run_eagerly=True``, its default train function,
``jit_compile=True``; the accumulation is a ``strategy.run``, eager and traced only). A v1 graph has no
row: Keras 3 models have no Session API, and Keras' update ops in a v1 graph are
batch-norm-update-ops'. The seeded-dropout property makes its own functions, so it runs in the eager
row.
"""

import dataclasses
import os

import numpy as np
import pytest
from hypothesis import assume, example, given, settings, strategies as st

from suite import compare as cmp, peers as pr, strategies as ss
from suite.behaviours import Floor, behaviour, declared_skip, on
from suite.expectations import expect, expectations, raises
from suite.program import Program

TF_31184 = "https://github.com/tensorflow/tensorflow/issues/31184"
TF_32864 = "https://github.com/tensorflow/tensorflow/issues/32864"
TF_28028 = "https://github.com/tensorflow/tensorflow/issues/28028"
KERAS_9965 = "https://github.com/keras-team/keras/pull/9965"
KERAS_9522 = "https://github.com/keras-team/keras/issues/9522"
KERAS_BN = "https://keras.io/api/layers/normalization_layers/batch_normalization/"
GAN_22 = "https://github.com/eriklindernoren/Keras-GAN/issues/22"
KERAS_8585 = "https://github.com/keras-team/keras/issues/8585"
KERAS_17548 = "https://github.com/keras-team/keras/issues/17548"
TF_KERAS_60 = "https://github.com/keras-team/tf-keras/issues/60"
TF_44614 = "https://github.com/tensorflow/tensorflow/issues/44614"
TF_33297 = "https://github.com/tensorflow/tensorflow/issues/33297"
TF_34211 = "https://github.com/tensorflow/tensorflow/issues/34211"
HF_2794 = "https://github.com/huggingface/transformers/issues/2794"
TF_MIRRORED_VARIABLE = "https://www.tensorflow.org/api_docs/python/tf/distribute/MirroredStrategy"
#: the first tf-nightly (with the keras-nightly of its day, 3.16.0.dev2026080804) whose predict() keeps a
#: functional model's built-in Dropout(training=True) (bisected: 2.22.0.dev20260731's Keras does not;
#: https://github.com/tensorflow/tensorflow/compare/323afda8d60...01ff5a35a49 holds no Keras change)
KERAS_PREDICT_TRAINING_FROM = "2.22.0.dev20260808"
TORCH_TRAIN = "https://pytorch.org/docs/stable/generated/torch.nn.Module.html#torch.nn.Module.train"

BEHAVIOUR = behaviour(
    "training-step-semantics",
    sources=[],
    modes=("eager", "function", "xla"),
    links=[TF_31184, TF_32864, TF_28028, KERAS_9965, KERAS_9522, GAN_22, KERAS_8585, KERAS_17548, TF_KERAS_60,
           TF_44614, TORCH_TRAIN, HF_2794, "https://github.com/tensorflow/tensorflow/issues/37834"],
    floor=Floor(
        "array",
        "Every compared result mixes elements: batch norm's outputs, gradients and moving mean (batch statistics "
        "over the rows), a Dense kernel after a fit() step and a restored Dense(2, tanh) model's gradients "
        "(matrix products over the batch), and accumulated gradients X^T (X w - y) / n summed over micro-batches "
        "and replicas; each is floored at the inputs' magnitude. Dropout and the seeded masks are kinds only.",
    ),
)  # fmt: skip

CALLS = ("training=True", "training=False", "no training argument")
STATS = ("batch-stats", "moving-stats")
SEEDED = ("fresh copies", "two functions of one model", "predict vs call")
EXPECT = expectations(
    {
        # training mode: what fit() trains, and what a fresh PyTorch module does when called
        **{f"batch-norm[{c}]": "batch-stats" for c in CALLS[::2]},
        **{f"dropout[{c}]": "active" for c in CALLS[::2]},
        **{f"moving-mean[{c}]": "updated" for c in CALLS[::2]},
        "batch-norm[training=False]": "moving-stats",
        "dropout[training=False]": "identity",
        "moving-mean[training=False]": "not-updated",
        "fit[batch-norm]": "batch-stats",
        "fit[moving-mean]": "updated",
        # a frozen layer in training mode: PyTorch freezes the affine parameters, the rest trains
        "frozen[batch-norm]": "batch-stats",
        "frozen[moving-mean]": "updated",
        "frozen[gamma-grad]": "none",
        # the flag acts when it is set (PyTorch's requires_grad_)
        "trainable-after-compile[before first fit]": "frozen",
        "trainable-after-compile[after first fit]": "frozen",
        "trainable-after-compile[tape]": "frozen",
        "gan[discriminator step]": "trains",
        "gan[combined step]": "frozen",
        # a restored model differentiates as the one saved
        **{f"restored[{f}|{p}]": "as-before-saving" for f in ("savedmodel", "keras") for p in ("plain", "custom")},
        "restored[savedmodel-no-custom|plain]": "as-before-saving",
        # SaveOptions(experimental_custom_gradients=False): the custom gradient is not in the file, and the
        # IdentityN that tf.custom_gradient leaves has no gradient of its own (traced: inside StagingError)
        "restored[savedmodel-no-custom|custom]": raises("LookupError", r"No gradient defined for operation.*IdentityN"),
        # an accumulator's copies after every replica's assign_add (JAX: psum; DDP: no_sync then an average)
        "accumulate[NONE]": raises("ValueError", r"aggregation"),
        "accumulate[SUM]": "sum",
        "accumulate[MEAN]": "mean",
        "accumulate[ONLY_FIRST_REPLICA]": "first-replica",
        "accumulate[psum]": "sum",
        "accumulate[no_sync]": "mean",
        # a seed repeats its mask (JAX's key; torch.manual_seed before each call)
        **{f"seeded-dropout[{how}]": "same-mask" for how in SEEDED},
        "dropout[predict, built with training=True]": "active",
    },
    expect(
        "batch-norm[no training argument]",
        "moving-stats",
        framework="tensorflow",
        reason="outside fit() a Keras model called without training= runs BatchNormalization in inference mode: "
        "a custom loop that writes model(x) under a tape normalises by the moving statistics and trains another "
        "function than fit() (it needs model(x, training=True)); a fresh PyTorch module is in training mode",
        link=TF_31184,
    ),
    expect(
        "dropout[no training argument]",
        "identity",
        framework="tensorflow",
        reason="Keras Dropout called without training= outside fit() is the identity (inference mode): the custom "
        "loop trains without dropout",
        link=TF_28028,
    ),
    expect(
        "moving-mean[no training argument]",
        "not-updated",
        framework="tensorflow",
        reason="in inference mode BatchNormalization leaves its moving statistics: a custom loop without "
        "training=True never updates them ('batch normalization layer should be called with argument "
        "training=True')",
        link=TF_32864,
    ),
    expect(
        "frozen[batch-norm]",
        "moving-stats",
        framework="tensorflow",
        reason="BatchNormalization with trainable=False runs in inference mode even when called with "
        "training=True (the fine-tuning behaviour of keras PR 9965, Keras' default since TF 2.0, documented on "
        "the layer): it normalises by the moving statistics; PyTorch's requires_grad_(False) freezes gamma and "
        "beta only",
        link=KERAS_9965,
    ),
    expect(
        "frozen[moving-mean]",
        "not-updated",
        framework="tensorflow",
        reason="a frozen BatchNormalization runs in inference mode, so training=True does not update its moving "
        "statistics (PyTorch's running statistics follow module.training alone)",
        link=KERAS_BN,
    ),
    expect(
        "frozen[gamma-grad]",
        "closed-form",
        framework="tensorflow",
        reason="layer.trainable=False takes gamma and beta out of trainable_weights but not off the tape: their "
        "variables were made trainable, so GradientTape watches them and gives them the inference-mode "
        "gradient (PyTorch's frozen parameters get none)",
        link=KERAS_9522,
    ),
    expect(
        "trainable-after-compile[before first fit]",
        "trains",
        framework="tensorflow",
        versions="<2.16",
        reason="Keras 2 collects the trainable weights when compile() runs: a layer set trainable=False after "
        "compile() still trains in fit() until compile() is called again (its 'Discrepancy between trainable "
        "weights and collected trainable weights' warning); Keras 3 reads the flag when fit() makes its "
        "train function",
        link=KERAS_8585,
    ),
    expect(
        "trainable-after-compile[after first fit]",
        "trains",
        framework="tensorflow",
        mode="function|xla",
        reason="fit() keeps the train function it traced on first use, with the trainable variables of that "
        "moment: a layer frozen after a first fit() trains on until compile() is called again (Keras 2 and 3; "
        "with run_eagerly=True nothing is traced and the flag acts at once)",
        link=GAN_22,
    ),
    expect(
        "trainable-after-compile[after first fit]",
        "trains",
        framework="tensorflow",
        versions="<2.16",
        reason="Keras 2 collects the trainable weights at compile(), so a layer frozen after compile() trains on "
        "in every later fit() until compile() is called again, run_eagerly=True included",
        link=KERAS_8585,
    ),
    expect(
        "seeded-dropout[predict vs call]",
        "different-mask",
        framework="tensorflow",
        versions="<2.16",
        reason="Keras 2's eager Dropout(seed=s) combines the op seed with the eager context's counter of random "
        "ops, so a call's mask depends on what ran before it in the process, where predict() draws in a fresh "
        "graph from the seed alone: the two agree only at a process' first random op (measured), never here",
        link=TF_33297,
    ),
    expect(
        "accumulate[NONE]",
        "per-replica",
        framework="tensorflow",
        reason="the refusal users met (ValueError 'You must specify an aggregation method to update a "
        "MirroredVariable in Replica Context', TF 2.1-2.2) is gone: assign_add without an aggregation in replica "
        "context updates each replica's own copy, so the copies of a MirroredVariable silently hold different "
        "per-replica sums and reading it gives the first replica's (measured)",
        link=HF_2794,
    ),
    expect(
        "restored[savedmodel-no-custom|custom]",
        raises("StagingError", r"No gradient defined for operation.*IdentityN"),
        framework="tensorflow",
        mode="function|xla",
        reason="a SavedModel written without its custom gradients restores the forward ops and an IdentityN with no "
        "registered gradient: differentiating it raises LookupError, wrapped in StagingError where the gradient is "
        "traced (tensorflow#34211's error, the default until experimental_custom_gradients; loading warns 'ops "
        "with unsaved custom gradients. Will likely fail if a gradient is requested')",
        link=TF_34211,
    ),
    expect(
        "seeded-dropout[two functions of one model]",
        "different-mask",
        framework="tensorflow",
        reason="a seeded Keras Dropout keeps a seed state that moves on every traced call: each tf.function made "
        "from the model (fit's, predict's, a user's) draws another mask from the same seed",
        link=KERAS_17548,
    ),
    expect(
        "seeded-dropout[fresh copies]",
        "different-mask",
        framework="tensorflow",
        versions="<2.16",
        reason="Keras 2's eager Dropout(seed=s) draws through a RandomGenerator whose seed moves with every "
        "layer and call made in the process: two fresh identically seeded models draw different masks; Keras 3 "
        "starts each layer's SeedGenerator from the seed",
        link=TF_KERAS_60,
    ),
    expect(
        "dropout[predict, built with training=True]",
        "identity",
        framework="tensorflow",
        versions=f">=2.16,<{KERAS_PREDICT_TRAINING_FROM}",
        reason="Keras 3's predict() calls the model with training=False, which overrides the training=True a "
        "functional model's Dropout was built with: predict() drops nothing where a call drops half (Keras "
        "2.12-2.15 keep the built-in training=True in predict, measured; so does the keras-nightly of tf-nightly "
        "2.22.0.dev20260808 on, bisected)",
        link=TF_44614,
    ),
    expect(
        "seeded-dropout[predict vs call]",
        "different-mask",
        framework="tensorflow",
        versions=f">=2.16,<{KERAS_PREDICT_TRAINING_FROM}",
        reason="Keras 3's predict() of a fresh seeded copy drops nothing (training=False overrides the Dropout's "
        "built-in training=True), so it never matches the call's mask (reported for TF 2.3, where both "
        "dropped with different masks; Keras 2.12-2.15 differ for another reason, declared apart; from the "
        "keras-nightly of tf-nightly 2.22.0.dev20260808 predict() drops, with the call's mask, bisected)",
        link=TF_44614,
    ),
)

EPS, MOM, RATE, LR, SEED = 1e-3, 0.9, 0.5, 0.125, 7  # LR a power of two: the step adds no rounding
#: float32 batch norm: its gradient sums terms that cancel (each column's dz sums to 0), so results are
#: held at a few float32 roundings of the inputs' magnitude (record.scale = "inputs"). The rows without a
#: batch norm (a restored Dense model, accumulated linear-regression gradients) keep cmp.GRAD.
TOL = cmp.tolerance(float32=2e-4)
FACTOR = 10  # classification: within ten gradient tolerances of one closed form
F32 = np.float32


# ---------------------------------------------------------------- strategies
@dataclasses.dataclass(frozen=True)
class Batch:
    x: np.ndarray  # (4, 3) in [-2, 2]
    c: np.ndarray  # (4, 2) cotangent, 1/2 <= |c| <= 2
    kernel: np.ndarray  # (3, 2) in [-1, 1]
    bias: np.ndarray  # (2,)
    gamma: np.ndarray  # (2,), 1/2 <= |gamma| <= 2
    beta: np.ndarray  # (2,)
    mean0: np.ndarray  # (2,) in [10, 20]: never a batch mean here (|z| <= 7)
    var0: np.ndarray  # (2,) in [20, 30]


@st.composite
def batches(draw) -> Batch:
    """float32 inputs and weights whose Dense output has each column spread (variance > 0.1)."""

    def arr(shape, lo, hi, label):
        return draw(ss.float_arrays(dtype=np.dtype(F32), shape=shape, min_value=lo, max_value=hi), label=label)

    b = Batch(
        x=arr((4, 3), -2, 2, "x"),
        c=draw(ss.signed_arrays((4, 2), F32, 0.5, 2.0), label="c"),
        kernel=arr((3, 2), -1, 1, "kernel"),
        bias=arr((2,), -1, 1, "bias"),
        gamma=draw(ss.signed_arrays((2,), F32, 0.5, 2.0), label="gamma"),
        beta=arr((2,), -1, 1, "beta"),
        mean0=arr((2,), 10, 20, "mean0"),
        var0=arr((2,), 20, 30, "var0"),
    )
    assume(dense(b).var(0).min() > 0.1)
    return b


SEED_BATCH = Batch(
    x=np.array([[1, 2, 3], [4, 5, 6], [0, 1, 0], [2, 2, 2]], F32) / 4,
    c=np.array([[1, -1], [0.5, 2], [-1.5, 1], [2, -0.5]], F32),
    kernel=np.array([[0.5, -1], [1, 0.25], [-0.75, 0.5]], F32),
    bias=np.array([0.5, -0.5], F32),
    gamma=np.array([1.5, -0.75], F32),
    beta=np.array([0.25, -1], F32),
    mean0=np.array([10, 12], F32),
    var0=np.array([20, 25], F32),
)


# ---------------------------------------------------------------- closed forms (float64)
def dense(b):
    return b.x.astype(np.float64) @ b.kernel.astype(np.float64) + b.bias.astype(np.float64)


def normalise(z, b, stats):
    """(xhat, sigma, h) of batch norm over z's rows by the batch's or the moving statistics."""
    if stats == "batch-stats":
        mu, var = z.mean(0), z.var(0)
    else:
        mu, var = b.mean0.astype(np.float64), b.var0.astype(np.float64)
    sigma = np.sqrt(var + EPS)
    xhat = (z - mu) / sigma
    return xhat, sigma, b.gamma.astype(np.float64) * xhat + b.beta.astype(np.float64)


def norm_grads(z, b, stats, g_h):
    """d/d(gamma, beta, z) of sum(g_h * h)."""
    xhat, sigma, _ = normalise(z, b, stats)
    dxhat = g_h * b.gamma.astype(np.float64)
    if stats == "batch-stats":
        dz = (dxhat - dxhat.mean(0) - xhat * (dxhat * xhat).mean(0)) / sigma
    else:
        dz = dxhat / sigma
    return {"gamma": (g_h * xhat).sum(0), "beta": g_h.sum(0), "z": dz}


def model_grads(b, stats, g_h):
    """d/d(kernel, bias, gamma, beta, x) of sum(g_h * h) through the Dense layer."""
    g = norm_grads(dense(b), b, stats, g_h)
    dz = g["z"]
    return {
        "kernel": b.x.astype(np.float64).T @ dz,
        "bias": dz.sum(0),
        "gamma": g["gamma"],
        "beta": g["beta"],
        "x": dz @ b.kernel.astype(np.float64).T,
    }


def ema(b, z):
    return MOM * b.mean0.astype(np.float64) + (1 - MOM) * z.mean(0)


def moving_kind(mean, b, z) -> str:
    if np.array_equal(mean, b.mean0):
        return "not-updated"
    return "updated" if cmp.near(mean, ema(b, z), factor=FACTOR) else "other"


def dropout_kind(h, y) -> str:
    """``identity`` (y = h), ``active`` (each element 0 or h / (1 - rate), some 0) or ``other``."""
    h64 = np.asarray(h, np.float64)
    if cmp.near(y, h64):
        return "identity"
    keep = np.asarray(y) != 0
    if not keep.all() and cmp.near(y, np.where(keep, h64 / (1 - RATE), 0.0)):
        return "active"
    return "other"


# ---------------------------------------------------------------- Keras models (made eagerly, reused)
_MODELS: dict = {}


def keras_model(tf, key, *, frozen=False):
    """One ``Dense(2) -> BatchNormalization -> Dropout`` functional model per key, returning the batch
    norm's output and the model's: (model, dense, bn). Made eagerly before any tf.function traces it
    (a traced function may create variables only on its first trace); weights are assigned per call."""
    if key not in _MODELS:
        keras = tf.keras
        inp = keras.Input((3,))
        d = keras.layers.Dense(2)
        bn = keras.layers.BatchNormalization(momentum=MOM, epsilon=EPS, trainable=not frozen)
        h = bn(d(inp))
        y = keras.layers.Dropout(RATE, seed=SEED)(h)
        _MODELS[key] = (keras.Model(inp, [h, y]), d, bn)
    return _MODELS[key]


def _read(tf, variable):
    return tf.identity(tf.convert_to_tensor(variable))


def _assign(d, bn, kernel, bias, gamma, beta, mean0, var0):
    for v, value in ((d.kernel, kernel), (d.bias, bias), (bn.gamma, gamma), (bn.beta, beta),
                     (bn.moving_mean, mean0), (bn.moving_variance, var0)):  # fmt: skip
        v.assign(value)


def _keras_call(model, x, call):
    return model(x) if call == "no training argument" else model(x, training=call == "training=True")


# ---------------------------------------------------------------- the programs
class TrainStep(Program):
    """One forward and backward pass of Dense -> batch norm -> dropout on x with loss sum(c * y):
    (h, y, d kernel, d bias, d gamma, d beta, d x, moving mean, moving variance); h is the batch
    norm's output, y the model's. ``call``: one of CALLS; ``key``: the cached Keras model's."""

    def tensorflow(tf, x, c, kernel, bias, gamma, beta, mean0, var0, *, call, key):
        model, d, bn = _MODELS[key]
        _assign(d, bn, kernel, bias, gamma, beta, mean0, var0)
        with tf.GradientTape() as tape:
            tape.watch(x)
            h, y = _keras_call(model, x, call)
            loss = tf.reduce_sum(c * y)
        grads = tape.gradient(loss, [d.kernel, d.bias, bn.gamma, bn.beta, x])
        return (h, y, *grads, _read(tf, bn.moving_mean), _read(tf, bn.moving_variance))

    def jax(jax, x, c, kernel, bias, gamma, beta, mean0, var0, *, call, key):
        """No batch-norm layer in core JAX: the layer by hand, with a train flag and an explicit key."""
        jnp = jax.numpy
        train = call == "training=True"

        def forward(x, kernel, bias, gamma, beta):
            z = x @ kernel + bias
            mu, var = (jnp.mean(z, 0), jnp.var(z, 0)) if train else (mean0, var0)
            h = gamma * (z - mu) / jnp.sqrt(var + EPS) + beta
            y = h
            if train:
                keep = jax.random.bernoulli(jax.random.PRNGKey(SEED), 1 - RATE, h.shape)
                y = jnp.where(keep, h / (1 - RATE), 0)
            return jnp.sum(c * y), (h, y, mu, var)

        grads, (h, y, mu, var) = jax.grad(forward, argnums=(0, 1, 2, 3, 4), has_aux=True)(x, kernel, bias, gamma, beta)
        dx, dk, db, dg, dbeta = grads
        mean, variance = (MOM * mean0 + (1 - MOM) * mu, MOM * var0 + (1 - MOM) * var) if train else (mean0, var0)
        return h, y, dk, db, dg, dbeta, dx, mean, variance

    def torch(torch, x, c, kernel, bias, gamma, beta, mean0, var0, *, call, key):
        lin = torch.nn.Linear(3, 2, dtype=x.dtype)
        bn = torch.nn.BatchNorm1d(2, eps=EPS, momentum=1 - MOM, dtype=x.dtype)  # torch's momentum convention
        drop = torch.nn.Dropout(RATE)
        model = torch.nn.Sequential(lin, bn, drop)
        with torch.no_grad():
            for p, v in ((lin.weight, kernel.T), (lin.bias, bias), (bn.weight, gamma), (bn.bias, beta),
                         (bn.running_mean, mean0), (bn.running_var, var0)):  # fmt: skip
                p.copy_(v)
        if call != "no training argument":
            model.train(call == "training=True")
        x = x.clone().requires_grad_(True)
        h = bn(lin(x))
        y = drop(h)
        dk, db, dg, dbeta, dx = torch.autograd.grad((c * y).sum(), [lin.weight, lin.bias, bn.weight, bn.bias, x])
        return h.detach(), y.detach(), dk.T, db, dg, dbeta, dx, bn.running_mean, bn.running_var

    torch.fresh = True  # a new dropout mask per call


def _arrays(b):
    return b.x, b.c, b.kernel, b.bias, b.gamma, b.beta, b.mean0, b.var0


def run_step(runner, b, call):
    if runner.framework == "tensorflow":
        with runner.module.device(runner.device_name):
            keras_model(runner.module, runner.id)
    return runner.run(TrainStep.of(runner), *_arrays(b), call=call, key=runner.id)


def observe_step(record, b, call, out) -> dict:
    """Classify one step (batch norm, dropout, moving mean), check the classes and hold every output to
    the closed form of the observed class and mask. Returns the classes."""
    h, y, dk, db, dg, dbeta, dx, mean, _ = out
    z = dense(b)
    refs = {s: normalise(z, b, s)[2] for s in STATS}
    kinds = {
        "batch-norm": cmp.which(h, refs, factor=FACTOR),
        "dropout": dropout_kind(h, y),
        "moving-mean": moving_kind(mean, b, z),
    }
    record.check(EXPECT, **{f"{part}[{call}]": kind for part, kind in kinds.items()})
    stats, drop = kinds["batch-norm"], kinds["dropout"]
    if stats in STATS and drop in ("identity", "active"):
        scale = np.where(np.asarray(y) != 0, 1 / (1 - RATE), 0.0) if drop == "active" else np.ones_like(z)
        g = model_grads(b, stats, b.c.astype(np.float64) * scale)
        record.close(name=f"h[{call}]", out=h, ref=refs[stats].astype(F32), oracle="closed-form", tol=TOL)
        record.close(name=f"y[{call}]", out=y, ref=(refs[stats] * scale).astype(F32), oracle="closed-form", tol=TOL)
        for name, got in zip(("kernel", "bias", "gamma", "beta", "x"), (dk, db, dg, dbeta, dx)):
            record.close(name=f"d{name}[{call}]", out=got, ref=g[name].astype(F32), oracle="closed-form", tol=TOL)
    if kinds["moving-mean"] == "updated":
        record.close(name=f"moving mean[{call}]", out=mean, ref=ema(b, z).astype(F32), oracle="closed-form", tol=TOL)
    return kinds


def _example(record, b):
    record.example(**dataclasses.asdict(b))
    record.scale = "inputs"


# ---------------------------------------------------------------- properties
@settings(max_examples=max(3, settings.default.max_examples // 5))  # a Keras model per row: a few examples
@example(b=SEED_BATCH)
@given(b=batches())
def test_training_argument_selects_the_function_trained(subject, oracles, record, b):
    """model(x, training=True), training=False and model(x) under a tape: batch or moving statistics,
    dropout or not, moving mean updated or not, each output and gradient held to its closed form and
    compared with the oracles that run in the same mode (JAX's hand-written layer has no bare call)."""
    _example(record, b)
    for call in CALLS if subject.framework != "jax" else CALLS[:2]:
        out = run_step(subject, b, call)
        kinds = observe_step(record, b, call, out)
        for o in oracles:
            if o.framework == "jax" and call == CALLS[2]:
                continue
            ref = run_step(o, b, call)
            theirs = cmp.which(ref[0], {s: normalise(dense(b), b, s)[2] for s in STATS}, factor=FACTOR)
            if theirs != kinds["batch-norm"]:
                continue  # a declared difference: each row holds its own to the closed form
            record.close(name=f"h[{call}]", out=out[0], ref=ref[0], oracle=o.id, tol=TOL)
            record.close(name=f"moving mean[{call}]", out=out[7], ref=ref[7], oracle=o.id, tol=TOL)
            if kinds["dropout"] == "identity" and dropout_kind(ref[0], ref[1]) == "identity":
                for i, name in enumerate(("y", "dkernel", "dbias", "dgamma", "dbeta", "dx"), 1):
                    record.close(name=f"{name}[{call}]", out=out[i], ref=ref[i], oracle=o.id, tol=TOL)


def _compile(tf, model, mode, loss="mse"):
    """compile() for the row's mode: fit() runs eagerly, in its train function, or XLA-compiled."""
    model.compile(
        optimizer=tf.keras.optimizers.SGD(LR), loss=loss, run_eagerly=mode == "eager", jit_compile=mode == "xla"
    )


_FIT: dict = {}


@on("tensorflow")
@settings(max_examples=max(2, settings.default.max_examples // 10))  # fit() compiles once per row
@example(b=SEED_BATCH)
@given(b=batches())
def test_fit_trains_with_batch_statistics(subject, record, b):
    """One fit() step (SGD, lr 1/8, mse to the target c) of Dense -> batch norm (no dropout, so the
    step is one closed form): the kernel moves by the batch-statistics gradient and the moving mean
    follows the batch. Keras only: fit() is its API (the other rows' train flag is the property above)."""
    _example(record, b)
    tf = subject.module
    if subject.id not in _FIT:
        with tf.device(subject.device_name):
            model, d, bn = keras_model(tf, ("fit", subject.id))
            trunk = tf.keras.Model(model.inputs, model.outputs[0])  # the batch norm's output
            _compile(tf, trunk, subject.mode)
        _FIT[subject.id] = (trunk, d, bn)
    trunk, d, bn = _FIT[subject.id]
    _assign(d, bn, b.kernel, b.bias, b.gamma, b.beta, b.mean0, b.var0)
    trunk.fit(b.x, b.c, batch_size=4, epochs=1, verbose=0, shuffle=False)
    z = dense(b)
    steps = {}
    for s in STATS:
        h = normalise(z, b, s)[2]
        steps[s] = b.kernel - LR * model_grads(b, s, 2 * (h - b.c) / h.size)["kernel"]
    kernel, mean = np.asarray(d.kernel), np.asarray(bn.moving_mean)
    seen = cmp.which(kernel, steps, factor=FACTOR)
    record.check(EXPECT, **{"fit[batch-norm]": seen, "fit[moving-mean]": moving_kind(mean, b, z)})
    if seen in STATS:
        record.close(name="kernel after fit", out=kernel, ref=steps[seen].astype(F32), oracle="closed-form", tol=TOL)


class FrozenNorm(Program):
    """A batch norm whose gamma and beta are frozen (Keras trainable=False; PyTorch requires_grad_(False))
    called in training mode on z with loss sum(c * y): (y, d gamma, d beta, d z, moving mean)."""

    def tensorflow(tf, z, c, gamma, beta, mean0, var0, *, key):
        _, _, bn = _MODELS[key]
        for v, value in ((bn.gamma, gamma), (bn.beta, beta), (bn.moving_mean, mean0), (bn.moving_variance, var0)):
            v.assign(value)
        with tf.GradientTape() as tape:
            tape.watch(z)
            y = bn(z, training=True)
            loss = tf.reduce_sum(c * y)
        dg, dbeta, dz = tape.gradient(loss, [bn.gamma, bn.beta, z])
        return y, dg, dbeta, dz, _read(tf, bn.moving_mean)

    def torch(torch, z, c, gamma, beta, mean0, var0, *, key):
        bn = torch.nn.BatchNorm1d(2, eps=EPS, momentum=1 - MOM, dtype=z.dtype)
        with torch.no_grad():
            for p, v in ((bn.weight, gamma), (bn.bias, beta), (bn.running_mean, mean0), (bn.running_var, var0)):
                p.copy_(v)
        bn.requires_grad_(False)
        bn.train()
        z = z.clone().requires_grad_(True)
        y = bn(z)
        (dz,) = torch.autograd.grad((c * y).sum(), [z])
        return y.detach(), bn.weight.grad, bn.bias.grad, dz, bn.running_mean


@on("tensorflow", "torch")  # JAX has no trainable flag: an optimizer mask (optax.masked) freezes
@settings(max_examples=max(3, settings.default.max_examples // 5))
@example(b=SEED_BATCH)
@given(b=batches())
def test_frozen_batch_norm_called_with_training_true(subject, record, b):
    """BatchNormalization(trainable=False)(z, training=True): which statistics normalise, whether the
    moving mean moves, whether gamma gets a gradient; y and the gradients held to that closed form."""
    _example(record, b)
    z = dense(b)
    if subject.framework == "tensorflow":
        with subject.module.device(subject.device_name):
            keras_model(subject.module, ("frozen", subject.id), frozen=True)
    y, dg, dbeta, dz, mean = subject.run(
        FrozenNorm.of(subject), z.astype(F32), b.c, b.gamma, b.beta, b.mean0, b.var0, key=("frozen", subject.id)
    )
    refs = {s: normalise(z, b, s)[2] for s in STATS}
    stats = cmp.which(y, refs, factor=FACTOR)
    record.check(EXPECT, **{"frozen[batch-norm]": stats, "frozen[moving-mean]": moving_kind(mean, b, z)})
    if stats not in STATS:
        return
    g = norm_grads(z, b, stats, b.c.astype(np.float64))
    record.check(EXPECT, **{"frozen[gamma-grad]": cmp.which(dg, {"closed-form": g["gamma"]}, factor=FACTOR)})
    record.close(name="y", out=y, ref=refs[stats].astype(F32), oracle="closed-form", tol=TOL)
    record.close(name="dz", out=dz, ref=g["z"].astype(F32), oracle="closed-form", tol=TOL)
    if dbeta is not None:
        record.close(name="dbeta", out=dbeta, ref=g["beta"].astype(F32), oracle="closed-form", tol=TOL)


# ---------------------------------------------------------------- trainable changed after compile()
def _keras_dense(keras, units, name):
    return keras.layers.Dense(units, kernel_initializer=keras.initializers.Constant(0.5), name=name)


def _keras_chain(tf):
    """x -> Dense(2) (the layer frozen later) -> Dense(1): (model, first layer)."""
    keras = tf.keras
    inp = keras.Input((3,))
    first = _keras_dense(keras, 2, "first")
    return keras.Model(inp, _keras_dense(keras, 1, "second")(first(inp))), first


def _moved(layer, step) -> str:
    before = layer.weights[0].numpy().copy()
    step()
    return "frozen" if np.array_equal(before, layer.weights[0].numpy()) else "trains"


class TrainableFlag(Program):
    """Freeze a layer after the optimizer is set up; does the next step move it? (a scenario: a dict
    of ``trains``/``frozen`` per key suffix, measured by comparing the layer's kernel)."""

    def tensorflow(tf, x, t, *, mode):
        out = {}
        model, first = _keras_chain(tf)
        _compile(tf, model, mode)
        first.trainable = False
        out["before first fit"] = _moved(first, lambda: model.fit(x, t, batch_size=4, verbose=0, shuffle=False))
        model, first = _keras_chain(tf)
        _compile(tf, model, mode)
        model.fit(x, t, batch_size=4, verbose=0, shuffle=False)
        first.trainable = False
        out["after first fit"] = _moved(first, lambda: model.fit(x, t, batch_size=4, verbose=0, shuffle=False))
        model, first = _keras_chain(tf)
        _compile(tf, model, mode)
        first.trainable = False
        opt = tf.keras.optimizers.SGD(LR)

        def tape_step():
            with tf.GradientTape() as tape:
                loss = tf.reduce_mean(tf.square(model(x) - t))
            opt.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))

        out["tape"] = _moved(first, tape_step)
        # the GAN recipe: D compiled trainable, frozen before the combined model is compiled, toggled per step
        keras = tf.keras
        inp = keras.Input((3,))
        disc = keras.Model(inp, _keras_dense(keras, 1, "d")(inp))
        _compile(tf, disc, mode)
        disc.trainable = False
        g_in = keras.Input((3,))
        gan = keras.Model(g_in, disc(_keras_dense(keras, 3, "g")(g_in)))
        _compile(tf, gan, mode)
        dense_d = disc.layers[-1]
        disc.trainable = True
        out["discriminator step"] = _moved(dense_d, lambda: disc.train_on_batch(x, t))
        disc.trainable = False
        out["combined step"] = _moved(dense_d, lambda: gan.train_on_batch(x, t))
        return out

    def torch(torch, x, t, *, mode):
        x, t = torch.as_tensor(x), torch.as_tensor(t)

        def chain():
            first, second = torch.nn.Linear(3, 2), torch.nn.Linear(2, 1)
            with torch.no_grad():
                for lay in (first, second):
                    lay.weight.fill_(0.5)
            return torch.nn.Sequential(first, second), first

        def step(model, opt, inputs):
            opt.zero_grad()
            ((model(inputs) - t) ** 2).mean().backward()
            opt.step()

        out = {}
        model, first = chain()
        opt = torch.optim.SGD(model.parameters(), lr=LR)
        first.requires_grad_(False)
        out["before first fit"] = _moved_torch(first, lambda: step(model, opt, x))
        model, first = chain()
        opt = torch.optim.SGD(model.parameters(), lr=LR)
        step(model, opt, x)
        first.requires_grad_(False)
        out["after first fit"] = _moved_torch(first, lambda: step(model, opt, x))
        out["tape"] = out["before first fit"]  # one API: autograd is the tape
        disc, gen = torch.nn.Linear(3, 1), torch.nn.Linear(3, 3)
        gan = torch.nn.Sequential(gen, disc)
        d_opt = torch.optim.SGD(disc.parameters(), lr=LR)
        g_opt = torch.optim.SGD(gan.parameters(), lr=LR)
        disc.requires_grad_(True)
        out["discriminator step"] = _moved_torch(disc, lambda: step(disc, d_opt, x))
        disc.requires_grad_(False)
        out["combined step"] = _moved_torch(disc, lambda: step(gan, g_opt, x))
        return out


def _moved_torch(layer, step) -> str:
    before = layer.weight.detach().clone()
    step()
    return "frozen" if bool((before == layer.weight.detach()).all()) else "trains"


@on("tensorflow", "torch")  # JAX has no trainable flag: what a step updates is the optimizer's argument
@given(v=st.just((SEED_BATCH.x, SEED_BATCH.c[:, :1])))
def test_trainable_changed_after_compile(subject, record, v):
    """A layer frozen after compile() (before and after a first fit()), under a tape over
    model.trainable_variables, and the GAN recipe: does the next step move it? Keras' fit() runs in the
    row's mode (run_eagerly, its train function, jit_compile); PyTorch's requires_grad_ acts at once."""
    x, t = v
    record.example(x=x, t=t)
    out = TrainableFlag.of(subject)(subject.module, x, t, mode=subject.mode)
    key = {"discriminator step": "gan", "combined step": "gan"}
    record.check(EXPECT, **{f"{key.get(k, 'trainable-after-compile')}[{k}]": seen for k, seen in out.items()})


# ---------------------------------------------------------------- a seeded Dropout
def _keras_dropout(tf):
    keras = tf.keras
    inp = keras.Input((8,))
    return keras.Model(inp, keras.layers.Dropout(RATE, seed=SEED)(inp, training=True))


class SeededDropout(Program):
    """Two masks a user expects equal from one seed: ``how`` in SEEDED."""

    def tensorflow(tf, x, *, how):
        if how == "fresh copies":
            return _keras_dropout(tf)(x), _keras_dropout(tf)(x)
        if how == "two functions of one model":
            model = _keras_dropout(tf)
            return tf.function(model)(x), tf.function(model)(x)
        return _keras_dropout(tf)(x), _keras_dropout(tf).predict(x, verbose=0)

    def jax(jax, x, *, how):
        def drop(v):
            keep = jax.random.bernoulli(jax.random.PRNGKey(SEED), 1 - RATE, v.shape)
            return jax.numpy.where(keep, v / (1 - RATE), 0)

        if how == "fresh copies":
            return drop(x), drop(x)
        if how == "two functions of one model":
            return jax.jit(drop)(x), jax.jit(drop)(x)
        return drop(x), jax.jit(drop)(x)

    def torch(torch, x, *, how):
        x = torch.as_tensor(x)
        masks = []
        with torch.random.fork_rng():  # leave the process' generator as it was
            for grad in (True, how != "predict vs call"):
                torch.manual_seed(SEED)
                with torch.set_grad_enabled(grad):
                    masks.append(torch.nn.Dropout(RATE)(x).detach())
        return tuple(masks)


@on("tensorflow", "jax", "torch", modes=("eager",))  # each spelling makes its own functions
@given(how=st.sampled_from(SEEDED))
@example(how=SEEDED[2])
@example(how=SEEDED[1])
@example(how=SEEDED[0])
def test_seeded_dropout_repeats_its_mask(subject, record, how):
    """Dropout(0.5, seed=7) in training mode on a (4, 8) batch of ones, two ways that a user expects to
    give one mask: two fresh copies, two tf.functions of one model, predict() and a call."""
    x = np.ones((4, 8), F32)
    record.example(x=x, how=how)
    a, b = SeededDropout.of(subject)(subject.module, x, how=how)
    a, b = np.asarray(a), np.asarray(b)
    record.check(EXPECT, **{"dropout[training=True]": dropout_kind(x, a)})
    second = "dropout[predict, built with training=True]" if how == SEEDED[2] else "dropout[training=True]"
    record.check(EXPECT, **{second: dropout_kind(x, b)})
    record.check(EXPECT, **{f"seeded-dropout[{how}]": "same-mask" if np.array_equal(a != 0, b != 0) else
                                                      "different-mask"})  # fmt: skip


# ---------------------------------------------------------------- gradients of a restored model
PROGRAMS = ("plain", "custom")
FORMATS = ("savedmodel", "savedmodel-no-custom", "keras")


def _peer_group(name, faults) -> pr.PeerGroup:
    """The peers of this module: ``saver`` and ``loader`` (two processes: the loading one never ran the
    model's Python), and the accumulation engines: two logical CPUs under a MirroredStrategy, two XLA
    host devices, two gloo ranks; TensorFlow's with the run's faults."""
    target = f"cases._training_peers:{name}"
    if name == "jax_psum":
        flags = " ".join([*os.environ.get("XLA_FLAGS", "").split(), "--xla_force_host_platform_device_count=2"])
        return pr.PeerGroup(name, target, env={"XLA_FLAGS": flags, "JAX_PLATFORMS": "cpu"})
    if name == "torch_ddp":
        return pr.PeerGroup(name, target, size=2, configs={"port": pr.free_ports(1)[0]})
    return pr.PeerGroup(name, target, configs={"faults": faults})


@pytest.fixture(scope="module")
def engines(request, tmp_path_factory):
    """The peer groups (each started on first use, all closed with the module), a directory for the
    saved files, and the saver's answers by program."""
    faults = list(getattr(request.config, "_adsem_faults", ()))
    with pr.lazy_groups(lambda name: _peer_group(name, faults)) as get:
        yield pr.Engines(get), tmp_path_factory.mktemp("saved"), {}


def restored_forms(b, program):
    """The gradients of sum(c * y) with respect to (x, kernel, bias), flattened into one vector:
    ``as-before-saving`` (the program's own gradient: for ``custom`` its backward 3 h) and, for
    ``custom``, ``true-derivative`` (2 h: the custom gradient lost, the forward ops differentiated)."""
    x, k = b.x.astype(np.float64), b.kernel.astype(np.float64)
    h = np.tanh(dense(b))
    slopes = {"as-before-saving": 1.0 if program == "plain" else 3 * h}
    if program == "custom":
        slopes["true-derivative"] = 2 * h
    forms = {}
    for name, slope in slopes.items():
        dz = b.c * slope * (1 - h * h)
        forms[name] = np.concatenate([(dz @ k.T).ravel(), (x.T @ dz).ravel(), dz.sum(0).ravel()])
    return forms


def _flat(grads):
    if isinstance(grads, str) or any(g is None for g in grads):
        return "none" if not isinstance(grads, str) else grads
    return np.concatenate([np.asarray(g).ravel() for g in grads]).astype(F32)


@on("tensorflow")
@given(b=st.just(SEED_BATCH))
def test_restored_model_gradients_match_before_saving(subject, record, engines, b):
    """A Dense(2, tanh) model, plain and with a custom-gradient layer, saved in one process as a
    SavedModel and a .keras file and restored in another: the gradients with respect to x, the kernel
    and the bias, taken in the row's mode, equal those before saving (the custom backward included).
    TensorFlow only: saving a traced program is TensorFlow's API (torch.save pickles the Python)."""
    record.example(x=b.x, c=b.c, kernel=b.kernel, bias=b.bias)
    record.scale = "inputs"
    engines, root, answers = engines
    for program in PROGRAMS:
        if program not in answers:
            answers[program] = engines.ask("saver", op="save", program=program, dir=str(root), x=b.x, c=b.c,
                                           kernel=b.kernel, bias=b.bias)  # fmt: skip
        forms = restored_forms(b, program)
        before = _flat(answers[program]["before"])
        record.close(name=f"before saving[{program}]", out=before, ref=forms["as-before-saving"].astype(F32),
                     oracle="closed-form", tol=cmp.GRAD)  # fmt: skip
        for fmt in FORMATS:
            key = f"restored[{fmt}|{program}]"
            path = answers[program]["paths"][fmt]
            if isinstance(path, str) and path.startswith(str(root)):
                got = engines.ask("loader", op="load", format=fmt, path=path, mode=subject.mode, x=b.x, c=b.c)
                path = _flat(got["grads"])
            if not isinstance(path, np.ndarray):  # a refusal (to save, restore or differentiate), or no gradient
                record.check(EXPECT, **{key: path})
                continue
            record.check(EXPECT, **{key: cmp.which(path, forms, factor=FACTOR)})
            record.close(name=key, out=path, ref=before, oracle=f"{subject.id} before saving", tol=cmp.GRAD)


# ---------------------------------------------------------------- accumulation into a MirroredVariable
AGGREGATIONS = ("NONE", "SUM", "MEAN", "ONLY_FIRST_REPLICA")
ACC_ENGINE = {"tensorflow": "mirrored", "jax": "jax_psum", "torch": "torch_ddp"}
ACC_MODE = {"mirrored": "function", "jax_psum": "jit", "torch_ddp": "eager"}
#: the aggregations that must agree across engines: (engine, key) pairs
PAIRS = ((("mirrored", "SUM"), ("jax_psum", "psum")), (("mirrored", "MEAN"), ("torch_ddp", "no_sync")))
ACC_STEPS, ACC_ROWS, ACC_DIM = 2, 4, 3  # two micro-batches of four rows, two per replica


def accumulated_forms(w, X, y) -> dict:
    """Per replica r the sum over micro-batches of its mean-loss gradient, A_r; then what each
    aggregation leaves in every replica's copy: sum_r A_r, mean_r A_r, A_0 (float64)."""
    w, X, y = (np.asarray(a, np.float64) for a in (w, X, y))
    n = ACC_ROWS // 2
    A = np.stack([sum(X[s, r * n : (r + 1) * n].T @ (X[s, r * n : (r + 1) * n] @ w - y[s, r * n : (r + 1) * n]) / n
                      for s in range(ACC_STEPS)) for r in range(2)])  # fmt: skip
    return {"sum": np.stack([A.sum(0)] * 2), "mean": np.stack([A.mean(0)] * 2), "first-replica": np.stack([A[0]] * 2),
            "per-replica": A}  # fmt: skip


@st.composite
def micro_batches(draw):
    """(w, X, y) float32 with 1/4 <= |entries| <= 2 whose replicas' accumulated gradients differ (so the
    sum, the mean and the first replica's are told apart)."""
    w = draw(ss.signed_arrays((ACC_DIM,), F32, 0.25, 2.0), label="w")
    X = draw(ss.signed_arrays((ACC_STEPS, ACC_ROWS, ACC_DIM), F32, 0.25, 2.0), label="X")
    y = draw(ss.signed_arrays((ACC_STEPS, ACC_ROWS), F32, 0.25, 2.0), label="y")
    forms = accumulated_forms(w, X, y)
    assume(min(np.abs(a - b).max() for a, b in [(forms["sum"], forms["mean"]), (forms["mean"], forms["first-replica"]),
                                                (forms["sum"], forms["first-replica"])]) > 0.25)  # fmt: skip
    return w, X, y


def _acc_kind(got, forms) -> str:
    return got if isinstance(got, str) else cmp.which(got, forms, factor=FACTOR)


@on("tensorflow", "jax", "torch", modes=("eager", "function"))  # strategy.run: eagerly and traced, not XLA
@settings(max_examples=max(2, settings.default.max_examples // 10))  # each example crosses processes
@given(b=micro_batches())
def test_gradient_accumulation_across_replicas(subject, record, engines, b):
    """Each replica assign_adds its gradient of two micro-batches into an accumulator: a MirroredVariable
    without an aggregation refuses in replica context; SUM, MEAN and ONLY_FIRST_REPLICA leave the sum, the
    mean and the first replica's sum in every copy (SUM = replicas x MEAN). JAX's explicit psum gives the
    sum, DDP's no_sync accumulation the mean; each engine is compared with the TensorFlow one."""
    if subject.device != "cpu":
        declared_skip("the accumulation engines run on two CPU devices (logical CPUs, host devices, gloo ranks)",
                      link=TF_MIRRORED_VARIABLE)  # fmt: skip
    w, X, y = b
    record.example(w=w, X=X, y=y)
    record.scale = "inputs"
    forms = accumulated_forms(w, X, y)
    replicas = engines[0]
    engine = ACC_ENGINE[subject.framework]
    mode = {"function": "function", "jit": "jit"}.get(subject.mode, "eager")
    out = replicas.ask(engine, op="accumulate", mode=mode, w=w, X=X, y=y)
    record.check(EXPECT, **{f"accumulate[{k}]": _acc_kind(v, forms) for k, v in out.items()})
    for k, v in out.items():
        want = EXPECT.lookup(f"accumulate[{k}]", subject)[0]
        if not isinstance(v, str) and want in forms:
            record.close(
                name=f"accumulate[{k}]", out=v, ref=forms[want].astype(F32), oracle="closed-form", tol=cmp.GRAD
            )
    for (a, a_key), (b_, b_key) in PAIRS:  # the TensorFlow aggregation that matches each engine's own
        other, mine, theirs_key = (b_, a_key, b_key) if engine == a else (a, b_key, a_key) if engine == b_ else (0,) * 3
        if not other or not replicas.available(other, record):
            continue
        theirs = replicas.ask(other, op="accumulate", mode=ACC_MODE[other], w=w, X=X, y=y)
        if isinstance(out.get(mine), np.ndarray) and isinstance(theirs.get(theirs_key), np.ndarray):
            record.close(name=f"accumulate[{mine}] vs {theirs_key}", out=out[mine], ref=theirs[theirs_key],
                         oracle=f"{other}-{ACC_MODE[other]}", tol=cmp.GRAD)  # fmt: skip
