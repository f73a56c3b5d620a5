"""The self-check: run the relevant cases under each fault and print the kill matrix.

Each fault runs in ``python -m pytest`` subprocesses (faults in parallel where cores
allow), one per behaviour it names, over that behaviour's case modules, TensorFlow rows
only (the oracles still run inside those tests), stopping at the first failure. A fault
is *killed* when every behaviour it names has a case whose assertion fails under it (a
crash, an exception in the code under test, an import or collection error is reported as
what it is, not as a kill); a control run with no fault must pass first, or a kill would
prove nothing.
"""

from __future__ import annotations

import concurrent.futures as cf
import dataclasses
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from suite import behaviours as bh
from suite.faults import CATALOGUE

CONTROL_TIMEOUT_S = 3600


@dataclasses.dataclass
class Outcome:
    fault: str
    behaviours: tuple
    killed_by: dict  # behaviour -> first failing test
    rc: int
    seconds: float
    error: str = ""

    @property
    def killed(self) -> bool:
        return bool(self.behaviours) and all(b in self.killed_by for b in self.behaviours)


def _pytest(files, faults, report_dir, profile, stop_first=True, timeout=1500, seed=None):
    env = dict(os.environ)
    cmd = [
        sys.executable,
        "-m",
        "pytest",
        *files,
        "-p",
        "suite.plugin",
        "--profile",
        profile,
        "--devices",
        "cpu",
        "--report-dir",
        str(report_dir),
        "-p",
        "no:cacheprovider",
        "-q",
        "-k",
        "tensorflow",
        "-p",
        "suite.faults.plugin",
        *(a for f in faults for a in ("--fault", f)),
    ]
    if seed is not None:
        cmd += ["--hypothesis-seed", str(seed)]
    if stop_first:
        cmd.append("-x")
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)
    try:
        rows = json.loads((Path(report_dir) / "latest.json").read_text())["results"]
    except (OSError, ValueError):
        rows = []
    return p, rows


def run_fault(fault, files_for, profile="ci", seed=None) -> Outcome:
    t0 = time.time()
    killed, rc, err = {}, 0, ""
    for behaviour in fault.breaks:  # each named behaviour must catch it on its own
        with tempfile.TemporaryDirectory(prefix=f"fault-{fault.name}-") as d:
            try:
                p, rows = _pytest(sorted(files_for(behaviour)), [fault.name], d, profile, seed=seed)
            except subprocess.TimeoutExpired:
                rc, err = -1, f"{err}{behaviour}: timed out\n"
                continue
        for r in rows:
            if r["behaviour"] != behaviour or r["outcome"] not in ("failed", "error", "crashed"):
                continue
            if r["outcome"] == "failed" and r.get("failure") == "assertion":
                killed.setdefault(behaviour, r["test"])
            else:  # a crash or an exception under the fault proves no check caught it
                what = r.get("failure") or r.get("signal") or r["outcome"]
                err += (
                    f"{behaviour}: {r['test']} {r['outcome']} ({what}), not an assertion: {r.get('error', '')[:300]}\n"
                )
        rc = max(rc, p.returncode)
        if behaviour not in killed and p.returncode != 0 and not rows:  # failed before any case ran: show why
            err += f"{behaviour}: no case ran (import or collection error): {p.stdout[-1500:]}{p.stderr[-1500:]}\n"
    return Outcome(fault.name, fault.breaks, killed, rc, time.time() - t0, err)


def control(files, profile="ci", seed=None) -> tuple[bool, str]:
    with tempfile.TemporaryDirectory(prefix="fault-control-") as d:
        # every module's TensorFlow rows in one process: minutes, more on a loaded machine
        try:
            p, rows = _pytest(files, [], d, profile, stop_first=True, seed=seed, timeout=CONTROL_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            return False, f"the control run did not finish in {CONTROL_TIMEOUT_S} s"
    bad = [r["test"] for r in rows if r["outcome"] in ("failed", "error", "crashed")]
    return p.returncode == 0 and not bad, "\n".join(bad) or p.stdout[-1500:]


def _selected(names, found) -> list:
    """The catalogue's faults named (default: all); unknown names, or faults whose behaviours
    have no case module, are refused."""
    unknown = [n for n in (names or []) if n not in CATALOGUE]
    if unknown:
        raise ValueError(f"unknown fault(s) {', '.join(unknown)}; known: {', '.join(sorted(CATALOGUE))}")
    faults = [CATALOGUE[n] for n in (names or sorted(CATALOGUE))]
    missing = sorted({b for f in faults for b in f.breaks if b not in found})
    if missing:
        raise ValueError(f"faults name behaviours with no case module: {', '.join(missing)}")
    return faults


def _outcome_line(i: int, n: int, o) -> str:
    if o.killed:
        return f"[{i}/{n}] {o.fault}: killed ({o.seconds:.0f}s) by {next(iter(o.killed_by.values()))}"
    survivors = [b for b in o.behaviours if b not in o.killed_by]
    return f"[{i}/{n}] {o.fault}: SURVIVED ({o.seconds:.0f}s) (not caught by {', '.join(survivors)}) {o.error[-300:]}"


def run(names=None, *, jobs=None, profile="ci", with_control=True, seed=None, out=print) -> int:
    """Run the named faults (default: all); ``seed`` runs Hypothesis with that seed instead
    of the profile's derandomized draws (a kill must not hang on one lucky draw)."""
    found = bh.discover()
    cases = bh.default_cases_dir()
    faults = _selected(names, found)

    def files_for(b):
        return [str(cases / found[b].module_file)]

    jobs = jobs or max(1, min(len(faults), os.cpu_count() or 1))
    if with_control:
        files = sorted({f for flt in faults for b in flt.breaks for f in files_for(b)})
        out(f"control run (no fault) over {len(files)} case module(s)...")
        ok, detail = control(files, profile, seed)
        if not ok:
            out(f"control run failed: the cases do not pass without a fault, so kills would prove nothing:\n{detail}")
            return 2
    out(f"running {len(faults)} fault(s), {jobs} at a time")
    results = []
    with cf.ThreadPoolExecutor(jobs) as ex:
        futs = {ex.submit(run_fault, f, files_for, profile, seed): f for f in faults}
        for i, fut in enumerate(cf.as_completed(futs), 1):
            results.append(fut.result())
            out(_outcome_line(i, len(faults), results[-1]))
    results.sort(key=lambda o: o.fault)
    for line in matrix(results):
        out(line)
    killed = sum(o.killed for o in results)
    out(f"kill rate: {killed}/{len(results)} ({100.0 * killed / max(1, len(results)):.0f}%)")
    return 0 if killed == len(results) else 1


def matrix(results) -> list[str]:
    lines = ["| fault | behaviour | result | failing test |", "|---|---|---|---|"]
    for o in results:
        for b in o.behaviours:
            t = o.killed_by.get(b)
            res = "killed" if t else "survived"
            lines.append(f"| {o.fault} | {b} | {res} | {t.split('::', 1)[-1] if t else ''} |")
    return lines
