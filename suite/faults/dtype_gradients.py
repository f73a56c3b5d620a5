"""Faults for dtype-gradients: a rounding op that lets the gradient through, a maximum that drops NaN."""

from __future__ import annotations

from . import fault
from .catalogue import _set


@fault(
    "rounding-gradient-passes-through",
    breaks=["dtype-gradients"],
    description="tf.math.floor/ceil/round/rint get a straight-through gradient (the identity's) instead of "
    "their registered None",
)
def _rounding_passes(tf):
    for name in ("floor", "ceil", "round", "rint"):
        op = getattr(tf.math, name)

        def passing(x, name=None, _op=op):
            return x + tf.stop_gradient(_op(x) - x)

        _set(tf, [f"math.{name}"], passing)


@fault(
    "maximum-drops-nan",
    breaks=["dtype-gradients"],
    description="tf.maximum/tf.minimum return the other operand where one is NaN (fmax/fmin) instead of NaN",
)
def _maximum_drops_nan(tf):
    for name in ("maximum", "minimum"):
        op = getattr(tf.math, name)

        def dropping(x, y, name=None, _op=op):
            x, y = tf.convert_to_tensor(x), tf.convert_to_tensor(y)
            return tf.where(tf.math.is_nan(x), y, tf.where(tf.math.is_nan(y), x, _op(x, y)))

        _set(tf, [name, f"math.{name}"], dropping)
