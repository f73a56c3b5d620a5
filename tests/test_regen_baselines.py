""".ci/regen-baselines hands its envs the right `run` arguments: one worker per env when it runs
several (two envs of two workers each thrashed this 24 GB VM on 2026-12-01), `run`'s default
for one env alone, and a user's own --jobs after the script's, where `run`'s parser keeps the
last. tox and the Python that builds the wheel are stand-ins that record their arguments, in a
throwaway repository, so nothing runs and the checkout's reports are untouched."""

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from suite import cli

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / ".ci" / "regen-baselines"

FAKE_TOX = """#!/usr/bin/env bash
printf '%s\\n' "$@" > "$RECORD"
exit 0
"""
# builds an empty "wheel" where pip would; every other call (page rendering) does nothing
FAKE_PY = """#!/usr/bin/env bash
if [ "$1 $2 $3" = "-m pip wheel" ]; then
  while [ $# -gt 0 ]; do [ "$1" = "-w" ] && { mkdir -p "$2"; touch "$2/x-0-py3-none-any.whl"; }; shift; done
fi
exit 0
"""


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    root = tmp_path_factory.mktemp("regen")
    (root / ".ci").mkdir()
    shutil.copy(SCRIPT, root / ".ci" / "regen-baselines")
    for d in ("suite", "cases", "reports/baselines", "reports/nightly", "bin"):
        (root / d).mkdir(parents=True)
    (root / "suite" / "__init__.py").write_text("")
    (root / "cases" / "test_adam_epsilon.py").write_text("")
    (root / "pyproject.toml").write_text("")
    (root / "reports" / "baselines" / "tf-2.21.0.json").write_text("{}")
    for name, text in (("tox", FAKE_TOX), ("python", FAKE_PY)):
        (root / "bin" / name).write_text(text)
        (root / "bin" / name).chmod(0o755)
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"]
    subprocess.run([*git, "init", "-q"], cwd=root, check=True)
    subprocess.run([*git, "add", "-A"], cwd=root, check=True)
    subprocess.run([*git, "commit", "-q", "-m", "x"], cwd=root, check=True)
    return root


def _run_args(repo, *args) -> list[str]:
    """The arguments the script gave `run` in every env (what tox passes on after its `--`)."""
    record = repo / "tox-args.txt"
    record.unlink(missing_ok=True)
    env = {
        **os.environ,
        "TOX": str(repo / "bin" / "tox"),
        "PYTHON": str(repo / "bin" / "python"),
        "RECORD": str(record),
        "REGEN_PROGRESS_EVERY": "3600",
    }
    proc = subprocess.run(
        ["bash", str(repo / ".ci" / "regen-baselines"), *args],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    tox = record.read_text().splitlines()
    return tox[tox.index("--") + 1 :]


def test_several_envs_get_one_worker_each(repo):
    assert _run_args(repo, "tf220,tf221") == ["--jobs", "1"]


def test_one_env_alone_keeps_runs_default(repo):
    assert _run_args(repo, "tf221", "--", "-b", "adam-epsilon") == ["-b", "adam-epsilon"]


def test_a_users_jobs_comes_last_and_wins(repo):
    args = _run_args(repo, "tf220,tf221", "--", "--jobs", "2")
    assert args == ["--jobs", "1", "--jobs", "2"]
    assert cli.build_parser().parse_args(["run", *args]).jobs == "2"


def test_an_incremental_run_of_several_envs_also_gets_one_worker(repo):
    args = _run_args(repo, "--behaviours", "adam-epsilon", "tf220,tf221")
    assert args[:4] == ["--jobs", "1", "--behaviour", "adam-epsilon"]
    assert args[4] == "--versioned-dir" and Path(args[5]).name == "versioned"
