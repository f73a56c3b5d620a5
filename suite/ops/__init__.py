"""The op table: one entry per op and behaviour, and generic gradient properties run over every entry.

An entry says everything the suite needs to test an op's derivative in every TensorFlow mode
against JAX, PyTorch and float64 references: its spellings, a float64 reference, its input
domain per dtype (bounds wide enough to reach where float32 saturates or underflows), its
special points (singular points, kinks, ties, boundaries) with the kind each framework
answers there (declarations with reason, link and version range, as elsewhere), its
capabilities and its tolerance. The op's own facts (spellings, reference, closed-form
derivatives) are written once, in the op database (:mod:`suite.ops.db`); a behaviour takes the
op by name and adds what it is about (:func:`view`). A behaviour module binds the generic
properties to its entries (:func:`suite.ops.properties.bind`); its rows are reported under
that behaviour::

    TANH = ops.view("activation-gradients", "tanh", domain={"float32": (-20.0, 20.0), "float64": (-40.0, 40.0)})

An op only one behaviour asks about, and that the database does not hold, may be entered
whole with :func:`register` (``Op(name, behaviour=..., tensorflow=..., jax=..., torch=...,
reference=...)``).

>>> op = Op("square", behaviour="demo", tensorflow=lambda tf, x: x * x, jax=lambda jax, x: x * x,
...         torch=None, absent={"torch": ("no spelling here", "https://example.org")}, reference=np.square)
>>> op.program.of("jax")(None, 3.0), op.spelled("torch")
(9.0, False)
>>> op.keys()
[]
>>> op = register(Op("magnitude", behaviour="demo", tensorflow=abs, jax=abs, torch=abs,
...                  points=(Point("0", (0.0,), "zero"),)))
>>> op.keys(), op.expect.lookup("grad[magnitude@0]", None)
(['grad[magnitude@0]'], ('zero', None))
>>> op = view("demo", "sqrt", points=(Point("0", (0.0,), "+inf", also=(("side", "right"), ("grad2", "-inf"))),))
>>> op.keys(), op.has("grad2"), op.expect.lookup("side[sqrt@0]", None)
(['grad[sqrt@0]', 'side[sqrt@0]', 'grad2[sqrt@0]'], True, ('right', None))

An entry is held to its ``order``-th derivative (JAX's ``check_grads(order=)``; 2 by default):
a point asks for the k-th one's kind with ``("grad<k>", kind)``, k up to the order::

>>> view("demo", "sqrt", points=(Point("0", (0.0,), "+inf", also=(("grad3", "+inf"),)),))
Traceback (most recent call last):
...
ValueError: op sqrt: a point observes grad3, above its order 2 (order=3 holds it)
"""

from __future__ import annotations

import dataclasses
import sys
from typing import Callable

import numpy as np

from suite import compare as cmp, finite_diff, registry
from suite.expectations import Expectations, expect, raises
from suite.ops import db
from suite.ops.db import resolve, spelling  # noqa: F401  (the entries' vocabulary)
from suite.ops.error import ULPS, Terms  # noqa: F401  (the entries' vocabulary)
from suite.program import Program

#: What an entry can be asked for; an op that lacks one says so and the property is not run.
CAPABILITIES = frozenset({"forward", "second", "xla", "graph", "gpu"})

_TABLE: dict[tuple[str, str], "Op"] = {}


@dataclasses.dataclass(frozen=True)
class Point:
    """A special point: the arguments there (one value per argument, broadcast to the drawn
    shape) and the kind every framework answers by default (``zero``, ``nan``, ``+inf``,
    ``-inf``, a number such as ``1`` or ``0.5``); declarations in the entry say where a
    framework answers otherwise."""

    name: str
    at: tuple
    kind: str
    #: the value's accuracy there (``exact``: within the dtype's value tolerance of the float64
    #: reference, else ``rel-err~1e-08``, the error's order), when the point is about the value
    value: str | None = None
    #: the dtypes it is evaluated in (a precision that shows in one dtype only)
    dtypes: tuple = ("float32", "float64")
    #: the observation key, where a behaviour keeps its own (``relu@0``); else ``grad[<op>@<name>]``
    key: str | None = None
    #: further observations at the point a behaviour's own properties make, ((prefix, kind), ...):
    #: each one's key is ``<prefix>[<op>@<name>]`` (``side``: which one-sided difference the
    #: gradient is; ``grad2``: the second derivative's kind, ``grad3`` ... up to the entry's
    #: ``order`` the higher ones'; ``grad-accuracy``: the first
    #: argument's gradient against the entry's ``point_vjp``, ``exact`` or ``rel-err~<order>``,
    #: where a kind alone cannot tell a finite wrong gradient from the right one), its kind the default
    also: tuple = ()
    #: per argument, the directions (1, -1) the at/near/away property (:mod:`suite.ops.points`)
    #: may move it off ``at`` and stay where the op is defined: a binary op's configuration, whose
    #: ``at`` may give an argument as ranges ((lo, hi), ...) drawn from instead of one value
    near: tuple = ()


@dataclasses.dataclass(frozen=True)
class Op:
    """One op. ``tensorflow``/``jax``/``torch``: ``fn(module, *xs)`` or a dotted path under the
    module (``"math.tanh"``, ``"numpy.tanh"``, ``"special.expit"``: :func:`spelling`), or None with
    the reason and a link in ``absent``; ``reference``: the float64 NumPy function; ``domain``: per dtype name,
    the (low, high) bounds of every argument's values; ``points``: the special points;
    ``declared``: where a framework answers otherwise at a point (``expect("grad[<name>@<point>]",
    ...)`` with reason, link and version range);
    ``excluded``: where the derivative is undefined, values or ``f(*args, margin) -> bool array``
    (within ``margin`` of them the gradients are compared only at the special points);
    ``sides``: the kind at a special point is which one-sided derivative of the reference the
    gradient is (:func:`side_kind`: ``left``, ``right``, ``mean``, ``both``, else its value kind),
    as at a kink, instead of its value (:func:`point_kind`);
    ``capabilities``: a subset of :data:`CAPABILITIES`, each one left out named in ``absent``
    with its reason and link; ``pairs``: the (dtype, shape) menu of the drawn inputs (default
    :data:`suite.ops.properties.PAIRS`; an op over the last axis leaves out scalars)."""

    name: str
    behaviour: str
    tensorflow: Callable | None = None
    jax: Callable | None = None
    torch: Callable | None = None
    reference: Callable | None = None
    arity: int = 1
    domain: dict = dataclasses.field(default_factory=lambda: {"float32": (-4.0, 4.0), "float64": (-4.0, 4.0)})
    points: tuple = ()
    declared: tuple = ()
    excluded: tuple | Callable = ()
    margin: float = 1e-3
    capabilities: frozenset = CAPABILITIES
    absent: dict = dataclasses.field(default_factory=dict)
    tol: cmp.Tolerance = cmp.GRAD
    pairs: tuple = ()
    sides: bool = False
    #: element i depends on element i of each argument only: held per element by the error
    #: model (:mod:`suite.ops.error`); False for a mixing op (a reduction, softmax), held at an
    #: array-level floor with ``tol``
    elementwise: bool = True
    #: where the frameworks' formulas cancel, the magnitude of their terms (:class:`Terms`)
    terms: "Terms | None" = None
    #: units of rounding per dtype, where the entry's formulas round more than :data:`ULPS`
    ulps: dict | None = None
    #: the regimes of its range where float runs out, {name: (low, high)} (``saturated``,
    #: ``underflow``, ``cancelling``): every example puts an element in each one the dtype's
    #: domain reaches (:func:`regime_values`), so a regression confined to a tail is drawn
    regimes: dict = dataclasses.field(default_factory=dict)
    #: float64 closed forms a behaviour compares with near its points (where differences lose
    #: their accuracy): f', f'' (and on to ``order``) of a one-argument op; a binary op's
    #: ``(a, b) -> (df/da, df/db)``; a reduction's ``vjp(x, w)``
    derivatives: tuple = ()
    #: ``vjp(*args, w) -> d<w, f>/d args[0]`` in float64 at a special point whose gradient is held
    #: to a closed form (``grad-accuracy``) because differences cannot give it (a rank change)
    point_vjp: Callable | None = None
    #: what the at/near/away property (:mod:`suite.ops.points`) needs beyond the points: a binary
    #: op's argument names and regular ranges, closed forms a gradient may equal, a reduction's
    #: cancelling terms (:class:`suite.ops.points.Around`)
    around: object = None
    #: the highest derivative order the entry is held at (JAX's ``check_grads(order=)``): 2, the
    #: gradient and the second derivative (``grad2``), by default; above 2 its points may ask for
    #: ``grad3`` ... ``grad<order>``, which :func:`suite.ops.points.higher_derivatives` holds, and
    #: its ``derivatives`` reach that order
    order: int = 2

    def __post_init__(self):
        for fw in registry.NAMES:
            if isinstance(getattr(self, fw), str):
                object.__setattr__(self, fw, spelling(getattr(self, fw)))
            if getattr(self, fw) is None and fw not in self.absent:
                raise ValueError(f"op {self.name}: no {fw} spelling and no reason in absent={{{fw!r}: (why, link)}}")
        bad = set(self.capabilities) - CAPABILITIES
        if bad:
            raise ValueError(f"op {self.name}: unknown capabilities {sorted(bad)}")
        for cap in sorted(CAPABILITIES - set(self.capabilities)):
            if cap not in self.absent:
                raise ValueError(f"op {self.name}: no {cap}, and no reason in absent={{{cap!r}: (why, link)}}")
        highest = max((derivative_order(k) for p in self.points for k, _ in p.also), default=0)
        if highest > self.order:
            raise ValueError(f"op {self.name}: a point observes grad{highest}, above its order {self.order} "
                             f"(order={highest} holds it)")  # fmt: skip
        if self.order > 2 and len(self.derivatives) < self.order:
            raise ValueError(f"op {self.name}: order {self.order} needs derivatives to that order, "
                             f"not {len(self.derivatives)}")  # fmt: skip
        spellings = {fw: staticmethod(getattr(self, fw)) for fw in registry.NAMES if getattr(self, fw)}
        object.__setattr__(self, "program", type(f"Op_{self.name}", (Program,), {"__doc__": self.name, **spellings}))

    def spelled(self, framework: str) -> bool:
        return getattr(self, framework) is not None

    def key(self, point: Point) -> str:
        return point.key or f"grad[{self.name}@{point.name}]"

    def value_key(self, point: Point) -> str:
        return f"value[{self.name}@{point.name}]"

    def also_key(self, prefix: str, point: Point) -> str:
        return f"{prefix}[{self.name}@{point.name}]"

    def keys(self) -> list[str]:
        return ([self.key(p) for p in self.points] + [self.value_key(p) for p in self.points if p.value]
                + [self.also_key(k, p) for p in self.points for k, _ in p.also])  # fmt: skip

    def has(self, prefix: str) -> bool:
        """Does any special point observe ``prefix`` (``grad2``: the entry's second derivative)?"""
        return any(k == prefix for p in self.points for k, _ in p.also)


def derivative_order(prefix: str) -> int:
    """The derivative order an observation prefix is about: k for ``grad<k>`` (k >= 2), else 0.

    >>> derivative_order("grad2"), derivative_order("grad5"), derivative_order("grad"), derivative_order("side")
    (2, 5, 0, 0)
    """
    digits = prefix.removeprefix("grad")
    return int(digits) if prefix.startswith("grad") and digits.isdigit() else 0


def regime_values(op, dtype: str) -> list[tuple[str, float, float]]:
    """The entry's regimes as (name, low, high) clipped to its ``dtype`` domain; those the domain
    does not reach are left out.

    >>> op = Op("tanh", "demo", "tanh", "tanh", "tanh", domain={"float32": (-20.0, 20.0)},
    ...         regimes={"saturated": (4.1, 9.0), "saturated-": (-9.0, -4.1), "far": (30.0, 40.0)})
    >>> regime_values(op, "float32")
    [('saturated', 4.1, 9.0), ('saturated-', -9.0, -4.1)]
    """
    lo, hi = op.domain[dtype]
    out = []
    for name, (a, b) in op.regimes.items():
        a, b = max(a, lo), min(b, hi)
        if a <= b:
            out.append((name, a, b))
    return out


def regime_grid(op, dtype: str, n: int) -> np.ndarray:
    """About ``n`` float64 values over the entry's ``dtype`` domain: a uniform spread, magnitudes
    on a log scale of both signs, and a spread over each regime (:func:`regime_values`)."""
    lo, hi = op.domain[dtype]
    lo, hi = max(lo, -1e300), min(hi, 1e300)
    regimes = regime_values(op, dtype)
    k = n // (3 + len(regimes))
    big = max(abs(lo), abs(hi))
    mags = np.geomspace(min(1e-6, big / 2), big, k) if big > 0 else np.zeros(1)
    parts = [np.linspace(lo, hi, k), mags, -mags, *(np.linspace(a, b, k) for _, a, b in regimes)]
    grid = np.concatenate(parts)
    return np.unique(grid[(grid >= lo) & (grid <= hi)])


def register(op: Op) -> Op:
    """Add ``op`` to the table, its declarations attributed to the calling (behaviour) module,
    as ``expectations(...)`` there would be. A name is one entry: registering it again
    replaces it, so a module imported twice does not double its rows (a name is unique within
    its behaviour: ``elu`` may be an entry of two behaviours). An op the database knows is
    entered with :func:`view`, which takes its facts from there, never spelled again.

    >>> register(Op("log", behaviour="demo", tensorflow="math.log", jax="numpy.log", torch="log"))
    Traceback (most recent call last):
    ...
    ValueError: op log is in the op database (suite/ops/db.py): enter it with ops.view("demo", "log", ...)
    """
    if op.name in db.names():
        raise ValueError(
            f"op {op.name} is in the op database (suite/ops/db.py): enter it with "
            f'ops.view("{op.behaviour}", "{op.name}", ...)'
        )
    return _register(op, sys._getframe(1).f_globals.get("__name__", "?"))


def view(behaviour: str, name: str, *, closed_forms: bool = False, **fields) -> Op:
    """The op database's ``name`` (:mod:`suite.ops.db`) as an entry of ``behaviour``, registered
    as :func:`register` does: its spellings, reference and arity are the database's, and
    ``fields`` are what the behaviour is about (``domain``, ``points``, ``declared``,
    ``excluded``, ``regimes``, ``ulps``: any other field of :class:`Op`; ``terms`` too where
    the database states none). ``closed_forms``: the entry
    carries the database's derivatives, for a behaviour that compares with them.

    >>> op = view("demo", "log", closed_forms=True, points=(Point("0", (0.0,), "+inf"),))
    >>> op.keys(), float(op.derivatives[0](4.0)), op.program.of("jax").__name__
    (['grad[log@0]'], 0.25, 'numpy.log')
    >>> view("demo", "log", reference=np.log)
    Traceback (most recent call last):
    ...
    ValueError: op log: reference is the op database's (suite/ops/db.py), not demo's
    """
    fact = db.fact(name)
    facts = dict(fact.spellings, reference=fact.reference, arity=fact.arity)
    if closed_forms:
        facts["derivatives"] = fact.derivatives
    if fact.terms is not None:
        facts["terms"] = fact.terms
    owned = sorted(set(facts) & set(fields))
    if owned:
        raise ValueError(f"op {name}: {', '.join(owned)} is the op database's (suite/ops/db.py), not {behaviour}'s")
    defaults = {"elementwise": fact.family != "reduction"}
    absent = {**fact.absent, **fields.pop("absent", {})}
    op = Op(name, behaviour=behaviour, **facts, absent=absent, **{**defaults, **fields})
    return _register(op, sys._getframe(1).f_globals.get("__name__", "?"))


def _register(op: Op, module: str) -> Op:
    defaults = {op.key(p): p.kind for p in op.points}
    defaults.update({op.value_key(p): p.value for p in op.points if p.value})
    defaults.update({op.also_key(k, p): kind for p in op.points for k, kind in p.also})
    # a property a framework cannot run (TensorFlow has no gradient of SoftsignGrad, so no
    # second order; none of ResizeArea at all): declared as reverse[<name>], forward[<name>] or
    # second[<name>], "ok" where it runs
    runs = {f"{prop}[{op.name}]" for prop in ("reverse", "forward", "second")}
    defaults.update({e.key: "ok" for e in op.declared if e.key in runs})
    object.__setattr__(op, "expect", Expectations(defaults, list(op.declared), module, scope=op.name))
    _TABLE[(op.behaviour, op.name)] = op
    return op


def missing_gradient(entry: str, props, pattern: str, *, versions=None, reason, link, early=None) -> list:
    """TensorFlow's refusal of the properties ``props`` (``forward``, ``second``) of the table
    entry ``entry`` where a gradient they need is not registered: a LookupError matching
    ``pattern`` eagerly and in a v1 graph, a StagingError where a function is traced
    (tf.function, XLA); and for forward mode before 2.13 a StagingError in every mode (TF
    2.12's ForwardAccumulator builds the JVP in a tf.function; measured). ``versions`` bounds
    all of them; ``early`` is ``(reason, link)`` of the 2.12 forward declaration where it
    differs from ``reason`` and ``link``.

    >>> [(e.mode, e.versions) for e in missing_gradient("f", ("forward",), "FGrad", reason="r", link="l")]
    [('eager|graph', '>=2.13'), ('function|xla', None), ('eager|graph', '<2.13')]
    """

    def bound(*clauses):
        return ",".join(c for c in (*clauses, versions) if c) or None

    out = []
    for prop in props:
        for error, modes in (("LookupError", "eager|graph"), ("StagingError", "function|xla")):
            early_clause = ">=2.13" if (prop, error) == ("forward", "LookupError") else None
            out.append(expect(f"{prop}[{entry}]", raises(error, pattern), framework="tensorflow", mode=modes,
                              versions=bound(early_clause), reason=reason, link=link))  # fmt: skip
        if prop == "forward":
            why, where = early or (reason, link)
            out.append(expect(f"{prop}[{entry}]", raises("StagingError", pattern), framework="tensorflow",
                              mode="eager|graph", versions=bound("<2.13"), reason=why, link=where))  # fmt: skip
    return out


def entries(behaviour: str) -> list[Op]:
    """The table's entries reported under ``behaviour``, in registration order."""
    return [op for op in _TABLE.values() if op.behaviour == behaviour]


def point_kind(g, named=None) -> str:
    """What a gradient is at a special point: ``nan``, ``+inf``, ``-inf``, ``zero``, the closed
    form in ``named`` ({name: array}) every entry equals, the value when every entry has it
    (``1``, ``0.5``), else ``finite``; ``mixed:a,b`` when entries differ in class.

    >>> point_kind(np.array([0.0, -0.0])), point_kind(np.array([np.inf])), point_kind(np.array([0.5, 0.5]))
    ('zero', '+inf', '0.5')
    >>> point_kind(None), point_kind(np.array([2.0, 3.0]), {"2x": np.array([2.0, 3.0])})
    ('none', '2x')
    """
    if g is None:
        return "none"
    d = np.asarray(g, np.float64).ravel()
    words = {"nan" if np.isnan(v) else "zero" if v == 0 else "finite" if np.isfinite(v) else f"{v:+}" for v in d}
    if len(words) > 1:
        return "mixed:" + ",".join(sorted(words))
    word = words.pop()
    if word != "finite":
        return word
    for name, ref in (named or {}).items():
        if cmp.rel_err(d, np.ravel(ref)) <= 1e-4:
            return name
    return f"{d[0]:.3g}" if np.all(np.abs(d - d[0]) <= 1e-4 * abs(d[0])) else "finite"


def side_kind(g, left, right) -> str:
    """Which one-sided difference quotient (times the cotangent) a gradient at a kink equals:
    ``both`` where the two agree, else ``left``, ``right`` or their ``mean``; when it is none of
    them, its value kind (:func:`point_kind`: ``zero``, ``nan``, ...), the one key saying both
    (:mod:`suite.kinds`).

    >>> side_kind(0.0, -1.0, 1.0), side_kind(1.0, 0.0, 1.0), side_kind(1.0, 1.0, 1.0), side_kind(0.0, 0.25, 1.0)
    ('mean', 'right', 'both', 'zero')
    """
    tol = max(finite_diff.ONE_SIDED_TOL, cmp.GRAD.of(np.asarray(g).dtype))

    def same(a, b):
        return cmp.rel_err(np.float64(a), np.float64(b), rtol=tol) <= tol

    if same(left, right):
        if same(g, left):
            return "both"
    else:
        for name, ref in (("left", left), ("right", right), ("mean", (left + right) / 2)):
            if same(g, ref):
                return name
    return point_kind(np.asarray(g))


def summary(kinds) -> str:
    """One observation for several elements: their common kind, or ``mixed:...``.

    >>> summary(["left", "left"]), summary(["left", "mean"])
    ('left', 'mixed:left,mean')
    """
    kinds = sorted(set(kinds))
    return kinds[0] if len(kinds) == 1 else "mixed:" + ",".join(kinds)


def accuracy(y, ref, *, ulps: float | None = None) -> str:
    """``exact`` when ``y`` is within its dtype's value tolerance of the float64 ``ref`` (purely
    relative, element by element), else ``rel-err~<order>``. With ``ulps``, a gradient of a
    mixing op (``grad-accuracy``): every element within ``ulps`` units of rounding of the
    array's largest (the normwise bound of a linear-algebra result, whose every element sums
    terms of the whole array's size).

    >>> accuracy(np.float64(1 + 5e-9), 1.0), accuracy(np.float32(1.0), 1.0), accuracy(np.float64(0.0), -1e-20)
    ('rel-err~1e-08', 'exact', 'rel-err~1e+00')
    >>> accuracy(np.float32([1.0, 1e-6]), [1.0, 0.0], ulps=16), accuracy(np.float32([1.0, 1e-5]), [1.0, 0.0], ulps=16)
    ('exact', 'rel-err~1e-05')
    """
    y = np.asarray(y)
    ref = np.broadcast_to(np.asarray(ref, np.float64), y.shape)
    if ulps is None:
        tol = cmp.VALUE.of(y.dtype)
        err = cmp.rel_err(y.astype(np.float64), ref, rtol=0.0, dtype=y.dtype)
    else:  # the floor is the array's largest element: |y_i - ref_i| <= ulps eps max|ref|
        tol = ulps * cmp.EPS[cmp.real_name(y.dtype)]
        err = cmp.rel_err(y.astype(np.float64), ref, rtol=tol, dtype=y.dtype, ulps=ulps)
    if err <= tol:
        return "exact"
    return "rel-err~inf" if not np.isfinite(err) else f"rel-err~{10.0 ** round(np.log10(err)):.0e}"
