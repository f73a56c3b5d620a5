"""Which tf-nightly made each change (issue 49): a binary search over the nightly builds.

``autodiff-semantics bisect OLD NEW`` takes the observations that differ between two reports
(:func:`watches`: each changed key of each row, and each row whose outcome turned), the
tf-nightly builds the package index offers between the two versions (:func:`candidates`), and
probes nightlies until each change sits between two adjacent builds: the last with the old
answer and the first with the new. A probe runs only the rows whose keys are still open at that
nightly (:func:`plan`), so keys that flip together are searched together, and keys that flip on
different nightlies split as soon as a probe tells them apart. A change that the oldest nightly
on offer already shows is reported as such, never guessed; a key that flips back and forth is
reported with every flip the probes found; a build that cannot be installed or imported is set
aside and its neighbours probed instead.

Everything a probe measured is kept in one JSON state (``reports/nightly/bisect.json``), written
after every probe: an interrupted bisect resumes from it, and a later bisect over the same
reports reuses its probes. The search itself is pure (``probe(version, tests) -> Probe``), so
it is tested against a fake index and a fake runner (``tests/test_bisect.py``); the real probe
installs each nightly in a cached environment (:mod:`suite.nightlies`).

>>> cands = ["2.22.0.dev20260301", "2.22.0.dev20260302", "2.22.0.dev20260303", "2.22.0.dev20260304"]
>>> truth = {v: ("zero" if v < "2.22.0.dev20260303" else "nan") for v in cands}
>>> state = new_state("old.json", "new.json", cands, [Watch("t", "k", "zero", "nan")])
>>> run(state, lambda v, tests: Probe(f"g{v[-2:]}", {"t": {"k": truth[v]}}), save=lambda s: None)
4
>>> [(f["last_old"], f["first_new"]) for f in results(state)[0]["flips"]]
[('2.22.0.dev20260302', '2.22.0.dev20260303')]
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import json
import os
import re
import tempfile
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from pathlib import Path
from typing import Callable

from suite import kinds, versions

#: 2: the words of :mod:`suite.kinds` (a version-1 state is renamed on load: :func:`load_state`).
SCHEMA = 2
#: The key under which a row's outcome is watched (a row that began or stopped failing).
OUTCOME = "(outcome)"
#: A row that ran without recording the key.
NOT_OBSERVED = "(not observed)"
#: A row the probe was asked for and did not run (not collected: the test does not exist there).
NOT_RUN = "(not run)"
TF_REPO = "https://github.com/tensorflow/tensorflow"


class BisectError(ValueError):
    """A bisect that cannot start as asked; the message says why."""


class ProbeError(RuntimeError):
    """A nightly that cannot be probed (no wheel for this platform, an install or import that
    fails): it is set aside and its neighbours are probed instead."""


@dataclasses.dataclass(frozen=True)
class Watch:
    """One changed observation: a row (test id), a key, its old and new value."""

    test: str
    key: str
    old: str
    new: str

    @property
    def id(self) -> str:
        return f"{self.test} {self.key}"


@dataclasses.dataclass
class Probe:
    """What one nightly answered: its ``tf.version.GIT_VERSION`` and, per test it ran, the keys
    it observed (``(outcome)`` included)."""

    git_version: str | None
    observed: dict


def watches(changes) -> list[Watch]:
    """The changes of a :class:`suite.report.diff.Changelog` that a nightly can answer: changed
    observations (TensorFlow rows) and turned outcomes; oracle rows do not move with TensorFlow."""
    out = []
    for c in changes:
        if not c.subject.startswith("tensorflow-"):
            continue
        if c.kind == "observation changed":
            out.append(Watch(c.test, c.detail, _text(c.old), _text(c.new)))
        elif c.kind in ("newly failing", "newly passing"):
            out.append(Watch(c.test, OUTCOME, _text(c.old), _text(c.new)))
    return out


def _text(v) -> str:
    return v if isinstance(v, str) else json.dumps(v, sort_keys=True)


def is_nightly(version: str) -> bool:
    """A tf-nightly version (either spelling)?

    >>> is_nightly("2.23.0.dev20261026"), is_nightly("2.23.0-dev20261026"), is_nightly("2.21.0")
    (True, True, False)
    """
    return re.search(r"[.-]dev\d{8}$", version) is not None


def nightly_date(version: str) -> str:
    """The day a nightly was built.

    >>> nightly_date("2.23.0.dev20261026")
    '2026-10-26'
    """
    m = re.search(r"dev(\d{4})(\d{2})(\d{2})$", version)
    if not m:
        raise BisectError(f"{version!r} is not a tf-nightly version (like 2.23.0.dev20261026)")
    return "-".join(m.groups())


def pep440(version: str) -> str:
    """TensorFlow's own spelling of a nightly (``tf.__version__``) as the package index spells it.

    >>> pep440("2.23.0-dev20261026"), pep440("2.21.0")
    ('2.23.0.dev20261026', '2.21.0')
    """
    return re.sub(r"-dev(\d{8})$", r".dev\1", version)


def candidates(offered, old: str, new: str) -> list[str]:
    """The nightlies of ``offered`` from the first of ``old``'s release line (or ``old`` itself,
    a nightly) up to ``new``, oldest first.

    >>> offered = ["2.20.0.dev20250101", "2.21.0.dev20260202", "2.22.0.dev20260204", "2.23.0.dev20261026",
    ...            "2.23.0.dev20261027", "2.21.0"]
    >>> candidates(offered, "2.21.0", "2.23.0.dev20261026")
    ['2.21.0.dev20260202', '2.22.0.dev20260204', '2.23.0.dev20261026']
    """
    old, new = pep440(old), pep440(new)
    low = old if is_nightly(old) else re.sub(r"rc\d+$", "", old) + ".dev0"
    lo, hi = versions.key(low), versions.key(new)
    got = sorted({pep440(v) for v in offered if is_nightly(pep440(v))}, key=versions.key)
    return [v for v in got if lo <= versions.key(v) <= hi]


def commit_of(git_version: str | None) -> str | None:
    """The commit hash in a ``GIT_VERSION`` (``v2.21.0-rc1-5-ga481b10260d`` -> ``a481b10260d``).

    >>> commit_of("v1.12.1-133545-g0123abcd9"), commit_of("0123abcd" * 5)[:8], commit_of("unknown")
    ('0123abcd9', '0123abcd', None)
    """
    if not git_version:
        return None
    m = re.search(r"-g([0-9a-f]{7,40})$", git_version) or re.fullmatch(r"([0-9a-f]{7,40})", git_version)
    return m.group(1) if m else None


def compare_link(a: str | None, b: str | None) -> str | None:
    """The GitHub compare view between two builds' commits (None where one does not say)."""
    ca, cb = commit_of(a), commit_of(b)
    return f"{TF_REPO}/compare/{ca}...{cb}" if ca and cb else None


def new_state(old_label: str, new_label: str, cands, watch_list) -> dict:
    return {
        "schema": SCHEMA,
        "old": old_label,
        "new": new_label,
        "candidates": list(cands),
        "watches": [dataclasses.asdict(w) for w in watch_list],
        "probes": {},
        "broken": {},
    }


def resume(previous: dict | None, fresh: dict) -> dict:
    """``fresh`` with what ``previous`` (a state of the same two reports) already measured: its
    probes and its set-aside nightlies. A state of other reports is not reused."""
    if not previous or previous.get("schema") != SCHEMA:
        return fresh
    if (previous.get("old"), previous.get("new")) != (fresh["old"], fresh["new"]):
        return fresh
    fresh["probes"] = {v: p for v, p in previous.get("probes", {}).items() if v in fresh["candidates"]}
    fresh["broken"] = {v: r for v, r in previous.get("broken", {}).items() if v in fresh["candidates"]}
    return fresh


def _watch_list(state) -> list[Watch]:
    return [Watch(**w) for w in state["watches"]]


def _usable(state) -> list[str]:
    return [v for v in state["candidates"] if v not in state["broken"]]


def value_at(state, version: str, w: Watch) -> str | None:
    """What ``version`` answered for ``w`` (None: not probed for its row)."""
    probe = state["probes"].get(version)
    if probe is None or w.test not in probe["observed"]:
        return None
    return probe["observed"][w.test].get(w.key, NOT_OBSERVED)


def _points(state, w: Watch, usable) -> list[tuple[int, str]]:
    return [(i, v) for i, ver in enumerate(usable) if (v := value_at(state, ver, w)) is not None]


def _open(points) -> list[tuple[int, int]]:
    """The consecutive probed pairs whose answers differ with an unprobed nightly between them."""
    return [(i, j) for (i, a), (j, b) in zip(points, points[1:]) if a != b and j > i + 1]


def plan(state, busy=()) -> tuple[str, list[str]] | None:
    """The next probe: a nightly and the tests to run there; None when every change is placed
    (or, with probes in flight at the nightlies ``busy``, when what is left waits on them).

    The oldest and newest usable nightlies come first (for every watch not yet probed there);
    then the midpoint of the interval most watches share, running every watch whose open
    interval holds that midpoint. An interval with a busy nightly inside waits for its answer."""
    usable = _usable(state)
    if not usable:
        return None
    busy_at = {usable.index(v) for v in busy if v in usable}
    ws = _watch_list(state)
    for end in (0, len(usable) - 1):
        tests = sorted({w.test for w in ws if value_at(state, usable[end], w) is None})
        if tests:
            return None if end in busy_at else (usable[end], tests)
    intervals = _open_intervals(state, ws, usable, busy_at)
    if not intervals:
        return None
    (i, j), _ = max(intervals.items(), key=lambda kv: (len({w.test for w in kv[1]}), -kv[0][0]))
    mid = (i + j) // 2
    tests = sorted({w.test for (a, b), group in intervals.items() if a < mid < b for w in group})
    tests = [t for t in tests if any(value_at(state, usable[mid], w) is None for w in ws if w.test == t)]
    return usable[mid], tests


def _open_intervals(state, ws, usable, busy_at) -> dict:
    """{(i, j): watches}: the open intervals of the usable nightlies' indices, each with the
    watches still to be placed there, leaving out an interval with a busy probe inside."""
    intervals: dict[tuple[int, int], list[Watch]] = {}
    for w in ws:
        for i, j in _open(_points(state, w, usable)):
            if not any(i < b < j for b in busy_at):
                intervals.setdefault((i, j), []).append(w)
    return intervals


def record(state, version: str, probe: Probe, tests) -> None:
    """Merge a probe's answers into the state: each asked test's observed keys, ``(not run)`` for
    one the nightly did not run."""
    entry = state["probes"].setdefault(version, {"git_version": probe.git_version, "observed": {}})
    if probe.git_version:
        entry["git_version"] = probe.git_version
    for t in tests:
        entry["observed"][t] = {k: _text(v) for k, v in (probe.observed.get(t) or {OUTCOME: NOT_RUN}).items()}


def run(
    state,
    probe: Callable[[str, list], Probe],
    *,
    save: Callable[[dict], None],
    progress: Callable[[str], None] = lambda s: None,
    max_probes: int | None = None,
    jobs: int = 1,
) -> int:
    """Probe until every change is placed (or ``max_probes`` probes ran), up to ``jobs`` probes
    at once (each waits on installs and its own process: two keep a 2-core machine busy); the
    state is saved after each answer. Returns the number of probes run."""
    started = 0
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        flying: dict = {}
        while True:
            while len(flying) < max(1, jobs) and (max_probes is None or started < max_probes):
                step = plan(state, busy=[v for v, _ in flying.values()])
                if step is None:
                    break
                version, tests = step
                started += 1
                progress(
                    f"probe {started}: tf-nightly {version} ({nightly_date(version)}), {len(tests)} rows; "
                    f"{status_line(state)}"
                )
                flying[pool.submit(probe, version, tests)] = step
            if not flying:
                break
            done, _ = wait(flying, return_when=FIRST_COMPLETED)
            for f in done:
                version, tests = flying.pop(f)
                try:
                    record(state, version, f.result(), tests)
                except ProbeError as e:
                    state["broken"][version] = str(e)
                    progress(f"tf-nightly {version} set aside: {e}")
                save(state)
    return started


def results(state) -> list[dict]:
    """Per watch: where it changed. ``status`` is ``placed`` (every difference between probed
    nightlies sits between two adjacent ones), ``before the oldest nightly`` (the oldest usable
    nightly already answers the new value, and nothing flips after it), ``open`` (the search
    stopped before placing it), or ``not reproduced`` (the newest nightly does not answer the
    report's new value). ``flips`` lists every change between probed neighbours found, with
    both builds, their dates, GIT_VERSIONs and the compare link."""
    usable = _usable(state)
    out = []
    for w in _watch_list(state):
        pts = _points(state, w, usable)
        flips = []
        for (i, a), (j, b) in zip(pts, pts[1:]):
            if a == b:
                continue
            before, after = usable[i], usable[j]
            gb = state["probes"][before].get("git_version")
            ga = state["probes"][after].get("git_version")
            flips.append(
                {
                    "from": a,
                    "to": b,
                    "last_old": before,
                    "first_new": after,
                    "adjacent": j == i + 1,
                    "first_date": nightly_date(after),
                    "git_last_old": gb,
                    "git_first_new": ga,
                    "compare": compare_link(gb, ga),
                }
            )
        first = pts[0][1] if pts and pts[0][0] == 0 else None
        last = pts[-1][1] if pts and pts[-1][0] == len(usable) - 1 else None
        if any(not f["adjacent"] for f in flips) or first is None or last is None:
            status = "open"
        elif last != w.new:
            status = "not reproduced"
        elif not flips and first == w.new:
            status = "before the oldest nightly"
        else:
            status = "placed"
        out.append({**dataclasses.asdict(w), "status": status, "oldest": first, "newest": last, "flips": flips})
    return out


def status_line(state) -> str:
    """How far the search is, in one line.

    >>> status_line(new_state("a", "b", ["2.22.0.dev20260301"], []))
    '0 of 0 changes placed, 0 nightlies probed'
    """
    rs = results(state)
    done = sum(r["status"] != "open" for r in rs)
    return f"{done} of {len(rs)} changes placed, {len(state['probes'])} nightlies probed"


def first_seen(state) -> dict:
    """(test, key) -> the nightly that first gave the new value, for the upgrade page: ``{"status",
    "first_new", "first_date", "compare"}`` (the last flip to the new value)."""
    out = {}
    for r in results(state):
        to_new = [f for f in r["flips"] if f["to"] == r["new"]]
        f = to_new[-1] if to_new else None
        out[(r["test"], r["key"])] = {
            "status": r["status"],
            "first_new": f and f["first_new"],
            "first_date": f and f["first_date"],
            "compare": f and f["compare"],
            "flips": len(r["flips"]),
        }
    return out


def load_state(path) -> dict | None:
    """A saved state, or None where there is none; a corrupt one is an error naming the file."""
    path = Path(path)
    if not path.exists():
        return None
    try:
        state = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as e:
        raise BisectError(f"{path}: not a bisect state ({e}); move it away to start afresh") from None
    if not isinstance(state, dict) or "probes" not in state:
        raise BisectError(f"{path}: not a bisect state (no 'probes'); move it away to start afresh")
    return migrate(state)


def migrate(state: dict) -> dict:
    """A schema-1 state in today's words (:func:`suite.kinds.current_key`, :func:`suite.kinds.current`):
    its watches' keys and answers and every probe's observations; its results are recomputed from them.

    >>> probes = {"a": {"observed": {"t": {"k": "zeros"}}}}
    >>> s = migrate({"schema": 1, "candidates": ["a"], "broken": {}, "probes": probes,
    ...              "watches": [{"test": "t", "key": "k", "old": "zeros", "new": "nan"}]})
    >>> s["schema"], s["watches"][0]["old"], s["probes"]["a"]["observed"]["t"]["k"], s["results"][0]["oldest"]
    (2, 'zero', 'zero', 'zero')
    """
    if state.get("schema") != 1:
        return state
    for w in state.get("watches", []):
        w["key"] = kinds.current_key(w["test"], w["key"])
        w["old"], w["new"] = kinds.current(w["key"], w["old"]), kinds.current(w["key"], w["new"])
    for probe in state.get("probes", {}).values():
        observed = probe.get("observed") or {}
        for test, keys in observed.items():
            renamed = {kinds.current_key(test, k): v for k, v in keys.items()}
            observed[test] = {k: kinds.current(k, v) for k, v in renamed.items()}
    state["schema"] = SCHEMA
    state["results"] = results(state)
    return state


def save_state(state, path) -> None:
    """Write the state and its results atomically (an interrupted write leaves the old file)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    state = {**state, "updated": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")}
    state["results"] = results(state)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump(state, f, indent=1, sort_keys=True)
        f.write("\n")
    os.replace(tmp, path)
