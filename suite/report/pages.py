"""The pages of reports: the Jinja2 environment over ``suite/report/templates`` and the
renderings of the view models (:mod:`model`) as Markdown, HTML and terminal lines; the top
layer of three (query -> model -> pages)."""

from __future__ import annotations

import functools
import html as htmllib
import re
from pathlib import Path

import jinja2
from markupsafe import Markup, escape

from suite.report import model, query


@functools.lru_cache(maxsize=2)
def template_env(strict: bool = False):
    """The pages' templates (``suite/report/templates``): HTML autoescaped, Markdown filters
    ``md`` (a table cell's pipes) and ``code`` (a code span). ``strict``: an undefined name is an
    error (the upgrade page's model is complete); otherwise a row's optional fields
    (``reason``, ``reproducer``) read as empty where absent."""
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("suite.report", "templates"),
        autoescape=jinja2.select_autoescape(enabled_extensions=("html.j2",), default_for_string=False),
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        undefined=jinja2.StrictUndefined if strict else jinja2.Undefined,
    )
    env.filters["md"] = query.md_escape
    env.filters["prose"] = query.md_prose  # free text shown literally (emphasis, links, pipes escaped)
    env.filters["code"] = query.code_span  # a table cell's code span (pipes escaped)
    env.filters["tick"] = lambda s: f"`{s}`"  # a code span in running text
    env.filters["value"] = lambda v, limit=None: query.value_text(v, limit)
    env.filters["inline_markdown"] = _inline_markdown
    env.filters["linkrefs"] = link_refs
    env.filters["mdrefs"] = md_refs
    env.filters["refs"] = query.refs
    return env


def link_refs(text):
    """``text`` escaped, its issue and PR references (:func:`query.refs`) as links.

    >>> str(link_refs("a<b tensorflow#1"))
    'a&lt;b <a href="https://github.com/tensorflow/tensorflow/issues/1">tensorflow#1</a>'
    """
    out = str(escape(str(text)))
    for ref, url in query.refs(text):
        out = re.sub(rf"(?<![\w/>#-]){re.escape(ref)}\b", f'<a href="{url}">{ref}</a>', out)
    return Markup(out)


def md_refs(text) -> str:
    """``text`` with its issue and PR references as Markdown links.

    >>> md_refs("see pytorch#2421.")
    'see [pytorch#2421](https://github.com/pytorch/pytorch/issues/2421).'
    """
    out = str(text)
    for ref, url in query.refs(text):
        out = re.sub(rf"(?<![\w/\[#-]){re.escape(ref)}\b", f"[{ref}]({url})", out)
    return out


def _inline_markdown(text: str):
    return Markup(inline_markdown(text))  # escaped by inline_markdown itself


def inline_markdown(text: str) -> str:
    """The inline Markdown our changelog lines use (code spans, then bold outside them) as
    escaped HTML. Code spans first: a key like ``grad2[x**0@-0]`` holds ``**``.

    >>> inline_markdown("**b** `grad2[x**0@-0]`: `zero` -> `nan` (a<b)")
    '<b>b</b> <code>grad2[x**0@-0]</code>: <code>zero</code> -&gt; <code>nan</code> (a&lt;b)'
    """
    out = []
    for i, part in enumerate(re.split(r"(`[^`]*`)", text)):
        if i % 2:
            out.append("<code>" + _escape(part[1:-1]) + "</code>")
        else:
            out.append(re.sub(r"\*\*(.+?)\*\*", r"<b>\1</b>", _escape(part)))
    return "".join(out)


def _escape(x) -> str:
    return htmllib.escape(str(x), quote=True)


def markdown(report) -> str:
    """``latest.md``: failures first, then the matrix, the observations per behaviour and test,
    deprecations, declarations and speed."""
    return template_env().get_template("latest.md.j2").render(**model.run_model(report))


def html(report, label: str, *, css: str, open_target_js: str, bench_html: str = "") -> str:
    """``latest.html``: as the Markdown, with the observations as one table per behaviour
    (subjects side by side) and each matrix cell linked to its rows."""
    return (
        template_env()
        .get_template("latest.html.j2")
        .render(
            **model.run_model(report),
            label=label,
            css=Markup(css),
            open_target_js=Markup(open_target_js),
            bench_html=Markup(bench_html),
        )
    )


def report_header_and_failures(report, label: str) -> str:
    """One release's header and failures, for the version matrix page (HTML)."""
    m = template_env().get_template("_report.html.j2").module
    return str(m.header(model.head(report), label)) + str(m.failures(model.failures(report)))


def versions_markdown(reports, details=None) -> str:
    """The version matrix page as Markdown (``matrix.md``)."""
    return template_env().get_template("matrix.md.j2").render(**model.versions_model(reports, details))


def versions_sections_html(reports, labels, details=None) -> str:
    """The version matrix page's sections (HTML), also shown under the upgrade page; each
    release's header and failures after them."""
    names = [Path(str(lab)).stem for lab in labels]
    m = model.versions_model(reports, details, names)
    out = template_env().get_template("_matrix.html.j2").render(**m)
    return out + "".join(report_header_and_failures(r, lab) for r, lab in zip(reports, labels) if query.failures(r))


def versions_table_md(reports) -> list[str]:
    """The version matrix's outcome table alone (Markdown lines), as docs/versions.md shows it."""
    m = model.versions_model(reports)
    outcomes = template_env().get_template("_matrix.md.j2").module.outcomes
    return str(outcomes(m["versions"], m["rows"], m["revisions"], m["oracles"])).splitlines()


def terminal_matrix(report) -> list[str]:
    """Behaviour x column, from the report model; columns where every row was skipped are
    folded into one line."""
    m = model.matrix(report)
    cols = [c["id"] for c in m["columns"]]
    skipped = [r for r in report["results"] if query.subject_of(r) not in cols]
    gone = list(dict.fromkeys(query.subject_of(r) for r in skipped))
    if not cols:
        return [f"every row skipped ({', '.join(gone)})"]
    bs = [r["behaviour"] for r in m["rows"]]
    w0 = max(len("behaviour"), *(len(b) for b in bs))
    widths = [max(len(col), 9) for col in cols]
    lines = ["  ".join(["behaviour".ljust(w0)] + [col.ljust(w) for col, w in zip(cols, widths)])]
    for r in m["rows"]:
        lines.append("  ".join([r["behaviour"].ljust(w0)] + [c["text"].ljust(w) for c, w in zip(r["cells"], widths)]))
    if gone:
        reasons = sorted({r.get("reason", "") for r in skipped})
        lines.append(f"skipped throughout: {', '.join(gone)} ({'; '.join(x for x in reasons if x)[:300]})")
    return lines


def speed_lines(report) -> list[str]:
    total = query.test_time(report)
    lines = [
        f"test time {total:.1f}s; examples per second by mode: "
        + ", ".join(f"{s['column']} {s['examples_per_s']}" for s in query.speed(report))
    ]
    for r in query.slowest(report, 3):
        lines.append(f"  slow: {r['duration_s']:.2f}s {r['test']}")
    return lines
