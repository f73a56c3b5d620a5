"""Benchmark fixtures: the size, the ceilings measured in this run, and the subjects.

Subjects here are TensorFlow eager/function/xla, JAX jit, PyTorch eager and PyTorch
``torch.compile`` (graph mode and JAX eager are correctness modes; their per-op dispatch
is not a hot path). ``torch-compile`` is a benchmark-only mode layered on the torch eager
runner (:class:`suite.bench.TorchCompiled`); a path it cannot compile is a skip with the
compile error.
"""

import dataclasses

import pytest

from suite import bench, frameworks

BENCH_MODES = {"tensorflow": ("eager", "function", "xla"), "jax": ("jit",), "torch": ("eager", "compile")}
#: Benchmark-only modes (not runner modes): mode -> (the runner mode it wraps, the wrapper).
WRAPPED_MODES = {("torch", "compile"): ("eager", bench.TorchCompiled)}


def pytest_addoption(parser):
    parser.addoption(
        "--bench-size",
        default="full",
        choices=sorted(bench.SIZES),
        help="input size: quick (2^20 float32) or full (2^23) (default: full)",
    )


def pytest_generate_tests(metafunc):
    if "bench_subject" not in metafunc.fixturenames:
        return
    wanted = getattr(metafunc.module, "FRAMEWORKS", ("tensorflow", "jax", "torch"))
    params = []
    for spec in frameworks.specs(frameworks=wanted, devices=metafunc.config.getoption("devices")):
        if spec.mode in BENCH_MODES[spec.framework]:
            params.append(pytest.param(spec, id=spec.id))
        for (fw, mode), (base, _) in WRAPPED_MODES.items():
            if spec.framework == fw and spec.mode == base and mode in BENCH_MODES[fw]:
                wrapped = dataclasses.replace(spec, mode=mode)
                params.append(pytest.param(wrapped, id=wrapped.id))
    metafunc.parametrize("bench_subject", params, indirect=True)


_WRAPPED = {}


@pytest.fixture
def bench_subject(request):
    spec = request.param
    base, wrapper = WRAPPED_MODES.get((spec.framework, spec.mode), (spec.mode, None))
    try:
        runner = frameworks.runner(dataclasses.replace(spec, mode=base))
    except frameworks.Unavailable as e:
        pytest.skip(str(e))
    if wrapper is None:
        return runner
    if spec not in _WRAPPED:
        try:
            _WRAPPED[spec] = wrapper(runner, spec)
        except RuntimeError as e:  # e.g. no torch.compile / dynamo on this Python
            pytest.skip(str(e))
    return _WRAPPED[spec]


def pytest_benchmark_update_machine_info(config, machine_info):
    """The saved JSON names what ran, not only the host: framework versions and devices, and
    the input size. (The ceilings vary run to run; they are in each result's extra_info.)"""
    machine_info["frameworks"] = frameworks.environment()
    machine_info["bench_size"] = config.getoption("bench_size")


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


_MATMUL = {}


@pytest.fixture
def matmul(bench_subject):
    """The matmul rate of the subject's device, measured once per device in this run."""
    d = bench_subject.device
    if d not in _MATMUL:
        _MATMUL[d] = bench.matmul_ceiling(d)
    return _MATMUL[d]
