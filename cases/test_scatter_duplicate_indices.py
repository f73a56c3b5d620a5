"""Scatter updates with repeated indices: the center-loss update accumulates over duplicate labels.

Source: seeds/001 ("Operations by themselves", Center Loss). The class centers move by
``c_j <- c_j - alpha * sum_i [y_i=j] (c_j - x_i) / (1 + sum_i [y_i=j])``, written per sample
as ``diff_i = alpha * (c_{y_i} - x_i) / (1 + n_{y_i})`` and
``update_centers_op = tf.scatter_sub(centers, label, diff)``: with repeated labels the
formula is right only if the scatter *accumulates* duplicates. Each mechanism's result is
classified against the closed form (``np.add.at``) as ``accumulate``, ``last-wins`` or
``first-wins`` (one write per class kept), or ``raises:<Error>``. Centers are drawn in
[1.5, 2.5] and x in [-1, 1] (distinct), so every per-sample step has the same sign and
differs from its class-mates: the three readings never coincide. The seed's second
point: the update is an independent op, so a v1 Session must run it explicitly
(``sess.run([train_op, update_centers_op])``); running only the train op leaves the
centers unchanged (``not-run``/``run``).

Measured (TF 2.21, JAX 0.10.2, PyTorch 2.13, CPU): ``tf.compat.v1.scatter_sub`` (resource
variable, and with ``use_resource=False`` a v1 RefVariable in ``graph`` mode, the seed's
2019 kernel), ``Variable.scatter_sub`` and ``tf.tensor_scatter_nd_sub`` accumulate in
every mode, as do JAX ``.at[].add``/``.at[].subtract`` and PyTorch ``index_add_``.
PyTorch ``x[idx] -= v`` is ``x[idx] = x[idx] - v``, an ``index_put_`` with
accumulate=False: each write is ``c_j - diff_i`` and the *last* one wins (seed example:
class 0 moves to 0.875 instead of 1.625); the docs call it undefined, so it is declared.
A v1 Session fetching only the train op leaves the centers unchanged (``not-run``); eager,
``tf.function`` and XLA run the update although its result is unused (automatic control
dependencies keep every stateful op of a function).

Variables: a v1 graph builds them and the harness re-initialises them from the fed inputs
before every run; elsewhere each (name, device, dtype, shape) gets one variable created eagerly
(``tf.init_scope``) on first use and assigned the inputs at the start of every call. A
``tf.function`` may create variables only on its first trace and XLA cannot give a
variable a new shape, so TF builders take the input signature as a static ``sig``: one
function, one trace, per dtype and shape. In eager ``use_resource=False`` is ignored
(``ResourceVariable``), and ``function``/``xla`` share that eager creation.
"""

import dataclasses

import numpy as np
from hypothesis import given, strategies as st
from hypothesis.extra import numpy as hnp

from suite import compare as cmp, strategies as ss
from suite.behaviours import behaviour, on
from suite.expectations import expect, expectations
from suite.frameworks.tf_runner import in_v1_graph

V1_SCATTER_SUB = "https://www.tensorflow.org/api_docs/python/tf/compat/v1/scatter_sub"
TORCH_INDEX_PUT = "https://pytorch.org/docs/stable/generated/torch.Tensor.index_put_.html"
SESSION_RUN = "https://www.tensorflow.org/api_docs/python/tf/compat/v1/Session#run"
V1_VARIABLE = "https://www.tensorflow.org/api_docs/python/tf/compat/v1/Variable"
JAX_AT = "https://docs.jax.dev/en/latest/_autosummary/jax.Array.at.html"

BEHAVIOUR = behaviour(
    "scatter-duplicate-indices",
    sources=["001"],
    links=[
        V1_SCATTER_SUB,
        "https://www.tensorflow.org/api_docs/python/tf/Variable#scatter_sub",
        "https://www.tensorflow.org/api_docs/python/tf/tensor_scatter_nd_sub",
        JAX_AT,
        "https://pytorch.org/docs/stable/generated/torch.Tensor.index_add_.html",
        TORCH_INDEX_PUT,
        SESSION_RUN,
        "https://www.tensorflow.org/api_docs/python/tf/control_dependencies",
    ],
)

V1_REF = "tf.compat.v1.scatter_sub(use_resource=False)"
MECHANISMS = {
    "tensorflow": ("tf.compat.v1.scatter_sub", V1_REF, "Variable.scatter_sub", "tf.tensor_scatter_nd_sub"),
    "jax": ("x.at[].add", "x.at[].subtract"),
    "torch": ("index_add_", "x[idx] -= v"),
}
ORACLE_SPELLING = {"jax": "x.at[].add", "torch": "index_add_"}  # the oracles' accumulating spelling

EXPECT = expectations(
    {
        **{m: "accumulate" for ms in MECHANISMS.values() for m in ms},
        "v1 variable kind": "RefVariable",
        "update_unfetched": "run",
        "update_fetched": "run",
    },
    expect(
        "x[idx] -= v",
        "last-wins",
        framework="torch",
        link=TORCH_INDEX_PUT,
        reason="x[idx] -= v is x[idx] = x[idx] - v, an index_put_ with accumulate=False: every write is "
        "c_j - diff_i and one of them survives (the last, on CPU); the docs call the result "
        "undefined for duplicate indices. index_add_ (or index_put_(accumulate=True)) accumulates",
    ),
    expect(
        "x.at[].subtract",
        "raises:AttributeError",
        framework="jax",
        versions="<=0.4.30",
        link=JAX_AT,
        reason="the .at[] helper has no subtract method in JAX 0.4.30 (the newest JAX beside TF 2.12-2.17, "
        "which need NumPy < 2; measured there: AttributeError); later releases add it, accumulating "
        "like .at[].add. .at[].add(-v) is the spelling that works on every version",
    ),
    expect(
        "v1 variable kind",
        "ResourceVariable",
        framework="tensorflow",
        mode="eager|function|xla",
        link=V1_VARIABLE,
        reason="eager variables are always resource variables: use_resource=False is ignored "
        "(function/xla create their variables eagerly under init_scope)",
    ),
    expect(
        "update_unfetched",
        "not-run",
        framework="tensorflow",
        mode="graph",
        link=SESSION_RUN,
        reason="Session.run runs only the graph fragment the fetches need; the centers update is an "
        "independent op (seeds/001: run update_centers_op with train_op)",
    ),
)
# Per-sample quotients and a sum of up to M terms in the kernel's order vs float64.
UPDATE_TOL = cmp.GRAD
M = 6  # samples per batch: more than classes, so labels repeat
SHAPES = ((2, 2), (3, 1))  # (classes, features): a small menu, one trace each
LR = 0.5  # the train op's SGD step


# ---------------------------------------------------------------- the native functions
# diff_i = alpha * (c_{y_i} - x_i) / (1 + n_{y_i}), n_{y_i} = #{j: y_j = y_i} (seeds/001).
def tensorflow_diff(tf, centers, x, labels, alpha):
    n = tf.reduce_sum(tf.cast(tf.equal(labels[:, None], labels[None, :]), x.dtype), axis=1)
    return alpha * (tf.gather(centers, labels) - x) / (1 + n)[:, None]


def jax_diff(jnp, centers, x, labels, alpha):
    n = jnp.sum(labels[:, None] == labels[None, :], axis=1).astype(x.dtype)
    return alpha * (centers[labels] - x) / (1 + n)[:, None]


def torch_diff(torch, centers, x, labels, alpha):
    n = (labels[:, None] == labels[None, :]).sum(1).to(x.dtype)
    return alpha * (centers[labels] - x) / (1 + n)[:, None]


_VARIABLES = {}


def _key(tf, name, t):
    """(name, device, dtype, shape): the device the caller placed this run on, so that a GPU row
    never measures a CPU variable's kernel (init_scope keeps the device scope)."""
    with tf.init_scope():
        device = tf.zeros([]).device
    return name, device, t.dtype.name, tuple(t.shape.as_list())


def _variable(tf, init, *, name, use_resource=True, trainable=False):
    """A variable holding ``init`` (see the module docstring for where it lives)."""
    if in_v1_graph():
        return tf.compat.v1.Variable(
            init, name=name, use_resource=use_resource, trainable=trainable, validate_shape=False
        )
    key = _key(tf, name, init)
    if key not in _VARIABLES:
        with tf.init_scope():
            _VARIABLES[key] = tf.compat.v1.Variable(
                tf.zeros(key[-1], init.dtype), name=name, trainable=trainable, use_resource=use_resource
            )
    _VARIABLES[key].assign(init)
    return _VARIABLES[key]


def tensorflow(tf, centers, x, labels, alpha, *, mechanisms, sig=None):
    """seeds/001 update_centers_op by each mechanism; each output is the updated centers."""
    diff = tensorflow_diff(tf, centers, x, labels, alpha)
    outs = []
    for m in mechanisms:
        if m == "tf.tensor_scatter_nd_sub":
            outs.append(tf.tensor_scatter_nd_sub(centers, labels[:, None], diff))
        elif m == "Variable.scatter_sub":
            v = _variable(tf, centers, name="method")
            outs.append(tf.identity(v.scatter_sub(tf.IndexedSlices(diff, labels))))
        else:
            v = _variable(tf, centers, name="v1_ref" if m == V1_REF else "v1", use_resource=m != V1_REF)
            outs.append(tf.identity(tf.compat.v1.scatter_sub(v, labels, diff)))
    return tuple(outs)


def tensorflow_v1_variable_kind(tf, centers, *, sig=None):
    """0 if tf.compat.v1.Variable(use_resource=False) made a RefVariable, 1 for a resource variable
    (any subclass: a variable first made while tf.function traces is an UnliftedInitializerVariable)."""
    from tensorflow.python.ops import resource_variable_ops

    v = _variable(tf, centers, name="v1_ref", use_resource=False)
    if isinstance(v, resource_variable_ops.BaseResourceVariable):
        return tf.constant(1)
    return tf.constant(VARIABLE_KINDS.index(type(v).__name__))


VARIABLE_KINDS = ("RefVariable", "ResourceVariable")


def jax(jax, centers, x, labels, alpha, *, mechanisms):
    jnp = jax.numpy
    diff = jax_diff(jnp, centers, x, labels, alpha)
    return tuple(
        centers.at[labels].add(-diff) if m == "x.at[].add" else centers.at[labels].subtract(diff) for m in mechanisms
    )


def torch(torch, centers, x, labels, alpha, *, mechanisms):
    diff = torch_diff(torch, centers, x, labels, alpha)
    outs = []
    for m in mechanisms:
        c = centers.clone()
        if m == "index_add_":
            c.index_add_(0, labels, diff, alpha=-1)
        else:
            c[labels] -= diff
        outs.append(c)
    return tuple(outs)


NATIVE = {"tensorflow": tensorflow, "jax": jax, "torch": torch}


def tensorflow_step(tf, centers, x, labels, alpha, *, fetch, sig=None):
    """seeds/001 train step: SGD on the features (the train op) and ``update_centers_op =
    tf.compat.v1.scatter_sub(centers, label, diff)``. ``fetch="train"`` runs the train op
    only; ``"train+update"`` is ``sess.run([train_op, update_centers_op])``. Both ops read
    only the inputs, so neither races with the other's variable."""
    c = _variable(tf, centers, name="centers")
    f = _variable(tf, x, name="features", trainable=True)
    diff = tensorflow_diff(tf, centers, x, labels, alpha)
    if in_v1_graph():
        loss = 0.5 * tf.reduce_sum(tf.square(f - tf.gather(centers, labels)))
        train_op = tf.compat.v1.train.GradientDescentOptimizer(LR).minimize(loss, var_list=[f])
        update_centers_op = tf.compat.v1.scatter_sub(c, labels, diff)
        with tf.control_dependencies([train_op, update_centers_op] if fetch == "train+update" else [train_op]):
            return tf.identity(f.read_value()), tf.identity(c.read_value())  # a later sess.run(variables)
    with tf.GradientTape() as tape:
        loss = 0.5 * tf.reduce_sum(tf.square(f - tf.gather(centers, labels)))
    f.assign_sub(LR * tape.gradient(loss, f))
    update = tf.compat.v1.scatter_sub(c, labels, diff)  # result unused unless fetched
    return (loss, tf.identity(update)) if fetch == "train+update" else (loss,)


def tensorflow_state(tf, centers, x, *, sig=None):
    """The features and centers variables as the last step left them (outside that step)."""
    return tf.identity(_VARIABLES[_key(tf, "features", x)]), tf.identity(_VARIABLES[_key(tf, "centers", centers)])


# ---------------------------------------------------------------- closed forms, classifiers
def closed_forms(b) -> dict:
    """The update when duplicates accumulate (``np.add.at``), or one write per class survives."""
    c, x, a = (np.asarray(v, np.float64) for v in (b.centers, b.x, b.alpha))
    y = b.labels
    diff = a * (c[y] - x) / (1 + (y[:, None] == y[None, :]).sum(1))[:, None]
    acc, last, first = c.copy(), c.copy(), c.copy()
    np.add.at(acc, y, -diff)
    for i in range(len(y)):
        last[y[i]] = c[y[i]] - diff[i]
        first[y[-1 - i]] = c[y[-1 - i]] - diff[-1 - i]
    refs = {"accumulate": acc, "last-wins": last, "first-wins": first}
    return {k: v.astype(b.centers.dtype) for k, v in refs.items()}


def classify(out, refs, tol) -> str:
    return next((k for k, ref in refs.items() if cmp.rel_err(out, ref) <= tol), "other")


def ran(centers, before, after, tol) -> str:
    if np.array_equal(centers, before):
        return "not-run"
    return "run" if cmp.rel_err(centers, after) <= tol else "other"


# ---------------------------------------------------------------- strategies
@dataclasses.dataclass(frozen=True)
class CenterBatch:
    centers: np.ndarray  # (k, d) in [1.5, 2.5]
    x: np.ndarray  # (M, d) in [-1, 1], distinct: class-mates never take equal steps
    labels: np.ndarray  # (M,) int32 in [0, k): M > k, so some class repeats
    alpha: np.ndarray  # 0-d, in [1/16, 1]


@st.composite
def center_batches(draw) -> CenterBatch:
    dtype = draw(ss.float_dtypes())
    k, d = draw(st.sampled_from(SHAPES), label="classes, features")
    width = 32 if dtype == np.float32 else 64
    centers = draw(ss.float_arrays(dtype=dtype, shape=(k, d), min_value=1.5, max_value=2.5), label="centers")
    x = draw(
        hnp.arrays(dtype, (M, d), unique=True, elements=st.floats(-1, 1, width=width, allow_subnormal=False)), label="x"
    )
    labels = np.array(draw(st.lists(st.integers(0, k - 1), min_size=M, max_size=M), label="labels"), np.int32)
    alpha = np.asarray(draw(st.floats(1 / 16, 1.0, width=32), label="alpha"), dtype)
    return CenterBatch(centers, x, labels, alpha)


def _args(b):
    return b.centers, b.x, b.labels, b.alpha


def _sig(runner, b) -> dict:
    return {"sig": (b.centers.dtype.str, b.centers.shape, b.x.shape)} if runner.framework == "tensorflow" else {}


def _updates(runner, b) -> dict:
    """{mechanism: updated centers or the exception}: all in one program, one by one if it refuses."""
    ms = MECHANISMS[runner.framework]
    try:
        return dict(zip(ms, runner.run(NATIVE[runner.framework], *_args(b), mechanisms=ms, **_sig(runner, b))))
    except Exception:  # noqa: BLE001 - find which mechanism refuses
        out = {}
        for m in ms:
            try:
                out[m] = runner.run(NATIVE[runner.framework], *_args(b), mechanisms=(m,), **_sig(runner, b))[0]
            except Exception as e:  # the framework's refusal is the observation
                out[m] = e
        return out


def _check_updates(subject, oracles, record, b):
    __tracebackhide__ = True
    refs, tol = closed_forms(b), UPDATE_TOL.of(b.x.dtype)
    outs = _updates(subject, b)
    for m, out in outs.items():
        kind = cmp.error_name(out) if isinstance(out, Exception) else classify(out, refs, tol)
        record.check(EXPECT, **{m: kind})
        if kind in refs:
            record.close(name=m, out=out, ref=refs[kind], oracle="closed-form", tol=UPDATE_TOL)
    for o in oracles:
        theirs = _updates(o, b)
        for m, ref in theirs.items():  # the oracles' own readings, recorded in this row too
            record.observe(
                **{f"{o.id}:{m}": cmp.error_name(ref) if isinstance(ref, Exception) else classify(ref, refs, tol)}
            )
        for m, out in outs.items():
            if not isinstance(out, Exception) and classify(out, refs, tol) == "accumulate":
                record.close(name=m, out=out, ref=theirs[ORACLE_SPELLING[o.framework]], oracle=o.id, tol=UPDATE_TOL)


def _check_fetches(subject, record, b):
    """Run the seeds/001 step with and without fetching the update; read the centers after it."""
    __tracebackhide__ = True
    refs, tol = closed_forms(b), UPDATE_TOL.of(b.x.dtype)
    c, x, y = b.centers, b.x, b.labels
    features = (x - LR * (x.astype(np.float64) - c[y])).astype(x.dtype)
    for fetch, key in (("train", "update_unfetched"), ("train+update", "update_fetched")):
        out = subject.run(tensorflow_step, *_args(b), fetch=fetch, **_sig(subject, b))
        feats, centers = out if subject.mode == "graph" else subject.run(tensorflow_state, c, x, **_sig(subject, b))
        record.close(name=f"features[{fetch}]", out=feats, ref=features, oracle="closed-form", tol=UPDATE_TOL)
        if fetch == "train+update" and subject.mode != "graph":
            record.close(
                name="fetched update", out=out[1], ref=refs["accumulate"], oracle="closed-form", tol=UPDATE_TOL
            )
        record.check(EXPECT, **{key: ran(centers, c, refs["accumulate"], tol)})


# ---------------------------------------------------------------- properties
@given(b=center_batches())
def test_center_update_with_repeated_labels_is_declared(subject, oracles, record, b):
    """Each mechanism's center update with repeated labels: accumulate (the closed form), last-wins,
    first-wins or raises; accumulating results agree with JAX .at[].add and PyTorch index_add_."""
    record.example(centers=b.centers, x=b.x, labels=b.labels, alpha=b.alpha)
    _check_updates(subject, oracles, record, b)
    if subject.framework == "tensorflow":
        kind = subject.run(tensorflow_v1_variable_kind, b.centers, **_sig(subject, b))
        record.check(EXPECT, **{"v1 variable kind": VARIABLE_KINDS[int(kind)]})


@on("tensorflow")
@given(b=center_batches())
def test_center_update_runs_only_when_fetched_in_a_session(subject, record, b):
    """The update as an independent op: a v1 Session fetching only the train op leaves the centers
    unchanged; eager, tf.function and XLA run it although its result is unused. TensorFlow only:
    the question is about TF's execution of stateful ops (JAX and PyTorch have no such op)."""
    record.example(centers=b.centers, x=b.x, labels=b.labels, alpha=b.alpha)
    _check_fetches(subject, record, b)


# ---------------------------------------------------------------- seed examples
SEED = CenterBatch(
    centers=np.zeros((2, 2), np.float32),  # constant_initializer(0), as in the seed
    x=np.array([[1, 2], [3, 4], [5, 6], [7, 8]], np.float32),
    labels=np.array([0, 1, 0, 0], np.int32),
    alpha=np.float32(0.5),
)


@on("tensorflow", "jax", "torch")
@given(b=st.just(SEED))
def test_seed_center_update_from_zero_centers(subject, record, b):
    """Zero centers, labels [0, 1, 0, 0], alpha 0.5: accumulating gives c_0 = 0.5 * (13, 16) / 4 =
    (1.625, 2), c_1 = 0.5 * (3, 4) / 2 = (0.75, 1); last-wins would give c_0 = (0.875, 1)."""
    record.example(centers=b.centers, x=b.x, labels=b.labels, alpha=b.alpha)
    want = {
        "accumulate": np.array([[1.625, 2], [0.75, 1]], np.float32),
        "last-wins": np.array([[0.875, 1], [0.75, 1]], np.float32),
    }
    for m, out in _updates(subject, b).items():
        kind = (
            cmp.error_name(out)
            if isinstance(out, Exception)
            else next((k for k, ref in want.items() if np.array_equal(out, ref)), "other")
        )
        record.check(EXPECT, **{m: kind})
        if kind in want:  # a declared refusal has no values to compare
            record.equal(name=m, out=out, ref=want[kind], oracle="closed-form")


@on("tensorflow")
@given(b=st.just(SEED))
def test_seed_sess_run_train_op_and_update_centers_op(subject, record, b):
    """seeds/001: sess.run([train_op, update_centers_op]) moves the zero centers to [[1.625, 2], [0.75, 1]];
    sess.run(train_op) alone leaves them at zero in a v1 Session."""
    record.example(centers=b.centers, x=b.x, labels=b.labels, alpha=b.alpha)
    _check_fetches(subject, record, b)
