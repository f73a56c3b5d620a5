"""Installable anywhere: the built wheel carries ``suite`` and ``cases``, and the installed
tool runs from an empty directory outside any checkout, writing ``./reports`` there.

This is the issue's acceptance check as a user does it: build the wheel, make a fresh
virtual environment, ``pip install <wheel>[all]`` (from pip's cache where it has the
frameworks), then ``autodiff-semantics list``, ``autodiff-semantics run -b
straight-through-estimator --profile ci`` and a plain ``pytest --pyargs cases``.
"""

import json
import os
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    base = tmp_path_factory.mktemp("wheel")
    dist = base / "dist"
    p = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(dist), str(ROOT)],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert p.returncode == 0, p.stderr[-3000:]
    wheel = next(dist.glob("autodiff_semantics-*.whl"))
    env = base / "venv"
    venv.create(env, with_pip=True)
    py = env / "bin" / "python"
    p = subprocess.run(
        [str(py), "-m", "pip", "install", "-q", f"{wheel}[all]"], capture_output=True, text=True, timeout=1800
    )
    assert p.returncode == 0, p.stderr[-3000:]
    empty = base / "empty"
    empty.mkdir()
    return wheel, env, empty


def _clean_env():
    e = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    e["PATH"] = os.pathsep.join(p for p in e.get("PATH", "").split(os.pathsep) if ".venv" not in p)
    return e


def test_the_wheel_carries_suite_and_cases(installed):
    wheel, _, _ = installed
    names = zipfile.ZipFile(wheel).namelist()
    assert {n.split("/")[0] for n in names} >= {"suite", "cases"}
    assert "cases/test_straight_through_estimator.py" in names and "suite/plugin.py" in names
    entry = next(n for n in names if n.endswith("entry_points.txt"))
    assert "suite.plugin = suite.plugin" in zipfile.ZipFile(wheel).read(entry).decode()


def test_list_and_run_work_from_an_empty_directory_and_write_reports_there(installed):
    _, env, empty = installed
    tool = env / "bin" / "autodiff-semantics"
    p = subprocess.run([str(tool), "list"], cwd=empty, capture_output=True, text=True, timeout=300, env=_clean_env())
    assert p.returncode == 0 and "straight-through-estimator" in p.stdout, p.stderr[-2000:]
    p = subprocess.run(
        [str(tool), "run", "-b", "straight-through-estimator", "--profile", "ci"],
        cwd=empty,
        capture_output=True,
        text=True,
        timeout=900,
        env=_clean_env(),
    )
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    report = json.loads((empty / "reports" / "latest.json").read_text())
    cpu = [r for r in report["results"] if r["device"] == "cpu"]
    assert cpu and all(r["outcome"] == "passed" for r in cpu)
    assert {r["framework"] for r in cpu} == {"tensorflow", "jax", "torch"}
    assert all(r["test"].startswith("cases/test_straight_through_estimator.py::") for r in report["results"])
    site = subprocess.run(
        [str(env / "bin" / "python"), "-c", "import suite, cases; print(suite.__file__, cases.__file__)"],
        capture_output=True,
        text=True,
        cwd=empty,
        env=_clean_env(),
    ).stdout
    assert str(ROOT) not in site and str(env) in site, site
    assert not (empty / ".benchmarks").exists()


def test_plain_pytest_pyargs_cases_works_from_any_directory(installed):
    _, env, empty = installed
    p = subprocess.run(
        [
            str(env / "bin" / "python"),
            "-m",
            "pytest",
            "--pyargs",
            "cases",
            "-k",
            "seed_round_through",
            "--frameworks",
            "tensorflow",
            "--modes",
            "eager,graph",
            "--devices",
            "cpu",
            "-q",
            "-p",
            "no:cacheprovider",
            "--report-dir",
            "pyargs-reports",
        ],
        cwd=empty,
        capture_output=True,
        text=True,
        timeout=600,
        env=_clean_env(),
    )
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    assert "2 passed" in p.stdout
    rows = json.loads((empty / "pyargs-reports" / "latest.json").read_text())["results"]
    assert [r["outcome"] for r in rows] == ["passed", "passed"]
