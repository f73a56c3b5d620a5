"""What the peers of ``training-step-semantics`` compute (served by :mod:`suite.peers`).

A model is saved in one process and restored in another, so nothing of the Python that built it (its
``tf.custom_gradient`` function, its traced functions) is in the restoring process but what the file
holds and what the loader's module defines (the custom layer's class, registered for ``.keras``).

- ``saver``: ``{"op": "save", "program", "dir", x, c, kernel, bias}`` builds ``Dense(2, tanh)``
  (``plain``) or ``Dense(2, tanh) -> Square`` (``custom``: ``y = h^2`` with a ``tf.custom_gradient``
  whose backward is ``3 h`` instead of ``2 h``, so a result tells which derivative it took), takes the
  gradients of ``sum(c * y)`` with respect to x, the kernel and the bias eagerly, and saves the model
  as a SavedModel (``tf.saved_model.save`` of a module with a signature) and as a ``.keras`` file.
  Answers the gradients, and per format the path or the refusal (``cmp.remote``); the SavedModel is
  also saved with ``SaveOptions(experimental_custom_gradients=False)`` (``savedmodel-no-custom``).
- ``loader``: ``{"op": "load", "format", "path", "mode", x, c}`` restores the model
  (``tf.saved_model.load``, ``keras.models.load_model``) and takes the same gradients with respect to
  x and the restored kernel and bias, eagerly, in a ``tf.function`` or XLA-compiled (``mode``).
  Answers the gradients or the refusal.

Faults (``config["faults"]``) are applied to TensorFlow right after it is imported, as the fault plugin
does in the pytest process.
"""

from __future__ import annotations

import os

import numpy as np

from suite import compare as cmp
from suite.frameworks import use_jax_compilation_cache


def _tensorflow(config):
    import tensorflow as tf

    if config.get("faults"):
        from suite import faults

        faults.applier(config["faults"])("tensorflow", tf)
    return tf


def _square_layer(tf):
    """The custom-gradient layer, registered for ``.keras`` files (both processes define it)."""
    keras = tf.keras

    @tf.custom_gradient
    def square(h):
        def grad(up):
            return up * 3.0 * h  # not 2 h: a restored gradient shows whether the custom one survived

        return tf.square(h), grad

    register = getattr(getattr(keras, "saving", None), "register_keras_serializable", None)
    register = register or keras.utils.register_keras_serializable

    @register(package="adsem")
    class Square(keras.layers.Layer):
        def call(self, h):
            return square(h)

    return Square


def _variable(v):
    """The tf.Variable behind a Keras 3 variable (``.value``), or a Keras 2 one (a tf.Variable)."""
    return v if callable(getattr(v, "value", None)) else v.value


def _grads(tf, fn, variables, x, c, mode):
    def step(x):
        with tf.GradientTape() as tape:
            tape.watch(x)
            loss = tf.reduce_sum(c * fn(x))
        return tape.gradient(loss, [x, *variables])

    if mode != "eager":
        step = tf.function(step, jit_compile=mode == "xla")
    return [None if g is None else np.asarray(g) for g in step(tf.constant(x))]


def saver(rank: int, size: int, config):
    tf = _tensorflow(config)
    keras = tf.keras
    Square = _square_layer(tf)

    def build(program, kernel, bias):
        inp = keras.Input((3,))
        dense = keras.layers.Dense(2, activation="tanh", name="dense")
        out = dense(inp)
        if program == "custom":
            out = Square(name="square")(out)
        model = keras.Model(inp, out)
        model.set_weights([kernel, bias])
        return model, dense

    def handle(req):
        model, dense = build(req["program"], req["kernel"], req["bias"])
        variables = [_variable(dense.kernel), _variable(dense.bias)]
        before = _grads(tf, model, variables, req["x"], req["c"], "eager")
        base = os.path.join(req["dir"], req["program"])
        paths = {}
        try:
            module = tf.Module()
            module.kernel, module.bias = variables
            module.model = model
            module.f = tf.function(lambda x: model(x), input_signature=[tf.TensorSpec([None, 3], tf.float32)])
            tf.saved_model.save(module, base + "-savedmodel")
            paths["savedmodel"] = base + "-savedmodel"
            options = tf.saved_model.SaveOptions(experimental_custom_gradients=False)
            tf.saved_model.save(module, base + "-savedmodel-no-custom", options=options)
            paths["savedmodel-no-custom"] = base + "-savedmodel-no-custom"
        except Exception as e:  # noqa: BLE001 - a refusal to save is the answer
            paths["savedmodel"] = paths["savedmodel-no-custom"] = cmp.remote(e)
        try:
            model.save(base + ".keras")
            paths["keras"] = base + ".keras"
        except Exception as e:  # noqa: BLE001
            paths["keras"] = cmp.remote(e)
        return {"before": before, "paths": paths}

    return handle


def loader(rank: int, size: int, config):
    tf = _tensorflow(config)
    _square_layer(tf)  # a .keras file names the class; the loading program must define it
    loaded: dict = {}

    def restore(fmt, path):
        if path not in loaded:
            if fmt.startswith("savedmodel"):
                obj = tf.saved_model.load(path)
                loaded[path] = (obj.f, [obj.kernel, obj.bias])
            else:
                model = tf.keras.models.load_model(path)
                dense = model.get_layer("dense")
                loaded[path] = (model, [_variable(dense.kernel), _variable(dense.bias)])
        return loaded[path]

    def handle(req):
        try:
            fn, variables = restore(req["format"], req["path"])
            return {"grads": _grads(tf, fn, variables, req["x"], req["c"], req["mode"])}
        except Exception as e:  # noqa: BLE001 - a refusal to restore or differentiate is the answer
            return {"grads": cmp.remote(e)}

    return handle


# ---------------------------------------------------------------- gradient accumulation over replicas
# ``{"op": "accumulate", "mode", w, X, y}``: X (steps, N, d), y (steps, N); replica (or rank) r takes rows
# r n .. (r+1) n of every micro-batch and accumulates the gradient of its mean loss
# (x . w - y)^2 / 2 over the steps. Answers one entry per replica on a leading axis.
AGGREGATIONS = ("NONE", "SUM", "MEAN", "ONLY_FIRST_REPLICA")


def _rows(a, r, size):
    """Replica r's rows (the first axis) of one micro-batch."""
    n = a.shape[0] // size
    return a[r * n : (r + 1) * n]


def mirrored(rank: int, size: int, config):
    """A MirroredStrategy over two logical CPU devices; one accumulator variable per aggregation, made
    under its scope (a MirroredVariable), ``assign_add`` of each replica's gradient in replica context."""
    tf = _tensorflow(config)
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
    strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    replicas = strategy.num_replicas_in_sync
    accumulators: dict = {}
    compiled: dict = {}

    def accumulator(name, shape, dtype):
        if (name, shape, dtype) not in accumulators:
            with strategy.scope():
                accumulators[name, shape, dtype] = tf.Variable(
                    tf.zeros(shape, dtype), trainable=False, aggregation=getattr(tf.VariableAggregation, name)
                )
        return accumulators[name, shape, dtype]

    def accumulate(acc, w, X, y):
        r = tf.distribute.get_replica_context().replica_id_in_sync_group
        n = X.shape[1] // replicas
        for s in range(X.shape[0]):  # micro-batches
            xs, ys = X[s, r * n : (r + 1) * n], y[s, r * n : (r + 1) * n]
            with tf.GradientTape() as tape:
                tape.watch(w)
                loss = tf.reduce_mean(0.5 * tf.square(tf.linalg.matvec(xs, w) - ys))
            acc.assign_add(tape.gradient(loss, w))
        return tf.identity(acc)

    def handle(req):
        w, X, y = (tf.constant(req[k]) for k in ("w", "X", "y"))
        out = {}
        for name in AGGREGATIONS:
            acc = accumulator(name, tuple(req["w"].shape), req["w"].dtype.name)
            acc.assign(tf.zeros_like(acc))

            def step(w, X, y, acc=acc):
                return strategy.run(accumulate, args=(acc, w, X, y))

            if req["mode"] == "function":
                key = (name, req["X"].shape, req["w"].dtype.name)
                step = compiled.setdefault(key, tf.function(step))
            try:
                step(w, X, y)
            except Exception as e:  # noqa: BLE001 - the refusal is the answer
                out[name] = cmp.remote(e)
                continue
            out[name] = np.stack([np.asarray(v) for v in strategy.experimental_local_results(acc)])
        return out

    return handle


def jax_psum(rank: int, size: int, config):
    """Two XLA host devices; each accumulates its gradients over the micro-batches, then ``psum``."""
    import jax
    import jax.numpy as jnp
    from jax.sharding import PartitionSpec as P

    # eager shard_map compiles every primitive it meets anew on each call: the shared cache loads them
    use_jax_compilation_cache(jax)

    devices = jax.devices()
    mesh = jax.sharding.Mesh(np.array(devices), ("r",))
    try:
        shard_map = jax.shard_map
    except AttributeError:  # older JAX (0.4.30 has only jax.experimental.shard_map)
        from jax.experimental.shard_map import shard_map

    def accumulate(wd, X, y):
        w = wd[0]

        def loss(w, xs, ys):
            return jnp.mean(0.5 * jnp.square(xs @ w - ys))

        acc = sum(jax.grad(loss)(w, X[s], y[s]) for s in range(X.shape[0]))
        return jax.lax.psum(acc, "r")[None]

    fn = shard_map(accumulate, mesh=mesh, in_specs=(P("r"), P(None, "r"), P(None, "r")), out_specs=P("r"))
    jitted = jax.jit(fn)

    def handle(req):
        f = jitted if req["mode"] == "jit" else fn
        return {"psum": np.asarray(f(np.stack([req["w"]] * len(devices)), req["X"], req["y"]))}

    return handle


def torch_ddp(rank: int, size: int, config):
    """One rank of a gloo group; DDP over a bias-free linear layer, backward under ``no_sync()`` for all
    micro-batches but the last (the gradient all-reduce, an average, runs once)."""
    import contextlib
    import datetime

    import torch
    import torch.distributed as dist

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(config["port"]))
    dist.init_process_group("gloo", rank=rank, world_size=size, timeout=datetime.timedelta(seconds=60))

    def handle(req):
        w, X, y = (torch.from_numpy(req[k]) for k in ("w", "X", "y"))
        lin = torch.nn.Linear(w.shape[0], 1, bias=False, dtype=w.dtype)
        with torch.no_grad():
            lin.weight.copy_(w[None])
        model = torch.nn.parallel.DistributedDataParallel(lin)
        steps = X.shape[0]
        for s in range(steps):
            xs, ys = _rows(X[s], rank, size), _rows(y[s], rank, size)
            sync = contextlib.nullcontext() if s == steps - 1 else model.no_sync()
            with sync:
                (0.5 * (model(xs)[:, 0] - ys) ** 2).mean().backward()
        return {"no_sync": lin.weight.grad[0].detach().numpy().copy()[None]}

    return handle
