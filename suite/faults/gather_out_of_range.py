"""Faults for gather-out-of-range: out-of-range indices handled the wrong way."""

from __future__ import annotations

from . import fault
from .catalogue import _set


@fault(
    "gather-clamps-on-cpu",
    breaks=["gather-out-of-range"],
    description="tf.gather clamps out-of-range indices into [0, n) on every device instead of raising "
    "on CPU (XLA's semantics leaking into the kernels)",
)
def _gather_clamps(tf):
    gather = tf.gather

    def clamping_gather(params, indices, validate_indices=None, axis=None, batch_dims=0, name=None):
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

    _set(tf, ["gather", "compat.v1.gather"], clamping_gather)


@fault(
    "gather-grad-to-clamped-row",
    breaks=["gather-out-of-range"],
    description="tf.gather's gradient sends an out-of-range position's cotangent to the clamped row "
    "instead of dropping it (or refusing it)",
)
def _gather_grad_clamped(tf):
    gather = tf.gather

    def gather_with_clamped_grad(params, indices, validate_indices=None, axis=None, batch_dims=0, name=None):
        indices = tf.convert_to_tensor(indices)

        @tf.custom_gradient
        def f(p):
            def grad(dy):
                n = tf.shape(p)[0]
                rows = tf.clip_by_value(indices, 0, tf.cast(n, indices.dtype) - 1)
                return tf.math.unsorted_segment_sum(dy, rows, n)

            return gather(p, indices, axis=axis, batch_dims=batch_dims, name=name), grad

        return f(params)

    _set(tf, ["gather", "compat.v1.gather"], gather_with_clamped_grad)


@fault(
    "gather-nd-drops-bad-indices-policy",
    breaks=["gather-out-of-range"],
    description="tf.gather_nd drops its bad_indices_policy argument: IGNORE raises on CPU like the default",
)
def _gather_nd_drops_policy(tf):
    gather_nd = tf.gather_nd

    def gather_nd_without_policy(params, indices, batch_dims=0, name=None, bad_indices_policy=""):
        return gather_nd(params, indices, batch_dims=batch_dims, name=name)

    _set(tf, ["gather_nd"], gather_nd_without_policy)
