"""The NumPy-behaviour peer of ``dtype-gradients``: TensorFlow after
``tf.experimental.numpy.experimental_enable_numpy_behavior(prefer_float32=...)``, which patches
Tensor's operators and sets process-wide flags that nothing undoes, so it runs in a process of its
own (served by :mod:`suite.peers`).

``promotion(rank, size, config)``: ``config = {"prefer_float32": bool, "faults": [...]}`` (the run's
TensorFlow faults, applied right after the import, as the fault plugin does in the pytest process).
It answers ``{"x", "mode", "operands"}`` (``x`` a float32 vector; ``mode`` the subject's: ``eager``,
``function``, ``xla`` or ``graph``; ``operands``: {name: a Python or NumPy scalar}) with, per
operand ``c``, ``(z, g)``: ``z = v * c`` for a float32 variable ``v`` holding ``x`` and the gradient
of ``sum(z)`` with respect to ``v`` (``tape.gradient``; ``tf.gradients`` of a placeholder in a v1
graph), as NumPy arrays.
"""

from __future__ import annotations

import numpy as np


def promotion(rank: int, size: int, config):
    import tensorflow as tf

    if config.get("faults"):
        from suite import faults

        faults.applier(config["faults"])("tensorflow", tf)
    tf.experimental.numpy.experimental_enable_numpy_behavior(prefer_float32=config["prefer_float32"])
    variables: dict = {}
    fns: dict = {}

    def on_tape(v, c):
        with tf.GradientTape() as tape:
            z = v * c
        return z, tape.gradient(z, v)

    def closed_over(c):
        return lambda v: on_tape(v, c)

    def in_graph(x, c):
        with tf.compat.v1.Graph().as_default():
            p = tf.compat.v1.placeholder(tf.float32, x.shape)
            z = p * c
            (g,) = tf.gradients(z, [p])
            with tf.compat.v1.Session() as session:
                return session.run([z, g], {p: x})

    def product(x, mode, c, name):
        if mode == "graph":
            return in_graph(x, c)
        v = variables.setdefault(x.shape, tf.Variable(np.zeros(x.shape, np.float32)))
        v.assign(x)
        if mode in ("function", "xla"):
            # the scalar is a constant of the function, as a user writes it: passed as an argument (or a
            # default), tf.function would make a NumPy scalar a tensor of its dtype
            key = (mode, name, x.shape)
            if key not in fns:
                fns[key] = tf.function(closed_over(c), jit_compile=mode == "xla")
            z, g = fns[key](v)
        else:
            z, g = on_tape(v, c)
        return z.numpy(), g.numpy()

    def handle(req):
        x = np.asarray(req["x"], np.float32)
        return {name: product(x, req["mode"], c, name) for name, c in req["operands"].items()}

    return handle
