"""Faults for elementwise-gradients: an op's gradient goes wrong in one regime of its range.

- ``exp-gradient-finite-at-overflow``: the gradient of ``Exp`` is clamped to the largest float
  where exp(x) overflows, so exp's gradient at 1000 is finite instead of +inf (only the
  special point sees it: no drawn value overflows).
- ``log-gradient-zero-at-zero``: a "safe log": the gradient of ``Log`` is 0 where x = 0
  instead of 1 / 0 = +inf.
- ``softplus-gradient-relu-step``: the gradient of ``Softplus`` is the step (x > 0) of relu
  instead of sigmoid(x): right in both saturated tails, wrong in between.

Each patch replaces a registered gradient, so it holds in eager, tf.function, XLA and v1
graph mode alike.
"""

from __future__ import annotations

from . import fault
from .straight_through_estimator import reregister

BREAKS = ["elementwise-gradients"]


@fault(
    "exp-gradient-finite-at-overflow",
    breaks=BREAKS,
    description="the gradient of Exp is clamped to the largest finite float where exp(x) overflows",
)
def _exp_gradient_finite_at_overflow(tf):
    def make(original):
        def grad(op, dy):
            y = op.outputs[0]
            return dy * tf.minimum(y, y.dtype.max)

        return grad

    reregister(tf, "exp-gradient-finite-at-overflow", "Exp", make)


@fault(
    "log-gradient-zero-at-zero",
    breaks=BREAKS,
    description="the gradient of Log is 0 where x = 0 (a 'safe log') instead of +inf",
)
def _log_gradient_zero_at_zero(tf):
    def make(original):
        def grad(op, dy):
            g = original(op, dy)
            g = g[0] if isinstance(g, (list, tuple)) else g
            return tf.where(tf.equal(op.inputs[0], 0), tf.zeros_like(g), g)

        return grad

    reregister(tf, "log-gradient-zero-at-zero", "Log", make)


@fault(
    "softplus-gradient-relu-step",
    breaks=BREAKS,
    description="the gradient of Softplus is relu's step (x > 0) instead of sigmoid(x)",
)
def _softplus_gradient_relu_step(tf):
    def make(original):
        def grad(op, dy):
            x = op.inputs[0]
            return dy * tf.cast(x > 0, dy.dtype)

        return grad

    reregister(tf, "softplus-gradient-relu-step", "Softplus", make)
