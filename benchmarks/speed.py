"""The speed budget of a parallel run, measured: the same selection run serially and with
``--jobs N`` on this machine, one after the other, in one script.

    python benchmarks/speed.py                       # whole ci suite on CPU, serial vs --jobs 2
    python benchmarks/speed.py -b partial-stop-gradient --out /tmp/speed.json
    python benchmarks/speed.py --against a261e36 --out reports/benchmarks/speed-against-a261e36.json

``--against REV`` measures issue 46's budget instead: the ci profile with ``--jobs`` on empty
caches at REV (a worktree) and then at HEAD, then HEAD's ci and quick profiles again on the
caches its first run filled; HEAD's walls must be at most 0.5, 0.35 and 0.2 of REV's. The
result also counts the observations that differ between REV's and HEAD's ci rows of the same
tests (the draws changed) and checks that HEAD's cold and warm rows are identical.

Writes ``reports/benchmarks/speed.json``: both wall times, their ratio, the budget and
whether it was met, examples per second per framework-mode column of each run, and whether
the two runs gave identical rows. The budget: ``--jobs 2`` wall time at most 0.6 of the
serial wall time (issue 17) and at most 330 s (issue 33). Wall time is timed around the CLI
process, so it includes interpreter and framework start-up, as a user waits for it.
Exit 0 when the budget is met and the rows agree, 1 otherwise.

JAX's compiled programs are cached between runs (``AUTODIFF_SEMANTICS_COMPILE_CACHE``, see
``suite.frameworks``). ``--cache cold`` (the default) gives each timed run an empty cache of its
own, so neither is faster for the other's compilations: the time of a first run on a new
machine. ``--cache shared`` runs both on the user's shared cache as it is (the serial run
fills it for the parallel one): the time of a repeated run; the result says which.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the checkout's suite, also when run as a script

from suite.bench.table import this_machine, write_result  # noqa: E402

BUDGET_RATIO = 0.6
BUDGET_WALL_S = 330.0
SAME = ("framework", "mode", "device", "outcome", "observed", "expected", "examples")


def timed_run(args: list[str], report_dir: Path, cache: Path | None = None, cwd: Path = ROOT) -> tuple:
    cmd = [sys.executable, "-m", "suite", "run", *args, "--report-dir", str(report_dir)]
    print("speed:", " ".join(cmd[2:]), f"(in {cwd})" if cwd != ROOT else "", file=sys.stderr, flush=True)
    env = dict(os.environ)
    if cache is not None:  # a compilation cache of these runs' own (empty for the first)
        env["AUTODIFF_SEMANTICS_COMPILE_CACHE"] = str(cache)
    env.pop("TF_XLA_FLAGS", None)  # a cache of the user's own would hide first compilations
    t0 = time.perf_counter()
    rc = subprocess.run(cmd, cwd=cwd, env=env).returncode
    wall = time.perf_counter() - t0
    try:
        report = json.loads((report_dir / "latest.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise SystemExit(f"speed: {' '.join(args)} wrote no report ({e}); exit status {rc}") from None
    return wall, report, rc


def columns(report) -> dict:
    from suite.report import query

    return {s["column"]: {k: s[k] for k in ("examples", "test_s", "examples_per_s")} for s in query.speed(report)}


#: issue 46: HEAD's ci wall against the older revision's, cold and warm, and the quick profile's (warm)
AGAINST_BUDGET = {"ci-cold": 0.5, "ci-warm": 0.35, "quick-warm": 0.2}


def observation_changes(old: dict, new: dict) -> dict:
    """Between two reports' rows of the same tests: outcomes that differ, and observed keys
    whose values differ (a key one row did not observe is not counted)."""
    a = {r["test"]: r for r in old["results"]}
    b = {r["test"]: r for r in new["results"]}
    common = sorted(set(a) & set(b))
    outcomes = [t for t in common if a[t]["outcome"] != b[t]["outcome"]]
    keys = []
    for t in common:
        oa, ob = a[t].get("observed") or {}, b[t].get("observed") or {}
        keys += [f"{t} {k}: {oa[k]!r} -> {ob[k]!r}" for k in sorted(set(oa) & set(ob)) if oa[k] != ob[k]]
    return {
        "common_tests": len(common),
        "only_old": len(set(a) - set(b)),
        "only_new": len(set(b) - set(a)),
        "outcomes_changed": outcomes,
        "observations_changed": len(keys),
        "observations_changed_first": keys[:60],
    }


def outcomes(report) -> dict:
    out: dict = {}
    for r in report["results"]:
        out[r["outcome"]] = out.get(r["outcome"], 0) + 1
    return out


def against(rev: str, a) -> int:
    """HEAD (this checkout, as it is) against ``rev``: the ci profile with ``--jobs`` on empty
    caches at ``rev`` and at HEAD, then HEAD's ci and quick again on the caches HEAD's first run
    filled, one after the other."""
    common = [*[x for b in a.behaviour for x in ("--behaviour", b)], "--devices", "cpu", "--jobs", a.jobs]
    runs = {}
    with tempfile.TemporaryDirectory(prefix="adsem-speed-") as tmp:
        tmp = Path(tmp)
        where = Path(a.keep) if a.keep else tmp
        src = tmp / "src"
        subprocess.run(["git", "worktree", "add", "-q", "--detach", str(src), rev], cwd=ROOT, check=True)
        try:
            plan = [
                ("old-ci-cold", ["--profile", "ci"], tmp / "cache-old", src),
                ("ci-cold", ["--profile", "ci"], tmp / "cache-head", ROOT),
                ("ci-warm", ["--profile", "ci"], tmp / "cache-head", ROOT),
                ("quick-warm", ["--profile", "quick"], tmp / "cache-head", ROOT),
            ]
            for name, args, cache, cwd in plan:
                wall, report, rc = timed_run([*common, *args], where / name, cache, cwd)
                runs[name] = {"wall_s": round(wall, 1), "exit": rc, "rows": len(report["results"]),
                              "outcomes": outcomes(report), "columns": columns(report), "report": report}  # fmt: skip
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(src)], cwd=ROOT)
    base = runs["old-ci-cold"]["wall_s"]
    ratios = {k: round(runs[k]["wall_s"] / base, 3) for k in AGAINST_BUDGET}
    met = all(ratios[k] <= b for k, b in AGAINST_BUDGET.items())
    cold, warm = runs["ci-cold"]["report"], runs["ci-warm"]["report"]
    same = {r["test"]: {k: r[k] for k in SAME} for r in cold["results"]} == {
        r["test"]: {k: r[k] for k in SAME} for r in warm["results"]
    }
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    out = {
        "machine": this_machine(),
        "frameworks": {n: (i or {}).get("version") for n, i in cold["environment"]["frameworks"].items()},
        "selection": a.behaviour or "all",
        "old": rev,
        "new": head.stdout.strip() + ("+dirty" if _dirty() else ""),
        "jobs": a.jobs,
        "runs": {k: {f: v for f, v in r.items() if f != "report"} for k, r in runs.items()},
        "ratios": ratios,
        "budget": {**AGAINST_BUDGET, "met": met},
        "cold_warm_rows_identical": same,
        "old_vs_new_ci": observation_changes(runs["old-ci-cold"]["report"], cold),
        "measured": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    path = write_result(a.out, out)
    print(
        "speed: "
        + ", ".join(f"{k} {runs[k]['wall_s']:.0f} s" for k in runs)
        + f"; ratios {ratios} (budget {AGAINST_BUDGET}: {'met' if met else 'NOT met'}); "
        f"cold and warm rows identical: {same} -> {path}"
    )
    return 0 if met and same else 1


def _dirty() -> bool:
    return bool(subprocess.run(["git", "status", "--porcelain", "--", "suite", "cases"], cwd=ROOT,
                               capture_output=True, text=True).stdout.strip())  # fmt: skip


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--behaviour", "-b", action="append", default=[], help="behaviour id (default: all)")
    ap.add_argument("--jobs", default="2", help="workers of the parallel run (default: 2)")
    ap.add_argument("--profile", default="ci")
    ap.add_argument("--out", default=str(ROOT / "reports" / "benchmarks" / "speed.json"))
    ap.add_argument(
        "--cache",
        choices=("cold", "shared"),
        default="cold",
        help="JAX compilation cache: an empty one per run (default) or the shared one as it is",
    )
    ap.add_argument("--keep", metavar="DIR", help="keep both runs' reports under DIR/serial and DIR/parallel")
    ap.add_argument(
        "--against",
        metavar="REV",
        help="instead: HEAD against REV with --jobs (ci cold at REV and HEAD, then HEAD's ci and quick warm); "
        f"budget: HEAD's walls at most {AGAINST_BUDGET} of REV's",
    )
    a = ap.parse_args(argv)
    if a.against:
        return against(a.against, a)
    common = [*[x for b in a.behaviour for x in ("--behaviour", b)], "--profile", a.profile, "--devices", "cpu"]
    with tempfile.TemporaryDirectory(prefix="adsem-speed-") as tmp:
        where = Path(a.keep) if a.keep else Path(tmp)
        cold = a.cache == "cold"
        serial_s, serial, rc_s = timed_run(common, where / "serial", Path(tmp) / "cache-serial" if cold else None)
        parallel_s, parallel, rc_p = timed_run(
            [*common, "--jobs", a.jobs], where / "parallel", Path(tmp) / "cache-parallel" if cold else None
        )
    same = {r["test"]: {k: r[k] for k in SAME} for r in serial["results"]} == {
        r["test"]: {k: r[k] for k in SAME} for r in parallel["results"]
    }
    ratio = parallel_s / serial_s
    met = ratio <= BUDGET_RATIO and parallel_s <= BUDGET_WALL_S
    out = {
        "machine": this_machine(),
        "frameworks": {n: (i or {}).get("version") for n, i in serial["environment"]["frameworks"].items()},
        "selection": a.behaviour or "all",
        "profile": a.profile,
        "compile_cache": a.cache,
        "rows": len(serial["results"]),
        "serial": {"wall_s": round(serial_s, 1), "exit": rc_s, "columns": columns(serial)},
        "parallel": {"jobs": a.jobs, "wall_s": round(parallel_s, 1), "exit": rc_p, "columns": columns(parallel)},
        "ratio": round(ratio, 3),
        "budget": {"ratio": BUDGET_RATIO, "wall_s": BUDGET_WALL_S, "met": met},
        "identical_rows": same,
        "measured": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    path = write_result(a.out, out)
    print(
        f"speed: serial {serial_s:.0f} s, --jobs {a.jobs} {parallel_s:.0f} s (ratio {ratio:.2f}; budget "
        f"<= {BUDGET_RATIO} and <= {BUDGET_WALL_S:.0f} s: {'met' if met else 'NOT met'}); "
        f"rows identical: {same} -> {path}"
    )
    return 0 if met and same else 1


if __name__ == "__main__":
    raise SystemExit(main())
