"""Framework resources end with the test that made them (the run must end when it is done)."""

import os

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
