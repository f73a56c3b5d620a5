"""Framework resources end with the test that made them (the run must end when it is done)."""

import os
from pathlib import Path

import numpy as np
import pytest

from suite import frameworks
from suite.frameworks import resources


def double(tf, x):
    return 2 * x


def test_a_graph_mode_session_is_closed_and_forgotten_when_the_test_ends():
    try:
        runner = frameworks.runner(frameworks.Spec("tensorflow", "graph", "cpu"))
    except frameworks.Unavailable as e:
        pytest.skip(str(e))
    resources.release()
    call = runner.compile(double)
    assert np.array_equal(call(np.ones(3, np.float32)), 2 * np.ones(3, np.float32))
    sessions = [obj for obj, _ in resources._open]
    assert len(sessions) == 1 and not sessions[0]._closed
    assert resources.release() == 1
    assert sessions[0]._closed and resources.pending() == 0
    # the next test builds its own graph and Session (the cached callable forgot the old one)
    assert np.array_equal(call(np.ones(2, np.float32)), 2 * np.ones(2, np.float32))
    assert resources.pending() == 1
    resources.release()


def test_release_closes_everything_even_when_one_close_fails():
    closed = []
    resources.track(object(), close=lambda: closed.append("a"))
    resources.track(object(), close=lambda: 1 / 0)
    resources.track(object(), close=lambda: closed.append("c"))
    cache = resources.PerTest(k=1)
    with pytest.raises(ZeroDivisionError):
        resources.release()
    assert closed == ["c", "a"] and cache == {} and resources.pending() == 0


def test_stale_jax_caches_of_dead_processes_are_swept(tmp_path):
    """A killed process (a crashed worker, SIGKILL) leaves its JAX compilation cache behind: the
    next process removes the directories whose process no longer runs, and only those."""
    import subprocess
    import sys

    from suite.frameworks import JAX_CACHE_PREFIX, _sweep_jax_caches

    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead = tmp_path / f"{JAX_CACHE_PREFIX}{int(gone.stdout)}-abc"
    alive = tmp_path / f"{JAX_CACHE_PREFIX}{os.getpid()}-def"
    foreign = tmp_path / f"{JAX_CACHE_PREFIX}user-chosen"
    for d in (dead, alive, foreign):
        (d / "sub").mkdir(parents=True)
    _sweep_jax_caches(tmp_path)
    assert not dead.exists()
    assert alive.exists() and foreign.exists()


_COMPILE_ONCE = """
import sys
from suite import frameworks
jax = frameworks.load("jax").module
if jax is None:
    sys.exit(3)
hits = []
jax.monitoring.register_event_listener(lambda e, **kw: hits.append(e) if e.endswith("cache_hits") else None)
print(frameworks.compile_cache_used())
f = jax.jit(lambda x: jax.numpy.tanh(x) * 3.0 + 1.0)
f(jax.numpy.arange(5.0)).block_until_ready()
print("hit" if hits else "miss")
"""


def _in_a_process(script: str, cache: str, tmp_path, *, unset: str, framework: str):
    """``script``'s output lines in a fresh process with the compile cache root ``cache`` and
    the framework's own cache setting ``unset``; skipped where the framework is not installed."""
    import subprocess
    import sys

    root = str(Path(__file__).resolve().parents[1])
    env = {**os.environ, frameworks.COMPILE_CACHE_ENV: cache, "PYTHONPATH": root, "TMPDIR": str(tmp_path)}
    env.pop(unset, None)
    p = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=180)
    if p.returncode == 3:
        pytest.skip(f"{framework} is not installed")
    assert p.returncode == 0, p.stderr[-2000:]
    return p.stdout.split("\n")


def _compile_once(cache: str, tmp_path):
    return _in_a_process(_COMPILE_ONCE, cache, tmp_path, unset="JAX_COMPILATION_CACHE_DIR", framework="JAX")


def test_the_shared_jax_cache_serves_a_later_process_and_off_keeps_it_to_one(tmp_path):
    """By default a program JAX compiled in one process is loaded, not compiled, by the next
    (the workers of a run, a later run, another tox env with the same JAX); ``off`` gives each
    process a cache of its own that is gone when it exits."""
    shared = tmp_path / "shared"
    first, second = _compile_once(str(shared), tmp_path), _compile_once(str(shared), tmp_path)
    if "own" in first[0]:
        pytest.skip(f"this JAX has no shared cache: {first[0]}")
    assert first[0].endswith("(shared, empty)") and first[1] == "miss"
    assert "(shared, " in second[0] and "programs in it" in second[0] and second[1] == "hit"
    own = _compile_once("off", tmp_path)
    assert own[0].endswith("(this process's own)") and own[1] == "miss"
    assert not list(tmp_path.glob(f"{frameworks.JAX_CACHE_PREFIX}*")), "the own cache outlived its process"


_TF_XLA_ONCE = """
import os, sys
from suite import frameworks
tf = frameworks.load("tensorflow").module
if tf is None:
    sys.exit(3)
print(frameworks.tf_xla_cache_used())
f = tf.function(lambda x: tf.tanh(x) * 3.0 + 1.0, jit_compile=True)
print(f(tf.range(5.0)).numpy().tolist())
"""


def _tf_xla_once(cache: str, tmp_path, opt_in: str = "on"):
    os.environ[frameworks.TF_XLA_CACHE_ENV] = opt_in  # the child inherits it; restored below
    try:
        return _in_a_process(_TF_XLA_ONCE, cache, tmp_path, unset="TF_XLA_FLAGS", framework="TensorFlow")
    finally:
        os.environ.pop(frameworks.TF_XLA_CACHE_ENV, None)


def test_tensorflow_xla_programs_are_cached_per_version_and_off_sets_no_cache(tmp_path):
    """Opted in, a jit_compile program TensorFlow compiled in one process is written to the shared XLA
    cache (one directory per TensorFlow version) and loaded, not written again, by the next, with the
    same result; ``off`` names no cache, so nothing is written; and by default (not opted in) there is
    none either: a warm cache gave wrong gradients (TF_XLA_CACHE_ENV's comment)."""
    default = _tf_xla_once(str(tmp_path / "default"), tmp_path, opt_in="")
    assert default[0] == "none" and not (tmp_path / "default" / "tf-xla").exists()
    root = tmp_path / "caches"
    first = _tf_xla_once(str(root), tmp_path)
    where = frameworks.tf_xla_cache_dir({frameworks.COMPILE_CACHE_ENV: str(root)}, frameworks.tf_distribution_version())
    assert first[0] == f"{where} (empty)"
    entries = sorted(p.name for p in where.glob("xla_compile_cache__*"))
    assert entries, "the first process wrote no XLA executable"
    second = _tf_xla_once(str(root), tmp_path)
    assert second[0] == f"{where} ({len(entries)} programs in it)"
    assert second[1] == first[1]
    assert sorted(p.name for p in where.glob("xla_compile_cache__*")) == entries, "a loaded program was written again"
    off = _tf_xla_once("off", tmp_path)
    assert off[0] == "none" and off[1] == first[1]


def test_a_peer_measuring_a_first_compilation_gets_no_xla_cache(tmp_path):
    """The flags a fresh-compilation peer gets keep the user's other flags and drop only the cache;
    a cache the user named in TF_XLA_FLAGS is left as it is."""
    flags = f"--tf_xla_auto_jit=2 {frameworks.TF_XLA_CACHE_FLAG}=/c"
    assert frameworks.without_tf_xla_cache(flags) == "--tf_xla_auto_jit=2"
    if not frameworks.tf_distribution_version():
        pytest.skip("TensorFlow is not installed")
    env = {frameworks.COMPILE_CACHE_ENV: str(tmp_path), "TF_XLA_FLAGS": "--tf_xla_auto_jit=2"}
    frameworks._tf_xla_cache(env)
    assert env["TF_XLA_FLAGS"] == "--tf_xla_auto_jit=2", "named without the opt-in"
    env[frameworks.TF_XLA_CACHE_ENV] = "on"
    frameworks._tf_xla_cache(env)
    assert env["TF_XLA_FLAGS"].startswith(f"--tf_xla_auto_jit=2 {frameworks.TF_XLA_CACHE_FLAG}={tmp_path}/tf-xla/")
    mine = {frameworks.COMPILE_CACHE_ENV: str(tmp_path), "TF_XLA_FLAGS": f"{frameworks.TF_XLA_CACHE_FLAG}=/mine",
            frameworks.TF_XLA_CACHE_ENV: "on"}  # fmt: skip
    frameworks._tf_xla_cache(mine)
    assert mine["TF_XLA_FLAGS"] == f"{frameworks.TF_XLA_CACHE_FLAG}=/mine"
