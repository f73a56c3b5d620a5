"""The TF32 peer of ``dtype-gradients``: float32 matmul gradients with TF32 on, off and as the framework
defaults, in a process without the suite's ``NVIDIA_TF32_OVERRIDE=0`` (which turns TF32 off in cuBLAS
for every framework of the pytest process, whatever the framework's own switch says).

``matmul(rank, size, config)``, ``config = {"framework": ..., "device": "cpu" | "gpu"}``, answers
``{"a", "b", "w", "mode", "tf32"}`` (``tf32`` in ``default``, ``on``, ``off``; ``mode`` the subject's:
TensorFlow ``eager``/``function``/``xla``, JAX ``eager``/``jit``, PyTorch ``eager``) with the gradient
``w @ b.T`` of ``sum(w * (a @ b))`` with respect to ``a``, computed on the device, and the switch's
value (``setting``) it ran with.
"""

from __future__ import annotations

import numpy as np


def matmul(rank: int, size: int, config):
    framework, device = config["framework"], config["device"]
    if framework == "torch":
        import torch

        dev = "cuda" if device == "gpu" else "cpu"
        default = torch.backends.cuda.matmul.allow_tf32

        def grad(a, b, w, mode, tf32):
            torch.backends.cuda.matmul.allow_tf32 = {"on": True, "off": False}.get(tf32, default)
            a, b, w = (torch.from_numpy(x).to(dev) for x in (a, b, w))
            a.requires_grad_(True)
            (g,) = torch.autograd.grad(a @ b, a, grad_outputs=w)
            return g.cpu().numpy(), torch.backends.cuda.matmul.allow_tf32

    elif framework == "jax":
        import contextlib

        import jax

        dev = jax.devices("gpu" if device == "gpu" else "cpu")[0]
        default = jax.config.jax_default_matmul_precision

        def grad(a, b, w, mode, tf32):
            precision = {"on": "tensorfloat32", "off": "float32"}.get(tf32)
            ctx = jax.default_matmul_precision(precision) if precision else contextlib.nullcontext()
            with ctx:
                f = lambda a, b, w: jax.vjp(lambda a: a @ b, a)[1](w)[0]  # noqa: E731
                f = jax.jit(f) if mode == "jit" else f
                g = f(*(jax.device_put(x, dev) for x in (a, b, w)))
                return np.asarray(g), precision or default

    elif framework == "tensorflow":
        import tensorflow as tf

        name = "/GPU:0" if device == "gpu" else "/CPU:0"
        default = tf.config.experimental.tensor_float_32_execution_enabled()
        fns: dict = {}

        def vjp(a, b, w):
            with tf.GradientTape() as tape:
                tape.watch(a)
                z = tf.linalg.matmul(a, b)
            return tape.gradient(z, a, output_gradients=w)

        def grad(a, b, w, mode, tf32):
            tf.config.experimental.enable_tensor_float_32_execution({"on": True, "off": False}.get(tf32, default))
            f = vjp
            if mode in ("function", "xla"):  # one function per switch: the setting is read when it compiles
                f = fns.setdefault((mode, tf32), tf.function(vjp, jit_compile=mode == "xla"))
            with tf.device(name):
                g = f(*(tf.constant(x) for x in (a, b, w)))
            return g.numpy(), tf.config.experimental.tensor_float_32_execution_enabled()

    else:
        raise ValueError(f"unknown framework {framework!r}")

    def handle(req):
        g, setting = grad(req["a"], req["b"], req["w"], req["mode"], req["tf32"])
        return {"grad": g, "setting": str(setting)}

    return handle
