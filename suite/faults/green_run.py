"""Faults a green run must not let through (issue: a green run proves it).

Each breaks one of the checks that make a passed row mean something, rather than one
behaviour's semantics:

- ``gradient-promoted-float64``: every gradient comes back as float64 (values unchanged),
  as a promotion bug would give; caught by the dtype check of every comparison.
- ``small-gradients-flushed``: gradient elements below 1e-4 in magnitude become zero;
  caught by per-element relative errors (an absolute error below 1 used to pass) with
  cotangents that reach small magnitudes.
- ``tanh-gradient-saturates``: tanh's gradient is zero where |tanh(x)| > tanh(4) instead of
  sech^2(x) (1.3e-3 at 4, 8e-8 at 9); caught by relative errors on saturated activations.
- ``gather-error-message``: an out-of-range ``tf.gather`` raises InvalidArgumentError for
  another reason (a shape message); caught by declared errors' message patterns.
- ``subject-skips``: TensorFlow rows skip themselves mid-test; caught by "no silent skips".

Gradients are patched at ``GradientTape.gradient`` and ``tf.gradients`` (what the runners
call in the TF2 modes and in a v1 graph), so they hold in every mode.
"""

from __future__ import annotations

from . import fault
from .patch import put, regrad, replaces

GRADIENTS = ["gradients", "compat.v1.gradients"]


def _wrap_gradients(tf, transform):
    """Apply ``transform`` to every dense gradient the tape and ``tf.gradients`` return."""

    def each(gs):
        if gs is None:
            return None
        if isinstance(gs, (list, tuple)):
            return type(gs)(each(g) for g in gs)
        if isinstance(gs, tf.IndexedSlices):
            gs = tf.convert_to_tensor(gs)
        return transform(gs) if isinstance(gs, tf.Tensor) and gs.dtype.is_floating else gs

    def wrap(gradient):  # GradientTape.gradient is wrapped on the class: its args start with self
        def wrapped(*args, **kwargs):
            return each(gradient(*args, **kwargs))

        return wrapped

    tf.GradientTape.gradient = wrap(tf.GradientTape.gradient)
    put(tf, GRADIENTS, wrap(tf.gradients))


@fault("gradient-promoted-float64", breaks=["partial-stop-gradient", "per-occurrence-gradients"])
def _gradient_promoted_float64(tf):
    """every float gradient comes back as float64 (values unchanged): a promotion bug"""
    _wrap_gradients(tf, lambda g: tf.cast(g, tf.float64))


@fault("small-gradients-flushed", breaks=["partial-stop-gradient"])
def _small_gradients_flushed(tf):
    """gradient elements below 1e-4 in magnitude are flushed to zero"""
    _wrap_gradients(tf, lambda g: tf.where(tf.abs(g) < tf.cast(1e-4, g.dtype), tf.zeros_like(g), g))


@regrad("Tanh", name="tanh-gradient-saturates", breaks=["grad-ys-chaining"])
def _tanh_gradient_saturates(tf, original, op, grad):
    """tanh's registered gradient is zero where |tanh(x)| > tanh(4) instead of sech^2(x)"""
    y = op.outputs[0]
    saturated = tf.abs(y) > tf.cast(0.999329, y.dtype)  # tanh(4)
    return tf.where(saturated, tf.zeros_like(grad), grad * (1 - y * y))


@replaces("gather", "compat.v1.gather", name="gather-error-message", breaks=["gather-out-of-range"])
def _gather_error_message(tf, gather, params, indices, validate_indices=None, axis=None, batch_dims=0, name=None):
    """tf.gather with an out-of-range index raises InvalidArgumentError with another message (a shape error) instead of
    naming the index"""
    if tf.executing_eagerly():  # before the kernel, which would name the index
        n = tf.shape(params, out_type=tf.int64)[0 if axis is None else axis]
        idx = tf.cast(indices, tf.int64)
        if bool(tf.reduce_any((idx < 0) | (idx >= n))):
            raise tf.errors.InvalidArgumentError(None, None, "Incompatible shapes: [2] vs. [3]")
    return gather(params, indices, axis=axis, batch_dims=batch_dims, name=name)


@fault("subject-skips", breaks=["partial-stop-gradient"])
def _subject_skips(tf):
    """TensorFlow rows skip themselves mid-test (pytest.skip from the gradient call)"""
    import pytest

    def skip(*args, **kwargs):
        pytest.skip("gradient not supported here")

    put(tf, ["GradientTape.gradient", *GRADIENTS], skip)
