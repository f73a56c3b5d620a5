"""Semantic changelog between two reports (``autodiff-semantics diff OLD NEW``).

Rows are matched by test id (behaviour, test, framework, mode, device); a row whose test
moved to another behaviour's module between the two suite revisions (the same test function
and parameters, the only one of that name on each side) is matched to its new place and listed
as moved, never as a row that disappeared beside a new one. Each pair is
classified: observation changed (old -> new per key), newly failing, newly passing,
newly skipped or unavailable, disappeared, new; and per behaviour, deprecation warnings
that are new or gone. Regressions are rows that passed (or were new) and now fail, error
or crash, passing rows that disappeared, and TensorFlow rows that became skipped.
The Markdown puts what an upgrade check reads first: changed observations, newly
failing, newly skipped, new deprecations.
"""

from __future__ import annotations

import dataclasses
import re

from suite import registry
from suite.report import query
from suite.report.query import code_span, is_asserted, tf_version

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
    #: an observation change: (did the old value agree with an oracle's answer in the old report,
    #: did the new one in the new report); None where no oracle answered the key
    oracles: tuple | None = None


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
    >>> environment_changes({"cpu": "AMD EPYC (family 25, model 1); avx2, avx, fma"}, {"cpu": None})
    [('cpu', 'AMD EPYC (family 25, model 1); avx2, avx, fma', 'none')]
    """
    out = []
    fa, fb = old_env.get("frameworks") or {}, new_env.get("frameworks") or {}
    for name in sorted(set(fa) | set(fb)):
        a, b = _framework(fa.get(name)), _framework(fb.get(name))
        if a != b:
            out.append((name, a, b))
    pa, pb = old_env.get("packages") or {}, new_env.get("packages") or {}
    # a report from before the header recorded packages says nothing about them
    missing_a = "not installed" if "packages" in old_env else "(not recorded)"
    missing_b = "not installed" if "packages" in new_env else "(not recorded)"
    for name in sorted(set(pa) | set(pb)):
        a, b = pa.get(name, missing_a), pb.get(name, missing_b)
        if a != b:
            out.append((name, a, b))
    for key in ("python", "platform", "cpu", "hypothesis", "options", "allowed_missing", "faults", "suite_revision"):
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


class Scope:
    """What a report ran: its behaviours, the frameworks, modes and devices it selected, and
    whether it ran to the end. A row one report has and the other did not select is "not
    run" there, not a row that disappeared (a subset or partial run is no regression)."""

    def __init__(self, report: dict):
        opts = (report.get("environment") or {}).get("options") or {}
        self.behaviours = {r["behaviour"] for r in report["results"]}
        self.frameworks, self.modes, self.devices = (opts.get(k) for k in ("frameworks", "modes", "devices"))
        self.partial = bool(report.get("partial"))
        #: behaviours it ran in part (deselected tests: -k, -m, test ids; -x): rows of theirs it lacks were not run
        self.incomplete = set(report.get("incomplete") or ())

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
        part = sorted(self.incomplete & self.behaviours)
        if part:
            parts.append(
                f"{len(part)} behaviour(s) run in part ({', '.join(part[:4])}{', ...' if len(part) > 4 else ''})"
            )
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
    moved = _moves(o, n)
    scope_old, scope_new = Scope(old), Scope(new)
    changes = []
    for test, a in o.items():
        b = n.get(moved.get(test, test))
        if b is None:
            changes.append(_gone(a, scope_new, new_path, whole))
            continue
        if test in moved:  # compared at its new place, under its new behaviour and test id
            changes.append(
                Change("moved", b["behaviour"], _subject(b), b["test"], a["behaviour"], b["behaviour"], test)
            )
            a = {**a, "behaviour": b["behaviour"], "test": b["test"]}
        changes += _outcome_change(a, b) + _observation_changes(a, b)
    arrived = set(moved.values())
    for test, b in n.items():
        if test not in o and test not in arrived:
            changes.append(_arrived(b, scope_old, old_path, whole))
    changes += _deprecation_changes(old, new, None if whole else scope_old.behaviours & scope_new.behaviours)
    _mark_oracle_agreement(changes, old, new)
    return Changelog(
        _label(old, old_path),
        _label(new, new_path),
        changes,
        environment_changes(old.get("environment") or {}, new.get("environment") or {}) + _schema_change(old, new),
        _caveats(scope_old, scope_new, old_path, new_path, whole),
    )


def _schema_change(old: dict, new: dict) -> list[tuple[str, str, str]]:
    """The schema version each report was written in, where they differ (an older one is read in
    today's words: :func:`suite.report.schema.migrate`)."""
    a, b = (r.get("migrated_from", r.get("schema_version")) for r in (old, new))
    if a == b:
        return []
    read = " (gradient kinds read in today's words)"
    return [
        (
            "schema_version",
            f"{a}{read if 'migrated_from' in old else ''}",
            f"{b}{read if 'migrated_from' in new else ''}",
        )
    ]


def _moves(o: dict, n: dict) -> dict:
    """Old test id -> new test id of each row that only moved: its test id is on one side only,
    and the test function with its parameters (the id after the module) is the only one of that
    name on either side, under another module.

    >>> row = lambda t: {"test": t}
    >>> old = {t: row(t) for t in ("cases/test_a.py::test_x[jax]", "cases/test_a.py::test_y[jax]")}
    >>> new = {t: row(t) for t in ("cases/test_b.py::test_x[jax]", "cases/test_a.py::test_y[jax]")}
    >>> _moves(old, new)
    {'cases/test_a.py::test_x[jax]': 'cases/test_b.py::test_x[jax]'}
    """

    def one_sided(rows, other):
        by_name: dict = {}
        for t in rows:
            by_name.setdefault(_short(t), []).append(t)
        return {k: ts[0] for k, ts in by_name.items() if len(ts) == 1 and ts[0] not in other}

    gone, came = one_sided(o, n), one_sided(n, o)
    return {t: came[k] for k, t in gone.items() if k in came}


def _gone(a: dict, scope_new: "Scope", new_path: str, whole: bool) -> Change:
    """A row of the old report that the new one lacks: not run there, or gone."""
    if not whole and (scope_new.partial or a["behaviour"] in scope_new.incomplete or not scope_new.selected(a)):
        return Change("not run", a["behaviour"], _subject(a), a["test"], a["outcome"], None, f"not run in {new_path}")
    kind = "disappeared" if a["outcome"] == "passed" else "removed"
    return Change(kind, a["behaviour"], _subject(a), a["test"], a["outcome"], None)


def _arrived(b: dict, scope_old: "Scope", old_path: str, whole: bool) -> Change:
    """A row only the new report has: not run in the old one, newly failing, or new."""
    ran_in_part = b["behaviour"] in scope_old.incomplete
    if not whole and (scope_old.partial or ran_in_part or not scope_old.selected(b)) and b["outcome"] not in BAD:
        return Change("not run", b["behaviour"], _subject(b), b["test"], None, b["outcome"], f"not run in {old_path}")
    kind = "newly failing" if b["outcome"] in BAD else "new"
    return Change(kind, b["behaviour"], _subject(b), b["test"], None, b["outcome"], b.get("error", ""))


#: (old outcome in, new outcome in, kind, the new row's field that says why)
_OUTCOME_RULES = (
    (lambda o: o not in BAD, lambda o: o in BAD, "newly failing", "error"),
    (lambda o: o in BAD, lambda o: o == "passed", "newly passing", None),
    (lambda o: o not in QUIET, lambda o: o in QUIET, "newly skipped", "reason"),
    (lambda o: o in QUIET, lambda o: o not in QUIET, "newly running", None),
)


def _outcome_change(a: dict, b: dict) -> list:
    ao, bo = a["outcome"], b["outcome"]
    for was, now, kind, why in _OUTCOME_RULES:
        if was(ao) and now(bo):
            return [Change(kind, a["behaviour"], _subject(a), a["test"], ao, bo, b.get(why, "") if why else "")]
    return []


def _observation_changes(a: dict, b: dict) -> list:
    """Each key whose value changed; a key only one side recorded is a change too (an API that
    appeared, a value no longer observed) when both rows ran whole: a failed row records up
    to its failing example only."""
    both_ran = a["outcome"] not in BAD + QUIET and b["outcome"] not in BAD + QUIET
    seen_a, seen_b = a.get("observed", {}), b.get("observed", {})
    out = []
    for key in sorted(set(seen_a) | set(seen_b)):
        av, bv = seen_a.get(key), seen_b.get(key)
        one_sided = (av is None) != (bv is None)
        if (one_sided and not both_ran) or (not one_sided and (av is None or _canonical(av) == _canonical(bv))):
            continue
        old_v, new_v = (NOT_OBSERVED if av is None else av), (NOT_OBSERVED if bv is None else bv)
        asserted = is_asserted(a, key) or is_asserted(b, key)
        out.append(Change("observation changed", a["behaviour"], _subject(a), a["test"], old_v, new_v, key, asserted))
    return out


def oracle_answers(report: dict) -> dict:
    """(behaviour, key) -> every value the oracles' rows (JAX, PyTorch) answered, as text."""
    out: dict = {}
    for k, per in query.answers(report).items():
        texts = {t for f in registry.ORACLES for vs in per.get(f, {}).values() for t in vs}
        if texts:
            out[k] = texts
    return out


def _mark_oracle_agreement(changes, old: dict, new: dict) -> None:
    """Set each changed observation's ``oracles``: whether its old (new) value is one an oracle
    answered in the old (new) report."""
    obs = [c for c in changes if c.kind == "observation changed"]
    if not obs:
        return
    before, after = oracle_answers(old), oracle_answers(new)
    for c in obs:
        a, b = before.get((c.behaviour, c.detail)), after.get((c.behaviour, c.detail))
        if a is not None and b is not None:
            c.oracles = (query.value_text(c.old) in a, query.value_text(c.new) in b)


def _deprecation_changes(old: dict, new: dict, only=None) -> list:
    """New and gone deprecation warnings per behaviour (``only``: the behaviours both ran; a
    behaviour only one ran says nothing by its warnings)."""
    old_dep, new_dep = old.get("deprecations") or {}, new.get("deprecations") or {}
    out = []
    for beh in sorted(set(old_dep) | set(new_dep)):
        if only is not None and beh not in only:
            continue
        was, now = set(old_dep.get(beh, ())), set(new_dep.get(beh, ()))
        out += [Change("new deprecation", beh, "tensorflow", "", None, m, m) for m in sorted(now - was)]
        out += [Change("deprecation gone", beh, "tensorflow", "", m, None, m) for m in sorted(was - now)]
    return out


def _caveats(scope_old: "Scope", scope_new: "Scope", old_path: str, new_path: str, whole: bool) -> list[str]:
    out = []
    for scope, other, label in ((scope_old, scope_new, old_path), (scope_new, scope_old, new_path)):
        what = scope.describe(other)
        if what:
            how = "every row compared (--whole)" if whole else "rows it did not run are listed as not run"
            out.append(f"{label} is {what}: {how}")
    return out


def _canonical(v):
    """Several values observed over the examples are a set: the order they came in is no change."""
    import json

    return sorted(json.dumps(x, sort_keys=True, default=str) for x in v) if isinstance(v, list) else v


def _short(test: str) -> str:
    return test.split("::", 1)[-1]


def markdown(log: Changelog) -> str:
    """The changelog as Markdown: caveats and environment first, then the changes by kind."""
    marker = " (partial or subset: see the caveat)" if log.caveats else ""
    out = [f"## Semantic changelog: {log.old_label} -> {log.new_label}{marker}", ""]
    out += [f"**Caveat**: {c}." for c in log.caveats] + ([""] if log.caveats else [])
    out += _environment_md(log)
    if not log.changes:
        return "\n".join(out + ["No behaviour changed: same outcomes and the same observations in every row.", ""])
    regs = log.regressions
    out += [f"**{len(regs)} regression(s)**" if regs else "No regressions.", ""]
    out += _observations_md(log.by_kind("observation changed"))
    for kind in KIND_ORDER:
        cs = log.by_kind(kind)
        if cs:
            out += _SECTIONS.get(kind, _rows_md)(kind, cs)
    return "\n".join(out)


#: The order of the changelog's sections after the changed observations.
KIND_ORDER = (
    "newly failing",
    "newly skipped",
    "new deprecation",
    "disappeared",
    "newly passing",
    "newly running",
    "new",
    "moved",
    "removed",
    "not run",
    "deprecation gone",
)


def _environment_md(log: Changelog) -> list[str]:
    if not log.environment:
        return []
    out = ["### Environment", "", "| what | old | new |", "|---|---|---|"]
    return out + [f"| {what} | {code_span(a)} | {code_span(b)} |" for what, a, b in log.environment] + [""]


#: How a changed observation reads for a user, most in need of action first (issue 49).
CLASSES = (
    "now raises",
    "newly diverges from the oracles",
    "value changed",
    "no longer raises",
    "now agrees with the oracles",
    "newly observed",
    "no longer observed",
    "informational",
)
#: The classes a user may need to act on: an asserted key that raises, stops raising or moves.
ACT = CLASSES[:5]


def change_class(c: "Change") -> str:
    """What a changed observation means for code that relies on it: an asserted key that now
    raises, no longer raises, or has another value (one the oracles answered before and not now:
    it newly diverges from them; the other way round: it now agrees with them); a key one side
    did not record; or an informational key (recorded, asserted by nothing).

    >>> change_class(Change("observation changed", "b", "tensorflow-xla-cpu", "t", old="dropped", new="raises:X"))
    'now raises'
    >>> c = Change("observation changed", "b", "tensorflow-xla-cpu", "t", old="0", new="1", oracles=(True, False))
    >>> change_class(c)
    'newly diverges from the oracles'
    """
    if not c.asserted:
        return "informational"
    if NOT_OBSERVED in (c.old, c.new):
        return "newly observed" if c.old == NOT_OBSERVED else "no longer observed"
    old_raises, new_raises = (str(v).startswith("raises:") for v in (c.old, c.new))
    if new_raises != old_raises:
        return "now raises" if new_raises else "no longer raises"
    if c.oracles == (True, False):
        return "newly diverges from the oracles"
    if c.oracles == (False, True):
        return "now agrees with the oracles"
    return "value changed"


_SUBJECT_IN_ID = re.compile(rf"(?<=\[)(?:{'|'.join(registry.NAMES)})-\w+-\w+-?")


def _observations_md(obs: list) -> list[str]:
    """One line per change, the subjects that saw the same old -> new together, the changes a
    user may need to act on first."""
    if not obs:
        return []
    groups: dict = {}
    for c in obs:
        test = _SUBJECT_IN_ID.sub("", _short(c.test)).replace("[]", "")
        groups.setdefault((change_class(c), c.behaviour, test, c.detail, str(c.old), str(c.new)), []).append(c)
    order = sorted(groups, key=lambda k: (CLASSES.index(k[0]), k[1:]))
    acting = sum(k[0] in ACT for k in order)
    out = [
        "### Observations that changed",
        "",
        f"**{acting} change(s) a user may need to act on** (an asserted key that now raises, no longer raises or "
        f"has another value, beside or against the oracles), then {len(order) - acting} other(s); {len(obs)} row "
        "observation(s) in all.",
        "",
        "| behaviour | test | key | kind | old | new | subjects |",
        "|---|---|---|---|---|---|---|",
    ]
    for k in order:
        cls, b, test, key, _, _ = k
        c = groups[k][0]
        subjects = query.subjects_text([x.subject for x in groups[k]])
        out.append(
            f"| {b} | {code_span(test)} | {code_span(key)} | {cls} | {code_span(c.old)} | {code_span(c.new)} | "
            f"{subjects} |"
        )
    return out + [""]


def _not_run_md(kind: str, cs: list) -> list[str]:
    """A subset's or partial run's missing rows: counted per behaviour, not listed."""
    per: dict = {}
    for c in cs:
        per.setdefault((c.detail, c.behaviour), set()).add(c.subject)
    out = [f"### Not run in one of the two ({len(cs)} rows, not compared)", ""]
    return out + [f"- {where}: **{b}** ({', '.join(sorted(subj))})" for (where, b), subj in sorted(per.items())] + [""]


def _moved_md(kind: str, cs: list) -> list[str]:
    """Rows whose test moved to another behaviour's module: per (from, to), the tests moved."""
    per: dict = {}
    for c in cs:
        per.setdefault((c.old, c.new), {}).setdefault(_short(c.test).split("[", 1)[0], 0)
        per[(c.old, c.new)][_short(c.test).split("[", 1)[0]] += 1
    out = [f"### Moved to another behaviour ({len(cs)} rows, compared at their new place)", ""]
    return (
        out
        + [
            f"- {a} -> **{b}**: {', '.join(f'`{t}` ({k})' for t, k in sorted(tests.items()))}"
            for (a, b), tests in sorted(per.items())
        ]
        + [""]
    )


def _deprecations_md(kind: str, cs: list) -> list[str]:
    title = {"new deprecation": "New deprecations", "deprecation gone": "Deprecations gone"}[kind]
    return [f"### {title} ({len(cs)})", ""] + [f"- **{c.behaviour}**: `{c.detail}`" for c in cs] + [""]


def _rows_md(kind: str, cs: list) -> list[str]:
    out = [
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
    return out + [""]


_SECTIONS = {
    "moved": _moved_md,
    "not run": _not_run_md,
    "new deprecation": _deprecations_md,
    "deprecation gone": _deprecations_md,
}


def consecutive_changes_md(reports) -> list[str]:
    """Per consecutive pair of versions: the TensorFlow observations that changed."""
    lines = []
    for old, new in zip(reports, reports[1:]):
        log = diff(old, new)
        tf = [c for c in log.changes if c.subject.startswith("tensorflow")]
        obs = [c for c in tf if c.kind == "observation changed"]
        outs = [c for c in tf if c.kind in ("newly failing", "newly passing")]
        deps = log.by_kind("new deprecation")
        head = f"- **TF {tf_version(old)} -> {tf_version(new)}**: "
        if not obs and not outs and not deps:
            lines.append(head + "no TensorFlow observation changed.")
            continue
        parts = _changed_values_md(obs)
        if outs:
            moved = ", ".join(sorted({f"{c.behaviour} {c.old}->{c.new}" for c in outs}))
            parts.append(f"{len(outs)} row(s) changed outcome: " + moved)
        if deps:
            parts.append("new deprecations: " + "; ".join(f"{c.behaviour} `{c.detail}`" for c in deps))
        lines.append(head + "; ".join(parts))
    return lines


def _changed_values_md(obs) -> list[str]:
    """``b `key`: `old` -> `new` (modes)`` per changed value; keys one side did not record are
    listed by name only, as newly observed or no longer observed."""
    per, keys = {}, {}
    for c in obs:
        mode = c.subject.split("-")[1]
        if NOT_OBSERVED in (c.old, c.new):
            how = "newly observed" if c.old == NOT_OBSERVED else "no longer observed"
            k = keys.setdefault((c.behaviour, how), ({}, set()))
            k[0].setdefault(c.detail, c.new if c.old == NOT_OBSERVED else c.old)
            k[1].add(mode)
            continue
        per.setdefault((c.behaviour, c.detail, str(c.old), str(c.new)), []).append(mode)
    parts = [f"{b} `{k}`: `{o}` -> `{n}` ({', '.join(sorted(set(m)))})" for (b, k, o, n), m in sorted(per.items())]
    for (b, how), (vals, modes) in sorted(keys.items()):
        shown = ", ".join(f"`{k}`=`{v}`" for k, v in sorted(vals.items())[:3])
        more = f" and {len(vals) - 3} more" if len(vals) > 3 else ""
        parts.append(f"{b} {how} ({', '.join(sorted(modes))}): {shown}{more}")
    return parts
