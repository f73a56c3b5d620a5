"""Hot path: straight-through estimator forward+backward (cases/test_straight_through_estimator.py)."""

import pytest

from cases.test_straight_through_estimator import RoundThrough
from suite import bench


@pytest.mark.benchmark(group="ste-fwd-bwd")
def test_ste_fwd_bwd(benchmark, bench_subject, size, ceiling):
    x = bench.fresh(size, 0)
    step = bench.make_step(bench_subject, RoundThrough, x)
    benchmark.pedantic(step, rounds=15, iterations=1, warmup_rounds=2)
    # read x, write y and dx (the ones cotangent is a constant)
    bench.record(benchmark, path="ste-fwd-bwd", subject=bench_subject, bytes_moved=3 * x.nbytes, ceiling=ceiling)
