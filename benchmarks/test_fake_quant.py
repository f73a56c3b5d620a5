"""Hot path: fake-quant forward+backward (cases/test_fake_quant_gradient.py).

TensorFlow's fused op; PyTorch's fake_quantize_per_tensor_affine with the scale and
zero point TensorFlow's nudging gives for [-4, 4] at 8 bits; JAX has no fused op, so
its row is the straight-through composition from jnp ops.
"""

import pytest

from suite import bench

LO, HI, BITS = -4.0, 4.0, 8
SCALE = (HI - LO) / (2**BITS - 1)
ZERO_POINT = round(-LO / SCALE)


def tensorflow(tf, x):
    return tf.quantization.fake_quant_with_min_max_vars(x, LO, HI, num_bits=BITS)


def jax(jax, x):
    jnp = jax.numpy
    lo, hi = -ZERO_POINT * SCALE, (2**BITS - 1 - ZERO_POINT) * SCALE
    inside = (x >= lo) & (x <= hi)
    q = jnp.round((jnp.clip(x, lo, hi) - lo) / SCALE) * SCALE + lo
    return jnp.where(inside, x + jax.lax.stop_gradient(q - x), jax.lax.stop_gradient(q))


def torch(torch, x):
    return torch.fake_quantize_per_tensor_affine(x, SCALE, ZERO_POINT, 0, 2**BITS - 1)


FNS = {"tensorflow": tensorflow, "jax": jax, "torch": torch}


@pytest.mark.benchmark(group="fake-quant-fwd-bwd")
def test_fake_quant_fwd_bwd(benchmark, bench_subject, size, ceiling):
    x = bench.fresh(size, 8, low=-5, high=5)
    step = bench.make_step(bench_subject, FNS, x)
    benchmark.pedantic(step, rounds=15, iterations=1, warmup_rounds=2)
    bench.record(benchmark, path="fake-quant-fwd-bwd", subject=bench_subject, bytes_moved=3 * x.nbytes, ceiling=ceiling)
