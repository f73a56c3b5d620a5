"""Optimizer state shared across examples of a ``tf.function``/XLA row.

A traced function may create variables on its first trace only, so the cases that step a
TensorFlow optimizer in ``function``/``xla`` modes build the variables and the optimizer
once per row, eagerly, and reset them inside the traced step. :func:`reset_slots` puts an
optimizer's own variables (slots, iteration count, beta powers) back to their fresh values
at the end of the step, so every example starts from a fresh optimizer while the function
is traced once.
"""

from __future__ import annotations


def reset_slots(tf, optimizer, initial=None) -> list:
    """Assign ``optimizer``'s variables back to ``initial``, their fresh values, and return them.

    Call it at the end of the traced step, passing what the previous call returned. With
    ``initial=None`` (traced before anything ran) the current values are the fresh ones:
    they are read eagerly (in ``tf.init_scope``) and returned for the next call. Works for
    Keras optimizers (``variables`` a property) and v1 ones (``variables()`` a method).
    """
    variables = optimizer.variables() if callable(optimizer.variables) else list(optimizer.variables)
    if initial is None:
        with tf.init_scope():
            initial = [v.numpy() for v in variables]
    for v, value in zip(variables, initial):
        v.assign(value)
    return initial
