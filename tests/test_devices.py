"""GPU rows run where they say: an output computed on the CPU fails a GPU row.

No GPU is needed: a runner is pointed at ``gpu`` while its framework computes on the CPU,
which is exactly what a silent fallback looks like.
"""

import numpy as np
import pytest

from suite import frameworks


def _gpu_runner(name, mode):
    spec = frameworks.Spec(name, mode, "cpu")
    r = frameworks.runner(spec)
    fake = object.__new__(type(r))
    fake.__dict__.update(r.__dict__)
    fake._cache = {}  # compiled callables bind their runner
    fake.device = "gpu"
    fake.spec = frameworks.Spec(name, mode, "gpu")
    return r, fake


@pytest.mark.parametrize(
    "name,mode", [("tensorflow", "eager"), ("tensorflow", "function"), ("jax", "jit"), ("torch", "eager")]
)
def test_a_cpu_output_fails_a_gpu_row_and_passes_a_cpu_row(name, mode):
    fw = frameworks.load(name)
    if not fw.available:
        pytest.skip(fw.error)
    cpu, gpu = _gpu_runner(name, mode)
    double = {"tensorflow": lambda tf, x: 2 * x, "jax": lambda jax, x: 2 * x, "torch": lambda torch, x: 2 * x}[name]
    np.testing.assert_array_equal(cpu.run(double, np.ones(2, np.float32)), np.full(2, 2, np.float32))
    with pytest.raises(AssertionError, match=f"{name}-{mode}-gpu: an output was computed on .*, not the GPU"):
        gpu.compile(double)(np.ones(2, np.float32)) if name != "tensorflow" else gpu.numpy(
            fw.module.constant(np.ones(2, np.float32))
        )


def test_integer_outputs_are_exempt():
    fw = frameworks.load("tensorflow")
    if not fw.available:
        pytest.skip(fw.error)
    _, gpu = _gpu_runner("tensorflow", "eager")
    assert gpu.numpy(fw.module.constant([1, 2])).tolist() == [1, 2]


def test_a_gpu_that_jax_sees_and_tensorflow_does_not_is_missing(monkeypatch):
    fake = {
        "tensorflow": frameworks.Framework("tensorflow", object(), "2.21.0", ("cpu",)),
        "jax": frameworks.Framework("jax", object(), "0.10.2", ("cpu", "gpu")),
        "torch": frameworks.Framework("torch", None, None, (), "torch is not installed (ImportError: x)"),
    }
    monkeypatch.setattr(frameworks, "load", lambda name: fake[name])
    got = frameworks.missing(frameworks=["tensorflow", "jax", "torch"], devices=["cpu", "gpu"])
    assert set(got) == {"gpu", "torch"}
    assert "visible to jax but not to TensorFlow 2.21.0" in got["gpu"]
    assert frameworks.missing(frameworks=["tensorflow", "jax"], devices=["cpu"]) == {}


def test_the_cpu_is_described_by_model_and_vector_extensions():
    """The report header's ``cpu``: a CPU kernel's path (and so its rounding) follows the CPU's
    extensions, which a virtual machine may change between days."""
    info = "processor\t: 0\ncpu family\t: 25\nmodel\t\t: 17\nmodel name\t: AMD EPYC 9R14\n"
    info += "flags\t\t: fpu avx2 avx fma avx512f\n"
    assert frameworks.cpu_description(info) == "AMD EPYC 9R14 (family 25, model 17); avx512f, avx2, avx, fma"
    old = frameworks.cpu_description("model name\t: Old\nflags\t\t: fpu sse4_2\n")
    assert old == "Old; none of avx512f/avx2/avx/fma"
    assert frameworks.cpu_description("processor\t: 0\n") is None
    assert "cpu" in frameworks.python_environment()
