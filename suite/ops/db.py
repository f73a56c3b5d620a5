"""The op database: each op's facts once, whatever behaviours test it.

A fact is what is true of an op everywhere: its spelling in every framework, its float64 NumPy
reference, where a behaviour compares with them its closed-form derivatives, and where its
formulas cancel the magnitude of their terms (its error model's ``Terms``). What a behaviour is
about (where it draws, its special points and what each framework answers there, the regimes and
units of rounding measured over its domain) is the behaviour's: it takes an op by name and adds
those (:func:`suite.ops.view`), so ``log`` is spelled once, not once per behaviour that asks about it.

Facts are made by keyword-only family constructors: :func:`unary` (one argument, elementwise),
:func:`binary` (two arguments, elementwise) and :func:`reduction` (over the last axis, broadcast
back to the input's shape, so every element of a row mixes the whole row)::

    unary("tanh", tensorflow="math.tanh", jax="numpy.tanh", torch="tanh", reference=np.tanh)

A spelling is a dotted path under the framework's module (:func:`spelling`) or ``fn(module, *xs)``.

>>> fact("log").family, fact("log").spellings["jax"].__name__
('unary', 'numpy.log')
>>> float(fact("log").reference(np.float32(0.0)))
-inf
>>> fact("sofmax")
Traceback (most recent call last):
...
KeyError: "no op 'sofmax' in the op database (suite/ops/db.py); close: log_softmax, softmax"
"""

from __future__ import annotations

import dataclasses
import difflib
import math
from typing import Callable

import numpy as np

from suite import registry
from suite.ops.error import Terms

FAMILIES = ("unary", "binary", "reduction")

_DB: dict[str, "Fact"] = {}


def resolve(module, path: str):
    """The attribute at the dotted ``path`` under ``module``.

    >>> resolve(np, "linalg.norm") is np.linalg.norm
    True
    """
    for part in path.split("."):
        module = getattr(module, part)
    return module


def spelling(path: str) -> Callable:
    """``fn(module, *xs)`` calling the function at the dotted ``path`` under the framework's module.

    >>> float(spelling("add")(np, 1.0, 2.0))
    3.0
    """

    def fn(module, *xs):
        return resolve(module, path)(*xs)

    fn.__name__ = fn.__qualname__ = path
    return fn


def quiet(f: Callable) -> Callable:
    """A float64 NumPy closed form that may overflow or meet a pole, log(0), 0 / 0 or sqrt(-x)
    quietly: its arguments are taken as float64 and NumPy's floating-point warnings are off."""

    def closed_form(*a):
        with np.errstate(all="ignore"):
            return f(*(np.asarray(v, np.float64) for v in a))

    closed_form.__name__ = getattr(f, "__name__", "reference")
    return closed_form


@dataclasses.dataclass(frozen=True)
class Fact:
    """An op's facts: its ``spellings`` ({framework: ``fn(module, *xs)``}, one per framework of
    :data:`suite.registry.NAMES`), its float64 ``reference`` and its closed-form ``derivatives``
    (a unary op's f' and f''; a binary op's ``(a, b) -> (df/da, df/db)``), each quiet (:func:`quiet`)."""

    name: str
    family: str
    arity: int
    spellings: dict
    reference: Callable
    derivatives: tuple = ()
    #: {framework: (why, link)} where a framework has no such op (its spelling is None)
    absent: dict = dataclasses.field(default_factory=dict)
    #: where its formulas cancel, the magnitude of their terms (:class:`suite.ops.error.Terms`):
    #: the error model of every element, whichever behaviour compares it
    terms: Terms | None = None


def _fact(name, family, arity, spellings: dict, reference, derivatives, absent=None, terms=None) -> Fact:
    if family not in FAMILIES:
        raise ValueError(f"op {name}: unknown family {family!r} (one of {', '.join(FAMILIES)})")
    absent = dict(absent or {})
    missing = [fw for fw in registry.NAMES if spellings.get(fw) is None and fw not in absent]
    if missing:
        raise ValueError(
            f"op {name}: no spelling for {', '.join(missing)} (a path or fn(module, *xs)), nor a reason in absent"
        )
    if name in _DB:
        raise ValueError(f"op {name}: already in the op database; a behaviour adds its points with ops.view")
    spelled = {fw: spelling(s) if isinstance(s, str) else s for fw, s in spellings.items()}
    closed = tuple(quiet(d) for d in derivatives if d is not None)
    _DB[name] = Fact(name, family, arity, spelled, quiet(reference), closed, absent, terms)
    return _DB[name]


def unary(name: str, *, tensorflow, jax, torch, reference, df=None, d2f=None, terms=None) -> Fact:
    """A one-argument elementwise op; ``df``/``d2f``: its first and second derivatives in closed
    form; ``terms``: its error model where its formulas cancel."""
    return _fact(name, "unary", 1, dict(tensorflow=tensorflow, jax=jax, torch=torch), reference, (df, d2f), None, terms)


def binary(name: str, *, tensorflow, jax, torch, reference, grads=None, absent=None, terms=None) -> Fact:
    """A two-argument elementwise op; ``grads``: ``(a, b) -> (df/da, df/db)`` in closed form;
    ``absent``: {framework: (why, link)} where a framework has none (its spelling None);
    ``terms``: its error model where its formulas cancel."""
    fns = dict(tensorflow=tensorflow, jax=jax, torch=torch)
    return _fact(name, "binary", 2, fns, reference, (grads,), absent, terms)


def reduction(name: str, *, tensorflow, jax, torch, reference) -> Fact:
    """An op over the last axis whose every output element mixes its whole row."""
    return _fact(name, "reduction", 1, dict(tensorflow=tensorflow, jax=jax, torch=torch), reference, ())


def fact(name: str) -> Fact:
    """The op ``name``'s facts; a KeyError naming the close names where there is none."""
    try:
        return _DB[name]
    except KeyError:
        close = difflib.get_close_matches(name, list(_DB), n=3, cutoff=0.6)
        hint = f"; close: {', '.join(sorted(close))}" if close else ""
        raise KeyError(f"no op {name!r} in the op database (suite/ops/db.py){hint}") from None


def names() -> list[str]:
    """Every op in the database, in the order entered."""
    return list(_DB)


# ---------------------------------------------------------------- closed forms the entries share
SELU_ALPHA, SELU_SCALE = 1.6732632423543772, 1.0507009873554805
erf, erfc = np.vectorize(math.erf, otypes=[float]), np.vectorize(math.erfc, otypes=[float])


def sigmoid(x):
    """1 / (1 + exp(-x)), as exp(-log(1 + exp(-x))): no overflow."""
    return np.exp(-np.logaddexp(0.0, -x))


def logsumexp(x):
    """log sum exp over the last axis, kept as a size-1 axis."""
    m = np.max(x, axis=-1, keepdims=True)
    return m + np.log(np.sum(np.exp(x - m), axis=-1, keepdims=True))


SELU_LA = SELU_SCALE * SELU_ALPHA


def where_negative(c=1.0):
    """``c`` where x < 0, else 0: a term of the formula for x < 0 only."""
    return lambda x: np.where(x < 0, c, 0.0)


def near_one(x, p):
    """The rounding of ``x*x`` in ``1 - x*x`` as it reaches ``(1 - x^2)^-p``: a relative error of
    ``p x^2 / |1 - x^2|`` (in units of rounding) of that magnitude."""
    d = np.abs(1 - x * x)
    return p * x * x / d * d**-p


# ---------------------------------------------------------------- activations
unary(
    "tanh",
    tensorflow="math.tanh",
    jax="numpy.tanh",
    torch="tanh",
    reference=np.tanh,
    terms=Terms(
        grad=lambda x: np.ones_like(x),
        second=lambda x: np.full_like(x, 2.0),
        why="1 - y^2 from the rounded output y: terms 1 and y^2; (1 - y)(1 + y) differentiated: 2 terms of 1",
    ),
)
unary(
    "sigmoid",
    tensorflow="math.sigmoid",
    jax="nn.sigmoid",
    torch="sigmoid",
    reference=sigmoid,
    terms=Terms(
        grad=lambda x: sigmoid(x),
        second=lambda x: 2 * sigmoid(x),
        why="y (1 - y) from the rounded output: 1 - y cancels where y -> 1",
    ),
)
unary(
    "softplus",
    tensorflow="math.softplus",
    jax="nn.softplus",
    torch="nn.functional.softplus",
    reference=lambda x: np.logaddexp(0.0, x),
    terms=Terms(second=lambda x: sigmoid(x), why="sigmoid(x) (1 - sigmoid(x)) in the second derivative"),
)
unary(
    "softsign",
    tensorflow="nn.softsign",
    jax="nn.soft_sign",
    torch="nn.functional.softsign",
    reference=lambda x: x / (1 + np.abs(x)),
    terms=Terms(
        grad=lambda x: 2 / (1 + np.abs(x)),
        second=lambda x: 4 / (1 + np.abs(x)) ** 2,
        why="autodiff of x / (1 + |x|): 1/(1+|x|) - |x|/(1+|x|)^2 cancels for large |x|",
    ),
)
unary(
    "elu",
    tensorflow="nn.elu",
    jax="nn.elu",
    torch="nn.functional.elu",
    reference=lambda x: np.where(x > 0, x, np.expm1(np.minimum(x, 0))),
    df=lambda x: np.exp(np.minimum(x, 0)),
    terms=Terms(
        value=where_negative(),
        grad=where_negative(),
        second=where_negative(),
        why="exp(x) - 1 and y + 1 from the rounded output for x < 0: terms 1 and y",
    ),
)
unary(
    "selu",
    tensorflow="nn.selu",
    jax="nn.selu",
    torch="nn.functional.selu",
    reference=lambda x: SELU_SCALE * np.where(x > 0, x, SELU_ALPHA * np.expm1(np.minimum(x, 0))),
    terms=Terms(
        value=where_negative(SELU_LA),
        grad=where_negative(SELU_LA),
        second=where_negative(SELU_LA),
        why="scale alpha (exp(x) - 1) and y + scale alpha for x < 0",
    ),
)
unary(
    "gelu",
    tensorflow="nn.gelu",
    jax=lambda jax, x: jax.nn.gelu(x, approximate=False),
    torch="nn.functional.gelu",
    reference=lambda x: 0.5 * x * erfc(-x / math.sqrt(2)),
    terms=Terms(
        value=lambda x: np.abs(x),
        grad=lambda x: np.ones_like(x),
        second=lambda x: 2 + x * x,
        cofactor=lambda x: 1 + x * x,
        why="x (1 + erf(x / sqrt 2)) / 2: 1 + erf cancels for x < 0",
    ),
)
unary(
    "silu",
    tensorflow="nn.silu",
    jax="nn.silu",
    torch="nn.functional.silu",
    reference=lambda x: x * sigmoid(x),
    terms=Terms(
        grad=lambda x: (1 + np.abs(x)) * sigmoid(x),
        second=lambda x: (2 + np.abs(x)) * sigmoid(x),
        cofactor=np.abs,
        why="s + x s (1 - s): the terms cancel near x = -1.28, and 1 - s (terms 1 and s) for large x",
    ),
)
unary(
    "erf",
    tensorflow="math.erf",
    jax="scipy.special.erf",
    torch="erf",
    reference=erf,
    terms=Terms(
        grad=lambda x: (1 + 2 * x * x) * np.exp(-x * x),
        second=lambda x: (1 + 2 * x * x) * np.abs(x) * np.exp(-x * x),
        cofactor=lambda x: 1 + 2 * x * x,
        why="exp(-x^2): x^2 rounds, so the relative error grows as 2 x^2",
    ),
)
unary(
    "erfc",
    tensorflow="math.erfc",
    jax="scipy.special.erfc",
    torch="erfc",
    reference=erfc,
    terms=Terms(
        value=lambda x: 2 * x * x * erfc(x),
        grad=lambda x: (1 + 2 * x * x) * np.exp(-x * x),
        second=lambda x: (1 + 2 * x * x) * np.abs(x) * np.exp(-x * x),
        cofactor=lambda x: 1 + 2 * x * x,
        why="exp(-x^2): x^2 rounds, so the relative error grows as 2 x^2",
    ),
)
unary(
    "log_sigmoid",
    tensorflow="math.log_sigmoid",
    jax="nn.log_sigmoid",
    torch="nn.functional.logsigmoid",
    reference=lambda x: -np.logaddexp(0.0, -x),
    terms=Terms(
        second=lambda x: np.ones_like(x), why="sigmoid(x) (1 - sigmoid(x)) in the second derivative: terms up to 1"
    ),
)

# ---------------------------------------------------------------- piecewise linear: kinks
#: leaky_relu's negative slope: exact in float32, since TensorFlow's LeakyRelu keeps alpha in a float
#: attribute (a slope like 0.2 is float32(0.2) even for float64 inputs: 7e-9 off the float64 closed form)
LEAKY_RELU_ALPHA = 0.25


def step(x):
    """1 where x > 0, else 0: relu's derivative off its kink."""
    return (x > 0) * 1.0


unary("relu", tensorflow="nn.relu", jax="nn.relu", torch="relu", reference=lambda x: np.maximum(x, 0), df=step)
unary("relu6", tensorflow="nn.relu6", jax="nn.relu6", torch="nn.functional.relu6",
      reference=lambda x: np.clip(x, 0, 6), df=lambda x: ((x > 0) & (x < 6)) * 1.0)  # fmt: skip
unary(
    "leaky_relu",
    tensorflow=lambda tf, x: tf.nn.leaky_relu(x, alpha=LEAKY_RELU_ALPHA),
    jax=lambda jax, x: jax.nn.leaky_relu(x, negative_slope=LEAKY_RELU_ALPHA),
    torch=lambda torch, x: torch.nn.functional.leaky_relu(x, LEAKY_RELU_ALPHA),
    reference=lambda x: np.where(x > 0, x, LEAKY_RELU_ALPHA * x),
    df=lambda x: np.where(x > 0, 1.0, LEAKY_RELU_ALPHA),
)
unary("abs", tensorflow="abs", jax="numpy.abs", torch="abs", reference=np.abs, df=np.sign)
unary("sign", tensorflow="sign", jax="numpy.sign", torch="sign", reference=np.sign, df=np.zeros_like)

# ---------------------------------------------------------------- exponentials, logarithms, roots
unary("exp", tensorflow="math.exp", jax="numpy.exp", torch="exp", reference=np.exp)
unary(
    "expm1",
    tensorflow="math.expm1",
    jax="numpy.expm1",
    torch="expm1",
    reference=np.expm1,
    terms=Terms(grad=where_negative(), second=where_negative(), why="y + 1 from the rounded output (JAX) for x < 0"),
)
unary("log", tensorflow="math.log", jax="numpy.log", torch="log", reference=np.log,
      df=lambda x: 1 / x, d2f=lambda x: -1 / x**2)  # fmt: skip
unary("log1p", tensorflow="math.log1p", jax="numpy.log1p", torch="log1p", reference=np.log1p,
      df=lambda x: 1 / (1 + x), d2f=lambda x: -1 / (1 + x) ** 2)  # fmt: skip
unary("reciprocal", tensorflow="math.reciprocal", jax="numpy.reciprocal", torch="reciprocal", reference=np.reciprocal,
      df=lambda x: -1 / x**2)  # fmt: skip
unary("sqrt", tensorflow="math.sqrt", jax="numpy.sqrt", torch="sqrt", reference=np.sqrt,
      df=lambda x: 0.5 / np.sqrt(x), d2f=lambda x: -0.25 * x**-1.5)  # fmt: skip
unary("rsqrt", tensorflow="math.rsqrt", jax="lax.rsqrt", torch="rsqrt", reference=lambda x: x**-0.5,
      df=lambda x: -0.5 * x**-1.5, d2f=lambda x: 0.75 * x**-2.5)  # fmt: skip

# ---------------------------------------------------------------- trigonometric and hyperbolic
unary("sin", tensorflow="math.sin", jax="numpy.sin", torch="sin", reference=np.sin)
unary("cos", tensorflow="math.cos", jax="numpy.cos", torch="cos", reference=np.cos)
unary("tan", tensorflow="math.tan", jax="numpy.tan", torch="tan", reference=np.tan)
unary(
    "asin",
    tensorflow="math.asin",
    jax="numpy.arcsin",
    torch="asin",
    reference=np.arcsin,
    df=lambda x: 1 / np.sqrt(1 - x * x),
    d2f=lambda x: x / (1 - x * x) ** 1.5,
    terms=Terms(
        grad=lambda x: near_one(x, 0.5),
        second=lambda x: near_one(x, 1.5),
        why="1 - x*x rounds x*x: relative error x^2 / (1 - x^2) per power of it",
    ),
)
unary(
    "acos",
    tensorflow="math.acos",
    jax="numpy.arccos",
    torch="acos",
    reference=np.arccos,
    df=lambda x: -1 / np.sqrt(1 - x * x),
    d2f=lambda x: -x / (1 - x * x) ** 1.5,
    terms=Terms(
        grad=lambda x: near_one(x, 0.5),
        second=lambda x: near_one(x, 1.5),
        why="1 - x*x rounds x*x: relative error x^2 / (1 - x^2) per power of it",
    ),
)
unary(
    "atan",
    tensorflow="math.atan",
    jax="numpy.arctan",
    torch="atan",
    reference=np.arctan,
    terms=Terms(cofactor=lambda x: 2 * np.abs(x), why="(1 / (1 + x^2))^2 is subnormal for |x| > 3e9 (float32)"),
)
unary("sinh", tensorflow="math.sinh", jax="numpy.sinh", torch="sinh", reference=np.sinh)
unary("cosh", tensorflow="math.cosh", jax="numpy.cosh", torch="cosh", reference=np.cosh)
unary(
    "asinh",
    tensorflow="math.asinh",
    jax="numpy.arcsinh",
    torch="asinh",
    reference=np.arcsinh,
    terms=Terms(cofactor=np.abs, why="XLA's asinh derivative: 28 ulp in float32, 145 in float64 (measured)"),
)
unary(
    "acosh",
    tensorflow="math.acosh",
    jax="numpy.arccosh",
    torch="acosh",
    reference=np.arccosh,
    terms=Terms(cofactor=np.abs, why="XLA's acosh derivative: 28 ulp in float32, 145 in float64 (measured)"),
)
unary(
    "atanh",
    tensorflow="math.atanh",
    jax="numpy.arctanh",
    torch="atanh",
    reference=np.arctanh,
    terms=Terms(
        value=lambda x: np.full_like(x, 2.0),
        grad=lambda x: near_one(x, 1.0),
        second=lambda x: 2 / (1 - x * x) ** 2 + 2 * near_one(x, 2.0),
        why="1 - x*x rounds x*x: relative error x^2 / (1 - x^2) per power of it; "
        "1 / ((1 - x)(1 + x)) differentiated: two terms cancel",
    ),
)


# ---------------------------------------------------------------- two arguments, and the last axis
def _pow_second_x(x, y):
    """The terms of pow's second derivatives through x: f_xx and f_xy with every term's magnitude."""
    return np.abs(y * (y - 1)) * x ** (y - 2) + x ** (y - 1) * (1 + np.abs(y * np.log(x)))


def _pow_second_y(x, y):
    """The terms of pow's second derivatives through y: f_xy's and f_yy = x^y log(x)^2."""
    return x ** (y - 1) * (1 + np.abs(y * np.log(x))) + x**y * np.log(x) ** 2


binary("pow", tensorflow="pow", jax="numpy.power", torch="pow", reference=np.power,
       grads=lambda x, y: (y * x ** (y - 1), x**y * np.log(x)),
       terms=Terms(second=(_pow_second_x, _pow_second_y),
                   why="d2/dx dy of x^y is x^(y-1) (1 + y log x): its terms cancel where y log x = -1"))  # fmt: skip
binary("xlogy", tensorflow="math.xlogy", jax="scipy.special.xlogy", torch="xlogy",
       reference=lambda x, y: np.where(x == 0, 0.0, x * np.log(y)), grads=lambda x, y: (np.log(y), x / y))  # fmt: skip
binary("xlog1py", tensorflow="math.xlog1py", jax="scipy.special.xlog1py", torch="special.xlog1py",
       reference=lambda x, y: np.where(x == 0, 0.0, x * np.log1p(y)),
       grads=lambda x, y: (np.log1p(y), x / (1 + y)))  # fmt: skip
#: Where xdivy and divide_no_nan have no spelling: the reason and the link
NO_XDIVY = {
    "jax": ("jax.numpy, jax.lax and jax.scipy.special have no xdivy or divide_no_nan",
            "https://docs.jax.dev/en/latest/jax.numpy.html"),
    "torch": ("torch has no xdivy or divide_no_nan", "https://pytorch.org/docs/stable/torch.html"),
}  # fmt: skip
binary("xdivy", tensorflow="math.xdivy", jax=None, torch=None, absent=NO_XDIVY,
       reference=lambda x, y: np.where(x == 0, 0.0, x / y), grads=lambda x, y: (1 / y, -x / y**2))  # fmt: skip
binary("divide_no_nan", tensorflow="math.divide_no_nan", jax=None, torch=None, absent=NO_XDIVY,
       reference=lambda x, y: np.where(y == 0, 0.0, x / y), grads=lambda x, y: (1 / y, -x / y**2))  # fmt: skip
binary("atan2", tensorflow="math.atan2", jax="numpy.arctan2", torch="atan2", reference=np.arctan2,
       grads=lambda y, x: (x / (x * x + y * y), -y / (x * x + y * y)))  # fmt: skip
reduction(
    "reduce_logsumexp",
    tensorflow=lambda tf, x: tf.broadcast_to(tf.reduce_logsumexp(x, axis=-1, keepdims=True), tf.shape(x)),
    jax=lambda jax, x: jax.numpy.broadcast_to(jax.nn.logsumexp(x, axis=-1, keepdims=True), x.shape),
    torch=lambda torch, x: torch.logsumexp(x, dim=-1, keepdim=True).expand(x.shape),
    reference=lambda x: np.broadcast_to(logsumexp(x), x.shape),
)
reduction("softmax", tensorflow=lambda tf, x: tf.nn.softmax(x, axis=-1), jax=lambda jax, x: jax.nn.softmax(x, axis=-1),
          torch=lambda torch, x: torch.softmax(x, dim=-1), reference=lambda x: np.exp(x - logsumexp(x)))  # fmt: skip
reduction("log_softmax", tensorflow=lambda tf, x: tf.nn.log_softmax(x, axis=-1),
          jax=lambda jax, x: jax.nn.log_softmax(x, axis=-1), torch=lambda torch, x: torch.log_softmax(x, dim=-1),
          reference=lambda x: x - logsumexp(x))  # fmt: skip
