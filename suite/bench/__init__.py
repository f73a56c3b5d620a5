"""Benchmark helpers: the bandwidth ceiling measured in the same run, and timed steps.

A benchmark times one *step* (a zero-argument callable that runs forward+backward on
inputs already on the device and blocks until the result is ready). Compilation and
warm-up happen outside the timed region (``make_step`` runs the step once). The
ceiling is the device's measured copy bandwidth (read + write of a large buffer, best
of several framework copies); each result reports the minimum bytes it must move,
the achieved GB/s and the fraction of that ceiling.

Besides the runners' own modes there is one benchmark-only subject, ``torch-compile``
(:class:`TorchCompiled`): the PyTorch eager runner with the function under
``torch.compile(fullgraph=True, dynamic=False)`` (inductor; see :func:`compiled`). A path
that does not compile is a skip with the compile error, never a silent run in eager
(``fullgraph=True`` turns every graph break, and the recompile limit, into an error).
"""

from __future__ import annotations

import time

import numpy as np

from suite import frameworks, registry

SIZES = {"quick": 1 << 20, "full": 1 << 23}  # float32 elements per input


def _best(fn, repeats=7) -> float:
    fn()
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def _fastest_runners(device: str, names):
    """The runner of each framework in ``names`` that can run on ``device`` here, in its
    fastest mode for a single op (TF eager, JAX jit, PyTorch eager)."""
    for spec in frameworks.specs(frameworks=names, devices=(device,)):
        if spec.mode != registry.BY_NAME[spec.framework].fastest_mode:
            continue
        try:
            yield frameworks.runner(spec)
        except frameworks.Unavailable:
            continue


def copy_ceiling(device: str = "cpu", n_bytes: int = 1 << 27) -> dict:
    """Copy bandwidth in GB/s (2 x bytes per copy: one read, one write), per framework
    and the best of them; measured now, in this process."""
    n = n_bytes // 4
    rates = {}
    src = np.random.default_rng(0).random(n, dtype=np.float32)
    dst = np.empty_like(src)
    rates["numpy"] = 2 * src.nbytes / _best(lambda: np.copyto(dst, src)) / 1e9
    for r in _fastest_runners(device, ("torch", "jax", "tensorflow")):
        if r.framework == "torch":
            t = r.tensor(src)
            out = r.torch.empty_like(t)
            rates["torch"] = 2 * src.nbytes / _best(lambda: (out.copy_(t), r.sync(out))) / 1e9
        elif r.framework == "jax":
            x = r.jax.device_put(src, r.jax_device)
            f = r.jax.jit(lambda a: a * 1.0)
            rates["jax"] = 2 * src.nbytes / _best(lambda: f(x).block_until_ready()) / 1e9
        else:
            tf = r.tf
            with tf.device(r.device_name):
                x = tf.constant(src)
                f = tf.function(lambda a: a * 1.0)
                rates["tensorflow"] = 2 * src.nbytes / _best(lambda: f(x).numpy()) / 1e9
    return {"per_framework_gbps": rates, "gbps": max(rates.values()), "bytes": src.nbytes}


def matmul_ceiling(device: str = "cpu", n: int | None = None) -> dict:
    """Float32 matmul rate (GFLOP/s), the compute ceiling for Jacobians: NumPy's BLAS on the
    CPU (n=1024); on a GPU the best of PyTorch and JAX (n=4096, large enough to fill one;
    TF32 is off for both, see frameworks.hygiene)."""
    n = n or (1024 if device == "cpu" else 4096)
    a = np.random.default_rng(1).random((n, n), dtype=np.float32)
    if device == "cpu":
        return {"gflops": 2 * n**3 / _best(lambda: a @ a, repeats=5) / 1e9, "n": n, "by": "numpy"}
    rates = {}
    for r in _fastest_runners(device, ("torch", "jax")):
        if r.framework == "torch":
            t = r.tensor(a)
            rates["torch"] = 2 * n**3 / _best(lambda: r.sync(t @ t), repeats=20) / 1e9
        else:
            x = r.jax.device_put(a, r.jax_device)
            f = r.jax.jit(lambda m: m @ m)
            rates["jax"] = 2 * n**3 / _best(lambda: f(x).block_until_ready(), repeats=20) / 1e9
    if not rates:
        raise RuntimeError(f"no framework measured a matmul on {device}")
    best = max(rates, key=rates.get)
    return {"gflops": rates[best], "n": n, "by": best, "per_framework_gflops": rates}


def sync_any(out):
    """Block until ``out`` (a nest of TF/JAX/torch values) is computed."""
    if isinstance(out, (list, tuple)):
        for o in out:
            sync_any(o)
        return out
    if hasattr(out, "block_until_ready"):
        out.block_until_ready()
    elif hasattr(out, "numpy") and not hasattr(out, "detach"):  # TF: reading the value waits for it
        out.numpy()
    elif hasattr(out, "is_cuda") and out.is_cuda:
        import torch

        torch.cuda.synchronize()
    return out


def make_step(subject, fns: dict, *arrays, **static):
    """A timed step for ``subject``: forward+backward of ``fns[framework](module, *x)``
    with ones as the cotangent, inputs already on the device, result synchronised.

    TensorFlow: eager (tape), ``function`` and ``xla`` (tape inside tf.function);
    JAX: ``jax.jit`` of the vjp; PyTorch: eager autograd, and for the torch-compile
    subject the same with ``fns["torch"]`` under ``torch.compile`` (the backward is
    AOTAutograd's compiled one). The step is run once here (trace/compile/warm-up outside
    the timed region; a compile failure is a skip).
    """
    fw = subject.framework
    fn = fns.of(fw) if hasattr(fns, "of") else fns[fw]  # a suite.program.Program or a dict by framework
    if fw == "tensorflow":
        tf = subject.tf
        with tf.device(subject.device_name):
            xs = [tf.constant(a) for a in arrays]

        def tf_step(*args):
            with tf.GradientTape() as tape:
                for a in args:
                    tape.watch(a)
                y = fn(tf, *args, **static)
            return y, tape.gradient(y, args)

        if subject.mode == "graph":
            raise ValueError("benchmarks run tensorflow eager/function/xla")
        run = tf_step if subject.mode == "eager" else tf.function(tf_step, jit_compile=subject.mode == "xla")

        def step():
            with tf.device(subject.device_name):
                return sync_any(run(*xs))
    elif fw == "jax":
        jax = subject.jax
        xs = [jax.device_put(a, subject.jax_device) for a in arrays]

        def jax_step(*args):
            y, pull = jax.vjp(lambda *a: fn(jax, *a, **static), *args)
            return y, pull(jax.numpy.ones_like(y))

        run = jax.jit(jax_step) if subject.mode == "jit" else jax_step

        def step():
            return jax.block_until_ready(run(*xs))
    else:
        torch = subject.torch
        xs = [subject.tensor(a) for a in arrays]
        # only floating inputs are differentiated (torch refuses requires_grad on indices)
        diff = [x.requires_grad_(True) for x in xs if x.is_floating_point()]
        f = compiled(subject, fn)

        def step():
            y = f(torch, *xs, **static)
            g = torch.autograd.grad(y, diff, grad_outputs=torch.ones_like(y))
            return subject.sync((y, g))

    warm_up(subject, step)
    return step


class TorchCompiled:
    """The ``torch-compile`` subject: the PyTorch eager runner (tensors, device, sync and
    ``framework == "torch"``, so a path's torch function is reused as is), with the
    function a benchmark runs wrapped by :func:`compiled` in ``torch.compile``."""

    mode = "compile"

    def __init__(self, runner, spec):
        self._runner = runner
        self.spec = spec
        torch = runner.torch
        if not hasattr(torch, "compile"):
            raise RuntimeError(f"torch {runner.version} has no torch.compile")
        import torch._dynamo

        if not torch._dynamo.is_dynamo_supported():
            raise RuntimeError(f"torch.compile (dynamo) is not supported here (torch {runner.version})")
        torch._dynamo.config.suppress_errors = False  # a compile error raises, it never falls back to eager

    @property
    def id(self) -> str:
        return self.spec.id

    def __repr__(self) -> str:
        return self.id

    def __getattr__(self, name):
        if name.startswith("__") or name == "_runner":
            raise AttributeError(name)
        return getattr(self._runner, name)

    def compile_errors(self) -> tuple:
        """Exception types that mean "torch.compile could not compile this"."""
        from torch._dynamo import exc as dexc

        types = [NotCompiled, dexc.TorchDynamoException, dexc.FailOnRecompileLimitHit]
        try:
            from torch._inductor import exc as iexc

            types += [
                getattr(iexc, n) for n in ("OperatorIssue", "InvalidCxxCompiler", "CppCompileError") if hasattr(iexc, n)
            ]
        except ImportError:  # pragma: no cover - inductor missing from the build
            pass
        return tuple(types)


class NotCompiled(RuntimeError):
    """torch.compile ran the function without compiling any of it (all eager)."""


def is_compiled(subject) -> bool:
    return isinstance(subject, TorchCompiled)


def compile_error_reason(e: BaseException) -> str:
    """One line from a torch.compile error: its type, the dynamo graph-break kind and
    explanation, and the user line it stopped at."""
    lines = [ln.strip() for ln in str(e).splitlines()]
    head = [ln for ln in lines if ln][:2]
    head = [ln for ln in head if not ln.startswith(("Developer debug context", "For more details"))]
    where = ""
    for i, ln in enumerate(lines):
        if ln.startswith("File ") and i + 1 < len(lines):
            where = f"{ln.split(', ', 1)[-1]}: {lines[i + 1]}"  # the last user frame wins
    msg = " | ".join(head + ([f"at {where}"] if where else []))
    return f"torch.compile failed: {type(e).__name__}: {msg}"[:500]


def _compile_skip(e: BaseException):
    import pytest

    pytest.skip(compile_error_reason(e))


def compiled(subject, fn, *, fullgraph: bool = True):
    """``fn`` under ``torch.compile`` (inductor, static shapes) for the torch-compile
    subject, ``fn`` itself for every other subject. Compilation happens on the first
    call (in :func:`warm_up`, outside the timed region).

    ``fullgraph=True`` (the default): any graph break or recompile-limit hit is an
    error, so nothing can run in eager behind the subject's back. ``fullgraph=False``
    is for code with deliberate graph breaks (``torch.optim``'s ``step`` breaks around
    its update so that AOTAutograd sees a no-grad graph; PyTorch's own recipe compiles
    it with ``fullgraph=False``): the graphs inductor receives are counted, and a call
    that compiled no graph with a tensor op raises :class:`NotCompiled`.
    """
    if not is_compiled(subject):
        return fn
    torch = subject.torch
    try:
        if fullgraph:
            return torch.compile(fn, fullgraph=True, dynamic=False)
        from torch._inductor.compile_fx import compile_fx

        ops = []

        def inductor(gm, example_inputs):  # the inductor backend, counting what it gets
            ops.append(sum(n.op == "call_function" for n in gm.graph.nodes))
            return compile_fx(gm, example_inputs)

        cf = torch.compile(fn, backend=inductor, dynamic=False)
    except Exception as e:  # noqa: BLE001 - e.g. no dynamo on this Python
        _compile_skip(e)

    def checked(*args, **kwargs):
        out = cf(*args, **kwargs)
        if not any(ops):
            raise NotCompiled(
                f"torch.compile captured no graph with a tensor op in {getattr(fn, '__qualname__', fn)}"
                " (it would run in eager)"
            )
        return out

    return checked


def warm_up(subject, step):
    """Run ``step`` once: trace/compile/warm-up outside the timed region. For the
    torch-compile subject a compile error (forward or backward) becomes a pytest skip
    with the error; errors that eager would raise too (bad indices) propagate."""
    if not is_compiled(subject):
        return step()
    try:
        return step()
    except subject.compile_errors() as e:
        _compile_skip(e)


def record(
    benchmark,
    *,
    path: str,
    subject,
    bytes_moved: int,
    ceiling: dict,
    flops: float | None = None,
    matmul: dict | None = None,
) -> None:
    """Attach the roofline numbers to a pytest-benchmark result (after it ran)."""
    t = benchmark.stats.stats.median
    gbps = bytes_moved / t / 1e9 if t else None
    info = {
        "path": path,
        "subject": subject.id,
        "bytes_moved": bytes_moved,
        "median_s": t,
        "gbps": gbps,
        "ceiling_gbps": ceiling["gbps"],
        "fraction_of_ceiling": (gbps / ceiling["gbps"]) if gbps else None,
    }
    if flops is not None and matmul:
        info.update(
            gflops=flops / t / 1e9,
            ceiling_gflops=matmul["gflops"],
            fraction_of_matmul=flops / t / 1e9 / matmul["gflops"],
        )
    benchmark.extra_info.update(info)


def fresh(n: int, seed: int, *, low=-4.0, high=4.0, dtype=np.float32) -> np.ndarray:
    """Fresh random inputs (never zeros)."""
    return np.random.default_rng(seed).uniform(low, high, n).astype(dtype)
