"""Self-contained HTML rendering of one or several reports (inline CSS and SVG, no network).

One report: the behaviour x (framework, mode, device) matrix, colour-coded; each cell
opens (``<details>``) to its rows' observation, expectation, declared reason and link,
error and reproducer. Several reports: a version matrix (behaviour x TensorFlow
version) above each report's own matrix. Benchmark results, when given, are plotted
as inline SVG bars.
"""
from __future__ import annotations

import collections
import html
import json

from suite.report import render

CSS = """
body{font:14px/1.4 system-ui,sans-serif;margin:1.5em;color:#222}
h1{font-size:1.5em}h2{font-size:1.2em;margin-top:1.6em}
table{border-collapse:collapse;margin:.5em 0}
th,td{border:1px solid #ccc;padding:3px 6px;vertical-align:top;text-align:left}
th{background:#f3f3f3;font-weight:600}
td.cell{min-width:6em}
.passed{background:#d8f0d8}.failed,.error{background:#f6c9c9}.crashed{background:#e08080}
.skipped{background:#eee;color:#777}.unavailable{background:#fbe9c6}.mixed{background:#fff3c4}
.partial{background:#ffe08a;padding:.6em;border:1px solid #c90;font-weight:600}
details summary{cursor:pointer}
pre{background:#f7f7f7;padding:.4em;white-space:pre-wrap;max-width:70em;margin:.2em 0}
.row{border-top:1px dashed #bbb;padding:.3em 0}
.legend span{display:inline-block;padding:2px 8px;margin-right:4px;border:1px solid #ccc}
small{color:#666}
"""

ORDER = render.ORDER


def _e(x) -> str:
    return html.escape(str(x), quote=True)


def _worst(counter) -> str:
    for o in ORDER:
        if counter.get(o):
            return o
    return "skipped"


def _row_html(r) -> str:
    parts = [f"<div class='row'><b>{_e(r['test'].split('::', 1)[-1])}</b> <span class='{_e(r['outcome'])}'>"
             f"{_e(r['outcome'])}</span> <small>{r.get('examples', 0)} examples, {r.get('duration_s', 0)} s</small>"]
    if r.get("observed"):
        parts.append(f"<div>observed: <code>{_e(json.dumps(r['observed']))}</code></div>")
    if r.get("expected"):
        parts.append(f"<div>expected: <code>{_e(json.dumps(r['expected']))}</code></div>")
    for key, d in (r.get("declared") or {}).items():
        parts.append(f"<div>declared divergence <code>{_e(key)}</code>: {_e(d.get('reason'))} "
                     f"<a href='{_e(d.get('link'))}'>{_e(d.get('link'))}</a></div>")
    if r.get("max_rel_err"):
        parts.append("<div>max rel err: " + ", ".join(f"{_e(k)} {v:.1e}" for k, v in r["max_rel_err"].items()) + "</div>")
    if r.get("reason"):
        parts.append(f"<div>reason: {_e(r['reason'])}</div>")
    if r.get("error"):
        parts.append(f"<pre>{_e(r['error'])}</pre>")
    if r.get("reproducer"):
        parts.append(f"<div>reproducer:</div><pre>{_e(r['reproducer'])}</pre>")
    parts.append("</div>")
    return "".join(parts)


def matrix_html(report) -> str:
    cols, bs = render.columns(report), render.behaviours(report)
    rows_by = collections.defaultdict(list)
    for r in report["results"]:
        rows_by[(r["behaviour"], f"{r['framework']}-{r['mode']}-{r['device']}")].append(r)
    out = ["<table class='matrix'><tr><th>behaviour</th>" + "".join(f"<th>{_e(c)}</th>" for c in cols) + "</tr>"]
    for b in bs:
        out.append(f"<tr><th>{_e(b)}</th>")
        for c in cols:
            rows = rows_by.get((b, c), [])
            if not rows:
                out.append("<td></td>")
                continue
            cnt = collections.Counter(r["outcome"] for r in rows)
            worst = _worst(cnt)
            text = render.cell_text(cnt)
            out.append(f"<td class='cell {worst}'><details><summary>{_e(text)}</summary>"
                       + "".join(_row_html(r) for r in rows) + "</details></td>")
        out.append("</tr>")
    out.append("</table>")
    return "".join(out)


def version_matrix_html(reports) -> str:
    """Behaviour x TensorFlow version: the worst TensorFlow outcome per behaviour."""
    versions = []
    cells = {}
    for rep in reports:
        v = rep.get("environment", {}).get("frameworks", {}).get("tensorflow", {}).get("version") or "?"
        versions.append(v)
        for r in rep["results"]:
            if r["framework"] != "tensorflow":
                continue
            cells.setdefault((r["behaviour"], v), collections.Counter())[r["outcome"]] += 1
    bs = list(dict.fromkeys(b for rep in reports for b in render.behaviours(rep)))
    out = ["<table class='versions'><tr><th>behaviour</th>" + "".join(f"<th>TF {_e(v)}</th>" for v in versions) + "</tr>"]
    for b in bs:
        out.append(f"<tr><th>{_e(b)}</th>")
        for v in versions:
            cnt = cells.get((b, v))
            if not cnt:
                out.append("<td></td>")
            else:
                out.append(f"<td class='{_worst(cnt)}'>{_e(render.cell_text(cnt))}</td>")
        out.append("</tr>")
    out.append("</table>")
    return "".join(out)


def bench_svg(bench: list[dict], width=640) -> str:
    """Horizontal bars of achieved GB/s per (path, subject), one SVG per hot path."""
    groups = collections.defaultdict(list)
    for b in bench:
        groups[b.get("path", "?")].append(b)
    out = []
    for path, items in groups.items():
        items = sorted(items, key=lambda b: -(b.get("gbps") or 0))
        top = max((b.get("gbps") or 0) for b in items) or 1.0
        ceiling = max((b.get("ceiling_gbps") or 0) for b in items)
        scale = max(top, ceiling) or 1.0
        h = 18 * len(items) + 24
        bars = []
        for i, b in enumerate(items):
            w = (width - 260) * (b.get("gbps") or 0) / scale
            y = 18 * i + 4
            bars.append(f"<text x='0' y='{y + 12}' font-size='11'>{_e(b.get('subject'))}</text>"
                        f"<rect x='200' y='{y}' width='{w:.1f}' height='14' fill='#4a8'/>"
                        f"<text x='{205 + w:.1f}' y='{y + 12}' font-size='11'>{(b.get('gbps') or 0):.2f} GB/s</text>")
        if ceiling:
            x = 200 + (width - 260) * ceiling / scale
            bars.append(f"<line x1='{x:.1f}' x2='{x:.1f}' y1='0' y2='{h - 20}' stroke='#c33' stroke-dasharray='4'/>"
                        f"<text x='{x - 60:.1f}' y='{h - 6}' font-size='11' fill='#c33'>ceiling {ceiling:.1f} GB/s</text>")
        out.append(f"<h3>{_e(path)}</h3><svg xmlns='http://www.w3.org/2000/svg' width='{width}' height='{h}'>"
                   + "".join(bars) + "</svg>")
    return "".join(out)


def page(reports: list[dict], labels: list[str], bench: list[dict] | None = None) -> str:
    out = ["<!doctype html><html><head><meta charset='utf-8'><title>autodiff-semantics report</title>",
           f"<style>{CSS}</style></head><body><h1>autodiff-semantics report</h1>",
           "<p class='legend'>" + "".join(f"<span class='{o}'>{o}</span>" for o in
                                         ("passed", "failed", "error", "crashed", "unavailable", "skipped")) + "</p>"]
    if len(reports) > 1:
        out.append("<h2>Version matrix (TensorFlow rows)</h2>" + version_matrix_html(reports))
    for rep, label in zip(reports, labels):
        env = rep.get("environment", {})
        fws = env.get("frameworks", {})
        out.append(f"<h2>{_e(label)}</h2>")
        if rep.get("partial"):
            out.append("<p class='partial'>PARTIAL REPORT: the run was interrupted; these rows are what it "
                       "measured before it stopped.</p>")
        out.append(f"<p><small>created {_e(rep.get('created'))}; Python {_e(env.get('python'))} on "
                   f"{_e(env.get('platform'))}; " + "; ".join(_e(render.framework_label(k, v)) for k, v in fws.items())
                   + f"; profile {_e(env.get('hypothesis', {}).get('profile'))}</small></p>")
        cnt = collections.Counter(r["outcome"] for r in rep["results"])
        out.append("<p>" + ", ".join(f"{_e(k)}: {v}" for k, v in sorted(cnt.items())) + "</p>")
        out.append(matrix_html(rep))
        sp = render.speed(rep)
        if sp:
            out.append("<details><summary>speed (examples per second per subject)</summary><table><tr><th>subject</th>"
                       "<th>examples</th><th>test s</th><th>examples/s</th></tr>" + "".join(
                           f"<tr><td>{_e(s['column'])}</td><td>{s['examples']}</td><td>{s['test_s']}</td>"
                           f"<td>{s['examples_per_s']}</td></tr>" for s in sp) + "</table></details>")
    if bench:
        machines = sorted({b["machine"] for b in bench if b.get("machine")})
        out.append("<h2>Benchmarks</h2>" + "".join(f"<p><small>{_e(m)}</small></p>" for m in machines)
                   + bench_svg(bench))
    out.append("</body></html>")
    return "\n".join(out)
