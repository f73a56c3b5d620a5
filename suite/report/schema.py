"""Report schema (version 2): assemble, write atomically, load and validate.

A report is ``latest.json`` (complete run) or ``latest.jsonl`` (streamed: a header line,
one line per row, a footer line when the run finished). Loading either gives the same
dict; a JSONL without its footer loads as ``partial: true``. A version-1 report (the words
of :mod:`suite.kinds` before they were one vocabulary) loads in today's words: :func:`migrate`.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import tempfile
from pathlib import Path

from suite import behaviours as bh, kinds
from suite.expectations import Expectation, all_declared
from suite.report.query import behaviour_of_module

SCHEMA_VERSION = 2
#: Versions :func:`load` reads: older ones are migrated (:func:`migrate`).
READABLE = (1, 2)
OUTCOMES = ("passed", "failed", "skipped", "error", "crashed", "unavailable", "xfailed")


@dataclasses.dataclass
class Row:
    """One row of a report: one test of one subject (framework, mode, device). Its fields and
    their types are defined here once: the harness makes rows with it (``rows.make_row``, and
    :meth:`crashed` for a case that killed its process), and loading a report checks each row
    against it (:data:`ROW_KEYS`, :data:`FIELD_TYPES`). In a report file a row is
    :meth:`as_dict`: the optional fields only where set.

    >>> Row.crashed("cases/test_a_b.py::test_x[jax-jit-cpu]", "SIGSEGV").as_dict()["behaviour"]
    'a-b'
    """

    behaviour: str
    test: str
    framework: str
    mode: str
    device: str
    outcome: str
    observed: dict = dataclasses.field(default_factory=dict)
    expected: dict = dataclasses.field(default_factory=dict)
    max_rel_err: dict = dataclasses.field(default_factory=dict)
    examples: int = 0
    duration_s: float = 0.0
    # optional: where set
    examples_per_s: float | None = None
    declared: dict | None = None  # key -> the declaration's reason and link
    errors: dict | None = None  # dtype -> oracle -> [observed, tolerance] in units of rounding
    array_errors: dict | None = None  # the same for the comparisons with an array-level floor
    notes: list | None = None
    error: str | None = None
    reason: str | None = None  # why it was skipped
    reproducer: str | None = None
    failure: str | None = None  # the kind of failure
    signal: str | None = None  # what killed a crashed row's process

    def as_dict(self) -> dict:
        """The row as a report holds it (JSON): every required field, the optional ones set."""
        return {
            f.name: v
            for f in dataclasses.fields(self)
            if (v := getattr(self, f.name)) is not None or f.name in ROW_KEYS
        }

    @classmethod
    def crashed(cls, nodeid: str, sig: str, error: str | None = None) -> "Row":
        """The row of a case that killed the process running it (the supervisor's child, or a
        pytest-xdist worker, which xdist restarts)."""
        m = re.search(r"\[(\w+)-(\w+)-(\w+)\]$", nodeid)
        fw, mode, dev = m.groups() if m else ("none", "none", "cpu")
        beh = behaviour_of_module(Path(nodeid.split("::")[0]).stem)
        return cls(
            behaviour=beh,
            test=nodeid,
            framework=fw,
            mode=mode,
            device=dev,
            outcome="crashed",
            error=error or f"the interpreter died with {sig} while this case ran",
            signal=sig,
            reproducer=f"# reproduces {nodeid}\n#   autodiff-semantics run -- '{nodeid}'",
        )


#: The fields every row has (``examples`` came later: old reports lack it).
ROW_KEYS = ("behaviour", "test", "framework", "mode", "device", "outcome", "observed", "expected", "max_rel_err",
            "duration_s")  # fmt: skip
_WHAT = {str: "a string", dict: "an object", int: "an integer", float: "a number", list: "a list"}
#: The type of each row field that reading code relies on (a wrong one crashed diff and report),
#: from :class:`Row`'s annotations: (field, accepted types, what to call them).
FIELD_TYPES = tuple(
    (f.name, (int, float) if t is float else t, _WHAT[t])
    for f in dataclasses.fields(Row)
    for t in [{"str": str, "dict": dict, "int": int, "float": float, "list": list}[str(f.type).split(" |")[0]]]
)


class ReportError(ValueError):
    """A report file that cannot be used; the message names the file and the problem."""


def declaration_statuses(declared: list[dict], rows: list[dict], environment: dict, incomplete=(), partial=False):
    """Each declaration with ``matched`` (rows where its check held, counted from the rows,
    so a resumed run counts them all) and ``status``:

    - ``matched``: some row held to it;
    - ``not-applicable``: no row that ran (not skipped) is of its framework, mode, device
      and version (a device that is not present, a mode not selected, another release), or
      a more specific declaration of the same key holds each such row (a release-scoped one
      over a framework-wide one: the wider one does not apply to that release);
    - ``unconfirmed``: it applies but its behaviour did not run whole and clean (deselected
      tests, an interrupted run, a row that failed before reaching it): no verdict;
    - ``stale``: it applies, its behaviour ran whole and passed, and no row matched it.
    """
    versions = {n: (i or {}).get("version") for n, i in (environment.get("frameworks") or {}).items()}
    by_behaviour: dict[str, list] = {}
    for r in rows:
        by_behaviour.setdefault(r["behaviour"], []).append(r)
    rivals: dict[tuple, list[dict]] = {}
    for d in declared:  # the declarations one lookup chooses among: same key, module and scope
        rivals.setdefault((_group(d), d["key"]), []).append(d)
    out = []
    for d in declared:
        b = behaviour_of_module(d.get("module", ""))
        if b in by_behaviour:
            same = rivals[(_group(d), d["key"])]
            matched, status = _declaration_status(d, by_behaviour[b], versions, b in incomplete or partial, same)
            out.append({**d, "matched": matched, "status": status})
    return out


def _group(d: dict) -> str:
    """The module (and op-table scope) of a declaration: its id without the index."""
    return str(d.get("id") or d.get("module", "")).rsplit(":", 1)[0]


def _declaration_status(d: dict, mine: list[dict], versions: dict, incomplete: bool, rivals=()) -> tuple[int, str]:
    """(rows that held to declaration ``d``, its status) among its behaviour's rows ``mine``;
    ``rivals``: the declarations of its key that a lookup chooses among (``d`` among them)."""
    import types

    def as_expectation(x):
        return Expectation(x["key"], x["observed"], x["framework"], x["mode"], x["device"], x["versions"])

    others = [(x, as_expectation(x)) for x in rivals or [d]]

    def chosen(row) -> bool:  # as Expectations.lookup: the first most specific declaration that matches
        hits = [(x, ex) for x, ex in others if ex.matches(row)]
        return bool(hits) and max(hits, key=lambda h: h[1].specificity)[0] is d

    matched = sum(
        1
        for r in mine
        if ((r.get("declared") or {}).get(d["key"]) or {}).get("id") == d["id"] and r["declared"][d["key"]].get("held")
    )
    if matched:
        return matched, "matched"
    applies = [
        r
        for r in mine
        if r["outcome"] != "skipped"
        and chosen(
            types.SimpleNamespace(
                **{k: r[k] for k in ("framework", "mode", "device")}, version=versions.get(r["framework"])
            )
        )
    ]
    if not applies:
        return 0, "not-applicable"
    if incomplete or any(r["outcome"] != "passed" for r in applies):
        return 0, "unconfirmed"
    return 0, "stale"


def incomplete_behaviours(collected, deselected, rows) -> list[str]:
    """Behaviours that did not run whole: a test the user deselected (``-k``, ``--deselect``;
    a resumed run's own deselections are tests that already have rows), or a collected test
    with no row (``-x``, an interruption)."""
    have = {r["test"] for r in rows}
    out = {r_b for t, r_b in deselected if t not in have}
    out |= {b for t, b in collected if t not in have}
    return sorted(out)


def assemble(
    header: dict,
    rows: list[dict],
    footer: dict | None,
    deprecations: dict | None = None,
    coverage=None,
    declared: list[dict] | None = None,
    floors: dict | None = None,
) -> dict:
    """The report from a run's stream. ``coverage``: ``{"collected": [(test, behaviour)],
    "deselected": [...]}`` from the stream, for declaration statuses; ``declared``: the
    declarations the stream carries (default: those of the case modules imported here);
    ``floors``: the behaviours' error-model judgements (:class:`suite.behaviours.Floor`), the
    same way."""
    report = {
        "schema_version": SCHEMA_VERSION,
        "created": header["created"],
        "environment": header["environment"],
        "results": rows,
    }
    if deprecations:
        report["deprecations"] = deprecations
    if footer is None or footer.get("interrupted"):
        report["partial"] = True
    if footer is not None:
        report["finished"] = footer.get("finished")
        report["wall_s"] = footer.get("wall_s")
    coverage = coverage or {}
    incomplete = incomplete_behaviours(coverage.get("collected", []), coverage.get("deselected", []), rows)
    if incomplete:
        report["incomplete"] = incomplete
    if header["environment"].get("shard"):  # what ``merge`` needs to tell what the shards ran together
        report["coverage"] = {k: [list(t) for t in coverage.get(k, [])] for k in ("collected", "deselected")}
    ran = {r["behaviour"] for r in rows}
    floors = {b: f for b, f in sorted((floors or bh.floors()).items()) if b in ran}
    if floors:
        report["floors"] = floors
    decl = declared or [e.as_dict() for e in all_declared()]
    if decl:
        report["declared"] = declaration_statuses(
            decl, rows, header["environment"], incomplete, partial=bool(report.get("partial"))
        )
    return report


def write_json(report: dict, path: Path) -> None:
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        json.dump(report, fh, indent=1, default=str)
        fh.write("\n")
    os.chmod(tmp, 0o644)  # mkstemp makes 0600; a report is as readable as the files beside it
    os.replace(tmp, path)


def _validate(report, path) -> dict:
    if not isinstance(report, dict):
        raise ReportError(f"{path}: not a report (top level is {type(report).__name__}, expected an object)")
    v = report.get("schema_version")
    if v not in READABLE:
        raise ReportError(f"{path}: schema_version {v!r} is not supported (expected one of {READABLE})")
    for k in ("environment", "results"):
        if k not in report:
            raise ReportError(f"{path}: missing key {k!r}")
    if not isinstance(report["results"], list):
        raise ReportError(f"{path}: 'results' is not a list")
    for i, row in enumerate(report["results"]):
        if not isinstance(row, dict):
            raise ReportError(f"{path}: results[{i}] is not an object")
        missing = [k for k in ROW_KEYS if k not in row]
        if missing:
            raise ReportError(f"{path}: results[{i}] lacks {', '.join(missing)}")
        if row["outcome"] not in OUTCOMES:
            raise ReportError(f"{path}: results[{i}] has unknown outcome {row['outcome']!r}")
        for key, types, what in FIELD_TYPES:
            if key in row and row[key] is not None and not isinstance(row[key], types):
                raise ReportError(
                    f"{path}: results[{i}].{key} is {type(row[key]).__name__} {row[key]!r:.60}, expected {what}"
                )
    if not isinstance(report["environment"], dict):
        raise ReportError(f"{path}: 'environment' is {type(report['environment']).__name__}, expected an object")
    return migrate(report)


def migrate(report: dict) -> dict:
    """A loaded report in the current schema. Version 1 spelled some gradient kinds otherwise
    (``zeros``, ``both-sides``, ``mean-of-sides``, a side key's ``none``) and keyed the kinks
    ``relu@0``: its rows' observed, expected and declared keys and values and its declarations'
    keys and answers are renamed (:func:`suite.kinds.current_key`, :func:`suite.kinds.current`),
    and ``migrated_from`` says so. Nothing else differs between the versions.

    >>> r = migrate({"schema_version": 1, "results": [{"observed": {"round_grad": "zeros"}, "expected": {}}]})
    >>> r["schema_version"], r["migrated_from"], r["results"][0]["observed"]
    (2, 1, {'round_grad': 'zero'})
    """
    if report.get("schema_version") == SCHEMA_VERSION:
        return report
    for row in report.get("results", []):
        test = row.get("test", "")
        for field in ("observed", "expected", "declared"):
            if isinstance(row.get(field), dict):
                renamed = {kinds.current_key(test, k): v for k, v in row[field].items()}
                row[field] = renamed if field == "declared" else {k: kinds.current(k, v) for k, v in renamed.items()}
    for key in ("declared", "_declared"):
        if isinstance(report.get(key), list):
            report[key] = [_renamed_answer(d) for d in report[key]]
    report["migrated_from"] = report["schema_version"]
    report["schema_version"] = SCHEMA_VERSION
    return report


def _renamed_answer(d):
    if not isinstance(d, dict) or "key" not in d:
        return d
    key = kinds.current_key(str(d.get("id", "")), d["key"])
    return {**d, "key": key, **({"observed": kinds.current(key, d["observed"])} if "observed" in d else {})}


def load(path, *, coverage: bool = False) -> dict:
    """Load a ``.json`` or streamed ``.jsonl`` report; raise :class:`ReportError` if unusable.
    ``coverage=True`` (a stream) also keeps ``_coverage``, what the run meant to run."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ReportError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError) as e:
        raise ReportError(f"{path}: cannot read ({e})") from None
    if not text.strip():
        raise ReportError(f"{path}: empty file")
    if path.suffix == ".jsonl":
        report = _load_jsonl(text, path)
        report.pop("_footer", None)
        if not coverage:
            report.pop("_coverage", None)
            report.pop("_declared", None)
            report.pop("_floors", None)
        return report
    try:
        report = json.loads(text)
    except json.JSONDecodeError as e:
        raise ReportError(
            f"{path}: not valid JSON (truncated or corrupt?): {e.msg} at line {e.lineno} column {e.colno}"
        ) from None
    return _validate(report, path)


def _records(text, path):
    """Each non-empty line of a stream as (line number, kind, record); a last line that is not
    JSON (the run was killed mid-write) ends it, keeping everything before it."""
    lines = text.splitlines()
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError:
            if n == len(lines):
                return
            raise ReportError(f"{path}: line {n} is not valid JSON") from None
        yield n, obj.pop("kind", None), obj


def _load_jsonl(text, path) -> dict:
    header, rows, footer, deps, declared, floors = None, [], None, {}, {}, {}
    coverage = {"collected": [], "deselected": []}
    for n, kind, obj in _records(text, path):
        if kind == "header":
            header = header or obj  # a resumed run appends a header per process: keep the first
        elif kind == "row":
            rows.append(obj)
        elif kind == "footer":
            footer = obj  # the last process's footer
        elif kind == "start":
            continue
        elif kind in coverage:  # which tests the run meant to run (declaration statuses)
            coverage[kind] += [tuple(t) for t in obj.get("tests", [])]
        elif kind == "deprecation":
            deps.setdefault(obj.get("behaviour"), set()).add(obj.get("message"))
        elif kind == "declared":  # each process sends the declarations it imported (the same ids)
            for d in obj.get("declarations", []):
                declared.setdefault(d.get("id"), d)
            floors.update(obj.get("floors") or {})
        else:
            raise ReportError(f"{path}: line {n} has unknown kind {kind!r}")
    if header is None:
        raise ReportError(f"{path}: no header line (not a streamed report?)")
    report = {
        "schema_version": header.get("schema_version"),
        "created": header.get("created"),
        "environment": header.get("environment", {}),
        "results": rows,
    }
    if deps:
        report["deprecations"] = {b: sorted(m) for b, m in sorted(deps.items())}
    if footer is None or footer.get("interrupted"):
        report["partial"] = True
    report["_coverage"] = coverage  # for assemble(); not part of a written report
    report["_declared"] = list(declared.values())
    report["_floors"] = floors
    return _validate(report, path)


def last_record(jsonl: Path) -> dict:
    """The stream's last line, parsed: its footer when the run wrote its whole report (an
    interrupted run's says ``interrupted``); {} when there is none or it is being written."""
    try:
        last = json.loads(Path(jsonl).read_text(encoding="utf-8").splitlines()[-1])
    except (OSError, IndexError, ValueError):
        return {}
    return last if isinstance(last, dict) else {}
