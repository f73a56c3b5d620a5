"""Faults for rng-under-tracing: a recompute_grad that recomputes nothing (so a stateful dropout keeps its
mask), and a global seed that is never set."""

from __future__ import annotations

from .patch import replaces


@replaces("recompute_grad", name="recompute-grad-keeps-activations")
def _recompute_grad_keeps_activations(tf, original, f):
    """tf.recompute_grad returns the function unchanged: the backward pass reuses the forward's activations (a stateful
    dropout's mask included) instead of recomputing them"""
    return f


@replaces("random.set_seed", name="global-seed-ignored")
def _global_seed_ignored(tf, original, seed):
    """tf.random.set_seed does nothing: a function traced again after setting the same seed, and an eager draw
    after resetting it, draw anew instead of reproducing the sequence"""
    return None
