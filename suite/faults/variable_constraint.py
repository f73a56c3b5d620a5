"""Faults for ``variable-constraint``: optimizers that stop projecting constrained variables, and
an ``assign`` that starts projecting."""

from __future__ import annotations

import contextlib
import functools

from . import fault


@contextlib.contextmanager
def _without_constraints(variables):
    """Hide each variable's ``constraint`` (tf.Variable and keras.Variable keep it in ``_constraint``)
    inside the block; put them back on leaving it."""
    saved = [(v, v._constraint) for v in variables if getattr(v, "_constraint", None) is not None]
    for v, _ in saved:
        v._constraint = None
    try:
        yield
    finally:
        for v, c in saved:
            v._constraint = c


@fault("keras-optimizer-skips-constraints")
def _keras_optimizer_skips_constraints(tf):
    """Keras optimizers' apply/apply_gradients update the variables but no longer run variable.constraint afterwards"""
    from keras.src.optimizers import base_optimizer

    cls = base_optimizer.BaseOptimizer
    original = cls.apply

    @functools.wraps(original)
    def apply(self, grads, trainable_variables=None):
        variables = (
            list(trainable_variables)
            if trainable_variables is not None
            else list(getattr(self, "_trainable_variables", []))
        )
        with _without_constraints(variables):
            return original(self, grads, variables if trainable_variables is not None else None)

    cls.apply = apply


@fault("v1-optimizer-skips-constraints")
def _v1_optimizer_skips_constraints(tf):
    """tf.compat.v1.train optimizers' apply_gradients/minimize update the variables but no longer assign
    var.constraint(var) afterwards (nor refuse sparse gradients)"""
    from tensorflow.python.training import optimizer as v1

    for name in ("_RefVariableProcessor", "_DenseReadResourceVariableProcessor", "_DenseResourceVariableProcessor"):
        cls = getattr(v1, name)
        original = cls.update_op

        def make(original):
            @functools.wraps(original)
            def update_op(self, optimizer, g):
                with _without_constraints([self._v]):
                    return original(self, optimizer, g)

            return update_op

        cls.update_op = make(original)


@fault("assign-applies-constraint")
def _assign_applies_constraint(tf):
    """tf.Variable.assign/assign_add/assign_sub project the written value through the variable's constraint (the docs
    say only optimizers do)"""
    from tensorflow.python.ops import resource_variable_ops as rvo

    raw_assign = rvo.BaseResourceVariable.__dict__["assign"]  # the unpatched write
    combines = {
        "assign": lambda v, x: x,
        "assign_add": lambda v, x: v.read_value() + x,
        "assign_sub": lambda v, x: v.read_value() - x,
    }

    def make(original, combine):
        @functools.wraps(original)
        def method(self, value, use_locking=None, name=None, read_value=True):
            if self.constraint is None:
                return original(self, value, use_locking=use_locking, name=name, read_value=read_value)
            target = self.constraint(combine(self, tf.convert_to_tensor(value, dtype=self.dtype)))
            return raw_assign(self, target, use_locking=use_locking, name=name, read_value=read_value)

        return method

    # ResourceVariable shadows these with its own wrappers (weak_tensor_ops.py): patch both classes.
    for cls in (rvo.BaseResourceVariable, rvo.ResourceVariable):
        for name, combine in combines.items():
            setattr(cls, name, make(cls.__dict__[name], combine))
