"""Faults for scatter-duplicate-indices: scatter updates that drop repeated indices, or an
update op that computes the new centers without writing them to the variable."""

from __future__ import annotations

from . import fault
from .patch import put, replaces


def _last_only(tf, indices, updates):
    """``updates`` with every row zeroed but the last of each repeated index (indices [m] or
    [m, k]): scattered with accumulation, that is a scatter where the last duplicate wins."""
    indices = tf.convert_to_tensor(indices)
    updates = tf.convert_to_tensor(updates)
    flat = tf.reshape(indices, [tf.shape(indices)[0], -1])
    same = tf.reduce_all(tf.equal(flat[:, None, :], flat[None, :, :]), axis=-1)
    pos = tf.range(tf.shape(flat)[0])
    keep = tf.logical_not(tf.reduce_any(tf.logical_and(same, pos[None, :] > pos[:, None]), axis=1))
    shape = tf.concat([tf.shape(keep), tf.ones([tf.rank(updates) - 1], tf.int32)], 0)
    return updates * tf.reshape(tf.cast(keep, updates.dtype), shape)


@replaces("tensor_scatter_nd_sub", "compat.v1.tensor_scatter_nd_sub", name="tensor-scatter-nd-sub-last-wins")
def _tensor_scatter_nd_sub_last_wins(tf, original, tensor, indices, updates, *args, **kwargs):
    """tf.tensor_scatter_nd_sub keeps only the last update of a repeated index instead of accumulating them"""
    return original(tensor, indices, _last_only(tf, indices, updates), *args, **kwargs)


@fault("scatter-sub-last-wins")
def _scatter_sub_last_wins(tf):
    """tf.compat.v1.scatter_sub and Variable.scatter_sub keep only the last update of a repeated index (as a
    non-accumulating index_put would)"""
    from tensorflow.python.ops import resource_variable_ops  # where Variable.scatter_sub lives

    v1 = tf.compat.v1.scatter_sub
    method = resource_variable_ops.BaseResourceVariable.scatter_sub

    def scatter_sub(ref, indices, updates, use_locking=False, name=None):
        return v1(ref, indices, _last_only(tf, indices, updates), use_locking=use_locking, name=name)

    def variable_scatter_sub(self, sparse_delta, use_locking=False, name=None):
        values = _last_only(tf, sparse_delta.indices, sparse_delta.values)
        return method(
            self,
            tf.IndexedSlices(values, sparse_delta.indices, sparse_delta.dense_shape),
            use_locking=use_locking,
            name=name,
        )

    put(tf, ["compat.v1.scatter_sub"], scatter_sub)
    resource_variable_ops.BaseResourceVariable.scatter_sub = variable_scatter_sub


@replaces("compat.v1.scatter_sub", name="scatter-sub-not-applied")
def _scatter_sub_not_applied(tf, original, ref, indices, updates, use_locking=False, name=None):
    """tf.compat.v1.scatter_sub returns the updated value but never writes it to the variable"""
    value = tf.convert_to_tensor(ref)
    idx = tf.convert_to_tensor(indices)
    return tf.tensor_scatter_nd_sub(
        value, tf.expand_dims(idx, -1), tf.convert_to_tensor(updates, value.dtype), name=name
    )
