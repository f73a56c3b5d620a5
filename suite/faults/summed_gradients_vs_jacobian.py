"""Faults for summed-gradients-vs-jacobian: Jacobians that collapse to the summed gradient,
tf.gradients that returns one entry per target, a non-scalar target seeded with its mean, and a
batch_jacobian made of the full jacobian's diagonal blocks."""

from __future__ import annotations

from . import fault
from .patch import put, regrad, replaces


@fault("jacobian-summed-gradient")
def _jacobian_summed_gradient(tf):
    """GradientTape.jacobian and batch_jacobian return tape.gradient(target, sources), the column sum of the Jacobian,
    for both pfor and the while loop"""

    def summed(self, target, sources, unconnected_gradients=tf.UnconnectedGradients.NONE, *_, **__):
        """jacobian / batch_jacobian (parallel_iterations, experimental_use_pfor ignored)."""
        return self.gradient(target, sources, unconnected_gradients=unconnected_gradients)

    tf.GradientTape.jacobian = tf.GradientTape.batch_jacobian = summed


@replaces("gradients", "compat.v1.gradients", name="gradients-per-target")
def _gradients_per_target(tf, original, ys, xs, grad_ys=None, *args, **kwargs):
    """tf.gradients(ys, xs) with a list of targets returns len(ys) tensors, each sum over xs of dy/dx (what the seed's
    asker believed), instead of len(xs)"""
    if not isinstance(ys, (list, tuple)) or len(ys) < 2:
        return original(ys, xs, grad_ys, *args, **kwargs)
    cts = grad_ys if grad_ys is not None else [None] * len(ys)
    out = []
    for y, ct in zip(ys, cts):
        gs = [g for g in original(y, xs, None if ct is None else [ct], *args, **kwargs) if g is not None]
        out.append(tf.add_n(gs) if gs else None)
    return out


@fault("nonscalar-gradient-mean")
def _nonscalar_gradient_mean(tf):
    """GradientTape.gradient and tf.gradients seed a non-scalar target with ones / size (the gradient of its mean)
    instead of ones (its sum)"""

    def mean_seed(target):
        return tf.nest.map_structure(lambda t: tf.ones_like(t) / tf.cast(tf.size(t), t.dtype), target)

    tape_gradient = tf.GradientTape.gradient

    def gradient(self, target, sources, output_gradients=None, *args, **kwargs):
        if output_gradients is None:
            output_gradients = mean_seed(target)
        return tape_gradient(self, target, sources, output_gradients, *args, **kwargs)

    original = tf.gradients

    def gradients(ys, xs, grad_ys=None, *args, **kwargs):
        if grad_ys is None:
            grad_ys = mean_seed(ys)
        return original(ys, xs, grad_ys, *args, **kwargs)

    tf.GradientTape.gradient = gradient
    put(tf, ["gradients", "compat.v1.gradients"], gradients)


@regrad("MatMul", "BatchMatMulV2", name="matmul-float32-gradient-64-ulp-off")
def _matmul_gradient_64_ulp_off(tf, original, op, dy):
    """the float32 gradients of MatMul and BatchMatMulV2 are 64 units of rounding too large (times 1 + 2^-17): a
    kernel that lost six bits, outside the 32 units the float32 gradient tolerance allows (float64 untouched)"""
    grads = original(op, dy)
    if dy.dtype != tf.float32:
        return grads
    return [None if g is None else g * tf.constant(1 + 2.0**-17, tf.float32) for g in grads]


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
