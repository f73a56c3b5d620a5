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


def _compile_once(cache: str, tmp_path):
    import subprocess
    import sys

    root = str(Path(__file__).resolve().parents[1])
    env = {**os.environ, frameworks.COMPILE_CACHE_ENV: cache, "PYTHONPATH": root, "TMPDIR": str(tmp_path)}
    env.pop("JAX_COMPILATION_CACHE_DIR", None)
    p = subprocess.run([sys.executable, "-c", _COMPILE_ONCE], capture_output=True, text=True, env=env, timeout=120)
    if p.returncode == 3:
        pytest.skip("JAX is not installed")
    assert p.returncode == 0, p.stderr[-2000:]
    return p.stdout.split("\n")


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
