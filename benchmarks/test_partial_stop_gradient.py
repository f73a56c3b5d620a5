"""Hot path: partial stop-gradient forward+backward (cases/test_partial_stop_gradient.py)."""

import numpy as np
import pytest

from cases.test_partial_stop_gradient import EntryStop
from suite import bench


@pytest.mark.benchmark(group="partial-stop-gradient-fwd-bwd")
def test_partial_stop_gradient_fwd_bwd(benchmark, bench_subject, size, ceiling):
    x = bench.fresh(size, 1)
    mask = (np.random.default_rng(2).random(size) < 0.5).astype(np.float32)
    step = bench.make_step(bench_subject, EntryStop, x, mask)
    benchmark.pedantic(step, rounds=15, iterations=1, warmup_rounds=2)
    # read target and mask, write y, d/dtarget and d/dmask
    bench.record(
        benchmark,
        path="partial-stop-gradient-fwd-bwd",
        subject=bench_subject,
        bytes_moved=5 * x.nbytes,
        ceiling=ceiling,
    )
