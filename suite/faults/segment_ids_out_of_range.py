"""Faults for segment-ids-out-of-range: segment ids outside [0, num_segments) handled the wrong way."""

from __future__ import annotations

from . import fault
from .patch import put, regrad, replaces


@replaces("math.unsorted_segment_sum", name="unsorted-segment-sum-keeps-dropped-gradient")
def _keeps_dropped_gradient(tf, segment_sum, data, segment_ids, num_segments, name=None):
    """the gradient of tf.math.unsorted_segment_sum gathers the cotangent at the clamped id, so an element the forward
    dropped (a negative id) receives segment 0's cotangent (XLA's gather semantics)"""
    ids = tf.convert_to_tensor(segment_ids)

    @tf.custom_gradient
    def f(d):
        def grad(dy):
            return tf.gather(dy, tf.clip_by_value(ids, 0, tf.shape(dy)[0] - 1))

        return segment_sum(d, ids, num_segments, name=name), grad

    return f(data)


@replaces("math.unsorted_segment_sum", name="unsorted-segment-sum-raises-on-negative-ids")
def _raises_on_negative(tf, segment_sum, data, segment_ids, num_segments, name=None):
    """tf.math.unsorted_segment_sum refuses a negative segment id instead of dropping it (as its docs promise) in the
    modes that run assertions"""
    ids = tf.convert_to_tensor(segment_ids)
    with tf.control_dependencies([tf.debugging.assert_non_negative(ids, message="segment_ids")]):
        return segment_sum(tf.identity(data), ids, num_segments, name=name)


@replaces("math.unsorted_segment_max", name="unsorted-segment-max-empty-is-minus-inf")
def _empty_minus_inf(tf, segment_max, data, segment_ids, num_segments, name=None):
    """an empty segment of tf.math.unsorted_segment_max holds -inf instead of the dtype's lowest finite value"""
    out = segment_max(data, segment_ids, num_segments, name=name)
    return tf.where(out == out.dtype.min, tf.constant(float("-inf"), out.dtype), out)


@fault("bincount-clips-negative-values")
def _bincount_clips(tf):
    """tf.math.bincount counts a negative value into bin 0 (jnp.bincount's clip) instead of refusing it on CPU"""
    bincount = tf.math.bincount

    def clipping(
        arr, weights=None, minlength=None, maxlength=None, dtype=tf.int32, name=None, axis=None, binary_output=False
    ):
        arr = tf.maximum(tf.convert_to_tensor(arr), 0)
        return bincount(
            arr,
            weights=weights,
            minlength=minlength,
            maxlength=maxlength,
            dtype=dtype,
            name=name,
            axis=axis,
            binary_output=binary_output,
        )

    put(tf, ["math.bincount", "compat.v1.math.bincount"], clipping)


@fault("sparse-segment-clamps-row-indices")
def _sparse_segment_clamps(tf):
    """tf.sparse.segment_sum/mean/sqrt_n read row clip(i) for a row index out of range instead of refusing it on CPU
    (XLA gather's clamp)"""

    def clamping(op):
        def run(data, indices, segment_ids, num_segments=None, name=None, sparse_gradient=False):
            n = tf.shape(data, out_type=tf.convert_to_tensor(indices).dtype)[0]
            return op(data, tf.clip_by_value(indices, 0, n - 1), segment_ids, name=name, num_segments=num_segments)

        return run

    for api in ("segment_sum", "segment_mean", "segment_sqrt_n"):
        put(tf, [f"sparse.{api}"], clamping(getattr(tf.sparse, api)))


@replaces("sparse.segment_mean", name="sparse-segment-mean-empty-is-nan")
def _sparse_segment_mean_nan(tf, mean, data, indices, segment_ids, num_segments=None, name=None, sparse_gradient=False):
    """an empty segment of tf.sparse.segment_mean holds 0/0 = NaN instead of 0"""
    out = mean(data, indices, segment_ids, name=name, num_segments=num_segments)
    count = tf.math.unsorted_segment_sum(tf.ones_like(segment_ids, out.dtype), segment_ids, tf.shape(out)[0])
    return tf.where(count[:, None] > 0, out, tf.constant(float("nan"), out.dtype))


@regrad("UnsortedSegmentProd", name="unsorted-segment-prod-grad-multiplies-dropped-rows")
def _prod_grad_multiplies_dropped(tf, original, op, dy):
    """the gradient of UnsortedSegmentProd recomputes each segment's product with the negative ids clipped to 0, so a
    dropped row (a NaN in it too) is multiplied into segment 0's kept rows' gradients"""
    data, ids, n = op.inputs
    clipped = tf.maximum(ids, tf.zeros_like(ids))
    prod = tf.math.unsorted_segment_prod(data, clipped, n)  # the dropped rows multiplied in
    keep = tf.cast(ids >= 0, dy.dtype)
    keep = tf.reshape(keep, tf.concat([tf.shape(ids), tf.ones([tf.rank(data) - 1], tf.int32)], 0))
    return tf.gather(dy, clipped) * keep * tf.gather(prod, clipped) / data, None, None
