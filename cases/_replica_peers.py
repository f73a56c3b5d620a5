"""What the peers of ``replica-gradients`` compute (served by :mod:`suite.peers`).

Each factory imports its framework in a process of its own, set up the way data parallelism needs
it (two logical CPU devices, two XLA host devices, a gloo process group, a TF_CONFIG cluster), and
answers requests ``{"op": ..., "mode": ..., arrays}`` with NumPy. The data layout is the same
everywhere: ``X`` (N, d), ``y`` (N,) with N = 2 n; replica (or rank) r takes rows ``r n .. (r+1) n``.
Answers hold one entry per replica on a leading axis (a process of a multi-process group answers
for its own replica alone).

- ``grads``: the gradient of ``l_i = (x_i . w - y_i)^2 / 2`` with respect to ``w``, per replica, of
  the replica's mean loss (``local_mean``) and of its sum over the global batch size
  (``local_global``; TensorFlow: ``tf.nn.compute_average_loss(.., global_batch_size=N)``, and
  ``local_default`` without the argument); the all-reduce of ``local_mean`` with SUM (``sum``) and
  MEAN (``mean``), of ``local_global`` with SUM (``sum_global``).
- ``apply``: ``w`` after one SGD step (``lr``) from ``w``, per replica, with the framework's
  implicit aggregation (a Keras optimizer under the strategy, DDP's backward; JAX has none: pmean,
  its data-parallel recipe), for the replica-mean loss (``mean_loss``) and the global-batch loss
  (``global_loss``), and ``one_device``: the same optimizer on one device with the whole batch.
- ``embedding``: the gradient of ``sum(c_i * E[ids_i])`` over the replica's rows with respect to the
  table ``E``: its type (``kind``: TensorFlow's IndexedSlices), per replica densified (``local``),
  all-reduced with SUM (``sum``, and ``reduced_kind``), and ``E`` after an SGD step under the
  strategy (``applied``) with the global-batch loss.
- ``batchnorm``: a batch-norm layer in training mode (momentum 1/2, epsilon 1e-3, moving mean from 0)
  over the replica's rows, per replica and ``synchronized`` (Keras' ``synchronized=True``, PyTorch's
  ``SyncBatchNorm``): for ``default`` and ``synchronized`` its output ``y`` and the gradient ``g`` of the
  replica's ``sum(c * y)`` with respect to its rows (per replica, ``(R, n, d)``), and ``mm``, each
  replica's copy of the moving mean after the step (``(R, d)``), or the error (``cmp.remote(e)``: the
  observation ``raises:<Name>`` with its message).

Faults (``config["faults"]``) are applied to TensorFlow right after it is imported, as the fault
plugin does in the pytest process.
"""

from __future__ import annotations

import os

import numpy as np

from suite import compare as cmp
from suite.frameworks import use_jax_compilation_cache


def _split(a, r, size):
    n = a.shape[0] // size
    return a[r * n : (r + 1) * n]


# ---------------------------------------------------------------- TensorFlow
def tensorflow(rank: int, size: int, config):
    """A MirroredStrategy over two logical CPU devices (``config["strategy"] == "mirrored"``), or one
    worker of a MultiWorkerMirroredStrategy (``"multi-worker"``, TF_CONFIG in the environment)."""
    import tensorflow as tf

    if config.get("faults"):
        from suite import faults

        faults.applier(config["faults"])("tensorflow", tf)
    if config["strategy"] == "mirrored":
        cpu = tf.config.list_physical_devices("CPU")[0]
        tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
        strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    else:
        import json

        os.environ["TF_CONFIG"] = json.dumps(config["tf_config"])
        strategy = tf.distribute.MultiWorkerMirroredStrategy()
    import keras

    replicas = strategy.num_replicas_in_sync
    SUM, MEAN = tf.distribute.ReduceOp.SUM, tf.distribute.ReduceOp.MEAN

    def mine(a, ctx):
        n = tf.shape(a)[0] // replicas
        r = ctx.replica_id_in_sync_group
        return a[r * n : (r + 1) * n]

    def per_example(w, X, y):
        return 0.5 * tf.square(tf.linalg.matvec(X, w) - y)

    def grads_fn(w, X, y):
        ctx = tf.distribute.get_replica_context()
        xs, ys = mine(X, ctx), mine(y, ctx)
        with tf.GradientTape(persistent=True) as tape:
            tape.watch(w)
            pe = per_example(w, xs, ys)
            losses = {
                "local_mean": tf.reduce_mean(pe),
                "local_global": tf.nn.compute_average_loss(pe, global_batch_size=tf.shape(X)[0]),
                "local_default": tf.nn.compute_average_loss(pe),
            }
        g = {k: tape.gradient(v, w) for k, v in losses.items()}
        g["sum"] = ctx.all_reduce(SUM, g["local_mean"])
        g["mean"] = ctx.all_reduce(MEAN, g["local_mean"])
        g["sum_global"] = ctx.all_reduce(SUM, g["local_global"])
        return g

    state: dict = {}

    def model(dtype, shape, key):
        """Variables and optimizers, one set per (dtype, shape, key), made once outside any trace."""
        k = (dtype, shape, key)
        if k not in state:
            with strategy.scope():
                v = tf.Variable(tf.zeros(shape, dtype))
                opt = keras.optimizers.SGD(learning_rate=0.125)
                if hasattr(opt, "build"):  # Keras 3 (and the new Keras 2 optimizers): variables made now
                    opt.build([v])
            one = tf.Variable(tf.zeros(shape, dtype))
            one_opt = keras.optimizers.SGD(learning_rate=0.125)
            if hasattr(one_opt, "build"):
                one_opt.build([one])
            state[k] = (v, opt, one, one_opt)
        return state[k]

    def apply_fn(v, opt, X, y, kind):
        ctx = tf.distribute.get_replica_context()
        xs, ys = mine(X, ctx), mine(y, ctx)
        with tf.GradientTape() as tape:
            pe = per_example(v, xs, ys)
            loss = (
                tf.reduce_mean(pe)
                if kind == "mean_loss"
                else tf.nn.compute_average_loss(pe, global_batch_size=tf.shape(X)[0])
            )
        opt.apply_gradients([(tape.gradient(loss, v), v)])
        return tf.identity(v)

    def one_device_fn(one, one_opt, X, y):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(per_example(one, X, y))
        one_opt.apply_gradients([(tape.gradient(loss, one), one)])
        return tf.identity(one)

    def embedding_fn(E, ids, c):
        ctx = tf.distribute.get_replica_context()
        with tf.GradientTape() as tape:
            tape.watch(E)
            loss = tf.reduce_sum(mine(c, ctx) * tf.gather(E, mine(ids, ctx)))
        g = tape.gradient(loss, E)
        red = ctx.all_reduce(SUM, g)
        kinds = tf.constant([type(g).__name__, type(red).__name__])
        return kinds, tf.convert_to_tensor(g), tf.convert_to_tensor(red)

    def emb_apply_fn(v, opt, ids, c, N):
        ctx = tf.distribute.get_replica_context()
        with tf.GradientTape() as tape:
            per = tf.reduce_sum(mine(c, ctx) * tf.gather(v, mine(ids, ctx)), axis=1)
            loss = tf.nn.compute_average_loss(per, global_batch_size=N)
        opt.apply_gradients([(tape.gradient(loss, v), v)])
        return tf.identity(v)

    norms: dict = {}

    def norm(dtype, d, sync):
        """One BatchNormalization per (dtype, d, synchronized), built under the strategy."""
        k = (dtype, d, sync)
        if k not in norms:
            with strategy.scope():
                bn = keras.layers.BatchNormalization(synchronized=sync, momentum=0.5, epsilon=1e-3, dtype=dtype)
                bn.build((None, d))
            norms[k] = bn
        return norms[k]

    def bn_fn(bn, X, c):
        ctx = tf.distribute.get_replica_context()
        xs, cs = mine(X, ctx), mine(c, ctx)
        with tf.GradientTape() as tape:
            tape.watch(xs)
            y = bn(xs, training=True)
            loss = tf.reduce_sum(cs * y)
        return y, tape.gradient(loss, xs)

    compiled: dict = {}

    def call(name, fn, mode, *args):
        """``strategy.run(fn)`` eagerly, or inside one tf.function per program (``mode="function"``)."""

        def step(*a):
            return strategy.run(fn, args=a)

        if mode == "function":
            if name not in compiled:
                compiled[name] = tf.function(step, reduce_retracing=True)
            step = compiled[name]
        return step(*args)

    def local(x):
        return np.stack([np.asarray(v) for v in strategy.experimental_local_results(x)])

    def handle(req):
        op, mode = req["op"], req["mode"]
        if op == "grads":
            out = call("grads", grads_fn, mode, *(tf.constant(req[k]) for k in ("w", "X", "y")))
            return {k: local(v) for k, v in out.items()}
        if op == "apply":
            w, X, y = req["w"], tf.constant(req["X"]), tf.constant(req["y"])
            v, opt, one, one_opt = model(w.dtype.name, w.shape, "apply")
            opt.learning_rate.assign(req["lr"])
            one_opt.learning_rate.assign(req["lr"])
            res = {}
            for kind in ("mean_loss", "global_loss"):
                v.assign(w)
                fn = lambda X, y, kind=kind: apply_fn(v, opt, X, y, kind)  # noqa: E731
                out = call(f"apply-{kind}-{w.dtype}-{w.shape}", fn, mode, X, y)
                res[kind] = local(out)
            one.assign(w)
            if mode == "function" and "one" not in compiled:
                compiled["one"] = tf.function(one_device_fn)
            f = one_device_fn if mode == "eager" else compiled["one"]
            res["one_device"] = np.asarray(f(one, one_opt, X, y))
            return res
        if op == "embedding":
            E, ids, c = tf.constant(req["E"]), tf.constant(req["ids"]), tf.constant(req["c"])
            kinds, g, red = call("embedding", embedding_fn, mode, E, ids, c)
            v, opt, _, _ = model(req["E"].dtype.name, req["E"].shape, "embedding")
            opt.learning_rate.assign(req["lr"])
            v.assign(req["E"])
            N = tf.constant(req["ids"].shape[0])
            fn = lambda ids, c, N: emb_apply_fn(v, opt, ids, c, N)  # noqa: E731
            applied = call(f"emb-apply-{req['E'].dtype}-{req['E'].shape}", fn, mode, ids, c, N)
            k = [x.astype(str) if x.dtype.kind in "SO" else x for x in local(kinds)]
            kind = [[s.decode() if isinstance(s, bytes) else str(s) for s in row] for row in k]
            return {
                "kind": [row[0] for row in kind],
                "reduced_kind": [row[1] for row in kind],
                "local": local(g),
                "sum": local(red),
                "applied": local(applied),
            }
        if op == "batchnorm":
            X, c = tf.constant(req["X"]), tf.constant(req["c"])
            res = {}
            for sync in (False, True):
                bn = norm(req["X"].dtype.name, req["X"].shape[1], sync)
                bn.moving_mean.assign(tf.zeros_like(bn.moving_mean))  # cross-replica: every copy
                bn.moving_variance.assign(tf.ones_like(bn.moving_variance))
                fn = lambda X, c, bn=bn: bn_fn(bn, X, c)  # noqa: E731
                try:
                    y, g = call(f"bn-{sync}-{req['X'].dtype}-{req['X'].shape}", fn, mode, X, c)
                except Exception as e:  # noqa: BLE001 - a refusal is the answer, as PyTorch's below
                    res["synchronized" if sync else "default"] = cmp.remote(e)
                    continue
                var = bn.moving_mean  # Keras 3 wraps the tf.Variable (.value); Keras 2's is one (.value())
                var = var if callable(getattr(var, "value", None)) else var.value
                mm = strategy.experimental_local_results(var)  # each replica's copy
                res["synchronized" if sync else "default"] = {
                    "y": local(y),
                    "g": local(g),
                    "mm": np.stack([np.asarray(v) for v in mm]),
                }
            return res
        raise ValueError(f"unknown op {op!r}")

    return handle


# ---------------------------------------------------------------- JAX
def _array_kind(g, shape) -> str:
    """``dense`` for an array of the table's shape, else the gradient's type name."""
    return "dense" if getattr(g, "shape", None) == tuple(shape) and not hasattr(g, "indices") else type(g).__name__


def jax(rank: int, size: int, config):
    """Two XLA host devices (XLA_FLAGS=--xla_force_host_platform_device_count=2), shard_map over them."""
    import jax
    import jax.numpy as jnp
    from jax.sharding import PartitionSpec as P

    # eager shard_map compiles every primitive it meets anew on each call: the shared cache loads them
    use_jax_compilation_cache(jax)

    devices = jax.devices()
    if len(devices) != 2:
        raise RuntimeError(f"expected 2 host devices, got {devices}")
    mesh = jax.sharding.Mesh(np.array(devices), ("r",))

    def loss(w, X, y):
        return 0.5 * jnp.square(X @ w - y)

    def grads_fn(w, wd, X, y, N):
        # w is replicated (unvarying over "r"): the gradient of a per-device loss with respect to it is
        # psum'd by shard_map's transpose. wd is the device's own copy (the rows of a stacked w): its
        # gradient is the device's (what jax.lax.pcast(w, to="varying") gives in new JAX, in old JAX too).
        wv = wd[0]
        replicated = jax.grad(lambda w: jnp.mean(loss(w, X, y)))(w)
        g_mean = jax.grad(lambda w: jnp.mean(loss(w, X, y)))(wv)
        g_glob = jax.grad(lambda w: jnp.sum(loss(w, X, y)) / N)(wv)
        out = {
            "local_replicated": replicated,
            "local_mean": g_mean,
            "local_global": g_glob,
            "sum": jax.lax.psum(g_mean, "r"),
            "mean": jax.lax.pmean(g_mean, "r"),
            "sum_global": jax.lax.psum(g_glob, "r"),
        }
        return {k: v[None] for k, v in out.items()}

    def apply_fn(wd, X, y, lr, N):
        w = wd[0]
        g_mean = jax.lax.pmean(jax.grad(lambda w: jnp.mean(loss(w, X, y)))(w), "r")
        g_glob = jax.lax.pmean(jax.grad(lambda w: jnp.sum(loss(w, X, y)) / N)(w), "r")
        return {"mean_loss": (w - lr * g_mean)[None], "global_loss": (w - lr * g_glob)[None]}

    def embedding_fn(Ed, ids, c, N):
        E = Ed[0]
        g = jax.grad(lambda E: jnp.sum(c * E[ids]))(E)
        g_glob = jax.grad(lambda E: jnp.sum(c * E[ids]) / N)(E)
        return {"local": g[None], "sum": jax.lax.psum(g, "r")[None], "global": jax.lax.psum(g_glob, "r")[None]}

    try:
        shard_map = jax.shard_map
    except AttributeError:  # older JAX (0.4.30 has only jax.experimental.shard_map)
        from jax.experimental.shard_map import shard_map

    def sharded(fn, split, arity):
        """``fn`` over the mesh, made once: the arguments at ``split`` divided by rows, the rest replicated
        (eager calls of one shard_map object reuse its compilations)."""
        specs = tuple(P("r") if i in split else P() for i in range(arity))
        return shard_map(fn, mesh=mesh, in_specs=specs, out_specs=P("r"))

    programs = {
        "grads": sharded(grads_fn, (1, 2, 3), 5),
        "apply": sharded(apply_fn, (0, 1, 2), 5),
        "embedding": sharded(embedding_fn, (0, 1, 2), 4),
    }

    def copies(a):
        """One copy of ``a`` per device, stacked: sharded by rows, each device gets its own."""
        return np.stack([a] * len(devices))

    jitted = {k: jax.jit(v) for k, v in programs.items()}

    def handle(req):
        op = req["op"]
        fn = jitted[op] if req["mode"] == "jit" else programs[op]
        if op == "grads":
            out = fn(req["w"], copies(req["w"]), req["X"], req["y"], float(req["X"].shape[0]))
        elif op == "apply":
            out = fn(copies(req["w"]), req["X"], req["y"], req["lr"], float(req["X"].shape[0]))
            w = req["w"]
            full = jax.grad(lambda w: jnp.mean(loss(w, req["X"], req["y"])))(w)
            out = {**out, "one_device": w - req["lr"] * full}
        elif op == "embedding":
            out = fn(copies(req["E"]), req["ids"], req["c"], float(req["ids"].shape[0]))
            out = {
                **out,
                "kind": [_array_kind(jax.grad(lambda E: jnp.sum(E[req["ids"]]))(req["E"]), req["E"].shape)] * 2,
                "applied": req["E"] - req["lr"] * out.pop("global"),
            }
        else:
            raise ValueError(f"unknown op {op!r}")
        return {k: (np.asarray(v) if not isinstance(v, list) else v) for k, v in out.items()}

    return handle


# ---------------------------------------------------------------- PyTorch
def torch(rank: int, size: int, config):
    """One rank of a gloo process group on 127.0.0.1 (MASTER_PORT from the config); DDP over it."""
    import torch
    import torch.distributed as dist

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(config["port"]))
    dist.init_process_group("gloo", rank=rank, world_size=size, timeout=__import__("datetime").timedelta(seconds=60))

    class Linear(torch.nn.Module):
        def __init__(self, d, dtype):
            super().__init__()
            self.w = torch.nn.Parameter(torch.zeros(d, dtype=dtype))

        def forward(self, X, y):
            return 0.5 * (X @ self.w - y) ** 2

    models: dict = {}

    def ddp(d, dtype):
        """One DDP model per (d, dtype): made by both ranks at the same request (a collective)."""
        if (d, dtype) not in models:
            m = Linear(d, dtype)
            models[(d, dtype)] = (m, torch.nn.parallel.DistributedDataParallel(m))
        return models[(d, dtype)]

    def handle(req):
        op = req["op"]
        if op == "grads":
            w, X, y = (torch.from_numpy(req[k]) for k in ("w", "X", "y"))
            N = X.shape[0]
            xs, ys = _split(X, rank, size), _split(y, rank, size)
            wl = w.clone().requires_grad_(True)
            pe = 0.5 * (xs @ wl - ys) ** 2
            (g_mean,) = torch.autograd.grad(pe.mean(), wl, retain_graph=True)
            (g_glob,) = torch.autograd.grad(pe.sum() / N, wl)
            s, m, sg = g_mean.clone(), g_mean.clone(), g_glob.clone()
            dist.all_reduce(s, op=dist.ReduceOp.SUM)
            dist.all_reduce(sg, op=dist.ReduceOp.SUM)
            try:
                dist.all_reduce(m, op=dist.ReduceOp.AVG)
                mean = m.numpy()[None]
            except Exception as e:  # noqa: BLE001 - gloo may not offer AVG: the refusal is the answer
                mean = cmp.remote(e)
            return {
                "local_mean": g_mean.numpy()[None],
                "local_global": g_glob.numpy()[None],
                "sum": s.numpy()[None],
                "mean": mean,
                "sum_global": sg.numpy()[None],
            }
        if op == "apply":
            w, X, y = (torch.from_numpy(req[k]) for k in ("w", "X", "y"))
            N = X.shape[0]
            xs, ys = _split(X, rank, size), _split(y, rank, size)
            module, model = ddp(w.shape[0], w.dtype)
            out = {}
            for kind in ("mean_loss", "global_loss"):
                with torch.no_grad():
                    module.w.copy_(w)
                opt = torch.optim.SGD(model.parameters(), lr=req["lr"])
                opt.zero_grad()
                pe = model(xs, ys)
                (pe.mean() if kind == "mean_loss" else pe.sum() / N).backward()
                opt.step()
                out[kind] = module.w.detach().numpy().copy()[None]
            one = Linear(w.shape[0], w.dtype)
            with torch.no_grad():
                one.w.copy_(w)
            opt = torch.optim.SGD(one.parameters(), lr=req["lr"])
            one(X, y).mean().backward()
            opt.step()
            out["one_device"] = one.w.detach().numpy().copy()
            return out
        if op == "embedding":
            E, ids, c = (torch.from_numpy(req[k]) for k in ("E", "ids", "c"))
            N = ids.shape[0]
            El = E.clone().requires_grad_(True)
            (g,) = torch.autograd.grad((_split(c, rank, size) * El[_split(ids, rank, size)]).sum(), El)
            s = g.clone()
            dist.all_reduce(s, op=dist.ReduceOp.SUM)
            emb = torch.nn.Embedding.from_pretrained(E.clone(), freeze=False)
            model = torch.nn.parallel.DistributedDataParallel(emb)
            opt = torch.optim.SGD(model.parameters(), lr=req["lr"])
            (_split(c, rank, size) * model(_split(ids, rank, size))).sum().div(N).backward()
            opt.step()
            return {
                "kind": ["sparse" if g.is_sparse else "dense"],
                "local": g.numpy()[None],
                "sum": s.numpy()[None],
                "applied": emb.weight.detach().numpy().copy()[None],
            }
        if op == "batchnorm":
            X, c = (torch.from_numpy(req[k]) for k in ("X", "c"))
            xs, cs = _split(X, rank, size), _split(c, rank, size)
            res = {}
            for sync in (False, True):
                try:
                    bn = torch.nn.BatchNorm1d(X.shape[1], eps=1e-3, momentum=0.5, dtype=X.dtype)
                    if sync:
                        bn = torch.nn.SyncBatchNorm.convert_sync_batchnorm(bn)
                    model = torch.nn.parallel.DistributedDataParallel(bn)
                    x = xs.clone().requires_grad_(True)
                    y = model(x)
                    (cs * y).sum().backward()
                    out = {  # this rank's copy of the moving mean: the ranks' answers are stacked
                        "y": y.detach().numpy()[None],
                        "g": x.grad.numpy()[None],
                        "mm": bn.running_mean.detach().numpy().copy()[None],
                    }
                except Exception as e:  # noqa: BLE001 - a refusal (SyncBatchNorm on the CPU) is the answer
                    out = cmp.remote(e)
                res["synchronized" if sync else "default"] = out
            return res
        raise ValueError(f"unknown op {op!r}")

    return handle
