"""Self-tests of the fault catalogue and the self-check (a fast subset; tox -e faults runs all)."""

import subprocess
import sys

import pytest

from suite import behaviours as bh
from suite.faults import CATALOGUE


def test_every_fault_names_known_behaviours_and_every_behaviour_has_a_fault():
    known = bh.discover()
    for f in CATALOGUE.values():
        assert f.breaks and set(f.breaks) <= set(known), f"{f.name} names {f.breaks}"
        assert f.description
    covered = {b for f in CATALOGUE.values() for b in f.breaks}
    assert set(known) <= covered, f"behaviours with no fault: {sorted(set(known) - covered)}"


def test_unknown_fault_is_a_clear_error():
    p = subprocess.run(
        [sys.executable, "-m", "suite", "faults", "--fault", "no-such-fault"], capture_output=True, text=True
    )
    assert p.returncode == 2 and "unknown fault(s) no-such-fault" in p.stderr


@pytest.mark.slow
def test_faults_command_kills_a_fault_and_prints_the_matrix():
    p = subprocess.run(
        [sys.executable, "-m", "suite", "faults", "--fault", "stop-gradient-identity"],
        capture_output=True,
        text=True,
        timeout=1500,
    )
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-2000:]
    assert "stop-gradient-identity: killed" in p.stdout
    assert "kill rate: 1/1 (100%)" in p.stdout
    assert "| stop-gradient-identity | straight-through-estimator |" in p.stdout


def test_a_normal_run_never_reads_the_catalogue():
    """Faults enter only through ``-p suite.faults.plugin``: loading the frameworks neither
    imports the catalogue nor obeys the environment variable of earlier versions."""
    code = (
        "import sys; from suite import frameworks; fw = frameworks.load('tensorflow'); "
        "tf = fw.module; import numpy as np; "
        "g = tf.GradientTape(); x = tf.constant(1.0)\n"
        "with g: g.watch(x); y = tf.stop_gradient(x) * 1.0\n"
        "print('suite.faults' in sys.modules, g.gradient(y, x))"
    )
    env = {**__import__("os").environ, "AUTODIFF_SEMANTICS_FAULTS": "stop-gradient-identity"}
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    assert p.stdout.strip().splitlines()[-1] == "False None"


def test_a_crash_under_a_fault_is_reported_not_counted_as_a_kill(monkeypatch):
    from suite.faults import runner

    crashed = {"behaviour": "partial-stop-gradient", "test": "t[tensorflow-eager-cpu]", "outcome": "failed"}

    def fake(files, faults, report_dir, profile, **kw):
        return subprocess.CompletedProcess([], 1, "", ""), [dict(crashed, failure="TypeError", error="boom")]

    monkeypatch.setattr(runner, "_pytest", fake)
    o = runner.run_fault(CATALOGUE["stop-gradient-zeros"], lambda b: ["x.py"])
    assert not o.killed and "not an assertion" in o.error and "TypeError" in o.error

    monkeypatch.setattr(
        runner,
        "_pytest",
        lambda *a, **k: (subprocess.CompletedProcess([], 1, "", ""), [dict(crashed, failure="assertion")]),
    )
    assert runner.run_fault(CATALOGUE["stop-gradient-zeros"], lambda b: ["x.py"]).killed


def test_a_control_run_that_times_out_is_a_clear_failure(monkeypatch):
    """A control run that outlasts its limit (a loaded machine) stops the catalogue with a line
    that says so, not a traceback."""
    from suite.faults import runner

    def slow(*a, **k):
        raise subprocess.TimeoutExpired(["pytest"], k["timeout"])

    monkeypatch.setattr(runner, "_pytest", slow)
    ok, why = runner.control(["x.py"])
    assert not ok and why == f"the control run did not finish in {runner.CONTROL_TIMEOUT_S} s"


def test_versioned_reports_refuse_a_run_under_a_fault(tmp_path):
    import json

    from suite.report import files

    env = {"frameworks": {"tensorflow": {"version": "2.21.0"}}, "faults": ["stop-gradient-identity"]}
    (tmp_path / "latest.json").write_text(json.dumps({"environment": env, "results": []}))
    with pytest.raises(files.ReportFileError, match="fault.*stop-gradient-identity.*not written"):
        files.save_versioned(tmp_path, tmp_path / "baselines")
    assert not (tmp_path / "baselines").exists()


def test_a_fault_is_data_its_target_and_its_wrong_semantics(monkeypatch):
    """``replaces`` puts ``wrong(tf, original, ...)`` at every target, ``original`` being what the
    first held; the description is the docstring, ``breaks`` the module's behaviour unless named;
    a fault that says nothing is refused."""
    import inspect
    import types

    from suite import faults
    from suite.faults.patch import replaces

    monkeypatch.setattr(faults, "CATALOGUE", dict(faults.CATALOGUE))

    def wrong(tf, original, x, name=None):
        "tf.negative adds one"
        return original(x) + 1

    wrong.__module__ = "suite.faults.partial_stop_gradient"
    replaces("negative", "math.negative", name="test-negative-plus-one")(wrong)
    f = faults.CATALOGUE["test-negative-plus-one"]
    assert (f.breaks, f.description, f.framework) == (("partial-stop-gradient",), "tf.negative adds one", "tensorflow")

    tf = types.SimpleNamespace(negative=lambda x: -x, math=types.SimpleNamespace(negative=lambda x: -x))
    f.patch(tf)
    assert tf.negative(2) == -1 and tf.math.negative(x=5) == -4
    # a case may ask the API what it takes (gather_nd's bad_indices_policy): it sees the original's
    assert str(inspect.signature(tf.negative)) == "(x)"

    replaces("negative", name="test-negative-elsewhere", breaks="loss-gradients")(wrong)
    assert faults.CATALOGUE["test-negative-elsewhere"].breaks == ("loss-gradients",)

    def silent(tf, original, x):
        return x

    with pytest.raises(ValueError, match="says nothing"):
        replaces("negative", name="test-silent")(silent)
