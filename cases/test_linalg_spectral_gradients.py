"""Linalg and spectral gradients: eigh/svd at a repeated eigenvalue, det/slogdet at a singular matrix, FFTs.

Four places where a linear-algebra gradient is held to float64 closed forms, the oracles and float64
central differences, per framework and mode:

- **eigh at a repeated eigenvalue.** ``A = sym(Q diag(l) Q^T)`` with Q a random orthogonal matrix and
  two eigenvalues equal. A gauge-invariant loss (``sum(w * l)`` with w equal on the repeated pair,
  and ``trace(V diag(l^2) V^T)`` through the eigenvectors) is differentiable there: its gradient is
  ``sym(V diag(w) V^T)`` (``sym(2 A)``) and must match the closed form, the oracles and differences.
  Every program symmetrizes its input (``(X + X^T) / 2``) so the frameworks' conventions for the
  gradient's triangle (TensorFlow returns a lower-triangular one) do not enter.
- **A loss on the eigenvectors (or singular vectors) at an exactly repeated value**
  (``A = P diag(l) P^T`` with P a signed permutation, so every solver sees two bitwise-equal values):
  the derivative does not exist; per framework the gradient's kind, ``nan``, ``inf`` or ``finite``.
- **svd at a repeated singular value.** The nuclear norm ``sum(s)`` is differentiable while the
  singular values are positive: ``d/dA = U V^T``.
- **det/slogdet at a singular matrix** (small integers, the last row a copy of the first: every LU
  sees an exact zero pivot): det's value is 0 and its gradient the transposed adjugate (the
  cofactor matrix, finite); slogdet is ``(0, -inf)`` and has no gradient.
- **fft/ifft/rfft/irfft.** ``sum(w * |F(x)|^2)`` for fft and ifft of a real x; rfft's real and imaginary
  parts with ``fft_length`` shorter than, equal to or longer than the input (crop or zero-pad);
  irfft of a half spectrum given as real and imaginary parts, with ``fft_length`` n; the 2-D and 3-D
  transforms (fft2d/ifft2d/fft3d/ifft3d, rfft2d/rfft3d). Closed forms come from NumPy's FFT applied to
  basis vectors (each transform is linear).
- **qr** of a full-rank tall, wide or square matrix, reduced or complete: the loss reads the first
  min(m, n) columns of Q and rows of R with the sign gauge fixed (``D = sign(diag R)``), which are
  determined, so it is differentiable; per framework whether the gradient runs, and where it does,
  the oracles and central differences of NumPy's QR.
- **cholesky** at an exactly singular PSD matrix (a zero row and column: an exact zero pivot) and near
  one (``B B^T + eps I``, B of rank n - 1): the value's and gradient's kind at the singular matrix; near
  it, a large gradient held to ``sym(L^-T Phi(L^T c) L^-1)`` and the oracles.
- **solve/inv** at an exactly singular matrix (a zero row) and near one (smallest singular value
  1e-3 or 1e-5): the error or ``unchecked`` (the call returns; what it returns is noted); near it, the
  closed forms ``-A^-T c X^T`` and ``-A^-T c A^-T`` and the oracles.

Declared surprises:

- At an exactly repeated eigenvalue (singular value) TensorFlow's eigenvector gradient is finite: its
  ``_SelfAdjointEigV2Grad``/``_SvdGrad`` use ``reciprocal_no_nan`` for ``1 / (l_j - l_i)``, which is 0
  there; JAX and PyTorch divide by zero and return NaN.
- TensorFlow's det and slogdet gradients call ``matrix_inverse``: at a singular matrix they raise
  InvalidArgumentError ("Input is not invertible") instead of giving the adjugate; XLA has no kernel
  for MatrixDeterminant/LogMatrixDeterminant (the forward pass does not compile).
- PyTorch's det of the singular draw is sometimes a rounding residue (~1e-15, not 0): its slogdet is then
  finite (about -35) and its slogdet gradient huge (key ``slogdet-grad[residue]``); at an exact 0 its
  slogdet gradient is NaN, as JAX's. Its det gradient is the adjugate at a residue (det * inv(A)^T
  cancels) but all zeros at an exact 0 (key ``det-grad``; measured on 222 of 222 random draws).
- rfft's gradient with an fft_length shorter than the input fails in TensorFlow (InvalidArgumentError
  eagerly and in a graph, ValueError while tracing); longer (zero-padding) works.
- TensorFlow's svd gradient with compute_uv=True raises NotImplementedError where the inner dimensions
  are unknown (a relaxed trace, a v1 graph): noted, not checked.
- Under XLA, TensorFlow's float64 eigh and svd (XLA's Jacobi iterations) miss float64's floor (measured
  1.7e-9 at scale 1): those rows are held at float32's precision, against closed forms and oracles
  only (no differences).
- Before TensorFlow 2.16 (IFFT) and 2.17 (RFFT, IRFFT), XLA_CPU_JIT has no float64/complex128 kernel for
  these transforms: ``jit_compile=True`` refuses the forward or the gradient (measured per release).
- JAX 0.4.30's svd JVP refuses ``full_matrices=True`` (jnp.linalg.svd's default) even for a square
  matrix, where full and reduced agree (measured; differentiable in 0.10).
- A complete QR of a tall matrix: TensorFlow (NotImplementedError) and PyTorch (RuntimeError, documented)
  refuse its gradient; JAX gives it, and it matches the differences.
- TensorFlow's QR gradient needs static shapes: its rows trace one function (one graph) per shape.
- cholesky at a singular matrix: TensorFlow and JAX return NaN, PyTorch raises; solve/inv: TensorFlow
  raises (not under XLA), PyTorch raises, JAX and XLA return unchecked values.
- TensorFlow registers no gradient for RFFT3D (nor IRFFT3D): the lookup fails.

Sources: https://github.com/tensorflow/tensorflow/issues/24930, https://github.com/jax-ml/jax/issues/2311,
https://github.com/pytorch/pytorch/issues/76531, https://github.com/tensorflow/tensorflow/issues/60163,
https://github.com/pytorch/pytorch/issues/109448
"""

import dataclasses
import re

import numpy as np
from hypothesis import example, given, strategies as st

from suite import compare as cmp, finite_diff
from suite.behaviours import Floor, behaviour
from suite.expectations import expect, expectations, raises
from suite.program import Program

TF_EIGH = "https://github.com/tensorflow/tensorflow/issues/24930"
JAX_EIGH = "https://github.com/jax-ml/jax/issues/2311"
TORCH_EIGH = "https://github.com/pytorch/pytorch/issues/76531"
TF_FFT = "https://github.com/tensorflow/tensorflow/issues/60163"
TORCH_FFT = "https://github.com/pytorch/pytorch/issues/109448"
TORCH_DET = "https://github.com/pytorch/pytorch/issues/104675"
XLA_EIGH = "https://github.com/pytorch/xla/pull/7674"
XLA_EIGH_TF = "https://github.com/tensorflow/tensorflow/issues/117807"
TF_DET_SINGULAR = "https://github.com/tensorflow/tensorflow/issues/119477"
#: where the det/slogdet gradient at a singular matrix stopped raising (``autodiff-semantics bisect``: the
#: compare range between 2.22.0.dev20260720 and the first nightly with the adjugate)
TF_DET_GRAD_CHANGE = "https://github.com/tensorflow/tensorflow/compare/4f1b7de8a37...89b7abdba72"
DET_GRAD_FROM = "2.22.0.dev20260722"
TF_XLA_DET_ISSUE = "https://github.com/tensorflow/tensorflow/issues/125536"
XLA_DET_FROM = "2.22.0.dev20260830"  # after 2.22.0.dev20260823
TF_XLA_DET_PR = "https://github.com/tensorflow/tensorflow/pull/126101"
JAX_SVD_FULL = "https://github.com/jax-ml/jax/issues/17518"
TF_XLA_FFT = "https://github.com/tensorflow/tensorflow/blob/master/tensorflow/compiler/tf2xla/kernels/fft_ops.cc"
TF_FFT_GRADS = "https://github.com/tensorflow/tensorflow/blob/master/tensorflow/python/ops/signal/fft_ops.py"
TF_QR_GRAD = "https://github.com/tensorflow/tensorflow/blob/master/tensorflow/python/ops/linalg_grad.py"
TORCH_QR = "https://docs.pytorch.org/docs/stable/generated/torch.linalg.qr.html"
TORCH_CHOLESKY = "https://docs.pytorch.org/docs/stable/generated/torch.linalg.cholesky.html"
TORCH_SOLVE = "https://docs.pytorch.org/docs/stable/generated/torch.linalg.solve.html"
TF_INV = "https://www.tensorflow.org/api_docs/python/tf/linalg/inv"
JAX_LINALG = "https://github.com/jax-ml/jax/blob/main/jax/_src/lax/linalg.py"

BEHAVIOUR = behaviour(
    "linalg-spectral-gradients",
    sources=[],
    links=[
        TF_EIGH,
        JAX_EIGH,
        TORCH_EIGH,
        TF_FFT,
        TORCH_FFT,
        TF_DET_SINGULAR,
        TORCH_DET,
        XLA_EIGH_TF,
        XLA_EIGH,
        JAX_SVD_FULL,
        TF_XLA_FFT,
        TF_FFT_GRADS,
        TF_QR_GRAD,
        TORCH_QR,
        TORCH_CHOLESKY,
        TORCH_SOLVE,
        TF_INV,
        JAX_LINALG,
    ],
    floor=Floor(
        "array",
        "Every compared result mixes elements: sums of eigenvalues or singular values, losses through QR, "
        "Cholesky, solve and inv factors, FFT outputs (each a sum over the whole input) and their gradients "
        "(matrix products such as V diag(w) V^T, U V^T, -A^-T c A^-T and transposed transforms), so each "
        "element's rounding is at the magnitude of the array (scale='inputs' where weights cancel to an exact 0).",
    ),
)

DET_OPS = ("det", "slogdet")
#: the n-D transforms over the last n axes: JAX's and PyTorch's name, and n
_ND = {"fft2d": ("fft2", 2), "ifft2d": ("ifft2", 2), "fft3d": ("fftn", 3), "ifft3d": ("ifftn", 3)}
TF_NOT_XLA = "eager|function|graph"
#: Decompositions' gradients (eigh, svd, qr, cholesky; the LU of solve/inv) lose a few digits to the
#: decomposition (1e-12 is a product's tolerance): their error is a few eps times the spread of the
#: eigenvalues (singular values, pivots) over the nearest gap, up to the condition number, 1e5 for the
#: near-singular solve/inv draws (measured 3.9e-11 there). The FFTs are plain sums: cmp.GRAD
SPECTRAL = cmp.tolerance(float64=1e-9)
#: Under XLA, TensorFlow's float64 eigh and svd are XLA's own iterative (Jacobi) decompositions,
#: not LAPACK's: measured errors up to 7e-15 on a zero eigenvalue and 1.7e-9 on a singular-vector
#: product at scale 1, above float64's floor; those rows are held at float32's precision instead
#: (and get no central differences). XLA's eigh is known to be less accurate than LAPACK's (XLA_EIGH,
#: XLA_EIGH_TF).
XLA_PRECISION = np.float32

EXPECT = expectations(
    {
        # the derivative does not exist: a NaN says so
        "eigh-vector-grad": "nan",
        "svd-vector-grad": "nan",
        "eigh-trace-grad": "closed-form",
        "det-value": "zero",
        # d det / dA is the cofactor matrix (the transposed adjugate), defined at a singular matrix too
        "det-grad": "adjugate",
        "det-grad[residue]": "adjugate",
        "slogdet-value": "singular",
        # no derivative (|d log|det| / dA| grows without bound): a NaN says so
        "slogdet-grad": "nan",
        # where the LU leaves a rounding residue instead of an exact zero pivot: inv(A)^T is huge
        "slogdet-grad[residue]": "huge",
        **{f"rfft-grad[{how}]": "ok" for how in ("crop", "exact", "pad")},
        **{f"power-spectrum-grad[{op}]": "ok" for op in ("fft", "ifft")},
        "irfft-grad": "ok",
        **{f"power-spectrum-grad[{op}]": "ok" for op in _ND},
        **{f"{op}-grad": "ok" for op in ("rfft2d", "rfft3d")},
        # the first min(m, n) columns of Q and rows of R are determined at full rank: differentiable
        **{
            f"qr-grad[{shape},{mode}]": "ok" for shape in ("tall", "wide", "square") for mode in ("reduced", "complete")
        },
        # no factor: a NaN says so
        **{f"cholesky-{what}[singular]": "nan" for what in ("value", "grad")},
        # no inverse: the solver returns unchecked (what it returns, NaN, inf or a rounding residue's huge
        # finite values, depends on the pivots; it is noted)
        **{f"{op}-{what}[singular]": "unchecked" for op in ("solve", "inv") for what in ("value", "grad")},
    },
    *[
        expect(
            "qr-grad[tall,complete]",
            raises(err, msg),
            framework=fw,
            link=link,
            reason="the first n columns of a tall matrix's complete Q are determined (the rest span the complement "
            f"and the loss does not read them), but {who} refuses to differentiate a complete QR of a tall matrix; "
            "JAX differentiates it (its gradient matches the differences)",
        )
        for fw, err, msg, link, who in (
            (
                "tensorflow",
                "NotImplementedError",
                r"QrGrad not implemented when nrows > ncols and full_matrices",
                TF_QR_GRAD,
                "TensorFlow's QrGrad",
            ),
            (
                "torch",
                "RuntimeError",
                r"not differentiable when mode='complete' and nrows > ncols",
                TORCH_QR,
                "PyTorch (documented: differentiable for m <= n)",
            ),
        )  # fmt: skip
    ],
    *[
        expect(
            key,
            raises("NotImplementedError", r"Unimplemented case of QR decomposition derivative"),
            framework="jax",
            versions="<=0.4.30",
            link=JAX_LINALG,
            reason="JAX 0.4.30's QR JVP handled tall reduced and square factors only (m >= n, and complete only "
            "where m == n; measured); 0.10 differentiates wide matrices and a tall complete QR",
        )
        for key in ("qr-grad[tall,complete]", "qr-grad[wide,reduced]", "qr-grad[wide,complete]")
    ],
    *[
        expect(
            f"cholesky-{what}[singular]",
            raises("_LinAlgError", r"not positive-definite"),
            framework="torch",
            link=TORCH_CHOLESKY,
            reason="torch.linalg.cholesky checks the factorisation and raises where the matrix is not positive "
            "definite (torch.linalg.cholesky_ex returns the info instead); TensorFlow and JAX return NaN",
        )
        for what in ("value", "grad")
    ],
    *[
        expect(
            f"{op}-{what}[singular]",
            raises(err, msg),
            framework=fw,
            mode=mode,
            link=link,
            reason=reason,
        )
        for op in ("solve", "inv")
        for what in ("value", "grad")
        for fw, mode, err, msg, link, reason in (
            (
                "tensorflow",
                TF_NOT_XLA,
                "InvalidArgumentError",
                r"(Input|Input matrix) is not invertible",
                TF_INV,
                "TensorFlow's MatrixSolve/MatrixInverse kernels check the LU's pivots and raise (its docs allow "
                "either a raise or a garbage result); under XLA the solver returns unchecked, as JAX's",
            ),
            (
                "torch",
                None,
                "_LinAlgError",
                r"singular",
                TORCH_SOLVE,
                "torch.linalg.solve and inv check the LU's pivots and raise on an exactly singular matrix",
            ),
        )  # fmt: skip
    ],
    *[
        expect(
            "rfft3d-grad",
            raises(err, r"(no entry for: RFFT3D|No gradient defined for operation.*RFFT3D)"),
            framework="tensorflow",
            mode=mode,
            link=TF_FFT_GRADS,
            reason="TensorFlow registers gradients for RFFT, IRFFT, RFFT2D and IRFFT2D but none for RFFT3D "
            "(nor IRFFT3D): the gradient lookup fails (while tracing, wrapped in a StagingError); JAX and "
            "PyTorch differentiate rfftn over three axes",
        )
        for mode, err in (("eager|graph", "LookupError"), ("function|xla", "StagingError"))
    ],
    expect(
        "svd-vector-grad",
        raises("NotImplementedError", r"Singular value decomposition JVP not implemented for full matrices"),
        framework="jax",
        versions="<=0.4.30",
        link=JAX_SVD_FULL,
        reason="jnp.linalg.svd defaults to full_matrices=True, and JAX's svd JVP refused full matrices even when "
        "the matrix is square (where full and reduced agree); measured in 0.4.30, differentiable in 0.10",
    ),
    *[
        expect(
            key,
            raises("InvalidArgumentError", rf"No registered '{kernel}' OpKernel for XLA_CPU_JIT"),
            framework="tensorflow",
            mode="xla",
            device="cpu",
            versions=versions,
            link=TF_XLA_FFT,
            reason=f"XLA_CPU_JIT registers no float64/complex128 {kernel} kernel before TensorFlow {versions[1:]} "
            "(float32 compiles): jit_compile=True refuses the float64 transform or its gradient's (measured: IFFT "
            "from 2.16, RFFT and IRFFT from 2.17, their 2-D/3-D kernels alike)",
        )
        for key, kernel, versions in (
            ("power-spectrum-grad[fft]", "IFFT", "<2.16"),
            ("power-spectrum-grad[ifft]", "IFFT", "<2.16"),
            # a crop fails its gradient's shapes while tracing, before XLA compiles (shape-mismatch, above)
            *((f"rfft-grad[{how}]", "RFFT", "<2.17") for how in ("exact", "pad")),
            ("irfft-grad", "IRFFT", "<2.17"),
            # the forward FFT2D/FFT3D compiles; its gradient, an inverse transform, does not
            *((f"power-spectrum-grad[{op}]", f"IFFT{op[-2:].upper()}", "<2.16") for op in _ND),
            ("rfft2d-grad", "RFFT2D", "<2.17"),
        )
    ],
    *[
        expect(
            f"{op}-vector-grad",
            "finite",
            framework="tensorflow",
            link=TF_EIGH,
            reason=f"TensorFlow's {op} gradient forms 1/(l_j - l_i) with reciprocal_no_nan, which is 0 where two "
            "eigenvalues (singular values) are equal: a finite gradient where none exists; JAX and PyTorch "
            "divide by zero and give NaN",
        )
        for op in ("eigh", "svd")
    ],
    *[
        expect(
            "eigh-trace-grad",
            "nan",
            framework=fw,
            link=link,
            reason="trace(V diag(l^2) V^T) is gauge-invariant and differentiable (2 sym(A)), but the eigenvector "
            "backward divides by l_j - l_i, exactly 0 for a bitwise-repeated eigenvalue: 0 * inf = NaN; "
            "TensorFlow's reciprocal_no_nan gives 0 there, and the closed form",
        )
        for fw, link in (("jax", JAX_EIGH), ("torch", TORCH_EIGH))
    ],
    *[
        expect(
            f"{op}-grad",
            raises("InvalidArgumentError", r"Input is not invertible"),
            framework="tensorflow",
            mode=TF_NOT_XLA,
            link=TF_DET_SINGULAR,
            reason=f"TensorFlow's {op} gradient is det(A) * inv(A)^T (inv(A)^T for slogdet) through "
            "matrix_inverse, which raises on a singular matrix instead of giving the adjugate",
        )
        for op in DET_OPS
    ],
    *[
        expect(
            f"{op}-grad",
            seen,
            framework="tensorflow",
            mode=TF_NOT_XLA,
            versions=f">={DET_GRAD_FROM}",
            link=TF_DET_GRAD_CHANGE,
            reason=f"from the tf-nightly of 2026-07-22 TensorFlow's {op} gradient at an exactly singular matrix no "
            "longer goes through matrix_inverse: det gives the adjugate, slogdet a finite gradient (the bisect's "
            "compare range, last raise on 2.22.0.dev20260720; PR 122823, an SVD-based adjugate for "
            "tensorflow#119477, was closed without merging, and the same singular-matrix test is in the diff of "
            "merged tensorflow#122826)",
        )
        for op, seen in (("det", "adjugate"), ("slogdet", "finite"))
    ],
    expect(
        "det-grad",
        "zero",
        framework="torch",
        link=TORCH_DET,
        reason="where det(A) is exactly 0, torch.linalg.det's backward returns zeros instead of the adjugate "
        "(where the LU leaves a rounding residue, det * inv(A)^T gives the adjugate)",
    ),
    *[
        expect(
            key,
            raises("InvalidArgumentError", r"Detected unsupported operations.*(Log)?MatrixDeterminant"),
            framework="tensorflow",
            mode="xla",
            versions=f"<{XLA_DET_FROM}",
            link=TF_XLA_DET_ISSUE,
            reason="XLA has no kernel for MatrixDeterminant/LogMatrixDeterminant: under jit_compile=True the "
            "forward pass does not compile (until the tf-nightly of 2026-08-30)",
        )
        for key in ("det-value", "det-grad", "slogdet-value", "slogdet-grad")
    ],
    *[
        expect(
            key,
            seen,
            framework="tensorflow",
            mode="xla",
            versions=f">={XLA_DET_FROM}",
            link=TF_XLA_DET_PR,
            reason="from the tf-nightly of 2026-08-30 XLA lowers MatrixDeterminant/LogMatrixDeterminant through "
            "xla::SLogDet (this pull request, opened 2026-08-25; the bisect places the change between "
            "2.22.0.dev20260823 and 2.22.0.dev20260830): det and slogdet compile, and where the LU leaves a "
            "rounding residue slogdet's gradient is finite, not huge (measured on 2.23.0.dev20261026)",
        )
        for key, seen in (("slogdet-grad[residue]", "finite"),)
    ],
    *[
        expect(
            f"rfft-grad[{how}]",
            err,
            framework="tensorflow",
            mode=mode,
            link=TF_FFT,
            reason="TensorFlow's RFFT gradient does not handle an fft_length shorter than the input (a crop): the "
            "shapes in its backward disagree and the gradient fails to build or run; a longer one (zero-pad) "
            "works; JAX and PyTorch crop and differentiate through it",
        )
        for how in ("crop",)
        for mode, err in ((None, "shape-mismatch"),)
    ],
)

# ---------------------------------------------------------------- strategies
SIZES = (3, 4)


def _orthogonal(draw, n) -> np.ndarray:
    g = draw(
        st.lists(st.floats(-2.0, 2.0, allow_nan=False), min_size=n * n, max_size=n * n).filter(
            lambda v: abs(np.linalg.det(np.reshape(v, (n, n)))) > 0.05
        ),
        label="gaussian",
    )
    q, r = np.linalg.qr(np.reshape(np.asarray(g, np.float64), (n, n)))
    return q * np.sign(np.diag(r))


@dataclasses.dataclass(frozen=True)
class SpectralCase:
    a: np.ndarray  # (n, n) float64
    w: np.ndarray  # (n,) weights, equal on the repeated pair (after sorting)


@st.composite
def repeated_eigen_cases(draw, *, singular_values=False) -> SpectralCase:
    """sym(Q diag(l) Q^T) with two eigenvalues equal (l in [-2, 2], others >= 0.25 apart); for
    ``singular_values`` U diag(s) V^T with s in [0.5, 2.5], two equal."""
    n = draw(st.sampled_from(SIZES), label="n")
    lo = 0.5 if singular_values else -2.0
    distinct = draw(
        st.lists(st.floats(lo, lo + 2.0, allow_nan=False), min_size=n - 1, max_size=n - 1).filter(
            lambda v: min(np.diff(np.sort(v)), default=1.0) >= 0.25
        ),
        label="distinct values",
    )
    twin = draw(st.integers(0, n - 2), label="repeated")
    vals = np.sort(np.asarray(distinct + [distinct[twin]], np.float64))
    q = _orthogonal(draw, n)
    if singular_values:
        a = q @ np.diag(vals) @ _orthogonal(draw, n).T
        order = np.sort(vals)[::-1]  # svd's order: descending
    else:
        a = q @ np.diag(vals) @ q.T
        a = (a + a.T) / 2
        order = vals
    w = np.asarray(draw(st.lists(st.floats(0.5, 2.0), min_size=n, max_size=n), label="w"), np.float64)
    rep = np.flatnonzero(np.isclose(np.diff(order), 0.0))
    for i in rep:  # gauge-invariant: the weight is constant on the repeated pair
        w[i + 1] = w[i]
    return SpectralCase(a, w)


@st.composite
def exact_repeat_cases(draw) -> tuple[np.ndarray, np.ndarray]:
    """(P diag(l) P^T with P a signed permutation and l two-decimal with a repeat, C): every solver
    sees bitwise-equal eigenvalues (and singular values)."""
    n = draw(st.sampled_from(SIZES), label="n")
    perm = draw(st.permutations(range(n)), label="permutation")
    signs = np.asarray(draw(st.lists(st.sampled_from((-1.0, 1.0)), min_size=n, max_size=n), label="signs"))
    p = np.eye(n)[list(perm)] * signs
    vals = draw(st.lists(st.integers(5, 25), min_size=n, max_size=n, unique=True), label="values")
    vals = np.asarray(vals, np.float64) / 10
    vals[1] = vals[0]
    c = draw(st.lists(st.floats(-2.0, 2.0).filter(lambda v: abs(v) > 0.1), min_size=n * n, max_size=n * n))
    return p @ np.diag(vals) @ p.T, np.reshape(np.asarray(c, np.float64), (n, n))


def _cofactors(m: np.ndarray) -> np.ndarray:
    """The cofactor matrix (d det / dA, the transposed adjugate) of a small integer matrix."""
    n = m.shape[0]
    out = np.zeros_like(m)
    for i in range(n):
        for j in range(n):
            out[i, j] = (-1) ** (i + j) * np.linalg.det(np.delete(np.delete(m, i, 0), j, 1))
    return np.round(out)  # integer minors


def _duplicated(m: np.ndarray) -> np.ndarray:
    m = m.copy()
    m[-1] = m[0]
    return m


@st.composite
def singular_cases(draw) -> np.ndarray:
    """Small integers, the last row a copy of the first, rank n - 1 with every cofactor of the
    copied row nonzero."""
    n = draw(st.sampled_from(SIZES), label="n")
    m = draw(
        st.lists(st.integers(-3, 3), min_size=n * n, max_size=n * n)
        .map(lambda v: _duplicated(np.reshape(np.asarray(v, np.float64), (n, n))))
        .filter(lambda m: np.all(_cofactors(m)[0] != 0)),  # rank n - 1, no zero cofactor in the copied row
        label="matrix",
    )
    return m


# ---------------------------------------------------------------- the programs
def _sym(x, transpose):
    return (x + transpose(x)) / 2


class EighValues(Program):
    """The eigenvalues of sym(X)."""

    def tensorflow(tf, x):
        return tf.linalg.eigh(_sym(x, tf.linalg.matrix_transpose))[0]

    def jax(jax, x):
        return jax.numpy.linalg.eigh(_sym(x, lambda m: m.T))[0]

    def torch(torch, x):
        return torch.linalg.eigh(_sym(x, lambda m: m.mT))[0]


class EighTrace(Program):
    """trace(V diag(l^2) V^T) of sym(X): through the eigenvectors, gauge-invariant."""

    def tensorflow(tf, x):
        e, v = tf.linalg.eigh(_sym(x, tf.linalg.matrix_transpose))
        return tf.linalg.trace(tf.linalg.matmul(v * e**2, v, transpose_b=True))

    def jax(jax, x):
        e, v = jax.numpy.linalg.eigh(_sym(x, lambda m: m.T))
        return jax.numpy.trace((v * e**2) @ v.T)

    def torch(torch, x):
        e, v = torch.linalg.eigh(_sym(x, lambda m: m.mT))
        return torch.trace((v * e**2) @ v.mT)


class EighVectors(Program):
    """sum(C * V^2) of sym(X): sign-invariant, not invariant to a rotation in a repeated eigenspace."""

    def tensorflow(tf, x, c):
        return tf.reduce_sum(c * tf.linalg.eigh(_sym(x, tf.linalg.matrix_transpose))[1] ** 2)

    def jax(jax, x, c):
        return jax.numpy.sum(c * jax.numpy.linalg.eigh(_sym(x, lambda m: m.T))[1] ** 2)

    def torch(torch, x, c):
        return torch.sum(c * torch.linalg.eigh(_sym(x, lambda m: m.mT))[1] ** 2)


class SvdValues(Program):
    """The singular values, descending."""

    def tensorflow(tf, x):
        return tf.linalg.svd(x, compute_uv=False)

    def jax(jax, x):
        return jax.numpy.linalg.svd(x, compute_uv=False)

    def torch(torch, x):
        return torch.linalg.svdvals(x)


class SvdVectors(Program):
    """sum(C * U^2): the left singular vectors."""

    def tensorflow(tf, x, c):
        return tf.reduce_sum(c * tf.linalg.svd(x)[1] ** 2)

    def jax(jax, x, c):
        return jax.numpy.sum(c * jax.numpy.linalg.svd(x)[0] ** 2)

    def torch(torch, x, c):
        return torch.sum(c * torch.linalg.svd(x)[0] ** 2)


class Det(Program):
    def tensorflow(tf, x):
        return tf.linalg.det(x)

    def jax(jax, x):
        return jax.numpy.linalg.det(x)

    def torch(torch, x):
        return torch.linalg.det(x)


class Slogdet(Program):
    """(sign, log|det|); its vjp differentiates log|det| (the sign's cotangent is 0)."""

    def tensorflow(tf, x):
        return tf.linalg.slogdet(x)

    def jax(jax, x):
        return tuple(jax.numpy.linalg.slogdet(x))

    def torch(torch, x):
        return tuple(torch.linalg.slogdet(x))


class LogAbsDet(Program):
    def tensorflow(tf, x):
        return tf.linalg.slogdet(x)[1]

    def jax(jax, x):
        return jax.numpy.linalg.slogdet(x)[1]

    def torch(torch, x):
        return torch.linalg.slogdet(x)[1]


class PowerSpectrum(Program):
    """|F(x)|^2 for F = fft or ifft of a real x."""

    def tensorflow(tf, x, *, op):
        z = getattr(tf.signal, op)(tf.complex(x, tf.zeros_like(x)))
        return tf.math.real(z) ** 2 + tf.math.imag(z) ** 2

    def jax(jax, x, *, op):
        z = getattr(jax.numpy.fft, op)(x)
        return jax.numpy.real(z) ** 2 + jax.numpy.imag(z) ** 2

    def torch(torch, x, *, op):
        z = getattr(torch.fft, op)(x)
        return z.real**2 + z.imag**2


class Rfft(Program):
    """[Re, Im] of rfft(x) with fft_length m (crop or zero-pad)."""

    def tensorflow(tf, x, *, m):
        z = tf.signal.rfft(x, fft_length=[m])
        return tf.concat([tf.math.real(z), tf.math.imag(z)], 0)

    def jax(jax, x, *, m):
        z = jax.numpy.fft.rfft(x, n=m)
        return jax.numpy.concatenate([jax.numpy.real(z), jax.numpy.imag(z)])

    def torch(torch, x, *, m):
        z = torch.fft.rfft(x, n=m)
        return torch.cat([z.real, z.imag])


class Irfft(Program):
    """irfft(re + i im) with fft_length m (the half spectrum has m // 2 + 1 entries)."""

    def tensorflow(tf, re, im, *, m):
        return tf.signal.irfft(tf.complex(re, im), fft_length=[m])

    def jax(jax, re, im, *, m):
        return jax.numpy.fft.irfft(re + 1j * im, n=m)

    def torch(torch, re, im, *, m):
        return torch.fft.irfft(torch.complex(re, im), n=m)


class QrLoss(Program):
    """sum(c1 * Q D) + sum(c2 * D R) over the first k = min(m, n) columns of Q and rows of R, with
    D = sign(diag R): the factors with their sign gauge fixed (differentiable at full rank)."""

    def tensorflow(tf, x, c1, c2, *, k, full):
        q, r = tf.linalg.qr(x, full_matrices=full)
        d = tf.sign(tf.linalg.diag_part(r)[:k])
        return tf.reduce_sum(c1 * q[:, :k] * d) + tf.reduce_sum(c2 * d[:, None] * r[:k])

    tensorflow.exact_shapes = True  # QrGrad refuses unknown dimensions (a relaxed trace, a shape-free placeholder)

    def jax(jax, x, c1, c2, *, k, full):
        q, r = jax.numpy.linalg.qr(x, mode="complete" if full else "reduced")
        d = jax.numpy.sign(jax.numpy.diagonal(r)[:k])
        return jax.numpy.sum(c1 * q[:, :k] * d) + jax.numpy.sum(c2 * d[:, None] * r[:k])

    def torch(torch, x, c1, c2, *, k, full):
        q, r = torch.linalg.qr(x, mode="complete" if full else "reduced")
        d = torch.sign(torch.diagonal(r)[:k])
        return torch.sum(c1 * q[:, :k] * d) + torch.sum(c2 * d[:, None] * r[:k])


class Cholesky(Program):
    """sum(c * L) with L L^T = sym(X) (lower)."""

    def tensorflow(tf, x, c):
        return tf.reduce_sum(c * tf.linalg.cholesky(_sym(x, tf.linalg.matrix_transpose)))

    def jax(jax, x, c):
        return jax.numpy.sum(c * jax.numpy.linalg.cholesky(_sym(x, lambda m: m.T)))

    def torch(torch, x, c):
        return torch.sum(c * torch.linalg.cholesky(_sym(x, lambda m: m.T)))


class Solve(Program):
    """sum(c * A^-1 B) through the solver."""

    def tensorflow(tf, a, b, c):
        return tf.reduce_sum(c * tf.linalg.solve(a, b))

    def jax(jax, a, b, c):
        return jax.numpy.sum(c * jax.numpy.linalg.solve(a, b))

    def torch(torch, a, b, c):
        return torch.sum(c * torch.linalg.solve(a, b))


class Inv(Program):
    """sum(c * A^-1)."""

    def tensorflow(tf, a, c):
        return tf.reduce_sum(c * tf.linalg.inv(a))

    def jax(jax, a, c):
        return jax.numpy.sum(c * jax.numpy.linalg.inv(a))

    def torch(torch, a, c):
        return torch.sum(c * torch.linalg.inv(a))


class PowerSpectrumNd(Program):
    """|F(x)|^2 for F = fft2d, ifft2d, fft3d or ifft3d of a real x (over its last 2 or 3 axes)."""

    def tensorflow(tf, x, *, op):
        z = getattr(tf.signal, op)(tf.complex(x, tf.zeros_like(x)))
        return tf.math.real(z) ** 2 + tf.math.imag(z) ** 2

    def jax(jax, x, *, op):
        name, d = _ND[op]
        z = getattr(jax.numpy.fft, name)(x, axes=tuple(range(-d, 0)))
        return jax.numpy.real(z) ** 2 + jax.numpy.imag(z) ** 2

    def torch(torch, x, *, op):
        name, d = _ND[op]
        z = getattr(torch.fft, name)(x, dim=tuple(range(-d, 0)))
        return z.real**2 + z.imag**2


class RfftNd(Program):
    """[Re, Im] of rfft2d/rfft3d(x) over the last 2 or 3 axes, flattened."""

    def tensorflow(tf, x, *, op):
        z = tf.reshape(getattr(tf.signal, op)(x), [-1])
        return tf.concat([tf.math.real(z), tf.math.imag(z)], 0)

    def jax(jax, x, *, op):
        z = jax.numpy.fft.rfftn(x, axes=tuple(range(-int(op[-2]), 0))).ravel()
        return jax.numpy.concatenate([jax.numpy.real(z), jax.numpy.imag(z)])

    def torch(torch, x, *, op):
        z = torch.fft.rfftn(x, dim=tuple(range(-int(op[-2]), 0))).reshape(-1)
        return torch.cat([z.real, z.imag])


# ---------------------------------------------------------------- helpers
def _kind(g) -> str:
    """``nan``, ``inf``, ``huge`` (finite, some entry above 1e10) or ``finite``."""
    g = np.asarray(g, np.float64)
    if np.isnan(g).any():
        return "nan"
    if np.isinf(g).any():
        return "inf"
    return "huge" if np.abs(g).max() > 1e10 else "finite"


def _det_grad_kind(g, cofactors) -> str:
    """``adjugate`` (the cofactor matrix, to 1e-9 relative), ``zero``, or :func:`_kind`'s word."""
    g = np.asarray(g, np.float64)
    if np.allclose(g, cofactors, rtol=1e-9, atol=1e-9 * np.abs(cofactors).max()):
        return "adjugate"
    if np.isfinite(g).all() and not g.any():
        return "zero"
    kind = _kind(g)
    return "other" if kind == "finite" else kind


def _sym_np(g):
    return (g + g.T) / 2


def _hold(record, oracles, program, *arrays, cotangent, out, grads, f, ref_grads, loose=False, tol=SPECTRAL,
          **static):  # fmt: skip
    """Value and gradients against the float64 closed forms (``f`` the forward pass in NumPy; ``ref_grads``
    None where the gradient has none), the oracles, and central differences of ``f``; ``loose``: at
    float32's precision (XLA_PRECISION); ``tol``: a decomposition's (SPECTRAL) unless a plain sum's."""
    tol, held_as = (cmp.GRAD, XLA_PRECISION) if loose else (tol, None)
    at = {"tol": tol, "derived_from": held_as}
    record.close(name="value", out=out, ref=f(*arrays), oracle="closed-form", scale="inputs", **at)
    named = {f"d/d{i}": g for i, g in enumerate(grads)}
    for (name, g), ref in zip(named.items(), ref_grads or ()):  # None: no closed form, differences only
        record.close(name=name, out=g, ref=ref, oracle="closed-form", scale="inputs", **at)
    # scale: where w's weights cancel (an irfft gradient's imaginary part with equal w), the exact answer
    # is 0 and a rounding residue of the inputs' size is what a float64 transform leaves
    record.against(oracles, program, *arrays, cotangent=cotangent, got={"value": out, **named}, scale="inputs", **at,
                   **static)  # fmt: skip
    if loose:
        return
    # the differences' own error per element (finite_diff.vjp_with_error), beside the floor at the inputs'
    # scale: a factorisation's third derivatives grow as its conditioning falls (a thorough run: QR of a
    # wide matrix, JAX and PyTorch 1.4e-6 off the differences, in float64)
    fds, errors = finite_diff.vjp_with_error(f, *arrays, cotangent=cotangent)
    unit = cmp.FINITE_DIFF.ulps(np.float64) * np.finfo(np.float64).eps
    for (name, g), fd, error in zip(named.items(), fds, errors):
        at = max(record.input_scale(), float(np.max(np.abs(fd), initial=0.0)))
        record.close(name=f"{name}[central difference]", out=g, ref=fd, oracle="finite-difference",
                     tol=cmp.FINITE_DIFF, scale=np.maximum(at, error / unit))  # fmt: skip


def _basis(f, k: int) -> np.ndarray:
    """The matrix of the linear map f on R^k (columns: f of each basis vector)."""
    return np.stack([np.asarray(f(e)) for e in np.eye(k)], axis=-1)


# ---------------------------------------------------------------- properties
@given(case=repeated_eigen_cases())
def test_eigh_eigenvalue_gradient_at_repeated_eigenvalue(subject, oracles, record, case):
    """sum(w * l) with w constant on the repeated pair: finite and equal to sym(V diag(w) V^T), the
    oracles and central differences."""
    a, w = case.a, case.w
    record.example(a=a, w=w)
    _, v = np.linalg.eigh(a)
    out, (g,) = subject.vjp(EighValues.of(subject), a, cotangent=w)
    _hold(record, oracles, EighValues, a, cotangent=w, out=out, grads=[g], f=lambda x: np.linalg.eigvalsh(_sym_np(x)),
          ref_grads=[_sym_np(v @ np.diag(w) @ v.T)], loose=subject.mode == "xla")  # fmt: skip


@given(case=repeated_eigen_cases(singular_values=True))
def test_svd_nuclear_norm_gradient_at_repeated_singular_value(subject, oracles, record, case):
    """sum(s) at a repeated singular value: finite and equal to U V^T, the oracles and differences."""
    a = case.a
    record.example(a=a)
    u, s, vt = np.linalg.svd(a)
    ones = np.ones_like(s)
    out, (g,) = subject.vjp(SvdValues.of(subject), a, cotangent=ones)
    _hold(record, oracles, SvdValues, a, cotangent=ones, out=out, grads=[g],
          f=lambda x: np.linalg.svd(x, compute_uv=False), ref_grads=[u @ vt], loose=subject.mode == "xla")  # fmt: skip


@given(case=exact_repeat_cases())
def test_gradients_at_exactly_repeated_value(subject, record, case):
    """Where two eigenvalues (singular values) are bitwise equal: trace(V diag(l^2) V^T), gauge-invariant,
    against its closed form 2 sym(A); a loss on the eigenvectors (singular vectors), which has no
    derivative: per framework nan, inf, huge or finite (or the error)."""
    a, c = case
    record.example(a=a, c=c)
    res, err = subject.attempt("vjp", EighTrace.of(subject), a, cotangent=np.float64(1.0))
    if err is not None:
        record.check(EXPECT, **{"eigh-trace-grad": err})
    else:
        g = np.asarray(res[1][0])
        seen = _kind(g)
        if seen == "finite" and np.allclose(g, _sym_np(2 * a), rtol=1e-9, atol=1e-9 * np.abs(a).max()):
            seen = "closed-form"
        record.check(EXPECT, **{"eigh-trace-grad": seen})
    for key, program in (("eigh-vector-grad", EighVectors), ("svd-vector-grad", SvdVectors)):
        res, err = subject.attempt("vjp", program.of(subject), a, c, cotangent=np.float64(1.0))
        if err is not None and "unknown inner matrix shape" in err.message:
            record.note(f"{key}: TensorFlow's svd gradient needs static inner dimensions (a relaxed trace)")
            continue
        record.check(EXPECT, **{key: err if err is not None else _kind(res[1][0])})


@given(m=singular_cases())
def test_det_and_slogdet_at_singular_matrix(subject, record, m):
    """det is 0 (to rounding) with the cofactor matrix (the transposed adjugate) as gradient, where the
    det is an exact 0 and where it is a rounding residue; slogdet is (0, -inf) (or a residue's) and has
    no gradient: per framework the value, and the gradient's kind or error."""
    record.example(m=m)
    ref = _cofactors(m)
    res, err = subject.attempt("run", Det.of(subject), m, remember=cmp.xla_refusal)
    exact_det = True
    if err is not None:
        record.check(EXPECT, **{"det-value": err})
    else:
        d = float(np.asarray(res))
        exact_det = d == 0
        record.check(EXPECT, **{"det-value": "zero" if abs(d) <= 1e-12 else "other"})
    res, err = subject.attempt("vjp", Det.of(subject), m, cotangent=np.float64(1.0), remember=cmp.xla_refusal)
    key = "det-grad" if exact_det else "det-grad[residue]"
    record.check(EXPECT, **{key: err if err is not None else _det_grad_kind(res[1][0], ref)})
    res, err = subject.attempt("run", Slogdet.of(subject), m, remember=cmp.xla_refusal)
    exact = True
    if err is not None:
        record.check(EXPECT, **{"slogdet-value": err})
    else:
        sign, logabs = (float(np.asarray(r)) for r in res)
        exact = sign == 0 and logabs == -np.inf
        residue = sign != 0 and np.isfinite(logabs) and logabs < -25
        record.check(EXPECT, **{"slogdet-value": "singular" if exact or residue else "other"})
    res, err = subject.attempt("vjp", LogAbsDet.of(subject), m, cotangent=np.float64(1.0), remember=cmp.xla_refusal)
    key = "slogdet-grad" if exact else "slogdet-grad[residue]"
    record.check(EXPECT, **{key: err if err is not None else _kind(res[1][0])})


FFT_SIZES = (4, 5, 6, 8)


def _reals(data, k, lo, hi, label):
    return np.asarray(data.draw(st.lists(st.floats(lo, hi), min_size=k, max_size=k), label=label), np.float64)


@given(n=st.sampled_from(FFT_SIZES), op=st.sampled_from(("fft", "ifft")), data=st.data())
def test_power_spectrum_gradient(subject, oracles, record, n, op, data):
    """sum(w * |F(x)|^2) for F = fft, ifft of a real x: 2 Re(F^H (w * F x)), the oracles, differences."""
    x, w = _reals(data, n, -2.0, 2.0, "x"), _reals(data, n, 0.5, 2.0, "w")
    record.example(x=x, w=w)
    f = _basis(getattr(np.fft, op), n)  # complex (n, n)
    res, err = subject.attempt("vjp", PowerSpectrum.of(subject), x, cotangent=w, op=op, remember=cmp.xla_refusal)
    record.check(EXPECT, **{f"power-spectrum-grad[{op}]": err if err is not None else "ok"})
    if err is not None:
        return
    out, (g,) = res
    _hold(record, oracles, PowerSpectrum, x, cotangent=w, out=out, grads=[g], f=lambda x: np.abs(f @ x) ** 2,
          ref_grads=[2 * np.real(f.conj().T @ (w * (f @ x)))], op=op, tol=cmp.GRAD)  # fmt: skip


@given(n=st.sampled_from(FFT_SIZES), how=st.sampled_from(("crop", "exact", "pad")), data=st.data())
def test_rfft_gradient_with_fft_length(subject, oracles, record, n, how, data):
    """[Re, Im] of rfft(x, fft_length=m), m = n - 2, n or n + 3 (crop, exact, zero-pad): the transpose of
    NumPy's map, the oracles and central differences; per framework whether the gradient runs."""
    m = n + {"crop": -2, "exact": 0, "pad": 3}[how]
    k = m // 2 + 1
    x, w = _reals(data, n, -2.0, 2.0, "x"), _reals(data, 2 * k, 0.5, 2.0, "w")
    record.example(x=x, w=w)
    f = _basis(lambda e: np.fft.rfft(e, n=m), n)  # (k, n)
    mat = np.concatenate([f.real, f.imag], 0)
    res, err = subject.attempt("vjp", Rfft.of(subject), x, cotangent=w, m=m, remember=cmp.xla_refusal)
    if err is not None and re.search(r"Incompatible shapes|Dimensions must be equal", err.message):
        err = "shape-mismatch"  # InvalidArgumentError or ValueError, by mode and trace
    record.check(EXPECT, **{f"rfft-grad[{how}]": err if err is not None else "ok"})
    if err is None:
        out, (g,) = res
        _hold(record, oracles, Rfft, x, cotangent=w, out=out, grads=[g], f=lambda x: mat @ x, ref_grads=[mat.T @ w],
              m=m, tol=cmp.GRAD)  # fmt: skip


@given(m=st.sampled_from(FFT_SIZES), data=st.data())
def test_irfft_gradient(subject, oracles, record, m, data):
    """irfft(re + i im, fft_length=m): the transpose of NumPy's map (which drops the imaginary parts of
    the DC and, m even, the Nyquist entries), the oracles and central differences."""
    k = m // 2 + 1
    re, im, w = _reals(data, k, -2.0, 2.0, "re"), _reals(data, k, -2.0, 2.0, "im"), _reals(data, m, 0.5, 2.0, "w")
    record.example(re=re, im=im, w=w)
    fr = _basis(lambda e: np.fft.irfft(e, n=m), k)  # (m, k)
    fi = _basis(lambda e: np.fft.irfft(1j * e, n=m), k)
    res, err = subject.attempt("vjp", Irfft.of(subject), re, im, cotangent=w, m=m, remember=cmp.xla_refusal)
    record.check(EXPECT, **{"irfft-grad": err if err is not None else "ok"})
    if err is not None:
        return
    out, (gr, gi) = res
    _hold(record, oracles, Irfft, re, im, cotangent=w, out=out, grads=[gr, gi], f=lambda re, im: fr @ re + fi @ im,
          ref_grads=[fr.T @ w, fi.T @ w], m=m, tol=cmp.GRAD)  # fmt: skip


QR_SHAPES = {"tall": (4, 3), "wide": (3, 4), "square": (3, 3)}


def _matrix(data, m, n, label, lo=-2.0, hi=2.0):
    return np.reshape(_reals(data, m * n, lo, hi, label), (m, n))


def _qr_np(a, c1, c2, k):
    q, r = np.linalg.qr(a)  # reduced: the first k columns of any Q, up to their signs
    d = np.sign(np.diag(r)[:k])
    return np.sum(c1 * q[:, :k] * d) + np.sum(c2 * d[:, None] * r[:k])


#: the explicit examples' a and c (data=None), cut to each shape: entries in [-2, 2], every cut of A of full
#: rank (|diag R| >= 1.4, singular values >= 1.07), so every shape reduced and complete is reached whatever
#: the draws
QR_A = np.array([[1.5, -0.5, 0.25, 1.0], [-1.0, 2.0, 0.5, -0.75], [0.5, 1.0, -1.5, 0.25], [0.75, -0.25, 1.0, 1.75]])
QR_C = np.array([[0.5, -1.25, 2.0, 1.0], [1.5, 0.75, -0.5, -2.0], [-1.0, 0.25, 1.25, 0.5], [2.0, -1.5, -0.75, 1.0]])


def _every_qr_case(test):
    """Every shape, reduced and complete, as an explicit example (data=None: QR_A and QR_C)."""
    for shape in reversed(tuple(QR_SHAPES)):
        for full in (True, False):
            test = example(shape=shape, full=full, data=None)(test)
    return test


@_every_qr_case
@given(shape=st.sampled_from(tuple(QR_SHAPES)), full=st.booleans(), data=st.data())
def test_qr_gradient(subject, oracles, record, shape, full, data):
    """The sign-fixed factors of a full-rank tall, wide or square matrix (reduced or complete Q): the
    loss is differentiable (the first min(m, n) columns of Q are determined); per framework whether the
    gradient runs, and where it does, the oracles and central differences of NumPy's QR."""
    m, n = QR_SHAPES[shape]
    k = min(m, n)
    if data is None:
        a, c1, c2 = QR_A[:m, :n], QR_C[:m, :k], QR_C[:k, :n]
    else:
        a = data.draw(
            st.lists(st.floats(-2.0, 2.0), min_size=m * n, max_size=m * n)
            .map(lambda v: np.reshape(np.asarray(v, np.float64), (m, n)))
            .filter(lambda a: np.abs(np.diag(np.linalg.qr(a)[1])).min() > 0.2),
            label="a",
        )
        c1, c2 = _matrix(data, m, k, "c1"), _matrix(data, k, n, "c2")
    record.example(a=a, c1=c1, c2=c2)
    key = f"qr-grad[{shape},{'complete' if full else 'reduced'}]"
    one = np.float64(1.0)
    res, err = subject.attempt("vjp", QrLoss.of(subject), a, c1, c2, cotangent=one, k=k, full=full,
                               remember=cmp.xla_refusal)  # fmt: skip
    record.check(EXPECT, **{key: err if err is not None else "ok"})
    if err is None:
        out, grads = res
        _hold(record, oracles, QrLoss, a, c1, c2, cotangent=one, out=out, grads=grads, ref_grads=None,
              f=lambda a, c1, c2: _qr_np(a, c1, c2, k), k=k, full=full)  # fmt: skip


def _cholesky_grad_np(a, c):
    """d sum(c * chol(sym X)) / dX = sym(L^-T Phi(L^T c) L^-1), Phi: the lower triangle, diagonal halved."""
    low = np.linalg.cholesky(a)
    phi = np.tril(low.T @ c)
    phi[np.diag_indices_from(phi)] /= 2
    inv = np.linalg.inv(low)
    return _sym_np(inv.T @ phi @ inv)


@st.composite
def singular_psd_cases(draw) -> np.ndarray:
    """P [[B B^T + I, 0], [0, 0]] P^T with B small integers: exactly singular, every factorisation meets an
    exact zero pivot."""
    n = draw(st.sampled_from(SIZES), label="n")
    b = np.reshape(np.asarray(draw(st.lists(st.integers(-2, 2), min_size=(n - 1) ** 2, max_size=(n - 1) ** 2),
                                   label="b"), np.float64), (n - 1, n - 1))  # fmt: skip
    a = np.zeros((n, n))
    a[: n - 1, : n - 1] = b @ b.T + np.eye(n - 1)
    p = np.eye(n)[list(draw(st.permutations(range(n)), label="permutation"))]
    return p @ a @ p.T


@given(a=singular_psd_cases(), data=st.data())
def test_cholesky_at_singular_matrix(subject, record, a, data):
    """At an exactly singular positive semi-definite matrix there is no Cholesky factor: per framework the
    value's and the gradient's kind (nan, inf, finite) or the error."""
    n = a.shape[0]
    c = _matrix(data, n, n, "c", 0.5, 2.0)
    record.example(a=a, c=c)
    res, err = subject.attempt("vjp", Cholesky.of(subject), a, c, cotangent=np.float64(1.0), remember=cmp.xla_refusal)
    if err is not None:
        record.check(EXPECT, **{"cholesky-value[singular]": err, "cholesky-grad[singular]": err})
    else:
        record.check(EXPECT, **{"cholesky-value[singular]": _kind(res[0]), "cholesky-grad[singular]": _kind(res[1][0])})


@given(n=st.sampled_from(SIZES), eps=st.sampled_from((1e-2, 1e-4)), data=st.data())
def test_cholesky_gradient_near_singular(subject, oracles, record, n, eps, data):
    """B B^T + eps I with B (n, n - 1): condition number ~ 1/eps; the gradient is large and finite and
    matches sym(L^-T Phi(L^T c) L^-1) (float64) and the oracles."""
    b = _matrix(data, n, n - 1, "b")
    a = b @ b.T + eps * np.eye(n)
    c = _matrix(data, n, n, "c", 0.5, 2.0)
    record.example(a=a, c=c)
    out, (g, _) = subject.vjp(Cholesky.of(subject), a, c, cotangent=np.float64(1.0))
    record.close(name="value", out=out, ref=np.sum(c * np.linalg.cholesky(a)), oracle="closed-form", tol=SPECTRAL,
                 scale="inputs")  # fmt: skip
    record.close(name="d/d0", out=g, ref=_cholesky_grad_np(a, c), oracle="closed-form", tol=SPECTRAL)
    record.against(oracles, Cholesky, a, c, cotangent=np.float64(1.0), got={"value": out, "d/d0": g, "d/d1": ...},
                   tol=SPECTRAL)  # fmt: skip


@st.composite
def singular_square_cases(draw) -> np.ndarray:
    """Small integers with one zero row: LU with partial pivoting meets an exact zero pivot."""
    n = draw(st.sampled_from(SIZES), label="n")
    m = np.reshape(np.asarray(draw(st.lists(st.integers(-3, 3), min_size=n * n, max_size=n * n), label="a"),
                              np.float64), (n, n))  # fmt: skip
    m[draw(st.integers(0, n - 1), label="zero row")] = 0.0
    return m


@given(a=singular_square_cases(), op=st.sampled_from(("solve", "inv")), data=st.data())
def test_solve_and_inv_at_singular_matrix(subject, record, a, op, data):
    """solve(A, B) and inv(A) at an exactly singular A: per framework the error, or ``unchecked`` where the
    call returns (its values, NaN, inf or huge, are noted)."""
    n = a.shape[0]
    c = _matrix(data, n, 2 if op == "solve" else n, "c", 0.5, 2.0)
    args = (a, _matrix(data, n, 2, "b"), c) if op == "solve" else (a, c)
    record.example(a=a, c=c)
    program = Solve if op == "solve" else Inv
    res, err = subject.attempt("vjp", program.of(subject), *args, cotangent=np.float64(1.0), remember=cmp.xla_refusal)
    if err is None:  # what comes back depends on the pivots' rounding: noted, not part of the observation
        record.note(f"{op} at a singular matrix returned: value {_kind(res[0])}, gradient {_kind(res[1][0])}")
    seen = err if err is not None else "unchecked"
    record.check(EXPECT, **{f"{op}-value[singular]": seen, f"{op}-grad[singular]": seen})


@given(n=st.sampled_from(SIZES), op=st.sampled_from(("solve", "inv")), eps=st.sampled_from((1e-3, 1e-5)),
       data=st.data())  # fmt: skip
def test_solve_and_inv_gradient_near_singular(subject, oracles, record, n, op, eps, data):
    """U diag(s) V^T with the smallest singular value eps: d/dA sum(c * A^-1 B) = -A^-T c X^T and
    d/dA sum(c * A^-1) = -A^-T c A^-T (float64), against the oracles too."""
    s = np.sort(_reals(data, n, 0.5, 2.0, "s"))[::-1]
    s[-1] = eps
    a = _orthogonal(data.draw, n) @ np.diag(s) @ _orthogonal(data.draw, n).T
    inv = np.linalg.inv(a)
    if op == "solve":
        b, c = _matrix(data, n, 2, "b"), _matrix(data, n, 2, "c", 0.5, 2.0)
        args, x = (a, b, c), inv @ b
        ref = {"value": np.sum(c * x), "d/d0": -inv.T @ c @ x.T, "d/d1": inv.T @ c, "d/d2": x}
    else:
        c = _matrix(data, n, n, "c", 0.5, 2.0)
        args = (a, c)
        ref = {"value": np.sum(c * inv), "d/d0": -inv.T @ c @ inv.T, "d/d1": inv}
    record.example(**dict(zip("abc" if op == "solve" else "ac", args)))
    program = Solve if op == "solve" else Inv
    out, grads = subject.vjp(program.of(subject), *args, cotangent=np.float64(1.0))
    got = {"value": out, **{f"d/d{i}": g for i, g in enumerate(grads)}}
    for name, r in ref.items():
        record.close(name=name, out=got[name], ref=r, oracle="closed-form", tol=SPECTRAL)
    record.against(oracles, program, *args, cotangent=np.float64(1.0), got=got, tol=SPECTRAL)


# every transform as an explicit example (data=None: x and w evenly spaced over their drawn ranges)
@example(op="fft2d", data=None)
@example(op="ifft2d", data=None)
@example(op="fft3d", data=None)
@example(op="ifft3d", data=None)
@given(op=st.sampled_from(tuple(_ND)), data=st.data())
def test_nd_power_spectrum_gradient(subject, oracles, record, op, data):
    """sum(w * |F(x)|^2) for the 2-D and 3-D transforms of a real x of shape (3, 4) or (2, 3, 4):
    2 Re(F^H (w * F x)) with F NumPy's fftn/ifftn as a matrix, the oracles, differences."""
    shape = (3, 4) if op.endswith("2d") else (2, 3, 4)
    size = int(np.prod(shape))
    ranges = ((-2.0, 2.0, "x"), (0.5, 2.0, "w"))
    if data is None:
        x, w = (np.linspace(lo, hi, size).reshape(shape) for lo, hi, _ in ranges)
    else:
        x, w = (_reals(data, size, lo, hi, label).reshape(shape) for lo, hi, label in ranges)
    record.example(x=x, w=w)
    nd = np.fft.fftn if op.startswith("fft") else np.fft.ifftn
    f = _basis(lambda e: nd(e.reshape(shape)).ravel(), size)  # complex (size, size)
    res, err = subject.attempt("vjp", PowerSpectrumNd.of(subject), x, cotangent=w, op=op, remember=cmp.xla_refusal)
    record.check(EXPECT, **{f"power-spectrum-grad[{op}]": err if err is not None else "ok"})
    if err is not None:
        return
    out, (g,) = res
    ref = 2 * np.real(f.conj().T @ (w.ravel() * (f @ x.ravel())))
    _hold(record, oracles, PowerSpectrumNd, x, cotangent=w, out=out, grads=[g], op=op, tol=cmp.GRAD,
          f=lambda x: (np.abs(f @ x.ravel()) ** 2).reshape(shape), ref_grads=[ref.reshape(shape)])  # fmt: skip


@given(op=st.sampled_from(("rfft2d", "rfft3d")), data=st.data())
def test_nd_rfft_gradient(subject, oracles, record, op, data):
    """[Re, Im] of rfft2d/rfft3d(x): the transpose of NumPy's rfftn as a matrix, the oracles and
    differences; per framework whether the transform has a gradient at all."""
    shape = (3, 4) if op == "rfft2d" else (2, 3, 4)
    size = int(np.prod(shape))
    x = _reals(data, size, -2.0, 2.0, "x").reshape(shape)
    f = _basis(lambda e: np.fft.rfftn(e.reshape(shape)).ravel(), size)
    mat = np.concatenate([f.real, f.imag], 0)
    w = _reals(data, mat.shape[0], 0.5, 2.0, "w")
    record.example(x=x, w=w)
    res, err = subject.attempt("vjp", RfftNd.of(subject), x, cotangent=w, op=op, remember=cmp.xla_refusal)
    record.check(EXPECT, **{f"{op}-grad": err if err is not None else "ok"})
    if err is not None:
        return
    out, (g,) = res
    _hold(record, oracles, RfftNd, x, cotangent=w, out=out, grads=[g], op=op, f=lambda x: mat @ x.ravel(),
          ref_grads=[(mat.T @ w).reshape(shape)], tol=cmp.GRAD)  # fmt: skip
