"""Hot path: one Adam step over a large parameter vector (cases/test_adam_epsilon.py).

Each framework's own optimizer: tf.keras.optimizers.Adam (eager, tf.function, XLA via
jit_compile), optax.adam under jax.jit, torch.optim.Adam (eager, and its step under
torch.compile for the torch-compile subject). Minimum traffic: read param,
grad, m, v; write param, m, v (7 x 4 bytes per element).
"""

import pytest

from cases.test_adam_epsilon import AdamOptimizer, Hyper
from suite import bench

HP = Hyper(lr=1e-3, b1=0.9, b2=0.999, eps=1e-7)  # the Keras defaults but epsilon


def _tf_step(subject, p0, g0):
    tf = subject.tf
    with tf.device(subject.device_name):
        var = tf.Variable(p0)
        g = tf.constant(g0)
        opt = AdamOptimizer.tensorflow(tf, hp=HP)
        opt.build([var])

        def apply():
            opt.apply_gradients([(g, var)])
            return var

        fn = apply if subject.mode == "eager" else tf.function(apply, jit_compile=subject.mode == "xla")

    def step():
        with tf.device(subject.device_name):
            return fn().numpy()

    return step


def _jax_step(subject, p0, g0):
    import optax

    jax = subject.jax
    opt = AdamOptimizer.jax(jax, hp=HP)
    p = jax.device_put(p0, subject.jax_device)
    g = jax.device_put(g0, subject.jax_device)
    state = [p, opt.init(p)]

    @jax.jit
    def update(p, s, g):
        u, s = opt.update(g, s, p)
        return optax.apply_updates(p, u), s

    def step():
        state[0], state[1] = update(state[0], state[1], g)
        return jax.block_until_ready(state[0])

    return step


def _torch_step(subject, p0, g0):
    torch = subject.torch
    p = torch.nn.Parameter(subject.tensor(p0))
    p.grad = subject.tensor(g0)
    opt = AdamOptimizer.torch(torch, [p], hp=HP, foreach=True)

    def adam_step():
        opt.step()

    # torch.optim's step graph-breaks on purpose (around its no-grad update): PyTorch's
    # recipe compiles it with fullgraph=False; compiled() checks the update was captured
    update = bench.compiled(subject, adam_step, fullgraph=False)

    def step():
        update()
        return subject.sync(p)

    return step


@pytest.mark.benchmark(group="adam-step")
def test_adam_step(benchmark, bench_subject, size, ceiling):
    p0, g0 = bench.fresh(size, 3), bench.fresh(size, 4)
    if bench_subject.framework == "jax":
        pytest.importorskip("optax")
    make = {"tensorflow": _tf_step, "jax": _jax_step, "torch": _torch_step}[bench_subject.framework]
    step = make(bench_subject, p0, g0)
    bench.warm_up(bench_subject, step)
    benchmark.pedantic(step, rounds=15, iterations=1, warmup_rounds=2)
    bench.record(benchmark, path="adam-step", subject=bench_subject, bytes_moved=7 * p0.nbytes, ceiling=ceiling)
