"""Faults for variable-vs-tensor: a scatter update that computes the new value without writing it,
arithmetic on a Variable that writes into it, and ``v += d`` that silently rebinds."""

from __future__ import annotations

from . import fault
from .patch import put


@fault("scatter-update-not-applied")
def _scatter_update_not_applied(tf):
    """Variable.scatter_update and tf.compat.v1.scatter_update return the scattered value as a new tensor but never
    assign it to the variable"""
    from tensorflow.python.ops import resource_variable_ops  # where Variable.scatter_update lives

    def scattered(ref, indices, updates, name=None):
        value = tf.convert_to_tensor(ref)
        idx = tf.expand_dims(tf.convert_to_tensor(indices), -1)
        return tf.tensor_scatter_nd_update(value, idx, tf.convert_to_tensor(updates, value.dtype), name=name)

    def scatter_update(ref, indices, updates, use_locking=True, name=None):
        return scattered(ref, indices, updates, name=name)

    def variable_scatter_update(self, sparse_delta, use_locking=False, name=None):
        return scattered(self, sparse_delta.indices, sparse_delta.values, name=name)

    put(tf, ["compat.v1.scatter_update"], scatter_update)
    resource_variable_ops.BaseResourceVariable.scatter_update = variable_scatter_update


@fault("variable-add-mutates")
def _variable_add_mutates(tf):
    """Variable.__add__ assigns v + other to the variable (an in-place add) and returns the sum, so a = a + 1 changes
    the original Variable"""
    from tensorflow.python.ops import variables  # Variable.__add__ is overloaded on the base class

    def add(self, other):
        return tf.convert_to_tensor(self.assign(self.read_value() + tf.convert_to_tensor(other, self.dtype.base_dtype)))

    variables.Variable.__add__ = add


@fault("variable-iadd-rebinds")
def _variable_iadd_rebinds(tf):
    """ResourceVariable += returns variable + value (a new Tensor) instead of raising RuntimeError, as TF1 ref variables
    did"""
    from tensorflow.python.ops import resource_variable_ops

    resource_variable_ops.BaseResourceVariable.__iadd__ = lambda self, other: self + other
