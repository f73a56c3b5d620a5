"""Queries over reports: pure counting and grouping of their rows (the matrix's cells, failures,
observations, speed, headroom, what moved between releases) and the text of one value. The
bottom layer of ``suite/report``'s three (query -> model -> pages): it imports nothing of the
report package."""

from __future__ import annotations

import collections
import re

from suite import registry

SYMBOL = {
    "passed": "ok",
    "failed": "FAIL",
    "error": "ERR",
    "skipped": "skip",
    "crashed": "CRASH",
    "unavailable": "n/a",
    "xfailed": "xfail",
}
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


def speed(report) -> list[dict]:
    """Examples per second per framework-mode-device, from the measured rows."""
    agg = collections.defaultdict(lambda: [0, 0.0, 0.0])
    for r in report["results"]:
        if r.get("outcome") != "passed":
            continue
        col = f"{r['framework']}-{r['mode']}-{r['device']}"
        agg[col][0] += r.get("examples") or 0
        agg[col][1] += r.get("duration_s") or 0.0
    return [
        {"column": k, "examples": n, "test_s": round(t, 2), "examples_per_s": round(n / t, 1) if t else None}
        for k, (n, t, _) in agg.items()
    ]


#: A tolerance more than this many times the largest error its comparisons saw is slack.
SLACK = 10.0


def headroom(report) -> list[dict]:
    """The op table's error model as the report saw it: per behaviour, op, dtype and subject, the
    largest error over its comparisons and the tolerance, in units of rounding, nearest first
    (``slack``: more than :data:`SLACK` times what was seen; ``exact``: no error at all)."""
    out = []
    for r in report["results"]:
        test = r.get("test", "")
        if not test.split("::")[-1].startswith("test_op_") or not r.get("errors"):
            continue
        op = test.rsplit("-", 1)[-1].rstrip("]") if "[" in test else test
        prop = test.split("::")[-1].split("[")[0].removeprefix("test_op_")
        for dtype, by_oracle in sorted(r["errors"].items()):
            for oracle, (seen, tol) in sorted(by_oracle.items()):
                room = tol / seen if seen else None
                verdict = "exact" if not seen else "exceeded" if room < 1 else "slack" if room > SLACK else "ok"
                out.append({"behaviour": r["behaviour"], "op": op, "property": prop, "dtype": dtype,
                            "subject": f"{r['framework']}-{r['mode']}-{r['device']}", "oracle": oracle,
                            "observed": seen, "tolerance": tol, "headroom": room, "verdict": verdict})  # fmt: skip
    return sorted(out, key=lambda e: (e["headroom"] is None, e["headroom"] or 0.0))


def array_headroom(report) -> list[dict]:
    """The comparisons outside the op table's error model (an array-level floor: every float
    comparison of the other behaviours, and the table's against closed forms and differences):
    one line per behaviour and dtype, the least headroom over its rows (tolerance / observed, in
    units of rounding) and how many of its comparisons (row x oracle) were slack, least first."""
    groups: dict[tuple, list] = {}
    for r in report["results"]:
        if r.get("outcome") != "passed":
            continue
        for dtype, by_oracle in (r.get("array_errors") or {}).items():
            for oracle, (seen, tol) in by_oracle.items():
                room = tol / seen if seen else None
                groups.setdefault((r["behaviour"], dtype), []).append((room, short_test(r["test"]), oracle))
    out = []
    floors = report.get("floors") or {}
    for (b, dtype), es in groups.items():
        rooms = [e for e in es if e[0] is not None]
        worst = min(rooms, default=(None, "", ""))
        out.append({"behaviour": b, "dtype": dtype, "floor": (floors.get(b) or {}).get("kind"),
                    "headroom": worst[0], "where": f"{worst[1]} vs {worst[2]}",
                    "slack": sum(e[0] is not None and e[0] > SLACK for e in es), "comparisons": len(es)})  # fmt: skip
    return sorted(out, key=lambda e: (e["headroom"] is None, e["headroom"] or 0.0))


def headroom_by_op(entries) -> list[dict]:
    """One line per behaviour, op and dtype: the least headroom over subjects, properties and
    oracles, and how many of its comparisons were slack."""
    groups: dict[tuple, list] = {}
    for e in entries:
        groups.setdefault((e["behaviour"], e["op"], e["dtype"]), []).append(e)
    out = []
    for (b, op, dtype), es in groups.items():
        worst = min(es, key=lambda e: e["headroom"] if e["headroom"] is not None else float("inf"))
        out.append({**worst, "slack": sum(e["verdict"] == "slack" for e in es), "comparisons": len(es)})
    return sorted(out, key=lambda e: (e["behaviour"], e["op"], e["dtype"]))


def slowest(report, n=5) -> list[dict]:
    rows = sorted(report["results"], key=lambda r: -(r.get("duration_s") or 0))
    return rows[:n]


def test_time(report) -> float:
    """Seconds spent in tests: the sum of every row's duration (what the 5-minute budget counts)."""
    return sum(r.get("duration_s") or 0 for r in report["results"])


def framework_label(name: str, info: dict) -> str:
    """``tensorflow 2.21.0 (cpu)``: a framework's measured version and devices, on one line, and
    the source revision its build names where the report recorded one.

    >>> framework_label("torch", {"version": "2.13.0", "devices": ["cpu"], "git_version": "cf30153c4c131c81"})
    'torch 2.13.0 (cpu) built from cf30153c4c13'
    """
    rev = str(info.get("git_version") or "")
    rev = rev[:12] if re.fullmatch(r"[0-9a-f]{13,}", rev) else rev
    built = f" built from {rev}" if rev else ""
    return f"{name} {info.get('version') or 'not installed'} ({','.join(info.get('devices') or [])}){built}"


def md_escape(s) -> str:
    return str(s).replace("|", "\\|").replace("\n", " ")


def md_prose(s) -> str:
    """Free text as Markdown shows it literally (a floor's reason: ``a * b``, ``x_i``, ``<x>``):
    what would start emphasis, a code span, a link or a heading is backslash-escaped (the
    escapes CommonMark and Python-Markdown both honour) and ``<`` is ``&lt;``; pipes stay, as
    a list item is no table row.

    >>> md_prose("|w_i| * 2 <x>")
    '|w\\\\_i| \\\\* 2 &lt;x>'
    """
    out = str(s).replace("\\", "\\\\")
    for ch in "`*_[]#":
        out = out.replace(ch, "\\" + ch)
    return out.replace("<", "&lt;").replace("\n", " ")


def value_text(v, limit=None) -> str:
    """An observed value as a person reads it: strings bare, several values joined by `` | ``."""
    import json

    if isinstance(v, list) and v and all(not isinstance(x, (list, dict)) for x in v):
        text = " | ".join(str(x) for x in v)
    elif isinstance(v, (list, dict)):
        text = json.dumps(v, sort_keys=True, default=str)
    else:
        text = str(v)
    if limit and len(text) > limit:
        text = text[: limit - 1] + "…"
    return text


def subject_of(r) -> str:
    return f"{r['framework']}-{r['mode']}-{r['device']}"


def short_test(test: str) -> str:
    """``cases/test_b.py::test_x[tensorflow-eager-cpu]`` -> ``test_x``."""
    return test.split("::", 1)[-1].split("[")[0]


def failures(report) -> list[dict]:
    return [r for r in report["results"] if r["outcome"] in ("failed", "error", "crashed")]


def absent_columns(report) -> tuple[list[str], list[str]]:
    """(columns shown, notes for the columns folded away): a column whose every row was
    skipped (an absent device, a framework that is not installed) becomes one note with
    its reason and row count instead of a column of ``skip``."""
    cols, kept, folded = columns(report), [], collections.defaultdict(lambda: [[], 0])
    by_col = collections.defaultdict(list)
    for r in report["results"]:
        by_col[subject_of(r)].append(r)
    for col in cols:
        rows = by_col[col]
        if rows and all(r["outcome"] == "skipped" for r in rows):
            reason = collections.Counter(r.get("reason") or "skipped" for r in rows).most_common(1)[0][0]
            reason = "no GPU visible" if "no GPU visible" in reason else reason
            folded[reason][0].append(col)
            folded[reason][1] += len(rows)
        else:
            kept.append(col)
    notes = [f"{reason}: {n} rows skipped ({', '.join(cs)})" for reason, (cs, n) in folded.items()]
    return kept, notes


def observation_lists(report) -> dict:
    """behaviour -> test -> {"values": [(key, value, [subjects], declared)], "errors": {oracle: max}}

    Passed rows only (a failed row's observation is in its failure); subjects that saw the
    same value of the same key are listed together."""
    out: dict = {}
    for r in report["results"]:
        if r["outcome"] != "passed":
            continue
        t = out.setdefault(r["behaviour"], {}).setdefault(short_test(r["test"]), {"values": {}, "errors": {}})
        for key, v in (r.get("observed") or {}).items():
            entry = t["values"].setdefault((key, value_text(v)), [[], None])
            entry[0].append(subject_of(r))
            if (r.get("declared") or {}).get(key):
                entry[1] = r["declared"][key]
            if not is_asserted(r, key):
                t.setdefault("informational", set()).add(key)
        for oracle, err in (r.get("max_rel_err") or {}).items():
            t["errors"][oracle] = max(t["errors"].get(oracle, 0.0), err)
    for tests in out.values():
        for t in tests.values():
            t["values"] = [(k, v, subj, d) for (k, v), (subj, d) in sorted(t["values"].items())]
    return out


def is_asserted(row, key) -> bool:
    """An observation is asserted when the row held it to an expectation (``expected``);
    otherwise it is informational: recorded for the changelog, checked by nothing."""
    return key in (row.get("expected") or {})


def subjects_text(subjects) -> str:
    """``tensorflow eager, xla; jax jit`` (devices named only when not all are cpu)."""
    per = {}
    for s in subjects:
        fw, mode, dev = s.split("-")
        per.setdefault(fw, []).append(mode if dev == "cpu" else f"{mode} ({dev})")
    return "; ".join(f"{fw} {', '.join(dict.fromkeys(ms))}" for fw, ms in per.items())


STATUS_WORDS = {
    "matched": "matched",
    "stale": "**STALE**",
    "not-applicable": "not applicable here",
    "unconfirmed": "unconfirmed (its rows did not all run or pass)",
}


def header_notes(report) -> list[str]:
    """Lines the header of every rendering carries: what was allowed to be missing, faults."""
    env = report.get("environment", {})
    out = []
    if env.get("allowed_missing"):
        out.append("Allowed to be missing in this run: " + ", ".join(env["allowed_missing"]) + ".")
    allowed = set(env.get("allowed_missing") or ())
    for what, why in (env.get("missing") or {}).items():
        verdict = "allowed" if what in allowed else "**fails the run**"
        out.append(f"Missing: {why} ({verdict}).")
    if env.get("faults"):
        out.append("**Faults injected** (a self-check run, not a measurement): " + ", ".join(env["faults"]) + ".")
    return out


def tf_version(report) -> str:
    return (report.get("environment", {}).get("frameworks", {}).get("tensorflow", {}) or {}).get("version") or "?"


def column_labels(reports, names=None) -> list[str]:
    """One label per report of a matrix: its TensorFlow version, and where two reports have the
    same version (a team's own run against a baseline), its name too (``names``, or ``#i``).

    >>> reps = [{"environment": {"frameworks": {"tensorflow": {"version": v}}}} for v in ("2.20.0", "2.21.0", "2.21.0")]
    >>> column_labels(reps, ["tf-2.20.0", "tf-2.21.0", "latest"])
    ['2.20.0', '2.21.0 (tf-2.21.0)', '2.21.0 (latest)']
    """
    versions = [tf_version(r) for r in reports]
    names = list(names) if names else [f"#{i + 1}" for i in range(len(reports))]
    return [f"{v} ({n})" if versions.count(v) > 1 else v for v, n in zip(versions, names)]


def version_outcomes(reports, names=None) -> tuple[list[str], list[str], dict]:
    """(column labels (:func:`column_labels`), behaviours, (behaviour, label) -> Counter of
    TensorFlow row outcomes); a behaviour a report did not run has no cell there."""
    labels = column_labels(reports, names)
    cells_by = {}
    for rep, v in zip(reports, labels):
        for r in rep["results"]:
            if r["framework"] == "tensorflow":
                cells_by.setdefault((r["behaviour"], v), collections.Counter())[r["outcome"]] += 1
    bs = list(dict.fromkeys(b for rep in reports for b in behaviours(rep)))
    return labels, bs, cells_by


#: Observation keys that record an oracle's answer inside a TensorFlow row (``jax-jit-cpu:...``):
#: they move when the oracle's version does, not TensorFlow's.
ORACLE_KEY = re.compile(rf"^(?:{'|'.join(registry.ORACLES)})-\w+-\w+:")


def oracle_versions(report) -> str:
    """``jax 0.10.2, torch 2.13.0``: the oracles' versions a report measured with."""
    fws = (report.get("environment") or {}).get("frameworks") or {}
    return ", ".join(f"{n} {(fws.get(n) or {}).get('version') or '-'}" for n in registry.ORACLES)


#: A release whose report has no row of the test at all (its suite did not have the test yet, or
#: the run was a subset): no value to compare, so neither a change nor the start of one.
NOT_RUN = "(not run)"


def observation_changes(reports) -> list[dict]:
    """TensorFlow observations whose value changed between releases, one entry per
    (behaviour, test, key) and set of modes whose values moved together: ``{"behaviour",
    "test", "key", "modes", "values": [per release: the value, None if the row did not record
    it, NOT_RUN if the report has no row of that test]}``. A key whose test an older report did
    not run (an older suite revision) is not a change of TensorFlow there."""
    series = collections.defaultdict(lambda: [None] * len(reports))
    ran = [set() for _ in reports]
    for i, rep in enumerate(reports):
        for r in rep["results"]:
            if r["framework"] != "tensorflow":
                continue
            ran[i].add((r["behaviour"], short_test(r["test"]), r["mode"], r["device"]))
            if r["outcome"] in ("skipped", "unavailable"):
                continue
            for key, v in (r.get("observed") or {}).items():
                series[(r["behaviour"], short_test(r["test"]), key, r["mode"], r["device"])][i] = value_text(v)
    merged = {}
    for (b, test, key, mode, dev), vals in series.items():
        vals = [v if (b, test, mode, dev) in ran[i] else NOT_RUN for i, v in enumerate(vals)]
        if any(changed_since_previous(vals)):
            label = mode if dev == "cpu" else f"{mode} ({dev})"
            merged.setdefault((b, test, key, tuple(vals)), []).append(label)
    out = [
        {"behaviour": b, "test": test, "key": key, "modes": modes, "values": list(vals)}
        for (b, test, key, vals), modes in merged.items()
    ]
    return sorted(out, key=lambda e: (e["behaviour"], e["test"], e["key"], e["modes"]))


def changed_since_previous(values) -> list[bool]:
    """Per release: did the value differ from the last release before it that ran the test
    (a release that did not, NOT_RUN, is skipped over and changes nothing itself).

    >>> changed_since_previous(["a", "a", "b"]), changed_since_previous([NOT_RUN, "b", NOT_RUN, "c"])
    ([False, False, True], [False, False, False, True])
    """
    return [v != NOT_RUN and previous_run(values, i) not in (v, NOT_RUN) for i, v in enumerate(values)]


def previous_run(values, i):
    """The value of the last release before ``i`` that ran the test; NOT_RUN if none did."""
    return next((v for v in reversed(values[:i]) if v != NOT_RUN), NOT_RUN)


def moved_keys(reports, names=None) -> dict:
    """(behaviour, column label) -> the observation keys that changed since the release before it."""
    labels = column_labels(reports, names)
    moved = collections.defaultdict(set)
    for e in observation_changes(reports):
        for i, changed in enumerate(changed_since_previous(e["values"])):
            if changed:
                moved[(e["behaviour"], labels[i])].add(e["key"])
    return moved


def code_span(v) -> str:
    """A value as a Markdown code span that survives any content (backticks, pipes, ``; ``)."""
    text = str(v).replace("|", "\\|").replace("\n", " ")
    fence = "``" if "`" in text else "`"
    return f"{fence}{text}{fence}" if text else "(empty)"


def behaviour_of_module(module: str) -> str:
    """``cases.test_partial_stop_gradient`` -> ``partial-stop-gradient``."""
    name = module.rsplit(".", 1)[-1]
    return (name[5:] if name.startswith("test_") else name).lstrip("_").replace("_", "-")


def answers(report) -> dict:
    """What each framework answered for each observation key: (behaviour, key) -> framework ->
    mode (device named where not cpu) -> the values its rows that ran saw, each once.

    >>> rows = [{"behaviour": "b", "framework": "torch", "mode": "eager", "device": "cpu", "outcome": "passed",
    ...          "observed": {"k": ["a", "b"]}}]
    >>> answers({"results": rows})
    {('b', 'k'): {'torch': {'eager': ['a | b']}}}
    """
    seen: dict = {}
    for r in report.get("results") or []:
        if r.get("outcome") in ("skipped", "unavailable"):
            continue
        where = r["mode"] if r["device"] == "cpu" else f"{r['mode']} ({r['device']})"
        for key, v in (r.get("observed") or {}).items():
            per = seen.setdefault((r["behaviour"], key), {}).setdefault(r["framework"], {})
            text = value_text(v)
            if text not in per.setdefault(where, []):
                per[where].append(text)
    return seen


def atlas(report) -> list[dict]:
    """Every declared divergence of a report, with what each framework answered for its key: the
    divergence atlas (issue 50). Per declaration: its behaviour, key, scope (framework, mode,
    device, versions), declared value, reason, link, status and matched rows, and ``answers``:
    framework -> mode (device named where not cpu) -> the values its rows of that behaviour
    observed for the key (``" | "``-joined where examples saw several), from rows that ran.

    >>> rows = [{"behaviour": "b", "framework": "jax", "mode": "jit", "device": "cpu", "outcome": "passed",
    ...          "test": "t", "observed": {"k": "zero"}}]
    >>> [e["answers"] for e in atlas({"results": rows, "declared": [{"key": "k", "module": "cases.test_b"}]})]
    [{'jax': {'jit': 'zero'}}]
    """
    seen = answers(report)
    out = []
    for d in report.get("declared") or []:
        b = behaviour_of_module(d.get("module", ""))
        said = seen.get((b, d["key"]), {})
        out.append(
            {
                **{k: d.get(k) for k in ("key", "framework", "mode", "device", "versions", "reason", "link")},
                "behaviour": b,
                "declared": value_text(d.get("observed")),
                "status": d.get("status"),
                "matched": d.get("matched"),
                "answers": {fw: {m: " | ".join(vs) for m, vs in per.items()} for fw, per in said.items()},
            }
        )
    return sorted(out, key=lambda e: (e["behaviour"], e["key"], e["framework"] or "", e["mode"] or ""))


#: Issue and PR references as the suite's keys and reasons spell them, and their repositories.
REPOS = {
    "tensorflow": "tensorflow/tensorflow",
    "pytorch": "pytorch/pytorch",
    "jax": "jax-ml/jax",
    "keras": "keras-team/keras",
    "tf-keras": "keras-team/tf-keras",
    "xla": "openxla/xla",
}
_REF = re.compile(r"(?<![\w/.-])((?:[\w.-]+/[\w.-]+)|tf-keras|tensorflow|pytorch|jax|keras|xla)#(\d+)\b")


def refs(text) -> list[tuple[str, str]]:
    """The issue and PR references in ``text`` (``tensorflow#12071``, ``openxla/xla#48119``), each
    with its GitHub address (GitHub sends an issue number that is a PR to the PR).

    >>> refs("seed[tensorflow#12071:gradient-alone], see openxla/xla#48119")
    [('tensorflow#12071', 'https://github.com/tensorflow/tensorflow/issues/12071'), \
('openxla/xla#48119', 'https://github.com/openxla/xla/issues/48119')]
    """
    out = []
    for m in _REF.finditer(str(text)):
        repo = REPOS.get(m.group(1), m.group(1) if "/" in m.group(1) else None)
        if repo:
            out.append((m.group(0), f"https://github.com/{repo}/issues/{m.group(2)}"))
    return list(dict.fromkeys(out))
