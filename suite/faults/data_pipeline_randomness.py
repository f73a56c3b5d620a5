"""Faults for ``data-pipeline-randomness``: shuffles that lose or repeat elements or ignore
their seed, and random ops in a map that give every element the same draw."""

from __future__ import annotations

import functools
import inspect

from . import fault


def _rewrap_shuffle(tf, rewrite):
    """Replace ``tf.data.Dataset.shuffle`` by ``rewrite(original, self, arguments)``."""
    cls = tf.data.Dataset
    original = cls.shuffle
    sig = inspect.signature(original)

    @functools.wraps(original)
    def shuffle(self, *args, **kwargs):
        bound = sig.bind(self, *args, **kwargs)
        bound.apply_defaults()
        return rewrite(original, bound)

    cls.shuffle = shuffle


@fault(
    "shuffle-repeats-an-element",
    breaks=["data-pipeline-randomness"],
    description="tf.data.Dataset.shuffle emits one element twice per epoch: after draining the buffer "
    "it yields the first element of a fresh shuffle (an epoch of n has n + 1 elements)",
)
def _shuffle_repeats_an_element(tf):
    def rewrite(original, bound):
        shuffled = original(*bound.args, **bound.kwargs)
        return shuffled.concatenate(shuffled.take(1))

    _rewrap_shuffle(tf, rewrite)


@fault(
    "shuffle-ignores-seed",
    breaks=["data-pipeline-randomness"],
    description="tf.data.Dataset.shuffle drops its seed= argument (only the global seed, if any, applies)",
)
def _shuffle_ignores_seed(tf):
    def rewrite(original, bound):
        bound.arguments["seed"] = None
        return original(*bound.args, **bound.kwargs)

    _rewrap_shuffle(tf, rewrite)


@fault(
    "map-random-fixed-seed",
    breaks=["data-pipeline-randomness"],
    description="tf.random.uniform and tf.image.random_flip_left_right become stateless ops with a fixed "
    "seed: inside a Dataset.map every element (and every Session.run) gets the same draw",
)
def _map_random_fixed_seed(tf):
    uniform, flip = tf.random.uniform, tf.image.random_flip_left_right

    @functools.wraps(uniform)
    def fixed_uniform(shape, minval=0, maxval=None, dtype=tf.dtypes.float32, seed=None, name=None):
        return tf.random.stateless_uniform(shape, [seed or 0, 0], minval=minval, maxval=maxval, dtype=dtype, name=name)

    @functools.wraps(flip)
    def fixed_flip(image, seed=None):
        return tf.image.stateless_random_flip_left_right(image, [seed or 0, 0])

    tf.random.uniform = fixed_uniform
    tf.image.random_flip_left_right = fixed_flip
