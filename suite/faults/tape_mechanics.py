"""Faults for tape-mechanics: a stop_recording that records, a tape that never releases, unwatched zeros,
a recompute_grad that recomputes nothing, a batch_jacobian made of the full jacobian's diagonal blocks."""

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


@fault(
    "recompute-grad-keeps-activations",
    breaks=["tape-mechanics"],
    description="tf.recompute_grad returns the function unchanged: the backward pass reuses the forward's "
    "activations (a stateful dropout's mask included) instead of recomputing them",
)
def _recompute_grad_keeps_activations(tf):
    tf.recompute_grad = lambda f: f


@fault(
    "batch-jacobian-diagonal-blocks",
    breaks=["tape-mechanics"],
    description="tf.GradientTape.batch_jacobian takes the diagonal blocks of the full jacobian instead of "
    "differentiating the batch-summed target (the two agree only where rows are independent)",
)
def _batch_jacobian_diagonal_blocks(tf):
    def batch_jacobian(self, target, source, unconnected_gradients=None, parallel_iterations=None,
                       experimental_use_pfor=True):  # fmt: skip
        full = self.jacobian(target, source, experimental_use_pfor=experimental_use_pfor)
        b = tf.shape(target)[0]
        flat = tf.reshape(full, [b, tf.reduce_prod(tf.shape(target)[1:]), b, tf.reduce_prod(tf.shape(source)[1:])])
        blocks = tf.transpose(tf.linalg.diag_part(tf.transpose(flat, [1, 3, 0, 2])), [2, 0, 1])
        return tf.reshape(blocks, tf.concat([tf.shape(target), tf.shape(source)[1:]], 0))

    tf.GradientTape.batch_jacobian = batch_jacobian
