"""Faults for straight-through-estimator: ``y = x + stop_gradient(round(x) - x)`` goes wrong.

- ``round-half-away-from-zero``: ``tf.round`` rounds k + 0.5 away from zero (C's ``round``,
  XLA's ``RoundNearestAfz``) instead of to even, the rule the seed's half-way points turn on;
  its gradient stays the registered ``None``.
- ``round-gradient-straight-through``: the registered gradient of ``Round`` passes the
  upstream gradient through (a built-in STE) instead of ``None``.
- ``stop-gradient-leaks-fraction``: ``tf.stop_gradient`` lets 1/1024 of the upstream gradient
  through (as if lowered to a gradient-scaling op with a non-zero scale): the STE gradient,
  the frozen entries of a partial stop and a stopped occurrence all get a small wrong term
  that only an exact (or tight) comparison sees.

- ``stop-gradient-identity``: ``tf.stop_gradient`` lets the gradient through (``tf.identity``).

Every patch replaces a public function or a registered gradient, so it holds in eager,
tf.function, XLA and v1 graph mode alike.
"""

from __future__ import annotations

from .patch import regrad, replaces

LEAK = 2.0**-10
STOPS = ["straight-through-estimator", "partial-stop-gradient", "per-occurrence-gradients"]


@replaces("round", "math.round", name="round-half-away-from-zero")
def _round_half_away_from_zero(tf, original, x, name=None):
    """tf.round rounds half-way points away from zero (0.5 -> 1, 2.5 -> 3, -1.5 -> -2) instead of to even; the gradient
    stays None"""
    x = tf.convert_to_tensor(x)
    if not x.dtype.is_floating:
        return original(x, name=name)
    a = tf.abs(x)
    whole = tf.floor(a)
    halfway = tf.equal(a - whole, 0.5)  # exact: a - floor(a) is representable
    away = tf.sign(x) * (whole + 1)
    # Only half-way points change (never to a signed zero); stop_gradient keeps Round's None.
    return tf.stop_gradient(tf.where(halfway, away, original(x)))


@regrad("Round", name="round-gradient-straight-through")
def _round_gradient_straight_through(tf, original, op, grad):
    """the registered gradient of Round passes the upstream gradient through (a built-in straight-through estimator)
    instead of None"""
    return grad


@replaces("stop_gradient", "compat.v1.stop_gradient", name="stop-gradient-leaks-fraction", breaks=STOPS)
def _stop_gradient_leaks_fraction(tf, stop, input, name=None):  # noqa: A002  (TensorFlow's argument name)
    """tf.stop_gradient passes 1/1024 of the upstream gradient through instead of none"""

    @tf.custom_gradient
    def leaky(t):
        return stop(t), lambda dy: dy * tf.constant(LEAK, dy.dtype)

    # A Variable is read first, so the leak flows to it through ReadVariableOp, as a read's gradient would.
    return leaky(tf.convert_to_tensor(input))


@replaces("stop_gradient", "compat.v1.stop_gradient", name="stop-gradient-identity", breaks=STOPS)
def _stop_gradient_identity(tf, original, input, name=None):  # noqa: A002
    """tf.stop_gradient lets the gradient through (behaves like tf.identity)"""
    return tf.identity(input, name=name)
