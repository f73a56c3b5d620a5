"""Report schema (version 1): assemble, write atomically, load and validate.

A report is ``latest.json`` (complete run) or ``latest.jsonl`` (streamed: a header line,
one line per row, a footer line when the run finished). Loading either gives the same
dict; a JSONL without its footer loads as ``partial: true``.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

SCHEMA_VERSION = 1
ROW_KEYS = (
    "behaviour",
    "test",
    "framework",
    "mode",
    "device",
    "outcome",
    "observed",
    "expected",
    "max_rel_err",
    "duration_s",
)
OUTCOMES = ("passed", "failed", "skipped", "error", "crashed", "unavailable", "xfailed")


class ReportError(ValueError):
    """A report file that cannot be used; the message names the file and the problem."""


def assemble(header: dict, rows: list[dict], footer: dict | None, deprecations: dict | None = None) -> dict:
    from suite.expectations import all_declared

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
    ran = {r["behaviour"] for r in rows}
    decl = [e.as_dict() for e in all_declared()]
    if decl:
        report["declared"] = [d for d in decl if not ran or any(d["module"].endswith(b.replace("-", "_")) for b in ran)]
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
    if v != SCHEMA_VERSION:
        raise ReportError(f"{path}: schema_version {v!r} is not supported (expected {SCHEMA_VERSION})")
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
    return report


def load(path) -> dict:
    """Load a ``.json`` or streamed ``.jsonl`` report; raise :class:`ReportError` if unusable."""
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
        return _load_jsonl(text, path)
    try:
        report = json.loads(text)
    except json.JSONDecodeError as e:
        raise ReportError(
            f"{path}: not valid JSON (truncated or corrupt?): {e.msg} at line {e.lineno} column {e.colno}"
        ) from None
    return _validate(report, path)


def _load_jsonl(text, path) -> dict:
    header, rows, footer, deps = None, [], None, {}
    lines = text.splitlines()
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError:
            if n == len(lines):  # the run was killed mid-write: keep everything before it
                break
            raise ReportError(f"{path}: line {n} is not valid JSON") from None
        kind = obj.pop("kind", None)
        if kind == "header":
            header = header or obj  # a resumed run appends a header per process: keep the first
        elif kind == "row":
            rows.append(obj)
        elif kind == "footer":
            footer = obj  # the last process's footer
        elif kind == "start":
            continue
        elif kind == "deprecation":
            deps.setdefault(obj.get("behaviour"), set()).add(obj.get("message"))
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
    return _validate(report, path)
