"""Faults for cumulative-gradients: the gradient of a cumulative product or sum goes wrong.

- ``cumprod-gradient-divides-by-x``: the registered gradient of ``Cumprod`` is
  ``cumsum(cumprod(x) * dy, exclusive, not reverse) / x``, a plain division (TensorFlow's formula
  before ``div_no_nan``, tensorflow#3862): NaN at every zero, right elsewhere (only the special
  points see it).
- ``cumprod-exclusive-gradient-not-reversed``: for ``exclusive=True`` the gradient's cumsum runs in
  the scan's own direction instead of against it: wrong at every drawn value of the exclusive rows.
- ``cumsum-reverse-gradient-not-reversed``: the registered gradient of ``Cumsum`` with
  ``reverse=True`` sums the cotangent in the scan's direction (the control's fault).

Each patch replaces a registered gradient, so it holds in eager, tf.function, XLA and v1 graph
mode alike.
"""

from __future__ import annotations

from .patch import regrad


def _flags(op):
    return op.inputs[0], op.inputs[1], op.get_attr("exclusive"), op.get_attr("reverse")


@regrad("Cumprod", name="cumprod-gradient-divides-by-x")
def _cumprod_gradient_divides_by_x(tf, original, op, dy):
    """the gradient of Cumprod is cumsum(cumprod(x) * dy, exclusive, not reverse) / x: NaN at zeros"""
    x, axis, exclusive, reverse = _flags(op)
    prod = tf.math.cumprod(x, axis, exclusive=exclusive, reverse=reverse)
    return [tf.math.cumsum(prod * dy, axis, exclusive=exclusive, reverse=not reverse) / x, None]


@regrad("Cumprod", name="cumprod-exclusive-gradient-not-reversed")
def _cumprod_exclusive_gradient_not_reversed(tf, original, op, dy):
    """the gradient of an exclusive Cumprod sums in the scan's direction instead of against it"""
    x, axis, exclusive, reverse = _flags(op)
    if not exclusive:
        return original(op, dy)
    prod = tf.math.cumprod(x, axis, exclusive=True, reverse=reverse)
    return [tf.math.divide_no_nan(tf.math.cumsum(prod * dy, axis, exclusive=True, reverse=reverse), x), None]


@regrad("Cumsum", name="cumsum-reverse-gradient-not-reversed")
def _cumsum_reverse_gradient_not_reversed(tf, original, op, dy):
    """the gradient of a reverse Cumsum sums the cotangent in the scan's direction instead of against it"""
    _, axis, exclusive, reverse = _flags(op)
    if not reverse:
        return original(op, dy)
    return [tf.math.cumsum(dy, axis, exclusive=exclusive, reverse=True), None]
