"""Semantic changelog between two reports (``autodiff-semantics diff OLD NEW``).

Rows are matched by test id (behaviour, test, framework, mode, device). Each pair is
classified: observation changed (old -> new per key), newly failing, newly passing,
newly skipped or unavailable, disappeared, new; and per behaviour, deprecation warnings
that are new or gone. Regressions are rows that passed (or were new) and now fail, error
or crash, passing rows that disappeared, and TensorFlow rows that became skipped.
The Markdown puts what an upgrade check reads first: changed observations, newly
failing, newly skipped, new deprecations.
"""

from __future__ import annotations

import dataclasses

from suite.report.render import is_asserted

BAD = ("failed", "error", "crashed")
QUIET = ("skipped", "unavailable")
NOT_OBSERVED = "(not observed)"


@dataclasses.dataclass
class Change:
    kind: str
    behaviour: str
    subject: str
    test: str
    old: object = None
    new: object = None
    detail: str = ""
    asserted: bool = True  # an observation change: was the key held to an expectation?


@dataclasses.dataclass
class Changelog:
    old_label: str
    new_label: str
    changes: list
    #: (what, old, new) for each difference of the two runs' environments: frameworks,
    #: packages (Keras, NumPy, ...), Python, profile and seed, options, suite revision
    environment: list = dataclasses.field(default_factory=list)
    #: what makes the comparison less than whole: a partial (interrupted) report
    caveats: list = dataclasses.field(default_factory=list)

    @property
    def regressions(self) -> list:
        """Rows that fail now, passing rows that are gone, and TensorFlow rows that no longer
        run (a subject that went missing is not a green upgrade)."""
        return [
            c
            for c in self.changes
            if c.kind in ("newly failing", "disappeared")
            or (c.kind == "newly skipped" and c.subject.startswith("tensorflow-"))
        ]

    def by_kind(self, kind) -> list:
        return [c for c in self.changes if c.kind == kind]


def _subject(r) -> str:
    return f"{r['framework']}-{r['mode']}-{r['device']}"


def _label(report, path) -> str:
    fw = report.get("environment", {}).get("frameworks", {}).get("tensorflow", {})
    v = fw.get("version")
    return f"{path} (TensorFlow {v})" if v else str(path)


def _framework(info) -> str:
    info = info or {}
    if not info.get("version"):
        return "not installed"
    return f"{info['version']} ({','.join(info.get('devices') or []) or 'no devices'})"


def environment_changes(old_env: dict, new_env: dict) -> list[tuple[str, str, str]]:
    """What differs between two runs' environments, frameworks first, then packages.

    >>> environment_changes({"packages": {"keras": "3.15.1"}}, {"packages": {"keras-nightly": "3.16.0.dev"}})
    [('keras', '3.15.1', 'not installed'), ('keras-nightly', 'not installed', '3.16.0.dev')]
    """
    out = []
    fa, fb = old_env.get("frameworks") or {}, new_env.get("frameworks") or {}
    for name in sorted(set(fa) | set(fb)):
        a, b = _framework(fa.get(name)), _framework(fb.get(name))
        if a != b:
            out.append((name, a, b))
    pa, pb = old_env.get("packages") or {}, new_env.get("packages") or {}
    for name in sorted(set(pa) | set(pb)):
        a, b = pa.get(name, "not installed"), pb.get(name, "not installed")
        if a != b:
            out.append((name, a, b))
    for key in ("python", "platform", "hypothesis", "options", "allowed_missing", "faults", "suite_revision"):
        a, b = old_env.get(key), new_env.get(key)
        if a != b:
            out.append((key, _plain(a), _plain(b)))
    return out


def _plain(v) -> str:
    if isinstance(v, dict):
        return ", ".join(f"{k}={_plain(x)}" for k, x in v.items())
    if isinstance(v, (list, tuple)):
        return ",".join(map(str, v))
    return "none" if v is None else str(v)


_JAX_MODES, _TORCH_MODES = ("eager", "jit"), ("eager",)


class Scope:
    """What a report ran: its behaviours, the frameworks, modes and devices it selected, and
    whether it ran to the end. A row one report has and the other did not select is "not
    run" there, not a row that disappeared (a subset or partial run is no regression)."""

    def __init__(self, report: dict):
        opts = (report.get("environment") or {}).get("options") or {}
        self.behaviours = {r["behaviour"] for r in report["results"]}
        self.frameworks, self.modes, self.devices = (opts.get(k) for k in ("frameworks", "modes", "devices"))
        self.partial = bool(report.get("partial"))

    def selected(self, row) -> bool:
        """Would this report have run ``row`` (had it not been interrupted)?"""
        if row["behaviour"] not in self.behaviours:
            return False
        if self.frameworks is not None and row["framework"] not in self.frameworks:
            return False
        if self.devices is not None and row["device"] not in self.devices:
            return False
        # --modes selects TensorFlow's modes; oracle rows run in their own
        return self.modes is None or row["framework"] != "tensorflow" or row["mode"] in self.modes

    def describe(self, other: "Scope") -> str:
        parts = []
        if self.partial:
            parts.append("a partial (interrupted or unfinished) run")
        missing = sorted(other.behaviours - self.behaviours)
        if missing:
            parts.append(
                f"{len(missing)} behaviour(s) fewer ({', '.join(missing[:4])}{', ...' if len(missing) > 4 else ''})"
            )
        for name in ("frameworks", "modes", "devices"):
            mine, theirs = getattr(self, name), getattr(other, name)
            if mine is not None and theirs is not None and set(mine) < set(theirs):
                parts.append(f"{name} {','.join(mine)} only")
        return "; ".join(parts)


def diff(old: dict, new: dict, old_path="OLD", new_path="NEW", *, whole: bool = False) -> Changelog:
    """The changelog from ``old`` to ``new``. Rows that one report did not select (a subset or
    a partial run) are "not run", unless ``whole``: then every row of each is compared."""
    o = {r["test"]: r for r in old["results"]}
    n = {r["test"]: r for r in new["results"]}
    scope_old, scope_new = Scope(old), Scope(new)
    changes = []
    for test, a in o.items():
        b = n.get(test)
        subj = _subject(a)
        if b is None and not whole and (scope_new.partial or not scope_new.selected(a)):
            changes.append(Change("not run", a["behaviour"], subj, test, a["outcome"], None, f"not run in {new_path}"))
            continue
        if b is None:
            if a["outcome"] == "passed":
                changes.append(Change("disappeared", a["behaviour"], subj, test, a["outcome"], None))
            else:
                changes.append(Change("removed", a["behaviour"], subj, test, a["outcome"], None))
            continue
        ao, bo = a["outcome"], b["outcome"]
        if ao not in BAD and bo in BAD:
            changes.append(Change("newly failing", a["behaviour"], subj, test, ao, bo, b.get("error", "")))
        elif ao in BAD and bo == "passed":
            changes.append(Change("newly passing", a["behaviour"], subj, test, ao, bo))
        elif ao not in QUIET and bo in QUIET:
            changes.append(Change("newly skipped", a["behaviour"], subj, test, ao, bo, b.get("reason", "")))
        elif ao in QUIET and bo not in QUIET:
            changes.append(Change("newly running", a["behaviour"], subj, test, ao, bo))
        # A key only one side recorded is a change too (an API that appeared, a value no longer
        # observed), when both rows ran to the end: a failed row stops recording midway.
        both_ran = ao not in BAD + QUIET and bo not in BAD + QUIET
        for key in sorted(set(a.get("observed", {})) | set(b.get("observed", {}))):
            av, bv = a.get("observed", {}).get(key), b.get("observed", {}).get(key)
            asserted = is_asserted(a, key) or is_asserted(b, key)
            if av is not None and bv is not None and _canonical(av) != _canonical(bv):
                changes.append(Change("observation changed", a["behaviour"], subj, test, av, bv, key, asserted))
            elif both_ran and (av is None) != (bv is None):
                changes.append(
                    Change(
                        "observation changed",
                        a["behaviour"],
                        subj,
                        test,
                        NOT_OBSERVED if av is None else av,
                        NOT_OBSERVED if bv is None else bv,
                        key,
                        asserted,
                    )
                )
    for test, b in n.items():
        if test not in o and not whole and (scope_old.partial or not scope_old.selected(b)) and b["outcome"] not in BAD:
            changes.append(
                Change("not run", b["behaviour"], _subject(b), test, None, b["outcome"], f"not run in {old_path}")
            )
            continue
        if test not in o:
            kind = "newly failing" if b["outcome"] in BAD else "new"
            changes.append(Change(kind, b["behaviour"], _subject(b), test, None, b["outcome"], b.get("error", "")))
    old_dep, new_dep = old.get("deprecations") or {}, new.get("deprecations") or {}
    ran_in_both = scope_old.behaviours & scope_new.behaviours
    for beh in sorted(set(old_dep) | set(new_dep)):
        if not whole and beh not in ran_in_both:
            continue  # the behaviour did not run in one of them: its warnings say nothing
        was, now = set(old_dep.get(beh, ())), set(new_dep.get(beh, ()))
        for msg in sorted(now - was):
            changes.append(Change("new deprecation", beh, "tensorflow", "", None, msg, msg))
        for msg in sorted(was - now):
            changes.append(Change("deprecation gone", beh, "tensorflow", "", msg, None, msg))
    caveats = []
    for scope, other, label in ((scope_old, scope_new, old_path), (scope_new, scope_old, new_path)):
        what = scope.describe(other)
        if what:
            how = "every row compared (--whole)" if whole else "rows it did not run are listed as not run"
            caveats.append(f"{label} is {what}: {how}")
    return Changelog(
        _label(old, old_path),
        _label(new, new_path),
        changes,
        environment_changes(old.get("environment") or {}, new.get("environment") or {}),
        caveats,
    )


def _canonical(v):
    """Several values observed over the examples are a set: the order they came in is no change."""
    import json

    return sorted(json.dumps(x, sort_keys=True, default=str) for x in v) if isinstance(v, list) else v


def _short(test: str) -> str:
    return test.split("::", 1)[-1]


def code_span(v) -> str:
    """A value as a Markdown code span that survives any content (backticks, pipes, ``; ``)."""
    text = str(v).replace("|", "\\|").replace("\n", " ")
    fence = "``" if "`" in text else "`"
    return f"{fence}{text}{fence}" if text else "(empty)"


def markdown(log: Changelog) -> str:
    marker = " (partial or subset: see the caveat)" if log.caveats else ""
    out = [f"## Semantic changelog: {log.old_label} -> {log.new_label}{marker}", ""]
    out += [f"**Caveat**: {c}." for c in log.caveats] + ([""] if log.caveats else [])
    if log.environment:
        out += ["### Environment", "", "| what | old | new |", "|---|---|---|"]
        out += [f"| {what} | {code_span(a)} | {code_span(b)} |" for what, a, b in log.environment]
        out.append("")
    if not log.changes:
        return "\n".join(out + ["No behaviour changed: same outcomes and the same observations in every row.", ""])
    regs = log.regressions
    out.append(f"**{len(regs)} regression(s)**" if regs else "No regressions.")
    out.append("")
    obs = log.by_kind("observation changed")
    if obs:
        out += [
            "### Observations that changed",
            "",
            "| behaviour | subject | test | key | kind | old | new |",
            "|---|---|---|---|---|---|---|",
        ]
        out += [
            f"| {c.behaviour} | {c.subject} | {code_span(_short(c.test))} | {code_span(c.detail)} | "
            f"{'asserted' if c.asserted else 'informational'} | {code_span(c.old)} | {code_span(c.new)} |"
            for c in obs
        ]
        out.append("")
        per_b = {}
        for c in obs:
            per_b.setdefault(c.behaviour, set()).add(f"{code_span(c.detail)}: {code_span(c.old)} → {code_span(c.new)}")
        out += ["Behaviours whose observations changed:", ""]
        for b, v in sorted(per_b.items()):
            out += [f"- **{b}**:"] + [f"  - {x}" for x in sorted(v)]
        out.append("")
    for kind in (
        "newly failing",
        "newly skipped",
        "new deprecation",
        "disappeared",
        "newly passing",
        "newly running",
        "new",
        "removed",
        "not run",
        "deprecation gone",
    ):
        cs = log.by_kind(kind)
        if not cs:
            continue
        if kind == "not run":  # a subset's or partial run's missing rows: counted, not listed
            out += [f"### Not run in one of the two ({len(cs)} rows, not compared)", ""]
            per: dict = {}
            for c in cs:
                per.setdefault((c.detail, c.behaviour), set()).add(c.subject)
            out += [f"- {where}: **{b}** ({', '.join(sorted(subj))})" for (where, b), subj in sorted(per.items())]
            out.append("")
            continue
        if kind in ("new deprecation", "deprecation gone"):
            out += [f"### {kind.capitalize()}s ({len(cs)})", ""]
            out += [f"- **{c.behaviour}**: `{c.detail}`" for c in cs]
            out.append("")
            continue
        out += [
            f"### {kind.capitalize()} ({len(cs)})",
            "",
            "| behaviour | subject | test | old | new | detail |",
            "|---|---|---|---|---|---|",
        ]
        out += [
            f"| {c.behaviour} | {c.subject} | `{_short(c.test)}` | {c.old} | {c.new} | "
            f"{str(c.detail).replace('|', '/').splitlines()[0][:160] if c.detail else ''} |"
            for c in cs
        ]
        out.append("")
    return "\n".join(out)
