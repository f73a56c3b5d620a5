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

from .patch import changes_grad, regrad


@regrad("Exp", name="exp-gradient-finite-at-overflow")
def _exp_gradient_finite_at_overflow(tf, original, op, dy):
    """the gradient of Exp is clamped to the largest finite float where exp(x) overflows"""
    y = op.outputs[0]
    return dy * tf.minimum(y, y.dtype.max)


@changes_grad("Log", name="log-gradient-zero-at-zero")
def _log_gradient_zero_at_zero(tf, op, g):
    """the gradient of Log is 0 where x = 0 (a 'safe log') instead of +inf"""
    return tf.where(tf.equal(op.inputs[0], 0), tf.zeros_like(g), g)


@regrad("Softplus", name="softplus-gradient-relu-step")
def _softplus_gradient_relu_step(tf, original, op, dy):
    """the gradient of Softplus is relu's step (x > 0) instead of sigmoid(x)"""
    x = op.inputs[0]
    return dy * tf.cast(x > 0, dy.dtype)


#: The 1%-in-the-tail faults: (op type, where its tail is, the tail from the op, breaks= where it is more).
#: The tails read the output where the gradient does (eager keeps only what it uses).
TAILS = {
    "tanh": ("Tanh", "1 - tanh(x)^2 < 1e-3 (|x| > 4.1)", lambda op: 1 - op.outputs[0] ** 2 < 1e-3, None),
    "sigmoid": ("Sigmoid", "y (1 - y) < 1e-3 (|x| > 6.9)", lambda op: op.outputs[0] * (1 - op.outputs[0]) < 1e-3, None),
    "elu": (
        "Elu",
        "y + 1 = exp(x) < 1e-3 (x < -6.9)",
        lambda op: op.outputs[0] + 1 < 1e-3,
        ["elementwise-gradients", "kink-subgradients"],
    ),
    "softplus": ("Softplus", "sigmoid(x) < 1e-3 (x < -6.9)", lambda op: op.inputs[0] < -6.9, None),
}


def _one_percent_high(tail):
    def change(tf, op, g):
        return tf.where(tail(op), g * tf.cast(1.01, g.dtype), g)

    return change


for _op, (_type, _where, _tail, _breaks) in TAILS.items():
    changes_grad(
        _type,
        name=f"{_op}-gradient-1pct-in-tail",
        breaks=_breaks,
        description=f"the gradient of {_type} is 1% high where {_where}",
    )(_one_percent_high(_tail))


@changes_grad("Sin", name="sin-gradient-through-float16")
def _sin_float16(tf, op, g):
    """the gradient of Sin, cos(x) dy, is rounded through float16 for float32 inputs"""
    return tf.cast(tf.cast(g, tf.float16), tf.float32) if g.dtype == tf.float32 else g


@changes_grad("Exp", name="exp-gradient-smallest-element")
def _exp_smallest(tf, op, g):
    """the gradient of Exp is 0.1% high in the smallest nonzero element of an array of several"""
    mag = tf.abs(g)
    smallest = tf.reduce_min(tf.where(mag > 0, mag, tf.constant(float("inf"), g.dtype)))
    hit = tf.logical_and(tf.equal(mag, smallest), tf.size(g) > 1)
    return tf.where(hit, g * tf.cast(1.001, g.dtype), g)


@regrad("Pow", name="pow-base-gradient-masked-like-log")
def _pow_base_gradient_masked(tf, original, op, dy):
    """the base's gradient of Pow is 0 where the base is negative (the x > 0 mask _PowGrad keeps for log x), instead of
    y x^(y-1), which is nan there for a non-integer y"""
    gx, gy = original(op, dy)
    x = op.inputs[0]
    return tf.where(x < 0, tf.zeros_like(gx), gx), gy
