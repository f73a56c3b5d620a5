"""Faults for second-order-gradients: regressions a TensorFlow release could plausibly ship.

- ``tanh-grad-grad-halved``: the gradient registered for ``TanhGrad`` (``_TanhGradGrad`` in
  math_grad.py, ``grad * -2 * dy * y``) loses its factor 2, so d2/dx2 tanh is halved while
  first derivatives stay right.
- ``tanh-grad-grad-unconnected``: the same gradient returns ``None`` for ``y``: tanh's
  curvature is dropped (d2/dx2 tanh unconnected; double backprop keeps only the terms
  through the explicit weights).
- ``inner-gradient-constant``: ``GradientTape.gradient`` and ``tf.gradients`` hand back
  results that an enclosing tape / a second ``tf.gradients`` treats as constants (as if
  the backward pass ran with recording paused), so double backprop sees no dependence.
"""

from __future__ import annotations

from . import fault
from .patch import regrad


@regrad("TanhGrad", name="tanh-grad-grad-halved")
def _tanh_grad_grad_halved(tf, original, op, grad):
    """the registered gradient of TanhGrad drops the factor 2: d2/dx2 tanh(x) = -tanh*sech^2"""
    y, dy = op.inputs  # TanhGrad(y, dy) = dy * (1 - y^2)
    return grad * -1.0 * dy * y, tf.raw_ops.TanhGrad(y=y, dy=grad)


@regrad("TanhGrad", name="tanh-grad-grad-unconnected")
def _tanh_grad_grad_unconnected(tf, original, op, grad):
    """the registered gradient of TanhGrad returns None for y: tanh's curvature is lost"""
    y, _ = op.inputs
    return None, tf.raw_ops.TanhGrad(y=y, dy=grad)


@fault("inner-gradient-constant")
def _inner_gradient_constant(tf):
    """GradientTape.gradient / tf.gradients results are not differentiable by an outer tape or a second tf.gradients
    (stop_gradient on every result)"""

    def freeze(g):
        if g is None:
            return None
        if isinstance(g, (list, tuple)):
            return type(g)(freeze(x) for x in g)
        if isinstance(g, dict):
            return {k: freeze(x) for k, x in g.items()}
        return tf.stop_gradient(g)

    tape_gradient = tf.GradientTape.gradient

    def gradient(self, target, sources, *args, **kwargs):
        return freeze(tape_gradient(self, target, sources, *args, **kwargs))

    tf.GradientTape.gradient = gradient
    for owner in (tf, tf.compat.v1):

        def patched(ys, xs, *args, _orig=owner.gradients, **kwargs):
            return freeze(_orig(ys, xs, *args, **kwargs))

        owner.gradients = patched
