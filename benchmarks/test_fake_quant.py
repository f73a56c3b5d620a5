"""Hot path: fake-quant forward+backward (cases/test_fake_quant_gradient.py).

The case's program with fixed bounds [-4, 4] at 8 bits: TensorFlow's fused op; PyTorch's
fake_quantize_per_tensor_affine with the scale and zero point TensorFlow's nudging gives;
JAX has no fused op, so its row is the case's straight-through port from jnp ops.
"""

import pytest

from cases.test_fake_quant_gradient import FakeQuant
from suite import bench

LO, HI, BITS = -4.0, 4.0, 8


@pytest.mark.benchmark(group="fake-quant-fwd-bwd")
def test_fake_quant_fwd_bwd(benchmark, bench_subject, size, ceiling):
    x = bench.fresh(size, 8, low=-5, high=5)
    # the bounds are static numbers, as in a model with a fixed range: only x is differentiated
    step = bench.make_step(bench_subject, FakeQuant, x, mn=LO, mx=HI, num_bits=BITS)
    benchmark.pedantic(step, rounds=15, iterations=1, warmup_rounds=2)
    bench.record(benchmark, path="fake-quant-fwd-bwd", subject=bench_subject, bytes_moved=3 * x.nbytes, ceiling=ceiling)
