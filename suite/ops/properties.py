"""Generic gradient properties over the op table, bound into a behaviour module.

``bind(globals(), "kink-subgradients")`` adds four tests to the module, parametrized over the
table's entries of that behaviour, so their rows are that behaviour's, in every TensorFlow
mode and for JAX and PyTorch as subjects, each against the other frameworks as oracles:

- ``test_op_reverse_mode``: value and gradients against the float64 reference, the oracles
  and (float64) central differences of the reference away from the excluded points; each
  gradient has its input's dtype and shape;
- ``test_op_forward_mode``: ``J t`` agrees with the reverse mode (``<w, J t> = <J^T w, t>``)
  and with the oracles' forward mode;
- ``test_op_second_order``: reverse over reverse against the oracles';
- ``test_op_special_points``: the kind of gradient at each special point (``zero``, ``nan``,
  ``+inf``, ``1``, ...), asserted against the entry's declarations.

Inputs: a dtype and a shape from a small menu (float32 and float64; a scalar, a vector, a
matrix), values drawn over the entry's domain for that dtype, bounds included.
"""

from __future__ import annotations

import dataclasses
import functools

import numpy as np
import pytest
from hypothesis import example, given, strategies as st

from suite import compare as cmp, finite_diff, ops, strategies as ss
from suite.behaviours import declared_skip
from suite.ops import error

#: (dtype, shape) pairs: each dtype with a scalar, a vector and a matrix.
PAIRS = ((np.float32, ()), (np.float64, (3,)), (np.float32, (2, 3)), (np.float64, ()), (np.float32, (3,)))
MODE_CAPABILITY = {"xla": "xla", "graph": "graph"}


def _usable(op, subject):
    """Skip (declared, with the entry's reason and link) a subject the entry has no spelling or
    capability for."""
    if not op.spelled(subject.framework):
        why, link = op.absent[subject.framework]
        declared_skip(f"{op.name} has no {subject.framework} spelling: {why}", link=link)
    need = [MODE_CAPABILITY.get(subject.mode)] if subject.framework == "tensorflow" else []
    need += ["gpu"] if subject.device == "gpu" else []
    for cap in need:
        if cap and cap not in op.capabilities:
            why, link = op.absent[cap]
            declared_skip(f"{op.name} is not run under {cap}: {why}", link=link)


def _capable(op, cap):
    if cap not in op.capabilities:
        why, link = op.absent[cap]
        declared_skip(f"{op.name} has no {cap}: {why}", link=link)


def _oracles(op, oracles):
    return [o for o in oracles if op.spelled(o.framework)]


@dataclasses.dataclass(frozen=True)
class Anchor:
    """An explicit example of every generic property: operands of ``dtype`` fixed by the entry
    (:func:`anchored`), on the signature a drawn example of that dtype uses. A drawn example may
    land within the margin of an excluded point and compare nothing against the oracles; an
    anchor never does, so no row depends on a random draw to compare something (issue 46)."""

    dtype: str


ANCHORS = (Anchor("float32"), Anchor("float64"))


def anchored(op, dtype) -> tuple:
    """(args, cotangent, tangents, second cotangent) of ``dtype`` on its largest signature (of the
    entry's first dtype where it has no ``dtype``):
    points spread over the middle of the entry's domain (clipped to [-3, 3]), the arguments in
    opposite orders, moved off every excluded point (and off ties between them) by fixed steps;
    cotangents and tangents of both signs between 0.25 and 1.75.

    >>> relu = ops.Op("relu", "demo", "nn.relu", "nn.relu", "relu", excluded=(0.0,))
    >>> anchored(relu, "float64")[0][0].round(3).tolist()
    [-2.737, -0.037, 2.663]
    """
    # an entry drawn in one dtype only (its pairs) has that dtype's anchor for both
    dtype, shape = _signature(op, dtype)
    lo, hi = op.domain[dtype.name]
    n = max(1, int(np.prod(shape)))
    mid_lo, mid_hi = max(lo, -3.0), min(hi, 3.0)
    span = np.linspace(0.05, 0.95, n) if n > 1 else np.array([0.5])
    args = [mid_lo + (mid_hi - mid_lo) * (span if i % 2 == 0 else span[::-1]) for i in range(op.arity)]
    for step in range(1, 40):  # an anchor near an excluded point would compare nothing: move it off
        cast = tuple(np.asarray(a, dtype).reshape(shape) for a in args)
        if not _near_excluded(op, cast):
            break
        # each argument by its own step, so a tie between arguments (maximum's) is undone too
        args = [np.clip(a + 0.0371 * step * (i + 1) * (-1) ** step, lo, hi) for i, a in enumerate(args)]
    else:
        raise ValueError(f"no anchor of {op.name} away from its excluded points in {dtype.name}")
    # the middle of each regime the entry names, in the first elements of the first argument
    regimes = ops.regime_values(op, dtype.name)[:n]
    if regimes:
        first = cast[0].copy().ravel()
        first[: len(regimes)] = [(a + b) / 2 for _, a, b in regimes]
        cast = (first.reshape(shape).astype(dtype), *cast[1:])
    signs = np.where(np.arange(n) % 2 == 0, 1.0, -1.0)
    like = (signs * np.linspace(0.25, 1.75, n)).astype(dtype).reshape(shape)
    w, v = like, -like[::-1].reshape(shape) if shape else -like
    tangents = tuple(np.roll(like.ravel(), i + 1).reshape(shape).astype(dtype) for i in range(op.arity))
    return cast, w, tangents, np.asarray(v, dtype)


def _operands(op, data):
    """The operands of one example: an explicit anchor's, or drawn."""
    if isinstance(data, Anchor):
        return anchored(op, data.dtype)
    return data.draw(operands(op), label="operands")


@st.composite
def operands(draw, op):
    """(args, cotangent, tangents, second cotangent) of one dtype and shape over ``op``'s domain."""
    dtype, shape = draw(ss.choice(ss.signature_menu(op.pairs or PAIRS)), label="dtype, shape")
    lo, hi = op.domain[np.dtype(dtype).name]
    el = ss.floats(dtype, lo, hi)
    args = tuple(draw(ss.arrays(dtype, shape, elements=el), label=f"x{i}") for i in range(op.arity))
    # cotangents and tangents: 0 or 2^-10 <= |v| <= 2, so their products with a large gradient
    # (exp(80) * 1e-38) do not land among subnormals, which frameworks flush differently
    like = st.one_of(st.just(0.0), ss.floats(dtype, 2.0**-10, 2.0), ss.floats(dtype, -2.0, -(2.0**-10)))
    w, v = (draw(ss.arrays(dtype, shape, elements=like), label=n) for n in ("w", "v"))
    tangents = tuple(draw(ss.arrays(dtype, shape, elements=like), label=f"t{i}") for i in range(op.arity))
    return _in_regimes(draw, op, dtype, shape, args, (w, v, *tangents))


def _in_regimes(draw, op, dtype, shape, args, weights):
    """Put one element of the first argument in each regime the entry names (issue 47: a regression
    confined to a tail must be drawn), with nonzero cotangents and tangents there; a signature with
    fewer elements than regimes takes as many as fit, a scalar one of them."""
    regimes = ops.regime_values(op, np.dtype(dtype).name)
    n = max(1, int(np.prod(shape)))
    if not regimes:
        return args, weights[0], tuple(weights[2:]), weights[1]
    if len(regimes) > n:
        regimes = [draw(ss.choice(regimes), label="regime")] if n == 1 else regimes[:n]
    x = np.array(args[0], dtype).reshape(-1)
    ws = [np.array(a, dtype).reshape(-1) for a in weights]
    nonzero = st.one_of(ss.floats(dtype, 0.25, 2.0), ss.floats(dtype, -2.0, -0.25))
    for k, (name, lo, hi) in enumerate(regimes):
        x[k] = draw(ss.floats(dtype, lo, hi), label=f"x0 in {name}")
        for a in ws:
            if a[k] == 0:
                a[k] = draw(nonzero, label="nonzero weight")
    args = (x.reshape(shape), *args[1:])
    w, v, *tangents = (a.reshape(shape) for a in ws)
    return args, w, tuple(tangents), v


def _near_mask(op, args):
    """Which elements are within ``op.margin`` of a point where the derivative is undefined (a
    value in ``op.excluded``, or where ``op.excluded(*args)`` is true)?"""
    a64 = [np.asarray(a, np.float64) for a in args]
    if callable(op.excluded):
        return np.broadcast_to(op.excluded(*a64, margin=op.margin), a64[0].shape)
    near = np.zeros(a64[0].shape, bool)
    for a in a64:
        for e in op.excluded:
            near |= np.abs(a - e) <= op.margin
    return near


def _near_excluded(op, args) -> bool:
    return bool(np.any(_near_mask(op, args)))


def _attempt(op, record, prop, call, kind=None):
    """``call()``, or, where the entry declares what ``prop`` (``reverse``, ``forward``,
    ``second``) does for a framework, that checked against the declaration: the error where it
    raises, else ``kind(result)`` (``"ok"`` by default; forward mode's ``"none"``: a J t that no
    input reaches, as TensorFlow's through a gradient registered NotDifferentiable). None where
    the property did not run as itself."""
    key = f"{prop}[{op.name}]"
    declared = key in op.expect.defaults
    try:
        out = call()
    except Exception as e:
        if not declared:
            raise
        record.check(op.expect, **{key: cmp.error_name(e)})
        return None
    if declared:
        seen = kind(out) if kind else "ok"
        record.check(op.expect, **{key: seen})
        if seen != "ok":
            return None
    return out


def reverse_mode(subject, oracles, record, op, data):
    _usable(op, subject)
    args, w, tangents, v = _operands(op, data)
    record.example(**{f"x{i}": a for i, a in enumerate(args)}, w=w)
    record.scale = "inputs"  # saturated and underflowing outputs are compared at the inputs' magnitude
    ran = _attempt(op, record, "reverse", lambda: _orders(subject, op, args, w, tangents, v, "vjp"))
    if ran is None:
        return
    y, grads, _, _ = ran
    ref = np.asarray(op.reference(*(np.asarray(a, np.float64) for a in args)))
    clear = ~_near_mask(op, args)  # values near an excluded point are the special points' to judge
    tol, at = _model(op, args, w=w)
    value_at = None if at["value"] is None else np.broadcast_to(at["value"], clear.shape)[clear]
    value_tol = error.tolerance(op, "value") if tol else cmp.VALUE
    record.close(name="value", out=np.asarray(y)[clear], ref=ref.astype(args[0].dtype)[clear], oracle="closed-form",
                 tol=value_tol, scale=value_at)  # fmt: skip
    for i, (g, a) in enumerate(zip(grads, args)):
        cmp.check_dtype_and_shape(name=f"grad{i}", out=g, ref=a, who=subject.id, oracle="its input")
    away = not _near_excluded(op, args)  # at a kink the frameworks pick sides: see special points
    got = {"value": y if away else ..., **{f"grad{i}": g if away else ... for i, g in enumerate(grads)}}
    tols = {"value": value_tol if tol else op.tol, **{f"grad{i}": tol or op.tol for i in range(op.arity)}}
    record.against(_oracles(op, oracles), op.program, *args, via="orders", cotangent=w, tangents=tangents,
                   cotangent2=v, got=got, tol=tols, scale=at)  # fmt: skip
    if args[0].dtype == np.float64 and away:
        refs = finite_diff.vjp(op.reference, *args, cotangent=w)
        record.against_differences({f"grad{i}": g for i, g in enumerate(grads)}, refs, label="central")


def forward_mode(subject, oracles, record, op, data):
    _usable(op, subject)
    _capable(op, "forward")
    args, w, tangents, v = _operands(op, data)
    record.example(**{f"x{i}": a for i, a in enumerate(args)}, w=w, **{f"t{i}": t for i, t in enumerate(tangents)})
    record.scale = "inputs"
    ran = _attempt(op, record, "forward", lambda: _orders(subject, op, args, w, tangents, v, "jvp"),
                   kind=lambda r: "none" if r.jt is None else "ok")  # fmt: skip
    if ran is None:
        return
    y, grads, jt, _ = ran
    # a tangent no input reaches (TensorFlow's JVP of sign is None, JAX's zeros): compared as zeros
    jt = np.zeros_like(args[0]) if jt is None else jt
    if grads is None:  # not computed with J t (an eager mode)
        _, grads, _, _ = _orders(subject, op, args, w, tangents, v, "vjp")
    lhs = np.sum(np.asarray(w, np.float64) * np.asarray(jt, np.float64))
    rhs = sum(np.sum(np.asarray(g, np.float64) * np.asarray(t, np.float64)) for g, t in zip(grads, tangents))
    # the floor: the terms' size as if every tangent were the largest, since a framework may mix
    # tangents before masking them (torch.maximum's J t is computed so: a tangent of 1e-38 beside
    # one of 1 is lost in float64, measured)
    biggest = max(float(np.max(np.abs(t))) for t in tangents)
    scale = sum(float(np.sum(np.abs(np.asarray(g, np.float64)))) for g in grads) * biggest
    # and at least the left side's terms and the inputs' magnitude: w in J's null space (softmax
    # with equal weights) sums to a rounding residue; a saturated derivative (1 - tanh^2) is
    # only as good as its inputs' rounding
    scale = max(scale, float(np.sum(np.abs(np.asarray(w, np.float64) * np.asarray(jt, np.float64)))),
                record.input_scale())  # fmt: skip
    dt = args[0].dtype  # summed in float64, held at the inputs' precision
    finite = np.all(np.isfinite(jt)) and all(np.all(np.isfinite(g)) for g in grads)
    if finite:  # an overflowed gradient (cosh(89) * 2) times a zero tangent has no inner product
        record.close(name="<w, J t> = <J^T w, t>", out=np.asarray(lhs, dt), ref=np.asarray(rhs, dt),
                     oracle="closed-form", tol=op.tol, scale=scale)  # fmt: skip
    tol, at = _model(op, args, tangents=tangents)
    for o in _oracles(op, oracles) if not _near_excluded(op, args) else ():
        ref = _orders(o, op, args, w, tangents, v, "jvp").jt
        record.close(name="J t", out=jt, ref=np.zeros_like(args[0]) if ref is None else ref, oracle=o.id,
                     tol=error.tolerance(op, "jt") if tol else op.tol, scale=at["jt"])  # fmt: skip


def second_order(subject, oracles, record, op, data):
    _usable(op, subject)
    _capable(op, "second")
    args, w, tangents, v = _operands(op, data)
    record.example(**{f"x{i}": a for i, a in enumerate(args)}, w=w, v=v)
    record.scale = "inputs"
    ran = _attempt(op, record, "second", lambda: _orders(subject, op, args, w, tangents, v, "second"))
    if ran is None:
        return
    _, grads, second = _zeros_for_none(args, ran.value, ran.grads, ran.second)
    for i, (h, a) in enumerate(zip(second, args)):
        cmp.check_dtype_and_shape(name=f"second{i}", out=h, ref=a, who=subject.id, oracle="its input")
    tol, at = _model(op, args, w=w, v=v)
    for o in _oracles(op, oracles) if not _near_excluded(op, args) else ():
        r = _orders(o, op, args, w, tangents, v, "second")
        _, rg, rs = _zeros_for_none(args, r.value, r.grads, r.second)
        for i, (g, r) in enumerate(zip(grads, rg)):
            record.close(name=f"grad{i}", out=g, ref=r, oracle=o.id, tol=tol or op.tol, scale=at[f"grad{i}"])
        for i, (h, r) in enumerate(zip(second, rs)):
            tol2 = error.tolerance(op, "second") if tol else op.tol
            record.close(name=f"second{i}", out=h, ref=r, oracle=o.id, tol=tol2, scale=at[f"second{i}"])


def _orders(runner, op, args, w, tangents, v, need):
    """``runner.orders`` of the entry's program: its reverse, forward and second-order rows (and
    the oracles) run one program per mode and dtype where the mode traces (issue 46)."""
    return runner.orders(op.program.of(runner), *args, cotangent=w, tangents=tangents, cotangent2=v, need=need)


def _model(op, args, *, w=None, v=None, tangents=None):
    """(tolerance, {quantity: per-element magnitudes}) of the error model (:mod:`suite.ops.error`)
    for an elementwise entry; ``(None, {quantity: None})`` for a mixing one (array-level floor)."""
    names = ["value", "jt", *(f"grad{i}" for i in range(op.arity)), *(f"second{i}" for i in range(op.arity))]
    if not op.elementwise:
        return None, dict.fromkeys(names)
    at = {"value": error.scales(op, "value", args)}
    if w is not None:
        at.update({f"grad{i}": error.scales(op, f"grad{i}", args, weights=w) for i in range(op.arity)})
    if tangents is not None:
        at["jt"] = error.scales(op, "jt", args, weights=tangents)
    if v is not None:
        at.update({f"second{i}": error.scales(op, f"second{i}", args, weights=w, weights2=v) for i in range(op.arity)})
    return error.tolerance(op), at


def _zeros_for_none(args, y, grads, second):
    """A second derivative that no input reaches is ``None`` in TensorFlow and PyTorch and zeros
    in JAX (a piecewise-linear op's): compared as zeros."""
    second = tuple(np.zeros_like(a) if h is None else h for h, a in zip(second, args))
    return y, grads, second


def special_points(subject, oracles, record, op, data):
    """Every point of the entry, as one example: the kind of the first argument's gradient, each
    point broadcast over the shape the entry's other rows use for the dtype."""
    _usable(op, subject)
    dtype = data.draw(st.sampled_from((np.float32, np.float64)), label="dtype")
    record.example(dtype=np.dtype(dtype).name)
    _, shape = _signature(op, dtype)
    for p in op.points:
        if np.dtype(dtype).name not in p.dtypes:
            continue
        args = tuple(np.broadcast_to(np.asarray(v, dtype), shape).copy() for v in p.at)
        zeros = np.zeros(shape, dtype)
        call = functools.partial(_orders, subject, op, args, np.ones(shape, dtype), (zeros,) * op.arity, zeros, "vjp")
        ran = _attempt(op, record, "reverse", call)
        if ran is None:  # a refusal the entry declares for the whole op
            continue
        y, grads, _, _ = ran
        record.check(op.expect, **{op.key(p): _kind(op, args, grads[0])})
        for prefix, _ in p.also:
            if prefix == "grad_y" and op.arity == 2:  # the second argument's gradient there (pow's d/dy)
                record.check(op.expect, **{op.also_key(prefix, p): ops.point_kind(grads[1])})
            elif prefix == "grad-accuracy":  # the gradient against the entry's closed form there
                ref = op.point_vjp(*(np.asarray(a, np.float64) for a in args), np.ones(shape))
                ulps = error.ulps(op)[np.dtype(dtype).name]
                record.check(op.expect, **{op.also_key(prefix, p): ops.accuracy(grads[0], ref, ulps=ulps)})
        if p.value:
            ref = op.reference(*(np.asarray(a, np.float64) for a in args))
            record.check(op.expect, **{op.value_key(p): ops.accuracy(y, ref)})


def _signature(op, dtype) -> tuple:
    """(dtype, shape) of the entry's signature for ``dtype``: the one its anchors and ci draws of
    that dtype use (:func:`suite.strategies.one_per_dtype`), or its first where it is drawn in
    another dtype only. Special points are broadcast over its shape, so they call the programs
    the other rows compiled instead of compiling their own (issue 46); every element is the
    point, so the kind observed is the same at any shape."""
    menu = ss.one_per_dtype(op.pairs or PAIRS)
    return next(((d, s) for d, s in menu if d == np.dtype(dtype)), menu[0])


def _kind(op, args, g) -> str:
    """The kind of the first argument's gradient at a special point: its value class
    (:func:`suite.ops.point_kind`), or for an entry with ``sides`` which one-sided derivative
    of the reference each element is (:func:`suite.ops.side_kind`, summarised)."""
    if not op.sides:
        return ops.point_kind(g)
    a64 = [np.asarray(a, np.float64) for a in args]
    left, right = (finite_diff.vjp(op.reference, *a64, side=side)[0] for side in ("left", "right"))
    g = np.ravel(np.asarray(g, np.float64))
    return ops.summary(ops.side_kind(v, lo, hi) for v, lo, hi in zip(g, np.ravel(left), np.ravel(right)))


PROPERTIES = {
    "test_op_reverse_mode": reverse_mode,
    "test_op_forward_mode": forward_mode,
    "test_op_second_order": second_order,
    "test_op_special_points": special_points,
}


def bind(namespace: dict, behaviour: str) -> list[str]:
    """Add the generic tests over ``behaviour``'s entries to a case module's namespace (none
    when it has no entries); returns their names."""
    entries = ops.entries(behaviour)
    if not entries:
        return []
    names = []
    for name, prop in PROPERTIES.items():
        chosen = [op for op in entries if name != "test_op_special_points" or op.points]
        if not chosen:
            continue
        test = _make(prop, name, namespace.get("__name__", "?"))
        namespace[name] = pytest.mark.parametrize("op", chosen, ids=[op.name for op in chosen])(test)
        names.append(name)
    return names


def _make(prop, name, module):
    @given(data=st.data())
    def test(subject, oracles, record, op, data):
        prop(subject, oracles, record, op, data)

    if prop is not special_points:  # the special points are explicit already
        for anchor in reversed(ANCHORS):
            test = example(data=anchor)(test)

    test.__name__ = test.__qualname__ = name
    test.__module__ = module
    test.__doc__ = prop.__doc__ or __doc__.split("\n\n")[1]
    return test
