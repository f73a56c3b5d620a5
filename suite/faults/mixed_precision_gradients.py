"""Faults for mixed-precision-gradients: a loss-scale optimizer that applies non-finite steps or grows its
scale every step, and a mixed_float16 policy that makes float16 variables."""

from __future__ import annotations

from . import fault
from .patch import get, put, replaces

LSO = "keras.mixed_precision.LossScaleOptimizer"


@fault("loss-scale-never-skips-nonfinite-step")
def _never_skips(tf):
    """tf.keras.mixed_precision.LossScaleOptimizer applies a step whose gradients hold inf/NaN (the inner optimizer gets
    them, unscaled) instead of skipping it"""
    original = get(tf, LSO)
    if hasattr(original, "check_finite"):  # Keras 3: every gradient counts as finite

        class Applying(original):
            def check_finite(self, grads):
                return tf.constant(True)

        put(tf, [LSO], Applying)
        return
    # Keras 2: the scale state still updates, but says "apply" whatever it saw
    state = type(original(tf.keras.optimizers.SGD())._loss_scale)
    update = state.update

    def applying(self, grads):
        op, _ = update(self, grads)
        return op, tf.constant(True)

    state.update = applying


@replaces(LSO, name="loss-scale-grows-every-step")
def _grows_every_step(tf, original, inner_optimizer, initial_scale=2.0**15, dynamic_growth_steps=2000, *args, **kwargs):
    """tf.keras.mixed_precision.LossScaleOptimizer doubles its scale after every finite step, ignoring
    dynamic_growth_steps"""
    return original(inner_optimizer, initial_scale, 1, *args, **kwargs)


@fault("mixed-policy-float16-variables")
def _float16_variables(tf):
    """a Dense layer under mixed_float16 keeps its kernel in float16 (the policy's compute dtype) instead of float32, so
    the kernel's gradient is float16 too"""
    original = tf.keras.layers.Dense

    class HalfDense(original):
        def __init__(self, *args, dtype=None, **kwargs):
            mixed = dtype == "mixed_float16" or str(tf.keras.mixed_precision.global_policy().name) == "mixed_float16"
            super().__init__(*args, dtype="float16" if mixed else dtype, **kwargs)

    tf.keras.layers.Dense = HalfDense
