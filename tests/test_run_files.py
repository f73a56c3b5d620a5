"""A report on disk is always this run's: the previous ``latest.*`` go before a run starts, an
interrupted run with no row still leaves a partial report (zero rows), and the pytest child
does not outlive the CLI."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from suite import supervisor
from tests.test_end_to_end import run_cli

SLEEPY_DEMO = '''"""Sleepy demo: a case that writes its process id and sleeps."""
import os
import time

import numpy as np
from hypothesis import given, strategies as st

from suite.behaviours import behaviour, on

BEHAVIOUR = behaviour("sleepy-demo", sources=[])


@on("jax")
@given(x=st.just(np.float32(1)))
def test_sleeps(subject, record, x):
    record.example(x=x)
    with open(os.environ["ADSEM_DEMO_PID"], "w") as fh:
        fh.write(str(os.getpid()))
    time.sleep(120)
    record.equal(name="x", out=x, ref=np.float32(1), oracle="closed-form")
'''


def _sleepy_cases(tmp_path):
    cases = tmp_path / "cases"
    cases.mkdir()
    (cases / "test_sleepy_demo.py").write_text(SLEEPY_DEMO)
    return cases


def test_the_previous_run_files_go_and_an_empty_interrupted_run_is_a_zero_row_partial(tmp_path):
    for name in supervisor.RUN_FILES:
        (tmp_path / name).write_text("an older run's")
    supervisor.clear_previous(tmp_path)
    assert not any((tmp_path / n).exists() for n in supervisor.RUN_FILES)
    assert supervisor.ensure_partial_report(tmp_path) == 0
    report = json.loads((tmp_path / "latest.json").read_text())
    assert report["partial"] is True and report["results"] == []
    assert (tmp_path / "latest.html").exists() and (tmp_path / "latest.md").exists()


@pytest.mark.slow
def test_a_run_that_selects_nothing_leaves_no_older_report_behind(tmp_path):
    cases = _sleepy_cases(tmp_path)
    out = tmp_path / "r"
    out.mkdir()
    (out / "latest.json").write_text('{"an": "older run"}')
    (out / "latest.html").write_text("older")
    p = run_cli(
        ["run", "--cases", str(cases), "--frameworks", "jax", "--report-dir", str(out), "--", "-k", "nomatch"], tmp_path
    )
    assert p.returncode == 5, p.stdout[-2000:] + p.stderr[-2000:]
    assert not (out / "latest.html").exists()
    assert "latest.html" not in p.stdout + p.stderr  # no pointer at a report this run did not write
    stale = out / "latest.json"
    assert not stale.exists() or json.loads(stale.read_text()).get("an") != "older run"


@pytest.mark.slow
def test_the_pytest_child_dies_with_the_cli(tmp_path):
    """SIGKILL of the CLI (no handler runs) must not orphan pytest: the child gets SIGTERM."""
    cases = _sleepy_cases(tmp_path)
    pid_file = tmp_path / "pid"
    args = ["run", "--cases", str(cases), "--frameworks", "jax", "--modes", "eager", "--devices", "cpu"]
    args += ["--report-dir", str(tmp_path / "r")]
    code = f"import sys; from suite.cli import main; sys.exit(main({args!r}))"
    cli = subprocess.Popen(
        [sys.executable, "-c", code],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "ADSEM_DEMO_PID": str(pid_file)},
        start_new_session=True,
    )
    try:
        deadline = time.time() + 300
        while not pid_file.exists() and time.time() < deadline and cli.poll() is None:
            time.sleep(0.2)
        assert pid_file.exists(), "the demo case never started"
        child = int(pid_file.read_text())
        cli.kill()
        cli.wait(timeout=30)
        deadline = time.time() + 60
        while time.time() < deadline:
            try:
                os.kill(child, 0)
            except ProcessLookupError:
                break
            time.sleep(0.2)
        else:
            os.kill(child, signal.SIGKILL)
            pytest.fail("pytest outlived the CLI by 60 s")
    finally:
        if cli.poll() is None:
            cli.kill()
