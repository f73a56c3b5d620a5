"""Hot path: how much does a Python forward cost? (seeds/003, cases/test_custom_backward.py)

The same custom backward with the forward in TensorFlow ops (tf.custom_gradient), in
Python over tensors (tf.py_function) and in NumPy (tf.numpy_function), eager and under
tf.function (XLA cannot compile a Python forward). JAX custom_vjp and a PyTorch
autograd.Function are the oracles' spellings of the first.
"""

import pytest

from suite import bench

FRAMEWORKS = ("tensorflow", "jax", "torch")


def _tf_fns(tf):
    @tf.custom_gradient
    def ops_forward(c, k):
        def grad(g):
            return 2.0 * g, 3.0 * g

        return c + k, grad

    def with_grad(forward):
        @tf.custom_gradient
        def f(c, k):
            e = forward(c, k)
            e.set_shape(c.shape)

            def grad(g):
                return 2.0 * g, 3.0 * g

            return e, grad

        return f

    py = with_grad(lambda c, k: tf.py_function(lambda a, b: a + b, [c, k], tf.float32))
    npf = with_grad(lambda c, k: tf.numpy_function(lambda a, b: a + b, [c, k], tf.float32))
    return {"custom_gradient": ops_forward, "py_function": py, "numpy_function": npf}


@pytest.mark.benchmark(group="custom-backward-forward")
@pytest.mark.parametrize("mechanism", ["custom_gradient", "py_function", "numpy_function"])
def test_custom_backward_fwd_bwd(benchmark, bench_subject, size, ceiling, mechanism):
    fw = bench_subject.framework
    if fw != "tensorflow" and mechanism != "custom_gradient":
        pytest.skip(f"{mechanism} is a TensorFlow mechanism")
    c, k = bench.fresh(size, 9), bench.fresh(size, 10)
    if fw == "tensorflow":
        if bench_subject.mode == "xla" and mechanism != "custom_gradient":
            pytest.skip("XLA cannot compile a Python forward (py_function/numpy_function)")
        f = _tf_fns(bench_subject.tf)[mechanism]
        fns = {"tensorflow": lambda tf, c, k: f(c, k)}
    elif fw == "jax":
        jax = bench_subject.jax

        @jax.custom_vjp
        def f(c, k):
            return c + k

        f.defvjp(lambda c, k: (c + k, None), lambda _, g: (2.0 * g, 3.0 * g))
        fns = {"jax": lambda jax, c, k: f(c, k)}
    else:
        torch = bench_subject.torch

        class Add(torch.autograd.Function):
            @staticmethod
            def forward(ctx, c, k):
                return c + k

            @staticmethod
            def backward(ctx, g):
                return 2.0 * g, 3.0 * g

        fns = {"torch": lambda torch, c, k: Add.apply(c, k)}
    step = bench.make_step(bench_subject, fns, c, k)
    benchmark.pedantic(step, rounds=10, iterations=1, warmup_rounds=1)
    bench.record(
        benchmark, path=f"custom-backward-{mechanism}", subject=bench_subject, bytes_moved=5 * c.nbytes, ceiling=ceiling
    )
