"""Faults for ``replica-gradients``: a MEAN all-reduce that sums, a loss average that ignores the global batch.

The case computes its distributed steps in peer processes; it passes the run's fault names to its
TensorFlow peers, which apply them right after importing TensorFlow, as this process does."""

from __future__ import annotations

from .patch import replaces


@replaces("distribute.ReplicaContext.all_reduce", name="all-reduce-mean-is-sum")
def _all_reduce_mean_is_sum(tf, original, self, reduce_op, value, options=None):
    """tf.distribute.ReplicaContext.all_reduce(MEAN, ...) sums over the replicas instead of averaging"""
    if tf.distribute.ReduceOp(reduce_op) == tf.distribute.ReduceOp.MEAN:
        reduce_op = tf.distribute.ReduceOp.SUM
    return original(self, reduce_op, value, options)


@replaces("nn.compute_average_loss", name="average-loss-per-replica")
def _average_loss_per_replica(tf, original, per_example_loss, sample_weight=None, global_batch_size=None):
    """tf.nn.compute_average_loss ignores global_batch_size and divides by the replica's own batch size"""
    local = tf.shape(per_example_loss)[0]
    return original(per_example_loss, sample_weight=sample_weight, global_batch_size=local)
