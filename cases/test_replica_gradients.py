"""Replica gradients: what is summed and what is averaged across replicas and processes.

Data parallelism splits a global batch of N = 2 n rows over two replicas; the per-example loss is
``l_i = (x_i . w - y_i)^2 / 2`` and ``G_r = X_r^T (X_r w - y_r)`` replica r's summed gradient. Each
engine runs in peer processes the test starts once per module (``suite.peers``), real distributed
engines, on the CPU:

- TensorFlow: ``tf.distribute.MirroredStrategy`` over two logical CPU devices
  (``tf.config.set_logical_device_configuration``), ``strategy.run`` eagerly (row ``eager``) and
  inside a ``tf.function`` (row ``function``); and ``MultiWorkerMirroredStrategy`` with two worker
  processes (``TF_CONFIG`` on 127.0.0.1, free ports). ``xla`` and ``graph`` have no row: the
  cross-replica step is a ``strategy.run`` (its all-reduce is a collective outside any one XLA
  cluster), and TF2 distribution has no v1 Session API.
- JAX: two XLA host devices (``--xla_force_host_platform_device_count=2``), ``jax.shard_map`` with
  ``psum``/``pmean``, eagerly and under ``jax.jit``.
- PyTorch: two processes of a gloo process group on 127.0.0.1, ``all_reduce`` and
  ``DistributedDataParallel``.

Each is held to the float64 closed forms: per replica ``G_r / n`` (replica-mean loss) and ``G_r / N``
(``tf.nn.compute_average_loss(.., global_batch_size=N)``, JAX/PyTorch ``sum / N``); all-reduce SUM of
the replica means ``sum_r G_r / n``, MEAN ``sum_r G_r / N`` (the one-device gradient); SUM of the
global-batch gradients: the one-device gradient, also measured in this process by the subject on the
whole batch. One SGD step under the engine's implicit aggregation is held to one device with the whole
batch; the rows say where it is equal (what the API promises) and declare where it is not:

- TensorFlow's optimizer under a strategy sums the replicas' gradients: a replica-mean loss takes a
  step ``replicas`` times the one-device step (hence ``compute_average_loss``).
- DDP averages gradients over processes (and the JAX recipe ``pmean`` does too): a global-batch loss
  takes half the one-device step.
- JAX: the gradient of a per-device loss with respect to a replicated ``w`` inside ``shard_map`` is
  already psum'd (the transpose of an unvarying input); a per-device gradient needs ``pcast``.

An embedding's gradient (``tf.gather``) is an ``IndexedSlices`` in TensorFlow and stays one through
``all_reduce``; its densified sum and the step are held to ``np.add.at`` of the rows; JAX and PyTorch
give dense gradients. MultiWorkerMirroredStrategy gives the same gradients and the same variables
after a step as MirroredStrategy in one process.

A batch-norm layer in training mode (Keras ``BatchNormalization``, PyTorch ``BatchNorm1d`` under DDP)
normalises each replica's rows by the replica's own statistics, and each replica's copy of the moving
mean follows its own batch (the copies drift apart; reading the variable gives the first replica's);
``synchronized=True`` (PyTorch: ``SyncBatchNorm``) uses the global batch's statistics, its gradient is
that of the global loss (the all-reduce's backward sums the cotangents) and the copies agree. JAX has no
batch-norm layer: no row.

Sources: https://github.com/tensorflow/tensorflow/issues/31317,
https://github.com/tensorflow/tensorflow/issues/35333, https://github.com/tensorflow/tensorflow/issues/18222,
https://github.com/tensorflow/tensorflow/issues/52986
"""

import os

import numpy as np
import pytest
from hypothesis import assume, given, settings, strategies as st

from suite import compare as cmp, peers as pr, strategies as ss
from suite.behaviours import Floor, behaviour, declared_skip, on
from suite.expectations import expect, expectations, raises
from suite.program import Program

TF_CUSTOM_TRAINING = "https://www.tensorflow.org/tutorials/distribute/custom_training"
TF_BN_REPLICAS = "https://github.com/tensorflow/tensorflow/issues/7439"
KERAS_BN = "https://keras.io/api/layers/normalization_layers/batch_normalization/"
TORCH_SYNC_BN = "https://docs.pytorch.org/docs/stable/generated/torch.nn.SyncBatchNorm.html"
TF_AVERAGE_LOSS = "https://www.tensorflow.org/api_docs/python/tf/nn/compute_average_loss"
TORCH_DDP = "https://docs.pytorch.org/docs/stable/generated/torch.nn.parallel.DistributedDataParallel.html"
TORCH_EMBEDDING = "https://docs.pytorch.org/docs/stable/generated/torch.nn.Embedding.html"
JAX_PMEAN = "https://docs.jax.dev/en/latest/_autosummary/jax.lax.pmean.html"
JAX_SHARD_MAP = "https://docs.jax.dev/en/latest/notebooks/shard_map.html"

BEHAVIOUR = behaviour(
    "replica-gradients",
    sources=[],
    modes=("eager", "function"),
    links=[
        "https://github.com/tensorflow/tensorflow/issues/31317",
        "https://github.com/tensorflow/tensorflow/issues/35333",
        "https://github.com/tensorflow/tensorflow/issues/18222",
        "https://github.com/tensorflow/tensorflow/issues/52986",
        TF_CUSTOM_TRAINING,
        TF_AVERAGE_LOSS,
        TORCH_DDP,
        JAX_SHARD_MAP,
        TF_BN_REPLICAS,
        KERAS_BN,
        TORCH_SYNC_BN,
    ],
    floor=Floor(
        "mixed",
        "Array-level (scale='inputs'): the least-squares gradients X^T (X w - y) per replica, their all-reduces, "
        "the SGD steps they drive, the multi-worker results and batch norm's outputs, gradients and moving "
        "means, which all mix the batch's rows. Per element: the embedding test, where each row of the gradient "
        "sums the cotangents c of its own ids (scale: their sum of |c|), all-reduced over replicas, and the "
        "step E - lr * sum / N (scale |E| + lr * sum |c| / N). The cmp.near/which classifiers tell apart "
        "answers a factor of 2 or more apart.",
    ),
)

REPLICAS, ROWS, DIM, VOCAB, LR = 2, 4, 3, 5, 0.125  # LR a power of two: the step adds no rounding of its own
STEPS = ("mean_loss", "global_loss")

EXPECT = expectations(
    {
        "per-replica[mean-loss]": "replica-mean",
        "per-replica[global-loss]": "global-scaled",
        "per-replica[replicated-w]": "summed",
        "compute-average-loss[default]": "global-scaled",
        "all-reduce[SUM]": "sum",
        "all-reduce[MEAN]": "mean",
        "all-reduce[SUM|global-loss]": "one-device",
        **{f"apply[{k}]": "one-device" for k in STEPS},
        "replicas-agree": "same",
        "embedding-gradient": "IndexedSlices",
        "embedding-all-reduce": "IndexedSlices",
        "embedding-sum": "sum",
        "embedding-apply": "one-device",
        "multi-worker": "same-as-one-process",
        # Keras: "if False, each replica uses its own local batch statistics"; PyTorch's BatchNorm alike
        "batch-norm[default]": "per-replica",
        "batch-norm-grad[default]": "per-replica",
        "batch-norm[synchronized]": "global",
        # the all-reduce's backward sums the replicas' cotangents: each replica gets the gradient of the
        # global loss, as one device with the whole batch
        "batch-norm-grad[synchronized]": "global-loss",
        # each replica's copy of the moving statistics follows its own batch: the copies drift apart
        "moving-mean[default]": "per-replica",
        "moving-mean[synchronized]": "global",
    },
    expect(
        "apply[mean_loss]",
        "replicas-times",
        framework="tensorflow",
        link=TF_CUSTOM_TRAINING,
        reason="a Keras optimizer under a tf.distribute strategy all-reduces the replicas' gradients with SUM: a "
        "loss averaged per replica (tf.reduce_mean) steps num_replicas times the one-device step; the guide "
        "divides by the global batch size (tf.nn.compute_average_loss) instead",
    ),
    expect(
        "per-replica[replicated-w]",
        "replica-mean",
        framework="jax",
        versions="<=0.4.30",
        link=JAX_SHARD_MAP,
        reason="before shard_map typed values as varying or unvarying over a mesh axis, its transpose did not "
        "psum the cotangent of a replicated input: the gradient with respect to a replicated w is the "
        "device's own (measured in JAX 0.4.30; psum'd in 0.10)",
    ),
    expect(
        "apply[global_loss]",
        "divided-by-replicas",
        framework="torch",
        link=TORCH_DDP,
        reason="DistributedDataParallel averages gradients over the processes: a loss summed over the global batch "
        "size steps 1/world_size of the one-device step; the per-process mean loss is the one that matches",
    ),
    expect(
        "apply[global_loss]",
        "divided-by-replicas",
        framework="jax",
        link=JAX_PMEAN,
        reason="JAX has no implicit aggregation; its data-parallel recipe averages gradients with lax.pmean, so a "
        "loss summed over the global batch size steps 1/devices of the one-device step, as DDP",
    ),
    *[
        expect(
            "embedding-gradient",
            "dense",
            framework=f,
            link=link,
            reason=f"{f}: the gradient of a row lookup is a dense array of the table's shape (no IndexedSlices)",
        )
        for f, link in (("jax", JAX_SHARD_MAP), ("torch", TORCH_EMBEDDING))
    ],
    expect(
        "embedding-apply",
        "divided-by-replicas",
        framework="torch",
        link=TORCH_DDP,
        reason="DistributedDataParallel averages the embedding's gradient over the processes too",
    ),
    *[
        expect(
            key,
            raises("ValueError", r"SyncBatchNorm layers only work with GPU modules"),
            framework="torch",
            device="cpu",
            link=TORCH_SYNC_BN,
            reason="torch.nn.SyncBatchNorm supports CUDA (and some accelerator) modules only: under DDP on the "
            "CPU its forward refuses; Keras' synchronized=True works on a CPU strategy",
        )
        for key in ("batch-norm[synchronized]", "batch-norm-grad[synchronized]", "moving-mean[synchronized]")
    ],
)


# ---------------------------------------------------------------- strategies
@st.composite
def batches(draw):
    """(w, X, y), float32 or float64: w (d,), X (N, d) with 1/4 <= |entries| <= 2, and y = X w - e with
    residuals 1/2 <= |e| <= 2 (rounded to the dtype). Examples whose replicas' gradients nearly vanish
    are dropped: there the sum, the mean and each replica's share coincide and say nothing."""
    d = draw(ss.float_dtypes(dtypes=(np.float32, np.float64)), label="dtype")
    w = draw(ss.signed_arrays((DIM,), d, 0.25, 2.0), label="w")
    X = draw(ss.signed_arrays((ROWS, DIM), d, 0.25, 2.0), label="X")
    e = draw(ss.signed_arrays((ROWS,), d, 0.5, 2.0), label="e")
    y = (X.astype(np.float64) @ w.astype(np.float64) - e).astype(d)
    G, _ = _closed(w, X, y)
    assume(np.abs(G).max(axis=1).min() > 0.25 and np.abs(G.sum(0)).max() > 0.25)
    return w, X, y


@st.composite
def lookups(draw):
    """(E, ids, c): a table (V, d), N row ids (repeats likely, across replicas too), weights (N, d)
    with 1/4 <= |c| <= 2."""
    d = draw(ss.float_dtypes(dtypes=(np.float32, np.float64)), label="dtype")
    E = draw(ss.float_arrays(dtype=d, shape=(VOCAB, DIM), min_value=-2, max_value=2), label="E")
    ids = draw(ss.arrays(np.int32, (ROWS,), elements=st.integers(0, VOCAB - 1)), label="ids")
    c = draw(ss.signed_arrays((ROWS, DIM), d, 0.25, 2.0), label="c")
    total = np.zeros((VOCAB, DIM))
    np.add.at(total, ids, c.astype(np.float64))
    assume(np.abs(total).max() > 0.25)
    return E, ids, c


# ---------------------------------------------------------------- the engines (peers)
def _group(name: str, faults) -> pr.PeerGroup:
    """The peer group of engine ``name``, with the run's TensorFlow ``faults``."""
    target = f"cases._replica_peers:{name.split('-')[0]}"
    if name == "tensorflow-mirrored":
        return pr.PeerGroup(name, target, configs={"strategy": "mirrored", "faults": faults})
    if name == "tensorflow-multi-worker":
        cluster = {"worker": [f"127.0.0.1:{p}" for p in pr.free_ports(REPLICAS)]}
        cfg = [
            {"strategy": "multi-worker", "faults": faults, "tf_config": {"cluster": cluster, "task": t}}
            for t in ({"type": "worker", "index": i} for i in range(REPLICAS))
        ]
        return pr.PeerGroup(name, target, size=REPLICAS, configs=cfg)
    if name == "jax":
        flags = " ".join([*os.environ.get("XLA_FLAGS", "").split(), "--xla_force_host_platform_device_count=2"])
        return pr.PeerGroup(name, target, env={"XLA_FLAGS": flags, "JAX_ENABLE_X64": "1", "JAX_PLATFORMS": "cpu"})
    return pr.PeerGroup(name, target, size=REPLICAS, configs={"port": pr.free_ports(1)[0]})


@pytest.fixture(scope="module")
def engines(request):
    """The peers, with the run's TensorFlow faults (a fault injected here must reach the peers)."""
    faults = list(getattr(request.config, "_adsem_faults", ()))
    e = pr.Engines(lambda name: _group(name, faults))
    yield e
    e.close()


ENGINE = {"tensorflow": "tensorflow-mirrored", "jax": "jax", "torch": "torch"}
#: the other engines a row is compared with, and the mode each runs in
CROSS = {"tensorflow-mirrored": "function", "jax": "jit", "torch": "eager"}


def _cpu_only(subject) -> None:
    """A GPU row is a declared skip: the engines run on two CPU devices (logical CPUs, host devices, a
    gloo group), and a row named gpu must not report what a CPU measured."""
    if subject.device != "cpu":
        declared_skip(
            "the replica engines run on two CPU devices (two logical CPUs, two XLA host devices, two gloo "
            "processes): data parallelism over GPUs needs two of them, and a lent machine has one",
            link=TF_CUSTOM_TRAINING,
        )


def _engine(subject):
    return ENGINE[subject.framework]


def _others(subject, engines, record):
    """The other engines to cross-check with, and their modes: those that start here (a release env
    without PyTorch, a JAX without what the engine needs, is noted and left out, not failed)."""
    return [(e, m) for e, m in CROSS.items() if e != _engine(subject) and engines.available(e, record)]


# ---------------------------------------------------------------- one device, in this process
class FullBatchMean(Program):
    """The mean loss over the whole batch on one device (its gradient: the one-device gradient)."""

    def tensorflow(tf, w, X, y):
        return tf.reduce_mean(0.5 * tf.square(tf.linalg.matvec(X, w) - y))

    def jax(jax, w, X, y):
        return jax.numpy.mean(0.5 * jax.numpy.square(X @ w - y))

    def torch(torch, w, X, y):
        return (0.5 * (X @ w - y) ** 2).mean()


# ---------------------------------------------------------------- closed forms and classifiers
def _closed(w, X, y):
    w, X, y = (np.asarray(a, np.float64) for a in (w, X, y))
    n = ROWS // REPLICAS
    G = np.stack([X[r * n : (r + 1) * n].T @ (X[r * n : (r + 1) * n] @ w - y[r * n : (r + 1) * n]) for r in range(2)])
    return G, G.sum(0) / ROWS  # per replica summed gradients; the one-device gradient


#: results cross processes and replicas: ten times the dtype's gradient tolerance, absolute at 8 x that
NEAR = {"factor": 10, "atol_factor": 8}


def _near(g, ref) -> bool:
    return cmp.near(g, ref, **NEAR)


def _which(g, refs: dict) -> str:
    """A peer's refusal (``raises:<Name>``, its message kept: :func:`suite.compare.remote`) or the
    :func:`suite.compare.which` reference ``g`` is near (``other`` if none: an all-zero or missing gradient
    is not told apart here)."""
    if isinstance(g, str):
        return g
    return "other" if g is None else cmp.which(g, refs, **NEAR, zero=False)


def _steps(w, full):
    """SGD steps from w by the one-device gradient scaled as each aggregation would."""
    w = np.asarray(w, np.float64)
    return {
        "one-device": w - LR * full,
        "replicas-times": w - LR * REPLICAS * full,
        "divided-by-replicas": w - LR * full / REPLICAS,
    }


# ---------------------------------------------------------------- properties
@on("tensorflow", "jax", "torch", modes=("eager", "function"))  # strategy.run exists eagerly and traced
@settings(max_examples=max(5, settings.default.max_examples // 3))  # each example crosses processes
@given(b=batches())
def test_all_reduce_sums_and_averages(subject, record, engines, b):
    """Per replica: G_r/n (replica-mean loss), G_r/N (global-batch loss); all-reduce SUM of the replica
    means: sum_r G_r/n, MEAN: the one-device gradient; SUM of the global-batch gradients: the
    one-device gradient, which the subject also computes in this process on the whole batch."""
    _cpu_only(subject)
    w, X, y = b
    record.example(w=w, X=X, y=y)
    record.scale = "inputs"
    G, full = _closed(w, X, y)
    n, dt = ROWS // REPLICAS, w.dtype
    out = engines.ask(_engine(subject), mode=subject.mode, op="grads", w=w, X=X, y=y)
    refs = {
        "local_mean": G / n,
        "local_global": G / ROWS,
        "sum": np.stack([G.sum(0) / n] * 2),
        "mean": np.stack([full] * 2),
        "sum_global": np.stack([full] * 2),
    }
    record.check(
        EXPECT,
        **{
            "per-replica[mean-loss]": _which(
                out["local_mean"], {"replica-mean": G / n, "summed": np.stack([G.sum(0) / n] * 2)}
            ),
            "per-replica[global-loss]": _which(out["local_global"], {"global-scaled": G / ROWS, "replica-mean": G / n}),
            "all-reduce[SUM]": _which(out["sum"], {"sum": refs["sum"], "mean": refs["mean"]}),
            "all-reduce[MEAN]": _which(out["mean"], {"mean": refs["mean"], "sum": refs["sum"]}),
            "all-reduce[SUM|global-loss]": _which(
                out["sum_global"], {"one-device": refs["sum_global"], "replicas-times": 2 * refs["sum_global"]}
            ),
        },
    )
    if "local_default" in out:  # TensorFlow: compute_average_loss without global_batch_size
        record.check(
            EXPECT,
            **{
                "compute-average-loss[default]": _which(
                    out["local_default"], {"global-scaled": G / ROWS, "replica-mean": G / n}
                )
            },
        )
    if "local_replicated" in out:  # JAX: the gradient with respect to a replicated w
        record.check(
            EXPECT,
            **{
                "per-replica[replicated-w]": _which(
                    out["local_replicated"], {"summed": refs["sum"], "replica-mean": G / n}
                )
            },
        )
    for k, ref in refs.items():
        if not isinstance(out[k], str):
            record.close(name=k, out=out[k], ref=ref.astype(dt), oracle="closed-form")
    _, (g_one, _, _) = subject.vjp(FullBatchMean.of(subject), w, X, y)
    for k in ("mean", "sum_global"):
        if not isinstance(out[k], str):
            record.close(name=f"{k} vs one device", out=out[k][0], ref=g_one, oracle=f"{subject.id} one device")
    for engine, mode in _others(subject, engines, record):
        other = engines.ask(engine, mode=mode, op="grads", w=w, X=X, y=y)
        for k in refs:
            if not isinstance(out[k], str) and not isinstance(other[k], str):
                record.close(name=f"{k} vs {engine}", out=out[k], ref=other[k], oracle=f"{engine}-{mode}")


@on("tensorflow", "jax", "torch", modes=("eager", "function"))
@settings(max_examples=max(5, settings.default.max_examples // 3))
@given(b=batches())
def test_apply_gradients_against_one_device(subject, record, engines, b):
    """One SGD step (lr 1/8) under the engine's implicit aggregation, for the replica-mean loss and the
    global-batch loss, against the same optimizer on one device with the whole batch: equal where the
    aggregation matches the loss's scaling, a declared multiple where it does not; replicas agree."""
    _cpu_only(subject)
    w, X, y = b
    record.example(w=w, X=X, y=y)
    record.scale = "inputs"
    _, full = _closed(w, X, y)
    steps = _steps(w, full)
    out = engines.ask(_engine(subject), mode=subject.mode, op="apply", w=w, X=X, y=y, lr=LR)
    record.close(
        name="one device", out=out["one_device"], ref=steps["one-device"].astype(w.dtype), oracle="closed-form"
    )
    for k in STEPS:
        got = out[k]
        seen = _which(got[0], steps)
        record.check(
            EXPECT, **{f"apply[{k}]": seen, "replicas-agree": "same" if np.array_equal(got[0], got[-1]) else "differ"}
        )
        want, _ = EXPECT.lookup(f"apply[{k}]", subject)
        if want in steps:
            record.close(
                name=f"{k} step", out=got, ref=np.stack([steps[want]] * REPLICAS).astype(w.dtype), oracle="closed-form"
            )
        if want == "one-device":
            record.close(
                name=f"{k} vs measured one device", out=got[0], ref=out["one_device"], oracle=f"{subject.id} one device"
            )
    for engine, mode in _others(subject, engines, record):
        other = engines.ask(engine, mode=mode, op="apply", w=w, X=X, y=y, lr=LR)
        record.close(
            name=f"one device vs {engine}", out=out["one_device"], ref=other["one_device"], oracle=f"{engine}-{mode}"
        )


@on("tensorflow", "jax", "torch", modes=("eager", "function"))
@settings(max_examples=max(5, settings.default.max_examples // 3))
@given(t=lookups())
def test_embedding_gradient_through_all_reduce(subject, record, engines, t):
    """The gradient of sum(c_i * E[ids_i]) over a replica's rows: TensorFlow's IndexedSlices (through
    all_reduce too), dense elsewhere; densified, np.add.at of c over the replica's ids; all-reduced with
    SUM, over all ids; one SGD step of the global-batch loss under the strategy: E - lr * sum / N."""
    _cpu_only(subject)
    E, ids, c = t
    record.example(E=E, ids=ids, c=c)
    record.scale = "inputs"
    n = ROWS // REPLICAS
    local = np.zeros((REPLICAS, VOCAB, DIM))
    for r in range(REPLICAS):
        np.add.at(local[r], ids[r * n : (r + 1) * n], np.asarray(c[r * n : (r + 1) * n], np.float64))
    total = local.sum(0)
    # per element: row v of a replica's gradient sums the c of its ids equal to v (scale: their |c|), the
    # all-reduce sums those over replicas, the step subtracts lr * that / N from E_v (scale: |E_v| plus it)
    mag = np.zeros((REPLICAS, VOCAB, DIM))
    for r in range(REPLICAS):
        np.add.at(mag[r], ids[r * n : (r + 1) * n], np.abs(np.asarray(c[r * n : (r + 1) * n], np.float64)))
    at = {"local": mag, "sum": np.stack([mag.sum(0)] * REPLICAS)}
    out = engines.ask(_engine(subject), mode=subject.mode, op="embedding", E=E, ids=ids, c=c, lr=LR)
    kinds = set(out["kind"])
    record.check(EXPECT, **{"embedding-gradient": kinds.pop() if len(kinds) == 1 else "mixed"})
    if "reduced_kind" in out:
        kinds = set(out["reduced_kind"])
        record.check(EXPECT, **{"embedding-all-reduce": kinds.pop() if len(kinds) == 1 else "mixed"})
    record.check(
        EXPECT,
        **{"embedding-sum": _which(out["sum"], {"sum": np.stack([total] * 2), "mean": np.stack([total / 2] * 2)})},
    )
    record.close(name="local", out=out["local"], ref=local.astype(E.dtype), oracle="closed-form", scale=at["local"])
    record.close(name="sum", out=out["sum"], ref=np.stack([total] * REPLICAS).astype(E.dtype), oracle="closed-form",
                 scale=at["sum"])  # fmt: skip
    steps = _steps(E, total / ROWS)
    record.check(EXPECT, **{"embedding-apply": _which(out["applied"][0], steps)})
    want, _ = EXPECT.lookup("embedding-apply", subject)
    if want in steps:
        factor = {"one-device": 1.0, "replicas-times": REPLICAS, "divided-by-replicas": 1.0 / REPLICAS}[want]
        moved = np.abs(np.asarray(E, np.float64)) + LR * factor * mag.sum(0) / ROWS
        record.close(
            name="applied",
            out=out["applied"],
            ref=np.stack([steps[want]] * REPLICAS).astype(E.dtype),
            oracle="closed-form",
            scale=np.stack([moved] * REPLICAS),
        )
    for engine, mode in _others(subject, engines, record):
        other = engines.ask(engine, mode=mode, op="embedding", E=E, ids=ids, c=c, lr=LR)
        for k in ("local", "sum"):
            record.close(name=f"{k} vs {engine}", out=out[k], ref=other[k], oracle=f"{engine}-{mode}", scale=at[k])


@on("tensorflow", modes=("eager", "function"))  # MultiWorkerMirroredStrategy: TensorFlow's own
@settings(max_examples=max(5, settings.default.max_examples // 5))
@given(b=batches())
def test_multi_worker_matches_one_process(subject, record, engines, b):
    """Two MultiWorkerMirroredStrategy workers (TF_CONFIG on 127.0.0.1): the same per-replica gradients,
    all-reduces and variables after a step as MirroredStrategy over two devices of one process, and
    the closed forms."""
    _cpu_only(subject)
    w, X, y = b
    record.example(w=w, X=X, y=y)
    record.scale = "inputs"
    G, full = _closed(w, X, y)
    same = True
    for op, extra in (("grads", {}), ("apply", {"lr": LR})):
        multi = engines.ask("tensorflow-multi-worker", mode=subject.mode, op=op, w=w, X=X, y=y, **extra)
        one = engines.ask("tensorflow-mirrored", mode=subject.mode, op=op, w=w, X=X, y=y, **extra)
        for k, v in one.items():
            same &= _near(multi[k], np.asarray(v, np.float64))
            record.close(name=f"{op} {k}", out=multi[k], ref=v, oracle=f"{subject.id} one process")
    record.check(EXPECT, **{"multi-worker": "same-as-one-process" if same else "differs"})
    grads = engines.ask("tensorflow-multi-worker", mode=subject.mode, op="grads", w=w, X=X, y=y)
    record.close(name="mean", out=grads["mean"], ref=np.stack([full] * 2).astype(w.dtype), oracle="closed-form")
    record.close(name="local_global", out=grads["local_global"], ref=(G / ROWS).astype(w.dtype), oracle="closed-form")


# ---------------------------------------------------------------- batch norm per replica or synchronized
BN_EPS = 1e-3
#: four rows per replica: with two, a replica's normalised rows are +-1 whatever x is, and its gradient ~0
NORM_ROWS = 8


@st.composite
def norm_batches(draw):
    """(X, c): X (N, d) with 1/4 <= |entries| <= 2, each replica's rows apart (its variance not tiny) and its
    mean apart from the global one (so per-replica and global statistics differ), c the cotangent."""
    d = np.float32  # batch norm's training dtype (Keras 2's synchronized layer refuses float64: measured)
    X = draw(ss.signed_arrays((NORM_ROWS, DIM), d, 0.25, 2.0), label="X")
    c = draw(ss.signed_arrays((NORM_ROWS, DIM), d, 0.25, 2.0), label="c")
    x64 = X.astype(np.float64)
    parts = x64.reshape(REPLICAS, NORM_ROWS // REPLICAS, DIM)
    assume(np.ptp(parts, axis=1).min() > 0.25 and np.abs(parts.mean(1) - x64.mean(0)).max() > 0.25)
    for forms in _bn_forms(X, c).values():  # every pair of answers apart: the observation can tell them
        a, b = forms.values()
        assume(np.abs(a - b).max() > 0.05 * max(np.abs(a).max(), np.abs(b).max(), 1.0))
    return X, c


def _bn_np(x, c):
    """(y, d sum(c * y) / dx) of batch norm over x's rows (gamma 1, beta 0), float64."""
    mu, sigma = x.mean(0), np.sqrt(x.var(0) + BN_EPS)
    xhat = (x - mu) / sigma
    return xhat, (c - c.mean(0) - xhat * (c * xhat).mean(0)) / sigma


def _bn_forms(X, c):
    """Per replica and global: outputs and gradients (R, n, d), moving means (R, d) after one step from 0
    with momentum 1/2."""
    x64, c64 = np.asarray(X, np.float64), np.asarray(c, np.float64)
    n = len(x64) // REPLICAS
    parts = [(x64[r * n : (r + 1) * n], c64[r * n : (r + 1) * n]) for r in range(REPLICAS)]
    per = [_bn_np(x, cr) for x, cr in parts]
    y_glob, g_glob = _bn_np(x64, c64)
    return {
        "y": {"per-replica": np.stack([p[0] for p in per]), "global": y_glob.reshape(REPLICAS, n, -1)},
        "g": {"per-replica": np.stack([p[1] for p in per]), "global-loss": g_glob.reshape(REPLICAS, n, -1)},
        "mm": {
            "per-replica": np.stack([0.5 * x.mean(0) for x, _ in parts]),
            "global": np.stack([0.5 * x64.mean(0)] * REPLICAS),
        },
    }


@on("tensorflow", "torch", modes=("eager", "function"))  # JAX has no batch-norm layer of its own
@settings(max_examples=max(5, settings.default.max_examples // 3))
@given(b=norm_batches())
def test_batch_norm_statistics_per_replica_or_synchronized(subject, record, engines, b):
    """A batch-norm layer in training mode over each replica's rows: by default it normalises by the
    replica's own statistics (its gradient too) and each replica's copy of the moving mean follows its own
    batch; synchronized (Keras' synchronized=True, PyTorch's SyncBatchNorm), by the global batch's, the
    gradient that of the global loss, the moving means equal; held to the float64 closed forms."""
    _cpu_only(subject)
    X, c = b
    record.example(X=X, c=c)
    record.scale = "inputs"
    forms = _bn_forms(X, c)
    out = engines.ask(_engine(subject), mode=subject.mode, op="batchnorm", X=X, c=c)
    for how in ("default", "synchronized"):
        got = out[how]
        keys = {"y": f"batch-norm[{how}]", "g": f"batch-norm-grad[{how}]", "mm": f"moving-mean[{how}]"}
        if isinstance(got, str):  # the layer refused: every key says so
            record.check(EXPECT, **{key: got for key in keys.values()})
            continue
        record.check(EXPECT, **{key: _which(got[part], forms[part]) for part, key in keys.items()})
        for part, key in keys.items():
            want, _ = EXPECT.lookup(key, subject)
            if want in forms[part]:
                record.close(name=key, out=got[part], ref=forms[part][want].astype(X.dtype), oracle="closed-form")
