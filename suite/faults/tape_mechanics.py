"""Faults for tape-mechanics: a stop_recording that records, a tape that never releases, unwatched zeros,
a recompute_grad that recomputes nothing, a batch_jacobian made of the full jacobian's diagonal blocks."""

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


@replaces("recompute_grad", name="recompute-grad-keeps-activations")
def _recompute_grad_keeps_activations(tf, original, f):
    """tf.recompute_grad returns the function unchanged: the backward pass reuses the forward's activations (a stateful
    dropout's mask included) instead of recomputing them"""
    return f


@replaces("GradientTape.batch_jacobian", name="batch-jacobian-diagonal-blocks")
def _batch_jacobian_diagonal_blocks(tf, original, self, target, source, unconnected_gradients=None,
                                    parallel_iterations=None, experimental_use_pfor=True):  # fmt: skip
    """tf.GradientTape.batch_jacobian takes the diagonal blocks of the full jacobian instead of differentiating the
    batch-summed target (the two agree only where rows are independent)"""
    full = self.jacobian(target, source, experimental_use_pfor=experimental_use_pfor)
    b = tf.shape(target)[0]
    flat = tf.reshape(full, [b, tf.reduce_prod(tf.shape(target)[1:]), b, tf.reduce_prod(tf.shape(source)[1:])])
    blocks = tf.transpose(tf.linalg.diag_part(tf.transpose(flat, [1, 3, 0, 2])), [2, 0, 1])
    return tf.reshape(blocks, tf.concat([tf.shape(target), tf.shape(source)[1:]], 0))
