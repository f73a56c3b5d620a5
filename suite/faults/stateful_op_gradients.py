"""Faults for stateful-op-gradients: gradients through state and control flow go wrong.

- ``variable-read-detached``: ``Variable.read_value()`` hands back a value cut off from the
  variable (as if read through ``stop_gradient``): a read after ``assign``/``assign_add`` no
  longer gives the variable a gradient.
- ``tensor-scatter-update-first-wins``: ``tf.tensor_scatter_nd_update`` applies repeated indices
  in reverse, so the first update of an index is kept instead of the last (the CPU rule).
- ``tensor-scatter-update-grad-unmasked``: the registered gradient of ``TensorScatterUpdate``
  passes the whole upstream to the tensor, also where the updates overwrote it.
- ``variable-scatter-update-first-wins``: ``tf.compat.v1.scatter_nd_update`` keeps the first
  update of a repeated index.
- ``cond-gradient-from-untaken-branch``: ``tf.cond`` returns the taken branch's value with the
  other branch's gradient.
- ``switch-case-clamps-index``: ``tf.switch_case`` clamps the index into range (JAX's rule), so
  a negative index runs branch 0 instead of the default, last, branch.
- ``switch-case-gradient-from-next-branch``: ``tf.switch_case`` returns branch i's value with
  branch (i + 1) mod n's gradient.
- ``while-loop-gradient-drops-last-iteration``: ``tf.while_loop`` returns its value with the
  gradient of a loop that stopped one iteration earlier.

Each patch replaces a public function, a method of the variable class or a registered
gradient, so it holds in eager, tf.function, XLA and v1 graph mode alike.
"""

from __future__ import annotations

from . import fault
from .patch import regrad, replaces


def _value_of_with_gradient_of(tf, value, gradient):
    """``value``'s numbers, ``gradient``'s derivatives (float tensors; others are ``value``)."""
    stop = tf.stop_gradient

    def mix(v, g):
        v = tf.convert_to_tensor(v)
        return tf.convert_to_tensor(g) + stop(v - g) if v.dtype.is_floating else v

    return tf.nest.map_structure(mix, value, gradient)


@fault("variable-read-detached")
def _variable_read_detached(tf):
    """Variable.read_value() returns a value cut off from the variable: a read after an assign gives the variable no
    gradient"""
    from tensorflow.python.ops import resource_variable_ops  # where tf.Variable's methods live

    read = resource_variable_ops.BaseResourceVariable.read_value

    def read_value(self):
        return tf.stop_gradient(read(self))

    resource_variable_ops.BaseResourceVariable.read_value = read_value


def _reversed(tf, indices, updates):
    return tf.reverse(tf.convert_to_tensor(indices), [0]), tf.reverse(tf.convert_to_tensor(updates), [0])


@replaces("tensor_scatter_nd_update", "compat.v1.tensor_scatter_nd_update", name="tensor-scatter-update-first-wins")
def _tensor_scatter_update_first_wins(tf, original, tensor, indices, updates, name=None):
    """tf.tensor_scatter_nd_update keeps the first update of a repeated index instead of the last"""
    return original(tensor, *_reversed(tf, indices, updates), name=name)


@regrad("TensorScatterUpdate", name="tensor-scatter-update-grad-unmasked")
def _tensor_scatter_update_grad_unmasked(tf, original, op, grad):
    """the gradient of TensorScatterUpdate gives the tensor the whole upstream, also at the entries the updates
    overwrote"""
    _, indices_grad, updates_grad = original(op, grad)
    return grad, indices_grad, updates_grad


@replaces("compat.v1.scatter_nd_update", name="variable-scatter-update-first-wins")
def _variable_scatter_update_first_wins(tf, original, ref, indices, updates, use_locking=True, name=None):
    """tf.compat.v1.scatter_nd_update keeps the first update of a repeated index instead of the last"""
    return original(ref, *_reversed(tf, indices, updates), use_locking=use_locking, name=name)


@replaces("cond", name="cond-gradient-from-untaken-branch")
def _cond_gradient_from_untaken_branch(tf, original, pred, true_fn=None, false_fn=None, name=None):
    """tf.cond returns the taken branch's value with the gradient of the branch not taken"""
    taken = original(pred, true_fn, false_fn, name=name)
    return _value_of_with_gradient_of(tf, taken, original(pred, false_fn, true_fn))


@replaces("switch_case", "compat.v1.switch_case", name="switch-case-clamps-index")
def _switch_case_clamps_index(tf, original, branch_index, branch_fns, default=None, name="switch_case"):
    """tf.switch_case clamps an out-of-range index into range: -1 runs branch 0, not the default"""
    index = tf.clip_by_value(branch_index, 0, len(branch_fns) - 1)
    return original(index, branch_fns, default=default, name=name)


@replaces("switch_case", "compat.v1.switch_case", name="switch-case-gradient-from-next-branch")
def _switch_case_gradient_from_next_branch(tf, original, branch_index, branch_fns, default=None, name="switch_case"):
    """tf.switch_case returns branch i's value with the gradient of branch (i + 1) mod n"""
    taken = original(branch_index, branch_fns, default=default, name=name)
    n = len(branch_fns)
    following = tf.math.floormod(tf.clip_by_value(branch_index, 0, n - 1) + 1, n)
    return _value_of_with_gradient_of(tf, taken, original(following, branch_fns, default=default))


@replaces("while_loop", name="while-loop-gradient-drops-last-iteration")
def _while_loop_gradient_drops_last_iteration(tf, original, cond, body, loop_vars, **kwargs):
    """tf.while_loop returns its value with the gradient of the loop one iteration shorter"""

    def one_more(*loop_vars):  # the loop continues only if the next iteration would too
        return tf.logical_and(cond(*loop_vars), cond(*body(*loop_vars)))

    full = original(cond, body, loop_vars, **kwargs)
    return _value_of_with_gradient_of(tf, full, original(one_more, body, loop_vars, **kwargs))
