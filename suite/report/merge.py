"""Join shard reports (``run --shard i/n`` on several machines) into one report.

The merged report is what one run of the union would have written: its rows are every
shard's rows; a behaviour is incomplete only if some of its tests ran in no shard (a shard
report records which tests it collected and which other shards took, ``coverage``); and the
declarations' statuses are worked out again from all the rows, so a declaration whose rows
were split between shards is ``matched`` or ``stale`` in the merge, where each shard alone
could only call it ``unconfirmed``.

Reports of different environments are refused: rows of two TensorFlow releases (or two
Hypothesis profiles, suite revisions, fault sets) are not one run.
"""

from __future__ import annotations

from suite.report import query, schema


class MergeError(ValueError):
    """Reports that cannot be one run; the message names the reports and what differs."""


def identity(env: dict) -> dict:
    """What must be equal for rows to belong to one run."""
    fws = env.get("frameworks") or {}
    return {
        "python": env.get("python"),
        "platform": env.get("platform"),
        "frameworks": {n: ((i or {}).get("version"), tuple((i or {}).get("devices") or ())) for n, i in fws.items()},
        "packages": env.get("packages"),
        "hypothesis": env.get("hypothesis"),
        "options": env.get("options"),
        "allowed_missing": env.get("allowed_missing"),
        "faults": env.get("faults"),
        "suite_revision": env.get("suite_revision"),
    }


def _describe(value) -> str:
    if isinstance(value, dict):
        return ", ".join(f"{k} {_describe(v)}" for k, v in value.items()) or "none"
    if isinstance(value, tuple) and len(value) == 2 and isinstance(value[1], tuple):
        return f"{value[0] or 'not installed'} ({','.join(value[1]) or 'no devices'})"
    return str(value)


def _check_same_environment(reports, names) -> None:
    first = identity(reports[0]["environment"])
    for r, name in zip(reports[1:], names[1:]):
        other = identity(r["environment"])
        for key in first:
            if first[key] == other[key]:
                continue
            if key == "frameworks":
                for fw in sorted(set(first[key]) | set(other[key])):
                    a, b = first[key].get(fw), other[key].get(fw)
                    if a != b:
                        raise MergeError(
                            f"{names[0]} and {name} are not one run: {fw} {_describe(a)} in one, "
                            f"{_describe(b)} in the other"
                        )
            raise MergeError(
                f"{names[0]} and {name} are not one run: {key} {_describe(first[key])} in one, "
                f"{_describe(other[key])} in the other"
            )


def _check_shards(reports, names) -> None:
    """Shards of one split, each once."""
    shards = [r["environment"].get("shard") for r in reports]
    counts = {s.split("/")[1] for s in shards if s}
    if len(counts) > 1:
        raise MergeError(f"shards of different splits: {', '.join(f'{n} ({s})' for n, s in zip(names, shards))}")
    seen_shard: dict[str, str] = {}
    for s, n in zip(shards, names):
        if s and s in seen_shard:
            raise MergeError(f"{seen_shard[s]} and {n} are both shard {s}")
        if s:
            seen_shard[s] = n


def _joined_rows(reports, names) -> list[dict]:
    """Every row of every report; a test with a row in two of them is refused."""
    rows, where = [], {}
    for r, n in zip(reports, names):
        for row in r["results"]:
            if row["test"] in where:
                raise MergeError(f"{row['test']} has a row in both {where[row['test']]} and {n}")
            where[row["test"]] = n
            rows.append(row)
    return rows


def _incomplete(reports, rows) -> list[str]:
    """The behaviours that did not run whole in the shards together."""
    collected, deselected, unknown = [], [], set()
    for r in reports:
        cov = r.get("coverage")
        if cov is None:  # not a shard: only its own verdict on what ran whole is known
            unknown |= set(r.get("incomplete") or ())
            continue
        collected += [tuple(t) for t in cov.get("collected", [])]
        deselected += [tuple(t) for t in cov.get("deselected", [])]
    ran = {t for t, _ in collected}
    deselected = [t for t in deselected if t[0] not in ran]  # another shard took it: not left out
    return sorted(set(schema.incomplete_behaviours(collected, deselected, rows)) | unknown)


def _run_fields(reports) -> dict:
    """Deprecations (joined), partial (any), finished and wall time (the latest, the longest:
    the shards ran side by side)."""
    out: dict = {}
    deps: dict[str, set] = {}
    for r in reports:
        for b, messages in (r.get("deprecations") or {}).items():
            deps.setdefault(b, set()).update(messages)
    if deps:
        out["deprecations"] = {b: sorted(m) for b, m in sorted(deps.items())}
    if any(r.get("partial") for r in reports):
        out["partial"] = True
    finished = [r["finished"] for r in reports if r.get("finished")]
    if finished:
        out["finished"] = max(finished)
    walls = [r["wall_s"] for r in reports if r.get("wall_s") is not None]
    if walls:
        out["wall_s"] = max(walls)
    return out


def merge(reports: list[dict], names: list[str]) -> dict:
    if len(reports) < 2:
        raise MergeError("merge needs two reports or more")
    _check_same_environment(reports, names)
    _check_shards(reports, names)
    rows = _joined_rows(reports, names)
    incomplete = _incomplete(reports, rows)
    env = dict(reports[0]["environment"])
    env.pop("shard", None)
    env.pop("jobs", None)
    env["merged_from"] = [
        {"report": n, "shard": r["environment"].get("shard"), "rows": len(r["results"]), "wall_s": r.get("wall_s")}
        for r, n in zip(reports, names)
    ]
    out = {
        "schema_version": schema.SCHEMA_VERSION,
        "created": min(r.get("created") or "" for r in reports),
        "environment": env,
        "results": rows,
        **_run_fields(reports),
    }
    if incomplete:
        out["incomplete"] = incomplete
    older = [r["migrated_from"] for r in reports if r.get("migrated_from") is not None]
    if older:  # some rows were written in an older schema and read in today's words
        out["migrated_from"] = min(older)
    floors = {b: f for r in reports for b, f in (r.get("floors") or {}).items()}
    if floors:
        out["floors"] = dict(sorted(floors.items()))
    declared: dict[str, dict] = {}
    for r in reports:
        for d in r.get("declared") or ():
            declared.setdefault(d["id"], {k: v for k, v in d.items() if k not in ("matched", "status")})
    if declared:
        partial = bool(out.get("partial"))
        out["declared"] = schema.declaration_statuses(list(declared.values()), rows, env, incomplete, partial)
    return out


def _behaviour_runs(report: dict) -> dict:
    """Which suite revision (and when, with which frameworks) ran each behaviour of ``report``:
    recorded by :func:`update`, else the report's own run for all its behaviours."""
    env = report["environment"]
    known = dict(env.get("behaviour_runs") or {})
    run = {
        "suite_revision": env.get("suite_revision"),
        "created": report.get("created"),
        "frameworks": {n: (i or {}).get("version") for n, i in (env.get("frameworks") or {}).items()},
    }
    for row in report["results"]:
        known.setdefault(row["behaviour"], run)
    return known


def _check_incremental(env: dict, partials: list[dict], names: list[str]) -> None:
    """Refuse a partial of another TensorFlow, profile, options or fault set, or one that did not
    run its behaviours whole."""
    for p, n in zip(partials, names[1:]):
        other = p["environment"]
        for key in ("hypothesis", "options", "faults", "allowed_missing"):
            if env.get(key) != other.get(key):
                raise MergeError(
                    f"{names[0]} and {n} differ in {key}: {_describe(env.get(key))} and {_describe(other.get(key))}"
                )
        tf_a = ((env.get("frameworks") or {}).get("tensorflow") or {}).get("version")
        tf_b = ((other.get("frameworks") or {}).get("tensorflow") or {}).get("version")
        if tf_a != tf_b:
            raise MergeError(
                f"{names[0]} is TensorFlow {tf_a} and {n} is {tf_b}: a baseline takes rows of its own release"
            )
        if p.get("partial") or p.get("incomplete"):
            raise MergeError(f"{n} did not run its behaviours whole (interrupted or deselected rows)")


def _replace_behaviours(baseline: dict, partials: list[dict]) -> tuple:
    """(rows, declarations, deprecations, behaviour runs) of ``baseline`` with each behaviour a
    partial ran replaced by the partial's, the later partial winning; the rows in the baseline's
    order of behaviours (a re-run one keeps its place in the pages), a new behaviour last."""
    runs = _behaviour_runs(baseline)
    rows = list(baseline["results"])
    declared = list(baseline.get("declared") or ())
    deprecations = dict(baseline.get("deprecations") or {})
    for p in partials:
        new = {r["behaviour"] for r in p["results"]}
        rows = [r for r in rows if r["behaviour"] not in new] + list(p["results"])
        declared = [d for d in declared if query.behaviour_of_module(d.get("module", "")) not in new]
        declared += p.get("declared") or ()
        deprecations = {b: m for b, m in deprecations.items() if b not in new}
        deprecations.update({b: m for b, m in (p.get("deprecations") or {}).items() if b in new})
        this = _behaviour_runs(p)
        runs.update({b: this[b] for b in new})
    return in_behaviour_order(rows, baseline["results"]), declared, deprecations, runs


def in_behaviour_order(rows: list[dict], like: list[dict]) -> list[dict]:
    """``rows`` with their behaviours in the order they first appear in ``like`` (stable: each
    behaviour's rows keep their own order), behaviours ``like`` lacks last.

    >>> rows = [{"behaviour": b, "test": t} for b, t in (("b", "1"), ("a", "2"), ("c", "3"), ("a", "4"))]
    >>> [r["test"] for r in in_behaviour_order(rows, [{"behaviour": "a"}, {"behaviour": "b"}])]
    ['2', '4', '1', '3']
    """
    first: dict[str, int] = {}
    for i, r in enumerate(like):
        first.setdefault(r["behaviour"], i)
    return sorted(rows, key=lambda r: first.get(r["behaviour"], len(like)))


def update(baseline: dict, partials: list[dict], names: list[str]) -> dict:
    """``baseline`` with the rows, declarations and deprecations of the behaviours the
    ``partials`` ran replaced by theirs (an incremental baseline: one behaviour re-run in every
    release env, not the whole suite). The partials must be of the baseline's TensorFlow,
    profile, options and fault set (other frameworks may have moved: each behaviour's run is
    recorded in ``environment.behaviour_runs``, with its suite revision, date and versions)."""
    env = dict(baseline["environment"])
    _check_incremental(env, partials, names)
    rows, declared, deprecations, runs = _replace_behaviours(baseline, partials)
    env["behaviour_runs"] = dict(sorted(runs.items()))
    out = {
        "schema_version": schema.SCHEMA_VERSION,
        "created": baseline.get("created"),
        "environment": env,
        "results": rows,
    }
    if baseline.get("migrated_from") is not None:  # its rows not re-run were written in that schema
        out["migrated_from"] = baseline["migrated_from"]
    if deprecations:
        out["deprecations"] = dict(sorted(deprecations.items()))
    floors = dict(baseline.get("floors") or {})
    for p in partials:  # a behaviour re-run brings its judgement as its module now states it
        ran = {r["behaviour"] for r in p["results"]}
        floors = {b: f for b, f in floors.items() if b not in ran} | (p.get("floors") or {})
    if floors:
        out["floors"] = dict(sorted(floors.items()))
    for key in ("finished", "wall_s"):
        if baseline.get(key) is not None:
            out[key] = baseline[key]
    incomplete = sorted(
        set(baseline.get("incomplete") or ()) - {r["behaviour"] for p in partials for r in p["results"]}
    )
    if incomplete:
        out["incomplete"] = incomplete
    if declared:
        declared = [{k: v for k, v in d.items() if k not in ("matched", "status")} for d in declared]
        out["declared"] = schema.declaration_statuses(declared, rows, env, incomplete, False)
    return out
