"""Variable vs Tensor: ``a = a + 1`` makes a Tensor; ``assign``/``assign_add``/``scatter_update`` mutate.

Source: seeds/000 ("Tensor 与 Variable"). ``a = tf.Variable([1])``, initialised in a v1
Session: ``a.eval()`` is [1]; ``a = a + 1`` rebinds the Python name to a *Tensor* (eval
[2]) and ``b = a + 1`` is another Tensor ([3]); the Variable itself still holds [1],
because arithmetic on a Variable reads it and never writes it. Only update ops such as
``tf.scatter_update`` change a Variable, and in a v1 graph such an op is itself a "recipe":
building it changes nothing until a Session runs it. Observations: ``add`` (``a = a + d``)
``rebinds-to-tensor`` or ``mutates``; ``update`` (assign, assign_add, scatter_update)
``mutates``, ``returns-new`` (the variable unchanged, the result holding the new value) or
``no-effect``; ``unrun_update`` (an update op built, its result dropped) ``applied`` or
``no-effect-until-run``; ``iadd`` (``w = v; w += d``) ``rebinds-to-tensor``, ``mutates``
or ``raises:<Error>``. The oracle is NumPy (``x + d``, ``x[idx] = u``); PyTorch's
out-of-place ``t + d`` vs in-place ``add_``/``copy_``/``index_copy_`` and JAX's immutable
arrays (``.at[].set`` returns a new array) are oracle rows.

Declared surprises: JAX's updates return new arrays and leave the input as it was; in a v1
Session an update op whose result no fetch depends on never runs; ``v += d`` on a TF2
``tf.Variable`` (a ``ResourceVariable``) raises ``RuntimeError``, where PyTorch's ``t += d``
mutates in place; ``tf.compat.v1.Variable(use_resource=False)`` is a ``RefVariable`` only in a
v1 graph (a ``ResourceVariable``, whose ``+=`` raises, elsewhere); the seed's ``tf.Variable``
printed dtype ``int32_ref`` (a TF1 ref variable) where TF2's is ``int32``.

Variables per mode: eager builds a fresh ``tf.Variable`` per call; a v1 graph builds one
per graph and the harness re-initialises it from the fed inputs before every run. For
``function``/``xla`` the variable is created eagerly in the test, outside every traced
function (one per dtype, shape, kind and device, since XLA cannot change a variable's
shape), captured by the traced builder, assigned the example's initial value before each
call and read again after it; the builders take its key as the static ``slot`` so that
each captured variable gets its own traced function.
"""

import dataclasses

import numpy as np
from hypothesis import given, strategies as st
from hypothesis.extra import numpy as hnp

from suite import compare as cmp, strategies as ss
from suite.behaviours import Floor, behaviour, on
from suite.expectations import expect, expectations, raises
from suite.program import Program

TF_VARIABLE = "https://www.tensorflow.org/api_docs/python/tf/Variable"
RESOURCE_VS_REF = "https://www.tensorflow.org/guide/migrate/tf1_vs_tf2#resourcevariables_instead_of_referencevariables"
RESOURCE_IADD = "https://github.com/tensorflow/tensorflow/blob/v2.21.0/tensorflow/python/ops/resource_variable_ops.py"
SESSION_RUN = "https://www.tensorflow.org/api_docs/python/tf/compat/v1/Session#run"
AUTO_DEPS = "https://www.tensorflow.org/api_docs/python/tf/control_dependencies"
JAX_AT = "https://docs.jax.dev/en/latest/_autosummary/jax.Array.at.html"
TORCH_INPLACE = "https://pytorch.org/docs/stable/tensors.html"
# BaseResourceVariable.__iadd__'s refusal (function/xla wrap it in AutoGraph's "in user code").
NO_IADD = raises("RuntimeError", r"`variable \+= value` with `tf\.Variable`s is not supported")

BEHAVIOUR = behaviour(
    "variable-vs-tensor",
    sources=["000"],
    links=[
        TF_VARIABLE,
        "https://www.tensorflow.org/api_docs/python/tf/compat/v1/scatter_update",
        RESOURCE_VS_REF,
        SESSION_RUN,
        AUTO_DEPS,
        JAX_AT,
        TORCH_INPLACE,
    ],
    floor=Floor(
        "none",
        "Values are x + d, x + 2d, assign/scatter results and int32 seeds, compared exactly (record.equal, "
        "cmp.EXACT) with the closed form and the oracles; the rest are kinds (Variable or Tensor, mutates).",
    ),
)

EXPECT = expectations(
    {
        "add": "rebinds-to-tensor",
        "update": "mutates",
        "unrun_update": "applied",
        "iadd": "rebinds-to-tensor",
        "iadd_v1_ref": "rebinds-to-tensor",
        "v1_ref_kind": "RefVariable",
        "result_kind": "Tensor",
        "seed_variable_dtype": "int32_ref",
        "seed_ref_variable_dtype": "int32_ref",
    },
    expect(
        "update",
        "returns-new",
        framework="jax",
        link=JAX_AT,
        reason="JAX arrays are immutable: x.at[idx].set(u) / .add(d) return a modified copy and leave x as "
        "it was (the 'variable' here is the input array)",
    ),
    expect(
        "unrun_update",
        "no-effect-until-run",
        framework="tensorflow",
        mode="graph",
        link=SESSION_RUN,
        reason="a v1 Session runs only the graph fragment its fetches need: an update op that no fetch "
        "depends on never runs (seeds/000: the op is a recipe until executed); fetching a read "
        "that control-depends on it applies it",
    ),
    expect(
        "iadd",
        NO_IADD,
        framework="tensorflow",
        link=RESOURCE_IADD,
        reason="BaseResourceVariable.__iadd__ raises RuntimeError ('`variable += value` with `tf.Variable`s "
        "is not supported. Use `variable.assign_add(value)` ... or `out = variable + value`'): "
        "tf.Variable is a ResourceVariable in every TF2 mode, the v1 graph included",
    ),
    expect(
        "iadd",
        "mutates",
        framework="torch",
        link=TORCH_INPLACE,
        reason="torch.Tensor.__iadd__ is the in-place add_: t += d writes into the tensor that w and t both name",
    ),
    expect(
        "iadd_v1_ref",
        NO_IADD,
        framework="tensorflow",
        mode="eager|function|xla",
        link=RESOURCE_VS_REF,
        reason="ref variables exist only in v1 graphs: under eager execution (where function/xla variables "
        "are created) use_resource=False is ignored and a ResourceVariable is made, whose += raises",
    ),
    expect(
        "v1_ref_kind",
        "ResourceVariable",
        framework="tensorflow",
        mode="eager|function|xla",
        link=RESOURCE_VS_REF,
        reason="eager variables are always resource variables: tf.compat.v1.Variable(use_resource=False) "
        "ignores the flag outside a v1 graph",
    ),
    expect(
        "seed_variable_dtype",
        "int32",
        framework="tensorflow",
        versions=">=2.0",
        link=RESOURCE_VS_REF,
        reason="the seed (TF1) printed <tf.Variable 'Variable:0' shape=(1,) dtype=int32_ref>, a ref "
        "variable; TF2's tf.Variable, even in a tf.compat.v1 graph, is a ResourceVariable whose "
        "dtype is plain int32 (use_resource=False reproduces int32_ref)",
    ),
)

DTYPES = (np.dtype(np.int32), np.dtype(np.float32))
LENGTHS = (1, 4)
# The update ops; (op, api): scatter_update both as the Variable method and as the v1 function.
UPDATES = (("assign", "method"), ("assign_add", "method"), ("scatter_update", "method"), ("scatter_update", "v1"))


# ---------------------------------------------------------------- strategies
@dataclasses.dataclass(frozen=True)
class State:
    x: np.ndarray  # the variable's initial value, shape (n,)
    delta: np.ndarray  # (n,), nonzero everywhere: x + delta differs from x in every entry
    indices: np.ndarray  # (k,) int32, unique, in [0, n)
    updates: np.ndarray  # (k,): x[indices] + a nonzero offset, so every scattered entry changes

    def added(self):
        return self.x + self.delta

    def scattered(self):
        out = self.x.copy()
        out[self.indices] = self.updates
        return out


def _values(dtype, n, *, nonzero=False):
    if dtype.kind == "i":
        el = st.integers(1, 9) if nonzero else st.integers(-50, 50)
    else:
        el = ss.floats(np.float32, 0.5, 8.0) if nonzero else ss.floats(np.float32, -10.0, 10.0)
    if nonzero:  # magnitudes bounded away from 0, either sign
        return st.tuples(hnp.arrays(dtype, n, elements=el), hnp.arrays(np.bool_, n)).map(
            lambda t: np.where(t[1], -t[0], t[0]).astype(dtype)
        )
    return hnp.arrays(dtype, n, elements=el)


@st.composite
def states(draw) -> State:
    """Small int32/float32 vectors, a nonzero update and unique scatter indices."""
    dtype = draw(st.sampled_from(DTYPES), label="dtype")
    n = draw(st.sampled_from(LENGTHS), label="length")
    x = draw(_values(dtype, n), label="initial")
    delta = draw(_values(dtype, n, nonzero=True), label="delta")
    k = draw(st.integers(1, n), label="scattered")
    indices = draw(hnp.arrays(np.int32, k, elements=st.integers(0, n - 1), unique=True), label="indices")
    updates = (x[indices] + draw(_values(dtype, k, nonzero=True), label="offsets")).astype(dtype)
    return State(x, delta, indices, updates)


def _ref(s: State, op: str):
    return s.scattered() if op == "scatter_update" else s.added()


# ---------------------------------------------------------------- variables per mode
_CAPTURED: dict = {}  # (dtype, shape, kind, device) -> tf.Variable created eagerly, outside any trace


def _slot(runner, x, kind="tf.Variable") -> dict:
    """function/xla: the static ``slot`` naming the captured variable, created here (eagerly) on
    first use and reset to ``x`` before every call; {} in every other mode and framework."""
    if runner.framework != "tensorflow" or runner.mode not in ("function", "xla"):
        return {}
    tf = runner.module
    key = (x.dtype.str, x.shape, kind, runner.device)
    if key not in _CAPTURED:
        with tf.device(runner.device_name):
            init = np.zeros_like(x)
            _CAPTURED[key] = (
                tf.Variable(init) if kind == "tf.Variable" else tf.compat.v1.Variable(init, use_resource=False)
            )
    _CAPTURED[key].assign(x)
    return {"slot": key}


def _held(slot: dict, fallback):
    """What the captured variable holds after the call (read eagerly, outside the function)."""
    return _CAPTURED[slot["slot"]].numpy() if slot else fallback


def _variable(tf, x, slot, kind="tf.Variable"):
    if slot is not None:
        return _CAPTURED[slot]
    if kind == "tf.Variable":
        return tf.Variable(x)
    return tf.compat.v1.Variable(x, use_resource=False)


def _read_after(tf, v, deps):
    """The variable's value once ``deps`` are computed (program order outside a v1 graph)."""
    with tf.control_dependencies([tf.convert_to_tensor(d) for d in deps]):
        return tf.identity(v.read_value())


# ---------------------------------------------------------------- the programs
class Assign(Program):
    """``assign(x + d)``; the TensorFlow spelling takes the variable and ``api`` (ignored)."""

    def tensorflow(tf, v, x, delta, indices, updates, *, api):
        return v.assign(x + delta)

    def jax(jax, x, delta, indices, updates):
        return x.at[:].set(x + delta)

    def torch(torch, x, delta, indices, updates):
        return x.copy_(x + delta)


class AssignAdd(Program):
    def tensorflow(tf, v, x, delta, indices, updates, *, api):
        return v.assign_add(delta)

    def jax(jax, x, delta, indices, updates):
        return x.at[:].add(delta)

    def torch(torch, x, delta, indices, updates):
        return x.add_(delta)


class ScatterUpdate(Program):
    """``api``: the Variable method or the v1 function ``tf.compat.v1.scatter_update``."""

    def tensorflow(tf, v, x, delta, indices, updates, *, api):
        if api == "v1":
            return tf.compat.v1.scatter_update(v, indices, updates)
        return v.scatter_update(tf.IndexedSlices(updates, indices))

    def jax(jax, x, delta, indices, updates):
        return x.at[indices].set(updates)

    def torch(torch, x, delta, indices, updates):
        return x.index_copy_(0, indices.long(), updates)


# The update ops by name: TF mutates the variable, JAX returns a new array, PyTorch mutates in place.
UPDATE_OPS = {"assign": Assign, "assign_add": AssignAdd, "scatter_update": ScatterUpdate}


class Rebind(Program):
    """seeds/000: ``a = a + 1; b = a + 1`` on a Variable ``a``; returns (a, b, the variable after, a is it)."""

    def tensorflow(tf, x, delta, *, slot=None):
        v = _variable(tf, x, slot)
        a = v
        a = a + delta
        b = a + delta
        return a, b, _read_after(tf, v, [a, b]), isinstance(a, tf.Variable)

    def jax(jax, x, delta):
        a = x
        a = a + delta
        b = a + delta
        return a, b, x, a is x

    def torch(torch, x, delta):
        a = x
        a = a + delta
        b = a + delta
        return a, b, x, a is x


class Update(Program):
    """The update op; returns (what the op hands back, the variable read after it). JAX's
    counterparts return new arrays, PyTorch's (copy_, add_, index_copy_) work in place."""

    def tensorflow(tf, x, delta, indices, updates, *, op, api, slot=None):
        v = _variable(tf, x, slot)
        returned = tf.convert_to_tensor(UPDATE_OPS[op].tensorflow(tf, v, x, delta, indices, updates, api=api))
        return returned, _read_after(tf, v, [returned])

    def jax(jax, x, delta, indices, updates, *, op, api):
        return UPDATE_OPS[op].jax(jax, x, delta, indices, updates), x

    def torch(torch, x, delta, indices, updates, *, op, api):
        return UPDATE_OPS[op].torch(torch, x, delta, indices, updates), x


class Unrun(Program):
    """Build the update and drop its result; ``fetch`` reads the variable after it (control dependency)."""

    def tensorflow(tf, x, delta, indices, updates, *, op, api, fetch, slot=None):
        v = _variable(tf, x, slot)
        update = UPDATE_OPS[op].tensorflow(tf, v, x, delta, indices, updates, api=api)
        if fetch:
            return _read_after(tf, v, [update])
        return tf.identity(v.read_value())

    def torch(torch, x, delta, indices, updates, *, op, api, fetch):
        UPDATE_OPS[op].torch(torch, x, delta, indices, updates)
        return x


class Iadd(Program):
    """``w = v; w += d``; returns (w, v after, w is a Variable / w is v)."""

    def tensorflow(tf, x, delta, *, kind="tf.Variable", slot=None):
        v = _variable(tf, x, slot, kind)
        w = v
        w += delta
        return tf.convert_to_tensor(w), _read_after(tf, v, [w]), isinstance(w, tf.Variable)

    tensorflow.exact_shapes = True  # a v1 RefVariable needs a static shape

    def jax(jax, x, delta):
        w = x
        w += delta
        return w, x, w is x

    def torch(torch, x, delta):
        w = x
        w += delta
        return w, x, w is x


VARIABLE_KINDS = ("RefVariable", "ResourceVariable")


class V1RefKind(Program):
    """0 if tf.compat.v1.Variable(use_resource=False) is a RefVariable here, 1 if a ResourceVariable."""

    def tensorflow(tf, x, *, slot=None):
        return VARIABLE_KINDS.index(type(_variable(tf, x, slot, "v1-ref")).__name__)

    tensorflow.exact_shapes = True


class Seed(Program):
    """seeds/000 in one Session run: the initialised value, ``a = a + 1``, ``b = a + 1``, the Variable
    read after both, and the types. ``variable``: the seed's ``tf.Variable([1])`` as written, or the
    TF1 ref variable it printed (``tf.compat.v1.Variable([1], use_resource=False)``)."""

    def tensorflow(tf, *, variable):
        a = tf.Variable([1]) if variable == "tf.Variable" else tf.compat.v1.Variable([1], use_resource=False)
        var = a
        first = tf.identity(var)
        with tf.control_dependencies([first]):  # the seed evaluates a before building a + 1
            a = a + 1
            b = a + 1
        with tf.control_dependencies([a, b]):
            held = tf.identity(var)
        return (
            first,
            a,
            b,
            held,
            type(var).__name__,
            var.dtype.name,
            type(a).__name__,
            repr(a),
            isinstance(a, tf.Tensor) and not isinstance(a, tf.Variable),
            isinstance(b, tf.Tensor),
        )


# ---------------------------------------------------------------- classifiers
def _same(a, b) -> bool:
    return np.asarray(a).shape == np.shape(b) and np.array_equal(a, b)


def rebind_kind(result, held, is_state, x, ref) -> str:
    """``rebinds-to-tensor``: a new non-variable result holding ref, the variable still x."""
    if _same(held, ref):
        return "mutates"
    if not is_state and _same(result, ref) and _same(held, x):
        return "rebinds-to-tensor"
    return "other"


def update_kind(returned, held, x, ref) -> str:
    if _same(held, ref):
        return "mutates"
    if _same(held, x):
        return "returns-new" if _same(returned, ref) else "no-effect"
    return "other"


# ---------------------------------------------------------------- properties
@given(s=states())
def test_add_rebinds_to_tensor_and_leaves_variable_unchanged(subject, oracles, record, s):
    """a = a + d; b = a + d: a is a new Tensor holding x + d, b holds x + 2d, the variable still x."""
    record.example(x=s.x, delta=s.delta)
    slot = _slot(subject, s.x)
    a, b, held, is_state = subject.run(Rebind.of(subject), s.x, s.delta, **slot)
    held_after = _held(slot, held)
    record.equal(name="a", out=a, ref=s.added(), oracle="closed-form")
    record.equal(name="b", out=b, ref=s.added() + s.delta, oracle="closed-form")
    record.check(
        EXPECT,
        add=rebind_kind(a, held_after, bool(is_state), s.x, s.added()),
        result_kind="Variable" if is_state else "Tensor",
    )
    record.against(oracles, Rebind, s.x, s.delta, via="run", got={"a": a, "b": b}, tol=cmp.EXACT)


@given(s=states(), update=st.sampled_from(UPDATES))
def test_update_ops_mutate_the_variable(subject, oracles, record, s, update):
    """assign(x + d), assign_add(d), scatter_update(idx, u): the variable then holds the new value
    (PyTorch copy_/add_/index_copy_ likewise; JAX .at[] returns it and leaves x, declared)."""
    op, api = update
    record.example(x=s.x, delta=s.delta, indices=s.indices, updates=s.updates, op=op, api=api)
    slot = _slot(subject, s.x)
    returned, held = subject.run(Update.of(subject), s.x, s.delta, s.indices, s.updates, op=op, api=api, **slot)
    held = _held(slot, held)
    ref = _ref(s, op)
    record.equal(name=f"returned[{op}:{api}]", out=returned, ref=ref, oracle="closed-form")
    record.check(EXPECT, update=update_kind(returned, held, s.x, ref))
    new = held if subject.framework != "jax" else returned
    got = {f"new value[{op}:{api}]": new, "variable after": ...}
    record.against(
        oracles, Update, s.x, s.delta, s.indices, s.updates, via="run", got=got, tol=cmp.EXACT, op=op, api=api
    )


@on("tensorflow", "torch")
@given(s=states(), update=st.sampled_from(UPDATES))
def test_unrun_update_has_no_effect_until_run(subject, record, s, update):
    """An update op whose result is dropped: no effect in a v1 Session until a fetch depends on it;
    applied at once in eager, tf.function, XLA and PyTorch. Not JAX: it has no mutating op to defer
    (its .at[] updates return new arrays, see test_update_ops_mutate_the_variable)."""
    op, api = update
    record.example(x=s.x, delta=s.delta, indices=s.indices, updates=s.updates, op=op, api=api)
    ref = _ref(s, op)
    held = {}
    for fetch in (False, True):
        slot = _slot(subject, s.x)
        out = subject.run(Unrun.of(subject), s.x, s.delta, s.indices, s.updates, op=op, api=api, fetch=fetch, **slot)
        held[fetch] = _held(slot, out)
        if slot:
            record.equal(
                name=f"read inside the function vs after it[fetch={fetch}]",
                out=out,
                ref=held[fetch],
                oracle="closed-form",
            )
    record.equal(name=f"held after the fetched update[{op}:{api}]", out=held[True], ref=ref, oracle="closed-form")
    kind = (
        "applied"
        if _same(held[False], ref)
        else "no-effect-until-run"
        if _same(held[False], s.x) and _same(held[True], ref)
        else "other"
    )
    record.check(EXPECT, unrun_update=kind)


@given(s=states())
def test_augmented_add_on_a_variable_is_recorded(subject, oracles, record, s):
    """w = v; w += d: TF2 tf.Variable raises RuntimeError (declared), PyTorch mutates v in place
    (declared), JAX rebinds w to a new array."""
    record.example(x=s.x, delta=s.delta)
    slot = _slot(subject, s.x)
    try:
        w, held, is_state = subject.run(Iadd.of(subject), s.x, s.delta, **slot)
    except Exception as e:  # TensorFlow refuses; the refusal is the observation
        record.check(EXPECT, iadd=cmp.error_name(e))
        record.equal(name="variable after a refused +=", out=_held(slot, s.x), ref=s.x, oracle="closed-form")
        return
    held = _held(slot, held)
    record.equal(name="w", out=w, ref=s.added(), oracle="closed-form")
    record.check(EXPECT, iadd=rebind_kind(w, held, bool(is_state), s.x, s.added()))
    for o in oracles:
        try:
            rw, _, _ = o.run(Iadd.of(o), s.x, s.delta)
        except Exception as e:  # noqa: BLE001 - an oracle that refuses has no value to compare
            record.observe(**{f"{o.id}:iadd": cmp.error_name(e)})
            continue
        record.equal(name="w", out=w, ref=rw, oracle=o.id)


@on("tensorflow")
@given(s=states())
def test_augmented_add_on_a_v1_ref_variable_is_recorded(subject, record, s):
    """tf.compat.v1.Variable(use_resource=False): a RefVariable in a v1 graph, where w += d rebinds w
    to a Tensor and leaves the variable; a ResourceVariable (+= raises) elsewhere. TensorFlow only:
    ref variables have no JAX/PyTorch counterpart (test_augmented_add_on_a_variable_is_recorded)."""
    record.example(x=s.x, delta=s.delta)
    slot = _slot(subject, s.x, "v1-ref")
    record.check(EXPECT, v1_ref_kind=VARIABLE_KINDS[int(subject.run(V1RefKind.of(subject), s.x, **slot))])
    slot = _slot(subject, s.x, "v1-ref")
    try:
        w, held, is_state = subject.run(Iadd.of(subject), s.x, s.delta, kind="v1-ref", **slot)
    except Exception as e:  # a ResourceVariable's += refuses
        record.check(EXPECT, iadd_v1_ref=cmp.error_name(e))
        return
    record.equal(name="w", out=w, ref=s.added(), oracle="closed-form")
    record.check(EXPECT, iadd_v1_ref=rebind_kind(w, _held(slot, held), bool(is_state), s.x, s.added()))


# ---------------------------------------------------------------- seed examples
@on("tensorflow", modes=("graph",))
@given(variable=st.just("tf.Variable"))
def test_seed_a_plus_one_in_a_v1_session(subject, record, variable):
    """seeds/000 as written in a v1 Session: a.eval() = [1]; a = a + 1 -> [2], a Tensor; b = a + 1 -> [3];
    the original Variable still holds [1]. Graph only: the seed is v1 Session code. Its printed types
    (int32_ref) differ from TF2's (ResourceVariable, int32): declared; use_resource=False reproduces them."""
    record.example(variable=variable)
    first, a, b, held, vtype, vdtype, atype, arepr, a_tensor, b_tensor = subject.run(
        Seed.of(subject), variable=variable
    )
    one = np.array([1], np.int32)
    record.equal(name="a.eval() after init", out=first, ref=one, oracle="closed-form")
    record.equal(name="a = a + 1", out=a, ref=one + 1, oracle="closed-form")
    record.equal(name="b = a + 1", out=b, ref=one + 2, oracle="closed-form")
    record.equal(name="the Variable afterwards", out=held, ref=one, oracle="closed-form")
    record.observe(variable_type=vtype, tensor_type=atype, tensor_repr=arepr)
    record.check(
        EXPECT,
        seed_variable_dtype=vdtype,
        result_kind="Tensor" if a_tensor and b_tensor else "other",
        add=rebind_kind(a, held, not a_tensor, one, one + 1),
    )
    first, a, b, held, vtype, vdtype, atype, arepr, a_tensor, b_tensor = subject.run(
        Seed.of(subject), variable="use_resource=False"
    )
    record.equal(name="a + 1 [use_resource=False]", out=a, ref=one + 1, oracle="closed-form")
    record.equal(name="the RefVariable afterwards", out=held, ref=one, oracle="closed-form")
    record.observe(ref_variable_type=vtype)
    record.check(EXPECT, seed_ref_variable_dtype=vdtype)
