"""The speed budget of a parallel run, measured: the same selection run serially and with
``--jobs N`` on this machine, one after the other, in one script.

    python benchmarks/speed.py                       # whole ci suite on CPU, serial vs --jobs 2
    python benchmarks/speed.py -b partial-stop-gradient --out /tmp/speed.json

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


def timed_run(args: list[str], report_dir: Path, cache: Path | None = None) -> tuple[float, dict, int]:
    cmd = [sys.executable, "-m", "suite", "run", *args, "--report-dir", str(report_dir)]
    print("speed:", " ".join(cmd[2:]), file=sys.stderr, flush=True)
    env = dict(os.environ)
    if cache is not None:  # an empty compilation cache of this run's own
        env["AUTODIFF_SEMANTICS_COMPILE_CACHE"] = str(cache)
    t0 = time.perf_counter()
    rc = subprocess.run(cmd, cwd=ROOT, env=env).returncode
    wall = time.perf_counter() - t0
    try:
        report = json.loads((report_dir / "latest.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise SystemExit(f"speed: {' '.join(args)} wrote no report ({e}); exit status {rc}") from None
    return wall, report, rc


def columns(report) -> dict:
    from suite.report import render

    return {s["column"]: {k: s[k] for k in ("examples", "test_s", "examples_per_s")} for s in render.speed(report)}


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
    a = ap.parse_args(argv)
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
