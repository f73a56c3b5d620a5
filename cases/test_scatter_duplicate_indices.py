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
centers unchanged (``not-run``/``run``). The mechanisms: ``tf.compat.v1.scatter_sub`` (on a
resource variable, and with ``use_resource=False``, the seed's 2019 RefVariable kernel),
``Variable.scatter_sub``, ``tf.tensor_scatter_nd_sub``; JAX ``.at[].add``/``.at[].subtract``;
PyTorch ``index_add_`` and ``x[idx] -= v``. The functional scatters are differentiable: the
gradient of ``sum(w * scatter_sub(c, labels, u))`` is ``w`` for ``c`` and ``-w[labels]`` for
``u`` (every duplicate gets its class's whole cotangent), and the update as a function of
(centers, x, alpha) is held to differences of each framework's own forward pass.

Declared surprises:

- PyTorch ``x[idx] -= v`` is an ``index_put_`` with accumulate=False: one write per class survives
  (the docs call the result undefined for duplicate indices).
- JAX <= 0.4.30 has no ``.at[].subtract`` (AttributeError).
- ``use_resource=False`` is ignored outside a v1 graph: eager, function and xla make a ResourceVariable.
- A v1 Session fetching only the train op does not run the centers update.

Variables: a v1 graph builds them and the harness re-initialises them from the fed inputs
before every run; elsewhere each (name, device, dtype, shape) gets one variable created eagerly
(``tf.init_scope``) on first use and assigned the inputs at the start of every call. A
``tf.function`` may create variables only on its first trace and XLA cannot give a
variable a new shape, so TF programs take the input signature as a static ``sig``: one
function, one trace, per dtype and shape.
"""

import dataclasses

import numpy as np
from hypothesis import given, strategies as st
from hypothesis.extra import numpy as hnp

from suite import compare as cmp, strategies as ss
from suite.behaviours import Floor, behaviour, on
from suite.expectations import expect, expectations, raises
from suite.frameworks.tf_runner import Variables, in_v1_graph
from suite.program import Program

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
    floor=Floor(
        "mixed",
        "Per element: the updated centers c_k - sum_i diff_i (the terms |c_kj| and each |diff_ij| of its class: "
        "update_scales), the step's features x - lr (x - c_y) (|x| + lr (|x| + |c_y|)), and update_centers_op's "
        "gradients against the oracles (d centers at |w_k|, d x a product); the scatter's own gradients are "
        "exact. Array-level: d alpha (a sum over the batch, floored at its terms), the finite differences, and "
        "the classifiers that tell accumulate from last-wins.",
    ),
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
        device="cpu",
        link=TORCH_INDEX_PUT,
        reason="x[idx] -= v is x[idx] = x[idx] - v, an index_put_ with accumulate=False: every write is "
        "c_j - diff_i and one of them survives (the last, on CPU); the docs call the result "
        "undefined for duplicate indices. index_add_ (or index_put_(accumulate=True)) accumulates",
    ),
    expect(
        "x[idx] -= v",
        "one-write",
        framework="torch",
        device="gpu",
        link=TORCH_INDEX_PUT,
        reason="on CUDA the duplicates' writes race: each class keeps one of its writes c_j - diff_i, but not "
        "the last one (measured on an H100, torch 2.11: the first on a drawn batch, neither first nor last on "
        "the seed); the docs call the result undefined for duplicate indices",
    ),
    expect(
        "x.at[].subtract",
        raises("AttributeError", r"object has no attribute 'subtract'"),
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
SHAPES = ((2, 2), (3, 1))  # (classes, features): a small menu, each with one dtype: one trace each
LR = 0.5  # the train op's SGD step


# ---------------------------------------------------------------- strategies
@dataclasses.dataclass(frozen=True)
class CenterBatch:
    centers: np.ndarray  # (k, d) in [1.5, 2.5]
    x: np.ndarray  # (M, d) in [-1, 1], distinct: class-mates never take equal steps
    labels: np.ndarray  # (M,) int32 in [0, k): M > k, so some class repeats
    alpha: np.ndarray  # 0-d, in [1/16, 1]


@st.composite
def center_batches(draw) -> CenterBatch:
    dtype, (k, d) = draw(ss.dtypes_and_shapes(shapes=SHAPES), label="dtype, (classes, features)")
    centers = draw(ss.float_arrays(dtype=dtype, shape=(k, d), min_value=1.5, max_value=2.5), label="centers")
    x = draw(hnp.arrays(dtype, (M, d), unique=True, elements=ss.floats(dtype, -1, 1)), label="x")
    labels = np.array(draw(st.lists(st.integers(0, k - 1), min_size=M, max_size=M), label="labels"), np.int32)
    alpha = np.asarray(draw(ss.floats(np.float32, 1 / 16, 1.0), label="alpha"), dtype)
    return CenterBatch(centers, x, labels, alpha)


# ---------------------------------------------------------------- the programs
class Diff(Program):
    """seeds/001 per-sample step diff_i = alpha * (c_{y_i} - x_i) / (1 + n_{y_i}), n_{y_i} = #{j: y_j = y_i}."""

    def tensorflow(tf, centers, x, labels, alpha):
        n = tf.reduce_sum(tf.cast(tf.equal(labels[:, None], labels[None, :]), x.dtype), axis=1)
        return alpha * (tf.gather(centers, labels) - x) / (1 + n)[:, None]

    def jax(jax, centers, x, labels, alpha):
        n = jax.numpy.sum(labels[:, None] == labels[None, :], axis=1).astype(x.dtype)
        return alpha * (centers[labels] - x) / (1 + n)[:, None]

    def torch(torch, centers, x, labels, alpha):
        n = (labels[:, None] == labels[None, :]).sum(1).to(x.dtype)
        return alpha * (centers[labels] - x) / (1 + n)[:, None]


class ScatterSub(Program):
    """centers - sum_i [y_i = j] diff_i: each framework's functional scatter-subtract that accumulates
    duplicates (the oracles' spelling, and the benchmark's)."""

    def tensorflow(tf, centers, labels, diff):
        return tf.tensor_scatter_nd_sub(centers, labels[:, None], diff)

    def jax(jax, centers, labels, diff):
        return centers.at[labels].add(-diff)

    def torch(torch, centers, labels, diff):
        return centers.clone().index_add_(0, labels, diff, alpha=-1)


class CenterStep(Program):
    """update_centers_op as a function: centers - the accumulating scatter of diff_i over labels,
    differentiable in centers (directly and through c_{y_i}), x and alpha."""

    def tensorflow(tf, centers, x, labels, alpha):
        return ScatterSub.tensorflow(tf, centers, labels, Diff.tensorflow(tf, centers, x, labels, alpha))

    def jax(jax, centers, x, labels, alpha):
        return ScatterSub.jax(jax, centers, labels, Diff.jax(jax, centers, x, labels, alpha))

    def torch(torch, centers, x, labels, alpha):
        return ScatterSub.torch(torch, centers, labels, Diff.torch(torch, centers, x, labels, alpha))


VARIABLES = Variables()  # where they live: see the module docstring


def _variable(tf, init, *, name, use_resource=True, trainable=False):
    """A resource variable that is not trainable unless asked: the seed's ``tf.compat.v1`` defaults."""
    return VARIABLES.get(tf, init, name=name, use_resource=use_resource, trainable=trainable)


def _v1_scatter_sub(tf, centers, labels, diff):
    v = _variable(tf, centers, name="v1")
    return tf.identity(tf.compat.v1.scatter_sub(v, labels, diff))


def _v1_ref_scatter_sub(tf, centers, labels, diff):
    """The seed's 2019 kernel: a RefVariable in a v1 graph (eager ignores use_resource=False)."""
    v = _variable(tf, centers, name="v1_ref", use_resource=False)
    return tf.identity(tf.compat.v1.scatter_sub(v, labels, diff))


def _variable_scatter_sub(tf, centers, labels, diff):
    v = _variable(tf, centers, name="method")
    return tf.identity(v.scatter_sub(tf.IndexedSlices(diff, labels)))


def _at_subtract(jax, centers, labels, diff):
    return centers.at[labels].subtract(diff)


def _index_sub(torch, centers, labels, diff):
    """``x[idx] -= v`` is ``x[idx] = x[idx] - v``: an index_put_ with accumulate=False."""
    c = centers.clone()
    c[labels] -= diff
    return c


# mechanism -> fn(module, centers, labels, diff): the centers after update_centers_op
SCATTER_SUB = {
    "tf.compat.v1.scatter_sub": _v1_scatter_sub,
    V1_REF: _v1_ref_scatter_sub,
    "Variable.scatter_sub": _variable_scatter_sub,
    "tf.tensor_scatter_nd_sub": ScatterSub.tensorflow,
    "x.at[].add": ScatterSub.jax,
    "x.at[].subtract": _at_subtract,
    "index_add_": ScatterSub.torch,
    "x[idx] -= v": _index_sub,
}


class CenterUpdate(Program):
    """seeds/001 update_centers_op by each of ``mechanisms``; each output is the updated centers."""

    def tensorflow(tf, centers, x, labels, alpha, *, mechanisms, sig=None):
        diff = Diff.tensorflow(tf, centers, x, labels, alpha)
        return tuple(SCATTER_SUB[m](tf, centers, labels, diff) for m in mechanisms)

    def jax(jax, centers, x, labels, alpha, *, mechanisms):
        diff = Diff.jax(jax, centers, x, labels, alpha)
        return tuple(SCATTER_SUB[m](jax, centers, labels, diff) for m in mechanisms)

    def torch(torch, centers, x, labels, alpha, *, mechanisms):
        diff = Diff.torch(torch, centers, x, labels, alpha)
        return tuple(SCATTER_SUB[m](torch, centers, labels, diff) for m in mechanisms)


VARIABLE_KINDS = ("RefVariable", "ResourceVariable")


class V1VariableKind(Program):
    """0 if tf.compat.v1.Variable(use_resource=False) made a RefVariable, 1 for a resource variable
    (any subclass: a variable first made while tf.function traces is an UnliftedInitializerVariable)."""

    def tensorflow(tf, centers, *, sig=None):
        from tensorflow.python.ops import resource_variable_ops

        v = _variable(tf, centers, name="v1_ref", use_resource=False)
        if isinstance(v, resource_variable_ops.BaseResourceVariable):
            return tf.constant(1)
        return tf.constant(VARIABLE_KINDS.index(type(v).__name__))


class TrainStep(Program):
    """seeds/001 train step: SGD on the features (the train op) and ``update_centers_op =
    tf.compat.v1.scatter_sub(centers, label, diff)``. ``fetch="train"`` runs the train op
    only; ``"train+update"`` is ``sess.run([train_op, update_centers_op])``. Both ops read
    only the inputs, so neither races with the other's variable."""

    def tensorflow(tf, centers, x, labels, alpha, *, fetch, sig=None):
        c = _variable(tf, centers, name="centers")
        f = _variable(tf, x, name="features", trainable=True)
        diff = Diff.tensorflow(tf, centers, x, labels, alpha)
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


class State(Program):
    """The features and centers variables as the last step left them (outside that step)."""

    def tensorflow(tf, centers, x, *, sig=None):
        features, centers = VARIABLES.existing(tf, "features", x), VARIABLES.existing(tf, "centers", centers)
        return tf.identity(features), tf.identity(centers)


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


def update_scales(b) -> np.ndarray:
    """Per element of the centers, the terms its update sums: |c_kj| and each |diff_ij| of its class
    (c - x > 0 here, so the update c - sum_i diff_i cancels; its rounding is at these terms, not at the
    largest center's)."""
    c, x, a = (np.asarray(v, np.float64) for v in (b.centers, b.x, b.alpha))
    y = b.labels
    diff = a * (c[y] - x) / (1 + (y[:, None] == y[None, :]).sum(1))[:, None]
    out = np.abs(c)
    np.add.at(out, y, np.abs(diff))
    return out


def classify(out, refs, tol) -> str:
    return next((k for k, ref in refs.items() if cmp.rel_err(out, ref) <= tol), "other")


def one_write_each(out, b, tol) -> bool:
    """Each updated center is ``c - diff_i`` for one ``i`` of its class (whichever write
    survived), and the centers no label names are untouched."""
    c, x, a = (np.asarray(v, np.float64) for v in (b.centers, b.x, b.alpha))
    y = np.asarray(b.labels)
    diff = a * (c[y] - x) / (1 + (y[:, None] == y[None, :]).sum(1))[:, None]
    out = np.asarray(out, np.float64)
    for k in np.unique(y):
        if not any(cmp.rel_err(out[k], c[k] - diff[i], dtype=b.centers.dtype) <= tol for i in np.flatnonzero(y == k)):
            return False
    untouched = np.setdiff1d(np.arange(len(c)), y)
    return not untouched.size or cmp.rel_err(out[untouched], c[untouched], dtype=b.centers.dtype) <= tol


def racy_on_gpu(subject, record, m, kind, out, b, tol) -> str:
    """On a GPU an overwriting scatter keeps whichever duplicate's write lands last (a race):
    the winner is recorded as racy, and the kind is ``one-write`` when each class kept one
    of its writes (so the row still asserts what the race cannot change)."""
    if subject.device != "gpu" or kind not in ("last-wins", "first-wins", "other") or isinstance(out, Exception):
        return kind
    if not one_write_each(out, b, tol):
        return kind
    record.observe_racy(**{m: kind})
    return "one-write"


def ran(centers, before, after, tol) -> str:
    if np.array_equal(centers, before):
        return "not-run"
    return "run" if cmp.rel_err(centers, after) <= tol else "other"


# ---------------------------------------------------------------- running and checking
def _args(b):
    return b.centers, b.x, b.labels, b.alpha


def _sig(runner, b) -> dict:
    return {"sig": (b.centers.dtype.str, b.centers.shape, b.x.shape)} if runner.framework == "tensorflow" else {}


def _updates(runner, b) -> dict:
    """{mechanism: updated centers or the exception}: all in one program, one by one if it refuses."""
    ms = MECHANISMS[runner.framework]
    try:
        return dict(zip(ms, runner.run(CenterUpdate.of(runner), *_args(b), mechanisms=ms, **_sig(runner, b))))
    except Exception:  # noqa: BLE001 - find which mechanism refuses
        out = {}
        for m in ms:
            try:
                out[m] = runner.run(CenterUpdate.of(runner), *_args(b), mechanisms=(m,), **_sig(runner, b))[0]
            except Exception as e:  # the framework's refusal is the observation
                out[m] = e
        return out


def _check_updates(subject, oracles, record, b):
    __tracebackhide__ = True
    refs, tol = closed_forms(b), UPDATE_TOL.of(b.x.dtype)
    scales = update_scales(b)
    outs = _updates(subject, b)
    for m, out in outs.items():
        kind = cmp.error_name(out) if isinstance(out, Exception) else classify(out, refs, tol)
        kind = racy_on_gpu(subject, record, m, kind, out, b, tol)
        record.check(EXPECT, **{m: kind})
        if kind in refs:
            record.close(name=m, out=out, ref=refs[kind], oracle="closed-form", tol=UPDATE_TOL, scale=scales)
    for o in oracles:
        theirs = _updates(o, b)
        for m, ref in theirs.items():  # the oracles' own readings, recorded in this row too
            record.observe(
                **{f"{o.id}:{m}": cmp.error_name(ref) if isinstance(ref, Exception) else classify(ref, refs, tol)}
            )
        for m, out in outs.items():
            if not isinstance(out, Exception) and classify(out, refs, tol) == "accumulate":
                ref = theirs[ORACLE_SPELLING[o.framework]]
                record.close(name=m, out=out, ref=ref, oracle=o.id, tol=UPDATE_TOL, scale=scales)


def _check_fetches(subject, record, b):
    """Run the seeds/001 step with and without fetching the update; read the centers after it."""
    __tracebackhide__ = True
    refs, tol = closed_forms(b), UPDATE_TOL.of(b.x.dtype)
    c, x, y = b.centers, b.x, b.labels
    features = (x - LR * (x.astype(np.float64) - c[y])).astype(x.dtype)
    # per element, the terms of x - LR (x - c_y): |x| and LR (|x| + |c_y|)
    x64, cy64 = np.abs(x.astype(np.float64)), np.abs(c[y].astype(np.float64))
    feature_scales = x64 + LR * (x64 + cy64)
    for fetch, key in (("train", "update_unfetched"), ("train+update", "update_fetched")):
        out = subject.run(TrainStep.of(subject), *_args(b), fetch=fetch, **_sig(subject, b))
        feats, centers = out if subject.mode == "graph" else subject.run(State.of(subject), c, x, **_sig(subject, b))
        record.close(name=f"features[{fetch}]", out=feats, ref=features, oracle="closed-form", tol=UPDATE_TOL,
                     scale=feature_scales)  # fmt: skip
        if fetch == "train+update" and subject.mode != "graph":
            record.close(name="fetched update", out=out[1], ref=refs["accumulate"], oracle="closed-form",
                         tol=UPDATE_TOL, scale=update_scales(b))  # fmt: skip
        record.check(EXPECT, **{key: ran(centers, c, refs["accumulate"], tol)})


# ---------------------------------------------------------------- properties
@given(b=center_batches())
def test_center_update_with_repeated_labels_is_declared(subject, oracles, record, b):
    """Each mechanism's update with repeated labels is declared; accumulating ones match .at[].add and index_add_."""
    record.example(centers=b.centers, x=b.x, labels=b.labels, alpha=b.alpha)
    _check_updates(subject, oracles, record, b)
    if subject.framework == "tensorflow":
        kind = subject.run(V1VariableKind.of(subject), b.centers, **_sig(subject, b))
        record.check(EXPECT, **{"v1 variable kind": VARIABLE_KINDS[int(kind)]})


@on("tensorflow")  # TF's execution of stateful ops: JAX and PyTorch have no such op
@given(b=center_batches())
def test_center_update_runs_only_when_fetched_in_a_session(subject, record, b):
    """A v1 Session fetching only the train op skips the update; eager, function and XLA run it unused."""
    record.example(centers=b.centers, x=b.x, labels=b.labels, alpha=b.alpha)
    _check_fetches(subject, record, b)


@given(b=center_batches(), data=st.data())
def test_scatter_gradients_with_repeated_labels_match_differences(subject, oracles, record, b, data):
    """d/du sum(w * scatter_sub(c, labels, u)) = -w[labels], d/dc = w (a gather of the cotangent,
    no arithmetic: exact); the gradients of update_centers_op in (centers, x, alpha) match
    differences of the subject's own forward pass and the oracles."""
    w = data.draw(ss.like(b.centers), label="cotangent")
    u = data.draw(ss.like(b.x), label="updates")
    record.example(centers=b.centers, x=b.x, labels=b.labels, alpha=b.alpha, updates=u, w=w)
    # the differences' rounding is at the inputs' magnitude (steps of eps^(1/3) * max(1, |x|),
    # values ~|w| |c|), not at a small gradient's own; d centers = w * (1 - alpha n/(1+n)) likewise
    record.scale = "inputs"
    _, (gc, _, gu) = subject.vjp(ScatterSub.of(subject), b.centers, b.labels, u, cotangent=w)
    record.close(name="d centers[scatter]", out=gc, ref=w, oracle="closed-form", tol=cmp.EXACT)
    record.close(name="d updates", out=gu, ref=-w[b.labels], oracle="closed-form", tol=cmp.EXACT)
    got = {"d centers[scatter]": gc, "d updates": gu}
    record.finite_differences(subject, ScatterSub, b.centers, b.labels, u, cotangent=w, got=got)
    got = {"value": ..., "d centers[scatter]": gc, "d labels": ..., "d updates": gu}
    record.against(oracles, ScatterSub, b.centers, b.labels, u, cotangent=w, got=got, tol=cmp.EXACT)

    _, (gc, gx, _, ga) = subject.vjp(CenterStep.of(subject), *_args(b), cotangent=w)
    got = {"d centers": gc, "d x": gx, "d alpha": ...}
    refs = record.finite_differences(subject, CenterStep, *_args(b), cotangent=w, got=got)
    # d alpha = -sum_i w[y_i] . (c_{y_i} - x_i) / (1 + n_{y_i}) sums M terms of either sign: the
    # subject's rounding is that of the terms (the sum may cancel), the differences' that of the inputs
    y, c64 = b.labels, b.centers.astype(np.float64)
    n = (y[:, None] == y[None, :]).sum(1)
    terms = float(np.sum(np.abs(w[y].astype(np.float64) * (c64[y] - b.x)) / (1 + n)[:, None]))
    record.close(
        name="d alpha[finite difference, central]",
        out=np.asarray(ga, np.float64),
        ref=refs[2],
        oracle="finite-difference",
        tol=cmp.FINITE_DIFF,
        scale=max(terms, record.input_scale()),
        derived_from=ga.dtype,
    )
    got = {"value": ..., "d centers": gc, "d x": gx, "d labels": ..., "d alpha": ...}
    # per element: d centers_k = w_k (1 - alpha n_k / (1 + n_k)) sums terms of size |w_k| (a tiny w_k beside a
    # large one included); d x_i = -alpha w_{y_i} / (1 + n_i) is a product
    w64 = np.abs(np.asarray(w, np.float64))
    per = {"d centers": w64, "d x": np.abs(np.float64(b.alpha)) * w64[y] / (1 + n)[:, None]}
    record.against(oracles, CenterStep, *_args(b), cotangent=w, got=got, tol=UPDATE_TOL, scale=per)


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
    """Zero centers, labels [0, 1, 0, 0], alpha 0.5: accumulate [[1.625, 2], [0.75, 1]], last-wins c_0 (0.875, 1)."""
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
        kind = racy_on_gpu(subject, record, m, kind, out, b, UPDATE_TOL.of(np.float32))
        record.check(EXPECT, **{m: kind})
        if kind in want:  # a declared refusal has no values to compare
            record.equal(name=m, out=out, ref=want[kind], oracle="closed-form")


@on("tensorflow")
@given(b=st.just(SEED))
def test_seed_sess_run_train_op_and_update_centers_op(subject, record, b):
    """seeds/001: sess.run([train_op, update_centers_op]) moves the zero centers; sess.run(train_op) does not."""
    record.example(centers=b.centers, x=b.x, labels=b.labels, alpha=b.alpha)
    _check_fetches(subject, record, b)
