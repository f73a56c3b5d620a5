"""The GitHub Actions template (.ci/github-actions.yml) users copy: it parses, its release
jobs are tox.ini's envlist, its commands are valid CLI calls, and the last job renders the
reports the release jobs upload."""

import configparser
import fnmatch
import shlex
from pathlib import Path

import pytest
import yaml  # pyyaml, in the dev extra

ROOT = Path(__file__).resolve().parents[1]
TEMPLATE = ROOT / ".ci" / "github-actions.yml"


@pytest.fixture(scope="module")
def workflow():
    return yaml.safe_load(TEMPLATE.read_text(encoding="utf-8"))


def _runs(job):
    return [s["run"] for s in job["steps"] if "run" in s]


def _uses(job):
    return [s["uses"] for s in job["steps"] if "uses" in s]


def test_it_parses_with_the_three_jobs_and_a_trigger(workflow):
    # YAML 1.1 reads the key "on" as True
    assert workflow.get("on", workflow.get(True)), "no trigger"
    assert set(workflow["jobs"]) == {"release", "nightly", "gpu", "matrix"}
    for job in workflow["jobs"].values():
        assert job["runs-on"] and job["steps"]
        for action in _uses(job):  # pinned to a major version
            name, _, version = action.partition("@")
            assert name.startswith("actions/") and version.startswith("v"), action


def test_one_release_job_per_tox_release_env(workflow):
    tox = configparser.ConfigParser(interpolation=None)
    tox.read(ROOT / "tox.ini")
    envlist = [e.strip() for e in tox["tox"]["envlist"].split(",")]
    release = workflow["jobs"]["release"]
    assert release["strategy"]["matrix"]["env"] == envlist
    assert release["strategy"]["fail-fast"] is False  # one release failing must not hide the others
    assert "tox -e ${{ matrix.env }}" in _runs(release)


def test_its_commands_are_valid_cli_calls(workflow):
    from suite.cli import build_parser

    calls = [r for job in workflow["jobs"].values() for r in _runs(job) if r.startswith("autodiff-semantics ")]
    assert {shlex.split(c)[1] for c in calls} == {"run", "report", "upgrade"}
    for c in calls:
        build_parser().parse_args(shlex.split(c)[1:])  # exits (SystemExit) on a bad flag


def test_the_matrix_job_renders_what_the_release_jobs_upload(workflow):
    jobs = workflow["jobs"]
    upload = next(s for s in jobs["release"]["steps"] if s.get("uses", "").startswith("actions/upload-artifact"))
    download = next(s for s in jobs["matrix"]["steps"] if s.get("uses", "").startswith("actions/download-artifact"))
    assert fnmatch.fnmatch(upload["with"]["name"].replace("${{ matrix.env }}", "tf221"), download["with"]["pattern"])
    assert "reports/tf-*.json" in upload["with"]["path"]  # the versioned report tox writes
    assert jobs["matrix"]["needs"] == "release" and "!cancelled()" in jobs["matrix"]["if"]
    assert any(r.startswith("autodiff-semantics report releases") for r in _runs(jobs["matrix"]))


def test_the_nightly_job_runs_the_tox_nightly_env_and_diffs_it(workflow):
    tox = configparser.ConfigParser(interpolation=None)
    tox.read(ROOT / "tox.ini")
    assert "tf-nightly" in tox["testenv:nightly"]["deps"]
    assert "reports/nightly" in tox["testenv:nightly"]["commands"]
    job = workflow["jobs"]["nightly"]
    assert "tox -e nightly" in _runs(job)
    assert any(r.startswith("autodiff-semantics upgrade --no-run 2.21 nightly") for r in _runs(job))
    assert job["continue-on-error"] is True  # news about TensorFlow, not a broken build
    assert workflow.get("on", workflow.get(True)).get("schedule"), "a nightly job needs a schedule"


def test_the_suite_jobs_restore_and_save_the_compile_caches(workflow):
    """JAX's and TensorFlow's XLA caches live under one root (suite.frameworks.compile_cache_root):
    each tox job restores it before the run and saves it after, keyed per env."""
    from suite import frameworks

    root = frameworks.compile_cache_root({"XDG_CACHE_HOME": "~/.cache"})
    for name in ("release", "nightly"):
        steps = workflow["jobs"][name]["steps"]
        cache = [s for s in steps if s.get("uses", "").startswith("actions/cache@")]
        assert len(cache) == 1, f"{name}: no compile cache step"
        assert cache[0]["with"]["path"] == str(root)
        tox = next(i for i, s in enumerate(steps) if s.get("run", "").startswith("tox -e"))
        assert steps.index(cache[0]) < tox, f"{name}: the cache is restored after the run"
