"""Per-dtype tolerances and assert helpers with one message form.

Every comparison failure reads the same way::

    grad[tensorflow-xla-cpu]=[1. 0.] but jax-jit-cpu gives [1. 1.] (max rel err 1.0e+00 > 2e-05)

The error measure is ``max_i |out_i - ref_i| / max(1, |ref_i|)``: relative for
magnitudes above one, absolute below, so values near zero do not blow it up.
Tolerances are data (``tolerance(float32=...)``); no literal belongs inside an assert.
"""

from __future__ import annotations

import dataclasses

import numpy as np

#: Suite defaults. Values: forward results that go through a few roundings.
VALUE_TOL = {np.dtype(np.float16): 1e-2, np.dtype(np.float32): 2e-6, np.dtype(np.float64): 1e-13}
#: Gradients: a few more operations, so a little looser.
GRAD_TOL = {np.dtype(np.float16): 1e-2, np.dtype(np.float32): 2e-5, np.dtype(np.float64): 1e-12}


@dataclasses.dataclass(frozen=True)
class Tolerance:
    """Per-dtype tolerance table. ``Tolerance.of(dtype)`` gives the number to use."""

    table: dict

    def of(self, dtype) -> float:
        dtype = np.dtype(dtype)
        if dtype.kind in "biu":
            return 0.0
        return self.table[dtype]


def tolerance(*, base=GRAD_TOL, float16=None, float32=None, float64=None) -> Tolerance:
    """A tolerance table, starting from ``base`` and loosened per dtype (say why at the call)."""
    table = dict(base)
    for dt, v in ((np.float16, float16), (np.float32, float32), (np.float64, float64)):
        if v is not None:
            table[np.dtype(dt)] = v
    return Tolerance(table)


VALUE = Tolerance(VALUE_TOL)
GRAD = Tolerance(GRAD_TOL)
EXACT = tolerance(float16=0.0, float32=0.0, float64=0.0)


def rel_err(out, ref) -> float:
    """``max |out - ref| / max(1, |ref|)``; ``inf`` on shape mismatch or NaN disagreement."""
    out, ref = np.asarray(out), np.asarray(ref)
    if out.shape != ref.shape:
        return float("inf")
    if out.size == 0:
        return 0.0
    o, r = out.astype(np.float64), ref.astype(np.float64)
    nan_o, nan_r = np.isnan(o), np.isnan(r)
    if (nan_o != nan_r).any():
        return float("inf")
    same = (o == r) | nan_o  # equal infinities and NaN positions are agreement
    with np.errstate(invalid="ignore", over="ignore"):
        err = np.where(same, 0.0, np.abs(o - r) / np.maximum(1.0, np.abs(r)))
    return float(np.nanmax(err)) if err.size else 0.0


def _fmt(a) -> str:
    if a is None:
        return "None"
    return np.array2string(np.asarray(a), precision=6, threshold=20, separator=" ")


def assert_close(*, name: str, out, ref, who: str, oracle: str, tol: Tolerance, dtype=None) -> float:
    """Assert ``out`` (from ``who``) is within ``tol`` of ``ref`` (from ``oracle``); return the error.

    ``None`` must meet ``None``: an unconnected gradient is not an array of zeros.

    >>> assert_close(name="grad", out=[1.0], ref=[1.0], who="tensorflow-eager-cpu",
    ...              oracle="closed-form", tol=GRAD)
    0.0
    """
    __tracebackhide__ = True
    if out is None or ref is None:
        if out is None and ref is None:
            return 0.0
        raise AssertionError(f"{name}[{who}]={_fmt(out)} but {oracle} gives {_fmt(ref)} (None vs array)")
    dtype = np.dtype(dtype if dtype is not None else np.asarray(ref).dtype)
    t = tol.of(dtype) if dtype.kind in "fc" else 0.0
    err = rel_err(out, ref)
    if np.asarray(out).shape != np.asarray(ref).shape:
        raise AssertionError(f"{name}[{who}] has shape {np.shape(out)} but {oracle} gives shape {np.shape(ref)}")
    if not err <= t:
        raise AssertionError(
            f"{name}[{who}]={_fmt(out)} but {oracle} gives {_fmt(ref)} (max rel err {err:.1e} > {t:g})"
        )
    return err


def assert_equal(*, name: str, out, ref, who: str, oracle: str):
    """Exact agreement (integers, booleans, observation strings)."""
    __tracebackhide__ = True
    if isinstance(out, np.ndarray) or isinstance(ref, np.ndarray):
        ok = np.asarray(out).shape == np.asarray(ref).shape and np.array_equal(out, ref, equal_nan=True)
    else:
        ok = out == ref
    if not ok:
        raise AssertionError(
            f"{name}[{who}]={_fmt(out) if not isinstance(out, str) else out!r} "
            f"but {oracle} gives {_fmt(ref) if not isinstance(ref, str) else ref!r}"
        )


def gradient_kind(g) -> str:
    """Observation vocabulary for a gradient: ``none``, ``zeros`` or ``nonzero``."""
    if g is None:
        return "none"
    return "zeros" if not np.any(np.asarray(g)) else "nonzero"


def error_name(exc: BaseException) -> str:
    """``raises:<ErrorName>`` for an observation."""
    return f"raises:{type(exc).__name__}"
