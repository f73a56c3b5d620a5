"""JAX runners: ``eager`` (op by op) and ``jit`` (``jax.jit`` of the whole builder).

Builders get ``(jax, *arrays, **static)``; use ``jax.numpy`` and ``jax.lax`` from the
module passed in. x64 is on (process hygiene), so float64 stays float64.
"""

from __future__ import annotations

import functools

import numpy as np

from .base import Runner, nest_map, of_floats, split_orders


def make(fw, spec):
    return JaxRunner(fw, spec)


class JaxRunner(Runner):
    def __init__(self, fw, spec):
        super().__init__(fw, spec)
        jax = fw.module
        self.jax = jax
        self.jax_device = jax.devices("gpu" if spec.device == "gpu" else "cpu")[0]
        self.traced = spec.mode == "jit"

    def numpy(self, x):
        if isinstance(x, (bool, int, float, str)):
            return x
        out = np.asarray(x)
        devices = getattr(x, "devices", None)
        if callable(devices):
            for d in devices():
                self.check_device(f"{d.platform}:{d.id}", out)
        return out

    def _build(self, builder, static):
        jax = self.jax
        fn = functools.partial(builder, jax, **static)
        if self.mode == "jit":
            fn = jax.jit(fn)
        elif self.mode != "eager":
            raise ValueError(f"unknown JAX mode {self.mode!r}")

        def call(*arrays):
            args = [jax.device_put(np.asarray(a), self.jax_device) for a in arrays]
            return nest_map(self.numpy, fn(*args))

        return call

    def sync(self, out):
        return self.jax.block_until_ready(out)


def jax_vjp(jax, *args, fn, diff, static, ct):
    if ct:
        *args, cotangent = args
    else:
        cotangent = None
    f, xs = of_floats(jax, args, diff, fn, static)
    y, pullback = jax.vjp(f, *xs)
    if cotangent is None:  # JAX has no implicit cotangent: ones, as TensorFlow's default
        cotangent = jax.numpy.ones_like(y)
    gs = iter(pullback(cotangent))
    return y, tuple(next(gs) if d else None for d in diff)


def jax_jvp(jax, *args, fn, diff, static):
    n = sum(diff)
    f, xs = of_floats(jax, args[: len(args) - n], diff, fn, static)
    return jax.jvp(f, tuple(xs), tuple(args[len(args) - n :]))


def jax_second_order(jax, *args, fn, diff, static):
    """``jax.vjp`` of ``jax.vjp``: the first gradient of the first float input, pulled back."""
    *args, w, v = args
    f, xs = of_floats(jax, args, diff, fn, static)

    def first(*xs):
        y, pullback = jax.vjp(f, *xs)
        g = pullback(w)
        return g[0], (y, g)

    _, pullback, (y, g) = jax.vjp(first, *xs, has_aux=True)
    h = pullback(v)
    it_g, it_h = iter(g), iter(h)
    return y, tuple(next(it_g) if d else None for d in diff), tuple(next(it_h) if d else None for d in diff)


def jax_orders(jax, *args, fn, diff, static):
    """Every order of ``fn`` in one program (``Runner.orders``): :func:`jax_second_order`'s value,
    gradients and second derivatives, and :func:`jax_jvp`'s ``J t``."""
    args, w, ts, v = split_orders(args, diff)
    y, grads, second = jax_second_order(jax, *args, w, v, fn=fn, diff=diff, static=static)
    _, jt = jax_jvp(jax, *args, *ts, fn=fn, diff=diff, static=static)
    return y, grads, jt, second


def jax_derivative(jax, x, *, fn, order, static):
    """The ``order``-th derivative of an elementwise ``fn``: ``jax.grad`` of the sum, ``order`` times."""
    f = lambda x: fn(jax, x, **static)  # noqa: E731
    for _ in range(order):
        f = (lambda g: lambda x: jax.grad(lambda x: jax.numpy.sum(g(x)))(x))(f)
    return f(x)


JaxRunner.builders = {
    "vjp": jax_vjp,
    "jvp": jax_jvp,
    "second_order": jax_second_order,
    "derivative": jax_derivative,
    "orders": jax_orders,
}
