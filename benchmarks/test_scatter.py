"""Hot path: the center-loss update with duplicate labels (cases/test_scatter_duplicate_indices.py).

c_j <- c_j - alpha * sum_i [y_i=j](c_j - x_i) / (1 + sum_i [y_i=j]), as each framework
spells a scatter-subtract: tf.tensor_scatter_nd_sub, jnp .at[].add, torch index_add_
(eager, and under torch.compile for the torch-compile subject): the case's ``ScatterSub``.
The per-sample step here divides by precomputed class counts (the case counts duplicates
with an M x M comparison, fine for its batches of 6, not for these).
"""

import numpy as np
import pytest

from cases.test_scatter_duplicate_indices import ScatterSub
from suite import bench

ALPHA = 0.5
N_CLASSES = 1024


def _delta(xp, centers, labels, x, counts):
    diff = centers[labels] - x
    return ALPHA * diff / (1.0 + counts[labels])[:, None]


@pytest.mark.benchmark(group="center-loss-scatter")
def test_center_loss_scatter_update(benchmark, bench_subject, size, ceiling):
    d = 64
    m = size // d
    rng = np.random.default_rng(7)
    x = rng.standard_normal((m, d)).astype(np.float32)
    labels = rng.integers(0, N_CLASSES, m).astype(np.int32)  # many duplicates per class
    centers = rng.standard_normal((N_CLASSES, d)).astype(np.float32)
    counts = np.bincount(labels, minlength=N_CLASSES).astype(np.float32)
    fw = bench_subject.framework
    if fw == "tensorflow":
        tf = bench_subject.tf
        with tf.device(bench_subject.device_name):
            c, xx, ll, cc = (tf.constant(a) for a in (centers, x, labels, counts))

        def upd(c, xx, ll, cc):
            delta = ALPHA * (tf.gather(c, ll) - xx) / (1.0 + tf.gather(cc, ll))[:, None]
            return ScatterSub.tensorflow(tf, c, ll, delta)

        f = upd if bench_subject.mode == "eager" else tf.function(upd, jit_compile=bench_subject.mode == "xla")

        def step():
            with tf.device(bench_subject.device_name):
                return f(c, xx, ll, cc).numpy()
    elif fw == "jax":
        jax = bench_subject.jax
        c, xx, ll, cc = (jax.device_put(a, bench_subject.jax_device) for a in (centers, x, labels, counts))

        @jax.jit
        def upd(c, xx, ll, cc):
            delta = ALPHA * (c[ll] - xx) / (1.0 + cc[ll])[:, None]
            return ScatterSub.jax(jax, c, ll, delta)

        def step():
            return upd(c, xx, ll, cc).block_until_ready()
    else:
        torch = bench_subject.torch
        c, xx, cc = (bench_subject.tensor(a) for a in (centers, x, counts))
        ll = bench_subject.tensor(labels.astype(np.int64))

        def upd(c, xx, ll, cc):
            delta = ALPHA * (c[ll] - xx) / (1.0 + cc[ll])[:, None]
            return ScatterSub.torch(torch, c, ll, delta)

        f = bench.compiled(bench_subject, upd)

        def step():
            return bench_subject.sync(f(c, xx, ll, cc))

    bench.warm_up(bench_subject, step)
    benchmark.pedantic(step, rounds=10, iterations=1, warmup_rounds=1)
    # read x, labels, gathered centers; write the updated centers
    bench.record(
        benchmark,
        path="center-loss-scatter",
        subject=bench_subject,
        bytes_moved=x.nbytes + labels.nbytes + 2 * centers.nbytes + counts.nbytes,
        ceiling=ceiling,
    )
