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


@fault(
    "batchnorm-skips-moving-update",
    breaks=["batch-norm-update-ops"],
    description="Keras BatchNormalization(training=True) computes the update but keeps the old "
    "moving mean/variance (moving * 1 + batch * 0)",
)
def _batchnorm_skips_moving_update(tf):
    _with_momentum(tf, lambda m: 1.0)


@fault(
    "batchnorm-momentum-flipped",
    breaks=["batch-norm-update-ops"],
    description="Keras BatchNormalization uses PyTorch's momentum convention: moving = (1 - m) * moving + m * batch",
)
def _batchnorm_momentum_flipped(tf):
    _with_momentum(tf, lambda m: 1.0 - m)
