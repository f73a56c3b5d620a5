"""Faults for batched-gather-gradients: ``_GatherV2Grad`` scatters a batched gather's cotangent wrong.

- ``batched-gather-gradient-untransposed-offsets``: each batch's indices are offset by the
  params' own shape instead of that of the params with the gathered axis moved next to the
  batch axes, the mistake tensorflow#50075 reports in TF 2.5; the segment ids that then fall
  out of range are dropped (as ``UnsortedSegmentSum`` drops them under XLA and on GPU) instead of
  raising, so the gradient is silently wrong wherever the gathered axis follows a batch axis
  of another size (``batch_dims=1, axis=2`` with the middle axis wider or narrower).
- ``batched-gather-gradient-averages-repeats``: the cotangents of repeated indices are averaged
  (``unsorted_segment_mean``) instead of summed, for every gather along an axis other than 0.

Each patch replaces ``_BatchGatherGrad`` while TensorFlow's own ``_GatherV2Grad`` runs (the
registered gradient of ``GatherV2``), so it holds in eager, tf.function, XLA and v1 graph mode
alike.
"""

from __future__ import annotations

from .patch import regrad


@regrad("GatherV2", name="batched-gather-gradient-untransposed-offsets")
def _untransposed_offsets(tf, original, op, dy):
    """tf.gather's gradient offsets each batch's indices by the params' own shape, not by the shape with the gathered
    axis moved next to the batch axes (TF 2.5, tensorflow#50075), and drops the out-of-range segment ids that follow"""
    shape = tf.shape(op.inputs[0])
    return _with_batch_gather_grad(
        original, op, dy, lambda _transposed, *rest: _batch_gather_grad(tf, shape, *rest, combine="dropping-sum")
    )


@regrad("GatherV2", name="batched-gather-gradient-averages-repeats")
def _averages_repeats(tf, original, op, dy):
    """tf.gather's gradient along an axis other than 0 averages the cotangents of repeated indices instead of summing
    them"""
    return _with_batch_gather_grad(
        original, op, dy, lambda transposed, *rest: _batch_gather_grad(tf, transposed, *rest, combine="mean")
    )


def _with_batch_gather_grad(original, op, dy, batch_gather_grad):
    """``GatherV2``'s own gradient ``original(op, dy)`` with ``_BatchGatherGrad`` replaced, while
    it runs, by ``batch_gather_grad``."""
    from tensorflow.python.ops import array_grad

    real = array_grad._BatchGatherGrad  # noqa: SLF001
    array_grad._BatchGatherGrad = batch_gather_grad  # noqa: SLF001
    try:
        return original(op, dy)
    finally:
        array_grad._BatchGatherGrad = real  # noqa: SLF001


def _batch_gather_grad(tf, params_shape, values, indices, batch_dims, gather_dim_size, *, combine):
    """TensorFlow's ``_BatchGatherGrad`` (the gradient along the first axis after the batch axes),
    its segments combined by ``combine``: ``dropping-sum`` (out-of-range ids dropped) or ``mean``."""
    from tensorflow.python.ops import array_grad

    values = array_grad._IndexedSlicesToTensorNoWarning(values)  # noqa: SLF001
    values_shape = tf.shape(values)
    outer, inner = values_shape[:batch_dims], values_shape[batch_dims:][1:]
    flat_shape = tf.concat([[-1], inner], 0)
    n = gather_dim_size * tf.reduce_prod(outer)
    ids = array_grad._GetBatchIndices(params_shape, indices, batch_dims) if batch_dims else indices  # noqa: SLF001
    ids = tf.reshape(ids, [-1])
    values = tf.reshape(values, flat_shape)
    if combine == "mean":
        grad = tf.math.unsorted_segment_mean(values, ids, n)
    else:
        n = tf.cast(n, ids.dtype)
        grad = tf.math.unsorted_segment_sum(values, tf.where(ids < n, ids, n), n + 1)[:n]
    return tf.reshape(grad, tf.concat([outer, flat_shape], 0)) if batch_dims else grad
