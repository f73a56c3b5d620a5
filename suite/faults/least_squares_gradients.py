"""Faults for least-squares-gradients: a least-squares gradient that forgets the residual.

- ``lstsq-gradient-drops-residual-term``: ``tf.linalg.lstsq`` (``fast=True``) gets a hand-written
  gradient from the normal equations, ``z = (A^T A + l I)^-1 g``, ``dA = (b - A x) z^T - A z x^T``,
  ``db = A z``, without the first term of ``dA``: right for a consistent system (``A x = b``,
  square or a b in the range of A) and wrong wherever the residual is not zero, as for a tall A and
  a b outside its range (every example of the behaviour's entry). Patching the Python function
  holds in eager, tf.function, XLA and v1 graph mode alike.
"""

from __future__ import annotations

from .patch import replaces


@replaces(
    "linalg.lstsq", "compat.v1.linalg.lstsq", "compat.v1.matrix_solve_ls", name="lstsq-gradient-drops-residual-term"
)
def _lstsq_drops_residual_term(tf, original, matrix, rhs, l2_regularizer=0.0, fast=True, name=None):
    """the gradient of tf.linalg.lstsq (fast=True) with respect to the matrix loses its residual term (b - A x) z^T:
    right only for a consistent system"""
    if not fast:
        return original(matrix, rhs, l2_regularizer, fast=fast, name=name)

    @tf.custom_gradient
    def inner(a, b):
        x = original(a, b, l2_regularizer, fast=True, name=name)

        def grad(g):
            gram = tf.linalg.matmul(a, a, adjoint_a=True)
            n = tf.shape(gram)[-1]
            gram += tf.cast(l2_regularizer, a.dtype) * tf.eye(n, dtype=a.dtype)
            z = tf.linalg.cholesky_solve(tf.linalg.cholesky(gram), g)
            # the right gradient adds (b - A x) z^T here
            da = -tf.linalg.matmul(a, tf.linalg.matmul(z, x, adjoint_b=True))
            return da, tf.linalg.matmul(a, z)

        return x, grad

    return inner(tf.convert_to_tensor(matrix), tf.convert_to_tensor(rhs))
