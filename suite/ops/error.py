"""The error model of the op table: what each element of an op's result is held to (issue 47).

An elementwise op's element i is computed from its own inputs, so its error is measured
against the rounding of its own computation, never against the array's largest element:

    |out_i - ref_i| <= ULPS x eps x T_i,    T_i = max(|ref_i|, terms_i, flushed_i)

- ``|ref_i|``: the element's own magnitude (the other framework's answer): where the formula
  is computed without cancellation, the element is held relatively, to ``ULPS`` units of
  rounding (16 in float32, 32 in float64, by default: :data:`ULPS`);
- ``terms_i``: the magnitude of the terms the frameworks' formula sums, where it cancels,
  stated in the entry (:class:`Terms`, a float64 function of the arguments per unit
  cotangent). ``tanh``'s derivative is computed as ``1 - y^2`` from the rounded output
  ``y``, so its terms are 1 and its absolute error is a few units of rounding of 1 however
  small ``1 - y^2`` is;
- ``flushed_i``: a subnormal factor may be flushed to zero (TensorFlow's and XLA's CPU
  kernels do), which costs the element up to ``FLUSHED`` smallest normals times its
  cofactor (1, or the entry's: ``|x|`` in ``x * sigmoid(x)`` at x = -88).

A worked example, tanh at x = 5 in float32 with cotangent 1: the gradient is
``1 - tanh(5)^2 = 1.8e-4``; its terms are 1, so T = 1 and the tolerance is 16 units of
rounding of 1 (tanh's ``ulps``: the frameworks were measured to differ by up to 5), 1.9e-6
absolute: 1.05% of the gradient at x = 5, 0.4% at x = 4.5. A regression of 1% wherever
``1 - y^2 < 1e-3`` (|x| > 4.1) therefore fails on every element in (4.1, 4.97), and every
example puts one in (4.1, 5.0) (tanh's ``saturating`` regime: :func:`suite.ops.regime_values`).
The old array-level floor (32 ulp at the inputs' magnitude, up to 20, over a 2e-5 tolerance)
allowed 7.6e-5 there, 40 times more.

Reductions and other mixing ops (softmax, log_softmax, reduce_logsumexp) keep an array-level
floor (``Op(elementwise=False)``: their element i sums terms of every element).
"""

from __future__ import annotations

import dataclasses
from typing import Callable

import numpy as np

from suite import compare as cmp

#: Units of rounding an element may be off by, per dtype, at the magnitude of its terms. Two
#: frameworks each round a few times (measured: at most 4 ulp in float32 and 12 in float64 over
#: the table's tails, see ``benchmarks/error_model.py``), and a regression of 1% in a tail
#: must show: 16 and 32 leave about 4x and 3x headroom.
ULPS = {"float32": 8.0, "float64": 8.0}


@dataclasses.dataclass(frozen=True)
class Terms:
    """The magnitudes an entry's formulas sum, per element, where they cancel: each a float64
    function of the arguments (broadcast elementwise), per unit cotangent. ``grad``: of the
    derivative (for a binary op, a tuple with one function per argument); ``second``: of the
    second derivative; ``value``: of the value. ``None``: the element's own magnitude.
    ``why``: the formula, for the reader (and the report)."""

    value: Callable | None = None
    grad: Callable | tuple | None = None
    second: Callable | tuple | None = None
    #: the cofactor of a factor that may be flushed to zero (``x`` in ``x * sigmoid(x)``): an
    #: element may be off by ``FLUSHED`` smallest normals times it (default 1)
    cofactor: Callable | None = None
    why: str = ""


def ulps(op, quantity: str = "grad") -> dict:
    """Units of rounding per dtype for ``quantity`` (``value``, ``grad<i>``, ``jt``, ``second<i>``):
    the entry's ``ulps`` (``{"float32": 16}``) hold its derivatives, where ``ulps["jt"]`` and
    ``ulps["second"]`` may hold J t and the second derivatives more tightly; ``ulps["value"]`` its
    values; :data:`ULPS` elsewhere.

    >>> import types
    >>> op = types.SimpleNamespace(ulps={"float32": 16.0, "value": {"float64": 32.0}, "second": {"float32": 4.0}})
    >>> ulps(op), ulps(op, "value")
    ({'float32': 16.0, 'float64': 8.0}, {'float32': 8.0, 'float64': 32.0})
    >>> ulps(op, "second0"), ulps(op, "jt")
    ({'float32': 4.0, 'float64': 8.0}, {'float32': 16.0, 'float64': 8.0})
    """
    own = dict(op.ulps or {})
    value, jt, second = (own.pop(k, {}) for k in ("value", "jt", "second"))
    if quantity == "value":
        return {**ULPS, **value}
    return {**ULPS, **own, **(jt if quantity == "jt" else second if quantity.startswith("second") else {})}


def tolerance(op, quantity: str = "grad") -> cmp.Tolerance:
    """The entry's tolerance for ``quantity`` (:func:`ulps` units of rounding: ``value``,
    ``grad``, ``jt``, ``second``), relative to
    :func:`scales`' magnitudes (``floor_ulps`` equal to them, so the floor is the terms)."""
    u = ulps(op, quantity)
    return cmp.Tolerance({k: v * cmp.EPS[k] for k, v in u.items()}, floor_ulps=dict(u), model=True)


def _per_arg(f, i):
    if f is None:
        return None
    return f[i] if isinstance(f, tuple) else f


def _eval(f, a64, shape):
    if f is None:
        return np.zeros(shape)
    with np.errstate(all="ignore"):
        out = np.abs(np.asarray(f(*a64), np.float64))
    return np.broadcast_to(np.nan_to_num(out, nan=0.0, posinf=np.inf), shape)


def derivatives(op, args) -> list[np.ndarray]:
    """Each argument's partial derivative per element, float64, by central differences of the
    entry's reference (an elementwise op: every element moved at once). Magnitudes only."""
    a64 = [np.asarray(a, np.float64) for a in args]
    out = []
    for i, x in enumerate(a64):
        h = np.finfo(np.float64).eps ** (1 / 3) * np.maximum(np.abs(x), 1.0)
        with np.errstate(all="ignore"):
            up = op.reference(*a64[:i], x + h, *a64[i + 1 :])
            down = op.reference(*a64[:i], x - h, *a64[i + 1 :])
            d = (np.asarray(up, np.float64) - np.asarray(down, np.float64)) / (2 * h)
        out.append(np.nan_to_num(np.abs(d), nan=0.0, posinf=np.inf))
    return out


def _flushed(terms, a64, shape, dtype):
    cofactor = np.maximum(1.0, _eval(terms.cofactor, a64, shape)) if terms.cofactor else 1.0
    return cmp.FLUSHED * cmp.TINY[cmp.real_name(dtype)] * cofactor


def scales(op, quantity: str, args, *, weights=None, weights2=None) -> np.ndarray | None:
    """``T_i`` (the module's rule, without ``|ref_i|``, which the comparison adds) of each
    element of ``quantity``: ``value``, ``grad<j>`` (cotangent ``weights``), ``jt`` (tangents
    ``weights``, one per argument), ``second<j>`` (cotangents ``weights`` and ``weights2``).
    ``None`` for a mixing entry: the array-level floor applies.

    >>> import types
    >>> tanh = types.SimpleNamespace(elementwise=True, reference=np.tanh, arity=1, ulps=None,
    ...     terms=Terms(grad=lambda x: np.ones_like(x)))
    >>> x, w = np.float32([0.0, 5.0]), np.float32([1.0, 0.5])
    >>> scales(tanh, "grad0", (x,), weights=w).tolist()
    [1.0, 0.5]
    """
    if not op.elementwise:
        return None
    args = [np.asarray(a) for a in args]
    shape, dtype = np.broadcast_shapes(*(a.shape for a in args)), args[0].dtype
    a64 = [np.asarray(a, np.float64) for a in args]
    eps = ulps(op, quantity)[cmp.real_name(dtype)] * cmp.EPS[cmp.real_name(dtype)]
    terms = op.terms or Terms()
    if quantity == "value":
        t = _eval(terms.value, a64, shape)
    elif quantity.startswith("grad"):
        i = int(quantity[4:] or 0)
        t = np.abs(np.asarray(weights, np.float64)) * _eval(_per_arg(terms.grad, i), a64, shape)
    elif quantity == "jt":
        # J t sums each argument's term, and a framework may mix the tangents before it masks
        # them (PyTorch's maximum: t_y + mask (t_x - t_y)): every tangent at the largest partial
        if op.arity == 1:
            t = np.abs(np.asarray(weights[0], np.float64)) * _eval(_per_arg(terms.grad, 0), a64, shape)
        else:
            d = derivatives(op, args)
            biggest = np.maximum.reduce([d[j] + _eval(_per_arg(terms.grad, j), a64, shape) for j in range(op.arity)])
            t = sum(np.abs(np.asarray(tj, np.float64)) for tj in weights) * biggest
    elif quantity.startswith("second"):
        i = int(quantity[6:] or 0)
        wv = np.abs(np.asarray(weights, np.float64) * np.asarray(weights2, np.float64))
        t = wv * _eval(_per_arg(terms.second, i), a64, shape)
    else:
        raise ValueError(f"quantity {quantity!r}: value, grad<j>, jt or second<j>")
    return np.maximum(np.broadcast_to(t, shape), _flushed(terms, a64, shape, dtype) / eps)
