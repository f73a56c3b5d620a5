"""Faults for tape-mechanics: a stop_recording that records, a tape that never releases, unwatched zeros."""

from __future__ import annotations

import contextlib

from .patch import replaces


@replaces("GradientTape.stop_recording", name="stop-recording-records")
def _stop_recording_records(tf, original, self):
    """tf.GradientTape.stop_recording() is a no-op context: the ops run inside it are recorded"""
    return contextlib.nullcontext()


@replaces("GradientTape.__init__", name="tape-always-persistent")
def _tape_always_persistent(tf, init, self, persistent=False, watch_accessed_variables=True):
    """tf.GradientTape ignores persistent=False: a second gradient() on a non-persistent tape succeeds"""
    init(self, persistent=True, watch_accessed_variables=watch_accessed_variables)


@replaces("GradientTape.gradient", name="unwatched-tensor-gets-gradient")
def _unwatched_gets_gradient(tf, gradient, self, target, sources, output_gradients=None, unconnected_gradients=None):
    """tf.GradientTape.gradient defaults to unconnected_gradients=ZERO: a tensor the tape never watched gets zeros
    instead of None"""
    return gradient(self, target, sources, output_gradients, unconnected_gradients=tf.UnconnectedGradients.ZERO)
