"""Control dependencies: when a variable update runs, and which value a later read sees.

Source: seeds/001 ("Control dependencies. What will be printed?"). The v1 puzzle
``x = tf.Variable(0.0); x_plus_1 = tf.assign_add(x, 1); with tf.control_dependencies
([x_plus_1]): y = x`` prints "only zeros" over five ``session.run(y)``: ``y = x`` builds no
op inside the context, and fetching the variable runs the read built with the variable,
which does not wait for (or trigger) the ``assign_add``. The seed's two solutions,
``y = tf.identity(x)`` (an op built inside the context) and ``y = x_plus_1``, print
1, 2, 3, 4, 5.

Measured (TF 2.21, CPU), the puzzle as written in a v1 Session (``graph`` mode): ``tf.Variable``
in a Graph is a ``ResourceVariable`` in TF2 and still prints 0, 0, 0, 0, 0 (read op built at
creation, no control input), the solutions 1..5; with ``tf.compat.v1.Variable(...,
use_resource=False)`` (a ``RefVariable``, the seed's 2019 kind) the same three sequences:
no difference between the kinds. Sequential Python (``x += 1; y = x``) prints 1..5, so
``y = x`` in a Session is a declared divergence. Run in TF2 modes (variable created outside
the step, reset, five calls) all three spellings print 1..5 in eager, ``tf.function`` and XLA:
eager runs each op when called and ``tf.function`` adds automatic control dependencies.

Random programs (hypothesis) of ``assign``/``assign_add``/``assign_sub`` (method or
``tf.compat.v1`` function; the result used through ``tf.identity`` or never used) and
reads (``read_value()``/``tf.identity(v)``) on 1-3 variables, ended by an unused
``assign_add(v0, 1000)`` and a read of v0: eager, ``tf.function`` and XLA give exactly the
sequential Python values, and the variables hold the sequential final state after the call
(unused updates ran). A v1 Session fetching the reads (TF2 resource variables; automatic
control dependencies are not added to v1 graphs) runs only the fetched ops: unused updates
never run, the tail read never sees +1000, and reads race with fetched updates (measured
with 8 programs of 6 steps on 2 variables, 200 runs each: those with a fetched update gave 2
to 7 distinct results each). What is asserted there is the
weaker, deterministic property that the reads are *some* order of the fetched ops with
unused updates skipped (``fetched-only-any-order``), declared with the
``tf.compat.v1.wrap_function`` docs. ``Variable.assign_add`` returns "the updated variable"
itself, not a snapshot: reading the result after a later ``assign`` sees the later value in
eager, tf.function and XLA, as PyTorch's ``add_`` returns ``self``.

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
from suite.behaviours import behaviour, on
from suite.expectations import expect, expectations
from suite.frameworks.tf_runner import in_v1_graph

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
            "zeros",
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


# ---------------------------------------------------------------- the native functions
_VARIABLES = {}


def _variables(tf, inits, *, sig, reset=True):
    """One variable per row of ``inits``: module-level (reset to ``inits``) or, in a v1 graph, new."""
    if in_v1_graph():
        return [tf.compat.v1.Variable(inits[i]) for i in range(sig[2])]
    out = []
    for i in range(sig[2]):
        key = (sig, i)
        if key not in _VARIABLES:
            with tf.init_scope():
                _VARIABLES[key] = tf.Variable(tf.zeros(sig[1], sig[0]), name=f"v{i}")
        if reset:
            _VARIABLES[key].assign(inits[i])
        out.append(_VARIABLES[key])
    return out


def tensorflow_program(tf, inits, consts, *, steps, sig):
    """The drawn program, spelled as a user would; returns the used results in program order."""
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


tensorflow_program.exact_shapes = True  # a v1 tf.Variable needs a static shape


def tensorflow_state(tf, inits, *, sig):
    """The variables as the last program left them (read after, outside that call)."""
    return tuple(tf.identity(v) for v in _variables(tf, inits, sig=sig, reset=False))


def tensorflow_puzzle_reset(tf, zero, *, variant, sig):
    (x,) = _variables(tf, zero[None], sig=sig + (variant,))
    return tf.identity(x)


def tensorflow_puzzle_step(tf, zero, *, variant, sig):
    """seeds/001 puzzle body in a TF2 mode: one call is one ``session.run(y)``."""
    (x,) = _variables(tf, zero[None], sig=sig + (variant,), reset=False)
    x_plus_1 = tf.compat.v1.assign_add(x, 1)
    with tf.control_dependencies([x_plus_1]):
        y = x if variant == "y = x" else tf.identity(x) if variant == "y = tf.identity(x)" else x_plus_1
    return y


def tensorflow_v1_puzzle(tf, *, variant, use_resource, device):
    """seeds/001 as written (tf.Variable -> tf.compat.v1.Variable, tf.assign_add ->
    tf.compat.v1.assign_add): five ``session.run(y)`` in one Session."""
    with tf.Graph().as_default(), tf.device(device):
        x = tf.compat.v1.Variable(0.0, use_resource=use_resource)
        x_plus_1 = tf.compat.v1.assign_add(x, 1)

        with tf.control_dependencies([x_plus_1]):
            y = x if variant == "y = x" else tf.identity(x) if variant == "y = tf.identity(x)" else x_plus_1
        init = tf.compat.v1.initialize_all_variables()

        with tf.compat.v1.Session() as session:
            init.run()
            printed = [session.run(y) for i in range(5)]
    return np.asarray(printed), type(x).__name__


def tensorflow_alias(tf, a, c, d, *, sig):
    (v,) = _variables(tf, a[None], sig=sig)
    r = v.assign_add(c)
    v.assign(d)
    return r


def torch_alias(torch, a, c, d):
    v = a.clone()
    r = v.add_(c)
    v.copy_(d)
    return r


ALIAS = {"tensorflow": tensorflow_alias, "torch": torch_alias}


# ---------------------------------------------------------------- oracles, classifiers
@dataclasses.dataclass(frozen=True)
class Program:
    steps: tuple  # ("read", var, how) | (op, var, const_index, used, how); hashable (static)
    inits: np.ndarray  # (nvars, *shape)
    consts: np.ndarray  # (nconsts, *shape)


def sequential(p: Program):
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


def fetched_only_any_order(p: Program, outs) -> bool:
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


def reads_kind(p: Program, outs) -> str:
    ref, _ = sequential(p)
    if len(outs) == len(ref) and all(np.array_equal(o, r) for o, r in zip(outs, ref)):
        return "sequential"
    return "fetched-only-any-order" if fetched_only_any_order(p, outs) else "other"


def unused_kind(p: Program, outs) -> str:
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
        else "zeros"
        if np.array_equal(printed, np.zeros(5))
        else "other"
    )


# ---------------------------------------------------------------- strategies
def _ints(dtype, shape):
    return hnp.arrays(dtype, shape, elements=st.integers(-8, 8).map(float))


@st.composite
def programs(draw, *, max_steps=6) -> Program:
    """1-3 variables, 1-6 steps, then the tail: an unused assign_add(v0, 1000) and a read of v0."""
    dtype, shape = draw(ss.float_dtypes()), draw(st.sampled_from(SHAPES))
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
    return Program(tuple(steps), draw(_ints(dtype, (nvars,) + shape), label="inits"), consts)


def _sig(subject, arr, nvars):
    return (arr.dtype.name, tuple(arr.shape[1:]), nvars, subject.device)


# ---------------------------------------------------------------- properties
@on("tensorflow")
@given(p=programs())
def test_random_programs_follow_sequential_semantics(subject, record, p):
    """Reads of a random assign/assign_add/assign_sub program equal sequential Python in eager,
    tf.function and XLA, and unused updates run; a v1 Session runs only the fetched ops, in some
    order (declared). TensorFlow only: JAX has no variables, PyTorch eager no deferred ops."""
    record.example(inits=p.inits, consts=p.consts, steps=p.steps)
    sig = _sig(subject, p.inits, len(p.inits))
    outs = subject.run(tensorflow_program, p.inits, p.consts, steps=p.steps, sig=sig)
    record.check(EXPECT, reads=reads_kind(p, outs), unused_updates=unused_kind(p, outs))
    if subject.mode != "graph":
        ref, final = sequential(p)
        for j, (o, r) in enumerate(zip(outs, ref)):
            record.equal(name=f"result[{j}]", out=o, ref=r, oracle="closed-form")
        state = subject.run(tensorflow_state, p.inits, sig=sig)
        for i, (s, f) in enumerate(zip(state, final)):
            record.equal(name=f"final v{i}", out=s, ref=f, oracle="closed-form")


@on("tensorflow", "torch", modes=("eager", "function", "xla"))
@given(a=_ints(np.float32, ()), c=_ints(np.float32, ()), k=st.integers(1, 5))
def test_assign_result_is_the_updated_variable(subject, record, a, c, k):
    """r = v.assign_add(c); v.assign(d); r reads d: the result is the variable, not a snapshot
    (PyTorch add_ returns self). Not in a v1 Session: fetching r with the later assign races."""
    d = np.float32(a + c + k)
    record.example(a=a, c=c, d=d)
    fn = ALIAS[subject.framework]
    static = {"sig": _sig(subject, a[None], 1) + ("alias",)} if subject.framework == "tensorflow" else {}
    out = subject.run(fn, a, c, d, **static)
    record.check(
        EXPECT, assign_result="the-variable" if out == d else "value-after-update" if out == a + c else "other"
    )
    record.equal(name="r", out=out, ref=d, oracle="closed-form")


# ---------------------------------------------------------------- seed examples
@on("tensorflow")
@given(zero=st.just(np.float32(0.0)))
def test_seed_what_will_be_printed(subject, record, zero):
    """seeds/001, five steps: y = x prints only zeros in a v1 Session (ResourceVariable and
    RefVariable alike), y = tf.identity(x) and y = x_plus_1 print 1..5; in eager, tf.function
    and XLA all three print 1..5. TensorFlow only: the puzzle is about TF's graph semantics."""
    record.example(zero=zero)
    for variant in VARIANTS:
        if subject.mode == "graph":
            for kind, use_resource in KINDS.items():
                printed, cls = tensorflow_v1_puzzle(
                    subject.module, variant=variant, use_resource=use_resource, device=subject.device_name
                )
                record.check(EXPECT, **{f"variable kind [{kind}]": cls, f"{variant} [{kind}]": printed_kind(printed)})
                record.observe(**{f"printed {variant} [{kind}]": printed})
        else:
            sig = _sig(subject, zero[None], 1)
            subject.run(tensorflow_puzzle_reset, zero, variant=variant, sig=sig)
            printed = [subject.run(tensorflow_puzzle_step, zero, variant=variant, sig=sig) for _ in range(5)]
            record.check(EXPECT, **{f"{variant} [tf.Variable]": printed_kind(printed)})
            record.observe(**{f"printed {variant} [tf.Variable]": np.asarray(printed)})
