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

pytestmark = pytest.mark.slow

FIRST = ["straight-through-estimator", "partial-stop-gradient", "per-occurrence-gradients"]


def run_cli(args, tmp, env=None, pre=""):
    code = (f"import sys; {pre}from suite.cli import main; sys.exit(main({args!r}))")
    e = dict(os.environ)
    e.update(env or {})
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=e, timeout=1200)


def behaviours_args(ids):
    return [a for i in ids for a in ("--behaviour", i)]


@pytest.fixture(scope="module")
def main_run(tmp_path_factory):
    d = tmp_path_factory.mktemp("main")
    p = run_cli(["run", *behaviours_args(FIRST), "--profile", "ci", "--report-dir", str(d)], d)
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
    assert report["schema_version"] == 1
    assert report["environment"]["frameworks"]["tensorflow"]["version"]
    for b in FIRST:
        rows = [r for r in report["results"] if r["behaviour"] == b and r["device"] == "cpu"]
        got = {(r["framework"], r["mode"]) for r in rows if r["outcome"] == "passed" and r["observed"]}
        for want in [("tensorflow", m) for m in ("eager", "function", "xla", "graph")] + [
                ("jax", "eager"), ("jax", "jit"), ("torch", "eager")]:
            assert want in got, f"{b}: no passed row with observations for {want}"
        for r in rows:
            assert r["outcome"] == "passed", r
            assert r["examples"] > 0 and (r["max_rel_err"] or r["observed"]), r
    gpu = [r for r in report["results"] if r["device"] == "gpu"]
    assert gpu and all(r["outcome"] == "skipped" and r["reason"] for r in gpu) or any(
        r["outcome"] == "passed" for r in gpu)


def test_report_declares_and_asserts_the_round_gradient_divergence(main_run):
    _, report, _ = main_run
    rows = [r for r in report["results"] if "round_alone" in r["test"] and r["outcome"] == "passed"]
    seen = {r["framework"]: r["observed"]["round_grad"] for r in rows}
    assert seen["tensorflow"] == "none" and seen["jax"] == "zeros" and seen["torch"] == "zeros"
    assert any(d["key"] == "round_grad" and d["matched"] for d in report["declared"])


def test_report_shows_examples_per_second(main_run):
    p, report, d = main_run
    assert "examples per second" in p.stdout
    assert "| subject | examples | test s | examples/s |" in (d / "latest.md").read_text()


def test_broken_stop_gradient_fails_all_three_behaviours(tmp_path):
    p = run_cli(["run", *behaviours_args(FIRST), "--profile", "ci", "--report-dir", str(tmp_path),
                 "--frameworks", "tensorflow,jax", "--devices", "cpu"], tmp_path,
                env={"AUTODIFF_SEMANTICS_FAULTS": "stop-gradient-identity"})
    assert p.returncode == 1, p.stdout[-2000:]
    report = json.loads((tmp_path / "latest.json").read_text())
    failed = {r["behaviour"] for r in report["results"] if r["outcome"] == "failed"}
    assert failed == set(FIRST)
    bad = [r for r in report["results"] if r["outcome"] == "failed"]
    assert all(r["framework"] == "tensorflow" for r in bad), "only TensorFlow was patched"
    assert all(r.get("reproducer") for r in bad)


def test_missing_torch_gives_skipped_rows_with_reason(tmp_path):
    p = run_cli(["run", "--behaviour", "partial-stop-gradient", "--profile", "ci", "--report-dir", str(tmp_path),
                 "--devices", "cpu"], tmp_path, pre="sys.modules['torch'] = None; ")
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    report = json.loads((tmp_path / "latest.json").read_text())
    torch_rows = [r for r in report["results"] if r["framework"] == "torch"]
    assert torch_rows and all(r["outcome"] == "skipped" and "torch is not installed" in r["reason"] for r in torch_rows)
    assert report["environment"]["frameworks"]["torch"]["version"] is None
    assert any(r["framework"] == "tensorflow" and r["outcome"] == "passed" for r in report["results"])
