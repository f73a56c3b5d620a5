"""The view model of one report (:func:`run_model`) and of several releases
(:func:`versions_model`): everything their pages show, computed once from :mod:`query` (and
:mod:`diff` for the changelog); the middle layer of three (query -> model -> pages).

``latest.md`` and ``latest.html`` (templates ``latest.md.j2``, ``latest.html.j2``) and the
terminal summary are renderings of :func:`run_model` (:mod:`pages`); none of them counts
outcomes, groups observations or reads declarations on its own.

>>> m = run_model({"results": [{"behaviour": "b", "test": "cases/t.py::test_x[jax-jit-cpu]",
...     "framework": "jax", "mode": "jit", "device": "cpu", "outcome": "passed", "observed": {"k": "v"}}]})
>>> [(c["column"], c["text"], c["worst"]) for c in m["matrix"]["rows"][0]["cells"]]
[('jax-jit-cpu', 'ok 1/1', 'passed')]
>>> m["observation_tables"][0]["keys"]
[{'key': 'k', 'values': {'jax-jit-cpu': 'v'}, 'differs': False}]
"""

from __future__ import annotations

import collections

from suite.report import diff, query


def anchor(*parts) -> str:
    """An HTML id for a behaviour, a matrix cell or a failure: ``r-<part>-<part>``."""
    return "r-" + "-".join("".join(ch if ch.isalnum() else "_" for ch in str(p)) for p in parts)


def worst(counter) -> str:
    """The outcome a cell is coloured by: the worst of its rows (``query.ORDER``)."""
    return next((o for o in query.ORDER if counter.get(o)), "skipped")


def column(col: str) -> dict:
    fw, mode, dev = col.split("-")
    return {"id": col, "framework": fw, "mode": mode, "device": dev}


def head(report) -> dict:
    env = report.get("environment", {})
    return {
        "partial": bool(report.get("partial")),
        "created": report.get("created"),
        "python": env.get("python"),
        "platform": env.get("platform"),
        "cpu": env.get("cpu"),
        "profile": env.get("hypothesis", {}).get("profile"),
        "revision": env.get("suite_revision"),
        "frameworks": [query.framework_label(k, v) for k, v in env.get("frameworks", {}).items()],
        "notes": query.header_notes(report),
        "outcomes": sorted(collections.Counter(r["outcome"] for r in report["results"]).items()),
    }


def matrix(report) -> dict:
    """Behaviour x subject: each cell's counts, text (``query.cell_text``), worst outcome, anchor
    and rows; the columns in which every row was skipped folded into notes."""
    cols, folded = query.absent_columns(report)
    rows_by = collections.defaultdict(list)
    for r in report["results"]:
        rows_by[(r["behaviour"], query.subject_of(r))].append(r)
    rows = []
    for b in query.behaviours(report):
        cells = []
        for c in cols:
            rs = rows_by.get((b, c), [])
            cnt = collections.Counter(r["outcome"] for r in rs)
            cells.append(
                {"column": c, "text": query.cell_text(cnt), "worst": worst(cnt), "anchor": anchor(b, c), "rows": rs}
            )
        rows.append({"behaviour": b, "anchor": anchor(b), "cells": cells})
    return {"columns": [column(c) for c in cols], "rows": rows, "folded": folded}


def failures(report) -> list[dict]:
    return [
        {
            "row": r,
            "anchor": anchor("fail", i),
            "observed": [(k, query.value_text(v)) for k, v in (r.get("observed") or {}).items()],
        }
        for i, r in enumerate(query.failures(report))
    ]


def observation_tables(report, cols: list[str]) -> list[dict]:
    """Per behaviour, every key its rows observed with each subject's values side by side
    (the columns that ran, in matrix order); ``differs`` where the subjects disagree."""
    out = []
    for b in query.behaviours(report):
        seen: dict = {}
        used = []
        for r in report["results"]:
            col = query.subject_of(r)
            if r["behaviour"] != b or r["outcome"] == "skipped" or col not in cols:
                continue
            if col not in used:
                used.append(col)
            for key, v in (r.get("observed") or {}).items():
                vals = seen.setdefault(key, {}).setdefault(col, [])
                text = query.value_text(v, 120)
                if text not in vals:
                    vals.append(text)
        if not seen:
            continue
        used.sort(key=cols.index)
        keys = []
        for k, per in sorted(seen.items()):
            values = {c: " | ".join(v) for c, v in per.items()}
            keys.append({"key": k, "values": values, "differs": len(set(values.values())) > 1})
        out.append({"behaviour": b, "anchor": anchor("obs", b), "columns": [column(c) for c in used], "keys": keys})
    return out


def observation_lists(report) -> list[dict]:
    """Per behaviour and test (passed rows): each ``key = value`` with the subjects that saw it,
    its declaration, whether it is asserted, and the largest error against each oracle."""
    out = []
    for b, tests in query.observation_lists(report).items():
        items = []
        for test, t in tests.items():
            values = [
                {
                    "key": key,
                    "value": query.value_text(v, 160),
                    "subjects": query.subjects_text(subj),
                    "declared": decl,
                    "informational": key in t.get("informational", ()),
                }
                for key, v, subj, decl in t["values"]
            ]
            errors = ", ".join(f"{o} (max rel err {e:.1e})" for o, e in sorted(t["errors"].items()))
            items.append({"test": test, "values": values, "errors_text": errors})
        out.append({"behaviour": b, "tests": items})
    return out


def declared(report) -> dict:
    """The declarations: for whom, what status (stale ones stand out), how many rows held to each."""
    decls = []
    for d in report.get("declared") or []:
        where = "-".join(x or "*" for x in (d.get("framework"), d.get("mode"), d.get("device")))
        who = " ".join(x for x in (d.get("framework"), d.get("mode"), d.get("device"), d.get("versions")) if x)
        decls.append(
            {
                **d,
                "where": where + (f" {d['versions']}" if d.get("versions") else ""),
                "who": who or "all",
                "status_text": query.STATUS_WORDS.get(d.get("status"), d.get("status") or "?"),
                "behaviour": d.get("module", "").rsplit(".", 1)[-1].removeprefix("test_").replace("_", "-"),
            }
        )
    counts = collections.Counter(d.get("status") for d in decls)
    return {"items": decls, "stale": counts.get("stale", 0), "not_applicable": counts.get("not-applicable", 0)}


def run_model(report) -> dict:
    """Everything one report's pages show."""
    m = matrix(report)
    return {
        "head": head(report),
        "failures": failures(report),
        "matrix": m,
        "observation_tables": observation_tables(report, [c["id"] for c in m["columns"]]),
        "observations": observation_lists(report),
        "deprecations": sorted((report.get("deprecations") or {}).items()),
        "declared": declared(report),
        "speed": {
            "subjects": query.speed(report),
            "test_time": query.test_time(report),
            "slowest": query.slowest(report),
        },
        "headroom": _headroom(report),
    }


def _headroom(report) -> dict:
    entries = query.headroom(report)
    return {"by_op": query.headroom_by_op(entries), "entries": entries, "slack": query.SLACK,
            "array": query.array_headroom(report), "floors": report.get("floors") or {}}  # fmt: skip


def _matrix_rows(reports, versions, bs, counts, moved) -> list[dict]:
    """The version matrix's rows: per behaviour, a cell per report (its outcome counts, and the
    keys that moved since the report before, TensorFlow's and the oracles' apart)."""
    rows = []
    for b in bs:
        cells = []
        for i, v in enumerate(versions):
            cnt = counts.get((b, v))
            keys = sorted(moved.get((b, v), ()))
            ran = any(r["behaviour"] == b for r in reports[i]["results"])
            cells.append({
                "text": query.cell_text(cnt) if cnt else "" if ran else "not run",
                "worst": worst(cnt or {}),
                "moved": [k for k in keys if not query.ORACLE_KEY.match(k)],
                "oracle_moved": [k for k in keys if query.ORACLE_KEY.match(k)],
            })  # fmt: skip
        rows.append({"behaviour": b, "anchor": anchor("changes", b), "cells": cells})
    return rows


def _change_cells(values) -> list[dict]:
    """One cell per report of an observation's values: ``changed``, ``same``, ``first`` (the
    first report that ran its test) or ``not-run``, with the value and the one before."""
    shown = [v if v is not None else "(not observed)" for v in values]
    cells = []
    for i, changed in enumerate(query.changed_since_previous(values)):
        before = query.previous_run(values, i)
        kind = "not-run" if values[i] == query.NOT_RUN else "changed" if changed else "same"
        if kind == "same" and before == query.NOT_RUN:  # the first release that ran the test
            kind = "first"
        old = "(not observed)" if before is None else before
        cells.append({"kind": kind, "value": shown[i], "old": old})
    return cells


def versions_model(reports, details=None, names=None) -> dict:
    """Several releases' TensorFlow rows, computed once for the version matrix pages: the
    outcome per behaviour and report (with the observation keys that moved since the report
    before: TensorFlow's own, and the oracles' answers recorded in its rows, counted apart),
    every observation that differs between reports, and the consecutive changelog. Reports of
    the same version stay apart, labelled by ``names`` (default: from ``details``' file names)."""
    if names is None and details:
        names = [str(d).rsplit("/", 1)[-1].rsplit(".", 1)[0] if d else f"#{i + 1}" for i, d in enumerate(details)]
    versions, bs, counts = query.version_outcomes(reports, names)
    rows = _matrix_rows(reports, versions, bs, counts, query.moved_keys(reports, names))
    changes = {}
    for e in query.observation_changes(reports):
        changes.setdefault(e["behaviour"], []).append({**e, "cells": _change_cells(e["values"])})
    return {
        "versions": versions,
        "revisions": [suite_revision(r) for r in reports],
        "oracles": [query.oracle_versions(r) for r in reports],
        "details": list(details or [None] * len(versions)),
        "rows": rows,
        "changes": [{"behaviour": b, "anchor": anchor("changes", b), "entries": es} for b, es in changes.items()],
        "changelog": [line.removeprefix("- ") for line in diff.consecutive_changes_md(reports)],
    }


def suite_revision(report) -> str:
    """The suite revision a report was measured with, short (``?`` where it was not recorded)."""
    rev = (report.get("environment") or {}).get("suite_revision") or "?"
    return rev[:7] if len(rev) == 40 else rev
