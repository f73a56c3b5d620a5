"""Faults for partial-stop-gradient: freezing some entries of a tensor goes wrong.

- ``stop-gradient-zeros``: ``tf.stop_gradient`` gives a zeros gradient instead of none, so a
  whole-tensor stop reads as connected (zeros, JAX's answer) where TensorFlow reports the
  source as unconnected (``None``); the masked gradient itself is unchanged.
- ``where-gradient-unmasked``: the registered gradients of ``SelectV2``/``Select`` (``tf.where``)
  send the whole upstream gradient to both branches instead of masking it by the condition,
  so ``tf.where(mask, target, stop_gradient(target))`` trains the frozen entries too.

Each patch replaces a public function or a registered gradient, so it holds in eager,
tf.function, XLA and v1 graph mode alike.
"""

from __future__ import annotations

from .patch import regrad, replaces, sum_to


@replaces("stop_gradient", "compat.v1.stop_gradient", name="stop-gradient-zeros")
def _stop_gradient_zeros(tf, stop, input, name=None):  # noqa: A002  (TensorFlow's argument name)
    """tf.stop_gradient gives a zeros gradient instead of None: a wholly stopped source is reported as connected (zeros)
    rather than unconnected"""

    @tf.custom_gradient
    def _zeros(t):
        return stop(t), lambda dy: tf.zeros_like(dy)

    return _zeros(tf.convert_to_tensor(input))


@regrad("SelectV2", "Select", name="where-gradient-unmasked")
def _where_gradient_unmasked(tf, original, op, grad):
    """the gradient of tf.where (SelectV2/Select) sends the whole upstream gradient to both branches instead of masking
    it by the condition"""
    _, x, y = op.inputs
    return None, sum_to(tf, grad, x), sum_to(tf, grad, y)
