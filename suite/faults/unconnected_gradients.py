"""Faults for ``unconnected-gradients``: the policy lost, the default flipped, a None turned to zeros."""

from __future__ import annotations

from . import fault
from .patch import replaces


def _patch_policy(tf, choose):
    """Route GradientTape.gradient and tf.gradients through ``choose(policy) -> policy``."""
    NONE = tf.UnconnectedGradients.NONE
    tape_gradient = tf.GradientTape.gradient

    def gradient(self, target, sources, output_gradients=None, unconnected_gradients=NONE):
        return tape_gradient(
            self,
            target,
            sources,
            output_gradients=output_gradients,
            unconnected_gradients=choose(unconnected_gradients),
        )

    tf.GradientTape.gradient = gradient
    for ns in (tf, tf.compat.v1):
        original = ns.gradients

        def gradients(ys, xs, grad_ys=None, *args, unconnected_gradients=NONE, _original=original, **kwargs):
            return _original(ys, xs, grad_ys, *args, unconnected_gradients=choose(unconnected_gradients), **kwargs)

        ns.gradients = gradients


@fault("unconnected-zero-ignored")
def _zero_ignored(tf):
    """GradientTape.gradient and tf.gradients drop unconnected_gradients: ZERO gives None"""
    _patch_policy(tf, lambda policy: tf.UnconnectedGradients.NONE)


@fault("unconnected-none-gives-zeros")
def _none_gives_zeros(tf):
    """GradientTape.gradient and tf.gradients zero-fill unconnected sources by default (NONE behaves as ZERO): zeros
    where None is the contract"""
    _patch_policy(tf, lambda policy: tf.UnconnectedGradients.ZERO)


@replaces(
    "round", "math.round", name="round-gradient-zeros", breaks=["unconnected-gradients", "straight-through-estimator"]
)
def _round_gradient_zeros(tf, original, x, name=None):
    """tf.round gets a zeros gradient (as tf.sign has) instead of its registered None"""

    @tf.custom_gradient
    def _round(x):
        return original(x), lambda dy: tf.zeros_like(dy)

    return _round(x)
