"""End to end: the CLI runs the cases in a subprocess and writes a usable report.

These are the harness issue's acceptance checks: passed rows with measured observations
for every TensorFlow mode and both oracles; a broken ``tf.stop_gradient`` fails all
three first behaviours; a missing PyTorch gives skipped rows, not an ImportError.
"""

import json
import os
import subprocess
import sys

import pytest

from suite import options
from suite.report import schema

pytestmark = pytest.mark.slow

FIRST = ["straight-through-estimator", "partial-stop-gradient", "per-occurrence-gradients"]


def run_cli(args, tmp, env=None):
    code = f"import sys; from suite.cli import main; sys.exit(main({args!r}))"
    e = dict(os.environ)
    e.update(env or {})
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=e, timeout=1200)


def behaviours_args(ids):
    return [a for i in ids for a in ("--behaviour", i)]


@pytest.fixture(scope="module")
def main_run(tmp_path_factory):
    d = tmp_path_factory.mktemp("main")
    p = run_cli(["run", *behaviours_args(FIRST), "--profile", "ci", "--jobs", "1", "--report-dir", str(d)], d)
    return p, json.loads((d / "latest.json").read_text()), d


def test_run_exits_zero_and_writes_every_format(main_run):
    p, report, d = main_run
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    assert (d / "latest.md").read_text().startswith("# autodiff-semantics report")
    lines = (d / "latest.jsonl").read_text().splitlines()
    assert json.loads(lines[0])["kind"] == "header" and json.loads(lines[-1])["kind"] == "footer"
    assert "behaviour x framework-mode-device" in p.stdout


def test_report_has_passed_rows_with_observations_for_every_mode_and_oracle(main_run):
    _, report, _ = main_run
    assert report["schema_version"] == schema.SCHEMA_VERSION
    assert report["environment"]["frameworks"]["tensorflow"]["version"]
    for b in FIRST:
        rows = [r for r in report["results"] if r["behaviour"] == b and r["device"] == "cpu"]
        got = {(r["framework"], r["mode"]) for r in rows if r["outcome"] == "passed" and r["observed"]}
        for want in [("tensorflow", m) for m in ("eager", "function", "xla", "graph")] + [
            ("jax", "eager"),
            ("jax", "jit"),
            ("torch", "eager"),
        ]:
            assert want in got, f"{b}: no passed row with observations for {want}"
        for r in rows:
            assert r["outcome"] == "passed", r
            assert r["examples"] > 0 and (r["max_rel_err"] or r["observed"]), r
    gpu = [r for r in report["results"] if r["device"] == "gpu"]
    assert (
        gpu
        and all(r["outcome"] == "skipped" and r["reason"] for r in gpu)
        or any(r["outcome"] == "passed" for r in gpu)
    )


def test_report_declares_and_asserts_the_round_gradient_divergence(main_run):
    _, report, _ = main_run
    rows = [r for r in report["results"] if "round_alone" in r["test"] and r["outcome"] == "passed"]
    seen = {r["framework"]: r["observed"]["round_grad"] for r in rows}
    assert seen["tensorflow"] == "none" and seen["jax"] == "zero" and seen["torch"] == "zero"
    assert any(d["key"] == "round_grad" and d["matched"] for d in report["declared"])


def test_ci_gives_every_subject_row_the_full_budget(main_run):
    _, report, _ = main_run
    rows = [r for r in report["results"] if "round_alone" in r["test"] and r["outcome"] == "passed"]
    got = {r["framework"]: r["examples"] for r in rows}
    n = options.PROFILE_EXAMPLES["ci"]
    assert got == {"tensorflow": n, "jax": n, "torch": n}


def test_report_shows_examples_per_second(main_run):
    p, report, d = main_run
    assert "examples per second" in p.stdout
    md = (d / "latest.md").read_text()
    assert "| subject | examples | test s | examples/s |" in md and "Test time (all rows): " in md


def test_broken_stop_gradient_fails_all_three_behaviours(tmp_path):
    p = run_cli(
        [
            "run",
            *behaviours_args(FIRST),
            "--profile",
            "ci",
            "--report-dir",
            str(tmp_path),
            "--frameworks",
            "tensorflow,jax",
            "--devices",
            "cpu",
            "--",
            "-p",
            "suite.faults.plugin",
            "--fault",
            "stop-gradient-identity",
        ],
        tmp_path,
    )
    assert p.returncode == 1, p.stdout[-2000:]
    report = json.loads((tmp_path / "latest.json").read_text())
    assert report["environment"]["faults"] == ["stop-gradient-identity"]
    assert "Faults injected" in (tmp_path / "latest.md").read_text()
    failed = {r["behaviour"] for r in report["results"] if r["outcome"] == "failed"}
    assert failed == set(FIRST)
    bad = [r for r in report["results"] if r["outcome"] == "failed"]
    assert all(r["framework"] == "tensorflow" for r in bad), "only TensorFlow was patched"
    assert all(r["failure"] == "assertion" for r in bad), "a kill is a failed check, not a crash"
    assert all(r.get("reproducer") for r in bad)


def _hidden(tmp_path, name, error):
    """A PYTHONPATH on which ``name`` fails to import as a broken or absent install would
    (every process of the run sees it: the CLI runs pytest in a child)."""
    hide = tmp_path / "hide" / name
    hide.mkdir(parents=True)
    (hide / "__init__.py").write_text(f"raise {error}\n")
    return os.pathsep.join(p for p in (str(hide.parent), os.environ.get("PYTHONPATH", "")) if p)


def _run_partial_stop_gradient(tmp_path, env, *extra):
    args = ["run", "--behaviour", "partial-stop-gradient", "--profile", "ci", "--report-dir", str(tmp_path)]
    return run_cli([*args, "--devices", "cpu", *extra], tmp_path, env=env)


def test_missing_torch_fails_the_run_with_skipped_rows_and_one_clear_line(tmp_path):
    path = _hidden(tmp_path, "torch", "ModuleNotFoundError(\"No module named 'torch'\", name='torch')")
    p = _run_partial_stop_gradient(tmp_path, {"PYTHONPATH": path})
    assert p.returncode == 1, p.stdout[-2000:] + p.stderr[-2000:]
    assert "FAILED: torch could not be imported: torch is not installed" in p.stdout
    assert "--allow-missing torch" in p.stdout
    report = json.loads((tmp_path / "latest.json").read_text())
    torch_rows = [r for r in report["results"] if r["framework"] == "torch"]
    assert torch_rows and all(r["outcome"] == "skipped" and "torch is not installed" in r["reason"] for r in torch_rows)
    assert report["environment"]["frameworks"]["torch"]["version"] is None
    assert "torch" in report["environment"]["missing"] and "allowed_missing" not in report["environment"]
    assert any(r["framework"] == "tensorflow" and r["outcome"] == "passed" for r in report["results"])


def test_frameworks_that_leave_a_tensorflow_only_test_without_subject_run_the_rest(tmp_path):
    """``--frameworks jax``: a test only TensorFlow runs (``@on("tensorflow")``) has no subject.
    pytest would keep it as an item skipped for an empty parameter set, and making its row
    ended the run with an INTERNALERROR; it is left out, and the JAX rows run and pass."""
    args = ["run", "--behaviour", "unconnected-gradients", "--frameworks", "jax", "--profile", "ci"]
    p = run_cli([*args, "--devices", "cpu", "--report-dir", str(tmp_path)], tmp_path)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    assert "INTERNALERROR" not in p.stdout + p.stderr
    rows = json.loads((tmp_path / "latest.json").read_text())["results"]
    assert rows and {r["framework"] for r in rows} == {"jax"} and {r["outcome"] for r in rows} == {"passed"}


def test_a_row_whose_only_oracle_is_allowed_missing_is_skipped_with_that_reason(tmp_path):
    """The TF 2.12/2.13 envs have no PyTorch (--allow-missing torch): a JAX row that compares
    against PyTorch only has compared nothing, which is not a pass and, since the user allowed
    it, not a failure: a skip that names the missing oracle."""
    path = _hidden(tmp_path, "torch", "ModuleNotFoundError(\"No module named 'torch'\", name='torch')")
    args = ["run", "--behaviour", "adam-epsilon", "--profile", "ci", "--devices", "cpu", "--report-dir", str(tmp_path)]
    args += ["--allow-missing", "torch", "--", "-k", "identical_hyperparameters and jax"]
    p = run_cli(args, tmp_path, env={"PYTHONPATH": path})
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    rows = json.loads((tmp_path / "latest.json").read_text())["results"]
    jax_rows = [r for r in rows if r["framework"] == "jax"]
    assert len(jax_rows) == 2
    for r in jax_rows:
        assert r["outcome"] == "skipped", r
        assert "compared nothing: its oracle(s) torch are not installed" in r["reason"]


def test_a_broken_tensorflow_fails_the_run_unless_allowed(tmp_path):
    path = _hidden(tmp_path, "tensorflow", "ImportError('numpy.core.multiarray failed to import')")
    p = _run_partial_stop_gradient(tmp_path / "strict", {"PYTHONPATH": path})
    assert p.returncode == 1, p.stdout[-2000:] + p.stderr[-2000:]
    line = next(x for x in p.stdout.splitlines() if "FAILED: tensorflow could not be imported" in x)
    assert "numpy.core.multiarray failed to import" in line
    report = json.loads((tmp_path / "strict" / "latest.json").read_text())
    tf_rows = [r for r in report["results"] if r["framework"] == "tensorflow"]
    assert tf_rows and all(r["outcome"] == "skipped" for r in tf_rows)

    p = _run_partial_stop_gradient(tmp_path / "allowed", {"PYTHONPATH": path}, "--allow-missing", "tensorflow")
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    report = json.loads((tmp_path / "allowed" / "latest.json").read_text())
    assert report["environment"]["allowed_missing"] == ["tensorflow"]
    md = (tmp_path / "allowed" / "latest.md").read_text()
    assert "Allowed to be missing in this run: tensorflow." in md


FAST = [
    "--behaviour",
    "partial-stop-gradient",
    "--profile",
    "ci",
    "--frameworks",
    "tensorflow,jax",
    "--modes",
    "eager,graph",
    "--devices",
    "cpu",
]


def test_a_planted_crash_is_recorded_and_the_run_goes_on(tmp_path):
    victim = "test_seed_entry_stop_gradients[tensorflow-eager-cpu]"
    p = run_cli(["run", *FAST, "--report-dir", str(tmp_path)], tmp_path, env={"AUTODIFF_SEMANTICS_CRASH": victim})
    assert p.returncode == 1, p.stdout[-2000:] + p.stderr[-2000:]
    assert "crashed the interpreter (SIGSEGV)" in p.stderr
    report = json.loads((tmp_path / "latest.json").read_text())
    crashed = [r for r in report["results"] if r["outcome"] == "crashed"]
    assert [r["test"].split("::")[-1] for r in crashed] == [victim] and crashed[0]["signal"] == "SIGSEGV"
    others = [r for r in report["results"] if r["outcome"] == "passed"]
    tests = {r["test"] for r in report["results"]}
    assert len(tests) == len(report["results"]), "no row twice"
    assert len(others) == len(report["results"]) - 1, "every other case ran and passed"


def _run_until_rows_stream(tmp_path):
    """A CLI run of two whole behaviours (~60 rows, so a signal lands mid-run however loaded
    the machine is) in a session of its own (a signal reaches the CLI process only, as
    ``kill -INT <pid>`` does), returned once two rows have streamed."""
    import time

    args = ["run", *behaviours_args(FIRST[:2]), "--profile", "ci", "--devices", "cpu", "--jobs", "1"]
    args += ["--report-dir", str(tmp_path)]
    code = f"import sys; from suite.cli import main; sys.exit(main({args!r}))"
    proc = subprocess.Popen(
        [sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    jsonl = tmp_path / "latest.jsonl"
    deadline = time.time() + 600
    while time.time() < deadline and not (jsonl.exists() and jsonl.read_text().count('"kind": "row"') >= 2):
        time.sleep(0.5)
    return proc, jsonl


@pytest.mark.parametrize("signame", ["SIGTERM", "SIGINT"])
def test_a_signal_to_the_cli_process_leaves_a_partial_report_that_renders(tmp_path, signame):
    """SIGTERM and SIGINT sent to the CLI process alone (``kill -INT <pid>``, what timeout,
    IDEs and job runners do) both stop the run: exit 128 + the signal (143, 130), partial report kept."""
    import signal

    proc, jsonl = _run_until_rows_stream(tmp_path)
    proc.send_signal(getattr(signal, signame))
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 128 + getattr(signal, signame), err[-2000:]
    assert "Traceback" not in err, err[-2000:]
    report = json.loads((tmp_path / "latest.json").read_text())
    assert report["partial"] is True and len(report["results"]) >= 2
    r = subprocess.run(
        [sys.executable, "-m", "suite", "report", str(jsonl), "--out", str(tmp_path / "out")],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0 and "PARTIAL" in r.stdout
    assert "PARTIAL REPORT" in (tmp_path / "out" / "latest.html").read_text()


def test_ctrl_c_pressed_three_times_ends_quietly_with_a_partial_report(tmp_path):
    """Three SIGINTs a second apart (an impatient user): exit 130, one partial report, no
    traceback (the second and third came while the report was being written)."""
    import signal
    import time

    proc, _ = _run_until_rows_stream(tmp_path)
    for _ in range(3):
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
        time.sleep(1)
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 130, err[-2000:]
    # stderr: the CLI's own output (pytest's warnings summary on stdout may name an interrupt
    # that a gc callback swallowed, PytestUnraisableExceptionWarning: the run still stops)
    assert "Traceback" not in err, err[-3000:]
    report = json.loads((tmp_path / "latest.json").read_text())
    assert report["partial"] is True and len(report["results"]) >= 2


SWALLOW_DEMO = '''"""Swallow demo: a case where the interrupt lands in code that swallows it."""
import os
import signal

import numpy as np
from hypothesis import given, strategies as st

from suite.behaviours import behaviour, on

BEHAVIOUR = behaviour("swallow-demo", sources=[])


@on("jax")
@given(x=st.just(np.float32(1)))
def test_a_callback_swallows_the_interrupt(subject, record, x):
    record.example(x=x)
    try:  # as a framework's C++ boundary does with an error raised in a Python callback
        os.kill(os.getpid(), signal.SIGINT)
    except BaseException:
        pass
    record.equal(name="x", out=x, ref=np.float32(1), oracle="closed-form")


@on("jax")
@given(x=st.just(np.float32(1)))
def test_after_the_signal(subject, record, x):
    record.example(x=x)
    record.equal(name="x", out=x, ref=np.float32(1), oracle="closed-form")
'''


def _run_demo(tmp_path, name, source):
    """``run`` over one demo case module (JAX eager on the CPU, profile ci), its report in
    ``tmp_path/r``."""
    cases = tmp_path / "cases"
    cases.mkdir()
    (cases / f"test_{name}.py").write_text(source)
    args = ["run", "--cases", str(cases), "--frameworks", "jax", "--modes", "eager", "--devices", "cpu"]
    return run_cli([*args, "--profile", "ci", "--report-dir", str(tmp_path / "r")], tmp_path)


def test_an_interrupt_swallowed_inside_a_case_still_ends_the_run_as_interrupted(tmp_path):
    """A signal whose KeyboardInterrupt a case swallows (the flaky SIGINT/SIGTERM self-test's
    cause: it once finished the run and exited 0) stops the run after that case: exit 130,
    a partial report, and no later case ran."""
    p = _run_demo(tmp_path, "swallow_demo", SWALLOW_DEMO)
    assert p.returncode == 130, p.stdout[-3000:] + p.stderr[-3000:]
    report = json.loads((tmp_path / "r" / "latest.json").read_text())
    assert report["partial"] is True
    ran = [r["test"].split("::")[1] for r in report["results"]]
    assert ran == ["test_a_callback_swallows_the_interrupt[jax-eager-cpu]"]


LINELESS_DEMO = '''"""Lineless demo: an interrupt whose traceback holds a frame with no line number."""
import os
import sys
import types

import numpy as np
from hypothesis import given, strategies as st

from suite.behaviours import behaviour, on

BEHAVIOUR = behaviour("lineless-demo", sources=[])


def _frame_past_a_with():
    with open(os.devnull):
        pass
    return sys._getframe()


@on("jax")
@given(x=st.just(np.float32(1)))
def test_interrupted_at_an_instruction_with_no_line(subject, record, x):
    record.example(x=x)
    frame = _frame_past_a_with()
    # Python 3.11 gives such a frame (a with-block's cleanup) tb_lineno None, as a real SIGINT
    # landing there does
    lasti = next(start for start, _, line in frame.f_code.co_lines() if line is None)
    raise KeyboardInterrupt("signal SIGINT").with_traceback(types.TracebackType(None, frame, lasti, -1))
'''


def test_an_interrupt_in_a_frame_with_no_line_number_ends_quietly(tmp_path):
    """pytest renders the interrupt's traceback for its summary and raised TypeError on a
    traceback entry whose ``tb_lineno`` is None (Python 3.11, a SIGINT landing on an
    instruction with no line): a long internal traceback on stderr (CI at 34f9547). The run
    still ends as interrupted, quietly, with its partial report."""
    p = _run_demo(tmp_path, "lineless_demo", LINELESS_DEMO)
    assert p.returncode == 130, p.stdout[-3000:] + p.stderr[-3000:]
    assert "Traceback" not in p.stderr and "INTERNALERROR" not in p.stdout, p.stdout[-3000:] + p.stderr[-3000:]
    assert "KeyboardInterrupt" in p.stdout  # pytest's summary still names the interrupt
    assert json.loads((tmp_path / "r" / "latest.json").read_text())["partial"] is True


#: The behaviours that build v1 Sessions and tf.data pipelines (and Sessions over iterators).
SESSIONS_AND_PIPELINES = ["data-pipeline-randomness", "batch-norm-update-ops", "variable-copy"]


def test_the_run_exits_soon_after_its_report_is_written(tmp_path):
    """Every v1 Session, tf.data iterator and thread pool a case makes is closed when its test
    ends, so interpreter shutdown has nothing to wait for: the process is gone well within
    60 s of the report's ``finished`` time (a run once sat for minutes in Py_FinalizeEx)."""
    import datetime as dt
    import time

    args = [
        "run",
        *behaviours_args(SESSIONS_AND_PIPELINES),
        "--jobs",
        "1",
        "--profile",
        "ci",
        "--frameworks",
        "tensorflow",
        "--modes",
        "eager,graph",
        "--devices",
        "cpu",
        "--report-dir",
        str(tmp_path),
    ]
    code = f"import sys; from suite.cli import main; sys.exit(main({args!r}))"
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    report = tmp_path / "latest.json"
    deadline = time.time() + 900
    while not report.exists() and proc.poll() is None and time.time() < deadline:
        time.sleep(0.5)
    assert report.exists(), proc.communicate(timeout=60)[0][-3000:]
    finished = dt.datetime.strptime(json.loads(report.read_text())["finished"], "%Y-%m-%dT%H:%M:%SZ")
    finished = finished.replace(tzinfo=dt.timezone.utc).timestamp()
    try:
        proc.wait(timeout=max(1.0, finished + 60 - time.time()))
    except subprocess.TimeoutExpired:
        proc.kill()
        pytest.fail("the run was still alive 60 s after its report's finished time")
    out = proc.communicate()[0]
    assert proc.returncode == 0, out[-3000:]
    rows = json.loads(report.read_text())["results"]
    assert {r["behaviour"] for r in rows if r["outcome"] == "passed"} == set(SESSIONS_AND_PIPELINES)
    assert out.rstrip().splitlines()[-1].endswith(f"report {tmp_path / 'latest.html'} (also latest.md, latest.json)")


GREEN_DEMO = '''"""Green demo: rows that must not pass as green."""
import numpy as np
import pytest
from hypothesis import given, strategies as st

from suite.behaviours import behaviour, on

BEHAVIOUR = behaviour("green-demo", sources=[])


@on("jax")
@given(x=st.just(np.float32(1)))
def test_compares_nothing(subject, oracles, record, x):
    record.example(x=x)
    for o in []:  # its oracles are absent
        record.close(name="y", out=x, ref=x, oracle=o.id)


@on("jax")
@given(x=st.just(np.float32(1)))
def test_skips_itself(subject, record, x):
    record.example(x=x)
    pytest.skip("not today")
'''

STALE_DEMO = '''"""Stale demo: a declaration no row reaches."""
import numpy as np
from hypothesis import given, strategies as st

from suite.behaviours import behaviour, on
from suite.expectations import expect, expectations

BEHAVIOUR = behaviour("stale-demo", sources=[])
EXPECT = expectations(
    {"k": "always"},
    expect("k", "never", framework="jax", mode="jit", reason="checked in no draw", link="https://example.org/why"),
)


@on("jax")
@given(x=st.just(np.float32(1)))
def test_checks_only_large_inputs(subject, record, x):
    record.example(x=x)
    record.equal(name="x", out=x, ref=np.float32(1), oracle="closed-form")
    if x > 100:  # no draw gets here: the declaration is never held to a row
        record.check(EXPECT, k="never")
'''


def test_a_green_run_fails_on_compared_nothing_silent_skips_and_stale_declarations(tmp_path):
    cases = tmp_path / "cases"
    cases.mkdir()
    (cases / "test_green_demo.py").write_text(GREEN_DEMO)
    (cases / "test_stale_demo.py").write_text(STALE_DEMO)
    args = ["run", "--cases", str(cases), "--frameworks", "jax", "--devices", "cpu", "--jobs", "1", "--report-dir"]
    p = run_cli([*args, str(tmp_path / "all"), "--profile", "ci"], tmp_path)
    assert p.returncode == 1, p.stdout[-3000:] + p.stderr[-3000:]
    report = json.loads((tmp_path / "all" / "latest.json").read_text())
    by = {r["test"].split("::")[1]: r for r in report["results"]}
    nothing = by["test_compares_nothing[jax-eager-cpu]"]
    assert nothing["outcome"] == "failed" and "compared nothing" in nothing["error"]
    skipped = by["test_skips_itself[jax-jit-cpu]"]
    assert skipped["outcome"] == "failed" and "silently skipped" in skipped["error"]
    assert skipped["failure"] == "assertion"
    (decl,) = report["declared"]
    assert (decl["status"], decl["matched"]) == ("stale", 0)
    assert "FAILED: stale declaration k='never' (jax-jit" in p.stdout

    # the dev profile's few random draws may miss a rare observation: stale is shown, not fatal
    p = run_cli([*args, str(tmp_path / "dev"), "--profile", "dev", "-b", "stale-demo"], tmp_path)
    assert p.returncode == 0, p.stdout[-3000:]
    assert "**STALE**" in (tmp_path / "dev" / "latest.md").read_text()
    # a selection that does not run the behaviour whole gives no verdict
    p = run_cli([*args, str(tmp_path / "k"), "--profile", "ci", "--", "-k", "large_inputs and jit"], tmp_path)
    assert p.returncode == 0, p.stdout[-3000:]
    (decl,) = json.loads((tmp_path / "k" / "latest.json").read_text())["declared"]
    assert decl["status"] == "unconfirmed"
