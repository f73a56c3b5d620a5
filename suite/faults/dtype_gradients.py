"""Faults for dtype-gradients: a rounding op that lets the gradient through, a maximum that drops NaN,
NumPy behaviour that ignores ``prefer_float32`` (applied in the NumPy-behaviour peers, which get the
run's faults)."""

from __future__ import annotations

from . import fault
from .patch import put, replaces


@fault("rounding-gradient-passes-through")
def _rounding_passes(tf):
    """tf.math.floor/ceil/round/rint get a straight-through gradient (the identity's) instead of their registered
    None"""
    for name in ("floor", "ceil", "round", "rint"):
        op = getattr(tf.math, name)

        def passing(x, name=None, _op=op):
            return x + tf.stop_gradient(_op(x) - x)

        put(tf, [f"math.{name}"], passing)


@fault("maximum-drops-nan")
def _maximum_drops_nan(tf):
    """tf.maximum/tf.minimum return the other operand where one is NaN (fmax/fmin) instead of NaN"""
    for name in ("maximum", "minimum"):
        op = getattr(tf.math, name)

        def dropping(x, y, name=None, _op=op):
            x, y = tf.convert_to_tensor(x), tf.convert_to_tensor(y)
            return tf.where(tf.math.is_nan(x), y, tf.where(tf.math.is_nan(y), x, _op(x, y)))

        put(tf, [name, f"math.{name}"], dropping)


@replaces("experimental.numpy.experimental_enable_numpy_behavior", name="numpy-behavior-ignores-prefer-float32")
def _numpy_behavior_ignores_prefer_float32(tf, enable, prefer_float32=False, dtype_conversion_mode="legacy"):
    """tf.experimental.numpy.experimental_enable_numpy_behavior ignores prefer_float32=True: a float32 tensor times a
    NumPy float64 scalar is float64 under it too"""
    return enable(prefer_float32=False, dtype_conversion_mode=dtype_conversion_mode)
