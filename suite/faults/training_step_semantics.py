"""Faults for ``training-step-semantics``: Keras layers that take the wrong training mode.

- ``batchnorm-ignores-training-true``: Keras ``BatchNormalization`` called with ``training=True``
  runs in inference mode (moving statistics, no update), as if the flag were lost on its way down.
- ``dropout-active-at-inference``: Keras ``Dropout`` drops in every call, ``training=False`` and
  the bare call included.
- ``frozen-batchnorm-trains``: a ``BatchNormalization(trainable=False)`` called with
  ``training=True`` runs in training mode again (batch statistics, moving statistics updated), the
  behaviour before keras PR 9965.

- ``saved-model-drops-custom-gradients``: ``tf.saved_model.save`` writes no custom gradients
  (``experimental_custom_gradients=False`` whatever the options say), the default before TF 2.6.

The layer patches wrap the class's ``call``, so they hold in eager, ``tf.function`` and XLA alike; the
save patch reaches the saving peer process, which applies the run's faults after importing TensorFlow.
"""

from __future__ import annotations

import functools

from . import fault
from .patch import replaces


def _training(args, kwargs):
    return kwargs.get("training", args[0] if args else None)


def _wrap_call(cls, wrong):
    """Replace ``cls.call`` with ``wrong(original, self, inputs, *args, **kwargs)``; the wrapper keeps
    the original's signature, which Keras reads (whether call takes ``training``)."""
    original = cls.call

    @functools.wraps(original)
    def call(self, inputs, *args, **kwargs):
        return wrong(original, self, inputs, *args, **kwargs)

    cls.call = call


def _set_training(cls, choose):
    """Wrap ``cls.call`` so that the layer runs with ``training=choose(training)`` (the value it was
    given: True, False or None), however the caller passed it."""

    def call(original, self, inputs, *args, **kwargs):
        value = choose(_training(args, kwargs))
        if args:
            args = (value, *args[1:])
        else:
            kwargs = {**kwargs, "training": value}
        return original(self, inputs, *args, **kwargs)

    _wrap_call(cls, call)


@fault("batchnorm-ignores-training-true")
def _batchnorm_ignores_training_true(tf):
    """Keras BatchNormalization called with training=True normalises by the moving statistics and leaves them (inference
    mode)"""
    _set_training(tf.keras.layers.BatchNormalization, lambda training: False if training is True else training)


@fault("dropout-active-at-inference")
def _dropout_active_at_inference(tf):
    """Keras Dropout drops in every call: training=False and a call without training= too"""
    _set_training(tf.keras.layers.Dropout, lambda training: True)


@fault("frozen-batchnorm-trains")
def _frozen_batchnorm_trains(tf):
    """a BatchNormalization(trainable=False) called with training=True uses the batch statistics and updates its moving
    statistics (Keras before PR 9965)"""

    def call(original, self, inputs, *args, **kwargs):
        if self.trainable or _training(args, kwargs) is not True:
            return original(self, inputs, *args, **kwargs)
        self.trainable = True  # for this call only: the layer trains as an unfrozen one
        try:
            return original(self, inputs, *args, **kwargs)
        finally:
            self.trainable = False

    _wrap_call(tf.keras.layers.BatchNormalization, call)


@replaces("saved_model.save", name="saved-model-drops-custom-gradients")
def _saved_model_drops_custom_gradients(tf, original, obj, export_dir, signatures=None, options=None):
    """tf.saved_model.save writes no custom gradients: a restored tf.custom_gradient has none"""
    options = options or tf.saved_model.SaveOptions()
    options.experimental_custom_gradients = False
    return original(obj, export_dir, signatures=signatures, options=options)
