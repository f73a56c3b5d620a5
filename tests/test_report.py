"""Self-tests of the report schema: loading JSON and streamed JSONL, partial runs, bad input."""

import json

import pytest

from suite.report import model, pages, query, schema


def _row(**kw):
    row = {
        "behaviour": "b",
        "test": "cases/test_b.py::test_x[tensorflow-eager-cpu]",
        "framework": "tensorflow",
        "mode": "eager",
        "device": "cpu",
        "outcome": "passed",
        "observed": {"k": "v"},
        "expected": {"k": "v"},
        "max_rel_err": {"jax": 0.0},
        "duration_s": 0.5,
        "examples": 10,
    }
    row.update(kw)
    return row


HEADER = {"kind": "header", "schema_version": 1, "created": "2026-11-22T00:00:00Z", "environment": {"python": "3.11"}}


def test_jsonl_without_footer_loads_as_partial(tmp_path):
    p = tmp_path / "latest.jsonl"
    p.write_text("\n".join(json.dumps(x) for x in [HEADER, {"kind": "row", **_row()}]) + "\n")
    r = schema.load(p)
    assert r["partial"] is True and len(r["results"]) == 1


def test_jsonl_with_a_torn_last_line_keeps_the_rows_before_it(tmp_path):
    p = tmp_path / "latest.jsonl"
    p.write_text(json.dumps(HEADER) + "\n" + json.dumps({"kind": "row", **_row()}) + "\n" + '{"kind": "ro')
    r = schema.load(p)
    assert r["partial"] and len(r["results"]) == 1


def test_progress_of_a_stream_running_finished_interrupted_and_bad(tmp_path, capsys):
    """``progress``: a running stream's rows of the tests it collected, failures and the time
    left; an ended one says how it ended; a folder means its latest.jsonl; no stream is exit 2."""
    import calendar
    import time

    from suite import cli
    from suite.report.writer import stream_progress

    p = tmp_path / "latest.jsonl"
    tests = [[f"cases/test_b.py::test_{i}[tensorflow-eager-cpu]", "b"] for i in range(4)]
    lines = [HEADER, {"kind": "collected", "tests": tests}, {"kind": "row", **_row(test=tests[0][0], outcome="failed")}]
    p.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    started = calendar.timegm(time.strptime(HEADER["created"], "%Y-%m-%dT%H:%M:%SZ"))
    line = stream_progress(p, now=started + 600)
    assert "1/4 rows (25%), 1 failed so far, about 30 min left" in line, line
    assert cli.main(["progress", str(tmp_path)]) == 0 and "1/4 rows (25%)" in capsys.readouterr().out
    with p.open("a") as fh:
        fh.write(json.dumps({"kind": "footer", "exitstatus": 2, "interrupted": True}) + "\n")
    assert stream_progress(p).endswith(": interrupted, 1/4 rows, 1 failed")
    assert cli.main(["progress", str(tmp_path / "none.jsonl"), str(p)]) == 2  # each stream said, then exit 2
    out = capsys.readouterr()
    assert "none.jsonl: no such file" in out.err and "interrupted, 1/4 rows" in out.out


def test_jsonl_with_footer_is_complete(tmp_path):
    p = tmp_path / "latest.jsonl"
    lines = [HEADER, {"kind": "row", **_row()}, {"kind": "footer", "exitstatus": 0, "interrupted": False}]
    p.write_text("\n".join(json.dumps(x) for x in lines))
    assert "partial" not in schema.load(p)


@pytest.mark.parametrize(
    "text, problem",
    [
        ('{"schema_version": 1, "environment": {}, "results": [', "not valid JSON"),
        ('{"schema_version": 7, "environment": {}, "results": []}', "schema_version 7"),
        ("[1, 2]", "not a report"),
        ('{"schema_version": 1, "environment": {}, "results": [{"behaviour": "b"}]}', "lacks"),
        ("", "empty file"),
    ],
)
def test_bad_reports_name_the_file_and_the_problem(tmp_path, text, problem):
    p = tmp_path / "r.json"
    p.write_text(text)
    with pytest.raises(schema.ReportError) as e:
        schema.load(p)
    assert str(p) in str(e.value) and problem in str(e.value)


def test_missing_file_is_a_report_error(tmp_path):
    with pytest.raises(schema.ReportError, match="no such file"):
        schema.load(tmp_path / "nope.json")


def test_written_report_loads_back_and_is_world_readable(tmp_path):
    report = {"schema_version": schema.SCHEMA_VERSION, "environment": {}, "results": [_row()]}
    path = tmp_path / "r.json"
    schema.write_json(report, path)
    assert schema.load(path)["results"][0]["observed"] == {"k": "v"}
    assert path.stat().st_mode & 0o777 == 0o644
    assert [p.name for p in tmp_path.iterdir()] == ["r.json"]  # no temporary file left behind


def test_markdown_shows_matrix_partial_marker_and_failures():
    report = {
        "schema_version": 1,
        "created": "x",
        "environment": {},
        "partial": True,
        "results": [
            _row(),
            _row(outcome="failed", framework="jax", mode="jit", error="boom", reproducer="import numpy as np"),
        ],
    }
    md = pages.markdown(report)
    assert "PARTIAL REPORT" in md
    assert "| b | ok 1/1 | FAIL 1/1 |" in md
    assert "boom" in md and "import numpy as np" in md


def test_terminal_matrix_has_a_row_per_behaviour():
    report = {"results": [_row(), _row(behaviour="c", outcome="skipped")]}
    lines = pages.terminal_matrix(report)
    assert lines[1].startswith("b ") and lines[2].startswith("c ")


def test_several_observed_values_are_a_set_and_racy_ones_stay_out_of_observed():
    from suite.report.record import Record

    class Subject:
        id = "tensorflow-eager-cpu"

    a, b = Record(Subject()), Record(Subject())
    for rec, order in ((a, ("x", "y")), (b, ("y", "x"))):
        for v in order:
            rec.observe(k=v)
            rec.observe_racy(race=v)
    fa, fb = a.row_fields(), b.row_fields()
    assert fa["observed"] == fb["observed"] == {"k": ["x", "y"]}
    assert fa["notes"] == fb["notes"] == ["racy (recorded, not compared): race = x, y"]


def test_diff_ignores_the_order_of_several_observed_values():
    from suite.report import diff

    old = {"schema_version": 1, "environment": {}, "results": [_row(observed={"k": ["x", "y"]})]}
    new = {"schema_version": 1, "environment": {}, "results": [_row(observed={"k": ["y", "x"]})]}
    assert not [c for c in diff.diff(old, new).changes if c.kind == "observation changed"]
    new["results"][0]["observed"] = {"k": ["x", "z"]}
    assert [c.kind for c in diff.diff(old, new).changes] == ["observation changed"]


def test_diff_lists_keys_only_one_side_observed_unless_a_row_stopped_early():
    from suite.report import diff

    old = {"schema_version": 1, "environment": {}, "results": [_row(observed={"policy": "unavailable"})]}
    new = {"schema_version": 1, "environment": {}, "results": [_row(observed={"f(IGNORE)": "zero-fill"})]}
    got = {(c.detail, c.old, c.new) for c in diff.diff(old, new).changes if c.kind == "observation changed"}
    assert got == {("policy", "unavailable", diff.NOT_OBSERVED), ("f(IGNORE)", diff.NOT_OBSERVED, "zero-fill")}
    summary = "".join(diff.consecutive_changes_md([old, new]))
    assert "b newly observed (eager): `f(IGNORE)`=`zero-fill`" in summary
    assert "b no longer observed (eager): `policy`=`unavailable`" in summary
    new["results"][0]["outcome"] = "failed"  # a failed row stops recording midway: missing keys say nothing
    assert [c.kind for c in diff.diff(old, new).changes] == ["newly failing"]


def _release(version, rows, deprecations=None):
    rep = {
        "schema_version": 1,
        "created": "2026-11-22T00:00:00Z",
        "environment": {"frameworks": {"tensorflow": {"version": version, "devices": ["cpu"]}}},
        "results": rows,
    }
    if deprecations:
        rep["deprecations"] = deprecations
    return rep


def _releases():
    def rows(policy, mode_value):
        return [
            _row(
                behaviour="gather",
                test=f"cases/test_gather.py::test_p[tensorflow-{m}-cpu]",
                mode=m,
                observed={"policy": policy, "fwd": mode_value if m == "xla" else "raises"},
            )
            for m in ("eager", "xla")
        ]

    return [
        _release("2.19.1", rows("a", "clamp")),
        _release("2.20.0", rows("a", "clamp")),
        _release("2.21.0", rows("a", "zero-fill"), {"gather": ["foo is deprecated"]}),
    ]


def test_version_matrix_marks_changed_cells_with_old_and_new_values_and_the_changelog():
    from suite.report import html

    reps = _releases()
    md = pages.versions_markdown(reps, ["r/a.md", "r/b.md", "r/c.md"])
    assert "| gather | ok 2/2 | ok 2/2 | ok 2/2 **Δ1** |" in md
    assert "| test_p: `fwd` | xla | `clamp` | · | **`clamp` → `zero-fill`** |" in md
    assert "`policy`" not in md.split("## Observations that differ")[1].split("## Changelog")[0], "unchanged key shown"
    assert "## Changelog between consecutive releases" in md and "**TF 2.19.1 -> 2.20.0**: no TensorFlow" in md
    assert "gather `fwd`: `clamp` -> `zero-fill` (xla)" in md and "new deprecations: gather `foo is deprecated`" in md
    assert "[TF 2.21.0](r/c.md)" in md and "eager" not in md.split("## Outcomes")[0], "detail is linked, not inline"
    page = html.page(reps, ["a", "b", "c"], details=["r/a.html", "r/b.html", "r/c.html"])
    assert "class='passed moved'" in page and "<b>Δ1</b>" in page
    assert "<td class='changed' title='clamp -> zero-fill'><code>clamp</code> → <code>zero-fill</code></td>" in page
    assert "<ul class='changelog'>" in page and "<a href='r/c.html'>TF 2.21.0</a>" in page


def test_keys_of_a_test_an_older_suite_did_not_have_are_not_changes_of_tensorflow():
    """A release whose report has no row of a test (an older suite revision) neither counts that
    test's keys as changed in the next release (Δ) nor hides a real change across it; the
    outcome table names each report's suite revision."""
    from suite.report import html

    reps = _releases()
    for rep, rev in zip(reps, ("437e0d3" + "0" * 33, "43532dd" + "0" * 33, "43532dd" + "0" * 33)):
        rep["environment"]["suite_revision"] = rev
    # test_n: only the newer suite has it; its key changes between the last two releases
    for rep, value in ((reps[1], "nan"), (reps[2], "zero")):
        rep["results"].append(_row(behaviour="gather", test="cases/test_gather.py::test_n[tensorflow-eager-cpu]",
                                   observed={"new": value}))  # fmt: skip
    table = "\n".join(pages.versions_table_md(reps))
    assert "| gather | ok 2/2 | ok 3/3 | ok 3/3 **Δ2** |" in table, table  # fwd and new at 2.21, nothing at 2.20
    assert "| *suite revision* | `437e0d3` | `43532dd` | `43532dd` |" in table
    md = pages.versions_markdown(reps)
    assert "| test_n: `new` | eager | - | `nan` | **`nan` → `zero`** |" in md, md
    assert query.moved_keys(reps)[("gather", "2.21.0")] == {"fwd", "new"}
    page = html.page(reps, ["a", "b", "c"])
    assert "<td class='not-run'" in page and "<tr class='revisions'>" in page and "<code>437e0d3</code>" in page
    # the test's rows gone from the middle release (a subset run): a change across the gap still counts
    reps[1]["results"] = [r for r in reps[1]["results"] if "test_n" not in r["test"]]
    reps[0]["results"].append(_row(behaviour="gather", test="cases/test_gather.py::test_n[tensorflow-eager-cpu]",
                                   observed={"new": "nan"}))  # fmt: skip
    assert "new" in query.moved_keys(reps)[("gather", "2.21.0")] and ("gather", "2.20.0") not in query.moved_keys(reps)


def test_reports_of_one_version_stay_apart_and_oracle_changes_are_counted_apart():
    """Issue 49: a team's own subset run against the baseline of the same TensorFlow is two
    columns (labelled by file), a behaviour one of them did not run reads "not run" (not the
    other's outcome), and a change of an oracle's answer recorded in TensorFlow's rows is not
    counted as TensorFlow's own, with the oracles' versions under each column."""
    from suite.report import html

    base = _release("2.21.0", [
        _row(behaviour="gather", test="cases/test_gather.py::test_p[tensorflow-eager-cpu]",
             observed={"fwd": "raises", "jax-jit-cpu:x.at": "clamp"}),
        _row(behaviour="scatter", test="cases/test_scatter.py::test_s[tensorflow-eager-cpu]", outcome="failed"),
    ])  # fmt: skip
    mine = _release("2.21.0", [
        _row(behaviour="gather", test="cases/test_gather.py::test_p[tensorflow-eager-cpu]",
             observed={"fwd": "raises", "jax-jit-cpu:x.at": "fill"}),
    ])  # fmt: skip
    base["environment"]["frameworks"]["jax"] = {"version": "0.4.30"}
    mine["environment"]["frameworks"]["jax"] = {"version": "0.10.2"}
    md = pages.versions_markdown([base, mine], ["r/tf-2.21.0.md", "r/latest.md"])
    assert "TF 2.21.0 (tf-2.21.0) | TF 2.21.0 (latest) |" in md, md
    assert "| gather | ok 1/1 | ok 1/1 *oracle Δ1* |" in md, md
    assert "| scatter | FAIL 1/1 | not run |" in md, md
    assert "| *oracles* | jax 0.4.30, torch - | jax 0.10.2, torch - |" in md, md
    page = html.page([base, mine], ["r/tf-2.21.0.json", "r/latest.json"])
    assert "<td class='not-run' title='this report did not run the behaviour'>not run</td>" in page
    assert "<i>oracle Δ1</i>" in page and "<b>Δ" not in page


def test_report_of_two_releases_is_the_upgrade_view_with_changes_first(tmp_path, capsys):
    from suite import cli

    a, b = tmp_path / "tf-2.20.0.json", tmp_path / "tf-2.21.0.json"
    reps = _releases()
    reps[2]["results"][0]["outcome"] = "skipped"
    reps[2]["results"][0]["reason"] = "tensorflow is not installed"
    a.write_text(json.dumps(reps[1]))
    b.write_text(json.dumps(reps[2]))
    assert cli.main(["report", str(a), str(b), "--out", str(tmp_path / "out")]) == 0
    md = (tmp_path / "out" / "upgrade.md").read_text()
    order = [
        md.index(h)
        for h in (
            "# Upgrade check:",
            "## What changed, per behaviour",
            "## Newly skipped (1)",
            "## New deprecation warnings (1)",
            "# autodiff-semantics version matrix",
        )
    ]
    assert order == sorted(order), md
    assert "**1 regression(s)**" in md, "a TensorFlow row that became skipped is a regression"
    # each changed observation once, with where it changed (not one row per test and subject)
    # classified (issue 49): the fixture's keys are held to no expectation, so informational
    assert "- **informational** `fwd`: `clamp` → `zero-fill`, in TensorFlow xla (cpu)" in md
    assert "**0 a user may need to act on**" in md
    page = (tmp_path / "out" / "upgrade.html").read_text()
    assert '<tr class="change"><td class="kind">informational</td><td class="key">fwd</td>' in page
    assert "<h1>Upgrade check</h1>" in page and "<pre>" not in page.split("id='matrix'")[0]
    assert (tmp_path / "out" / "upgrade-releases" / "tf-2.21.0.html").exists()


def test_single_report_puts_failures_first_and_folds_columns_of_an_absent_device():
    rows = [
        _row(outcome="failed", error="boom", observed={"k": "w"}),
        _row(
            test="cases/test_b.py::test_x[tensorflow-eager-gpu]",
            device="gpu",
            outcome="skipped",
            reason="no GPU visible to tensorflow 2.21.0",
        ),
        _row(test="cases/test_b.py::test_y[tensorflow-eager-cpu]", observed={"k": "v", "j": ["a", "b"]}),
    ]
    md = pages.markdown({"schema_version": 1, "created": "x", "environment": {}, "results": rows})
    assert md.index("## Failures (1)") < md.index("## Matrix") < md.index("## Observations")
    assert "Observed in the failing example: `k = w`" in md
    assert "tensorflow-eager-gpu |" not in md and "- no GPU visible: 1 rows skipped (tensorflow-eager-gpu)" in md
    assert "- `j` = `a \\| b`: tensorflow eager" in md and "{'" not in md


def _record():
    from types import SimpleNamespace

    from suite.report.record import Record

    return Record(
        SimpleNamespace(id="tensorflow-eager-cpu", framework="tensorflow", mode="eager", device="cpu", version="2.21.0")
    )


def test_a_failed_row_records_every_example_up_to_the_failing_one_and_that_one_whole():
    """Record everything, then assert: the failing example's mismatches all fail it at its end,
    every key it observes after the first mismatch is recorded, and the row keeps what the
    examples before it saw, but nothing of the examples Hypothesis ran while shrinking."""
    from suite.expectations import expectations

    want = expectations({"a": "x", "b": "y", "c": "z"})
    rec = _record()
    rec.defer = True
    rec.example(v=1)
    rec.check(want, a="x", b="y")  # a passing draw
    rec.end_example()
    rec.example(v=2)
    rec.check(want, a="X")
    rec.check(want, b="Y")  # a second changed key, after the first mismatch
    rec.check(want, c="z")
    with pytest.raises(AssertionError, match=r"2 mismatches in one example:\na\[.*'X'.*\nb\[.*'Y'"):
        rec.end_example()
    rec.example(v=3)  # shrinking: another failing draw, not the reported one
    rec.check(want, a="Q")
    with pytest.raises(AssertionError):
        rec.end_example()
    rec.example(v=2)  # Hypothesis replays the reported example last
    rec.check(want, a="X", b="Y", c="z")
    with pytest.raises(AssertionError):
        rec.end_example()
    fields = rec.row_fields(failed=True, error_text="E   a[tensorflow-eager-cpu]='X' but expected 'x'")
    assert fields["observed"] == {"a": ["X", "x"], "b": ["Y", "y"], "c": "z"}
    assert rec.reported_failure("a[tensorflow-eager-cpu]='Q' but expected 'x'")["inputs"] == {"v": 3}
    assert rec.row_fields()["observed"]["a"] == ["Q", "X", "x"]  # a passed row would keep every draw's


def test_a_record_outside_the_plugin_fails_at_the_first_mismatch():
    from suite.expectations import expectations

    rec = _record()
    rec.example(v=1)
    with pytest.raises(AssertionError, match=r"a\[tensorflow-eager-cpu\]='X' but expected 'x'"):
        rec.check(expectations({"a": "x"}), a="X")


def test_a_crash_after_a_mismatch_fails_as_the_mismatch():
    """A later error of the example (code that needed the value that mismatched) does not hide
    the mismatch: the row fails as an assertion, naming both."""
    from suite.expectations import expectations

    rec = _record()
    rec.defer = True
    rec.example(v=1)
    rec.check(expectations({"a": "x"}), a="X")
    with pytest.raises(AssertionError, match="then the example raised TypeError: boom") as e:
        rec.end_example(TypeError("boom"))
    assert isinstance(e.value.__cause__, TypeError)
    rec.example(v=2)
    rec.end_example(KeyboardInterrupt())  # not a failure of the example: let through, not recorded
    assert len(rec.failures) == 1


def test_observations_are_asserted_or_informational_in_the_report_and_the_diff():
    from suite.report import diff

    def rep(v):
        return {
            "schema_version": 1,
            "environment": {},
            "results": [_row(observed={"grad": v, "init": v}, expected={"grad": "zero"})],
        }

    log = diff.diff(rep("zero"), rep("none"))
    kinds = {c.detail: c.asserted for c in log.changes if c.kind == "observation changed"}
    assert kinds == {"grad": True, "init": False}
    md = diff.markdown(log)
    assert "| `grad` | value changed |" in md and "| `init` | informational |" in md
    assert md.index("| `grad` |") < md.index("| `init` |"), "what a user may act on comes first"
    assert "**1 change(s) a user may need to act on**" in md
    page = pages.markdown(rep("zero"))
    assert "`init` = `zero`: tensorflow eager (informational: recorded, not asserted)" in page
    assert "`grad` = `zero`: tensorflow eager\n" in page


def test_diff_names_environment_differences_and_a_partial_report_first():
    from suite.report import diff

    old = _release("2.21.0", [_row(observed={"k": "a"})])
    new = _release("2.23.0-dev20261026", [_row(observed={"k": "b"})])
    old["environment"]["packages"] = {"keras": "3.15.1", "numpy": "2.4.6"}
    new["environment"]["packages"] = {"keras-nightly": "3.16.0.dev2026102704", "numpy": "2.4.6"}
    new["partial"] = True
    md = diff.markdown(diff.diff(old, new, "old.json", "new.jsonl"))
    head = md[: md.index("### Observations that changed")]
    assert "**Caveat**: new.jsonl is a partial (interrupted or unfinished) run" in head
    assert "| tensorflow | `2.21.0 (cpu)` | `2.23.0-dev20261026 (cpu)` |" in head
    assert "| keras | `3.15.1` | `not installed` |" in head and "| keras-nightly | `not installed` |" in head
    assert "numpy" not in head  # the same in both


def test_a_value_with_the_summary_separator_stays_one_value():
    from suite.report import diff

    old = _release("2.21.0", [_row(observed={"seed": "zero; zero"})])
    new = _release("2.23.0", [_row(observed={"seed": "0.693; zero"})])
    md = diff.markdown(diff.diff(old, new))
    assert "| `seed` | informational | `zero; zero` | `0.693; zero` | tensorflow eager |" in md


def test_diff_of_a_subset_compares_only_what_both_ran_unless_whole():
    from suite.report import diff

    full_rows = [
        _row(behaviour=b, test=f"cases/test_{b}.py::test_x[tensorflow-eager-{d}]", device=d, observed={"k": "v"})
        for b in ("a", "b")
        for d in ("cpu", "gpu")
    ]
    old = _release("2.21.0", full_rows)
    old["environment"]["options"] = {"frameworks": ["tensorflow"], "modes": ["eager"], "devices": ["cpu", "gpu"]}
    new = _release("2.21.0", [dict(full_rows[0])])  # behaviour a on cpu only
    new["environment"]["options"] = {"frameworks": ["tensorflow"], "modes": ["eager"], "devices": ["cpu"]}
    log = diff.diff(old, new, "old.json", "new.json")
    assert log.regressions == [] and len(log.by_kind("not run")) == 3
    md = diff.markdown(log).splitlines()
    assert "(partial or subset" in md[0]
    assert md[2].startswith("**Caveat**: new.json is 1 behaviour(s) fewer (b); devices cpu only")
    whole = diff.diff(old, new, "old.json", "new.json", whole=True)
    assert len(whole.by_kind("disappeared")) == 3 and len(whole.regressions) == 3
    new["partial"] = True
    new["environment"]["options"]["devices"] = ["cpu", "gpu"]
    assert diff.diff(old, new).regressions == []  # an interrupted run's missing rows are no verdict
    # a run narrowed by -k (its behaviour "incomplete"): the rows it left out are not run, not gone
    new["partial"], new["incomplete"] = False, ["a"]
    narrowed = diff.diff(old, new, "old.json", "new.json")
    assert narrowed.regressions == [] and len(narrowed.by_kind("not run")) == 3
    assert "1 behaviour(s) run in part (a)" in diff.markdown(narrowed)


def test_a_row_that_moved_to_another_behaviour_is_compared_at_its_new_place():
    from suite.report import diff

    def rows(module, behaviour, value):
        return [
            _row(
                behaviour=behaviour,
                test=f"cases/test_{module}.py::test_x[tensorflow-{m}-cpu]",
                mode=m,
                observed={"k": value},
            )
            for m in ("eager", "xla")
        ] + [_row(behaviour="c", test="cases/test_c.py::test_y[tensorflow-eager-cpu]")]

    old = _release("2.21.0", rows("a", "a", "v"))
    log = diff.diff(old, _release("2.21.0", rows("b", "b", "v")))
    assert log.regressions == [] and len(log.by_kind("moved")) == 2
    assert {(c.old, c.new) for c in log.by_kind("moved")} == {("a", "b")}
    assert log.by_kind("new") == log.by_kind("not run") == [] and len(log.changes) == 2
    md = diff.markdown(log)
    assert "### Moved to another behaviour (2 rows, compared at their new place)" in md
    assert "- a -> **b**: `test_x` (2)" in md
    # an observation that changed as the row moved is a change, named at its new place
    changed = diff.diff(old, _release("2.21.0", rows("b", "b", "w")))
    obs = changed.by_kind("observation changed")
    assert [(c.behaviour, c.test, c.old, c.new) for c in obs][0] == (
        "b",
        "cases/test_b.py::test_x[tensorflow-eager-cpu]",
        "v",
        "w",
    )
    # a name that two modules hold on one side is not guessed at: gone and new, as before
    twice = _release("2.21.0", rows("b", "b", "v") + rows("d", "d", "v")[:2])
    assert diff.diff(old, twice).by_kind("moved") == []
    assert len(diff.diff(old, twice, whole=True).by_kind("disappeared")) == 2


def test_an_oracle_that_raises_gives_no_reference_and_a_note_while_the_others_compare():
    """Measured on a GPU machine with torch 2.11: autograd.Function.apply refused keywords, so the
    torch oracle raised inside every JAX row; its own row records that error, the JAX rows
    compare with the oracles that ran. A harness check (an AssertionError) still fails the row."""
    from types import SimpleNamespace

    import numpy as np
    import pytest

    def oracle(id_, vjp):
        fw = id_.split("-")[0]
        return SimpleNamespace(id=id_, framework=fw, vjp=vjp)

    def broken(fn, *a, **k):
        raise TypeError("apply() takes no keyword arguments")

    def fine(fn, *a, **k):
        return np.float32(2.0), (np.float32(3.0),)

    rec = _record()
    program = {"torch": None, "jax": None}
    rec.against([oracle("torch-eager-gpu", broken), oracle("jax-jit-gpu", fine)], program, np.float32(1.0),
                got={"value": np.float32(2.0), "dx": np.float32(3.0)})  # fmt: skip
    assert rec.compared == 2
    assert rec.notes == ["oracle torch-eager-gpu raised TypeError: apply() takes no keyword arguments; not compared"]

    def fallback(fn, *a, **k):
        raise AssertionError("an output was computed on /device:CPU:0, not the GPU")

    with pytest.raises(AssertionError, match="not the GPU"):
        rec.against([oracle("jax-jit-gpu", fallback)], program, np.float32(1.0), got={"value": np.float32(2.0)})


def test_latest_pages_and_the_terminal_summary_render_one_model():
    """latest.md, latest.html and the terminal matrix show the cells the report model computed
    (once); values are escaped per format: a pipe in Markdown, markup in HTML."""
    from suite.report import html

    rows = [
        _row(observed={"k": "a|<b>"}),
        _row(test="cases/test_b.py::test_y[tensorflow-eager-cpu]", outcome="failed", error="boom <x>"),
        _row(framework="jax", mode="jit", test="cases/test_b.py::test_x[jax-jit-cpu]"),
    ]
    report = {"schema_version": 1, "created": "x", "environment": {}, "results": rows}
    m = model.run_model(report)
    texts = [c["text"] for c in m["matrix"]["rows"][0]["cells"]]
    assert texts == ["FAIL 1/2", "ok 1/1"]
    md, page = pages.markdown(report), html.page([report], ["lab"])
    assert "| b | FAIL 1/2 | ok 1/1 |" in md
    assert all(f">{t}</a></td>" in page for t in texts)
    assert pages.terminal_matrix(report)[1].split()[1:] == ["FAIL", "1/2", "ok", "1/1"]
    assert "`a\\|<b>`" in md and "a|&lt;b&gt;" in page and "<b>a" not in page
    assert "boom &lt;x&gt;" in page and "## Failures (1)" in md


def test_the_suite_revision_is_what_runs_or_nothing(tmp_path, monkeypatch):
    """A report names the revision that ran: the variable when set; a tracked checkout's HEAD
    (``+dirty`` when suite/ or cases/ differ); nothing for a copy git does not track, such as
    tox's installed wheel under the checkout's ``.tox/`` (which used to report the checkout's
    later HEAD)."""
    import shutil

    from suite.report import writer

    monkeypatch.setenv(writer.REVISION_VARIABLE, "f1c30d0")
    assert writer._git_sha() == "f1c30d0"
    monkeypatch.delenv(writer.REVISION_VARIABLE)
    sha = writer._git_sha()
    assert sha is None or len(sha.split("+")[0]) == 40  # None outside a git checkout (an installed wheel)
    copy = tmp_path / "site" / "suite" / "report"
    copy.mkdir(parents=True)
    shutil.copy(writer.__file__, copy / "writer.py")
    monkeypatch.setattr(writer, "__file__", str(copy / "writer.py"))
    assert writer._git_sha() is None


def test_the_upgrade_view_puts_what_to_act_on_first_with_the_oracles_and_the_declaration():
    """Issue 49: each change is classified, what a user may act on first and counted in the
    headline, with JAX's and PyTorch's answers for the key and the declaration's reason and link."""
    from suite.report import upgrade

    def rows(tf_value, extra):
        return [
            _row(behaviour="seg", test="cases/test_seg.py::t[tensorflow-xla-cpu]", mode="xla",
                 observed={"bincount": tf_value, "note": extra}, expected={"bincount": tf_value},
                 declared={"bincount": {"reason": "XLA drops them", "link": "https://github.com/tensorflow/tensorflow/pull/1"}}),
            _row(behaviour="seg", test="cases/test_seg.py::t[jax-jit-cpu]", framework="jax", mode="jit",
                 observed={"bincount": "dropped"}),
        ]  # fmt: skip

    m = upgrade.model(_release("2.21.0", rows("dropped", "a")), _release("2.23.0", rows("raises:X", "b")), "a", "b")
    first, second = m["behaviours"][0]["changes"]
    assert (first["kind"], first["act"], second["kind"]) == ("now raises", True, "informational")
    assert first["oracles"] == "JAX: dropped" and first["reason"] == "XLA drops them"
    assert first["link"].endswith("/pull/1") and m["to_act_on"] == 1
    md = upgrade.markdown(m)
    assert "**1 a user may need to act on**" in md
    assert "- **now raises** `bincount`: `dropped` → `raises:X`, in TensorFlow xla (cpu); JAX: dropped; declared" in md


def test_the_upgrade_view_gives_a_change_the_reason_its_own_rows_matched_not_another_modes():
    """A key that changed eagerly to the undeclared answer, while traced rows keep a declared
    one, shows no reason: the traced rows' declaration explains their answer, not this one."""
    from suite.report import upgrade

    traced = {
        "grad": {"reason": "traced: the cond captures NaN", "link": "https://github.com/tensorflow/tensorflow/pull/2"}
    }

    def rows(eager_value):
        return [
            _row(behaviour="ls", test="cases/test_ls.py::t[tensorflow-eager-cpu]", mode="eager",
                 observed={"grad": eager_value}, expected={"grad": eager_value}),
            _row(behaviour="ls", test="cases/test_ls.py::t[tensorflow-graph-cpu]", mode="graph",
                 observed={"grad": "nan"}, expected={"grad": "nan"}, declared=traced),
        ]  # fmt: skip

    m = upgrade.model(_release("2.21.0", rows("nan")), _release("2.23.0", rows("finite")), "a", "b")
    (change,) = m["behaviours"][0]["changes"]
    assert change["where"] and "eager" in change["where"] and "graph" not in change["where"]
    assert (change["reason"], change["link"]) == ("", "")


def test_array_level_comparisons_show_their_least_headroom_and_the_slack_ones():
    """Issue 47's survey, measured in every run: per behaviour and dtype the comparison nearest its
    tolerance, and how many row x oracle comparisons had more than ten times what they saw."""
    report = {
        "results": [
            _row(array_errors={"float32": {"jax": [2.0, 168.0], "torch": [40.0, 168.0]}}),
            _row(test="cases/test_b.py::test_y[jax-jit-cpu]", array_errors={"float32": {"numpy": [1.0, 168.0]}}),
            _row(outcome="failed", array_errors={"float32": {"jax": [900.0, 168.0]}}),  # its own failure says it
            _row(array_errors={"float64": {"jax": [0.0, 4503.0]}}),
        ]
    }
    by = {e["dtype"]: e for e in query.array_headroom(report)}
    assert by["float32"]["headroom"] == pytest.approx(4.2) and by["float32"]["where"] == "test_x vs torch"
    assert (by["float32"]["slack"], by["float32"]["comparisons"]) == (2, 3)
    assert by["float64"]["headroom"] is None and by["float64"]["slack"] == 0, "no error at all is exact, not slack"
    md = pages.markdown({**report, "environment": {"python": "3.11"}})
    assert (
        "## Comparisons outside the op table: headroom" in md
        and "| b | ? | float32 | 4.2x | test_x vs torch | 2/3 |" in md
    )
    judged = {
        **report,
        "environment": {"python": "3.11"},
        "floors": {"b": {"kind": "array", "why": "a loss sums rows"}},
    }
    md = pages.markdown(judged)  # a behaviour's judgement beside its headroom, and its reason below
    assert "| b | array | float32 | 4.2x |" in md and "Why each floor:\n\n- `b` (array): a loss sums rows" in md


def test_a_schema_1_report_loads_in_todays_gradient_kinds_and_diffs_clean_against_a_new_run(tmp_path):
    """Version 1 spelled some gradient kinds otherwise (``suite/kinds.py``): loaded, an old baseline
    says ``zero``, ``both``, ``mean`` and a side key's ``neither``, so a new run that observes the
    same things in today's words is no change; the diff names the schema each report was written in."""
    from suite.report import diff

    pairs = {
        "round_grad": ("zeros", "zero"),
        "grad[cumprod@a]": ("mixed:both-sides,zero", "mixed:both,zero"),
        "abs_zero_vs_sides": ("mean-of-sides", "mean"),
        "side_dx[xlogy@x=0,y=0]": ("none", "neither"),
        "unconnected[NONE]": ("none", "none"),
        "global_clip_value[inf]": ("zeros-and-nan", "zero-and-nan"),
    }
    old_words, new_words = ({k: v[i] for k, v in pairs.items()} for i in (0, 1))
    decl = {"key": "round_grad", "observed": "zeros", "id": "cases.test_b:0", "module": "cases.test_b"}
    path = tmp_path / "old.json"
    path.write_text(
        json.dumps(
            {
                "schema_version": 1,
                "environment": {},
                "declared": [decl],
                "results": [_row(observed=old_words, expected=old_words)],
            }  # fmt: skip
        )
    )
    old = schema.load(path)
    assert old["schema_version"] == schema.SCHEMA_VERSION and old["migrated_from"] == 1
    assert old["results"][0]["observed"] == new_words and old["results"][0]["expected"] == new_words
    assert old["declared"][0]["observed"] == "zero"
    new = {"schema_version": schema.SCHEMA_VERSION, "environment": {},
           "results": [_row(observed=new_words, expected=new_words)]}  # fmt: skip
    log = diff.diff(old, new)
    assert [c for c in log.changes if c.kind == "observation changed"] == []
    assert ("schema_version", "1 (gradient kinds read in today's words)", "2") in log.environment
    changed = diff.diff(old, {**new, "results": [_row(observed={**new_words, "round_grad": "nonzero"})]})
    assert [c.detail for c in changed.changes if c.kind == "observation changed"] == ["round_grad"]
