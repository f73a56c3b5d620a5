"""Renderings of a report: terminal matrix, speed lines, Markdown."""
from __future__ import annotations

import collections

SYMBOL = {"passed": "ok", "failed": "FAIL", "error": "ERR", "skipped": "skip", "crashed": "CRASH",
          "unavailable": "n/a", "xfailed": "xfail"}
ORDER = ("crashed", "error", "failed", "unavailable", "passed", "xfailed", "skipped")


def columns(report) -> list[str]:
    seen = []
    for r in report["results"]:
        c = f"{r['framework']}-{r['mode']}-{r['device']}"
        if c not in seen:
            seen.append(c)
    return seen


def cells(report) -> dict:
    """(behaviour, column) -> Counter of outcomes."""
    out = collections.defaultdict(collections.Counter)
    for r in report["results"]:
        out[(r["behaviour"], f"{r['framework']}-{r['mode']}-{r['device']}")][r["outcome"]] += 1
    return out


def cell_text(counter) -> str:
    if not counter:
        return ""
    total = sum(v for k, v in counter.items() if k != "skipped")  # skipped rows ran nothing
    worst = next(o for o in ORDER if counter.get(o))
    if worst == "passed":
        return f"ok {counter['passed']}/{total}"
    if worst in ("skipped",):
        return "skip"
    return f"{SYMBOL[worst]} {counter[worst]}/{total}"


def behaviours(report) -> list[str]:
    return list(dict.fromkeys(r["behaviour"] for r in report["results"]))


def terminal_matrix(report) -> list[str]:
    """Behaviour x column; columns where every row was skipped are folded into one line."""
    cols, c, bs = columns(report), cells(report), behaviours(report)
    skipped = [col for col in cols if all(set(c.get((b, col), {})) <= {"skipped"} for b in bs)]
    cols = [col for col in cols if col not in skipped]
    if not cols:
        return [f"every row skipped ({', '.join(skipped)})"]
    w0 = max(len("behaviour"), *(len(b) for b in bs))
    widths = [max(len(col), 9) for col in cols]
    lines = ["  ".join(["behaviour".ljust(w0)] + [col.ljust(w) for col, w in zip(cols, widths)])]
    for b in bs:
        lines.append("  ".join([b.ljust(w0)] + [cell_text(c.get((b, col))).ljust(w) for col, w in zip(cols, widths)]))
    if skipped:
        reasons = sorted({r.get("reason", "") for r in report["results"]
                          if f"{r['framework']}-{r['mode']}-{r['device']}" in skipped})
        lines.append(f"skipped throughout: {', '.join(skipped)} ({'; '.join(x for x in reasons if x)[:300]})")
    return lines


def speed(report) -> list[dict]:
    """Examples per second per framework-mode-device, from the measured rows."""
    agg = collections.defaultdict(lambda: [0, 0.0, 0.0])
    for r in report["results"]:
        if r.get("outcome") != "passed":
            continue
        col = f"{r['framework']}-{r['mode']}-{r['device']}"
        agg[col][0] += r.get("examples") or 0
        agg[col][1] += r.get("duration_s") or 0.0
    return [{"column": k, "examples": n, "test_s": round(t, 2), "examples_per_s": round(n / t, 1) if t else None}
            for k, (n, t, _) in agg.items()]


def slowest(report, n=5) -> list[dict]:
    rows = sorted(report["results"], key=lambda r: -(r.get("duration_s") or 0))
    return rows[:n]


def test_time(report) -> float:
    """Seconds spent in tests: the sum of every row's duration (what the 5-minute budget counts)."""
    return sum(r.get("duration_s") or 0 for r in report["results"])


def framework_label(name: str, info: dict) -> str:
    """``tensorflow 2.21.0 (cpu)``: a framework's measured version and devices, on one line."""
    return f"{name} {info.get('version') or 'not installed'} ({','.join(info.get('devices') or [])})"


def speed_lines(report) -> list[str]:
    total = test_time(report)
    lines = [f"test time {total:.1f}s; examples per second by mode: " +
             ", ".join(f"{s['column']} {s['examples_per_s']}" for s in speed(report))]
    for r in slowest(report, 3):
        lines.append(f"  slow: {r['duration_s']:.2f}s {r['test']}")
    return lines


def _md_escape(s) -> str:
    return str(s).replace("|", "\\|").replace("\n", " ")


def markdown(report) -> str:
    env = report.get("environment", {})
    fws = env.get("frameworks", {})
    out = ["# autodiff-semantics report", ""]
    if report.get("partial"):
        out += ["**PARTIAL REPORT**: the run was interrupted; rows below are what it measured before it stopped.", ""]
    out.append(f"Created {report.get('created')}; Python {env.get('python')} on {env.get('platform')}; "
               f"Hypothesis profile {env.get('hypothesis', {}).get('profile')}; suite {env.get('suite_revision')}.")
    out.append("")
    out.append("| framework | version | devices |")
    out.append("|---|---|---|")
    for name, f in fws.items():
        out.append(f"| {name} | {f.get('version') or 'not installed'} | {', '.join(f.get('devices') or []) or _md_escape(f.get('error', ''))} |")
    out.append("")
    counts = collections.Counter(r["outcome"] for r in report["results"])
    out.append("Outcomes: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    out.append("")
    cols, c = columns(report), cells(report)
    out.append("| behaviour | " + " | ".join(cols) + " |")
    out.append("|---|" + "---|" * len(cols))
    for b in behaviours(report):
        out.append(f"| {b} | " + " | ".join(cell_text(c.get((b, col))) for col in cols) + " |")
    out.append("")
    obs = [r for r in report["results"] if r.get("observed")]
    if obs:
        out += ["## Observations", "", "| test | subject | outcome | observed | expected | max rel err |", "|---|---|---|---|---|---|"]
        for r in obs:
            name = r["test"].split("::", 1)[-1].split("[")[0]
            out.append(f"| {r['behaviour']}::{name} | {r['framework']}-{r['mode']}-{r['device']} | {r['outcome']} | "
                       f"{_md_escape(r['observed'])} | {_md_escape(r.get('expected', {}))} | "
                       f"{_md_escape({k: f'{v:.1e}' for k, v in r.get('max_rel_err', {}).items()})} |")
        out.append("")
    decl = report.get("declared") or []
    if decl:
        out += ["## Declared divergences", "", "| key | where | observed | matched rows | reason | link |", "|---|---|---|---|---|---|"]
        for d in decl:
            where = "-".join(x or "*" for x in (d.get("framework"), d.get("mode"), d.get("device")))
            if d.get("versions"):
                where += f" {d['versions']}"
            out.append(f"| {d['key']} | {where} | {_md_escape(d['observed'])} | {d.get('matched', 0)} | {_md_escape(d['reason'])} | {d['link']} |")
        stale = [d for d in decl if not d.get("matched")]
        if stale:
            out += ["", f"{len(stale)} declared divergence(s) matched no row in this run (stale, or their rows did not run)."]
        out.append("")
    bad = [r for r in report["results"] if r["outcome"] in ("failed", "error", "crashed")]
    if bad:
        out += ["## Failures", ""]
        for r in bad:
            out += [f"### {r['test']}", "", "```", r.get("error", ""), "```", ""]
            if r.get("reproducer"):
                out += ["```python", r["reproducer"], "```", ""]
    sp = speed(report)
    if sp:
        out += ["## Speed", "", "| subject | examples | test s | examples/s |", "|---|---|---|---|"]
        out += [f"| {s['column']} | {s['examples']} | {s['test_s']} | {s['examples_per_s']} |" for s in sp]
        out += ["", f"Test time (all rows): {test_time(report):.1f} s.", "", "Slowest tests:", ""]
        out += [f"- {r['duration_s']:.2f}s `{r['test']}`" for r in slowest(report)]
        out.append("")
    return "\n".join(out)


def tf_version(report) -> str:
    return (report.get("environment", {}).get("frameworks", {}).get("tensorflow", {}) or {}).get("version") or "?"


def version_matrix_md(reports) -> list[str]:
    """Behaviour x TensorFlow version (TensorFlow rows only), worst outcome per cell."""
    versions = [tf_version(r) for r in reports]
    cells_by = {}
    for rep, v in zip(reports, versions):
        for r in rep["results"]:
            if r["framework"] == "tensorflow":
                cells_by.setdefault((r["behaviour"], v), collections.Counter())[r["outcome"]] += 1
    bs = list(dict.fromkeys(b for rep in reports for b in behaviours(rep)))
    lines = ["| behaviour | " + " | ".join(f"TF {v}" for v in versions) + " |", "|---|" + "---|" * len(versions)]
    for b in bs:
        lines.append(f"| {b} | " + " | ".join(cell_text(cells_by.get((b, v), collections.Counter())) or "-"
                                             for v in versions) + " |")
    return lines


def consecutive_changes_md(reports) -> list[str]:
    """Per consecutive pair of versions: the TensorFlow observations that changed."""
    from suite.report import diff

    lines = []
    for old, new in zip(reports, reports[1:]):
        log = diff.diff(old, new)
        obs = [c for c in log.changes if c.kind == "observation changed" and c.subject.startswith("tensorflow")]
        outs = [c for c in log.changes if c.kind in ("newly failing", "newly passing")
                and c.subject.startswith("tensorflow")]
        head = f"- **TF {tf_version(old)} -> {tf_version(new)}**: "
        if not obs and not outs:
            lines.append(head + "no TensorFlow observation changed.")
            continue
        per, keys = {}, {}
        for c in obs:
            if diff.NOT_OBSERVED in (c.old, c.new):  # keys one side did not record: listed by name only
                how = "newly observed" if c.old == diff.NOT_OBSERVED else "no longer observed"
                k = keys.setdefault((c.behaviour, how), ({}, set()))
                k[0].setdefault(c.detail, c.new if c.old == diff.NOT_OBSERVED else c.old)
                k[1].add(c.subject.split("-")[1])
                continue
            per.setdefault((c.behaviour, c.detail, str(c.old), str(c.new)), []).append(c.subject.split("-")[1])
        parts = [f"{b} `{k}`: `{o}` -> `{n}` ({', '.join(sorted(set(m)))})" for (b, k, o, n), m in sorted(per.items())]
        for (b, how), (vals, modes) in sorted(keys.items()):
            shown = ", ".join(f"`{k}`=`{v}`" for k, v in sorted(vals.items())[:3])
            more = f" and {len(vals) - 3} more" if len(vals) > 3 else ""
            parts.append(f"{b} {how} ({', '.join(sorted(modes))}): {shown}{more}")
        if outs:
            parts.append(f"{len(outs)} row(s) changed outcome: " + ", ".join(
                sorted({f"{c.behaviour} {c.old}->{c.new}" for c in outs})))
        lines.append(head + "; ".join(parts))
    return lines
