"""The fresh-process peer of ``rng-under-tracing``: ``tf.recompute_grad`` over ``tf.nn.dropout`` in the first
XLA compilation of a process, which no pytest process can promise (any earlier ``jit_compile`` of a random
op in it counts).

``first_compile(rank, size, config)``, ``config = {"rate": ..., "device": "cpu" | "gpu"}``, compiles the
program on its first request and answers ``{"out", "grad"}``: the dropout's value and the gradient of
``sum(w * recompute_grad(dropout)(x))`` with respect to ``x``, for the request's ``x`` and ``w`` (one
dtype and shape per peer: a second signature would be a second compilation).
"""

from __future__ import annotations


def first_compile(rank: int, size: int, config):
    import tensorflow as tf

    rate = config["rate"]
    device = "/GPU:0" if config["device"] == "gpu" else "/CPU:0"

    def vjp(x, w):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = tf.recompute_grad(lambda x: tf.nn.dropout(x, rate=rate))(x)
        return y, tape.gradient(y, x, output_gradients=w)

    f = tf.function(vjp, jit_compile=True)

    def handle(req):
        with tf.device(device):
            out, grad = f(tf.constant(req["x"]), tf.constant(req["w"]))
        return {"out": out.numpy(), "grad": grad.numpy()}

    return handle
