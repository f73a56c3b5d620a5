"""The upgrade view of two reports (``autodiff-semantics report OLD NEW``): one model, computed
once from :func:`suite.report.diff.diff`, rendered by the templates ``upgrade.md.j2`` and
``upgrade.html.j2`` (Jinja2, which escapes every value in HTML).

Per behaviour, each changed observation once, with where it changed: ``forward:tf.gather_nd
(IGNORE)[above]: clamp -> zero-fill`` in "TensorFlow xla (cpu)", not one table row per test
and subject. Then the rows that newly fail, newly skip or newly pass, the new and gone
deprecations, and what one of the two did not run.
"""

from __future__ import annotations

import json

from suite import bisection, registry
from suite.report import diff as difflib_, query
from suite.report.pages import template_env

FRAMEWORK_NAMES = registry.LABELS


def where(subjects) -> str:
    """``tensorflow-xla-cpu``, ``tensorflow-eager-cpu`` -> ``TensorFlow eager, xla (cpu)``; one
    phrase per framework and device set, in a stable order.

    >>> where(["tensorflow-xla-cpu", "tensorflow-eager-cpu", "jax-jit-cpu"])
    'TensorFlow eager, xla (cpu); JAX jit (cpu)'
    """
    per: dict = {}
    for s in subjects:
        fw, mode, dev = (s.split("-") + ["?", "?"])[:3]
        per.setdefault(fw, {}).setdefault(mode, set()).add(dev)
    order = {"eager": 0, "function": 1, "xla": 2, "graph": 3, "jit": 4}
    out = []
    for fw in sorted(per, key=lambda f: list(FRAMEWORK_NAMES).index(f) if f in FRAMEWORK_NAMES else 9):
        by_devs: dict = {}
        for mode, devs in per[fw].items():
            by_devs.setdefault(tuple(sorted(devs)), []).append(mode)
        for devs, modes in sorted(by_devs.items()):
            modes = ", ".join(sorted(modes, key=lambda m: order.get(m, 9)))
            out.append(f"{FRAMEWORK_NAMES.get(fw, fw)} {modes} ({','.join(devs)})")
    return "; ".join(out)


def _value(v) -> str:
    if isinstance(v, list):
        return ", ".join(_value(x) for x in v)
    return v if isinstance(v, str) else json.dumps(v)


def model(old: dict, new: dict, old_label: str, new_label: str, *, whole: bool = False, bisect=None) -> dict:
    """Everything the upgrade pages show, computed once; ``bisect``: the state of ``autodiff-semantics
    bisect`` over these two reports, whose findings each change shows (the first nightly with the
    new answer and the compare link)."""
    log = difflib_.diff(old, new, old_label, new_label, whole=whole)
    seen = bisection.first_seen(bisect) if bisect else {}
    grouped: dict = {}
    for c in log.by_kind("observation changed"):
        key = (c.behaviour, c.detail, _value(c.old), _value(c.new))
        entry = grouped.setdefault(
            key, {"subjects": set(), "tests": set(), "asserted": False, "kinds": set(), "ids": set()}
        )
        entry["subjects"].add(c.subject)
        entry["ids"].add(c.test)
        entry["tests"].add(c.test.split("::", 1)[-1].split("[", 1)[0])
        entry["asserted"] |= c.asserted
        entry["kinds"].add(difflib_.change_class(c))
    context = _context(new)
    behaviours: dict = {}
    for (b, k, o, n), e in sorted(grouped.items()):
        kind = min(e["kinds"], key=difflib_.CLASSES.index)  # the one most in need of action
        answers, (reason, link) = context["answers"].get((b, k), {}), _declared_for(context, k, e["ids"])
        behaviours.setdefault(b, []).append(
            {
                "key": k,
                "old": o,
                "new": n,
                "kind": kind,
                "act": kind in difflib_.ACT,
                "where": where(e["subjects"]),
                "tests": sorted(e["tests"]),
                "asserted": e["asserted"],
                "oracles": "; ".join(f"{FRAMEWORK_NAMES[f]}: {answers[f]}" for f in registry.ORACLES if f in answers),
                "reason": reason,
                "link": link,
                **_first_in(seen, e["ids"], k),
            }
        )
    for cs in behaviours.values():  # what a user may need to act on first
        cs.sort(key=lambda c: difflib_.CLASSES.index(c["kind"]))

    def rows(kind):
        return [
            {
                "behaviour": c.behaviour,
                "subject": c.subject,
                "test": c.test.split("::", 1)[-1],
                "old": c.old,
                "new": c.new,
                "detail": (str(c.detail).splitlines() or [""])[0][:200],
            }
            for c in log.by_kind(kind)
        ]

    not_run: dict = {}
    for c in log.by_kind("not run"):
        not_run.setdefault((c.detail, c.behaviour), set()).add(c.subject)
    return {
        "bisect": bisect_summary(bisect),
        "old_label": log.old_label,
        "new_label": log.new_label,
        "caveats": log.caveats,
        "environment": [{"what": w, "old": a, "new": b} for w, a, b in log.environment],
        "regressions": len(log.regressions),
        "behaviours": [{"id": b, "changes": cs} for b, cs in behaviours.items()],
        "changed_keys": sum(len(cs) for cs in behaviours.values()),
        "to_act_on": sum(c["act"] for cs in behaviours.values() for c in cs),
        "newly_failing": rows("newly failing"),
        "newly_skipped": rows("newly skipped"),
        "disappeared": rows("disappeared"),
        "newly_passing": rows("newly passing"),
        "new_rows": len(log.by_kind("new")),
        "moved_rows": len(log.by_kind("moved")),
        "new_deprecations": [c.detail for c in log.by_kind("new deprecation")],
        "gone_deprecations": [c.detail for c in log.by_kind("deprecation gone")],
        "not_run": [{"where": w, "behaviour": b, "subjects": where(s)} for (w, b), s in sorted(not_run.items())],
    }


def _first_in(seen: dict, ids, key: str) -> dict:
    """Where the bisect placed a change seen in the rows ``ids``: ``first`` (each first nightly
    with the new answer: version, date, compare link) and ``bisect`` (other outcomes: ``before
    the oldest nightly``, ``open``, ``not reproduced``; ``not bisected`` where no row was)."""
    found = [seen[(t, key)] for t in sorted(ids) if (t, key) in seen]
    first = sorted(
        {
            (f["first_new"], f["first_date"], f["compare"] or "")
            for f in found
            if f["status"] == "placed" and f["first_new"]
        }
    )
    other = sorted({f["status"] for f in found if f["status"] != "placed"})
    if seen and not found:
        other = ["not bisected"]
    return {"first": [{"version": v, "date": d, "compare": u} for v, d, u in first], "bisect": other}


def bisect_summary(state) -> str:
    """One line for the page's head: what the bisect covered."""
    if not state:
        return ""
    rs = bisection.results(state)
    placed = sum(r["status"] == "placed" for r in rs)
    before = sum(r["status"] == "before the oldest nightly" for r in rs)
    return (
        f"Bisected over {len(state['candidates'])} tf-nightly builds ({state['candidates'][0]} to "
        f"{state['candidates'][-1]}), {len(state['probes'])} probed: {placed} of {len(rs)} row observations "
        f"placed on the nightly that made them, {before} already in the oldest nightly"
        + (f", {len(rs) - placed - before} not placed" if len(rs) - placed - before else "")
    )


def _context(report: dict) -> dict:
    """From the new report: per (behaviour, key), the oracles' answers (framework -> the values
    its rows saw, :func:`query.answers`); per (TensorFlow test, key), the reason and link of the
    declaration that row matched."""
    rows: dict = {}
    for r in report.get("results") or []:
        if r.get("framework") != "tensorflow":
            continue
        for key, d in (r.get("declared") or {}).items():
            if isinstance(d, dict) and (d.get("reason") or d.get("link")):
                rows[(r["test"], key)] = (d.get("reason") or "", d.get("link") or "")
    oracles = {}
    for k, per in query.answers(report).items():
        joined = {
            f: " | ".join(dict.fromkeys(v for vs in per[f].values() for v in vs)) for f in registry.ORACLES if f in per
        }
        if joined:
            oracles[k] = joined
    return {"answers": oracles, "rows": rows}


def _declared_for(context: dict, key: str, ids) -> tuple[str, str]:
    """The reason and link of a change seen in the TensorFlow rows ``ids``: the declaration those
    rows matched, or none (one of another mode, or an oracle's, would explain another answer)."""
    return next((context["rows"][(t, key)] for t in sorted(ids) if (t, key) in context["rows"]), ("", ""))


def _env():
    return template_env(strict=True)


def markdown(m: dict) -> str:
    return _env().get_template("upgrade.md.j2").render(**m)


def html(m: dict, *, css: str, matrix_html: str = "") -> str:
    """The upgrade page; ``matrix_html`` (already-escaped HTML of the version matrix) below it."""
    from markupsafe import Markup

    return _env().get_template("upgrade.html.j2").render(**m, css=Markup(css), matrix_html=Markup(matrix_html))
