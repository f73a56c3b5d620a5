"""One version rule (dev < rc < final) for declarations' ranges, report file names, ``upgrade``
and the version matrix, whatever ``packaging`` is installed."""

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from suite import versions as vr

NIGHTLY, RC, FINAL = "2.23.0.dev20261026", "2.23.0rc1", "2.23.0"


def test_dev_before_rc_before_final_in_any_spelling():
    shuffled = [FINAL, "2.22.1", RC, "2.23.0-dev20261026", "2.23.0rc1.dev3", "2.23.0.post1", "2.23.0a2", "2.23.1"]
    assert sorted(shuffled, key=vr.key) == [
        "2.22.1",
        "2.23.0-dev20261026",  # TensorFlow's nightlies print their version with a hyphen
        "2.23.0a2",
        "2.23.0rc1.dev3",
        RC,
        FINAL,
        "2.23.0.post1",
        "2.23.1",
    ]
    assert vr.key("2.23.0-dev20261026") == vr.key(NIGHTLY)
    assert vr.key("2.13.0+cpu") == vr.key("2.13") == vr.key("2.13.0")


@pytest.mark.parametrize(
    "spec, nightly, rc, final, older",
    [
        (">=2.16", True, True, True, True),  # a declaration for 2.16 on holds for the next release
        (">=2.23", True, True, True, False),  # a release line includes its pre-releases
        ("<2.23", False, False, False, True),
        (">=2.18,<2.21", False, False, False, False),
        ("<=2.23", True, True, True, True),
        (">2.22", True, True, True, False),
        ("==2.23.*", True, True, True, False),
        ("!=2.23.*", False, False, False, True),
        ("==2.23.0", False, False, True, False),
        (">=2.23.0rc1", False, True, True, False),
    ],
)
def test_ranges_on_the_next_release(spec, nightly, rc, final, older):
    assert [vr.in_range(v, spec) for v in (NIGHTLY, RC, FINAL, "2.21.0")] == [nightly, rc, final, older]


def test_a_declaration_applies_to_a_nightly_by_the_rule_not_by_packaging(monkeypatch):
    """packaging 25.0 matched no range against 2.23.0.dev20261026 (five false failures); the
    declarations no longer ask it."""
    import sys

    from suite.expectations import expect

    monkeypatch.setitem(sys.modules, "packaging", None)  # an import of it would fail
    monkeypatch.setitem(sys.modules, "packaging.specifiers", None)
    decl = expect("k", "v", framework="tensorflow", versions=">=2.16", reason="r", link="https://example.org")
    runner = SimpleNamespace(framework="tensorflow", mode="eager", device="cpu", version="2.23.0-dev20261026")
    assert decl.matches(runner)
    assert not decl.matches(SimpleNamespace(**{**vars(runner), "version": "2.15.1"}))


@pytest.mark.parametrize("bad", ["2.x", ">>2.1", ">=2.16,", "~=2", ">=2.*"])
def test_a_range_it_cannot_read_fails_at_declaration(bad):
    from suite.expectations import expect

    with pytest.raises(vr.VersionError):
        expect("k", "v", versions=bad, reason="r", link="https://example.org")


def _report(path: Path, version: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        json.dumps(
            {
                "schema_version": 1,
                "environment": {"frameworks": {"tensorflow": {"version": version, "devices": ["cpu"]}}},
                "results": [],
            }
        )
    )
    return path


def test_report_files_sort_and_upgrade_picks_by_the_rule(tmp_path, monkeypatch):
    from suite.report import files

    monkeypatch.chdir(tmp_path)
    made = [
        _report(tmp_path / "reports" / f"tf-{v}.json", v)
        for v in ("2.23.0", "2.23.0rc1", "2.23.0-dev20261026", "2.21.0")
    ]
    assert [p.name for p in files.expand_reports([tmp_path / "reports"])] == [
        "tf-2.21.0.json",
        "tf-2.23.0-dev20261026.json",
        "tf-2.23.0rc1.json",
        "tf-2.23.0.json",
    ]
    # the final release over its release candidate and its nightly
    assert files.find_release_report("2.23", tmp_path / "nowhere") == made[0]
    made[0].unlink()
    assert files.find_release_report("2.23", tmp_path / "nowhere") == made[1]
    nightly = _report(tmp_path / "reports" / "nightly" / "tf-2.23.0-dev20261026.json", "2.23.0-dev20261026")
    _report(tmp_path / "reports" / "nightly" / "tf-2.23.0-dev20261001.json", "2.23.0-dev20261001")
    assert files.find_release_report("nightly", tmp_path / "nowhere") == nightly


def test_the_version_matrix_orders_releases_by_the_rule(tmp_path):
    from suite.cli import main

    for v in ("2.23.0", "2.23.0-dev20261026", "2.21.0", "2.23.0rc1"):
        _report(tmp_path / f"tf-{v}.json", v)
    assert main(["report", str(tmp_path), "--out", str(tmp_path / "page")]) == 0
    head = next(line for line in (tmp_path / "page" / "matrix.md").read_text().splitlines() if line.startswith("|"))
    assert head.index("TF 2.21.0") < head.index("TF 2.23.0-dev20261026") < head.index("TF 2.23.0rc1")
    assert head.index("TF 2.23.0rc1") < head.index("TF 2.23.0 ")
