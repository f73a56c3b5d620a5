"""Faults for lookup-out-of-range: out-of-range embedding ids and repeated ids handled the wrong way."""

from __future__ import annotations

from .patch import replaces

LOOKUP = ["nn.embedding_lookup", "compat.v1.nn.embedding_lookup"]


def _clipped(tf, params, ids):
    ids = tf.convert_to_tensor(ids)
    n = tf.cast(tf.shape(params)[0], ids.dtype)
    return ids, tf.clip_by_value(ids, 0, n - 1), (ids >= 0) & (ids < n)


@replaces(*LOOKUP, name="embedding-lookup-zero-fills-on-cpu")
def _zero_fill(tf, original, params, ids, max_norm=None, name=None):
    """tf.nn.embedding_lookup reads a zero row for an out-of-range id on CPU instead of raising (the GPU kernel's answer
    everywhere)"""
    ids, safe, ok = _clipped(tf, params, ids)
    rows = tf.gather(params, safe)
    mask = tf.reshape(tf.cast(ok, rows.dtype), tf.concat([tf.shape(ids), [1]], 0))
    return rows * mask


@replaces(*LOOKUP, name="embedding-grad-reaches-clamped-row")
def _grad_to_clamped_row(tf, lookup, params, ids, max_norm=None, name=None):
    """the gradient of tf.nn.embedding_lookup sends an out-of-range id's cotangent to the row its clamped read came from
    (XLA), where the scatter should drop it"""
    ids = tf.convert_to_tensor(ids)

    @tf.custom_gradient
    def f(p):
        def grad(dy):
            _, safe, _ = _clipped(tf, p, ids)
            return tf.math.unsorted_segment_sum(dy, safe, tf.shape(p)[0])

        return lookup(p, ids, max_norm=max_norm, name=name), grad

    return f(params)
