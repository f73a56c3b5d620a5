"""Hot path: partial stop-gradient forward+backward (cases/test_partial_stop_gradient.py)."""

import numpy as np
import pytest

from suite import bench


def tensorflow(tf, target, mask):
    return tf.stop_gradient(tf.abs(mask - 1) * target) + mask * target


def jax(jax, target, mask):
    return jax.lax.stop_gradient(jax.numpy.abs(mask - 1) * target) + mask * target


def torch(torch, target, mask):
    return (torch.abs(mask - 1) * target).detach() + mask * target


FNS = {"tensorflow": tensorflow, "jax": jax, "torch": torch}


@pytest.mark.benchmark(group="partial-stop-gradient-fwd-bwd")
def test_partial_stop_gradient_fwd_bwd(benchmark, bench_subject, size, ceiling):
    x = bench.fresh(size, 1)
    mask = (np.random.default_rng(2).random(size) < 0.5).astype(np.float32)
    step = bench.make_step(bench_subject, FNS, x, mask)
    benchmark.pedantic(step, rounds=15, iterations=1, warmup_rounds=2)
    # read target and mask, write y, d/dtarget and d/dmask
    bench.record(
        benchmark,
        path="partial-stop-gradient-fwd-bwd",
        subject=bench_subject,
        bytes_moved=5 * x.nbytes,
        ceiling=ceiling,
    )
