"""The runner interface shared by every framework (plumbing only; see package docstring)."""

from __future__ import annotations

import concurrent.futures
import copy
import functools
import typing

import numpy as np

from suite import compare as cmp

_SHALLOW: concurrent.futures.ThreadPoolExecutor | None = None


def _shallow(call):
    """``call()`` from a thread of its own, whose Python stack is short (one per process)."""
    global _SHALLOW
    if _SHALLOW is None:
        _SHALLOW = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="shallow")
    return _SHALLOW.submit(call).result()


def is_float(a) -> bool:
    return np.asarray(a).dtype.kind in "fc"


class Runner:
    """Runs native functions of one framework in one mode on one device.

    ``compile(builder, **static)`` returns a callable taking NumPy arrays and returning
    NumPy (same nesting; ``None`` stays ``None``); ``builder(module, *tensors, **static)``
    is native code. Define builders at module level: compiled callables are cached per
    builder (and per static argument), so a property test traces once, not per example.

    ``vjp(fn, *arrays, cotangent=None)`` returns ``(value, grads)``: ``value = fn(module,
    *arrays)`` and ``grads[i]`` the gradient of ``sum(cotangent * value)`` with respect to
    ``arrays[i]`` by the framework's native reverse mode (``None`` where the framework
    says unconnected; integer inputs are not differentiated and give ``None``).
    ``cotangent=None`` uses the framework's own default where it has one (TensorFlow:
    ones) and an explicit ones array where it has none (JAX, PyTorch).
    """

    framework: str
    mode: str
    device: str
    module: object
    version: str
    #: :meth:`recall` runs the calls whose refusal it remembers from a thread with a short
    #: stack (see TFRunner)
    shallow_recall: bool = False
    #: the mode traces and compiles a program once and calls it after (TensorFlow's function and
    #: xla, JAX's jit): :meth:`orders` computes every order of a row from one program there
    traced: bool = False

    def __init__(self, fw, spec):
        self.framework, self.mode, self.device = spec.framework, spec.mode, spec.device
        self.spec = spec
        self.module = fw.module
        self.version = fw.version
        self._cache: dict = {}
        self._memo: dict | None = None
        self._refused: dict = {}
        self._one_program: dict = {}  # orders(): per program and dtypes, did the combined one run?

    @property
    def id(self) -> str:
        return self.spec.id

    def __repr__(self) -> str:
        return self.id

    # -- to be provided by each framework
    def _build(self, builder, static: dict):  # pragma: no cover - interface
        raise NotImplementedError

    #: The module-level builders of this framework's derivative programs, by kind: "vjp", "jvp",
    #: "second_order", "derivative" and (where one program gives every order) "orders"; each runner module
    #: fills it in below its builders.
    builders: dict = {}

    def builder(self, kind: str):
        try:
            return self.builders[kind]
        except KeyError:
            raise NotImplementedError(f"{type(self).__name__} has no {kind!r} builder") from None

    def sync(self, out):
        """Block until device work behind ``out`` is done (benchmarks)."""
        return out

    def check_device(self, where: str, value=None) -> None:
        """A GPU row's outputs must have been computed on the GPU: ``where`` is the output's
        device as the framework names it (``/job:localhost/.../device:GPU:0``, ``cuda:0``,
        ``gpu:0``/``cuda:0``). A silent CPU fallback fails the row instead of passing as a GPU
        measurement. Integer and boolean outputs are exempt (TensorFlow keeps them in host
        memory by design).

        >>> class R(Runner): pass
        >>> r = R.__new__(R); r.device = "gpu"; r.spec = type("S", (), {"id": "x-eager-gpu"})()
        >>> r.check_device("/device:CPU:0", np.zeros(1))
        Traceback (most recent call last):
        AssertionError: x-eager-gpu: an output was computed on /device:CPU:0, not the GPU (a silent CPU fallback)
        """
        if self.device != "gpu" or (value is not None and not is_float(value)):
            return
        w = str(where).lower()
        if not ("gpu" in w or "cuda" in w):
            raise AssertionError(f"{self.id}: an output was computed on {where}, not the GPU (a silent CPU fallback)")

    # -- shared
    @staticmethod
    def compile_key(builder, static: dict) -> tuple:
        """What a compiled callable is cached by: the builder and its static arguments."""
        return (builder, tuple(sorted(static.items(), key=lambda kv: kv[0])))

    def compile(self, builder, **static):
        key = self.compile_key(builder, static)
        try:
            f = self._cache[key]
        except KeyError:
            f = self._cache[key] = self._build(builder, static)
        except TypeError:  # unhashable static argument: no caching
            return self._build(builder, static)
        if self._memo is None or getattr(static.get("fn", builder), "fresh", False):
            return f
        return _memoised(f, self._memo, (self.id, key))

    def memoised(self, store: dict) -> "Runner":
        """This runner, answering a call it has already answered (the same program, static
        arguments and input bytes) from ``store`` instead of running it again. For oracles: a
        reference result does not depend on the subject's mode, so one store per test lets the
        four TensorFlow rows (and the other frameworks' rows) of the same examples run each
        oracle once per example. The compiled programs are shared with the runner. A spelling
        whose result is not a function of its inputs (unseeded randomness, a counter) sets
        ``fn.fresh = True`` and is always run."""
        view = copy.copy(self)
        view._memo = store
        return view

    def run(self, fn, *arrays, **static):
        """``fn(module, *arrays, **static)`` in this runner's mode, as NumPy."""
        return self.compile(fn, **static)(*arrays)

    def vjp(self, fn, *arrays, cotangent=None, **static):
        """``(value, gradients)``: native reverse mode of ``fn`` at ``arrays`` (a gradient per
        float input, ``None`` for the others); ``cotangent`` defaults to ones."""
        diff = tuple(is_float(a) for a in arrays)
        builder = self.builder("vjp")
        if cotangent is None:
            return self.compile(builder, fn=fn, diff=diff, static=_Frozen(static), ct=False)(*arrays)
        return self.compile(builder, fn=fn, diff=diff, static=_Frozen(static), ct=True)(*arrays, cotangent)

    def jvp(self, fn, *arrays, tangents, **static):
        """``(value, J t)``: native forward mode of ``fn`` at ``arrays`` (TensorFlow's
        ForwardAccumulator, ``jax.jvp``, ``torch.func.jvp``); ``tangents``: one per float input,
        in order."""
        diff = tuple(is_float(a) for a in arrays)
        builder = self.builder("jvp")
        return self.compile(builder, fn=fn, diff=diff, static=_Frozen(static))(*arrays, *tangents)

    def second_order(self, fn, *arrays, cotangent, cotangent2, **static):
        """``(value, gradients, second)``: reverse over reverse. ``gradients`` as :meth:`vjp`
        with ``cotangent``; ``second``, per float input, the gradient of
        ``sum(cotangent2 * gradients[0])`` (the first float input's gradient): nested tapes (or
        ``tf.gradients`` twice in a v1 graph), ``jax.vjp`` of ``jax.vjp``, ``autograd.grad`` with
        ``create_graph``. A first gradient that does not depend on the inputs gives ``None``."""
        diff = tuple(is_float(a) for a in arrays)
        builder = self.builder("second_order")
        return self.compile(builder, fn=fn, diff=diff, static=_Frozen(static))(*arrays, cotangent, cotangent2)

    def derivative(self, fn, x, *, order: int, **static):
        """The ``order``-th derivative of an elementwise ``fn`` of one float input at ``x``, by
        nested differentiation of the sum (nested tapes, nested ``jax.grad``, ``autograd.grad``
        with ``create_graph``), so a higher derivative is a number, not code. ``order=0`` is
        the value."""
        if not isinstance(order, int) or order < 0:
            raise ValueError(f"order={order!r}: a whole number, 0 or more")
        return self.compile(self.builder("derivative"), fn=fn, order=order, static=_Frozen(static))(x)

    def orders(self, fn, *arrays, cotangent, tangents, cotangent2, need: str, **static) -> "Orders":
        """:class:`Orders` of ``fn`` at ``arrays``: the value, the gradients for ``cotangent`` (as
        :meth:`vjp`), ``J t`` for ``tangents`` (as :meth:`jvp`) and the second derivatives for
        ``cotangent2`` (as :meth:`second_order`), for a row that checks one of them (``need``:
        ``"vjp"``, ``"jvp"`` or ``"second"``) and whose sibling rows check the others on the same
        inputs (the op table's reverse, forward and second-order rows).

        In a :attr:`traced` mode every order comes from ONE program, traced and compiled once per
        input dtypes (issue 46: a first call costs 16-83 ms, a further call of the same program
        well under one), instead of a program per order; the orders not needed are computed
        too, at the cost of a call. ``fn`` runs three times in that program, so it must be pure
        (no variables, no randomness). Where the combined program fails (an order the mode
        refuses: XLA's forward mode of an op without a JVP rule), the needed order is computed
        by its own program, whose error is then the observation, and the combined program is
        not tried again for these dtypes. Elsewhere (eager modes) only ``need`` is computed;
        the orders not computed are ``None``."""
        if need not in ("vjp", "jvp", "second"):
            raise ValueError(f"need={need!r}: 'vjp', 'jvp' or 'second'")
        diff = tuple(is_float(a) for a in arrays)
        builder = self.builders.get("orders") if self.traced else None
        key = (fn, _Frozen(static), tuple(np.asarray(a).dtype.str for a in arrays))
        if builder is not None and self._one_program.get(key, True):
            call = functools.partial(
                self.compile(builder, fn=fn, diff=diff, static=_Frozen(static)),
                *arrays,
                cotangent,
                *tangents,
                cotangent2,
            )
            try:  # a first call runs from a short stack, as recall() does (XLA's refusal parses it)
                out = _shallow(call) if key not in self._one_program and self.shallow_recall else call()
            except AssertionError:  # the harness's own checks (a silent CPU fallback)
                raise
            except Exception:  # noqa: BLE001 - the order's own program says what fails
                self._one_program[key] = False
            else:
                self._one_program[key] = True
                return Orders(*out)
        if need == "vjp":
            y, grads = self.vjp(fn, *arrays, cotangent=cotangent, **static)
            return Orders(y, grads, None, None)
        if need == "jvp":
            y, jt = self.jvp(fn, *arrays, tangents=tangents, **static)
            return Orders(y, None, jt, None)
        y, grads, second = self.second_order(fn, *arrays, cotangent=cotangent, cotangent2=cotangent2, **static)
        return Orders(y, grads, None, second)

    def attempt(self, method: str, fn, *arrays, remember=None, **kwargs):
        """``(result, None)`` from ``self.<method>(fn, *arrays, **kwargs)`` (``run``, ``vjp``,
        ``jvp``, ``second_order``), or ``(None, raises:<Error>)`` where the framework refuses:
        an API that raises is an observation, not a crash of the case. ``remember``: as in
        :meth:`recall`."""
        try:
            return self.recall(method, fn, *arrays, remember=remember, **kwargs), None
        except Exception as e:  # noqa: BLE001 - the error's name is the observation
            return None, cmp.error_name(e)

    def recall(self, method: str, fn, *arrays, remember=None, **kwargs):
        """``self.<method>(fn, *arrays, **kwargs)``; an error for which ``remember(error)`` is
        true (a compilation the mode cannot do, which the framework does not cache: XLA's
        refusal costs a compile and a quadratic parse of its message each time) is raised again
        without running, for this runner, program, input dtypes and keyword arguments. With
        ``remember`` on a runner whose ``shallow_recall`` is set, the call runs from a thread of
        its own (everything it does happens inside the call, so nothing else sees the thread)."""
        key = None
        if remember is not None:
            dtypes = tuple(getattr(a, "dtype", type(a)).__str__() for a in arrays)
            key = (method, fn, dtypes, tuple(sorted((k, repr(v)) for k, v in kwargs.items() if k != "cotangent")))
            if key in self._refused:
                raise self._refused[key].with_traceback(None)
        call = functools.partial(getattr(self, method), fn, *arrays, **kwargs)
        try:
            return _shallow(call) if key is not None and self.shallow_recall else call()
        except Exception as e:
            if key is not None and remember(e):
                self._refused[key] = e
            raise


class Orders(typing.NamedTuple):
    """What :meth:`Runner.orders` returns: the value, the gradients (one per input, ``None`` for a
    non-float one), ``J t`` and the second derivatives; an order not computed is ``None``."""

    value: object
    grads: tuple | None
    jt: object
    second: tuple | None


def split_orders(args, diff):
    """A combined program's arguments as (inputs, cotangent, tangents, second cotangent)."""
    n = sum(diff)
    cut = len(args) - n - 2
    return list(args[:cut]), args[cut], list(args[cut + 1 : cut + 1 + n]), args[-1]


def of_floats(module, args, diff, fn, static):
    """``fn(module, *args, **static)`` as a function of the float inputs alone (``diff`` marks
    them), and those inputs: what ``jax.vjp``/``jax.jvp``/``torch.func.jvp`` differentiate."""
    args = list(args)
    idx = [i for i, d in enumerate(diff) if d]

    def f(*xs):
        full = list(args)
        for i, x in zip(idx, xs):
            full[i] = x
        return fn(module, *full, **static)

    return f, [args[i] for i in idx]


def _memo_key(arrays):
    """Hashable identity of call arguments: dtype, shape and bytes of arrays, plain Python
    values as themselves; ``None`` for anything else (the call is then not memoised)."""
    out = []
    for a in arrays:
        if isinstance(a, (np.ndarray, np.generic)) and a.dtype.kind in "biufcS":
            out.append((a.dtype.str, a.shape, a.tobytes()))
        elif a is None or isinstance(a, (bool, int, float, complex, str, bytes)):
            out.append((type(a).__name__, a))
        else:
            return None
    return tuple(out)


def _memoised(f, store: dict, prefix):
    def call(*arrays):
        k = _memo_key(arrays)
        if k is None:
            return f(*arrays)
        k = (prefix, k)
        if k not in store:
            store[k] = f(*arrays)  # an exception is not memoised: the next call runs again
        return nest_map(_fresh_copy, store[k])

    return call


def _fresh_copy(x):
    return x.copy() if isinstance(x, np.ndarray) else x


class _Frozen(dict):
    """A hashable dict for static keyword arguments."""

    def __hash__(self):
        return hash(tuple(sorted(self.items())))


def nest_map(f, x):
    """Map ``f`` over tuples/lists/dicts; ``None`` stays ``None``."""
    if x is None:
        return None
    if isinstance(x, tuple) and hasattr(x, "_fields"):
        return type(x)(*(nest_map(f, v) for v in x))
    if isinstance(x, (list, tuple)):
        return type(x)(nest_map(f, v) for v in x)
    if isinstance(x, dict):
        return {k: nest_map(f, v) for k, v in x.items()}
    return f(x)


def nest_flatten(x, out=None):
    out = [] if out is None else out
    if x is None:
        out.append(None)
    elif isinstance(x, (list, tuple)):
        for v in x:
            nest_flatten(v, out)
    elif isinstance(x, dict):
        for k in x:
            nest_flatten(x[k], out)
    else:
        out.append(x)
    return out


def nest_pack(template, flat):
    it = iter(flat)

    def rec(t):
        if t is None:
            next(it)
            return None
        if isinstance(t, tuple) and hasattr(t, "_fields"):
            return type(t)(*(rec(v) for v in t))
        if isinstance(t, (list, tuple)):
            return type(t)(rec(v) for v in t)
        if isinstance(t, dict):
            return {k: rec(t[k]) for k in t}
        return next(it)

    return rec(template)
