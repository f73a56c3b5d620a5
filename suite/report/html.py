"""Self-contained HTML rendering of one or several reports (inline CSS and SVG, no network).

One report: the failures first (test, error, reproducer), then the behaviour x
(framework, mode, device) matrix, colour-coded, with the columns in which every row was
skipped (an absent GPU) folded into one note; each cell links to its rows' detail
(observation, expectation, declared reason and link, error, reproducer) below the matrix,
so the matrix itself stays narrow. Several reports: the version matrix (cells whose
observations changed are marked), what changed per behaviour with old and new values,
the changelog between consecutive releases, and a link to each release's own page.
Benchmark results, when given, are plotted as inline SVG bars.
"""

from __future__ import annotations

import collections
import html

from suite.report import pages

CSS = """
body{font:14px/1.4 system-ui,sans-serif;margin:1.5em;color:#222;max-width:1360px}
h1{font-size:1.5em}h2{font-size:1.2em;margin-top:1.6em}h3{font-size:1.05em}
table{border-collapse:collapse;margin:.5em 0;max-width:100%}
th,td{border:1px solid #ccc;padding:3px 6px;vertical-align:top;text-align:left;overflow-wrap:break-word}
th{background:#f3f3f3;font-weight:600;overflow-wrap:normal}
td.cell{white-space:nowrap}td.cell a{color:inherit;text-decoration:none;display:block}
.passed{background:#d8f0d8}.failed,.error{background:#f6c9c9}.crashed{background:#e08080}
.skipped{background:#eee;color:#777}.unavailable{background:#fbe9c6}.mixed{background:#fff3c4}
.changed{background:#ffe08a;font-weight:600}.same{color:#999;text-align:center}
.not-run{color:#999;font-style:italic}
.moved{outline:3px solid #c90;outline-offset:-3px}
tr.differs td{background:#fff3c4}table.obs td,table.decl td{font-size:13px}
.partial{background:#ffe08a;padding:.6em;border:1px solid #c90;font-weight:600}
.note{color:#555}
details summary{cursor:pointer}
pre{background:#f7f7f7;padding:.4em;white-space:pre-wrap;overflow-wrap:anywhere;margin:.2em 0}
code{overflow-wrap:break-word}
.row{border-top:1px dashed #bbb;padding:.3em 0}
.legend span{display:inline-block;padding:2px 8px;margin-right:4px;border:1px solid #ccc}
small{color:#666}
"""


def _e(x) -> str:
    return html.escape(str(x), quote=True)


#: Opens the <details> a link points at (a matrix cell's rows), on load and on a click.
OPEN_TARGET_JS = (
    "<script>function adsemOpen(){var id=decodeURIComponent(location.hash.slice(1));"
    "var e=id&&document.getElementById(id);if(e&&e.tagName==='DETAILS'){e.open=true;e.scrollIntoView();}}"
    "window.addEventListener('hashchange',adsemOpen);adsemOpen();</script>"
)


def _start(title) -> list[str]:
    """The page's head and legend: the ``start`` macro of ``_report.html.j2``, as one report's
    page has it."""
    return [str(pages.template_env().get_template("_report.html.j2").module.start(title, CSS)).strip()]


def matrix_sections(reports, labels, details=None) -> str:
    """The version matrix of several reports: outcomes, observations that differ between
    releases, the changelog between consecutive ones, and each release's failures."""
    return pages.versions_sections_html(reports, labels, details)


def page(reports: list[dict], labels: list[str], bench: list[dict] | None = None, details=None) -> str:
    """One report's page (the ``latest.html.j2`` template over the report model), or (several
    reports) the version matrix page. ``details``: a link per report to its own page."""
    bench_html = ""
    if bench:
        machines = sorted({b["machine"] for b in bench if b.get("machine")})
        bench_html = (
            "<h2>Benchmarks</h2>" + "".join(f"<p><small>{_e(m)}</small></p>" for m in machines) + bench_svg(bench)
        )
    if len(reports) == 1:
        return pages.html(reports[0], labels[0], css=CSS, open_target_js=OPEN_TARGET_JS, bench_html=bench_html)
    out = _start("version matrix") + [matrix_sections(reports, labels, details), bench_html, "</body></html>"]
    return "\n".join(out)


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
            bars.append(
                f"<text x='0' y='{y + 12}' font-size='11'>{_e(b.get('subject'))}</text>"
                f"<rect x='200' y='{y}' width='{w:.1f}' height='14' fill='#4a8'/>"
                f"<text x='{205 + w:.1f}' y='{y + 12}' font-size='11'>{(b.get('gbps') or 0):.2f} GB/s</text>"
            )
        if ceiling:
            x = 200 + (width - 260) * ceiling / scale
            bars.append(
                f"<line x1='{x:.1f}' x2='{x:.1f}' y1='0' y2='{h - 20}' stroke='#c33' stroke-dasharray='4'/>"
                f"<text x='{x - 60:.1f}' y='{h - 6}' font-size='11' fill='#c33'>ceiling {ceiling:.1f} GB/s</text>"
            )
        out.append(
            f"<h3>{_e(path)}</h3><svg xmlns='http://www.w3.org/2000/svg' width='{width}' height='{h}'>"
            + "".join(bars)
            + "</svg>"
        )
    return "".join(out)
