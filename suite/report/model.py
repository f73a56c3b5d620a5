"""One report's model: everything its pages show, computed once.

``latest.md`` and ``latest.html`` (templates ``latest.md.j2``, ``latest.html.j2``) and the
terminal summary are renderings of :func:`run_model`; none of them counts outcomes, groups
observations or reads declarations on its own.

>>> m = run_model({"results": [{"behaviour": "b", "test": "cases/t.py::test_x[jax-jit-cpu]",
...     "framework": "jax", "mode": "jit", "device": "cpu", "outcome": "passed", "observed": {"k": "v"}}]})
>>> [(c["column"], c["text"], c["worst"]) for c in m["matrix"]["rows"][0]["cells"]]
[('jax-jit-cpu', 'ok 1/1', 'passed')]
>>> m["observation_tables"][0]["keys"]
[{'key': 'k', 'values': {'jax-jit-cpu': 'v'}, 'differs': False}]
"""

from __future__ import annotations

import collections
import functools

from suite.report import render


def anchor(*parts) -> str:
    """An HTML id for a behaviour, a matrix cell or a failure: ``r-<part>-<part>``."""
    return "r-" + "-".join("".join(ch if ch.isalnum() else "_" for ch in str(p)) for p in parts)


def worst(counter) -> str:
    """The outcome a cell is coloured by: the worst of its rows (``render.ORDER``)."""
    return next((o for o in render.ORDER if counter.get(o)), "skipped")


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
        "profile": env.get("hypothesis", {}).get("profile"),
        "revision": env.get("suite_revision"),
        "frameworks": [render.framework_label(k, v) for k, v in env.get("frameworks", {}).items()],
        "notes": render.header_notes(report),
        "outcomes": sorted(collections.Counter(r["outcome"] for r in report["results"]).items()),
    }


def matrix(report) -> dict:
    """Behaviour x subject: each cell's counts, text (``render.cell_text``), worst outcome, anchor
    and rows; the columns in which every row was skipped folded into notes."""
    cols, folded = render.absent_columns(report)
    rows_by = collections.defaultdict(list)
    for r in report["results"]:
        rows_by[(r["behaviour"], render.subject_of(r))].append(r)
    rows = []
    for b in render.behaviours(report):
        cells = []
        for c in cols:
            rs = rows_by.get((b, c), [])
            cnt = collections.Counter(r["outcome"] for r in rs)
            cells.append(
                {"column": c, "text": render.cell_text(cnt), "worst": worst(cnt), "anchor": anchor(b, c), "rows": rs}
            )
        rows.append({"behaviour": b, "anchor": anchor(b), "cells": cells})
    return {"columns": [column(c) for c in cols], "rows": rows, "folded": folded}


def failures(report) -> list[dict]:
    return [
        {
            "row": r,
            "anchor": anchor("fail", i),
            "observed": [(k, render.value_text(v)) for k, v in (r.get("observed") or {}).items()],
        }
        for i, r in enumerate(render.failures(report))
    ]


def observation_tables(report, cols: list[str]) -> list[dict]:
    """Per behaviour, every key its rows observed with each subject's values side by side
    (the columns that ran, in matrix order); ``differs`` where the subjects disagree."""
    out = []
    for b in render.behaviours(report):
        seen: dict = {}
        used = []
        for r in report["results"]:
            col = render.subject_of(r)
            if r["behaviour"] != b or r["outcome"] == "skipped" or col not in cols:
                continue
            if col not in used:
                used.append(col)
            for key, v in (r.get("observed") or {}).items():
                vals = seen.setdefault(key, {}).setdefault(col, [])
                text = render.value_text(v, 120)
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
    for b, tests in render.observation_lists(report).items():
        items = []
        for test, t in tests.items():
            values = [
                {
                    "key": key,
                    "value": render.value_text(v, 160),
                    "subjects": render.subjects_text(subj),
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
                "status_text": render.STATUS_WORDS.get(d.get("status"), d.get("status") or "?"),
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
            "subjects": render.speed(report),
            "test_time": render.test_time(report),
            "slowest": render.slowest(report),
        },
        "headroom": _headroom(report),
    }


def _headroom(report) -> dict:
    entries = render.headroom(report)
    return {"by_op": render.headroom_by_op(entries), "entries": entries, "slack": render.SLACK}


@functools.lru_cache(maxsize=2)
def template_env(strict: bool = False):
    """The pages' templates (``suite/report/templates``): HTML autoescaped, Markdown filters
    ``md`` (a table cell's pipes) and ``code`` (a code span). ``strict``: an undefined name is an
    error (the upgrade page's model is complete); otherwise a row's optional fields
    (``reason``, ``reproducer``) read as empty where absent."""
    import jinja2

    from suite.report.diff import code_span

    env = jinja2.Environment(
        loader=jinja2.PackageLoader("suite.report", "templates"),
        autoescape=jinja2.select_autoescape(enabled_extensions=("html.j2",), default_for_string=False),
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        undefined=jinja2.StrictUndefined if strict else jinja2.Undefined,
    )
    env.filters["md"] = render.md_escape
    env.filters["code"] = code_span  # a table cell's code span (pipes escaped)
    env.filters["tick"] = lambda s: f"`{s}`"  # a code span in running text
    env.filters["value"] = lambda v, limit=None: render.value_text(v, limit)
    env.filters["inline_markdown"] = _inline_markdown
    return env


def _inline_markdown(text: str):
    from markupsafe import Markup

    from suite.report.html import inline_markdown

    return Markup(inline_markdown(text))  # escaped by inline_markdown itself


def markdown(report) -> str:
    """``latest.md``: failures first, then the matrix, the observations per behaviour and test,
    deprecations, declarations and speed."""
    return template_env().get_template("latest.md.j2").render(**run_model(report))


def html(report, label: str, *, css: str, open_target_js: str, bench_html: str = "") -> str:
    """``latest.html``: as the Markdown, with the observations as one table per behaviour
    (subjects side by side) and each matrix cell linked to its rows."""
    from markupsafe import Markup

    return (
        template_env()
        .get_template("latest.html.j2")
        .render(
            **run_model(report),
            label=label,
            css=Markup(css),
            open_target_js=Markup(open_target_js),
            bench_html=Markup(bench_html),
        )
    )


def report_header_and_failures(report, label: str) -> str:
    """One release's header and failures, for the version matrix page (HTML)."""
    m = template_env().get_template("_report.html.j2").module
    return str(m.header(head(report), label)) + str(m.failures(failures(report)))


def versions_model(reports, details=None) -> dict:
    """Several releases' TensorFlow rows, computed once for the version matrix pages: the
    outcome per behaviour and release (with the observation keys that moved since the release
    before), every observation that differs between releases, and the consecutive changelog."""
    versions, bs, counts = render.version_outcomes(reports)
    moved = render.moved_keys(reports)
    rows = []
    for b in bs:
        cells = []
        for v in versions:
            cnt = counts.get((b, v))
            keys = sorted(moved.get((b, v), ()))
            cells.append({"text": render.cell_text(cnt) if cnt else "", "worst": worst(cnt or {}), "moved": keys})
        rows.append({"behaviour": b, "anchor": anchor("changes", b), "cells": cells})
    changes = {}
    for e in render.observation_changes(reports):
        shown = [v if v is not None else "(not observed)" for v in e["values"]]
        cells = []
        for i, changed in enumerate(render.changed_since_previous(e["values"])):
            before = render.previous_run(e["values"], i)
            kind = "not-run" if e["values"][i] == render.NOT_RUN else "changed" if changed else "same"
            if kind == "same" and before == render.NOT_RUN:  # the first release that ran the test
                kind = "first"
            old = "(not observed)" if before is None else before
            cells.append({"kind": kind, "value": shown[i], "old": old})
        changes.setdefault(e["behaviour"], []).append({**e, "cells": cells})
    return {
        "versions": versions,
        "revisions": [suite_revision(r) for r in reports],
        "details": list(details or [None] * len(versions)),
        "rows": rows,
        "changes": [{"behaviour": b, "anchor": anchor("changes", b), "entries": es} for b, es in changes.items()],
        "changelog": [line.removeprefix("- ") for line in render.consecutive_changes_md(reports)],
    }


def suite_revision(report) -> str:
    """The suite revision a report was measured with, short (``?`` where it was not recorded)."""
    rev = (report.get("environment") or {}).get("suite_revision") or "?"
    return rev[:7] if len(rev) == 40 else rev


def versions_markdown(reports, details=None) -> str:
    """The version matrix page as Markdown (``matrix.md``)."""
    return template_env().get_template("matrix.md.j2").render(**versions_model(reports, details))


def versions_sections_html(reports, labels, details=None) -> str:
    """The version matrix page's sections (HTML), also shown under the upgrade page; each
    release's header and failures after them."""
    m = versions_model(reports, details)
    out = template_env().get_template("_matrix.html.j2").render(**m)
    return out + "".join(report_header_and_failures(r, lab) for r, lab in zip(reports, labels) if render.failures(r))


def versions_table_md(reports) -> list[str]:
    """The version matrix's outcome table alone (Markdown lines), as the README shows it."""
    m = versions_model(reports)
    outcomes = template_env().get_template("_matrix.md.j2").module.outcomes
    return str(outcomes(m["versions"], m["rows"], m["revisions"])).splitlines()
