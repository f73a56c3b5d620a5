"""Scale-out: ``run --jobs N`` (pytest-xdist workers) and ``run --shard i/n`` (pytest-split)
give the rows of a serial run; a case that kills its worker becomes a ``crashed`` row; an
interrupted parallel run keeps its partial report."""

import json
import os
import signal
import subprocess
import sys
import time
from types import SimpleNamespace

import pytest

from suite.cli import build_parser

from .test_end_to_end import FAST, run_cli

#: Two behaviours (two case modules, so both workers get one), both TensorFlow modes that
#: need no compiler and both JAX modes, on the CPU: 32 rows.
SELECTION = ["--behaviour", "straight-through-estimator", *FAST]
SAME = ("framework", "mode", "device", "outcome", "observed", "expected", "examples")


def rows(report):
    return {r["test"]: {k: r[k] for k in SAME} for r in report["results"]}


def statuses(report):
    return sorted((d["id"], d["status"], d["matched"]) for d in report.get("declared", []))


@pytest.fixture(scope="module")
def serial(tmp_path_factory):
    d = tmp_path_factory.mktemp("serial")
    p = run_cli(["run", *SELECTION, "--jobs", "1", "--report-dir", str(d)], d)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    return json.loads((d / "latest.json").read_text())


@pytest.mark.slow
def test_jobs_2_gives_the_rows_of_a_serial_run(serial, tmp_path):
    p = run_cli(["run", *SELECTION, "--jobs", "2", "--report-dir", str(tmp_path)], tmp_path)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    report = json.loads((tmp_path / "latest.json").read_text())
    assert report["environment"]["jobs"] == 2 and "jobs" not in serial["environment"]
    # measured by the workers (the controller does not import the frameworks), the same as serial
    assert report["environment"]["frameworks"] == serial["environment"]["frameworks"]
    assert report["environment"].get("missing") == serial["environment"].get("missing")
    assert len(serial["results"]) == 32
    assert rows(report) == rows(serial)
    assert [r["test"] for r in report["results"]] == [r["test"] for r in serial["results"]], "collection order"
    assert statuses(report) == statuses(serial) and any(s == "matched" for _, s, _ in statuses(serial))
    assert "incomplete" not in report and "partial" not in report
    junit = (tmp_path / "latest.junit.xml").read_text()
    assert "autodiff_semantics_" not in junit, "rows travel on the reports, not into the JUnit XML"


@pytest.mark.slow
def test_two_shards_merged_give_the_rows_of_the_unsharded_run(serial, tmp_path):
    shards = []
    for i in (1, 2):
        d = tmp_path / f"shard{i}"
        p = run_cli(["run", *SELECTION, "--jobs", "1", "--shard", f"{i}/2", "--report-dir", str(d)], tmp_path)
        assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
        shard = json.loads((d / "latest.json").read_text())
        assert shard["environment"]["shard"] == f"{i}/2" and 0 < len(shard["results"]) < 32
        shards.append(str(d / "latest.json"))
    out = tmp_path / "merged.json"
    p = run_cli(["merge", *shards, "-o", str(out)], tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    merged = json.loads(out.read_text())
    assert rows(merged) == rows(serial)
    assert statuses(merged) == statuses(serial)
    assert "incomplete" not in merged


@pytest.mark.slow
def test_a_case_that_kills_its_worker_is_a_crashed_row_and_the_run_goes_on(tmp_path):
    victim = "test_seed_entry_stop_gradients[tensorflow-eager-cpu]"
    p = run_cli(
        ["run", *SELECTION, "--jobs", "2", "--report-dir", str(tmp_path)],
        tmp_path,
        env={"AUTODIFF_SEMANTICS_CRASH": victim},
    )
    assert p.returncode == 1, p.stdout[-2000:] + p.stderr[-2000:]
    report = json.loads((tmp_path / "latest.json").read_text())
    crashed = [r for r in report["results"] if r["outcome"] == "crashed"]
    assert [r["test"].split("::")[-1] for r in crashed] == [victim], "crashed once, not rescheduled"
    assert len({r["test"] for r in report["results"]}) == len(report["results"]) == 32
    assert all(r["outcome"] == "passed" for r in report["results"] if r not in crashed)


@pytest.mark.slow
def test_an_interrupted_parallel_run_keeps_a_partial_report(tmp_path):
    args = ["run", *SELECTION[:4], "--profile", "ci", "--devices", "cpu", "--jobs", "2", "--report-dir", str(tmp_path)]
    code = f"import sys; from suite.cli import main; sys.exit(main({args!r}))"
    proc = subprocess.Popen(
        [sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    jsonl = tmp_path / "latest.jsonl"
    deadline = time.time() + 600
    while time.time() < deadline:
        if jsonl.exists() and jsonl.read_text().count('"kind": "row"') >= 2:
            break
        time.sleep(0.5)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 130, err[-2000:]
    report = json.loads((tmp_path / "latest.json").read_text())
    assert report["partial"] is True and len(report["results"]) >= 2


@pytest.mark.parametrize(
    "flags",
    [["--jobs", "0"], ["--jobs", "many"], ["--shard", "3/2"], ["--shard", "0/2"], ["--shard", "1"]],
)
def test_bad_jobs_and_shard_values_are_usage_errors(flags, capsys):
    with pytest.raises(SystemExit) as e:
        build_parser().parse_args(["run", *flags])
    assert e.value.code == 2
    assert flags[0] in capsys.readouterr().err


def test_jobs_and_shard_parse():
    args = build_parser().parse_args(["run", "--jobs", "auto", "--shard", "2/4"])
    assert args.jobs == "auto" and args.shard == (2, 4)


def test_the_xdist_controller_leaves_the_frameworks_to_its_workers(monkeypatch):
    """Its header does not import TensorFlow, JAX and PyTorch (the workers do, and their
    versions reach the report with the first row); a worker's or a serial run's header does."""
    from suite import plugin

    monkeypatch.setattr(plugin, "targets_cases", lambda config: True)
    monkeypatch.setattr(plugin.frameworks, "environment", lambda: {"tensorflow": {"version": "9", "devices": ["cpu"]}})

    def getoption(k, default=None):
        return {"profile": "ci"}.get(k, default)

    controller = SimpleNamespace(option=SimpleNamespace(numprocesses=2), getoption=getoption)
    assert plugin.pytest_report_header(controller)[0].startswith("frameworks: imported by the pytest-xdist workers")
    worker = SimpleNamespace(option=SimpleNamespace(numprocesses=2), getoption=getoption, workerinput={})
    serial = SimpleNamespace(option=SimpleNamespace(), getoption=getoption)
    for config in (worker, serial):
        assert plugin.pytest_report_header(config)[0] == "tensorflow 9 devices=cpu"


def test_the_environment_a_worker_sends_survives_execnet():
    """The first row's environment crosses execnet, which refuses anything but plain types;
    with PyTorch imported (its version is a ``TorchVersion``) a worker died of it."""
    import execnet

    from suite.report.plugin import environment_payload

    config = SimpleNamespace(getoption={"frameworks": ("tensorflow", "jax", "torch"), "devices": ("cpu",)}.get)
    sent = execnet.loads(execnet.dumps(environment_payload(config)))
    env = json.loads(sent)
    assert {"tensorflow", "jax", "torch"} <= set(env["frameworks"]) and env["frameworks"]["torch"]["version"]


@pytest.mark.skipif(
    not hasattr(os, "sched_setaffinity") or len(os.sched_getaffinity(0)) < 2, reason="no CPU affinity, or one CPU"
)
def test_a_worker_keeps_to_its_share_of_the_cpus_threads_started_before_included():
    """Worker i of n keeps every n-th CPU from the i-th, also for a thread that started before
    it pinned; more workers than CPUs are not pinned. In a subprocess: affinity is per process."""
    code = """
import json, os, threading
from suite.plugin import pin_worker
cpus = sorted(os.sched_getaffinity(0))
ready, done = threading.Event(), threading.Event()
seen = {}
def early():
    ready.set(); done.wait(); seen["thread"] = sorted(os.sched_getaffinity(0))
t = threading.Thread(target=early); t.start(); ready.wait()
mine = pin_worker({"workerid": "gw3", "workercount": 2})
done.set(); t.join()
print(json.dumps({"cpus": cpus, "mine": mine, "now": sorted(os.sched_getaffinity(0)), "thread": seen["thread"],
                  "too_many": pin_worker({"workerid": "gw0", "workercount": len(cpus) + 1})}))
"""
    out = json.loads(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout)
    assert out["mine"] == out["now"] == out["thread"] == out["cpus"][1::2] != []
    assert out["too_many"] is None


#: A conftest for a cases directory: the frameworks warn while they are imported, as TensorFlow
#: 2.12-2.17 do (their lite module imports ``jax.xla_computation``), from a file inside TensorFlow.
_WARNS_AT_IMPORT = """
import warnings

from suite import frameworks

_environment = frameworks.environment


def environment():
    warnings.warn_explicit(
        "an import-time stand-in is deprecated", DeprecationWarning, "/site/tensorflow/lite/python/util.py", 1
    )
    return _environment()


frameworks.environment = environment
"""

_DEMO = """
import numpy as np
from hypothesis import given, strategies as st

from suite.behaviours import behaviour, on

BEHAVIOUR = behaviour("{id}", sources=[])


@on("jax")
@given(x=st.just(np.float32(1)))
def test_one(subject, record, x):
    record.example(x=x)
    record.equal(name="x", out=x, ref=np.float32(1), oracle="closed-form")
"""


@pytest.mark.slow
def test_what_frameworks_warn_while_imported_is_no_behaviours_deprecation(tmp_path):
    """A worker imports the frameworks before its first test, as a serial run does, so a deprecation
    raised while they are imported is recorded under no behaviour, whatever the workers: measured at
    the first row's teardown, it went to the behaviour each worker happened to run first."""
    cases = tmp_path / "cases"
    cases.mkdir()
    (cases / "conftest.py").write_text(_WARNS_AT_IMPORT)
    for name in ("first-demo", "second-demo"):
        (cases / f"test_{name.replace('-', '_')}.py").write_text(_DEMO.format(id=name))
    for jobs in ("1", "2"):
        out = tmp_path / f"jobs-{jobs}"
        args = ["run", "--cases", str(cases), "--frameworks", "jax", "--devices", "cpu", "--profile", "ci"]
        p = run_cli([*args, "--jobs", jobs, "--report-dir", str(out)], tmp_path)
        assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
        report = json.loads((out / "latest.json").read_text())
        assert len(report["results"]) == 4 and {r["outcome"] for r in report["results"]} == {"passed"}
        assert "an import-time stand-in is deprecated" in p.stdout, "the stand-in never warned"
        assert not report.get("deprecations"), f"--jobs {jobs}: {report.get('deprecations')}"
