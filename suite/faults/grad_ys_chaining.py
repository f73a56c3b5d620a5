"""Faults for grad-ys-chaining: the cotangent that seeds reverse mode goes wrong."""

from __future__ import annotations

import functools

from . import fault


def _wrap_gradients(tf, rewrite):
    """Replace tf.gradients and tf.compat.v1.gradients with versions whose grad_ys is
    ``rewrite(ys, grad_ys)`` (both accept grad_ys as the third positional argument)."""
    for owner in (tf, tf.compat.v1):
        original = owner.gradients

        @functools.wraps(original)
        def gradients(ys, xs, grad_ys=None, *args, _original=original, **kwargs):
            return _original(ys, xs, rewrite(ys, grad_ys), *args, **kwargs)

        owner.gradients = gradients


def _wrap_tape(tf, rewrite):
    """Replace GradientTape.gradient with a version whose output_gradients is
    ``rewrite(target, output_gradients)``."""
    original = tf.GradientTape.gradient

    @functools.wraps(original)
    def gradient(self, target, sources, output_gradients=None, *args, **kwargs):
        return original(self, target, sources, rewrite(target, output_gradients), *args, **kwargs)

    tf.GradientTape.gradient = gradient


@fault(
    "grad-ys-ignored",
    breaks=["grad-ys-chaining"],
    description="tf.gradients drops grad_ys and always seeds ones (the gradient of sum(ys))",
)
def _grad_ys_ignored(tf):
    _wrap_gradients(tf, lambda ys, grad_ys: None)


@fault(
    "output-gradients-ignored",
    breaks=["grad-ys-chaining"],
    description="GradientTape.gradient drops output_gradients and always seeds ones",
)
def _output_gradients_ignored(tf):
    _wrap_tape(tf, lambda target, output_gradients: None)


@fault(
    "default-seed-mean",
    breaks=["grad-ys-chaining"],
    description="with no grad_ys/output_gradients, tf.gradients and GradientTape seed 1/size(y) "
    "(the gradient of mean(y)) instead of ones (the gradient of sum(y))",
)
def _default_seed_mean(tf):
    def mean_seed(ys, given):
        if given is not None:
            return given
        flat = tf.nest.flatten(ys)
        seeds = [tf.ones_like(y) / tf.cast(tf.size(y), y.dtype) for y in flat]
        return seeds if isinstance(ys, (list, tuple)) else seeds[0]

    _wrap_gradients(tf, mean_seed)
    _wrap_tape(tf, mean_seed)
