"""Faults for ``data-pipeline-randomness``: shuffles that lose or repeat elements or ignore
their seed, and random ops in a map that give every element the same draw."""

from __future__ import annotations

import functools
import inspect

from . import fault
from .patch import replaces


def _bound(original, self, args, kwargs):
    """``Dataset.shuffle``'s arguments bound to its signature, defaults applied."""
    bound = inspect.signature(original).bind(self, *args, **kwargs)
    bound.apply_defaults()
    return bound


@replaces("data.Dataset.shuffle", name="shuffle-repeats-an-element")
def _shuffle_repeats_an_element(tf, original, self, *args, **kwargs):
    """tf.data.Dataset.shuffle emits one element twice per epoch: after draining the buffer it yields the first element
    of a fresh shuffle (an epoch of n has n + 1 elements)"""
    bound = _bound(original, self, args, kwargs)
    shuffled = original(*bound.args, **bound.kwargs)
    return shuffled.concatenate(shuffled.take(1))


@replaces("data.Dataset.shuffle", name="shuffle-ignores-seed")
def _shuffle_ignores_seed(tf, original, self, *args, **kwargs):
    """tf.data.Dataset.shuffle drops its seed= argument (only the global seed, if any, applies)"""
    bound = _bound(original, self, args, kwargs)
    bound.arguments["seed"] = None
    return original(*bound.args, **bound.kwargs)


@fault("map-random-fixed-seed")
def _map_random_fixed_seed(tf):
    """tf.random.uniform and tf.image.random_flip_left_right become stateless ops with a fixed seed: inside a
    Dataset.map every element (and every Session.run) gets the same draw"""
    uniform, flip = tf.random.uniform, tf.image.random_flip_left_right

    @functools.wraps(uniform)
    def fixed_uniform(shape, minval=0, maxval=None, dtype=tf.dtypes.float32, seed=None, name=None):
        return tf.random.stateless_uniform(shape, [seed or 0, 0], minval=minval, maxval=maxval, dtype=dtype, name=name)

    @functools.wraps(flip)
    def fixed_flip(image, seed=None):
        return tf.image.stateless_random_flip_left_right(image, [seed or 0, 0])

    tf.random.uniform = fixed_uniform
    tf.image.random_flip_left_right = fixed_flip
