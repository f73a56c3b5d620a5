"""The documentation site's generated pages (run by ``mkdocs-gen-files`` when the site is built;
never hand-copied): the home page from README.md, one page per behaviour from its module's
docstring and the newest baseline's rows, the divergence atlas from the newest baseline's
declarations, and a chart of where TensorFlow's observations changed between releases.

Everything comes from files committed in the checkout: ``cases/test_*.py`` (read with ``ast``,
not imported) and ``reports/baselines/*.json`` plus ``reports/nightly/*.json``.
"""

from __future__ import annotations

import ast
import html
import re
import sys
from pathlib import Path

import mkdocs_gen_files

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the checkout's suite

from suite.report import files, query, schema  # noqa: E402


def _e(x) -> str:
    return html.escape("" if x is None else str(x), quote=True)


def prose(doc: str) -> str:
    """A docstring (plain text with code spans) as Markdown: outside its code spans the
    characters Markdown would read as links, emphasis or HTML are escaped.

    >>> prose("vjp(f, z)[1](1.0) is x**2 <b>, not ``a[1](2)``")
    'vjp(f, z)\\[1\\](1.0) is x\\*\\*2 &lt;b&gt;, not ``a[1](2)``'
    """
    parts = re.split(r"(``.*?``|`[^`\n]*`)", doc, flags=re.S)
    for i in range(0, len(parts), 2):
        parts[i] = re.sub(r"([\\\[\]*_])", r"\\\1", parts[i]).replace("<", "&lt;").replace(">", "&gt;")
    return "".join(parts)


def baselines() -> list[Path]:
    found = sorted((ROOT / "reports" / "baselines").glob("tf-*.json"), key=files.version_key)
    nightly = sorted((ROOT / "reports" / "nightly").glob("tf-*.json"), key=files.version_key)
    return found + nightly[-1:]


def newest_release() -> Path:
    return sorted((ROOT / "reports" / "baselines").glob("tf-*.json"), key=files.version_key)[-1]


def home() -> None:
    """index.md: the README, its links into docs/ made relative to the site."""
    text = (ROOT / "README.md").read_text(encoding="utf-8").replace("](docs/", "](")
    with mkdocs_gen_files.open("index.md", "w") as f:
        f.write(text)


def _module_facts(path: Path) -> dict:
    """A case module's docstring and its ``behaviour(...)`` call's literal arguments, by ``ast``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    facts = {"doc": ast.get_docstring(tree) or "", "id": None, "title": None, "sources": (), "tests": {}}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name.startswith("test_"):
            facts["tests"][node.name] = ast.get_docstring(node) or ""
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "BEHAVIOUR" for t in node.targets):
            call = node.value
            if isinstance(call, ast.Call):
                if call.args:
                    facts["id"] = ast.literal_eval(call.args[0])
                for kw in call.keywords:
                    if kw.arg in ("title", "sources"):
                        try:
                            facts[kw.arg] = ast.literal_eval(kw.value)
                        except ValueError:
                            pass
    return facts


def _generic_tests() -> dict:
    """The op table's generic tests (bound into a module by ``properties.bind``, so not in its
    source): their descriptions, from ``suite/ops/properties.py``'s docstring."""
    doc = ast.get_docstring(ast.parse((ROOT / "suite" / "ops" / "properties.py").read_text(encoding="utf-8"))) or ""
    return {
        m.group(1): " ".join(m.group(2).split())
        for m in re.finditer(r"- ``(test_op_\w+)``: (.*?)(?=\n- |\n\n|$)", doc, re.S)
    }


GENERIC_TESTS = _generic_tests()


def behaviours(report: dict, release: str) -> list[tuple[str, str]]:
    """behaviours/<id>.md per case module; returns (id, title) in module order."""
    from suite.report import model

    tables = {t["behaviour"]: t for t in model.observation_tables(report, query.columns(report))}
    atlas = query.atlas(report)
    out = []
    for path in sorted((ROOT / "cases").glob("test_*.py")):
        facts = _module_facts(path)
        bid = facts["id"] or query.behaviour_of_module(path.stem)
        title = facts["title"] or facts["doc"].split("\n", 1)[0]
        out.append((bid, title))
        rows = [r for r in report["results"] if r["behaviour"] == bid]
        lines = [f"# {bid}", "", f"`cases/{path.name}` · sources: {', '.join(map(str, facts['sources'])) or '-'}", ""]
        lines += [prose(facts["doc"]), "", f"## Rows in the TF {release} baseline", ""]
        counts = {}
        for r in rows:
            counts.setdefault(query.short_test(r["test"]), {}).setdefault(query.subject_of(r), r["outcome"])
        cols = [c for c in query.columns(report) if any(c in per for per in counts.values())]
        if counts:
            lines += ["| test | " + " | ".join(cols) + " |", "|---|" + "---|" * len(cols)]
            for test, per in counts.items():
                lines.append(f"| `{test}` | " + " | ".join(per.get(c, "") for c in cols) + " |")
        lines += ["", "## What each test checks, and the keys it observes", ""]
        for test in counts:
            keys = sorted({k for r in rows if query.short_test(r["test"]) == test for k in r.get("observed") or {}})
            doc = facts["tests"].get(test) or GENERIC_TESTS.get(test, "")
            lines += [f"### `{test}`", "", prose(doc) or "(no docstring)", ""]
            if keys:
                lines += ["Keys: " + ", ".join(f"`{k}`" for k in keys), ""]
        t = tables.get(bid)
        if t:
            head = "| key | " + " | ".join(c["id"] for c in t["columns"]) + " |"
            lines += ["", "## What each subject observed", "", head, "|---|" + "---|" * len(t["columns"])]
            for k in t["keys"]:
                vals = [query.md_escape(k["values"].get(c["id"], "")) for c in t["columns"]]
                lines.append(f"| `{query.md_escape(k['key'])}` | " + " | ".join(vals) + " |")
        mine = [e for e in atlas if e["behaviour"] == bid]
        if mine:
            lines += [
                "",
                f"## Declared divergences ({len(mine)})",
                "",
                "See the [atlas](../atlas.md) for all of them.",
                "",
            ]
            for e in mine:
                who = " ".join(x for x in (e["framework"], e["mode"], e["device"], e["versions"]) if x) or "all"
                link = f" ([link]({e['link']}))" if e["link"] else ""
                lines.append(f"- `{e['key']}` = `{e['declared']}` for {who}: {prose(e['reason'] or '')}{link}")
        with mkdocs_gen_files.open(f"behaviours/{bid}.md", "w") as f:
            f.write("\n".join(lines) + "\n")
    return out


def behaviour_index(items, release) -> None:
    lines = ["# Behaviours, one page each", "",
             f"Generated from the case modules and the TF {release} baseline. The table of what each checks "
             "is [Behaviours](../behaviours.md).", ""]  # fmt: skip
    lines += [f"- [{bid}]({bid}.md): {query.md_escape(title)}" for bid, title in items]
    with mkdocs_gen_files.open("behaviours/index.md", "w") as f:
        f.write("\n".join(lines) + "\n")


HEADINGS = ("behaviour", "key", "declared for", "declared", "TensorFlow", "JAX", "PyTorch", "reason", "status")


def atlas_page(report: dict, release: str) -> int:
    """atlas.md: every declared divergence as a filterable table; returns how many."""
    entries = query.atlas(report)
    per = {}
    for e in entries:
        c = per.setdefault(e["behaviour"], {"n": 0, "matched": 0, "not-applicable": 0})
        c["n"] += 1
        if e["status"] in c:
            c[e["status"]] += 1
    out = [
        "---",
        "hide:",
        "  - navigation",
        "  - toc",
        "---",
        "",
        "# The divergence atlas",
        "",
        f"Every place where a framework's answer is declared to differ, as the TF {release} baseline "
        f"measured it: **{len(entries)} declarations** in {len(per)} behaviours. Each row gives the key, "
        "for whom the declaration holds (framework, mode, device, releases), the declared answer, what "
        "TensorFlow's modes, JAX and PyTorch answered for the same key, the reason and a link. "
        "`not-applicable`: no row of its scope ran here (another release, an absent GPU).",
        "",
    ]
    out.append(
        "Per behaviour (declarations, of which not applicable here): "
        + " · ".join(
            f"[{b}](behaviours/{b}.md) {c['n']}" + (f" ({c['not-applicable']})" if c["not-applicable"] else "")
            for b, c in sorted(per.items())
        )  # fmt: skip
        + "."
    )
    out += [
        "",
        '<div class="atlas-filters">',
        '<input id="atlas-text" type="search" placeholder="filter: behaviour, key, op, reason" size="40">',
        '<select id="atlas-framework"><option value="">any framework</option>'
        + "".join(f'<option value="{f}">{f}</option>' for f in ("tensorflow", "jax", "torch"))
        + "</select>",
        '<select id="atlas-mode"><option value="">any mode</option>'
        + "".join(f'<option value="{m}">{m}</option>' for m in ("eager", "function", "xla", "graph", "jit"))
        + "</select>",
        '<span id="atlas-count"></span>',
        "</div>",
        "",
        '<div class="atlas-wrap"><table id="atlas"><thead><tr>'
        + "".join(f"<th>{h}</th>" for h in HEADINGS)
        + "</tr></thead><tbody>",
    ]
    for e in entries:
        scope = " ".join(x for x in (e["framework"], e["mode"], e["device"], e["versions"]) if x) or "all"
        cells = []
        for fw in ("tensorflow", "jax", "torch"):
            ans = e["answers"].get(fw, {})
            cells.append("<br>".join(f"<b>{_e(m)}</b> <code>{_e(v)}</code>" for m, v in ans.items()))
        link = f' <a href="{_e(e["link"])}">link</a>' if e["link"] else ""
        out.append(
            f'<tr data-framework="{_e(e["framework"] or "")}" data-mode="{_e(e["mode"] or "")}">'
            f'<td><a href="../behaviours/{_e(e["behaviour"])}/">{_e(e["behaviour"])}</a></td>'
            f"<td><code>{_e(e['key'])}</code></td><td>{_e(scope)}</td><td><code>{_e(e['declared'])}</code></td>"
            f"<td>{cells[0]}</td><td>{cells[1]}</td><td>{cells[2]}</td><td>{_e(e['reason'])}{link}</td>"
            f"<td>{_e(e['status'])}</td></tr>"
        )
    out += ["</tbody></table></div>", ""]
    with mkdocs_gen_files.open("atlas.md", "w") as f:
        f.write("\n".join(out))
    return len(entries)


def chart_page(paths: list[Path]) -> None:
    """version-chart.md: behaviours down, releases across, each cell the number of TensorFlow
    observation keys that changed since the release to its left (an inline SVG)."""
    reports = [schema.load(p) for p in paths]
    versions = query.column_labels(reports, [p.stem for p in paths])
    moved = query.moved_keys(reports, [p.stem for p in paths])
    bs = sorted({b for r in reports for b in query.behaviours(r)})
    cw, ch, left, top = 44, 18, 215, 100
    width, height = left + cw * len(versions) + 60, top + ch * len(bs) + 10
    svg = [f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" width="100%" '
           'font-family="sans-serif" font-size="11" role="img" '
           'aria-label="observation changes per behaviour and release">']  # fmt: skip
    for j, v in enumerate(versions):
        x, y = left + j * cw + cw / 2, top - 6
        turn = f"rotate(-40 {x} {y})"
        svg.append(f'<text x="{x}" y="{y}" text-anchor="start" transform="{turn}">{_e(v)}</text>')
    own = {k: [x for x in keys if not query.ORACLE_KEY.match(x)] for k, keys in moved.items()}
    peak = max((len(k) for k in own.values()), default=1) or 1
    for i, b in enumerate(bs):
        y = top + i * ch
        svg.append(f'<text x="{left - 6}" y="{y + ch - 5}" text-anchor="end">{_e(b)}</text>')
        for j, v in enumerate(versions):
            keys = moved.get((b, v), ())
            n = sum(not query.ORACLE_KEY.match(k) for k in keys)  # TensorFlow's own, not an oracle's answer
            shade = "#f3f3f3" if not n else f"rgba(204,102,0,{0.25 + 0.75 * n / peak:.2f})"
            tip = f"{b} at TF {v}: {n} key(s) changed, {len(keys) - n} oracle answer(s)"
            svg.append(f'<rect x="{left + j * cw}" y="{y}" width="{cw - 2}" height="{ch - 2}" fill="{shade}">'
                       f"<title>{_e(tip)}</title></rect>")  # fmt: skip
            if n:
                svg.append(f'<text x="{left + j * cw + cw / 2 - 1}" y="{y + ch - 5}" text-anchor="middle">{n}</text>')
    svg.append("</svg>")
    lines = ["# Where TensorFlow's observations changed", "",
             "Behaviours down, releases across (the committed baselines, then the nightly); each cell is the "
             "number of TensorFlow's own observation keys that changed since the release to its left (the "
             "oracles' answers recorded in its rows, which move with the oracles' versions, are not counted; "
             "the values are in [the version matrix](versions.md)).", "",
             "".join(svg), ""]  # fmt: skip
    with mkdocs_gen_files.open("version-chart.md", "w") as f:
        f.write("\n".join(lines))


def main() -> None:
    home()
    path = newest_release()
    report = schema.load(path)
    release = query.tf_version(report)
    behaviour_index(behaviours(report, release), release)
    atlas_page(report, release)
    chart_page(baselines())


main()
