"""Faults for tape-mechanics: a stop_recording that records, a tape that never releases, unwatched zeros."""

from __future__ import annotations

import contextlib

from . import fault


@fault(
    "stop-recording-records",
    breaks=["tape-mechanics"],
    description="tf.GradientTape.stop_recording() is a no-op context: the ops run inside it are recorded",
)
def _stop_recording_records(tf):
    tf.GradientTape.stop_recording = lambda self: contextlib.nullcontext()


@fault(
    "tape-always-persistent",
    breaks=["tape-mechanics"],
    description="tf.GradientTape ignores persistent=False: a second gradient() on a non-persistent tape succeeds",
)
def _tape_always_persistent(tf):
    init = tf.GradientTape.__init__

    def persistent_init(self, persistent=False, watch_accessed_variables=True):
        init(self, persistent=True, watch_accessed_variables=watch_accessed_variables)

    tf.GradientTape.__init__ = persistent_init


@fault(
    "unwatched-tensor-gets-gradient",
    breaks=["tape-mechanics"],
    description="tf.GradientTape.gradient defaults to unconnected_gradients=ZERO: a tensor the tape never watched "
    "gets zeros instead of None",
)
def _unwatched_gets_gradient(tf):
    gradient = tf.GradientTape.gradient

    def zero_gradient(self, target, sources, output_gradients=None, unconnected_gradients=None):
        return gradient(self, target, sources, output_gradients, unconnected_gradients=tf.UnconnectedGradients.ZERO)

    tf.GradientTape.gradient = zero_gradient
