"""Faults for linalg-spectral-gradients: an eigh gradient that divides by a zero gap, an FFT gradient
that forgets the conjugate."""

from __future__ import annotations

from .patch import replaces


@replaces("linalg.eigh", name="eigh-degenerate-gradient-divides-by-zero")
def _eigh_divides_by_zero(tf, original, tensor, name=None):
    """tf.linalg.eigh's gradient forms 1/(l_j - l_i) with a plain division (no reciprocal_no_nan): inf/NaN at a repeated
    eigenvalue"""

    @tf.custom_gradient
    def inner(a):
        e, v = original(a)

        def grad(ge, gv):
            n = tf.shape(e)[-1]
            diff = e[..., None, :] - e[..., :, None]
            f = tf.where(tf.eye(n, dtype=tf.bool), tf.zeros_like(diff), 1.0 / diff)
            vt_gv = tf.linalg.matmul(v, gv, adjoint_a=True)
            inner_ = tf.linalg.diag(ge) + f * vt_gv
            g = tf.linalg.matmul(v, tf.linalg.matmul(inner_, v, adjoint_b=True))
            return (g + tf.linalg.matrix_transpose(g)) / 2

        return (e, v), grad

    return inner(tensor)


@replaces("signal.fft", name="fft-gradient-unconjugated")
def _fft_unconjugated(tf, original, input, name=None):  # noqa: A002  (TensorFlow's argument name)
    """tf.signal.fft's gradient applies fft to the cotangent instead of its adjoint (n * ifft)"""

    @tf.custom_gradient
    def inner(x):
        def grad(dy):
            return original(dy)

        return original(x), grad

    return inner(input)
