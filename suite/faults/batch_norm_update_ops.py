"""Faults for ``batch-norm-update-ops``: moving statistics that stop moving, or move wrongly."""

from __future__ import annotations

import functools

from . import fault


def _with_momentum(tf, momentum_of):
    """Run Keras BatchNormalization.call with ``self.momentum`` replaced by ``momentum_of(m)``."""
    cls = tf.keras.layers.BatchNormalization
    original = cls.call

    @functools.wraps(original)
    def call(self, *args, **kwargs):
        kept = self.momentum
        self.momentum = momentum_of(kept)
        try:
            return original(self, *args, **kwargs)
        finally:
            self.momentum = kept

    cls.call = call


@fault("batchnorm-skips-moving-update")
def _batchnorm_skips_moving_update(tf):
    """Keras BatchNormalization(training=True) computes the update but keeps the old moving mean/variance (moving * 1 +
    batch * 0)"""
    _with_momentum(tf, lambda m: 1.0)


@fault("batchnorm-momentum-flipped")
def _batchnorm_momentum_flipped(tf):
    """Keras BatchNormalization uses PyTorch's momentum convention: moving = (1 - m) * moving + m * batch"""
    _with_momentum(tf, lambda m: 1.0 - m)
