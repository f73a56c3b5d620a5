"""Faults for sparse-labels-out-of-range: out-of-range labels of sparse cross-entropy handled the wrong way."""

from __future__ import annotations

from . import fault
from .catalogue import _set

XENT = ["nn.sparse_softmax_cross_entropy_with_logits"]


@fault(
    "sparse-xent-nan-leaks-into-next-row",
    breaks=["sparse-labels-out-of-range"],
    description="a NaN loss row of tf.nn.sparse_softmax_cross_entropy_with_logits also makes the next row NaN "
    "(a batched kernel that mixes rows), where it does not raise",
)
def _nan_leaks(tf):
    xent = tf.nn.sparse_softmax_cross_entropy_with_logits

    def leaking(labels=None, logits=None, name=None):
        loss = xent(labels=labels, logits=logits, name=name)
        nan_or_zero = loss * 0  # NaN in a NaN row, 0 elsewhere
        return loss + tf.concat([tf.zeros_like(loss[:1]), nan_or_zero[:-1]], axis=0)

    _set(tf, XENT, leaking)


@fault(
    "sparse-xent-cpu-returns-nan",
    breaks=["sparse-labels-out-of-range"],
    description="tf.nn.sparse_softmax_cross_entropy_with_logits returns NaN rows on CPU for out-of-range labels "
    "instead of raising InvalidArgumentError (the GPU contract leaking into the CPU kernel)",
)
def _cpu_nan(tf):
    xent = tf.nn.sparse_softmax_cross_entropy_with_logits

    def nan_rows(labels=None, logits=None, name=None):
        labels, logits = tf.convert_to_tensor(labels), tf.convert_to_tensor(logits)
        n = tf.cast(tf.shape(logits)[-1], labels.dtype)
        ok = (labels >= 0) & (labels < n)
        loss = xent(labels=tf.where(ok, labels, tf.zeros_like(labels)), logits=logits, name=name)
        return tf.where(ok, loss, tf.constant(float("nan"), loss.dtype))

    _set(tf, XENT, nan_rows)


@fault(
    "sparse-xent-negative-labels-wrap",
    breaks=["sparse-labels-out-of-range"],
    description="tf.nn.sparse_softmax_cross_entropy_with_logits counts a label in [-n, 0) from the end "
    "(NumPy's negative index) instead of refusing it",
)
def _negative_wrap(tf):
    xent = tf.nn.sparse_softmax_cross_entropy_with_logits

    def wrapping(labels=None, logits=None, name=None):
        labels, logits = tf.convert_to_tensor(labels), tf.convert_to_tensor(logits)
        n = tf.cast(tf.shape(logits)[-1], labels.dtype)
        return xent(labels=tf.where((labels < 0) & (labels >= -n), labels + n, labels), logits=logits, name=name)

    _set(tf, XENT, wrapping)
