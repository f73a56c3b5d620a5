"""Faults for structured-tensor-gradients: a SparseTensor densified without its index check, an
IndexedSlices densified without summing its duplicate slices, a ragged tensor's padding cut off
from ``default_value``'s gradient."""

from __future__ import annotations

from . import fault
from .patch import replaces


@replaces(
    "sparse.to_dense",
    "compat.v1.sparse.to_dense",
    "compat.v1.sparse_tensor_to_dense",
    name="sparse-to-dense-sums-duplicates-silently",
)
def _to_dense_sums(tf, original, sp_input, default_value=None, validate_indices=True, name=None):
    """tf.sparse.to_dense neither validates its indices nor overwrites: a repeated index is summed (a scatter_nd) where
    TensorFlow refuses it, or keeps the last value with validate_indices=False"""
    dense = tf.scatter_nd(sp_input.indices, sp_input.values, sp_input.dense_shape)
    if default_value is None:
        return dense
    hit = tf.scatter_nd(sp_input.indices, tf.ones_like(sp_input.values), sp_input.dense_shape)
    return tf.where(hit > 0, dense, tf.cast(default_value, dense.dtype))


@fault("indexed-slices-densify-keeps-last-duplicate")
def _densify_last(tf):
    """tf.convert_to_tensor of an IndexedSlices writes each slice over the last (tensor_scatter_nd_update) instead of
    summing the slices of a repeated index"""
    from tensorflow.python.framework import tensor_conversion_registry

    def to_tensor(value, dtype=None, name=None, as_ref=False):
        zeros = tf.zeros(tf.cast(value.dense_shape, tf.int32), value.values.dtype)
        return tf.tensor_scatter_nd_update(zeros, tf.expand_dims(value.indices, -1), value.values)

    # priority 1 runs before the registry's own IndexedSlices conversion (priority 100)
    tensor_conversion_registry.register_tensor_conversion_function(tf.IndexedSlices, to_tensor, priority=1)


@replaces("RaggedTensor.to_tensor", name="ragged-to-tensor-default-gets-no-gradient")
def _to_tensor_no_default_grad(tf, original, self, default_value=None, name=None, shape=None):
    """RaggedTensor.to_tensor stops the gradient of default_value: the padding's cotangents are dropped instead of
    summed into the default value"""
    if default_value is not None:
        default_value = tf.stop_gradient(default_value)
    return original(self, default_value=default_value, name=name, shape=shape)
