"""Self-tests of the command line: list, clear errors for bad input."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from suite import cli

ROOT = Path(__file__).resolve().parent.parent


def test_list_prints_every_behaviour(capsys):
    assert cli.main(["list"]) == 0
    out = capsys.readouterr().out
    for b in ("straight-through-estimator", "partial-stop-gradient", "per-occurrence-gradients"):
        assert b in out


def test_unknown_behaviour_is_a_clear_error(capsys):
    assert cli.main(["run", "--behaviour", "straight-through-estimatr"]) == 2
    err = capsys.readouterr().err
    assert "unknown behaviour 'straight-through-estimatr'" in err and "did you mean 'straight-through-estimator'" in err


def test_bad_flag_exits_2_with_usage():
    p = subprocess.run([sys.executable, "-m", "suite", "run", "--no-such-flag"], capture_output=True, text=True)
    assert p.returncode == 2 and "unrecognized arguments: --no-such-flag" in p.stderr


def test_bad_profile_exits_2():
    p = subprocess.run([sys.executable, "-m", "suite", "run", "--profile", "fast"], capture_output=True, text=True)
    assert p.returncode == 2 and "unknown profile 'fast'" in p.stderr


def _report(rows, version="2.21.0"):
    return {
        "schema_version": 1,
        "created": "2026-11-22T00:00:00Z",
        "environment": {"frameworks": {"tensorflow": {"version": version, "devices": ["cpu"]}}},
        "results": rows,
    }


def _row(test, outcome="passed", observed=None):
    return {
        "behaviour": "b",
        "test": f"cases/test_b.py::{test}[tensorflow-xla-cpu]",
        "framework": "tensorflow",
        "mode": "xla",
        "device": "cpu",
        "outcome": outcome,
        "observed": observed or {"k": "clamp"},
        "expected": {},
        "max_rel_err": {},
        "duration_s": 0.1,
    }


def _write(tmp_path, name, obj):
    import json

    p = tmp_path / name
    p.write_text(json.dumps(obj))
    return str(p)


def test_diff_lists_changed_observations_and_exits_1_on_regression(tmp_path, capsys):
    old = _write(tmp_path, "old.json", _report([_row("t1"), _row("t2"), _row("t3")], "2.15.1"))
    new = _write(tmp_path, "new.json", _report([_row("t1", observed={"k": "zero-fill"}), _row("t2", "failed")]))
    assert cli.main(["diff", old, new]) == 1
    out = capsys.readouterr().out
    assert "| `t1` | `k` | informational | `clamp` | `zero-fill` | tensorflow xla |" in out  # expected: {}
    assert "### Newly failing (1)" in out and "### Disappeared (1)" in out
    assert "TensorFlow 2.15.1" in out and "TensorFlow 2.21.0" in out


def test_diff_of_a_report_with_itself_is_clean(tmp_path, capsys):
    old = _write(tmp_path, "old.json", _report([_row("t1")]))
    assert cli.main(["diff", old, old]) == 0
    assert "No behaviour changed" in capsys.readouterr().out


def test_diff_and_report_reject_corrupt_input_with_exit_2(tmp_path, capsys):
    good = _write(tmp_path, "good.json", _report([_row("t1")]))
    bad = tmp_path / "bad.json"
    bad.write_text('{"schema_version": 1, "results": [')
    assert cli.main(["diff", str(bad), good]) == 2
    assert cli.main(["report", str(bad)]) == 2
    err = capsys.readouterr().err
    assert f"{bad}: not valid JSON" in err and "Traceback" not in err


def test_report_renders_a_partial_stream_marked_partial(tmp_path, capsys):
    import json

    p = tmp_path / "latest.jsonl"
    p.write_text(
        json.dumps({"kind": "header", "schema_version": 1, "created": "x", "environment": {}})
        + "\n"
        + json.dumps({"kind": "row", **_row("t1")})
        + "\n"
    )
    assert cli.main(["report", str(p), "--out", str(tmp_path / "out")]) == 0
    page = (tmp_path / "out" / "latest.html").read_text()
    assert "PARTIAL REPORT" in page and "t1[tensorflow-xla-cpu]" in page
    assert "http://" not in page.split("<body>")[0] and "<script src" not in page


def test_report_plots_benchmarks_with_the_machine_and_rejects_a_bad_benchmark_file(tmp_path, capsys):
    rep = _write(tmp_path, "r.json", _report([_row("t1")]))
    bench = _write(
        tmp_path,
        "b.json",
        {
            "machine_info": {
                "cpu": {"brand_raw": "AMD EPYC", "count": 2},
                "system": "Linux",
                "release": "6.1",
                "frameworks": {"jax": {"version": "0.10.2", "devices": ["cpu"]}},
                "bench_size": "full",
            },
            "benchmarks": [
                {
                    "group": "ste-fwd-bwd",
                    "name": "test_ste[jax-jit-cpu]",
                    "extra_info": {"path": "ste-fwd-bwd", "subject": "jax-jit-cpu", "gbps": 17.9, "ceiling_gbps": 33.0},
                }
            ],
        },
    )
    assert cli.main(["report", rep, "--bench", bench, "--out", str(tmp_path / "out")]) == 0
    page = (tmp_path / "out" / "r.html").read_text()
    assert "<h3>ste-fwd-bwd</h3><svg" in page and "17.90 GB/s" in page and "ceiling 33.0 GB/s" in page
    assert "AMD EPYC, 2 cores, Linux 6.1; jax 0.10.2 (cpu); size full" in page
    wrong = _write(tmp_path, "w.json", {"results": []})
    assert cli.main(["report", rep, "--bench", wrong]) == 2
    assert f"{wrong}: not a pytest-benchmark JSON" in capsys.readouterr().err


@pytest.mark.parametrize(
    "make, problem",
    [
        (lambda tmp: "/proc/forbidden", "cannot create it"),
        (
            lambda tmp: (tmp / "some-file.json").write_text("{}") and str(tmp / "some-file.json"),
            "is a file, not a directory",
        ),
        (lambda tmp: (tmp / "f").write_text("x") and str(tmp / "f" / "reports"), "a parent of it is a file"),
    ],
)
def test_a_report_dir_that_cannot_be_written_exits_2_with_one_line_before_any_test(tmp_path, make, problem):
    path = make(tmp_path)
    p = subprocess.run(
        [sys.executable, "-m", "suite", "run", "--report-dir", path, "-b", "partial-stop-gradient"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert p.returncode == 2, p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and path in lines[0] and problem in lines[0], p.stderr
    assert "INTERNALERROR" not in p.stdout + p.stderr and "autodiff-semantics: running" not in p.stderr


@pytest.mark.parametrize(
    "argv, says",
    [
        (["run", "--frameworks", "tensorflw"], "unknown framework 'tensorflw' (did you mean 'tensorflow'?)"),
        (["run", "--modes", "eager,jit"], "unknown mode 'jit'"),
        (["run", "--devices", "tpu"], "unknown device 'tpu'"),
        (["run", "--frameworks", ","], "unknown framework"),
        (["run", "--profile", "fast"], "unknown profile 'fast'"),
        (["bench", "--device", "tpu"], "invalid choice: 'tpu'"),
        (["bench", "--threshold", "lots"], "is not a percentage"),
        (["faults", "--jobs", "0"], "is not a positive whole number"),
        (["faults", "--fault", "no-such-fault"], "unknown fault(s) no-such-fault"),
        (["run", "--behaviour", "no-such-behaviour"], "unknown behaviour 'no-such-behaviour'"),
        (["upgrade", "2.x", "2.21", "--no-run"], "is not like 2.15"),
    ],
)
def test_every_bad_flag_value_exits_2_with_a_message(argv, says):
    p = subprocess.run([sys.executable, "-m", "suite", *argv], capture_output=True, text=True, timeout=120)
    assert p.returncode == 2, (argv, p.returncode, p.stderr)
    assert says in p.stderr and "Traceback" not in p.stderr


def test_bench_on_gpu_without_a_gpu_says_so_in_one_line_and_exits_2(capsys):
    from suite import frameworks

    if any("gpu" in (i.get("devices") or []) for i in frameworks.environment().values()):
        pytest.skip("a GPU is visible here: bench --device gpu would run")
    assert cli.main(["bench", "--device", "gpu"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no GPU is visible to any framework" in err[0]


def test_upgrade_no_run_finds_the_committed_baselines(capsys):
    assert cli.main(["upgrade", "--no-run", "2.15", "2.21"]) == 0
    out = capsys.readouterr().out
    assert "tf-2.15.1.json (TensorFlow 2.15.1)" in out and "tf-2.21.0.json (TensorFlow 2.21.0)" in out


def test_version_prints_the_installed_version(capsys):
    with pytest.raises(SystemExit) as e:
        cli.main(["--version"])
    assert e.value.code == 0 and capsys.readouterr().out.startswith("autodiff-semantics ")


def test_an_output_that_is_an_input_is_refused(tmp_path, capsys):
    a = _write(tmp_path, "a.json", _report([_row("t1")]))
    b = _write(tmp_path, "b.json", _report([_row("t1")]))
    from pathlib import Path

    before = Path(a).read_text()
    assert cli.main(["merge", a, b, "-o", a]) == 2
    assert cli.main(["diff", a, b, "--out", b]) == 2
    assert "is also an input" in capsys.readouterr().err
    assert Path(a).read_text() == before


def test_report_out_may_name_the_page(tmp_path, capsys):
    a = _write(tmp_path, "a.json", _report([_row("t1")]))
    assert cli.main(["report", str(a), "--out", str(tmp_path / "pages" / "one.html")]) == 0
    assert (tmp_path / "pages" / "one.html").is_file() and (tmp_path / "pages" / "one.md").is_file()


@pytest.mark.parametrize(
    "field, value, says",
    [
        ("observed", ["zero"], "results[0].observed is list"),
        ("duration_s", "fast", "results[0].duration_s is str"),
        ("behaviour", 3, "results[0].behaviour is int"),
    ],
)
def test_a_wrong_typed_field_exits_2_naming_it(tmp_path, capsys, field, value, says):
    row = _row("t1")
    row[field] = value
    bad = _write(tmp_path, "bad.json", _report([row]))
    good = _write(tmp_path, "good.json", _report([_row("t1")]))
    assert cli.main(["diff", str(good), str(bad)]) == 2
    assert cli.main(["report", str(bad), "--out", str(tmp_path / "p")]) == 2
    err = capsys.readouterr().err
    assert says in err and "Traceback" not in err


def test_a_reports_node_id_runs_from_any_directory(tmp_path, monkeypatch):
    """The reproducer's node id (cases/test_x.py::...) is anchored beside the cases when the
    working directory has no such file."""
    node = "cases/test_straight_through_estimator.py::test_seed_round_through_halfway_points[jax-jit-cpu]"
    p = subprocess.run(
        [sys.executable, "-m", "suite", "run", "--profile", "ci", "--report-dir", str(tmp_path / "r"), "--", node]
        + ["--collect-only", "-q"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    assert "cases/test_straight_through_estimator.py: 1" in p.stdout  # that one test, found


def test_rows_of_an_absent_gpu_are_not_a_character_each(tmp_path):
    import re

    p = subprocess.run(
        [sys.executable, "-m", "suite", "run", "-b", "straight-through-estimator", "--frameworks", "jax"]
        + ["--report-dir", str(tmp_path), "--profile", "dev"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    progress = [line for line in p.stdout.splitlines() if re.match(r"^[.sFE]+\s+\[", line)]
    assert progress and "s" not in "".join(progress), p.stdout[:2000]
    assert "skipped throughout: jax-eager-gpu, jax-jit-gpu (no GPU visible" in p.stdout


def test_a_reproducer_is_a_partial_selection_and_keeps_the_runs_report(tmp_path):
    """Issue 49: a printed reproducer selects one node id; its behaviour's other declarations are
    'unconfirmed' there, not 'stale' (which failed the rerun while its page was green), and its
    command names the run's other pytest arguments and a report directory of its own."""
    node = "cases/test_adam_epsilon.py::test_native_adam_matches_its_closed_form[tensorflow-eager-cpu]"
    p = subprocess.run(
        [sys.executable, "-m", "suite", "run", "--profile", "ci", "--report-dir", str(tmp_path / "r"), "--", node],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    report = json.loads((tmp_path / "r" / "latest.json").read_text())
    assert report["incomplete"] == ["adam-epsilon"]
    statuses = {d["status"] for d in report["declared"]}
    assert "stale" not in statuses and "unconfirmed" in statuses, statuses
    from suite.report.rows import rerun_command

    cfg = type("C", (), {"getoption": staticmethod(lambda k, default=None: {"profile": "ci"}.get(k))})
    cmd = rerun_command(cfg, node, {"AUTODIFF_SEMANTICS_RERUN_ARGS": "-p suite.faults.plugin --fault f"})
    assert cmd == (f"autodiff-semantics run --profile ci --report-dir reports/repro -- '{node}' "
                   "-p suite.faults.plugin --fault f")  # fmt: skip
