"""At, near and away from a point: an op-table entry where its derivative is undefined.

Where an op has no derivative (sqrt, log and log1p at their boundary, acos and asin at +-1, x**p
at 0, a norm at the zero vector, the std of a constant row, atan2 at the origin) or is defined
piecewise (xlogy at x = 0), each framework still answers a number there. Each example of this
property mixes elements (a reduction's: rows) exactly on the entry's points, near them (:data:`NEAR`,
on every side where the op is defined) and away from them (at least :data:`FAR`), and holds

- on a point, the gradient over the upstream gradient to the kind the entry declares
  (:func:`suite.ops.point_kind`: ``+inf``, ``nan``, ``zero``, its value, a closed form it equals);
- near the points (at :data:`NEAR_TOL`: the derivative's condition grows like 1/distance) and
  away from them (at ``GRAD``), value and gradients to the entry's float64 closed forms, to the
  oracles that have the op and (float64, away) to central differences of its reference;
- exactly on each point alone (upstream gradient 1 there, 0 elsewhere), which one-sided
  difference quotient of the framework's own forward pass the gradient is (:func:`side`).

One property per family, called by a behaviour's tests as ``prop(subject, oracles, record, op,
data)``, its keys the entry's (``Point(..., also=(("side", kind),))`` declares the side):

- :func:`unary`: a one-argument elementwise op, points ``Point(name, (x,), kind)`` (-0.0 and
  0.0 distinct); keys ``grad[<op>@<point>]`` and ``side[...]``;
- :func:`second_derivative`: the derivative of the framework's own f' (:func:`first_derivative`) at the
  points that ask for it (``also=(("grad2", kind),)``); keys ``grad2[...]``;
- :func:`higher_derivatives`: the 3rd to ``op.order``-th derivatives by nested differentiation
  (``Runner.derivative``) at the points that ask for them (``also=(("grad3", kind), ...)``); keys
  ``grad3[...]`` ...;
- :func:`binary`: a two-argument op whose points are configurations (an argument a value or
  ranges, ``Point.near`` the directions it may move off), its argument names, regular ranges and
  named closed forms in :class:`Around`; keys ``d<arg>[...]`` and ``side_d<arg>[...]``;
- :func:`reduction`: an op over the last axis whose points are rows (:data:`ROWS`); keys
  ``grad[...]`` and ``side[...]``;

and :func:`one_sided` for the sides of an entry of any of them.
"""

from __future__ import annotations

import dataclasses
from typing import Callable

import numpy as np
from hypothesis import strategies as st

from suite import compare as cmp, finite_diff, ops, strategies as ss
from suite.expectations import Raises
from suite.frameworks.tf_runner import in_v1_graph
from suite.program import Program

#: How far from a point an element is "near" (on each side where the op is defined), and how far
#: a regular one is at least
NEAR = (1e-4, 1e-1)
FAR = 0.25
# Near a singular point the derivative's condition number grows like 1/distance: at 1e-4
# (float32) acos' = -1/sqrt(1 - x*x) loses ~3e-4 to the cancellation in 1 - x*x.
NEAR_TOL = cmp.tolerance(float32=1e-3, float64=1e-9)

# One shape per family (XLA and jax.jit compile per shape); reductions need a one-element axis too.
ELEMENT_SHAPES = ((2, 3),)
PAIR_SHAPES = ((2, 4),)
ROW_SHAPES = ((3, 4), (3, 1))
#: A reduction's singular rows, each as it is checked alone (row 0 of ROW_SHAPES): the zero
#: vector (a norm's point), a constant row and a one-element row (a deviation's)
ROWS = {"x=0": (0.0,) * 4, "constant": (2.0,) * 4, "one-element": (2.0,)}


@dataclasses.dataclass(frozen=True)
class Around:
    """What the property needs of an entry (its ``around``) beyond its points: ``args``, a binary
    op's argument names in its keys (atan2 takes ``("y", "x")``); ``regular``: per argument, the
    ranges ((lo, hi), ...) its regular elements are drawn from, away from every configuration (a
    unary op's are its float64 domain, :data:`FAR` from every point); ``named``: (name, closed
    form of the second argument) a first-argument gradient at a point may equal (xlogy's
    ``log(y)``); ``cancels(x, w)``: a reduction's terms that cancel in its gradient, the floor of
    its comparisons (None: the array-level floor)."""

    args: tuple = ()
    regular: tuple = ()
    named: tuple = ()
    cancels: Callable | None = None


def _around(op) -> Around:
    return op.around or Around()


@dataclasses.dataclass(frozen=True)
class Config:
    """A binary op's configuration (a point where an argument may be drawn from ranges): each
    argument exactly a value (a float) or drawn from ranges ((lo, hi), ...); ``near``: per
    argument, the signs it may move off its fixed value and stay where the op is defined;
    ``kinds``: what every framework answers there by default, (d/d first argument, d/d second,
    which side each is)."""

    label: str
    a: object
    b: object
    near: tuple = ((1, -1), ())
    kinds: tuple = ()

    def point(self, name: str, args: tuple) -> ops.Point:
        """The configuration as a point of the binary entry ``name`` whose arguments are ``args``:
        keys ``d<arg>[<name>@<label>]`` and ``side_d<arg>[...]``.

        >>> p = Config("x=0,y=0", 0.0, 0.0, kinds=("nan", "zero", "neither", "both")).point("pow", ("x", "y"))
        >>> p.key, p.also
        ('dx[pow@x=0,y=0]', (('dy', 'zero'), ('side_dx', 'neither'), ('side_dy', 'both')))
        """
        a, b = args
        also = ((f"d{b}", self.kinds[1]), (f"side_d{a}", self.kinds[2]), (f"side_d{b}", self.kinds[3]))
        return ops.Point(self.label, (self.a, self.b), self.kinds[0], key=f"d{a}[{name}@{self.label}]", also=also,
                         near=self.near)  # fmt: skip


def label(p: float) -> str:
    """A point's name from its value: ``-0`` for -0.0, else ``%g``.

    >>> label(-0.0), label(0.5), label(-1.0)
    ('-0', '0.5', '-1')
    """
    return "-0" if p == 0 and np.signbit(p) else f"{p:g}"


def gradient_keys(op) -> list[str]:
    """The gradient keys of every point of ``op``, per argument of a binary op."""
    args = _around(op).args
    if not args:
        return [op.key(p) for p in op.points]
    return [op.also_key(f"d{a}", p) for p in op.points for a in args]


def _raises(op, prefix: str, runner) -> bool:
    """Does ``op`` declare that ``runner`` raises for ``prefix`` at one of its points?"""
    keys = [op.also_key(prefix, p) for p in op.points if any(k == prefix for k, _ in p.also)]
    return any(isinstance(op.expect.lookup(k, runner)[0], Raises) for k in keys)


_FIRST: dict = {}


def first_derivative(op) -> type:
    """A program of f'(x) for the unary entry ``op``, by the framework's own reverse mode (a tape,
    ``tf.gradients`` in a v1 graph, ``jax.grad``, ``create_graph``), to be differentiated again:
    one class per entry, so each mode traces it once."""
    if id(op) in _FIRST and _FIRST[id(op)][0] is op:
        return _FIRST[id(op)][1]
    f = op.program

    def tensorflow(tf, x):
        if in_v1_graph():
            return tf.gradients(f.tensorflow(tf, x), x)[0]
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = f.tensorflow(tf, x)
        return tape.gradient(y, x)

    def jax(jax, x):
        return jax.grad(lambda x: jax.numpy.sum(f.jax(jax, x)))(x)

    def torch(torch, x):
        return torch.autograd.grad(f.torch(torch, x).sum(), x, create_graph=True)[0]

    spellings = {fw: fn for fw, fn in (("tensorflow", tensorflow), ("jax", jax), ("torch", torch)) if op.spelled(fw)}
    program = type(f"FirstDerivative_{op.name}", (Program,), {"__doc__": f"d/dx {op.name}", **spellings})
    _FIRST[id(op)] = (op, program)
    return program


# ---------------------------------------------------------------- the comparisons
def close_off_singular(record, *, name, out, ref, tags, oracle, scale=None):
    """``out`` against ``ref`` near the points (NEAR_TOL) and away from them (GRAD); on them each
    framework's own answer is an observation, not a comparison. ``scale``: per element, the size
    of the terms that cancel to ``ref`` (sets the absolute floor)."""
    out, ref = np.asarray(out), np.asarray(ref)
    for where, tol in (("near", NEAR_TOL), ("regular", cmp.GRAD)):
        on = tags == where
        if on.any():
            s = None if scale is None else float(np.max(np.broadcast_to(scale, out.shape)[on]))
            record.close(name=f"{name}[{where}]", out=out[on], ref=ref[on], oracle=oracle, tol=tol, scale=s)


def hold(record, oracles, *, op, program, arrays, w, tags, out, grads, names, f, vjp, value=None, named=None,
         scale=None):  # fmt: skip
    """The property every family shares, given the subject's ``out`` and ``grads``: on each
    point (``tags`` names it per element, or per row) the kind of each gradient over ``w``
    (``{names[i]}[{op}@{point}]``) is declared; near the points and away from them, value and
    gradients equal the closed forms ``f``/``vjp`` (float64) and the oracles that have
    ``program``, and (float64, away from them) central differences of ``f``. ``value``: the
    closed form of ``out`` when it is not ``f`` but a first derivative (``d1``), compared off the
    points only."""
    dtype, as64 = arrays[0].dtype, [a.astype(np.float64) for a in arrays]
    whole = value is None
    if whole:
        record.close(name="value", out=out, ref=f(*as64).astype(dtype), oracle="closed-form", tol=cmp.VALUE)
    else:
        close_off_singular(record, name="d1", out=out, ref=value(*as64).astype(dtype), tags=tags, oracle="closed-form",
                           scale=scale)  # fmt: skip
    refs = vjp(*as64, w)
    for i, (name, g, ref) in enumerate(zip(names, grads, refs)):
        g = np.asarray(g, np.float64)
        d = g / (w if w.ndim == g.ndim else w[..., None])
        _check_kinds(record, op, name, d, tags, named if i == 0 else None)
        close_off_singular(record, name=name, out=grads[i], ref=ref.astype(dtype), tags=tags, oracle="closed-form",
                           scale=scale)  # fmt: skip
    have = [o for o in oracles if o.framework in program.frameworks()]
    raws = record.against(have, program, *arrays, cotangent=w, got={"value": out} if whole else {}, tol=cmp.VALUE)
    for o, (ref_out, ref_grads) in zip(have, raws):
        if not whole:
            close_off_singular(record, name="d1", out=out, ref=ref_out, tags=tags, oracle=o.id, scale=scale)
        for name, g, ref in zip(names, grads, ref_grads):
            close_off_singular(record, name=name, out=g, ref=ref, tags=tags, oracle=o.id, scale=scale)
    if dtype == np.float64:
        _against_differences(record, f, as64, w, tags, names, grads)


def _check_kinds(record, op, name, d, tags, named, asking=None) -> None:
    """The declared kind of the derivative ``d`` at each point ``tags`` names (against the
    closed forms ``named`` where given); ``asking``: only at these points."""
    points = {p.name: p for p in op.points}
    for at in dict.fromkeys(t for t in tags.ravel() if t not in ("near", "regular")):
        if asking is not None and at not in asking:
            continue
        on = tags == at
        ref_named = {k: v[on] for k, v in (named or {}).items()}
        record.check(op.expect, **{op.also_key(name, points[at]): ops.point_kind(d[on], ref_named)})


def _against_differences(record, f, as64, w, tags, names, grads) -> None:
    """Away from the points (float64), each gradient against central differences of ``f``."""
    regular = tags == "regular"
    if not regular.any():
        return
    sub = [a[regular] for a in as64]
    fds = finite_diff.vjp(f, *sub, cotangent=w[regular])
    for name, g, fd in zip(names, grads, fds):
        record.close(name=f"{name}[regular]", out=g[regular], ref=fd, oracle="finite-difference",
                     tol=cmp.FINITE_DIFF, scale=np.max(np.abs(f(*sub) * w[regular])))  # fmt: skip


def side(g, f, arrays, i) -> str:
    """Which one-sided difference quotient of ``f`` in ``arrays[i]`` (float64) each gradient entry
    ``g`` equals: ``left``, ``right``, ``both`` or ``neither`` (``mixed:...`` when entries differ;
    :mod:`suite.kinds`).
    A side's limit is its quotient at finite_diff's step; +-inf where the quotient is infinite
    or grows without bound as the step shrinks 100-fold; NaN where f is undefined there.
    Agreement allows the quotient's own change between the two steps.

    >>> sqrt = ops.db.quiet(np.sqrt)  # NaN left of 0
    >>> side(np.array([0.5]), sqrt, [np.array([1.0])], 0), side(np.array([np.inf]), sqrt, [np.array([0.0])], 0)
    ('both', 'right')
    """
    g = np.ravel(g).astype(np.float64)
    hits = [set() for _ in g]
    for where in ("left", "right"):
        steps = (finite_diff.ONE_SIDED_STEP, finite_diff.ONE_SIDED_STEP / 100)
        q1, q2 = (finite_diff.vjp(f, *arrays, side=where, eps=h)[i].ravel() for h in steps)
        for j, (v, a, b) in enumerate(zip(g, q1, q2)):
            lim = np.copysign(np.inf, b) if np.isfinite(b) and abs(b) > max(1e3, 5 * abs(a)) else a
            if np.isinf(v) or np.isinf(lim):
                close = v == lim
            else:
                close = abs(v - lim) <= max(finite_diff.ONE_SIDED_TOL * max(1.0, abs(lim)), 2 * abs(a - b))
            if close:
                hits[j].add(where)
    words = {"both" if len(h) == 2 else h.pop() if h else "neither" for h in hits}
    return words.pop() if len(words) == 1 else "mixed:" + ",".join(sorted(words))


# ---------------------------------------------------------------- strategies
@ss.cached
def _floats(lo, hi):
    """Float32-representable values, so a float32 and a float64 draw hold the same numbers."""
    lo, hi = float(np.float32(lo)), float(np.float32(hi))
    return ss.floats(np.float32, lo, hi)


@ss.cached
def _values(spec):
    return st.just(spec) if isinstance(spec, float) else st.one_of(*(_floats(lo, hi) for lo, hi in spec))


def _at(op) -> tuple:
    """The points of a unary entry (-0.0 and 0.0 distinct)."""
    return tuple(p.at[0] for p in op.points)


@ss.cached
def _elements(domain, points):
    """An element of x: on a point, near one on a side where f is real, or regular."""
    lo, hi = domain
    sides = [(p, s) for p in points for s in (1, -1) if lo <= p + s * NEAR[1] <= hi]
    near = st.sampled_from(sides).flatmap(lambda ps: _floats(*NEAR).map(lambda e: ps[0] + ps[1] * e))
    regular = _floats(lo, hi).filter(lambda v: min(abs(v - p) for p in points) >= FAR)
    return st.one_of(st.sampled_from(points), near, regular)


@st.composite
def unary_inputs(draw, op):
    """(x, tags, w): x's first elements are the points, the others on them, near them on every
    side where f is real, or at least FAR away; ``tags``: each element's point, ``near`` or
    ``regular``."""
    d, shape = draw(ss.float_dtypes()), draw(ss.choice(ELEMENT_SHAPES), label="shape")
    points = _at(op)
    element = _elements(op.domain["float64"], points)
    x = np.array([*points, *(draw(element, label="x") for _ in range(np.prod(shape) - len(points)))], d)
    dist = np.min([np.abs(x.astype(np.float64) - p) for p in points], axis=0)
    at = [next(p.name for p in op.points if v == p.at[0] and np.signbit(v) == np.signbit(p.at[0])) if v in points
          else "near" if e < FAR else "regular" for v, e in zip(x, dist)]  # fmt: skip
    return x.reshape(shape), np.array(at).reshape(shape), draw(ss.cotangents(shape, d))


@st.composite
def binary_inputs(draw, op):
    """(a, b, tags, w): one element per configuration first, then configurations, elements near
    them (a fixed argument moved NEAR off where the op is defined) and regular ones."""
    d, shape = draw(ss.float_dtypes()), draw(ss.choice(PAIR_SHAPES), label="shape")
    configs, regular = op.points, _around(op).regular
    movable = [c for c in configs if any(c.near)]

    def entry(i):
        how = "at" if i < len(configs) else draw(ss.choice(("at", "near", "regular")))
        if how == "regular" or (how == "near" and not movable):
            return (*(draw(_values(r)) for r in regular), "regular")
        c = configs[i] if i < len(configs) else draw(ss.choice(configs if how == "at" else movable))
        ab = [draw(_values(c.at[0])), draw(_values(c.at[1]))]
        for k, signs in enumerate(c.near if how == "near" else ()):
            if signs:
                ab[k] += draw(ss.choice(signs)) * draw(_floats(*NEAR))
        return (*ab, c.name if how == "at" else "near")

    a, b, tags = zip(*(entry(i) for i in range(int(np.prod(shape)))))
    return (*(np.array(v, d).reshape(shape) for v in (a, b)), np.array(tags).reshape(shape),
            draw(ss.cotangents(shape, d)))  # fmt: skip


ZERO = st.just(0.0)


def _constant_rows(op) -> bool:
    """Are the entry's singular rows constants (a deviation's), not the zero vector (a norm's)?"""
    return any(np.any(np.asarray(p.at[0]) != 0) for p in op.points)


@st.composite
def reduction_inputs(draw, op):
    """(x, tags, w): rows c + s * v with v = +-(1, -1, u...) (std >= 0.7 s): the first row singular
    (s = 0: the zero vector, or a constant c where the entry's rows are constants), the others
    singular, near (s = 1e-4..1e-1, from 1e-2 for constants, whose deviations lose |c| * eps to
    the mean) or regular (0.5..4); ``tags`` per row: the point whose row has the drawn length
    (else the first), ``near`` or ``regular``; ``w`` of the output's shape."""
    d, (rows, n) = draw(ss.dtypes_and_shapes(shapes=ROW_SHAPES), label="dtype, shape")
    constant = _constant_rows(op)
    x = np.zeros((rows, n))
    for r in range(rows):
        c = draw(ss.either(ZERO, _floats(-2.0, 2.0)), label="c") if constant and n > 1 else 0.0
        v = np.array([1.0, -1.0, *(draw(_floats(-1.0, 1.0)) for _ in range(n - 2))][:n]) * draw(ss.choice((1, -1)))
        near = _floats(1e-2 if constant else NEAR[0], NEAR[1])
        x[r] = c + (0.0 if r == 0 else draw(ss.either(ZERO, near, _floats(0.5, 4.0)), label="s")) * v
    dist = x.std(-1) if constant else np.linalg.norm(x, axis=-1)
    at = next((p.name for p in op.points if len(p.at[0]) == n), op.points[0].name)
    tags = np.where(dist == 0, at, np.where(dist < FAR, "near", "regular"))
    return x.astype(d), tags, draw(ss.cotangents(np.shape(op.reference(x)), d))


# ---------------------------------------------------------------- the properties
def unary(subject, oracles, record, op, data):
    """At each point of a unary entry (and -0): the gradient over the upstream gradient is the
    declared kind; near the point and away from it, f'(x) * w, the oracles' and (float64)
    central differences."""
    df = op.derivatives[0]
    x, tags, w = data.draw(unary_inputs(op), label="x, tags, w")
    record.example(x=x, w=w, op=op.name)
    out, grads = subject.vjp(op.program.of(subject), x, cotangent=w)
    # f'(x) w per element, relative to itself (a product: no cancellation)
    hold(record, oracles, op=op, program=op.program, arrays=[x], w=w, tags=tags, out=out, grads=grads,
         names=["grad"], f=op.reference, vjp=lambda x, w: [df(x) * w], scale=0.0)  # fmt: skip


def second_derivative(subject, oracles, record, op, data):
    """d/dx of the framework's own f'(x) (:func:`first_derivative`): the declared kind at each
    point; f''(x) * w near and away from it. Where a framework raises (declared), so does its row,
    and that framework is no oracle."""
    df, d2f = op.derivatives[:2]
    x, tags, w = data.draw(unary_inputs(op), label="x, tags, w")
    record.example(x=x, w=w, op=op.name)
    program = first_derivative(op)
    try:
        d1, grads = subject.vjp(program.of(subject), x, cotangent=w)
    except Exception as e:  # PyTorch: x**0's first derivative is a constant with no graph
        record.check(op.expect, **{op.also_key("grad2", p): cmp.error_name(e) for p in op.points})
        return
    good = [o for o in oracles if not _raises(op, "grad2", o)]
    # f'(x) and f''(x) w per element, relative to themselves (products and quotients of x)
    hold(record, good, op=op, program=program, arrays=[x], w=w, tags=tags, out=d1, grads=grads, names=["grad2"],
         f=df, value=df, vjp=lambda x, w: [d2f(x) * w], scale=0.0)  # fmt: skip


def higher_orders(op) -> list[int]:
    """The orders above 2, up to the unary entry's ``order``, that one of its points asks for
    (``also=(("grad3", kind), ...)``)."""
    return [k for k in range(3, op.order + 1) if op.has(f"grad{k}")]


def higher_derivatives(subject, oracles, record, op, data):
    """The k-th derivative (k = 3 .. ``op.order``, :func:`higher_orders`) by nested
    differentiation of the sum (:meth:`Runner.derivative`: nested tapes, ``tf.gradients`` in a v1
    graph, nested ``jax.grad``, ``create_graph``): the declared kind at each point that asks for it
    (``grad<k>[...]``); near and away from the points the float64 closed form
    ``op.derivatives[k - 1]``, the oracles that have the op and (float64, away) central differences
    of the (k-1)-th. Where a framework raises, the error is the observation at every point that
    asks, and (declared) that framework is no oracle for that order."""
    x, tags, _ = data.draw(unary_inputs(op), label="x, tags, w")
    record.example(x=x, op=op.name)
    as64 = x.astype(np.float64)
    for k in higher_orders(op):
        name = f"grad{k}"
        asking = [p for p in op.points if any(prefix == name for prefix, _ in p.also)]
        g, err = subject.attempt("derivative", op.program.of(subject), x, order=k, remember=cmp.xla_refusal)
        if err is not None:
            record.check(op.expect, **{op.also_key(name, p): err for p in asking})
            continue
        _check_kinds(record, op, name, np.asarray(g, np.float64), tags, None, {p.name for p in asking})
        # per element, relative to itself (scale 0.0), as the second derivative is held
        ref = op.derivatives[k - 1](as64)
        close_off_singular(record, name=name, out=g, ref=ref.astype(x.dtype), tags=tags, oracle="closed-form",
                           scale=0.0)  # fmt: skip
        for o in oracles:
            if not op.spelled(o.framework) or _raises(op, name, o):
                continue
            r, raised = o.attempt("derivative", op.program.of(o), x, order=k, remember=cmp.xla_refusal)
            if raised is None:  # else its own row checks the error
                close_off_singular(record, name=name, out=g, ref=r, tags=tags, oracle=o.id, scale=0.0)
        if x.dtype == np.float64:
            _against_differences(record, op.derivatives[k - 2], [as64], np.ones_like(as64), tags, [name], [g])


def binary(subject, oracles, record, op, data):
    """Both arguments' gradients at each configuration of a binary entry are the declared kinds;
    near them and away from them, the closed form, the oracles and central differences."""
    around, (grads_of,) = _around(op), op.derivatives
    a, b, tags, w = data.draw(binary_inputs(op), label="a, b, tags, w")
    record.example(**{around.args[0]: a, around.args[1]: b, "w": w, "op": op.name})
    if not op.spelled(subject.framework):
        record.check(op.expect, **{k: "unavailable" for k in gradient_keys(op)})
        return
    out, grads = subject.vjp(op.program.of(subject), a, b, cotangent=w)
    named = {k: fn(b) for k, fn in around.named}
    # each partial per element, relative to itself: products and quotients
    hold(record, oracles, op=op, program=op.program, arrays=[a, b], w=w, tags=tags, out=out, grads=grads,
         names=[f"d{arg}" for arg in around.args], f=op.reference, named=named,
         vjp=lambda a, b, w: [g * w for g in grads_of(a, b)], scale=0.0)  # fmt: skip


def reduction(subject, oracles, record, op, data):
    """At each singular row of a reduction entry: the declared kind; near and away from it, the
    closed form, the oracles and central differences."""
    (vjp,) = op.derivatives
    x, tags, w = data.draw(reduction_inputs(op), label="x, tags, w")
    record.example(x=x, w=w, op=op.name)
    if not op.spelled(subject.framework):
        record.check(op.expect, **{op.key(p): "unavailable" for p in op.points})
        return
    out, grads = subject.vjp(op.program.of(subject), x, cotangent=w)
    cancels = _around(op).cancels
    scale = None if cancels is None else cancels(x, w)
    hold(record, oracles, op=op, program=op.program, arrays=[x], w=w, tags=tags, out=out, grads=grads,
         names=["grad"], f=op.reference, vjp=lambda x, w: [vjp(x, w)], scale=scale)  # fmt: skip


# ---------------------------------------------------------------- one point alone
@dataclasses.dataclass(frozen=True)
class Edge:
    """One point of an entry and one argument (``i``) of its program, in float64: the gradient's
    ``key`` and its ``side`` key there, the point's own ``arrays`` (one element, or one row),
    placed at ``at`` in ``padded`` arrays of the shapes the properties draw, whose other
    elements (rows) are regular. The upstream gradient ``w`` is 1 at the point and 0 elsewhere,
    so the gradient there is the one of the point alone; running the property's own signature
    reuses what the compiled modes built for it (a signature of the point's own would be traced
    and compiled once more per op)."""

    key: str
    side: str
    arrays: list
    i: int
    named: dict
    padded: list
    at: tuple
    w: np.ndarray

    def embed(self, *arrays):
        out = [p.copy() for p in self.padded]
        for o, a in zip(out, arrays):
            o[self.at] = a
        return out

    def run(self, subject, fn, *arrays):
        """(value, gradients) at the point, through the padded signature."""
        y, grads = subject.vjp(fn, *self.embed(*arrays), cotangent=self.w)
        return np.asarray(y)[self.at], [None if g is None else np.asarray(g)[self.at] for g in grads]


def _regular(op):
    """An element where the unary ``op``'s f and f' are finite, FAR from every point."""
    lo, hi = op.domain["float64"]

    def fits(c):
        with np.errstate(all="ignore"):
            c1 = np.array([c])
            finite = np.isfinite(op.reference(c1)).all() and np.isfinite(op.derivatives[0](c1)).all()
        return lo <= c <= hi and min(abs(c - p) for p in _at(op)) >= FAR and finite

    return next(c for c in (0.5, 2.0, -0.5, -2.0) if fits(c))


def _one_hot(shape, at):
    w = np.zeros(shape)
    w[at] = 1.0
    return w


def _representative(p) -> list:
    """One float64 element of a configuration (a range's midpoint), per argument."""
    return [np.array([v if isinstance(v, float) else sum(v[0]) / 2]) for v in p.at]


def edge_points(op) -> list[Edge]:
    """Per point and argument of ``op`` (one point each: an infinite value elsewhere would swamp
    the sums the differences take), in the float64 signature of its property."""
    first = (0, slice(0, 1))  # the point is element [0, 0] of the property's (rows, columns)
    if op.arity == 2:
        around, (shape,) = _around(op), PAIR_SHAPES
        padded = [np.full(shape, float(np.mean(r[-1]))) for r in around.regular]
        w = _one_hot(shape, first)
        return [Edge(op.also_key(f"d{arg}", p), op.also_key(f"side_d{arg}", p), _representative(p), i,
                     {k: fn(_representative(p)[1]) for k, fn in around.named} if i == 0 else {}, padded, first, w)
                for p in op.points for i, arg in enumerate(around.args)]  # fmt: skip
    if op.elementwise:
        (shape,) = ELEMENT_SHAPES
        padded, w = [np.full(shape, _regular(op))], _one_hot(shape, first)
        return [Edge(op.key(p), op.also_key("side", p), [np.array(p.at)], 0, {}, padded, first, w) for p in op.points]
    regular = {4: [1.0, -1.0, 0.5, 2.0], 1: [1.5]}  # rows 1 and 2
    edges = []
    for p in op.points:
        row = np.array(p.at)
        shape = next(s for s in ROW_SHAPES if s[1] == row.shape[1])
        padded = [np.array([p.at[0], *[regular[shape[1]]] * (shape[0] - 1)])]
        w = _one_hot(np.shape(op.reference(padded[0])), slice(0, 1))
        edges.append(Edge(op.key(p), op.also_key("side", p), [row], 0, {}, padded, slice(0, 1), w))
    return edges


def one_sided(subject, record, op, dtype):
    """Float64, exactly at each point of ``op`` (upstream gradient 1): the gradient's kind, and
    which one-sided difference quotient of the framework's own forward pass it equals."""
    record.example(op=op.name, dtype=dtype)
    for e in edge_points(op):
        if not op.spelled(subject.framework):
            record.check(op.expect, **{e.key: "unavailable", e.side: "unavailable"})
            continue
        fn = op.program.of(subject)
        g = e.run(subject, fn, *e.arrays)[1][e.i]
        record.check(op.expect, **{e.key: ops.point_kind(g, e.named)})
        record.check(op.expect, **{e.side: side(g, lambda *a: e.run(subject, fn, *a)[0], e.arrays, e.i)})
