"""Faults for ``adam-epsilon``: an Adam optimizer that uses a different epsilon than it was given."""

from __future__ import annotations

import functools
import inspect

from . import fault


def _replace_epsilon(cls, arg: str, value_of):
    """Wrap ``cls.__init__`` so that its ``arg`` (epsilon) becomes
    ``value_of(given, default, arguments)`` (``arguments``: every bound constructor argument)."""
    init = cls.__init__
    sig = inspect.signature(init)

    @functools.wraps(init)
    def __init__(self, *args, **kwargs):
        bound = sig.bind(self, *args, **kwargs)
        bound.apply_defaults()
        bound.arguments[arg] = value_of(bound.arguments[arg], sig.parameters[arg].default, bound.arguments)
        init(*bound.args, **bound.kwargs)

    cls.__init__ = __init__


@fault("v1-adam-epsilon-ignored")
def _v1_adam_epsilon_ignored(tf):
    """tf.compat.v1.train.AdamOptimizer drops its epsilon argument and uses the 1e-8 default (the seed's epsilon=0.1
    silently becomes 1e-8)"""
    _replace_epsilon(tf.compat.v1.train.AdamOptimizer, "epsilon", lambda given, default, arguments: default)


@fault("keras-adam-epsilon-default")
def _keras_adam_epsilon_default(tf):
    """tf.keras.optimizers.Adam ignores epsilon= and keeps its 1e-7 default"""
    _replace_epsilon(tf.keras.optimizers.Adam, "epsilon", lambda given, default, arguments: default)


@fault("keras-adam-epsilon-unhatted")
def _keras_adam_epsilon_unhatted(tf):
    """tf.keras.optimizers.Adam rescales epsilon by sqrt(1 - beta_2) in its constructor (a half-way 'fix' towards
    PyTorch's Algorithm-1 epsilon, exact at step 1 only)"""
    _replace_epsilon(
        tf.keras.optimizers.Adam,
        "epsilon",
        lambda given, default, arguments: given * (1 - arguments["beta_2"]) ** 0.5,
    )
