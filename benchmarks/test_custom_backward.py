"""Hot path: how much does a Python forward cost? (seeds/003, cases/test_custom_backward.py)

The case's custom_add (value c + k, declared backward ((e+d)g, d g, e g)) with the forward
in TensorFlow ops (tf.custom_gradient), in Python over tensors (tf.py_function) and in
NumPy (tf.numpy_function), eager and under tf.function (XLA cannot compile a Python
forward). JAX custom_vjp and a PyTorch autograd.Function are the oracles' spellings of
the first.
"""

import pytest

from cases.test_custom_backward import CustomAdd
from suite import bench

# mechanism -> CustomAdd's TensorFlow forward op (the backward is attached by tf.custom_gradient)
FORWARD_OP = {"custom_gradient": "tf", "py_function": "py_function", "numpy_function": "numpy_function"}


@pytest.mark.benchmark(group="custom-backward-forward")
@pytest.mark.parametrize("mechanism", list(FORWARD_OP))
def test_custom_backward_fwd_bwd(benchmark, bench_subject, size, ceiling, mechanism):
    fw = bench_subject.framework
    if fw != "tensorflow" and mechanism != "custom_gradient":
        pytest.skip(f"{mechanism} is a TensorFlow mechanism")
    if fw == "tensorflow" and bench_subject.mode == "xla" and mechanism != "custom_gradient":
        pytest.skip("XLA cannot compile a Python forward (py_function/numpy_function)")
    c, k, d = bench.fresh(size, 9), bench.fresh(size, 10), bench.fresh(size, 11)
    static = {"op": FORWARD_OP[mechanism], "how": "custom_gradient"} if fw == "tensorflow" else {}
    step = bench.make_step(bench_subject, CustomAdd, c, k, d, **static)
    benchmark.pedantic(step, rounds=10, iterations=1, warmup_rounds=1)
    # read c, k, d; write e, dc, dk, dd (the ones cotangent is a constant)
    bench.record(
        benchmark, path=f"custom-backward-{mechanism}", subject=bench_subject, bytes_moved=7 * c.nbytes, ceiling=ceiling
    )
