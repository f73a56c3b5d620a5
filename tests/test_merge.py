"""``autodiff-semantics merge``: shard reports joined into the report one run would have
written, and refused when they cannot be one run. Synthetic reports, no framework runs
(tests/test_parallel.py merges real shard runs)."""

import json

import pytest

from suite.cli import main
from suite.report import merge, schema

DECL = {
    "key": "round_grad",
    "observed": "none",
    "framework": "tensorflow",
    "mode": None,
    "device": None,
    "versions": None,
    "reason": "TF registers no gradient for Round",
    "link": "https://github.com/tensorflow/tensorflow/issues/1",
    "module": "cases.test_demo",
    "id": "cases.test_demo:round_grad:0",
}


def env(tf="2.21.0", shard=None):
    e = {
        "python": "3.11.7",
        "platform": "Linux",
        "frameworks": {"tensorflow": {"version": tf, "devices": ["cpu"]}, "jax": {"version": "0.10.2"}},
        "hypothesis": {"profile": "ci"},
        "options": {"frameworks": ["tensorflow", "jax"]},
        "suite_revision": "abc",
    }
    if shard:
        e["shard"] = shard
    return e


def row(test, outcome="passed", framework="tensorflow", held=None):
    r = {
        "behaviour": "demo",
        "test": f"cases/test_demo.py::{test}",
        "framework": framework,
        "mode": "eager",
        "device": "cpu",
        "outcome": outcome,
        "observed": {"round_grad": "none"} if framework == "tensorflow" else {},
        "expected": {},
        "max_rel_err": {},
        "examples": 25,
        "duration_s": 0.1,
    }
    if held is not None:
        r["declared"] = {"round_grad": {"id": DECL["id"], "held": held}}
    return r


def shard_report(i, n, rows, others, tf="2.21.0"):
    """A shard's report: its rows, and the tests the other shards took (deselected here)."""
    return {
        "schema_version": schema.SCHEMA_VERSION,
        "created": f"2026-11-25T12:0{i}:00",
        "environment": env(tf, f"{i}/{n}"),
        "results": rows,
        "wall_s": 10.0 * i,
        "incomplete": ["demo"],  # each shard alone: its behaviour did not run whole
        "coverage": {
            "collected": [[r["test"], "demo"] for r in rows],
            "deselected": [[f"cases/test_demo.py::{t}", "demo"] for t in others],
        },
        "declared": [{**DECL, "matched": 0, "status": "unconfirmed"}],
    }


def test_two_shards_make_one_complete_run_and_a_split_declaration_is_matched():
    a = shard_report(1, 2, [row("t1", held=True)], ["t2"])
    b = shard_report(2, 2, [row("t2", framework="jax")], ["t1"])
    m = merge.merge([a, b], ["a.json", "b.json"])
    assert [r["test"].split("::")[1] for r in m["results"]] == ["t1", "t2"]
    assert "incomplete" not in m, "every test ran in some shard"
    assert [(d["status"], d["matched"]) for d in m["declared"]] == [("matched", 1)]
    assert m["wall_s"] == 20.0 and "shard" not in m["environment"]
    assert [s["shard"] for s in m["environment"]["merged_from"]] == ["1/2", "2/2"]


def test_a_missing_shard_leaves_its_behaviour_incomplete():
    a = shard_report(1, 3, [row("t1", held=True)], ["t2", "t3"])
    b = shard_report(2, 3, [row("t2")], ["t1", "t3"])
    m = merge.merge([a, b], ["a.json", "b.json"])
    assert m["incomplete"] == ["demo"]


def test_a_stale_declaration_is_found_only_in_the_merge():
    """Each shard alone cannot call a declaration stale; the whole run that matched it nowhere can."""
    a = shard_report(1, 2, [row("t1", held=False)], ["t2"])
    b = shard_report(2, 2, [row("t2", held=False)], ["t1"])
    m = merge.merge([a, b], ["a.json", "b.json"])
    assert [d["status"] for d in m["declared"]] == ["stale"]


@pytest.mark.parametrize(
    "change, message",
    [
        (
            lambda r: r["environment"]["frameworks"]["tensorflow"].update(version="2.15.1"),
            "tensorflow 2.21.0 .cpu. in one, 2.15.1",
        ),
        (lambda r: r["environment"].update(suite_revision="def"), "suite_revision"),
        (lambda r: r["environment"].update(faults=["stop-gradient-leaks"]), "faults"),
        (lambda r: r["environment"].update(shard="2/3"), "different splits"),
        (lambda r: r["environment"].update(shard="1/2"), "both shard 1/2"),
        (lambda r: r["results"].__setitem__(0, row("t1")), "has a row in both"),
    ],
)
def test_reports_that_are_not_one_run_are_refused(change, message):
    a = shard_report(1, 2, [row("t1")], ["t2"])
    b = shard_report(2, 2, [row("t2")], ["t1"])
    change(b)
    with pytest.raises(merge.MergeError, match=message):
        merge.merge([a, b], ["a.json", "b.json"])


def test_the_cli_writes_a_report_that_report_and_diff_accept(tmp_path, capsys):
    paths = []
    for i, (rows, others) in enumerate([([row("t1", held=True)], ["t2"]), ([row("t2")], ["t1"])], 1):
        p = tmp_path / f"shard{i}.json"
        p.write_text(json.dumps(shard_report(i, 2, rows, others)))
        paths.append(str(p))
    out = tmp_path / "merged.json"
    assert main(["merge", *paths, "-o", str(out)]) == 0
    assert "merged 2 reports: 2 rows" in capsys.readouterr().out
    assert len(schema.load(out)["results"]) == 2
    assert main(["diff", str(out), str(out)]) == 0
    assert main(["report", str(out), "--out", str(tmp_path / "page")]) == 0
    assert (tmp_path / "page" / "merged.html").exists() or list((tmp_path / "page").glob("*.html"))


def test_the_cli_exits_1_on_a_failed_row_and_2_on_bad_input(tmp_path, capsys):
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(json.dumps(shard_report(1, 2, [row("t1", outcome="failed")], ["t2"])))
    b.write_text(json.dumps(shard_report(2, 2, [row("t2")], ["t1"], tf="2.20.0")))
    assert main(["merge", str(a), str(a), "-o", str(tmp_path / "m.json")]) == 2  # the same shard twice
    assert "both shard 1/2" in capsys.readouterr().err
    assert main(["merge", str(a), str(b), "-o", str(tmp_path / "m.json")]) == 2
    assert "tensorflow 2.21.0 (cpu) in one, 2.20.0 (cpu) in the other" in capsys.readouterr().err
    b.write_text(json.dumps(shard_report(2, 2, [row("t2")], ["t1"])))
    assert main(["merge", str(a), str(b), "-o", str(tmp_path / "m.json")]) == 1
    assert "1 failed, errored or crashed row(s)" in capsys.readouterr().out
    (tmp_path / "c.json").write_text('{"schema_version": 1, "results": [')
    assert main(["merge", str(a), str(tmp_path / "c.json"), "-o", str(tmp_path / "m.json")]) == 2
    assert main(["merge", str(a), "-o", str(tmp_path / "m.json")]) == 2  # one report is no merge


def whole(rows, tf="2.21.0", revision="abc", jax="0.10.2", declared=(), deprecations=None):
    e = env(tf)
    e["suite_revision"], e["frameworks"]["jax"]["version"] = revision, jax
    r = {
        "schema_version": schema.SCHEMA_VERSION,
        "created": f"2026-11-2{len(revision)}T12:00:00",
        "environment": e,
        "results": rows,
        "declared": [dict(d) for d in declared],
    }
    if deprecations:
        r["deprecations"] = deprecations
    return r


def other_row(test):
    return {**row(test), "behaviour": "other", "test": f"cases/test_other.py::{test}", "observed": {"k": "a"}}


def test_update_replaces_one_behaviours_rows_and_declarations_and_records_which_revision_ran_it(tmp_path, capsys):
    """An incremental baseline: the demo behaviour re-run at a new revision (with a newer JAX) replaces
    the baseline's demo rows, declaration and deprecations; the other behaviour's rows stay, and
    ``behaviour_runs`` says which revision, date and frameworks ran each."""
    stale_decl = {**DECL, "id": "cases.test_demo:round_grad:old", "observed": "zero"}
    base = whole(
        [row("t1", held=False), other_row("u1")],
        declared=[stale_decl],
        deprecations={"demo": ["old warning"], "other": ["kept"]},
    )
    new = whole([row("t1", held=True), row("t3", held=True)], revision="def0", jax="0.11.0", declared=[DECL])
    m = merge.update(base, [new], ["base.json", "new.json"])
    assert sorted(r["test"] for r in m["results"]) == [
        "cases/test_demo.py::t1",
        "cases/test_demo.py::t3",
        "cases/test_other.py::u1",
    ]
    assert [r["behaviour"] for r in m["results"]] == ["demo", "demo", "other"], "the re-run keeps its place"
    assert [(d["id"], d["status"], d["matched"]) for d in m["declared"]] == [(DECL["id"], "matched", 2)]
    assert m["deprecations"] == {"other": ["kept"]}
    runs = m["environment"]["behaviour_runs"]
    assert runs["other"]["suite_revision"] == "abc" and runs["other"]["frameworks"]["jax"] == "0.10.2"
    assert runs["demo"]["suite_revision"] == "def0" and runs["demo"]["frameworks"]["jax"] == "0.11.0"
    # the CLI writes it over the baseline itself (a schema-1 one in today's schema, saying so), and
    # a later update keeps what the first recorded
    (tmp_path / "b.json").write_text(json.dumps({**base, "schema_version": 1}))
    (tmp_path / "n.json").write_text(json.dumps(new))
    b = str(tmp_path / "b.json")
    assert main(["merge", "--update", b, str(tmp_path / "n.json"), "-o", b]) == 0
    assert "with 1 behaviour(s) of 1 report(s) (demo)" in capsys.readouterr().out
    written = json.loads((tmp_path / "b.json").read_text())
    assert (written["schema_version"], written["migrated_from"]) == (schema.SCHEMA_VERSION, 1)
    again = merge.update(schema.load(tmp_path / "b.json"), [whole([other_row("u2")], revision="ghi")], ["b", "o"])
    assert again["environment"]["behaviour_runs"]["demo"]["suite_revision"] == "def0"
    assert again["environment"]["behaviour_runs"]["other"]["suite_revision"] == "ghi"


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda r: r["environment"]["frameworks"]["tensorflow"].update(version="2.20.0"), "TensorFlow 2.21.0"),
        (lambda r: r["environment"].update(hypothesis={"profile": "quick"}), "differ in hypothesis"),
        (lambda r: r.update(partial=True), "did not run its behaviours whole"),
    ],
)
def test_update_refuses_rows_of_another_release_profile_or_an_unfinished_run(tmp_path, capsys, change, message):
    base, new = whole([row("t1"), other_row("u1")]), whole([row("t1")], revision="def0")
    change(new)
    with pytest.raises(merge.MergeError, match=message):
        merge.update(base, [new], ["base.json", "new.json"])
    (tmp_path / "b.json").write_text(json.dumps(base))
    (tmp_path / "n.json").write_text(json.dumps(new))
    assert main(["merge", "--update", str(tmp_path / "b.json"), str(tmp_path / "n.json"), "-o", "x.json"]) == 2
    assert main(["merge", "--update", str(tmp_path / "b.json"), "-o", str(tmp_path / "x.json")]) == 2


def test_floors_follow_their_behaviours_through_merge_and_update():
    """The report's ``floors`` (each behaviour's error-model judgement): shards join theirs, and an
    incremental update takes a re-run behaviour's judgement as its module now states it."""
    old = {"kind": "array", "why": "the old reason"}
    base = {**whole([row("t1"), other_row("u1")]), "floors": {"demo": old, "other": {"kind": "none", "why": "kinds"}}}
    new = {**whole([row("t1")], revision="def0"), "floors": {"demo": {"kind": "element", "why": "per element"}}}
    m = merge.update(base, [new], ["base.json", "new.json"])
    assert m["floors"] == {"demo": {"kind": "element", "why": "per element"}, "other": {"kind": "none", "why": "kinds"}}
    a = {**shard_report(1, 2, [row("t1")], ["t2"]), "floors": {"demo": old}}
    b = {**shard_report(2, 2, [row("t2")], ["t1"]), "floors": {"demo": old}}
    assert merge.merge([a, b], ["a", "b"])["floors"] == {"demo": old}
