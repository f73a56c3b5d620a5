"""Faults for grad-ys-chaining: the cotangent that seeds reverse mode goes wrong."""

from __future__ import annotations

import functools

from . import fault


def _wrap_cotangent(owner, attr, rewrite, position):
    """Replace ``owner.attr`` (a gradient function) with one whose cotangent argument, the
    ``position``-th after ``(target, sources)``, is ``rewrite(target, cotangent)``."""
    original = getattr(owner, attr)

    name = "grad_ys" if attr == "gradients" else "output_gradients"

    @functools.wraps(original)
    def wrapped(*args, **kwargs):
        args = list(args)
        if name in kwargs:
            kwargs[name] = rewrite(args[position - 2], kwargs[name])
        else:
            args += [None] * max(0, position + 1 - len(args))
            args[position] = rewrite(args[position - 2], args[position])
        return original(*args, **kwargs)

    setattr(owner, attr, wrapped)


def _wrap_gradients(tf, rewrite):
    """tf.gradients and tf.compat.v1.gradients with grad_ys = ``rewrite(ys, grad_ys)``."""
    for owner in (tf, tf.compat.v1):
        _wrap_cotangent(owner, "gradients", rewrite, 2)


def _wrap_tape(tf, rewrite):
    """GradientTape.gradient with output_gradients = ``rewrite(target, output_gradients)``."""
    _wrap_cotangent(tf.GradientTape, "gradient", rewrite, 3)


@fault("grad-ys-ignored")
def _grad_ys_ignored(tf):
    """tf.gradients drops grad_ys and always seeds ones (the gradient of sum(ys))"""
    _wrap_gradients(tf, lambda ys, grad_ys: None)


@fault("output-gradients-ignored")
def _output_gradients_ignored(tf):
    """GradientTape.gradient drops output_gradients and always seeds ones"""
    _wrap_tape(tf, lambda target, output_gradients: None)


@fault("default-seed-mean")
def _default_seed_mean(tf):
    """with no grad_ys/output_gradients, tf.gradients and GradientTape seed 1/size(y) (the gradient of mean(y)) instead
    of ones (the gradient of sum(y))"""

    def mean_seed(ys, given):
        if given is not None:
            return given
        flat = tf.nest.flatten(ys)
        seeds = [tf.ones_like(y) / tf.cast(tf.size(y), y.dtype) for y in flat]
        return seeds if isinstance(ys, (list, tuple)) else seeds[0]

    _wrap_gradients(tf, mean_seed)
    _wrap_tape(tf, mean_seed)
