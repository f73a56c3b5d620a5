"""Faults for kink-subgradients: TensorFlow picks another subgradient at a kink or a tie.

One fault per family of the case module:

- ``maximum-tie-to-second-argument``: the registered gradient of ``Maximum`` sends a tie to
  the second argument (``x > y`` instead of ``x >= y``); ``maximum(x, 0)`` at 0 and
  ``clip_by_value`` at its lower bound follow.
- ``relu-gradient-one-at-zero``: ``tf.nn.relu``'s gradient passes the upstream gradient at 0
  (``x >= 0``), the right derivative instead of TensorFlow's 0.
- ``reduce-max-tie-first-occurrence``: the registered gradient of ``Max`` (``reduce_max``)
  gives a tied maximum's whole gradient to its first occurrence instead of splitting it.
- ``max-pool-tie-last-occurrence``: the registered gradient of ``MaxPool`` sends a window's
  gradient to its last maximum instead of its first (the windows are read back to front).
- ``top-k-sort-ties-reversed``: ``tf.math.top_k`` and ``tf.sort`` put tied elements in reverse
  input order (same values), so their gradients reach the tied elements the other way round.
- ``segment-max-tie-all``: the registered gradients of ``SegmentMax`` and
  ``UnsortedSegmentMax`` give every tied element the segment's whole gradient.

Each patch replaces a registered gradient or a public function (with a custom gradient), so it holds in eager,
tf.function, XLA and v1 graph mode alike.
"""

from __future__ import annotations

import collections

import numpy as np

from . import fault
from .patch import put, regrad, replaces, sum_to


@regrad("Maximum", name="maximum-tie-to-second-argument")
def _maximum_tie_to_second_argument(tf, original, op, grad):
    """the gradient of tf.maximum gives a tie to the second argument (x > y) instead of the first (x >= y)"""
    x, y = op.inputs
    first = tf.greater(x, y)
    zeros = tf.zeros_like(grad)
    return sum_to(tf, tf.where(first, grad, zeros), x), sum_to(tf, tf.where(first, zeros, grad), y)


@replaces("nn.relu", name="relu-gradient-one-at-zero")
def _relu_gradient_one_at_zero(tf, relu, features, name=None):
    # Not a re-registered Relu gradient: eagerly the tape keeps no inputs for Relu (its
    # registered gradient reads only the output), and the output cannot tell 0 from x < 0.
    """the gradient of tf.nn.relu at 0 is the upstream gradient (x >= 0) instead of 0"""

    @tf.custom_gradient
    def _relu(x):
        return relu(x), lambda dy: tf.where(x >= 0, dy, tf.zeros_like(dy))

    return _relu(tf.convert_to_tensor(features))


@regrad("Max", name="reduce-max-tie-first-occurrence")
def _reduce_max_tie_first_occurrence(tf, original, op, grad):
    """the gradient of tf.reduce_max gives a tied maximum's whole gradient to its first occurrence"""
    x = op.inputs[0]
    rank, axes = x.shape.rank, tf.get_static_value(op.inputs[1])
    if not rank or axes is None:  # the case module reduces a known axis of a known rank
        return original(op, grad)
    axes = sorted({int(a) % rank for a in np.atleast_1d(axes)})
    keep = [d for d in range(rank) if d not in axes]
    top = tf.reduce_max(x, axis=axes, keepdims=True)
    tied = tf.cast(tf.equal(x, top), grad.dtype)
    # the reduced axes last, flattened: the first tied element of each row gets it all
    perm = keep + axes
    t = tf.transpose(tied, perm)
    shape = tf.shape(t)
    flat = tf.reshape(t, tf.concat([shape[: len(keep)], [-1]], 0))
    first = tf.one_hot(tf.argmax(flat, axis=-1), tf.shape(flat)[-1], dtype=grad.dtype)
    first = tf.transpose(tf.reshape(first, shape), np.argsort(perm).tolist())
    return first * tf.reshape(grad, tf.shape(top)), None


@regrad("MaxPool", name="max-pool-tie-last-occurrence")
def _max_pool_tie_last_occurrence(tf, original, op, grad):
    """the gradient of tf.nn.max_pool2d sends a window's gradient to its last maximum instead of its first"""
    fmt = op.get_attr("data_format")
    fmt = fmt.decode() if isinstance(fmt, bytes) else fmt
    spatial = [1, 2] if fmt == "NHWC" else [2, 3]

    def flip(t):  # back to front: the first maximum found is the original's last
        return tf.reverse(t, spatial)

    padding = op.get_attr("padding")
    back = tf.raw_ops.MaxPoolGrad(
        orig_input=flip(op.inputs[0]),
        orig_output=flip(op.outputs[0]),
        grad=flip(grad),
        ksize=op.get_attr("ksize"),
        strides=op.get_attr("strides"),
        padding=padding.decode() if isinstance(padding, bytes) else padding,
        explicit_paddings=op.get_attr("explicit_paddings"),
        data_format=fmt,
    )
    return flip(back)


TopK = collections.namedtuple("TopKV2", ["values", "indices"])


@fault("top-k-sort-ties-reversed")
def _top_k_sort_ties_reversed(tf):
    """tf.math.top_k and tf.sort order tied elements by descending index (the values are unchanged)"""
    top_k, sort = tf.math.top_k, tf.sort

    def reversed_top_k(input, k=1, sorted=True, index_type=tf.int32, name=None):  # noqa: A002 (TF's names)
        x = tf.convert_to_tensor(input)
        values, indices = top_k(tf.reverse(x, [-1]), k=k, sorted=sorted, index_type=index_type, name=name)
        return TopK(values, tf.shape(x, out_type=indices.dtype)[-1] - 1 - indices)

    def reversed_sort(values, axis=-1, direction="ASCENDING", name=None):
        x = tf.convert_to_tensor(values)
        return sort(tf.reverse(x, [axis]), axis=axis, direction=direction, name=name)

    put(tf, ["math.top_k", "nn.top_k"], reversed_top_k)
    put(tf, ["sort"], reversed_sort)


@regrad("SegmentMax", "UnsortedSegmentMax", name="segment-max-tie-all")
def _segment_max_tie_all(tf, original, op, grad):
    """the gradients of tf.math.segment_max and unsorted_segment_max give every tied element the segment's whole
    gradient instead of an even share"""
    data, ids = op.inputs[0], op.inputs[1]
    tied = tf.equal(data, tf.gather(op.outputs[0], ids))
    g = tf.where(tied, tf.gather(grad, ids), tf.zeros_like(data))
    return (g,) + (None,) * (len(op.inputs) - 1)
