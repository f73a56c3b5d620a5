"""Control dependencies: when a variable update runs, and which value a later read sees.

Source: seeds/001 ("Control dependencies. What will be printed?"). The v1 puzzle
``x = tf.Variable(0.0); x_plus_1 = tf.assign_add(x, 1); with tf.control_dependencies
([x_plus_1]): y = x`` prints "only zeros" over five ``session.run(y)``: ``y = x`` builds no
op inside the context, and fetching the variable runs the read built with the variable,
which does not wait for (or trigger) the ``assign_add``. The seed's two solutions,
``y = tf.identity(x)`` (an op built inside the context) and ``y = x_plus_1``, print
1, 2, 3, 4, 5. The puzzle runs as written in a v1 Session (``graph`` mode), with
``tf.Variable`` and with the seed's 2019 ``RefVariable`` (``use_resource=False``), and in
the TF2 modes as five calls of one step on a variable created outside it.

Random programs (hypothesis) of ``assign``/``assign_add``/``assign_sub`` (method or
``tf.compat.v1`` function; the result used through ``tf.identity`` or never used) and
reads (``read_value()``/``tf.identity(v)``) on 1-3 variables, ended by an unused
``assign_add(v0, 1000)`` and a read of v0, are compared with sequential Python: the reads,
and the variables' state after the call (did the unused updates run?). Reading the result
of ``Variable.assign_add`` after a later ``assign`` tells whether it is "the updated
variable" itself or a snapshot (PyTorch's ``add_`` returns ``self``).

Declared surprises:

- In a v1 Session ``y = x`` prints only zeros, for ResourceVariable and RefVariable alike.
- A v1 Session runs only the fetched ops (v1 graphs get no automatic control dependencies):
  unused updates never run, and fetched reads race with fetched updates, so what is asserted is
  that the reads are *some* order of the fetched ops (``fetched-only-any-order``).

JAX has no mutable variables (``.at[].add`` returns a new array) and PyTorch eager runs every
in-place op when called, so the ordering tests are TensorFlow-only (``@on("tensorflow")``);
the returned-alias test has a PyTorch row. Variables of eager/function/xla live at module
level per (dtype, shape, device) and are reset by ``assign`` at the start of each program;
in a v1 graph the harness creates and initialises them from the fed inputs.
"""

import dataclasses

import numpy as np
from hypothesis import given, strategies as st
from hypothesis.extra import numpy as hnp

from suite import strategies as ss
from suite.behaviours import Floor, behaviour, on
from suite.expectations import expect, expectations
from suite.frameworks.tf_runner import Variables, in_v1_graph
from suite.program import Program

CONTROL_DEPS = "https://www.tensorflow.org/api_docs/python/tf/control_dependencies"
GRAPH_CONTROL_DEPS = "https://www.tensorflow.org/api_docs/python/tf/Graph#control_dependencies"
WRAP_FUNCTION = "https://www.tensorflow.org/api_docs/python/tf/compat/v1/wrap_function"
ASSIGN_ADD = "https://www.tensorflow.org/api_docs/python/tf/Variable#assign_add"

BEHAVIOUR = behaviour(
    "control-dependencies",
    sources=["001"],
    links=[
        CONTROL_DEPS,
        GRAPH_CONTROL_DEPS,
        "https://www.tensorflow.org/api_docs/python/tf/function",
        WRAP_FUNCTION,
        ASSIGN_ADD,
        "https://www.tensorflow.org/api_docs/python/tf/compat/v1/Session#run",
        "https://pytorch.org/docs/stable/generated/torch.Tensor.add_.html",
    ],
    floor=Floor(
        "none",
        "Variables hold small integers (updates by integer constants, |values| <= 1000, exact in every float "
        "dtype): reads, final states, the puzzle's printed values and the returned alias are compared exactly "
        "(record.equal, np.array_equal), and everything else observed is a kind.",
    ),
)

VARIANTS = ("y = x", "y = tf.identity(x)", "y = x_plus_1")
KINDS = {"tf.Variable": None, "use_resource=False": False}  # the seed as written; the TF1 RefVariable
PUZZLE_KEYS = [f"{v} [{k}]" for v in VARIANTS for k in KINDS]
UNUSED_IN_SESSION = (
    "Session.run runs only the graph fragment the fetches need, and v1 graphs get no "
    "automatic control dependencies: 'wrap_function is closer to the behavior of session.run "
    "... It will not run any operations unless they are required to compute the function's "
    "outputs', while tf.function 'runs all stateful operations and sequences operations'"
)
EXPECT = expectations(
    {
        **{k: "1..5" for k in PUZZLE_KEYS},
        "variable kind [tf.Variable]": "ResourceVariable",
        "variable kind [use_resource=False]": "RefVariable",
        "reads": "sequential",
        "unused_updates": "run",
        "assign_result": "the-variable",
    },
    *[
        expect(
            f"y = x [{k}]",
            "zero",
            framework="tensorflow",
            mode="graph",
            link=GRAPH_CONTROL_DEPS,
            reason="'The control dependencies context applies only to ops that are constructed within the "
            "context. Merely using an op or tensor in the context does not add a control dependency': "
            "y = x builds nothing, session.run(y) runs the variable's own read, never the assign_add "
            "(seeds/001: 'Only zeros'); the same for ResourceVariable and RefVariable",
        )
        for k in KINDS
    ],
    expect(
        "reads",
        "fetched-only-any-order",
        framework="tensorflow",
        mode="graph",
        link=WRAP_FUNCTION,
        reason=UNUSED_IN_SESSION + "; nodes are not executed in program order, so fetched reads race with "
        "fetched updates (several results per program over repeated runs)",
    ),
    expect(
        "unused_updates", "not-run", framework="tensorflow", mode="graph", link=WRAP_FUNCTION, reason=UNUSED_IN_SESSION
    ),
)

UPDATES = ("assign", "assign_add", "assign_sub")
TAIL = 1000  # the tail's unused assign_add: every other value stays below 100 in magnitude
SHAPES = ((), (2,))  # one variable set (and one XLA shape) per dtype x shape


# ---------------------------------------------------------------- strategies
@dataclasses.dataclass(frozen=True)
class UpdateProgram:
    """A drawn program of variable updates and reads."""

    steps: tuple  # ("read", var, how) | (op, var, const_index, used, how); hashable (static)
    inits: np.ndarray  # (nvars, *shape)
    consts: np.ndarray  # (nconsts, *shape)


def _ints(dtype, shape):
    return hnp.arrays(dtype, shape, elements=st.integers(-8, 8).map(float))


@st.composite
def programs(draw, *, max_steps=6) -> UpdateProgram:
    """1-3 variables, 1-6 steps, then the tail: an unused assign_add(v0, 1000) and a read of v0."""
    dtype, shape = draw(ss.dtypes_and_shapes(shapes=SHAPES), label="dtype, shape")
    nvars = draw(st.integers(1, 3), label="nvars")
    step = st.one_of(
        st.tuples(st.just("read"), st.integers(0, nvars - 1), st.sampled_from(["read_value", "identity"])),
        st.tuples(
            st.sampled_from(UPDATES),
            st.integers(0, nvars - 1),
            st.just(0),
            st.booleans(),
            st.sampled_from(["method", "tf.compat.v1"]),
        ),
    )
    body = draw(st.lists(step, min_size=1, max_size=max_steps), label="steps")
    steps, k = [], 0
    for s in body:  # one constant per update
        if s[0] != "read":
            s, k = (s[0], s[1], k, s[3], s[4]), k + 1
        steps.append(s)
    steps += [("assign_add", 0, k, False, "method"), ("read", 0, "read_value")]
    consts = draw(_ints(dtype, (k,) + shape), label="consts")
    consts = np.concatenate([consts, np.full((1,) + shape, TAIL, dtype)])
    return UpdateProgram(tuple(steps), draw(_ints(dtype, (nvars,) + shape), label="inits"), consts)


def _sig(subject, arr, nvars):
    return (arr.dtype.name, tuple(arr.shape[1:]), nvars, subject.device)


# ---------------------------------------------------------------- the programs
VARIABLES = Variables()


def _variables(tf, inits, *, sig, reset=True):
    """One variable per row of ``inits`` (``sig[2]`` of them) from ``VARIABLES``: set to
    ``inits``, or with ``reset=False`` as the last call left them; in a v1 graph, new ones."""
    if reset or in_v1_graph():
        return [VARIABLES.get(tf, inits[i], name=f"v{i}") for i in range(sig[2])]
    return [VARIABLES.existing(tf, f"v{i}", inits[i]) for i in range(sig[2])]


class Steps(Program):
    """The drawn program, spelled as a user would; returns the used results in program order."""

    def tensorflow(tf, inits, consts, *, steps, sig):
        vs, outs = _variables(tf, inits, sig=sig), []
        for step in steps:
            v = vs[step[1]]
            if step[0] == "read":
                outs.append(v.read_value() if step[2] == "read_value" else tf.identity(v))
                continue
            op, _, k, used, how = step
            r = getattr(v, op)(consts[k]) if how == "method" else getattr(tf.compat.v1, op)(v, consts[k])
            if used:
                outs.append(tf.identity(r))
        return tuple(outs)

    tensorflow.exact_shapes = True  # a v1 tf.Variable needs a static shape


class State(Program):
    """The variables as the last program left them (read after, outside that call)."""

    def tensorflow(tf, inits, *, sig):
        return tuple(tf.identity(v) for v in _variables(tf, inits, sig=sig, reset=False))


def _y_is_x(tf, x, x_plus_1):
    return x


def _y_is_identity(tf, x, x_plus_1):
    return tf.identity(x)


def _y_is_x_plus_1(tf, x, x_plus_1):
    return x_plus_1


# variant -> what the puzzle's ``y`` is, built inside ``with tf.control_dependencies([x_plus_1])``
Y = {"y = x": _y_is_x, "y = tf.identity(x)": _y_is_identity, "y = x_plus_1": _y_is_x_plus_1}


class PuzzleReset(Program):
    def tensorflow(tf, zero, *, variant, sig):
        (x,) = _variables(tf, zero[None], sig=sig + (variant,))
        return tf.identity(x)


class PuzzleStep(Program):
    """seeds/001 puzzle body in a TF2 mode: one call is one ``session.run(y)``."""

    def tensorflow(tf, zero, *, variant, sig):
        (x,) = _variables(tf, zero[None], sig=sig + (variant,), reset=False)
        x_plus_1 = tf.compat.v1.assign_add(x, 1)
        with tf.control_dependencies([x_plus_1]):
            y = Y[variant](tf, x, x_plus_1)
        return y


def v1_puzzle(tf, *, variant, use_resource, device):
    """seeds/001 as written (tf.Variable -> tf.compat.v1.Variable, tf.assign_add ->
    tf.compat.v1.assign_add): five ``session.run(y)`` in one Session."""
    with tf.Graph().as_default(), tf.device(device):
        x = tf.compat.v1.Variable(0.0, use_resource=use_resource)
        x_plus_1 = tf.compat.v1.assign_add(x, 1)

        with tf.control_dependencies([x_plus_1]):
            y = Y[variant](tf, x, x_plus_1)
        init = tf.compat.v1.initialize_all_variables()

        with tf.compat.v1.Session() as session:
            init.run()
            printed = [session.run(y) for i in range(5)]
    return np.asarray(printed), type(x).__name__


class Alias(Program):
    """r = v.assign_add(c); v.assign(d); return r (PyTorch: r = v.add_(c); v.copy_(d))."""

    def tensorflow(tf, a, c, d, *, sig):
        (v,) = _variables(tf, a[None], sig=sig)
        r = v.assign_add(c)
        v.assign(d)
        return r

    def torch(torch, a, c, d):
        v = a.clone()
        r = v.add_(c)
        v.copy_(d)
        return r


# ---------------------------------------------------------------- oracles, classifiers
def sequential(p: UpdateProgram):
    """Python semantics: each step in order. Returns (used results, final state)."""
    state, outs = [x.copy() for x in p.inits], []
    for step in p.steps:
        if step[0] == "read":
            outs.append(state[step[1]].copy())
            continue
        op, i, k, used, _ = step
        c = p.consts[k]
        state[i] = c.copy() if op == "assign" else state[i] + c if op == "assign_add" else state[i] - c
        if used:
            outs.append(state[i].copy())
    return outs, state


def fetched_only_any_order(p: UpdateProgram, outs) -> bool:
    """Are ``outs`` what running only the fetched ops (reads, used updates and their
    snapshots, which follow their update) in *some* order gives, unused updates skipped?
    Variables are independent; per variable, a search over (ops done, value)."""
    per_var, n = {}, 0
    for step in p.steps:
        items = per_var.setdefault(step[1], [])
        if step[0] == "read":
            items.append(("read", n, None))
            n += 1
        elif step[3]:
            items.append(("update", step[0], p.consts[step[2]]))
            items.append(("read", n, len(items) - 1))
            n += 1  # the snapshot, after its update
    for i, items in per_var.items():
        seen = set()

        def search(done, value, items=items, seen=seen):
            if done == (1 << len(items)) - 1:
                return True
            if (done, value.tobytes()) in seen:
                return False
            seen.add((done, value.tobytes()))
            for j, (kind, a, b) in enumerate(items):
                if done >> j & 1:
                    continue
                if kind == "update":
                    new = b.copy() if a == "assign" else value + b if a == "assign_add" else value - b
                    if search(done | 1 << j, new):
                        return True
                elif (b is None or done >> b & 1) and np.array_equal(outs[a], value):
                    if search(done | 1 << j, value):
                        return True
            return False

        if not search(0, p.inits[i]):
            return False
    return True


def reads_kind(p: UpdateProgram, outs) -> str:
    ref, _ = sequential(p)
    if len(outs) == len(ref) and all(np.array_equal(o, r) for o, r in zip(outs, ref)):
        return "sequential"
    return "fetched-only-any-order" if fetched_only_any_order(p, outs) else "other"


def unused_kind(p: UpdateProgram, outs) -> str:
    """The tail ``assign_add(v0, 1000)`` is never used: did the tail read see it?"""
    ref, _ = sequential(p)
    if np.array_equal(outs[-1], ref[-1]):
        return "run"
    return "not-run" if np.all(np.abs(outs[-1]) < TAIL / 2) else "other"


def printed_kind(printed) -> str:
    printed = np.asarray(printed)
    return (
        "1..5"
        if np.array_equal(printed, np.arange(1, 6))
        else "zero"
        if np.array_equal(printed, np.zeros(5))
        else "other"
    )


# ---------------------------------------------------------------- properties
@on("tensorflow")  # JAX has no variables, PyTorch eager no deferred ops
@given(p=programs())
def test_random_programs_follow_sequential_semantics(subject, record, p):
    """Reads equal sequential Python and unused updates run; a v1 Session runs only the fetched ops."""
    record.example(inits=p.inits, consts=p.consts, steps=p.steps)
    sig = _sig(subject, p.inits, len(p.inits))
    outs = subject.run(Steps.of(subject), p.inits, p.consts, steps=p.steps, sig=sig)
    record.check(EXPECT, reads=reads_kind(p, outs), unused_updates=unused_kind(p, outs))
    if subject.mode != "graph":
        ref, final = sequential(p)
        for j, (o, r) in enumerate(zip(outs, ref)):
            record.equal(name=f"result[{j}]", out=o, ref=r, oracle="closed-form")
        state = subject.run(State.of(subject), p.inits, sig=sig)
        for i, (s, f) in enumerate(zip(state, final)):
            record.equal(name=f"final v{i}", out=s, ref=f, oracle="closed-form")


@on("tensorflow", "torch", modes=("eager", "function", "xla"))  # a v1 Session fetching r races with the assign
@given(a=_ints(np.float32, ()), c=_ints(np.float32, ()), k=st.integers(1, 5))
def test_assign_result_is_the_updated_variable(subject, record, a, c, k):
    """r = v.assign_add(c); v.assign(d): r reads d, the variable itself (PyTorch add_ returns self)."""
    d = np.float32(a + c + k)
    record.example(a=a, c=c, d=d)
    fn = Alias.of(subject)
    static = {"sig": _sig(subject, a[None], 1) + ("alias",)} if subject.framework == "tensorflow" else {}
    out = subject.run(fn, a, c, d, **static)
    record.check(
        EXPECT, assign_result="the-variable" if out == d else "value-after-update" if out == a + c else "other"
    )
    record.equal(name="r", out=out, ref=d, oracle="closed-form")


# ---------------------------------------------------------------- seed examples
@on("tensorflow")  # the puzzle is about TF's graph semantics
@given(zero=st.just(np.float32(0.0)))
def test_seed_what_will_be_printed(subject, record, zero):
    """seeds/001, five session.run(y): y = x prints zeros in a v1 Session, the two solutions print 1..5."""
    record.example(zero=zero)
    for variant in VARIANTS:
        if subject.mode == "graph":
            for kind, use_resource in KINDS.items():
                printed, cls = v1_puzzle(
                    subject.module, variant=variant, use_resource=use_resource, device=subject.device_name
                )
                record.check(EXPECT, **{f"variable kind [{kind}]": cls, f"{variant} [{kind}]": printed_kind(printed)})
                record.observe(**{f"printed {variant} [{kind}]": printed})
        else:
            sig = _sig(subject, zero[None], 1)
            subject.run(PuzzleReset.of(subject), zero, variant=variant, sig=sig)
            printed = [subject.run(PuzzleStep.of(subject), zero, variant=variant, sig=sig) for _ in range(5)]
            record.check(EXPECT, **{f"{variant} [tf.Variable]": printed_kind(printed)})
            record.observe(**{f"printed {variant} [tf.Variable]": np.asarray(printed)})
