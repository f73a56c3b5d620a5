"""Least-squares gradients: tf.linalg.lstsq against the pseudo-inverse, at full rank, rank n - 1 and near-singular.

``tf.linalg.lstsq(A, b)`` (``fast=True``, the default) solves the normal equations with a Cholesky
factorization of ``A^T A``; JAX's ``jnp.linalg.lstsq`` goes through an SVD, PyTorch's
``torch.linalg.lstsq`` with ``driver="gelsd"`` (an SVD) with a backward pass built on ``pinv``: its
default CPU driver, ``gelsy`` (a rank-revealing QR), decides the rank of an exactly rank-deficient
float32 matrix from MKL's rounding, which varies from call to call (measured: ``column-copy``'s
value exact in some of 25 calls, off by about 1 in others, one thread or two). One op-table entry,
``lstsq``: a tall A (4 x 3) and three right-hand sides b (4 x 3, an inconsistent system, so the
residual ``r = A x - b`` is not zero); its program returns the solution x (3 x 3) with the residuals
``sum(r * r, axis=-2)`` as a fourth row (PyTorch returns residuals without a gradient,
pytorch#147543, so every framework computes them from x). The float64 reference is the
pseudo-inverse closed form, ``x = pinv(A) b``. The matrix an example solves with is ``DESIGN + A``:
A is drawn within 0.25 of a fixed design whose singular values (6, 3.5, 1.5) are farther apart than
any draw can move them, so every drawn system has full rank (condition number at most 11) and the
generic properties (reverse mode against the reference, the oracles and float64 central differences,
forward mode, second order) compare every example; the derivative with respect to A is the
derivative with respect to the matrix. The special points give the whole matrix:

- ``column-copy``: the third column a copy of the first (rank 2);
- ``zero-column``: the third column zero (rank 2, an exactly zero singular value);
- ``near-singular`` (float32): the copy moved by 2^-12 (condition number 5.6e4, past the
  ``1 / sqrt(eps)`` the fast path is documented to need).

Where A has rank n - 1, x = pinv(A) b is the minimum-norm solution; its derivative along
rank-preserving directions is the pseudo-inverse's (Golub and Pereyra), which is what JAX and PyTorch
give at ``column-copy`` (measured: within 5e-7 in float32 and 1e-15 in float64). A kind (``finite``)
cannot tell a right gradient there from a wrong one, so both rank n - 1 points also observe
``grad-accuracy``: the gradient against that closed form (``_pinv_vjp``; PyTorch is ``exact`` at
both, JAX at ``column-copy``).

Declared surprises:

- At rank n - 1 TensorFlow's Cholesky of ``A^T A`` fails (Eigen's LLT, "Filling lower-triangular
  output with NaNs"): value and gradient are NaN in every mode, at a column copy and at a zero column
  (tensorflow#115505), through TF 2.21 and the nightlies before ``FALLBACK``.
- Near-singular in float32 the rounded Gramian is not positive definite: value and gradient NaN
  again, where JAX and PyTorch give finite answers.
- From tf-nightly ``FALLBACK`` (2.23.0.dev20260925, bisected; tensorflow#127566) a failed Cholesky
  falls back to the QR kernel, ``stop_gradient(MatrixSolveLs(fast=False))``: the value at rank
  n - 1 is the minimum-norm one in every mode but XLA, and each mode breaks the gradient its own
  way. Eager: finite and silently wrong, only the residuals' partial derivative
  (``grad-accuracy`` ``rel-err~1e+00``, the zero column's elements exactly 0). tf.function and v1
  graph: NaN still (the cond sends zeros into the failed branch it captured, and 0 times NaN is
  NaN), and forward mode raises "Gradient not defined for fast=False" at every input (it traces
  both branches). XLA: MatrixSolveLs has no XLA kernel, so lstsq no longer compiles at all, at any
  rank (reverse mode and second order raise
  InvalidArgumentError, forward mode the ValueError first).
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
from suite.behaviours import Floor, behaviour
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
    floor=Floor(
        "array",
        "Its only float comparisons are the op table's rows of lstsq and lstsq_exact (elementwise=False): every "
        "element of the solution x = pinv(A) b and of the residuals' row mixes every element of A and b, and so "
        "does each gradient entry; grad-accuracy at the rank n - 1 points is normwise against the pinv closed "
        "form (32 units of rounding of the gradient's largest element).",
    ),
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
    x = torch.linalg.lstsq(m, b, driver="gelsd").solution  # the SVD: gelsy (the default) decides rank from MKL rounding
    r = m @ x - b
    return torch.cat([x, (r * r).sum(dim=-2, keepdim=True)], dim=-2)


def _pinv_solution(a, b):
    """x = pinv(DESIGN + a) b with its residuals as a fourth row, float64."""
    m = DESIGN + np.asarray(a, np.float64)
    x = np.linalg.pinv(m) @ np.asarray(b, np.float64)
    r = m @ x - b
    return np.concatenate([x, np.sum(r * r, axis=-2, keepdims=True)], axis=-2)


def _pinv_vjp(a, b, w):
    """The float64 gradient of ``<w, _pinv_solution(a, b)>`` with respect to ``a``, from the
    pseudo-inverse's derivative (Golub and Pereyra): ``d(M+) = -M+ dM M+ + M+ M+^T dM^T (I - M M+)
    + (I - M+ M) dM^T M+^T M+``, one element of ``M`` at a time. At rank n - 1 this is what JAX and
    PyTorch give (differences cannot: the solution jumps in the directions that restore the rank)."""
    m = DESIGN + np.asarray(a, np.float64)
    b, w = np.asarray(b, np.float64), np.asarray(w, np.float64)
    pinv = np.linalg.pinv(m)
    x = pinv @ b
    r = m @ x - b
    left, right = np.eye(m.shape[0]) - m @ pinv, np.eye(m.shape[1]) - pinv @ m
    grad = np.zeros_like(m)
    for i, j in np.ndindex(*m.shape):
        dm = np.zeros_like(m)
        dm[i, j] = 1.0
        dpinv = -pinv @ dm @ pinv + pinv @ pinv.T @ dm.T @ left + right @ dm.T @ pinv.T @ pinv
        dx = dpinv @ b
        dr = dm @ x + m @ dx
        grad[i, j] = np.sum(w[:-1] * dx) + np.sum(w[-1] * 2.0 * np.sum(r * dr, axis=-2))
    return grad


#: the first tf-nightly with tensorflow#127566's fallback (bisected: 2.22.0.dev20260924, the nightly before,
#: answers as 2.21; https://github.com/tensorflow/tensorflow/compare/9edd58f895c...4470f2f1dd9)
FALLBACK = "2.23.0.dev20260925"
BEFORE, SINCE = f"<{FALLBACK}", f">={FALLBACK}"
TF_FALLBACK = "https://github.com/tensorflow/tensorflow/pull/127566"
RANK_DEFICIENT = ("column-copy", "zero-column")

TF_RANK_DEFICIENT = dict(
    framework="tensorflow",
    versions=BEFORE,
    link=TF_ISSUE,
    reason="fast=True solves the normal equations with a Cholesky factorization of A^T A, which does not exist "
    "at rank n - 1: Eigen's LLT fails and TensorFlow fills the factor with NaN, so value and gradient are NaN "
    "where the minimum-norm solution pinv(A) b is finite",
)
TF_STOPPED = dict(
    framework="tensorflow",
    mode="eager",
    versions=SINCE,
    link=TF_FALLBACK,
    reason="where the Cholesky fails, lstsq now returns stop_gradient(MatrixSolveLs(fast=False)): the value is the "
    "minimum-norm solution, but the solution's own dependence on A is cut, so the gradient is only the residuals' "
    "partial derivative through A: finite and silently wrong (the zero column's elements exactly 0)",
)
TF_CAPTURED_NAN = dict(
    framework="tensorflow",
    mode="function|graph",
    versions=SINCE,
    link=TF_FALLBACK,
    reason="traced, the fallback is cond_v2(failed, stop_gradient(MatrixSolveLs(fast=False)), composite): the "
    "value is the minimum-norm solution, but the cond's gradient sends zeros into the failed composite branch "
    "it captured, and 0 times its NaN Cholesky gradient is NaN",
)
TF_NO_XLA_KERNEL = dict(
    framework="tensorflow",
    mode="xla",
    versions=SINCE,
    link=TF_FALLBACK,
    reason="the fallback's MatrixSolveLs has no XLA kernel, and the cond holds it whatever the input: "
    "tf.linalg.lstsq no longer compiles under jit_compile=True, at any rank (InvalidArgumentError)",
)
TF_FORWARD_THROUGH_COND = dict(
    framework="tensorflow",
    mode="function|xla|graph",
    versions=SINCE,
    link=TF_FALLBACK,
    reason="forward mode traces both branches of the fallback's cond, and stop_gradient does not hide "
    "MatrixSolveLs(fast=False) from its JVP: ValueError('Gradient not defined for fast=False') at every input",
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
        point_vjp=_pinv_vjp,  # at rank n - 1 a finite gradient is not yet a right one
        domain={"float32": (-0.25, 0.25), "float64": (-0.25, 0.25)},
        pairs=((np.float32, (4, 3)), (np.float64, (4, 3))),
        elementwise=False,  # every element of x mixes every element of A and b: an array-level floor
        # grad-accuracy at the rank-deficient points, normwise: 32 units of rounding of the gradient's
        # largest element (measured 2026-11-29: JAX 3.4 eps in float32 and 6.5 in float64 at the column
        # copy, PyTorch's gelsd up to 9.7 and 10.8 at the zero column; 3-10x headroom)
        ulps={"float32": 32.0, "float64": 32.0},
        points=(
            _point("column-copy", COLUMN_COPY, "finite", value="exact", also=(("grad-accuracy", "exact"),)),
            _point("zero-column", ZERO_COLUMN, "finite", value="exact", also=(("grad-accuracy", "exact"),)),
            _point("near-singular", NEAR_SINGULAR, "finite", dtypes=("float32",)),
        ),
        declared=(
            *(
                expect(f"{what}[lstsq@{point}]", answer, **TF_RANK_DEFICIENT)
                for point in RANK_DEFICIENT
                for what, answer in (("grad", "nan"), ("value", "rel-err~inf"), ("grad-accuracy", "rel-err~inf"))
            ),
            expect(
                "grad[lstsq@near-singular]",
                "nan",
                framework="tensorflow",
                versions=BEFORE,
                link=TF_DOC,
                reason="the fast path is documented to be stable only for cond(A) < 1/sqrt(eps) (2.9e3 in float32); "
                "at 5.6e4 the rounded A^T A is not positive definite, the Cholesky fails and the gradient is NaN "
                "(JAX's SVD and PyTorch's gelsy give finite ones)",
            ),
            expect("grad[lstsq@zero-column]", "mixed:finite,zero", **TF_STOPPED),
            *(expect(f"grad-accuracy[lstsq@{point}]", "rel-err~1e+00", **TF_STOPPED) for point in RANK_DEFICIENT),
            *(
                expect(key, answer, **TF_CAPTURED_NAN)
                for point in RANK_DEFICIENT
                for key, answer in ((f"grad[lstsq@{point}]", "nan"), (f"grad-accuracy[lstsq@{point}]", "rel-err~inf"))
            ),
            expect("grad[lstsq@near-singular]", "nan", **TF_CAPTURED_NAN),
            *(
                expect(
                    f"{prop}[lstsq]",
                    raises("InvalidArgumentError", r"No registered 'MatrixSolveLs' OpKernel for XLA"),
                    **TF_NO_XLA_KERNEL,
                )
                for prop in ("reverse", "second")
            ),  # fmt: skip
            expect(
                "forward[lstsq]",
                raises("ValueError", r"Gradient not defined for fast=False"),
                **TF_FORWARD_THROUGH_COND,
            ),
            *(
                expect(
                    key,
                    answer,
                    framework="jax",
                    link=JAX_SVD_JVP,
                    reason="jnp.linalg.lstsq is differentiated through svd(full_matrices=False), whose JVP for a tall "
                    "matrix divides (I - U U^T) dA V by the singular values (_svd_jvp_rule): an exactly zero one "
                    "gives NaN, though the value masks it (PyTorch's pinv-based backward is finite)",
                )
                for key, answer in (
                    ("grad[lstsq@zero-column]", "nan"),
                    ("grad-accuracy[lstsq@zero-column]", "rel-err~inf"),
                )
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
