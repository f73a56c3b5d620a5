"""Faults for loss-gradients: label gradients, Keras' probability clip and fully masked softmax rows gone wrong."""

from __future__ import annotations

from . import fault
from .patch import put, replaces


@fault("v1-softmax-xent-passes-label-gradient")
def _v1_label_gradient(tf):
    """tf.compat.v1.nn.softmax_cross_entropy_with_logits lets the gradient into the labels (the v2 behaviour) instead of
    stopping it"""
    v2 = tf.nn.softmax_cross_entropy_with_logits  # not the target's own original: replaces() does not fit

    def passing(labels=None, logits=None, dim=-1, name=None, axis=None, _sentinel=None):
        return v2(labels=labels, logits=logits, axis=dim if axis is None else axis, name=name)

    put(tf, ["compat.v1.nn.softmax_cross_entropy_with_logits"], passing)


@replaces("nn.softmax", "math.softmax", name="masked-softmax-nan-leaks-across-rows")
def _nan_leaks(tf, softmax, logits, axis=None, name=None):
    """tf.nn.softmax spreads a fully masked row's NaN into the next row (a batched kernel that mixes rows)"""
    out = softmax(logits, axis=axis, name=name)
    nan_or_zero = tf.reduce_sum(out, axis=-1, keepdims=True) * 0  # NaN in a NaN row, 0 elsewhere
    return out + tf.concat([tf.zeros_like(nan_or_zero[:1]), nan_or_zero[:-1]], axis=0)


@fault("keras-xent-skips-epsilon-clip")
def _no_clip(tf):
    """tf.keras' CategoricalCrossentropy(from_logits=False) takes the log of eager probabilities unclipped (no epsilon):
    a saturated row's loss and gradient follow the logits where eager Keras clips to -log(1e-7)"""
    keras = tf.keras
    original = keras.losses.CategoricalCrossentropy

    class Unclipped(original):
        def __call__(self, y_true, y_pred, sample_weight=None):
            y_true, y_pred = tf.convert_to_tensor(y_true), tf.convert_to_tensor(y_pred)
            if getattr(y_pred, "_keras_logits", None) is not None or not tf.executing_eagerly():
                return super().__call__(y_true, y_pred, sample_weight)
            p = y_pred / tf.reduce_sum(y_pred, axis=-1, keepdims=True)
            return -tf.reduce_sum(tf.cast(y_true, p.dtype) * tf.math.log(p), axis=-1)

    keras.losses.CategoricalCrossentropy = Unclipped
