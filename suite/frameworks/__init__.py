"""Framework plumbing: import, version, devices, execution modes, conversion to NumPy.

Nothing here translates meaning. A case spells each framework natively in a small
function ``fn(module, *arrays)``; a :class:`Runner` runs it in one execution mode on one
device and hands back NumPy (``None`` stays ``None``). Process hygiene (import order,
TF32 off, GPU memory growth, quiet logs, JAX x64) happens once, in :func:`hygiene`.

>>> from suite import frameworks
>>> [r.id for r in frameworks.runners(frameworks=["tensorflow"], modes=["eager"])]
['tensorflow-eager-cpu', 'tensorflow-eager-gpu']
"""

from __future__ import annotations

import dataclasses
import importlib
import os
import platform
import sys
from pathlib import Path

from suite import registry, versions as vr

#: Frameworks in import order: torch before TensorFlow (DESIGN.md, process hygiene).
IMPORT_ORDER = registry.IMPORT_ORDER
#: Execution modes per framework, in the order rows are shown.
MODES = registry.MODES
DEVICES = ("cpu", "gpu")
#: Which runner of each oracle framework is used as the reference inside a test.
REFERENCE_MODE = registry.REFERENCE_MODE

_ENV = {
    "TF_CPP_MIN_LOG_LEVEL": "2",  # quiet the TF C++ logs
    "TF_FORCE_GPU_ALLOW_GROWTH": "true",  # TF must not grab the whole GPU
    "XLA_PYTHON_CLIENT_PREALLOCATE": "false",  # nor JAX
    "JAX_ENABLE_X64": "1",  # float64 inputs stay float64
    "NVIDIA_TF32_OVERRIDE": "0",  # TF32 off in cuBLAS/cuDNN for every framework
    "TF_ENABLE_ONEDNN_OPTS": "0",  # reproducible CPU numerics across TF builds
    "GRPC_VERBOSITY": "ERROR",
}

_loaded: dict[str, "Framework"] = {}
_hygiene_done = False


class Unavailable(RuntimeError):
    """A framework (or device, or mode) that cannot run here; ``str()`` is the reason."""


@dataclasses.dataclass
class Framework:
    name: str
    module: object | None
    version: str | None
    devices: tuple[str, ...]
    error: str | None = None

    @property
    def available(self) -> bool:
        return self.module is not None


def hygiene() -> None:
    """Set the process-wide environment every framework must see before import (and
    TensorFlow's persistent XLA cache, which its flags name before it is imported)."""
    global _hygiene_done
    if _hygiene_done:
        return
    for k, v in _ENV.items():
        os.environ.setdefault(k, v)
    _tf_xla_cache(os.environ)
    _hygiene_done = True


def _configure(name: str, mod) -> tuple[str, tuple[str, ...]]:
    if name == "torch":
        mod.backends.cuda.matmul.allow_tf32 = False
        mod.backends.cudnn.allow_tf32 = False
        devices = ("cpu", "gpu") if mod.cuda.is_available() else ("cpu",)
        return mod.__version__, devices
    if name == "tensorflow":
        gpus = mod.config.list_physical_devices("GPU")
        for g in gpus:
            try:
                mod.config.experimental.set_memory_growth(g, True)
            except RuntimeError:  # already initialised: growth must be set before first use
                pass
        mod.config.experimental.enable_tensor_float_32_execution(False)
        return mod.__version__, ("cpu", "gpu") if gpus else ("cpu",)
    if name == "jax":
        mod.config.update("jax_enable_x64", True)
        use_jax_compilation_cache(mod)
        for precision in ("highest", "float32"):  # older JAX (0.4.x) knows only the dtype names
            try:
                mod.config.update("jax_default_matmul_precision", precision)
                break
            except ValueError:
                continue
        try:
            gpus = mod.devices("gpu")
        except RuntimeError:
            gpus = []
        return mod.__version__, ("cpu", "gpu") if gpus else ("cpu",)
    raise KeyError(name)


JAX_CACHE_PREFIX = "adsem-jax-cache-"
#: Programs whose XLA compilation took less are not written to the cache (see below).
JAX_CACHE_MIN_COMPILE_S = 0.01


def _sweep_jax_caches(tmp: Path) -> None:
    """Remove the compilation cache directories (``adsem-jax-cache-<pid>-*``) whose process no
    longer runs."""
    import shutil

    if os.name != "posix":  # os.kill(pid, 0) probes only on POSIX
        return
    for d in tmp.glob(f"{JAX_CACHE_PREFIX}*-*"):
        pid = d.name[len(JAX_CACHE_PREFIX) :].split("-", 1)[0]
        if pid.isdigit() and not _running(int(pid)):
            shutil.rmtree(d, ignore_errors=True)


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


#: Where compiled programs are kept between processes and runs, JAX's in ``<root>/jax`` (see
#: :func:`use_jax_compilation_cache`) and TensorFlow's XLA executables in
#: ``<root>/tf-xla/<TensorFlow version>`` (:func:`_tf_xla_cache`). The root: unset,
#: ``$XDG_CACHE_HOME/autodiff-semantics`` (or ``~/.cache/...``); a directory; or ``off``: JAX
#: keeps a cache of each process's own, TensorFlow none.
COMPILE_CACHE_ENV = "AUTODIFF_SEMANTICS_COMPILE_CACHE"
#: The shared cache's bound: past it, a starting process removes the oldest programs.
JAX_SHARED_CACHE_MAX_BYTES = 1 << 30
#: TensorFlow's persistent XLA cache (one directory per TensorFlow version), bounded alike.
TF_XLA_CACHE_MAX_BYTES = 1 << 30
TF_XLA_CACHE_FLAG = "--tf_xla_persistent_cache_directory"
#: The TensorFlow distributions whose version names the XLA cache directory (read from their
#: metadata: TensorFlow is not imported before its flags are set).
TF_DISTRIBUTIONS = ("tensorflow", "tensorflow-cpu", "tf-nightly", "tf-nightly-cpu")
#: ``on`` names TensorFlow's persistent XLA cache (:func:`_tf_xla_cache`); unset or anything
#: else, none. Off by default: a warm cache returned wrong executables (measured 2026-11-29, TF
#: 2.19.1, transform-boundaries run twice on one fresh cache: the second run's XLA gradients of
#: tf.map_fn and tf.scan were all zeros, and the cache grew from 81 to 160 entries, so its keys
#: are not stable between runs; with no cache every row passes). Measured again on 2026-12-01:
#: 2.19.1 fails the same way, 2.20.0, 2.21.0 and the nightly 2.23.0.dev20261026 pass those rows
#: on a warm cache, and 2.21.0's whole XLA column at ci (507 rows) observed on an empty and then
#: a warm cache what its baseline holds. It stays off there too, because a whole run loads few
#: programs: TensorFlow keys and verifies an entry by the program's HLO, which carries the
#: function's name, numbered process-wide in the order of tracing (``__inference_function_83``),
#: and pytest-xdist hands modules to workers in whatever order they finish. Three runs of that
#: column wrote 1,107, then 881 and 751 new entries; with JAX's cache warm it took 219 s without
#: and 203 s with it. A cache one names in ``TF_XLA_FLAGS`` is one's own choice and left alone.
TF_XLA_CACHE_ENV = "AUTODIFF_SEMANTICS_TF_XLA_CACHE"


def compile_cache_root(environ=os.environ) -> Path | None:
    """The shared compilation caches' root that :data:`COMPILE_CACHE_ENV` names (``None``: off).

    >>> compile_cache_root({COMPILE_CACHE_ENV: "off"}) is None
    True
    >>> str(compile_cache_root({COMPILE_CACHE_ENV: "/tmp/c"}))
    '/tmp/c'
    >>> str(compile_cache_root({"XDG_CACHE_HOME": "/x"}))
    '/x/autodiff-semantics'
    """
    value = environ.get(COMPILE_CACHE_ENV, "").strip()
    if value.lower() in ("off", "0", "no", "false", "none"):
        return None
    if value:
        return Path(value).expanduser()
    base = environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "autodiff-semantics"


def compile_cache_dir(environ=os.environ) -> Path | None:
    """JAX's shared compilation cache directory (``None``: off, each process keeps a cache of
    its own).

    >>> str(compile_cache_dir({COMPILE_CACHE_ENV: "/tmp/c"}))
    '/tmp/c/jax'
    >>> str(compile_cache_dir({"XDG_CACHE_HOME": "/x"}))
    '/x/autodiff-semantics/jax'
    """
    root = compile_cache_root(environ)
    return None if root is None else root / "jax"


def tf_distribution_version() -> str | None:
    """The installed TensorFlow wheel's version, from its metadata (nothing is imported)."""
    from importlib import metadata

    for name in TF_DISTRIBUTIONS:
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return None


def tf_xla_cache_dir(environ=os.environ, version: str | None = None) -> Path | None:
    """TensorFlow's persistent XLA cache directory for TensorFlow ``version`` (``None``: off).

    >>> str(tf_xla_cache_dir({COMPILE_CACHE_ENV: "/tmp/c"}, version="2.21.0"))
    '/tmp/c/tf-xla/2.21.0'
    >>> tf_xla_cache_dir({COMPILE_CACHE_ENV: "off"}, version="2.21.0") is None
    True
    """
    root = compile_cache_root(environ)
    return None if root is None or not version else root / "tf-xla" / version


#: The TensorFlow releases whose XLA compiles with :data:`TF_XLA_CACHE_FLAG` set. With the flag,
#: 2.12-2.15 fail every XLA compilation on this CPU, an empty cache directory too (measured
#: 2026-11-29 on one XLA row of each release env: 2.14.1 and 2.15.1 "TargetRegistry::lookupTarget
#: failed: No available targets are compatible with triple "unknown"", 2.13.1 "Not an XLA
#: Runtime executable"; 2.16.2 passes and writes its entries)
TF_XLA_CACHE_VERSIONS = ">=2.16"


def tf_xla_cache_works(version: str | None) -> bool:
    """Does TensorFlow ``version`` compile XLA programs with a persistent cache set?

    >>> tf_xla_cache_works("2.15.1"), tf_xla_cache_works("2.16.2"), tf_xla_cache_works("2.23.0.dev20261026")
    (False, True, True)
    >>> tf_xla_cache_works(None), tf_xla_cache_works("unknown")
    (False, False)
    """
    if not version:
        return False
    try:
        return vr.in_range(version, TF_XLA_CACHE_VERSIONS)
    except vr.VersionError:  # not a version this project can read: no cache rather than a failed run
        return False


def without_tf_xla_cache(flags: str) -> str | None:
    """``TF_XLA_FLAGS`` without the persistent cache (for a process whose first XLA
    compilation is what it measures); ``None`` when nothing else is left.

    >>> without_tf_xla_cache("--tf_xla_persistent_cache_directory=/c --tf_xla_auto_jit=2")
    '--tf_xla_auto_jit=2'
    >>> without_tf_xla_cache("--tf_xla_persistent_cache_directory=/c") is None
    True
    """
    kept = [f for f in (flags or "").split() if not f.startswith(TF_XLA_CACHE_FLAG)]
    return " ".join(kept) or None


def _tf_xla_cache(environ) -> None:
    """With ``AUTODIFF_SEMANTICS_TF_XLA_CACHE=on`` (:data:`TF_XLA_CACHE_ENV`; off by default,
    because a warm cache gave wrong gradients), name TensorFlow's persistent XLA cache in
    ``TF_XLA_FLAGS`` (read once, when TensorFlow first compiles): an XLA program
    (``jit_compile=True``) whose executable is in it is loaded, not compiled, by the workers of
    a run, later runs and tox envs with the same TensorFlow, in a directory per TensorFlow
    version; measured on two case modules (issue 46): XLA first calls 13.7 s -> 6.3 s on a warm
    run. TensorFlow first tries to read each entry as a text proto and logs that parse error
    (C++ stderr, captured by pytest with the row's output) before it reads the binary one. A
    flag the user set (a cache of their own) is left alone; ``off`` sets none. Bounded like
    JAX's (:data:`TF_XLA_CACHE_MAX_BYTES`, :func:`_bound_cache`)."""
    flags = environ.get("TF_XLA_FLAGS", "")
    if TF_XLA_CACHE_FLAG in flags or environ.get(TF_XLA_CACHE_ENV, "").strip().lower() != "on":
        return
    version = tf_distribution_version()
    if not tf_xla_cache_works(version):
        return
    path = tf_xla_cache_dir(environ, version)
    if path is None:
        return
    try:
        path.mkdir(parents=True, exist_ok=True)
        _bound_cache(path, TF_XLA_CACHE_MAX_BYTES, pattern="xla_compile_cache__*")
    except OSError:  # no disk: no cache
        return
    environ["TF_XLA_FLAGS"] = f"{flags} {TF_XLA_CACHE_FLAG}={path}".strip()


def use_jax_compilation_cache(jax) -> None:
    """Turn on JAX's persistent compilation cache for every program however short its
    compile (:func:`load` does; a peer process that imports JAX itself calls it too). JAX's
    eager mode compiles each primitive per shape and dtype and each closure it meets (a
    ``lax.cond`` branch, a function under ``jax.vjp``, each primitive of an eager
    ``shard_map``) again on every call, although
    the computation is the same; a program whose XLA computation is in the cache is loaded,
    not compiled. The cache holds XLA's own executables, keyed by JAX on the program, the
    compile options, the jaxlib version and the device, so results are unchanged.

    By default the cache is shared (:func:`compile_cache_dir`): by the workers of a run, by
    later runs, and by the tox envs that install the same JAX (``tf218``-``tf221`` and the
    nightly; ``tf212``-``tf217``). Measured on this 2-core machine, the whole ci suite with
    ``--jobs 2`` (TF 2.21, 2,994 CPU rows): 1,443 s of pytest on an empty cache, 1,120 s on
    the cache that run filled (JAX eager rows 805 s -> 499 s of test time, TensorFlow eager,
    which calls the JAX oracle, 519 s -> 352 s), the same outcomes and observations.
    It is kept under :data:`JAX_SHARED_CACHE_MAX_BYTES` (:func:`_bound_cache`). JAX writes an
    entry without a lock; a process that reads one half written is told so by JAX (a warning)
    and compiles the program itself. ``off``, or a directory that cannot be made: a cache of
    this process's own, removed when it exits, that
    keeps only programs that took at least :data:`JAX_CACHE_MIN_COMPILE_S` to compile (a
    primitive compiled once per shape is never compiled twice in a process: writing it costs
    and saves nothing there; the JAX rows of two case modules took 40 s instead of 58 s
    with it). A cache directory the user configured (``JAX_COMPILATION_CACHE_DIR``) is left
    alone. A process that was killed (a crashed case, a fault that kills its worker, SIGKILL)
    runs no exit handler: the own-process directories whose process no longer runs are
    removed here."""
    if os.environ.get("JAX_COMPILATION_CACHE_DIR") or getattr(jax.config, "jax_compilation_cache_dir", None):
        return
    shared = compile_cache_dir()
    if shared is not None and _shared_jax_cache(jax, shared):
        return
    _own_jax_cache(jax)


def _shared_jax_cache(jax, path: Path) -> bool:
    try:
        path.mkdir(parents=True, exist_ok=True)
        _bound_cache(path, JAX_SHARED_CACHE_MAX_BYTES)
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
        jax.config.update("jax_persistent_cache_min_entry_size_bytes", -1)
        jax.config.update("jax_compilation_cache_dir", str(path))
    except (OSError, AttributeError, ValueError):  # an older JAX, no disk
        return False
    return True


def _bound_cache(path: Path, bound: int, pattern: str = "*-cache") -> None:
    """Past ``bound`` bytes, remove the oldest programs until half of it is left (once, when a
    process starts). JAX's own bound (``jax_compilation_cache_max_size``) is not used: it
    lists and stats the whole directory on every write, and with the ~10,000 programs of a
    whole run that made the JAX rows of a cold run 1.8x slower (measured)."""
    entries = []
    for p in path.glob(pattern):
        try:
            st = p.stat()
        except OSError:  # removed by another process meanwhile
            continue
        entries.append((st.st_mtime, st.st_size, p))
    total = sum(size for _, size, _ in entries)
    if total <= bound:
        return
    for _, size, p in sorted(entries, key=lambda e: e[0]):
        if total <= bound // 2:
            break
        p.unlink(missing_ok=True)
        total -= size


#: the process's own JAX cache directory (``=off``), removed when the process ends
_OWN_CACHE: list = []


def remove_own_cache() -> None:
    """Remove this process's own JAX cache (an exit handler; also called by a process that
    ends with ``os._exit``, which runs none: the CLI's fast exit)."""
    import shutil

    for path in _OWN_CACHE:
        shutil.rmtree(path, ignore_errors=True)
    _OWN_CACHE.clear()


def _own_jax_cache(jax) -> None:
    import atexit
    import tempfile

    _sweep_jax_caches(Path(tempfile.gettempdir()))
    path = tempfile.mkdtemp(prefix=f"{JAX_CACHE_PREFIX}{os.getpid()}-")
    _OWN_CACHE[:] = [path]
    atexit.register(remove_own_cache)
    try:
        jax.config.update("jax_persistent_cache_min_compile_time_secs", JAX_CACHE_MIN_COMPILE_S)
        jax.config.update("jax_persistent_cache_min_entry_size_bytes", -1)
        jax.config.update("jax_compilation_cache_dir", path)
    except (AttributeError, ValueError):  # an older JAX without these options: no cache
        remove_own_cache()


def tf_xla_cache_used(environ=os.environ) -> str:
    """TensorFlow's persistent XLA cache this process uses, for the run's header.

    >>> tf_xla_cache_used({"TF_XLA_FLAGS": "--tf_xla_auto_jit=2"})
    'none'
    """
    for flag in environ.get("TF_XLA_FLAGS", "").split():
        if flag.startswith(TF_XLA_CACHE_FLAG + "="):
            where = Path(flag.split("=", 1)[1])
            n = sum(1 for _ in where.glob("xla_compile_cache__*")) if where.is_dir() else 0
            return f"{where} ({n} programs in it)" if n else f"{where} (empty)"
    return "none"


def compile_cache_used() -> str:
    """The JAX compilation cache this process uses, for the run's header."""
    fw = load("jax")
    if fw.error or fw.module is None:
        return "none (JAX not loaded)"
    where = getattr(fw.module.config, "jax_compilation_cache_dir", None)
    if not where:
        return "none"
    if Path(where).name.startswith(JAX_CACHE_PREFIX):
        return f"{where} (this process's own)"
    n = sum(1 for _ in Path(where).glob("*-cache")) if Path(where).is_dir() else 0
    return f"{where} (shared, {n} programs in it)" if n else f"{where} (shared, empty)"


def load(name: str) -> Framework:
    """Import one framework (and every one that must come before it) once per process."""
    if name not in IMPORT_ORDER:
        raise KeyError(f"unknown framework {name!r}; known: {', '.join(IMPORT_ORDER)}")
    if name in _loaded:
        return _loaded[name]
    hygiene()
    for earlier in IMPORT_ORDER[: IMPORT_ORDER.index(name)]:
        load(earlier)
    try:
        mod = importlib.import_module(name)
        version, devices = _configure(name, mod)
        fw = Framework(name, mod, version, devices)
    except ImportError as e:  # not installed, or a broken install
        fw = Framework(name, None, None, (), f"{name} is not installed ({type(e).__name__}: {e})")
    _loaded[name] = fw
    if fw.available:
        for hook in _ON_LOAD:
            hook(name, fw.module)
    return fw


#: Called with ``(name, module)`` right after a framework is imported: the session's plugin adds
#: the report's deprecation collector (``suite.plugin``), the fault catalogue's plugin
#: (``-p suite.faults.plugin``) the faults it injects. The framework plumbing knows neither.
_ON_LOAD: list = []


def restore_tf_variable_scope() -> None:
    """Undo the global variable scope's ``caching_device`` a failed trace left set. ``tf.scan``,
    ``tf.foldl`` and ``tf.map_fn`` set it while they build their loop and restore it only when
    the build succeeds: a trace that raises inside one (forward mode through ``tf.scan`` in a
    ``tf.function``, a declared TypeError) leaves it set, and every variable a later eager test
    makes then fails ('Caching devices is not yet supported when eager execution is enabled';
    measured on TF 2.21: the whole ci suite with two workers failed two such rows of
    custom-gradient-calling-conventions and crashed a worker in adam-epsilon). Called after each test."""
    fw = _loaded.get("tensorflow")
    if fw is None or fw.module is None:
        return
    scope = fw.module.compat.v1.get_variable_scope()
    if scope.caching_device is not None:  # its setter refuses in eager mode, the state it left
        scope._caching_device = None


def on_load(hook) -> None:
    """Run ``hook(name, module)`` for each framework imported from now on, and for those
    already imported (a plugin may be configured after collection imported one)."""
    _ON_LOAD.append(hook)
    for name, fw in list(_loaded.items()):
        if fw.available:
            hook(name, fw.module)


def environment() -> dict:
    """The report's ``environment`` block for the frameworks (measured, never typed in)."""
    out = {}
    for name in IMPORT_ORDER:
        fw = load(name)
        entry = {"version": fw.version, "devices": list(fw.devices)}
        rev = git_revision(name) if fw.available else None
        if rev:
            entry["git_version"] = rev
        gpu = gpu_name(name) if "gpu" in fw.devices else None
        if gpu:
            entry["gpu_name"] = gpu
        if fw.error:
            entry["error"] = fw.error
        out[name] = entry
    return out


def git_revision(name: str) -> str | None:
    """The source revision a framework's build says it was made from (issue 49: which nightly
    made a change is a range of these): ``tf.version.GIT_VERSION``, ``jax.version._git_hash``,
    ``torch.version.git_version``; None where the build does not say."""
    mod = load(name).module
    try:
        if name == "tensorflow":
            rev = mod.version.GIT_VERSION
        elif name == "jax":
            import jax.version

            rev = getattr(jax.version, "_git_hash", None)
        else:
            rev = mod.version.git_version
    except Exception:  # a revision is a nicety: never fail a run over it
        return None
    return str(rev) if rev and str(rev).lower() not in ("unknown", "none") else None


def gpu_name(name: str) -> str | None:
    """The GPU model a framework sees (first device), as it names it; None without one."""
    fw = load(name)
    try:
        if name == "torch":
            return fw.module.cuda.get_device_name(0)
        if name == "jax":
            return fw.module.devices("gpu")[0].device_kind
        if name == "tensorflow":
            gpus = fw.module.config.list_physical_devices("GPU")
            return fw.module.config.experimental.get_device_details(gpus[0]).get("device_name")
    except Exception:  # a name is a nicety: never fail a run over it
        return None
    return None


def missing(*, frameworks=IMPORT_ORDER, devices=DEVICES) -> dict[str, str]:
    """What the run asked for and cannot have, by ``--allow-missing`` name, with the reason:
    a requested framework that does not import, and a requested GPU that JAX or PyTorch see
    but TensorFlow does not (a CUDA wheel built for another driver). Measured by importing.

    >>> missing(frameworks=[], devices=["cpu"])
    {}
    """
    out = {}
    for name in frameworks:
        fw = load(name)
        if not fw.available:
            out[name] = f"{name} could not be imported: {fw.error}"
    if "gpu" in devices and "tensorflow" in frameworks:
        tf = load("tensorflow")
        seen = [n for n in registry.ORACLES if "gpu" in load(n).devices]
        if tf.available and seen and "gpu" not in tf.devices:
            out["gpu"] = (
                f"a GPU is visible to {' and '.join(seen)} but not to TensorFlow {tf.version} "
                "(a CPU-only or mismatched CUDA build?)"
            )
    return out


#: Distributions whose version changes an answer without being a framework of the suite:
#: Keras (keras-nightly replaces Keras 3's files under tf-nightly), NumPy and ml_dtypes
#: (dtype rules), optax (the JAX Adam), jaxlib, the TensorFlow wheel that is installed
#: (tensorflow, tensorflow-cpu or tf-nightly), Hypothesis (the draws) and packaging.
PACKAGES = (
    "keras",
    "keras-nightly",
    "tf-keras",
    "numpy",
    "ml_dtypes",
    "optax",
    "jaxlib",
    "tensorflow",
    "tensorflow-cpu",
    "tf-nightly",
    "hypothesis",
    "packaging",
)


def package_versions() -> dict[str, str]:
    """The installed version of each of :data:`PACKAGES` that is installed (read from the
    distributions' metadata: nothing is imported).

    >>> "numpy" in package_versions()
    True
    """
    from importlib import metadata

    out = {}
    for name in PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return out


def python_environment() -> dict:
    return {
        "python": platform.python_version(),
        "platform": f"{platform.system()}-{platform.machine()}",
        "cpu": cpu_description(),
        "executable": sys.executable,
    }


#: The vector extensions a CPU description names, where the CPU has them: the frameworks' CPU
#: kernels (MKL, Eigen, XLA's code) choose their paths by them.
CPU_FEATURES = ("avx512f", "avx2", "avx", "fma")


def cpu_description(cpuinfo: str | None = None) -> str | None:
    r"""The CPU's model, family and model numbers and which of :data:`CPU_FEATURES` it has, read
    from ``/proc/cpuinfo`` (Linux; elsewhere the platform's processor name). A virtual machine of
    the same platform may run on another CPU on another day, and the CPU kernels (MKL, Eigen,
    XLA's code) choose their paths by it. Why it is recorded: on 2026-11-30 (AMD EPYC family 25
    model 1), PyTorch's determinant of linalg-spectral's derandomized singular integer matrices
    was an exact zero for every draw, where the 2.21 baseline's run, on another day and a CPU it
    did not record, had met a rounding residue: that row observed two keys fewer.

    >>> cpu_description("cpu family\t: 25\nmodel\t\t: 1\nmodel name\t: AMD EPYC\nflags\t\t: fpu fma avx\n")
    'AMD EPYC (family 25, model 1); avx, fma'
    >>> cpu_description("processor\t: 0\n")
    """
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
        except OSError:
            return platform.processor() or None
    fields: dict[str, str] = {}
    for line in cpuinfo.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip() not in fields:
            fields[key.strip()] = value.strip()
    model = fields.get("model name")
    if model is None:
        return None
    if "cpu family" in fields and "model" in fields:
        model += f" (family {fields['cpu family']}, model {fields['model']})"
    flags = set(fields.get("flags", "").split())
    return "; ".join([model, ", ".join(f for f in CPU_FEATURES if f in flags) or "none of " + "/".join(CPU_FEATURES)])


@dataclasses.dataclass(frozen=True)
class Spec:
    """What a row is about before anything is imported: framework x mode x device."""

    framework: str
    mode: str
    device: str

    @property
    def id(self) -> str:
        return f"{self.framework}-{self.mode}-{self.device}"


def specs(*, frameworks=IMPORT_ORDER, modes=None, devices=DEVICES) -> list[Spec]:
    """Every framework x mode x device the options ask for, available or not. ``modes``
    filters TensorFlow's modes: ``None`` is every mode, an empty list none."""
    out = []
    for fw in sorted(frameworks, key=registry.NAMES.index):
        for mode in MODES[fw]:
            if modes is not None and fw == "tensorflow" and mode not in modes:  # []: no TensorFlow spec
                continue
            for dev in devices:
                out.append(Spec(fw, mode, dev))
    return out


_runners: dict[Spec, object] = {}


def runner(spec: Spec):
    """The runner for a spec, or raise :class:`Unavailable` with the reason."""
    if spec in _runners:
        return _runners[spec]
    fw = load(spec.framework)
    if not fw.available:
        raise Unavailable(fw.error)
    if spec.device not in fw.devices:
        raise Unavailable(f"no {spec.device.upper()} visible to {spec.framework} {fw.version}")
    module = importlib.import_module(registry.BY_NAME[spec.framework].runner)
    r = module.make(fw, spec)
    _runners[spec] = r
    return r


def runners(*, frameworks=IMPORT_ORDER, modes=None, devices=DEVICES) -> list:
    """Available runners only (unavailable ones are dropped silently: use specs() for rows)."""
    out = []
    for s in specs(frameworks=frameworks, modes=modes, devices=devices):
        try:
            out.append(runner(s))
        except Unavailable:
            pass
    return out


def reference_oracles(exclude: str | None = None, frameworks=registry.ORACLES, device="cpu") -> list:
    """One reference runner per oracle framework (jax-jit, torch-eager) that is available."""
    out = []
    for fw in frameworks:
        if fw == exclude:
            continue
        try:
            out.append(runner(Spec(fw, REFERENCE_MODE[fw], device)))
        except Unavailable:
            try:
                out.append(runner(Spec(fw, REFERENCE_MODE[fw], "cpu")))
            except Unavailable:
                pass
    return out
