"""Faults for sparse-labels-out-of-range: out-of-range labels of sparse cross-entropy handled the wrong way."""

from __future__ import annotations

from .patch import replaces

XENT = "nn.sparse_softmax_cross_entropy_with_logits"


def _labels_and_classes(tf, labels, logits):
    """``labels`` and ``logits`` as tensors, and the number of classes in the labels' dtype."""
    labels, logits = tf.convert_to_tensor(labels), tf.convert_to_tensor(logits)
    return labels, logits, tf.cast(tf.shape(logits)[-1], labels.dtype)


@replaces(XENT, name="sparse-xent-nan-leaks-into-next-row")
def _nan_leaks(tf, xent, labels=None, logits=None, name=None):
    """a NaN loss row of tf.nn.sparse_softmax_cross_entropy_with_logits also makes the next row NaN (a batched kernel
    that mixes rows), where it does not raise"""
    loss = xent(labels=labels, logits=logits, name=name)
    nan_or_zero = loss * 0  # NaN in a NaN row, 0 elsewhere
    return loss + tf.concat([tf.zeros_like(loss[:1]), nan_or_zero[:-1]], axis=0)


@replaces(XENT, name="sparse-xent-cpu-returns-nan")
def _cpu_nan(tf, xent, labels=None, logits=None, name=None):
    """tf.nn.sparse_softmax_cross_entropy_with_logits returns NaN rows on CPU for out-of-range labels instead of raising
    InvalidArgumentError (the GPU contract leaking into the CPU kernel)"""
    labels, logits, n = _labels_and_classes(tf, labels, logits)
    ok = (labels >= 0) & (labels < n)
    loss = xent(labels=tf.where(ok, labels, tf.zeros_like(labels)), logits=logits, name=name)
    return tf.where(ok, loss, tf.constant(float("nan"), loss.dtype))


@replaces(XENT, name="sparse-xent-negative-labels-wrap")
def _negative_wrap(tf, xent, labels=None, logits=None, name=None):
    """tf.nn.sparse_softmax_cross_entropy_with_logits counts a label in [-n, 0) from the end (NumPy's negative index)
    instead of refusing it"""
    labels, logits, n = _labels_and_classes(tf, labels, logits)
    return xent(labels=tf.where((labels < 0) & (labels >= -n), labels + n, labels), logits=logits, name=name)
