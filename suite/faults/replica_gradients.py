"""Faults for ``replica-gradients``: a MEAN all-reduce that sums, a loss average that ignores the global batch.

The case computes its distributed steps in peer processes; it passes the run's fault names to its
TensorFlow peers, which apply them right after importing TensorFlow, as this process does."""

from __future__ import annotations

import functools

from . import fault


@fault(
    "all-reduce-mean-is-sum",
    breaks=["replica-gradients"],
    description="tf.distribute.ReplicaContext.all_reduce(MEAN, ...) sums over the replicas instead of averaging",
)
def _all_reduce_mean_is_sum(tf):
    cls = tf.distribute.ReplicaContext
    original = cls.all_reduce

    @functools.wraps(original)
    def all_reduce(self, reduce_op, value, options=None):
        if tf.distribute.ReduceOp(reduce_op) == tf.distribute.ReduceOp.MEAN:
            reduce_op = tf.distribute.ReduceOp.SUM
        return original(self, reduce_op, value, options)

    cls.all_reduce = all_reduce


@fault(
    "average-loss-per-replica",
    breaks=["replica-gradients"],
    description="tf.nn.compute_average_loss ignores global_batch_size and divides by the replica's own batch size",
)
def _average_loss_per_replica(tf):
    original = tf.nn.compute_average_loss

    @functools.wraps(original)
    def compute_average_loss(per_example_loss, sample_weight=None, global_batch_size=None):
        local = tf.shape(per_example_loss)[0]
        return original(per_example_loss, sample_weight=sample_weight, global_batch_size=local)

    tf.nn.compute_average_loss = compute_average_loss
