"""Faults for elementwise-gradients: an op's gradient goes wrong in one regime of its range.

- ``exp-gradient-finite-at-overflow``: the gradient of ``Exp`` is clamped to the largest float
  where exp(x) overflows, so exp's gradient at 1000 is finite instead of +inf (only the
  special point sees it: no drawn value overflows).
- ``log-gradient-zero-at-zero``: a "safe log": the gradient of ``Log`` is 0 where x = 0
  instead of 1 / 0 = +inf.
- ``softplus-gradient-relu-step``: the gradient of ``Softplus`` is the step (x > 0) of relu
  instead of sigmoid(x): right in both saturated tails, wrong in between.
- ``pow-base-gradient-masked-like-log``: the base's gradient of ``Pow`` takes the mask its
  exponent's gradient uses for log x (x > 0): 0 at a negative base, where y x^(y-1) is nan
  for a non-integer y (only the special point -2^0.5 sees it: no drawn base is negative).

The error model's faults (issue 47), each a small error an array-level floor forgave:

- ``tanh-gradient-1pct-in-tail``: the gradient of ``Tanh`` is 1% high where ``1 - tanh(x)^2 <
  1e-3`` (|x| > 4.1): an absolute error below 1e-5;
- ``sigmoid-gradient-1pct-in-tail``, ``elu-gradient-1pct-in-tail``,
  ``softplus-gradient-1pct-in-tail``: the same in the saturated tails of ``Sigmoid`` (|x| > 6.9),
  ``Elu`` (x < -6.9) and ``Softplus`` (x < -6.9);
- ``sin-gradient-through-float16``: the gradient of ``Sin``, cos(x) dy, is computed right and
  rounded through float16 (2^-11 relative);
- ``exp-gradient-smallest-element``: the gradient of ``Exp`` is 0.1% high in one element, the
  smallest nonzero one of an array of several (beside larger ones, where the old floor was set).

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
    _changed(
        tf, "log-gradient-zero-at-zero", "Log", lambda op, g: tf.where(tf.equal(op.inputs[0], 0), tf.zeros_like(g), g)
    )


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


def _changed(tf, fault_name, op_type, change):
    """Re-register ``op_type``'s gradient as ``change(op, g)`` of the original's ``g``."""

    def make(original):
        def grad(op, dy):
            g = original(op, dy)
            return change(op, g[0] if isinstance(g, (list, tuple)) else g)

        return grad

    reregister(tf, fault_name, op_type, make)


#: The 1%-in-the-tail faults: (op type, where its tail is, the tail from the op, behaviours).
#: The tails read the output where the gradient does (eager keeps only what it uses).
TAILS = {
    "tanh": ("Tanh", "1 - tanh(x)^2 < 1e-3 (|x| > 4.1)", lambda op: 1 - op.outputs[0] ** 2 < 1e-3, BREAKS),
    "sigmoid": (
        "Sigmoid",
        "y (1 - y) < 1e-3 (|x| > 6.9)",
        lambda op: op.outputs[0] * (1 - op.outputs[0]) < 1e-3,
        BREAKS,
    ),
    "elu": (
        "Elu",
        "y + 1 = exp(x) < 1e-3 (x < -6.9)",
        lambda op: op.outputs[0] + 1 < 1e-3,
        BREAKS + ["kink-subgradients"],
    ),
    "softplus": ("Softplus", "sigmoid(x) < 1e-3 (x < -6.9)", lambda op: op.inputs[0] < -6.9, BREAKS),
}


def _one_percent_high(name, op_type, tail):
    def patch(tf):
        scaled = lambda op, g: tf.where(tail(op), g * tf.cast(1.01, g.dtype), g)  # noqa: E731
        _changed(tf, name, op_type, scaled)

    return patch


for _op, (_type, _where, _tail, _breaks) in TAILS.items():
    _name = f"{_op}-gradient-1pct-in-tail"
    fault(_name, breaks=_breaks, description=f"the gradient of {_type} is 1% high where {_where}")(
        _one_percent_high(_name, _type, _tail)
    )


@fault(
    "sin-gradient-through-float16",
    breaks=BREAKS,
    description="the gradient of Sin, cos(x) dy, is rounded through float16 for float32 inputs",
)
def _sin_float16(tf):
    def change(op, g):
        return tf.cast(tf.cast(g, tf.float16), tf.float32) if g.dtype == tf.float32 else g

    _changed(tf, "sin-gradient-through-float16", "Sin", change)


@fault(
    "exp-gradient-smallest-element",
    breaks=BREAKS,
    description="the gradient of Exp is 0.1% high in the smallest nonzero element of an array of several",
)
def _exp_smallest(tf):
    def change(op, g):
        mag = tf.abs(g)
        smallest = tf.reduce_min(tf.where(mag > 0, mag, tf.constant(float("inf"), g.dtype)))
        hit = tf.logical_and(tf.equal(mag, smallest), tf.size(g) > 1)
        return tf.where(hit, g * tf.cast(1.001, g.dtype), g)

    _changed(tf, "exp-gradient-smallest-element", "Exp", change)


@fault(
    "pow-base-gradient-masked-like-log",
    breaks=BREAKS,
    description="the base's gradient of Pow is 0 where the base is negative (the x > 0 mask _PowGrad keeps "
    "for log x), instead of y x^(y-1), which is nan there for a non-integer y",
)
def _pow_base_gradient_masked(tf):
    def make(original):
        def grad(op, dy):
            gx, gy = original(op, dy)
            x = op.inputs[0]
            return tf.where(x < 0, tf.zeros_like(gx), gx), gy

        return grad

    reregister(tf, "pow-base-gradient-masked-like-log", "Pow", make)
