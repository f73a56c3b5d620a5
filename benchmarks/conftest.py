"""Benchmark fixtures: the size, the ceilings measured in this run, and the subjects.

Subjects here are TensorFlow eager/function/xla, JAX jit and PyTorch eager (graph mode
and JAX eager are correctness modes; their per-op dispatch is not a hot path).
"""
import pytest

from suite import bench, frameworks

BENCH_MODES = {"tensorflow": ("eager", "function", "xla"), "jax": ("jit",), "torch": ("eager",)}


def pytest_addoption(parser):
    parser.addoption("--bench-size", default="full", choices=sorted(bench.SIZES),
                     help="input size: quick (2^20 float32) or full (2^23) (default: full)")


def pytest_generate_tests(metafunc):
    if "bench_subject" not in metafunc.fixturenames:
        return
    wanted = getattr(metafunc.module, "FRAMEWORKS", ("tensorflow", "jax", "torch"))
    params = []
    for spec in frameworks.specs(frameworks=wanted, devices=metafunc.config.getoption("devices")):
        if spec.mode in BENCH_MODES[spec.framework]:
            params.append(pytest.param(spec, id=spec.id))
    metafunc.parametrize("bench_subject", params, indirect=True)


@pytest.fixture
def bench_subject(request):
    try:
        return frameworks.runner(request.param)
    except frameworks.Unavailable as e:
        pytest.skip(str(e))


@pytest.fixture(scope="session")
def size(request):
    return bench.SIZES[request.config.getoption("bench_size")]


_CEILINGS = {}


@pytest.fixture
def ceiling(bench_subject, size):
    """Copy bandwidth of the subject's device, measured once per device in this run, on a
    buffer of the benchmarks' input size (so quick runs that fit in cache are compared
    with the cache's bandwidth, full runs with memory's)."""
    d = bench_subject.device
    if d not in _CEILINGS:
        _CEILINGS[d] = bench.copy_ceiling(d, n_bytes=4 * size)
    return _CEILINGS[d]


@pytest.fixture(scope="session")
def matmul():
    return bench.matmul_ceiling()
