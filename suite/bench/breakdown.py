"""Where an example's time goes, per framework-mode column: a pytest plugin for measuring
runs (``benchmarks/breakdown.py`` loads it with ``-p suite.bench.breakdown``), never loaded
by a normal run.

Each test's call phase is split into

- ``generation``: Hypothesis drawing inputs, shrinking and its own bookkeeping (the call
  phase outside the test body);
- ``subject_first`` / ``oracle_first``: calls of a compiled callable with an input
  signature (dtypes and shapes) it had not seen: tracing, XLA or ``jax.jit`` compilation,
  graph building, and in eager modes the per-shape kernel set-up, with that first run;
- ``subject_run`` / ``oracle_run``: the other calls (running what was already built);
- ``body_other``: the rest of the test body (NumPy closed forms, finite differences are
  counted under the runner they call, comparisons, the record);
- ``subject_first_calls`` / ``oracle_first_calls``: how many first calls there were.

Runner calls are timed by wrapping ``Runner.compile``'s callables, so an oracle's call that
is answered without running (a cache hit) costs only the lookup. Rows are appended, one JSON
line per test, to ``$ADSEM_BREAKDOWN`` (the process id in the name keeps xdist workers apart).
"""

from __future__ import annotations

import functools
import json
import os
import time

import pytest

from suite import frameworks
from suite.frameworks import base

_state = {"subject": None, "times": None, "counts": None, "seen": set()}
_original_compile = base.Runner.compile


def _signature(arrays) -> tuple:
    out = []
    for a in arrays:
        dt, sh = getattr(a, "dtype", None), getattr(a, "shape", None)
        out.append((str(dt), tuple(sh)) if sh is not None else (type(a).__name__, repr(a)[:32]))
    return tuple(out)


def _timed_compile(self, builder, **static):
    fn = _original_compile(self, builder, **static)
    try:
        program = hash(self.compile_key(builder, static))
    except TypeError:
        program = id(builder)

    def call(*arrays):
        times = _state["times"]
        if times is None:
            return fn(*arrays)
        who = "subject" if self is _state["subject"] else "oracle"
        key = (self.id, program, _signature(arrays))
        first = key not in _state["seen"]
        _state["seen"].add(key)
        t0 = time.perf_counter()
        try:
            return fn(*arrays)
        finally:
            dt = time.perf_counter() - t0
            times[f"{who}_{'first' if first else 'run'}"] += dt
            if first:
                _state["counts"][f"{who}_first"] += 1

    return call


def pytest_configure(config):
    base.Runner.compile = _timed_compile


def pytest_unconfigure(config):
    base.Runner.compile = _original_compile


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    spec = getattr(getattr(item, "callspec", None), "params", {}).get("subject")
    times = dict.fromkeys(("subject_first", "subject_run", "oracle_first", "oracle_run", "body"), 0.0)
    _state["times"] = times
    counts = _state["counts"] = dict.fromkeys(("subject_first", "oracle_first"), 0)
    try:
        _state["subject"] = frameworks.runner(spec) if spec is not None else None
    except Exception:  # an unavailable subject: the test skips itself
        _state["subject"] = None
    hyp = getattr(item.obj, "hypothesis", None)
    inner = getattr(hyp, "inner_test", None)
    if inner is not None:

        @functools.wraps(inner)  # the same digest, so derandomized runs draw the same examples
        def timed_inner(*a, **k):
            t0 = time.perf_counter()
            try:
                return inner(*a, **k)
            finally:
                times["body"] += time.perf_counter() - t0

        hyp.inner_test = timed_inner
    t0 = time.perf_counter()
    try:
        return (yield)
    finally:
        total = time.perf_counter() - t0
        if inner is not None:
            hyp.inner_test = inner
        _state["times"] = None
        body = times.pop("body") if inner is not None else total
        runner_s = sum(times.values())
        rec = getattr(item, "_adsem_record", None)
        row = {
            "test": item.nodeid,
            "column": spec.id if spec is not None else None,
            "examples": getattr(rec, "examples", 0),
            "total": total,
            "generation": max(total - body, 0.0),
            "body_other": max(body - runner_s, 0.0),
            **times,
            "subject_first_calls": counts["subject_first"],
            "oracle_first_calls": counts["oracle_first"],
        }
        path = os.environ.get("ADSEM_BREAKDOWN")
        if path:
            with open(f"{path}.{os.getpid()}", "a", encoding="utf-8") as f:
                f.write(json.dumps(row) + "\n")
