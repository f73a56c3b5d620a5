"""Least-squares gradients: tf.linalg.lstsq against the pseudo-inverse, at full rank, rank n - 1 and near-singular.

``tf.linalg.lstsq(A, b)`` (``fast=True``, the default) solves the normal equations with a Cholesky
factorization of ``A^T A``; JAX's ``jnp.linalg.lstsq`` goes through an SVD, PyTorch's
``torch.linalg.lstsq`` through LAPACK's ``gelsy`` on the CPU (a rank-revealing QR) with a backward
pass built on ``pinv``. One op-table entry, ``lstsq``: a tall A (4 x 3) and three right-hand sides
b (4 x 3, an inconsistent system, so the residual ``r = A x - b`` is not zero); its program returns
the solution x (3 x 3) with the residuals ``sum(r * r, axis=-2)`` as a fourth row (PyTorch returns
residuals without a gradient, pytorch#147543, so every framework computes them from x). The float64
reference is the pseudo-inverse closed form, ``x = pinv(A) b``. The matrix an example solves with is
``DESIGN + A``: A is drawn within 0.25 of a fixed design whose singular values (6, 3.5, 1.5) are
farther apart than any draw can move them, so every drawn system has full rank (condition number at
most 11) and the generic properties (reverse mode against the reference, the oracles and float64
central differences, forward mode, second order) compare every example; the derivative with respect
to A is the derivative with respect to the matrix. The special points give the whole matrix:

- ``column-copy``: the third column a copy of the first (rank 2);
- ``zero-column``: the third column zero (rank 2, an exactly zero singular value);
- ``near-singular`` (float32): the copy moved by 2^-12 (condition number 5.6e4, past the
  ``1 / sqrt(eps)`` the fast path is documented to need).

Where A has rank n - 1, x = pinv(A) b is the minimum-norm solution; its derivative along
rank-preserving directions is the pseudo-inverse's (Golub and Pereyra), which is what JAX and PyTorch
give at ``column-copy`` (measured: within 5e-7 in float32 and 1e-15 in float64).

Declared surprises:

- At rank n - 1 TensorFlow's Cholesky of ``A^T A`` fails (Eigen's LLT, "Filling lower-triangular
  output with NaNs"): value and gradient are NaN in every mode, at a column copy and at a zero column
  (tensorflow#115505, open; PR 127566 would fall back to the QR kernel).
- Near-singular in float32 the rounded Gramian is not positive definite: value and gradient NaN
  again, where JAX and PyTorch give finite answers.
- JAX's gradient is NaN where the SVD returns an exactly zero singular value (``zero-column``): the
  SVD's JVP for a tall matrix divides by the singular values (``_svd_jvp_rule``).

- ``fast=False`` (a second entry, ``lstsq_exact``; the ``MatrixSolveLs`` kernel, a complete
  orthogonal decomposition) gives the minimum-norm value at rank n - 1, but its registered gradient
  raises ``ValueError("Gradient not defined for fast=False")`` in every mode and every order
  (``reverse[lstsq_exact]``, ``forward[...]``, ``second[...]``; under XLA the gradient's trace
  raises it before anything compiles). JAX and PyTorch have one solver each: their rows of that
  entry are declared absent (the ``lstsq`` entry checks them).
"""

import numpy as np

from suite import ops
from suite.behaviours import behaviour
from suite.expectations import expect, raises
from suite.ops import properties

TF_ISSUE = "https://github.com/tensorflow/tensorflow/issues/115505"
TF_DOC = "https://www.tensorflow.org/api_docs/python/tf/linalg/lstsq"
TF_GRAD_SOURCE = "https://github.com/tensorflow/tensorflow/blob/master/tensorflow/python/ops/linalg_grad.py"
JAX_SVD_JVP = "https://github.com/jax-ml/jax/blob/main/jax/_src/lax/linalg.py"
TORCH_ISSUE = "https://github.com/pytorch/pytorch/issues/27036"
TORCH_RESIDUALS = "https://github.com/pytorch/pytorch/issues/147543"

BEHAVIOUR = behaviour(
    "least-squares-gradients",
    sources=[],
    links=[TF_ISSUE, "https://github.com/tensorflow/tensorflow/pull/127566", TORCH_ISSUE, TORCH_RESIDUALS, TF_DOC],
)

#: The tall design every drawn A is added to: singular values 6, 3.5 and 1.5, gaps wider than twice
#: the largest ||A||_2 a draw within 0.25 reaches (0.87), so no draw comes near a rank change or a
#: repeated singular value (where an SVD-based gradient cancels)
DESIGN = np.array([[6.0, 0.0, 0.0], [0.0, 3.5, 0.0], [0.0, 0.0, 1.5], [0.0, 0.0, 0.0]])
#: b at the special points: not in the range of any of their matrices
RHS = ((1.0, -1.0, 2.0), (2.0, 0.5, -1.0), (-1.0, 1.0, 1.5), (0.5, 2.0, 1.0))
#: dyadic entries, so DESIGN + (M - DESIGN) is M exactly in float32
COLUMN_COPY = np.array([[-1.0, 1.5, -1.0], [-0.5, 0.5, -0.5], [-1.75, -2.0, -1.75], [1.0, 1.5, 1.0]])
ZERO_COLUMN = np.array([[1.0, 2.0, 0.0], [0.5, 1.0, 0.0], [2.0, -1.0, 0.0], [1.0, 0.5, 0.0]])
NEAR_SINGULAR = COLUMN_COPY + np.array([[0.0, 0.0, 2.0**-12], [0.0] * 3, [0.0] * 3, [0.0] * 3])


def _point(name, matrix, kind, **kw):
    """A special point at the whole matrix ``matrix`` (given as its offset from DESIGN) and RHS."""
    offset = tuple(map(tuple, matrix - DESIGN))
    return ops.Point(name, (offset, RHS), kind, **kw)


def _tensorflow(tf, a, b):
    m = tf.constant(DESIGN, a.dtype) + a
    x = tf.linalg.lstsq(m, b)
    r = tf.matmul(m, x) - b
    return tf.concat([x, tf.reduce_sum(r * r, axis=-2, keepdims=True)], axis=-2)


def _jax(jax, a, b):
    m = jax.numpy.asarray(DESIGN, a.dtype) + a
    x = jax.numpy.linalg.lstsq(m, b)[0]
    r = m @ x - b
    return jax.numpy.concatenate([x, jax.numpy.sum(r * r, axis=-2, keepdims=True)], axis=-2)


def _torch(torch, a, b):
    m = torch.as_tensor(DESIGN, dtype=a.dtype) + a
    x = torch.linalg.lstsq(m, b).solution  # driver gelsy on the CPU
    r = m @ x - b
    return torch.cat([x, (r * r).sum(dim=-2, keepdim=True)], dim=-2)


def _pinv_solution(a, b):
    """x = pinv(DESIGN + a) b with its residuals as a fourth row, float64."""
    m = DESIGN + np.asarray(a, np.float64)
    x = np.linalg.pinv(m) @ np.asarray(b, np.float64)
    r = m @ x - b
    return np.concatenate([x, np.sum(r * r, axis=-2, keepdims=True)], axis=-2)


TF_RANK_DEFICIENT = dict(
    framework="tensorflow",
    link=TF_ISSUE,
    reason="fast=True solves the normal equations with a Cholesky factorization of A^T A, which does not exist "
    "at rank n - 1: Eigen's LLT fails and TensorFlow fills the factor with NaN, so value and gradient are NaN "
    "where the minimum-norm solution pinv(A) b is finite (open; PR 127566 would fall back to the QR kernel)",
)

ops.register(
    ops.Op(
        "lstsq",
        behaviour="least-squares-gradients",
        arity=2,
        tensorflow=_tensorflow,
        jax=_jax,
        torch=_torch,
        reference=_pinv_solution,
        domain={"float32": (-0.25, 0.25), "float64": (-0.25, 0.25)},
        pairs=((np.float32, (4, 3)), (np.float64, (4, 3))),
        elementwise=False,  # every element of x mixes every element of A and b: an array-level floor
        points=(
            _point("column-copy", COLUMN_COPY, "finite", value="exact"),
            _point("zero-column", ZERO_COLUMN, "finite", value="exact"),
            _point("near-singular", NEAR_SINGULAR, "finite", dtypes=("float32",)),
        ),
        declared=(
            expect("grad[lstsq@column-copy]", "nan", **TF_RANK_DEFICIENT),
            expect("value[lstsq@column-copy]", "rel-err~inf", **TF_RANK_DEFICIENT),
            expect("grad[lstsq@zero-column]", "nan", **TF_RANK_DEFICIENT),
            expect("value[lstsq@zero-column]", "rel-err~inf", **TF_RANK_DEFICIENT),
            expect(
                "grad[lstsq@near-singular]",
                "nan",
                framework="tensorflow",
                link=TF_DOC,
                reason="the fast path is documented to be stable only for cond(A) < 1/sqrt(eps) (2.9e3 in float32); "
                "at 5.6e4 the rounded A^T A is not positive definite, the Cholesky fails and the gradient is NaN "
                "(JAX's SVD and PyTorch's gelsy give finite ones)",
            ),
            expect(
                "grad[lstsq@zero-column]",
                "nan",
                framework="jax",
                link=JAX_SVD_JVP,
                reason="jnp.linalg.lstsq is differentiated through svd(full_matrices=False), whose JVP for a tall "
                "matrix divides (I - U U^T) dA V by the singular values (_svd_jvp_rule): an exactly zero one "
                "gives NaN, though the value masks it (PyTorch's pinv-based backward is finite)",
            ),
        ),
    )
)


def _tensorflow_exact(tf, a, b):
    m = tf.constant(DESIGN, a.dtype) + a
    x = tf.linalg.lstsq(m, b, fast=False)
    r = tf.matmul(m, x) - b
    return tf.concat([x, tf.reduce_sum(r * r, axis=-2, keepdims=True)], axis=-2)


ONE_SOLVER = (
    "one solver, no fast/exact switch: its lstsq is the lstsq entry's, checked there",
    TF_DOC,
)
NO_GRADIENT = dict(
    framework="tensorflow",
    link=TF_GRAD_SOURCE,
    reason="fast=False solves by complete orthogonal decomposition (MatrixSolveLs with fast=False), and "
    "_MatrixSolveLsGrad raises ValueError('Gradient not defined for fast=False') for every mode of "
    "differentiation",
)

ops.register(
    ops.Op(
        "lstsq_exact",
        behaviour="least-squares-gradients",
        arity=2,
        tensorflow=_tensorflow_exact,
        jax=None,
        torch=None,
        absent={"jax": ONE_SOLVER, "torch": ONE_SOLVER},
        reference=_pinv_solution,
        domain={"float32": (-0.25, 0.25), "float64": (-0.25, 0.25)},
        pairs=((np.float32, (4, 3)), (np.float64, (4, 3))),
        elementwise=False,
        declared=tuple(
            expect(f"{prop}[lstsq_exact]", raises("ValueError", r"Gradient not defined for fast=False"), **NO_GRADIENT)
            for prop in ("reverse", "forward", "second")
        ),
    )
)

properties.bind(globals(), "least-squares-gradients")
