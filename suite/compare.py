"""Per-dtype tolerances and assert helpers with one message form.

Every comparison failure reads the same way::

    grad[tensorflow-xla-cpu]=[1. 0.] but jax-jit-cpu gives [1. 1.] (max rel err 1.0e+00 > 3.8147e-06)

Dtype and shape are compared before values: a gradient that comes back as float64 for a
float32 source, or with a broadcast shape, fails with a message that says so.

The rule, written once (``rel_err``): each element's error is relative,
``|out_i - ref_i| / max(|ref_i|, floor)``, and must not exceed the dtype's ``rtol``. The
floor is where relative turns absolute: ``floor = FLOOR_ULPS * eps(dtype) * scale / rtol``,
so an element far below the array's magnitude (``scale``: ``max |ref|`` by default, or the
inputs' magnitude passed by the caller) may be off by ``FLOOR_ULPS`` units of rounding at
that magnitude and no more (nor by more than ``FLUSHED`` smallest normal numbers: subnormals
may be flushed to zero, as TensorFlow's and XLA's CPU kernels do, also where a subnormal
factor of a product would have been scaled back into the normal range, e.g. x * y * z with
y * z subnormal and |x| > 1; measured in float64 and bfloat16). A gradient of 1e-5 that comes
back as zero fails; one that carries the rounding error of a sum of O(1) terms passes.

=========  ===========  ==========  =============================
dtype      value rtol   grad rtol   absolute floor
=========  ===========  ==========  =============================
float16    1e-2         1e-2        32 ulp(float16) x scale
bfloat16   4e-2         4e-2        32 ulp(bfloat16) x scale
float32    2e-6         3.8e-6      32 ulp(float32) x scale
float64    1e-13        1e-12       32 ulp(float64) x scale
complex    as its real part's dtype, on the modulus of the error
=========  ===========  ==========  =============================

Against a float64 finite difference (``FINITE_DIFF``): float32 1e-4 with the same floor,
float64 1e-6 with a floor of 2^22 ulp (the difference quotient's own error); one-sided
differences (``ONE_SIDED``) are first order and looser still.

The op table's elementwise entries pass ``scale`` per element instead (:mod:`suite.ops.error`):
each element's floor is the rounding of its own computation, not the array's largest element.

Tolerances are data (``tolerance(float32=...)``); no literal belongs inside an assert.
"""

from __future__ import annotations

import dataclasses

import numpy as np

#: Units of rounding at the array's magnitude below which errors are absolute.
FLOOR_ULPS = 32
#: Machine epsilon per real dtype name (bfloat16 comes from ml_dtypes, so by name).
EPS = {"float16": 2.0**-10, "bfloat16": 2.0**-7, "float32": 2.0**-23, "float64": 2.0**-52}
_REAL = {"complex64": "float32", "complex128": "float64"}

#: Suite defaults. Values: forward results that go through a few roundings.
VALUE_TOL = {"float16": 1e-2, "bfloat16": 4e-2, "float32": 2e-6, "float64": 1e-13}
#: Gradients: a few more operations, so a little looser. float32: 32 units of rounding (2^-18,
#: the floor's own FLOOR_ULPS), so an element at the scale is held as an element below it is;
#: 2e-5 (168 units) until 2026-11-29. At 32 units the whole ci suite on TF 2.21 failed one
#: comparison, whose model lacked a cancellation (forward mode's J v of a product: now modelled),
#: and a dev run (20 random examples a row) one more, whose model lacked JAX's tanh'' from terms
#: of 1 (transform-boundaries' gradient penalty: now modelled). float64 stays at 1e-12: linear algebra's results
#: differ by up to ~3,800 units at the array's scale (least-squares), which a tighter default
#: would need condition numbers to model.
GRAD_TOL = {"float16": 1e-2, "bfloat16": 4e-2, "float32": 2.0**-18, "float64": 1e-12}


def real_name(dtype) -> str:
    """``float32`` for float32 and complex64; the key of every table here."""
    name = np.dtype(dtype).name
    return _REAL.get(name, name)


def is_inexact(dtype) -> bool:
    """A float or complex dtype, bfloat16 included (ml_dtypes gives it NumPy's kind ``V``).

    >>> import ml_dtypes
    >>> is_inexact(ml_dtypes.bfloat16), np.dtype(ml_dtypes.bfloat16).kind, is_inexact(np.int32)
    (True, 'V', False)
    """
    d = np.dtype(dtype)
    return d.kind in "fc" or real_name(d) in EPS


@dataclasses.dataclass(frozen=True)
class Tolerance:
    """Per-dtype ``rtol`` table. ``Tolerance.of(dtype)`` gives the number to use;
    ``floor_ulps`` overrides :data:`FLOOR_ULPS` per dtype (a finite difference's own error)."""

    table: dict
    floor_ulps: dict = dataclasses.field(default_factory=dict)
    #: set by the op table's error model (:func:`suite.ops.error.tolerance`): its comparisons'
    #: errors are kept per dtype for the report's headroom table
    model: bool = False

    def ulps(self, dtype) -> float:
        return self.floor_ulps.get(real_name(dtype), FLOOR_ULPS)

    def of(self, dtype) -> float:
        if not is_inexact(dtype):
            return 0.0
        return self.table[real_name(dtype)]


def tolerance(*, base=GRAD_TOL, float16=None, bfloat16=None, float32=None, float64=None) -> Tolerance:
    """A tolerance table, starting from ``base`` and loosened per dtype (say why at the call)."""
    table = {real_name(k) if not isinstance(k, str) else k: v for k, v in dict(base).items()}
    for name, v in (("float16", float16), ("bfloat16", bfloat16), ("float32", float32), ("float64", float64)):
        if v is not None:
            table[name] = v
    return Tolerance(table)


VALUE = Tolerance(VALUE_TOL)
GRAD = Tolerance(GRAD_TOL)
#: A gradient against a float64 central difference (suite.finite_diff): float32 gradients
#: at their own rounding, float64 at the difference's truncation and rounding error
#: (~eps^(2/3) of the function's scale: 2^22 ulp = 9e-10), not at float64's.
FINITE_DIFF = Tolerance(
    {"float16": 1e-2, "bfloat16": 4e-2, "float32": 1e-4, "float64": 1e-6}, floor_ulps={"float64": 2**22}
)
#: One-sided differences are first order (error ~sqrt(eps) = 1.5e-8 of the scale).
ONE_SIDED = Tolerance(
    {"float16": 1e-2, "bfloat16": 4e-2, "float32": 1e-3, "float64": 1e-5}, floor_ulps={"float64": 2**30}
)
EXACT = tolerance(float16=0.0, bfloat16=0.0, float32=0.0, float64=0.0)


#: Smallest normal number per real dtype: below it, values may be flushed to zero (TensorFlow's
#: and XLA's CPU kernels run with flush-to-zero), so errors there are never relative; a flushed
#: factor of a product costs its cofactor's magnitude in them (the suite's inputs keep that
#: below ``FLUSHED``), so :func:`floor` never goes below ``FLUSHED`` of them.
FLUSHED = 16
TINY = {"float16": 2.0**-14, "bfloat16": 2.0**-126, "float32": 2.0**-126, "float64": 2.0**-1022}


def floor(dtype, rtol: float, scale, ulps: float = FLOOR_ULPS):
    """Magnitude below which an element's error is measured absolutely (see the module rule):
    ``ulps`` units of rounding at ``scale``, and never below ``FLUSHED`` smallest normals.
    ``scale`` is one number (an array-level floor) or an array, one per element (an error
    model per element: :func:`suite.ops.error.scales`).

    >>> floor("float32", 2.0**-19, np.array([1.0, 0.0]), ulps=16).tolist()   # 16 ulp: rtol = 16 eps
    [1.0, 9.860761315262648e-32]
    """
    name = real_name(dtype)
    if name not in EPS or rtol <= 0:
        return 0.0
    if np.ndim(scale):
        return np.maximum(allowed(dtype, scale, ulps), FLUSHED * TINY[name]) / rtol
    return max(allowed(dtype, scale, ulps), FLUSHED * TINY[name]) / rtol


def allowed(dtype, scale, ulps: float = FLOOR_ULPS):
    """The absolute error :func:`floor` allows an element below it at ``scale``: ``ulps`` units
    of rounding of ``dtype`` at ``scale`` (``rtol * floor``, before its ``FLUSHED`` minimum).
    ``scale``: one number or one per element. A check that asks whether a quantity is within
    rounding of its terms asks this, so that it keeps to the rule when ``FLOOR_ULPS`` changes.

    >>> allowed("float32", 2.0) == FLOOR_ULPS * 2.0**-23 * 2.0
    True
    >>> floor("float32", 2.0**-18, 2.0) * 2.0**-18 == allowed("float32", 2.0)
    True
    """
    out = ulps * EPS[real_name(dtype)] * np.asarray(scale, np.float64)
    return float(out) if out.ndim == 0 else out


def scale_allowing(dtype, error, ulps: float = FLOOR_ULPS):
    """The inverse of :func:`allowed`: the ``scale`` at which :func:`floor` allows an absolute
    error of ``error`` (one number or one per element) in ``dtype``: a bound measured in absolute
    terms (a model's own error) turned into the floor's scale.

    >>> allowed("float64", scale_allowing("float64", 1e-9)) == 1e-9
    True
    """
    out = np.asarray(error, np.float64) / (ulps * EPS[real_name(dtype)])
    return float(out) if out.ndim == 0 else out


def units_scale(units: float, magnitude, ulps: float = FLOOR_ULPS):
    """The ``scale`` whose floor allows ``units`` units of rounding at ``magnitude``, in whatever
    dtype is compared: a reference whose own error is a number of roundings at a magnitude (a
    float64 difference quotient's, ``eps * magnitude / step``) rather than an absolute bound.

    >>> allowed("float32", units_scale(1, 64.0)) == allowed("float32", 64.0, ulps=1)
    True
    """
    out = units * np.asarray(magnitude, np.float64) / ulps
    return float(out) if out.ndim == 0 else out


def flushed_scale(dtype, cofactor=1.0, ulps: float = FLOOR_ULPS):
    """The ``scale`` (of :func:`floor`) that allows ``FLUSHED`` smallest normals times
    ``cofactor``: where a factor may be subnormal and flushed to zero (XLA's and TensorFlow's CPU
    kernels flush) before it meets a cofactor above 1, the element loses that factor times its
    cofactor, beyond what :func:`floor`'s own ``FLUSHED`` covers. ``cofactor`` is one number or
    one per element; a caller whose cofactor may be below 1 passes ``np.maximum(c, 1.0)``.

    >>> s = flushed_scale("float32", 64.0)
    >>> floor("float32", 2.0**-18, s) == FLUSHED * TINY["float32"] * 64.0 / 2.0**-18
    True
    """
    return scale_allowing(dtype, FLUSHED * TINY[real_name(dtype)] * np.asarray(cofactor, np.float64), ulps)


def _magnitude(a) -> np.ndarray:
    """``|a|`` in float64: the modulus of a complex array (as :func:`rel_err` measures it), not
    its real part (``np.asarray(a, np.float64)`` would drop the imaginary part)."""
    return np.abs(np.asarray(a)).astype(np.float64)


def own(ref) -> np.ndarray:
    """Per-element floor scales (``scale=``) for an elementwise closed form computed without
    cancellation (a product of the element's own inputs, or a sum of terms of one sign): each
    element's own magnitude, in float64 (a complex element's modulus).

    >>> own(np.float32([-2.0, 0.5])).tolist(), own(np.complex64([3 + 4j])).tolist()
    ([2.0, 0.5], [5.0])
    """
    return _magnitude(ref)


def capped(scale, ref) -> np.ndarray:
    """Per-element ``scale`` (float64, broadcast to ``ref``) no larger than the array-level
    floor's (``max |ref|`` over its finite elements): where an element's own terms exceed the
    whole array's magnitude, it is held as before, never more loosely.

    >>> capped([0.5, 8.0], [1.0, -2.0]).tolist(), capped([8.0], np.complex64([3j])).tolist()
    ([0.5, 2.0], [3.0])
    """
    mag = _magnitude(ref)
    return np.minimum(np.asarray(scale, np.float64), float(np.max(mag[np.isfinite(mag)], initial=0.0)))


def uncapped(scale, ref) -> np.ndarray:
    """``scale`` as per-element floor scales of ``ref``'s shape (float64), not capped at its
    magnitude: :func:`capped`'s counterpart for a sum whose terms cancel (``capped`` would hold
    such a scalar at itself, the rounding of its terms at the size of their small difference).

    >>> uncapped(8.0, [1.0, -2.0]).tolist(), capped(8.0, [1.0, -2.0]).tolist()
    ([8.0, 8.0], 2.0)
    """
    return np.broadcast_to(np.asarray(scale, np.float64), np.shape(ref))


def rounding_dtype(out, ref) -> np.dtype:
    """Whose rounding a comparison of ``out`` with ``ref`` is held to, by default: the coarser of
    the two inexact dtypes (the larger epsilon; a complex dtype by its real part's), ``ref``'s
    where they are equally fine, the other where one is not inexact. A float32 result compared
    with a float64 closed form is held at float32's tolerance and floor, not float64's. An audit
    (2026-11-30) found eight comparisons that were right only because they passed ``dtype=``;
    with this default none needs to. A whole ci run on TF 2.21 made one other comparison of a
    finer reference without ``dtype=``, at ``rtol=0``, where no floor applies: this default
    changed none of its comparisons.

    >>> [rounding_dtype(a, b).name for a, b in [(np.float32, np.float64), (np.float64, np.float32),
    ...                                          (np.complex64, np.float64), (np.int32, np.float64)]]
    ['float32', 'float32', 'complex64', 'float64']
    """
    o, r = np.dtype(out), np.dtype(ref)
    if not is_inexact(r):
        return o
    if not is_inexact(o):
        return r
    return o if EPS.get(real_name(o), 0.0) > EPS.get(real_name(r), 0.0) else r


def rel_err(out, ref, *, rtol: float | None = None, scale: float | None = None, dtype=None, ulps=FLOOR_ULPS) -> float:
    """``max_i |out_i - ref_i| / max(|ref_i|, floor)`` (the module's rule); ``inf`` on shape
    mismatch or NaN disagreement. ``rtol`` (default: the dtype's gradient tolerance) and
    ``scale`` (default ``max |ref|``) set the floor; with ``rtol=0`` the error is purely
    relative, so only exact agreement gives 0. ``dtype``: whose rounding sets the floor and the
    default ``rtol`` (default: :func:`rounding_dtype`, the coarser of ``out``'s and ``ref``'s; pass
    the framework output's for a quantity derived in float64).

    >>> rel_err(np.float32([1.0, 0.0]), np.float32([1.0, 1e-5]), rtol=2e-5) > 2e-5   # a zeroed tiny gradient
    True
    """
    out, ref = np.asarray(out), np.asarray(ref)
    if out.shape != ref.shape:
        return float("inf")
    if out.size == 0:
        return 0.0
    complex_ = out.dtype.kind == "c" or ref.dtype.kind == "c"
    o, r = out.astype(np.complex128 if complex_ else np.float64), ref.astype(np.complex128 if complex_ else np.float64)
    nan_o, nan_r = np.isnan(o), np.isnan(r)
    if (nan_o != nan_r).any():
        return float("inf")
    same = (o == r) | nan_o  # equal infinities and NaN positions are agreement
    mag = np.abs(r)
    finite = np.isfinite(mag)
    if scale is None:
        scale = float(np.max(mag[finite])) if finite.any() else 0.0
    elif np.ndim(scale):  # one per element, as ``ref`` is laid out
        scale = np.broadcast_to(np.asarray(scale, np.float64), ref.shape)
    dtype = np.dtype(dtype) if dtype is not None else rounding_dtype(out.dtype, ref.dtype)
    if rtol is None:
        rtol = GRAD.of(dtype) if is_inexact(dtype) and real_name(dtype) in GRAD.table else 0.0
    fl = floor(dtype, rtol, scale, ulps) if is_inexact(dtype) else 0.0
    tiny = np.finfo(np.float64).tiny
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        err = np.where(same, 0.0, np.abs(o - r) / np.maximum(np.maximum(mag, fl), tiny))
    return float(np.nanmax(err)) if err.size else 0.0


def _fmt(a) -> str:
    if a is None:
        return "None"
    return np.array2string(np.asarray(a), precision=6, threshold=20, separator=" ")


def _is_array(x) -> bool:
    return isinstance(x, (np.ndarray, np.generic))


def check_dtype_and_shape(*, name: str, out, ref, who: str, oracle: str, dtype=None) -> None:
    """Shape, then dtype: ``out`` must have ``ref``'s shape and ``dtype`` (default: ``ref``'s
    dtype when ``ref`` is a NumPy array; a closed form computed in another precision passes
    the dtype the subject must return). Python numbers and lists carry no dtype to check."""
    __tracebackhide__ = True
    if np.shape(out) != np.shape(ref):
        raise AssertionError(f"{name}[{who}] has shape {np.shape(out)} but {oracle} gives shape {np.shape(ref)}")
    want = np.dtype(dtype) if dtype is not None else (np.asarray(ref).dtype if _is_array(ref) else None)
    if want is not None and _is_array(out) and np.asarray(out).dtype != want:
        raise AssertionError(
            f"{name}[{who}] has dtype {np.asarray(out).dtype} but {oracle} gives dtype {want} "
            f"(values {_fmt(out)} vs {_fmt(ref)})"
        )


class Mismatch(AssertionError):
    """A value mismatch of :func:`assert_close`; ``err`` is the error it measured (at the
    tolerance's dtype and floor, which a report states beside the tolerance)."""

    def __init__(self, message: str, err: float):
        super().__init__(message)
        self.err = err


def assert_close(
    *, name: str, out, ref, who: str, oracle: str, tol: Tolerance, dtype=None, scale=None, derived_from=None
) -> float:
    """Assert ``out`` (from ``who``) has ``ref``'s shape and dtype (``dtype=`` when ``ref`` was
    computed in another precision) and is within ``tol`` of it (``scale``: the magnitude
    that sets the absolute floor, default ``max |ref|``); return the error.

    ``derived_from=dtype``: ``out`` is not a framework's output but a float64 quantity the
    test derived from one of that dtype (a displacement, a relative difference); its dtype
    is not checked (check the output it came from) and that dtype's tolerance applies.

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
    if derived_from is not None:
        check_dtype_and_shape(name=name, out=out, ref=ref, who=who, oracle=oracle, dtype=np.asarray(out).dtype)
        dtype = derived_from
    else:
        check_dtype_and_shape(name=name, out=out, ref=ref, who=who, oracle=oracle, dtype=dtype)
    kind_of = np.dtype(dtype) if dtype is not None else np.asarray(ref).dtype
    if not is_inexact(kind_of):
        kind_of = np.asarray(out).dtype
    t = tol.of(kind_of) if is_inexact(kind_of) else 0.0
    err = rel_err(out, ref, rtol=t, scale=scale, dtype=kind_of, ulps=tol.ulps(kind_of))
    if not err <= t:
        raise Mismatch(f"{name}[{who}]={_fmt(out)} but {oracle} gives {_fmt(ref)} (max rel err {err:.1e} > {t:g})", err)
    return err


def assert_equal(*, name: str, out, ref, who: str, oracle: str, dtype=None):
    """Exact agreement (integers, booleans, observation strings); arrays also in shape and dtype."""
    __tracebackhide__ = True
    if _is_array(out) or _is_array(ref):
        check_dtype_and_shape(name=name, out=out, ref=ref, who=who, oracle=oracle, dtype=dtype)
        ok = np.array_equal(out, ref, equal_nan=is_inexact(np.asarray(out).dtype))
    else:
        ok = out == ref
    if not ok:
        raise AssertionError(
            f"{name}[{who}]={_fmt(out) if not isinstance(out, str) else out!r} "
            f"but {oracle} gives {_fmt(ref) if not isinstance(ref, str) else ref!r}"
        )


def gradient_kind(g) -> str:
    """A gradient's coarse kind (:mod:`suite.kinds`): ``none``, ``zero`` or ``nonzero``."""
    if g is None:
        return "none"
    return "zero" if not np.any(np.asarray(g)) else "nonzero"


def near(g, ref, *, factor: float = 1.0, atol_factor: float = 1.0) -> bool:
    """Whether ``g`` has ``ref``'s shape and is within ``factor`` times its dtype's gradient
    tolerance of the float64 ``ref`` (relative, and absolute at ``atol_factor`` times that).

    >>> near(np.float32([1.0, 2.0]), [1.0, 2.0000001]), near(None, 0.0), near(np.ones(2), np.ones(3))
    (True, False, False)
    """
    if g is None or isinstance(g, str):
        return False
    g = np.asarray(g)
    tol = GRAD.of(g.dtype) * factor
    return g.shape == np.shape(ref) and bool(np.allclose(g.astype(np.float64), ref, rtol=tol, atol=tol * atol_factor))


def which(g, refs: dict, *, factor: float = 1.0, atol_factor: float = 1.0, zero: bool = True) -> str:
    """Which named reference ``g`` is :func:`near` (the first in ``refs``' order); ``none`` for no
    gradient; else ``zero`` (when ``zero`` and g is all zero) or ``other`` (:mod:`suite.kinds`).

    >>> which(np.zeros(2), {"twice": np.full(2, 2.0)}), which(np.full(2, 2.0), {"twice": np.full(2, 2.0)})
    ('zero', 'twice')
    """
    if g is None:
        return "none"
    for name, ref in refs.items():
        if near(g, ref, factor=factor, atol_factor=atol_factor):
            return name
    return "zero" if zero and not np.any(np.asarray(g)) else "other"


class Remote(Exception):
    """An error raised in another process (a peer), carried by its class name and message: the
    class itself may not unpickle here (TensorFlow's errors need their op and node)."""

    def __init__(self, name: str, message: str):
        super().__init__(message)
        self.name = name

    def __reduce__(self):
        return Remote, (self.name, str(self))


class Raised(str):
    """The observation ``raises:<ErrorName>``, carrying the error, so that a declared
    :class:`suite.expectations.Raises` can match its message too. Reports keep the string.
    A peer sends :func:`remote` of its error; it arrives as the same observation.

    >>> import pickle
    >>> r = pickle.loads(pickle.dumps(remote(ValueError("bad shape"))))
    >>> r, r.message
    ('raises:ValueError', 'bad shape')
    """

    exc: BaseException

    def __new__(cls, exc: BaseException):
        obj = super().__new__(cls, f"raises:{exc.name if isinstance(exc, Remote) else type(exc).__name__}")
        obj.exc = exc
        return obj

    def __reduce__(self):
        return Raised, (self.exc,)

    @property
    def message(self) -> str:
        return str(self.exc)


def remote(exc: BaseException) -> Raised:
    """``exc`` as an observation that crosses a pipe: its class name and message (a peer's answer)."""
    return Raised(Remote(type(exc).__name__, str(exc)))


def xla_refusal(e: BaseException) -> bool:
    """Whether ``e`` is XLA refusing to compile a function (an op with no XLA kernel, a shape that
    must be a compile-time constant): deterministic for a program and its input dtypes, so
    ``Runner.recall(..., remember=xla_refusal)`` raises it again without paying the compile."""
    text = str(e)
    return "Detected unsupported operations" in text or "compile-time constant" in text


def error_name(exc: BaseException) -> Raised:
    """``raises:<ErrorName>`` for an observation (it keeps the error for message patterns)."""
    return Raised(exc)


def unavailable_or_raised(exc: BaseException, name: str):
    """``unavailable`` when ``exc`` says the API ``name`` itself is missing (an
    AttributeError on that name, as ``tf.compat.v1.layers`` under Keras 3 gives); any other
    error is what it is: :func:`error_name`.

    >>> unavailable_or_raised(AttributeError("module 'x' has no attribute 'layers'"), "layers")
    'unavailable'
    >>> unavailable_or_raised(RuntimeError("not supported when eager execution is enabled"), "gradients")
    'raises:RuntimeError'
    """
    if isinstance(exc, AttributeError) and name.rsplit(".", 1)[-1] in str(exc):
        return "unavailable"
    return error_name(exc)
