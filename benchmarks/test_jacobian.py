"""Hot path: full Jacobians (cases/test_summed_gradients_vs_jacobian.py).

y = tanh(W x) for an n x n W: GradientTape.jacobian with pfor and with a while loop,
jax.jacrev and jax.jacfwd, torch.func.jacrev (vmap) and torch.autograd.functional.jacobian
(a Python loop over rows), each also under torch.compile for the torch-compile subject;
the programs are the case's ``Jacobian`` and ``TanhAx``. n from 16 to 1024 (quick: 16
and 128). The compute ceiling is the matmul rate measured in this run; bytes: W read
once, the n x n Jacobian written.
"""

import functools

import numpy as np
import pytest

from cases.test_summed_gradients_vs_jacobian import Jacobian, TanhAx
from suite import bench

# method -> the case Jacobian's ``how``: TF's pfor / while loop, JAX's and PyTorch's jacrev / jacfwd
TF_HOW = {"reverse-vectorised": "pfor", "reverse-loop": "while"}
HOW = {"reverse-vectorised": "jacrev", "forward": "jacfwd"}


def _ns(config):
    return [16, 128] if config.getoption("bench_size") == "quick" else [16, 128, 1024]


def pytest_generate_tests(metafunc):
    if "n" in metafunc.fixturenames:
        metafunc.parametrize("n", _ns(metafunc.config))


@pytest.mark.benchmark(group="jacobian")
@pytest.mark.parametrize("method", ["reverse-vectorised", "reverse-loop", "forward"])
def test_jacobian(benchmark, bench_subject, n, method, ceiling, matmul):
    fw = bench_subject.framework
    rng = np.random.default_rng(11)
    w = (rng.standard_normal((n, n)) / np.sqrt(n)).astype(np.float32)
    x = rng.standard_normal(n).astype(np.float32)
    if fw == "tensorflow":
        if method == "forward":
            pytest.skip("TensorFlow has no forward-mode Jacobian API (ForwardAccumulator per column only)")
        if method == "reverse-loop" and n > 128 and bench_subject.mode != "function":
            pytest.skip("while-loop Jacobian of n > 128 is minutes per call in eager/XLA on CPU")
        tf = bench_subject.tf
        with tf.device(bench_subject.device_name):
            W, X = tf.constant(w), tf.constant(x)
        # the case's while-loop Jacobian uses a persistent tape (eager raises otherwise)
        jac = functools.partial(Jacobian.tensorflow, tf, how=TF_HOW[method])
        f = jac if bench_subject.mode == "eager" else tf.function(jac, jit_compile=bench_subject.mode == "xla")

        def step():
            with tf.device(bench_subject.device_name):
                return f(W, X).numpy()
    elif fw == "jax":
        jax = bench_subject.jax
        W, X = (jax.device_put(a, bench_subject.jax_device) for a in (w, x))
        if method == "reverse-loop":
            pytest.skip("JAX's jacrev is always vectorised (vmap)")
        f = jax.jit(lambda X: Jacobian.jax(jax, W, X, how=HOW[method]))  # W: a constant of the program

        def step():
            return f(X).block_until_ready()
    else:
        torch = bench_subject.torch
        W, X = bench_subject.tensor(w), bench_subject.tensor(x)
        if method == "reverse-loop":
            f = lambda X: torch.autograd.functional.jacobian(lambda X: TanhAx.torch(torch, W, X), X)  # noqa: E731
        else:
            f = lambda X: Jacobian.torch(torch, W, X, how=HOW[method])  # noqa: E731
        f = bench.compiled(bench_subject, f)

        def step():
            return bench_subject.sync(f(X))

    bench.warm_up(bench_subject, step)
    benchmark.pedantic(step, rounds=5, iterations=1, warmup_rounds=1)
    bench.record(
        benchmark,
        path=f"jacobian-n{n}-{method}",
        subject=bench_subject,
        bytes_moved=w.nbytes + n * n * 4,
        ceiling=ceiling,
        flops=2.0 * n * n * n,
        matmul=matmul,
    )
