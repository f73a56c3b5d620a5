"""Faults for gather-out-of-range: out-of-range indices handled the wrong way."""

from __future__ import annotations

from .patch import replaces


@replaces("gather", "compat.v1.gather", name="gather-clamps-on-cpu")
def _gather_clamps(tf, gather, params, indices, validate_indices=None, axis=None, batch_dims=0, name=None):
    """tf.gather clamps out-of-range indices into [0, n) on every device instead of raising on CPU (XLA's semantics
    leaking into the kernels)"""
    indices = tf.convert_to_tensor(indices)
    n = tf.cast(tf.shape(params)[0 if axis is None else axis], indices.dtype)
    return gather(
        params,
        tf.clip_by_value(indices, 0, n - 1),
        validate_indices=validate_indices,
        axis=axis,
        batch_dims=batch_dims,
        name=name,
    )


@replaces("gather", "compat.v1.gather", name="gather-grad-to-clamped-row")
def _gather_grad_clamped(tf, gather, params, indices, validate_indices=None, axis=None, batch_dims=0, name=None):
    """tf.gather's gradient sends an out-of-range position's cotangent to the clamped row instead of dropping it (or
    refusing it)"""
    indices = tf.convert_to_tensor(indices)

    @tf.custom_gradient
    def f(p):
        def grad(dy):
            n = tf.shape(p)[0]
            rows = tf.clip_by_value(indices, 0, tf.cast(n, indices.dtype) - 1)
            return tf.math.unsorted_segment_sum(dy, rows, n)

        return gather(p, indices, axis=axis, batch_dims=batch_dims, name=name), grad

    return f(params)


@replaces("gather_nd", name="gather-nd-drops-bad-indices-policy")
def _gather_nd_drops_policy(tf, gather_nd, params, indices, batch_dims=0, name=None, bad_indices_policy=""):
    """tf.gather_nd drops its bad_indices_policy argument: IGNORE raises on CPU like the default"""
    return gather_nd(params, indices, batch_dims=batch_dims, name=name)
