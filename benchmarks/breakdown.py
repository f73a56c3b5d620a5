"""Where an example's time goes, per framework-mode column: one run of a selection (the CLI's
default ``--jobs auto``: each worker makes its own first calls, as in a normal run) with
``suite.bench.breakdown`` loaded, summed per column.

    python benchmarks/breakdown.py                    # whole ci suite on CPU
    python benchmarks/breakdown.py -b forward-mode-gradients --out /tmp/b.json

Writes ``reports/benchmarks/breakdown.json``: per column (and per case module and column,
slowest first) the examples, examples per second
and seconds spent in Hypothesis generation, the subject's first calls per input signature
(tracing, compilation, graph building), its other calls, the oracles' first and other
calls, the rest of the test body, and how many first calls each column made (see
``suite/bench/breakdown.py``). Run it on an idle
machine: the figures are wall-clock seconds.
"""

from __future__ import annotations

import argparse
import collections
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

PARTS = ("generation", "subject_first", "subject_run", "oracle_first", "oracle_run", "body_other")
#: first calls counted per test (tracing, compilation or graph building each)
COUNTS = ("subject_first_calls", "oracle_first_calls")


def summarise(rows, by=lambda r: r["column"]) -> dict:
    cols = collections.defaultdict(lambda: dict.fromkeys(("examples", "total", *PARTS, *COUNTS), 0.0))
    for r in rows:
        if r["column"] is None:
            continue
        c = cols[by(r)]
        for k in c:
            c[k] += r.get(k, 0)
    out = {}
    for name, c in sorted(cols.items(), key=lambda kv: -kv[1]["total"]):
        out[name] = {
            "examples": int(c["examples"]),
            "test_s": round(c["total"], 2),
            "examples_per_s": round(c["examples"] / c["total"], 1) if c["total"] else None,
            "seconds": {k: round(c[k], 2) for k in PARTS},
            "first_calls": {k.removesuffix("_calls"): int(c[k]) for k in COUNTS},
        }
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--behaviour", "-b", action="append", default=[], help="behaviour id (default: all)")
    ap.add_argument("--profile", default="ci")
    ap.add_argument("--frameworks", default="tensorflow,jax,torch")
    ap.add_argument("--out", default=str(ROOT / "reports" / "benchmarks" / "breakdown.json"))
    a = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="adsem-breakdown-") as tmp:
        env = dict(os.environ, ADSEM_BREAKDOWN=str(Path(tmp) / "rows"))
        cmd = [
            sys.executable, "-m", "suite", "run",
            *[x for b in a.behaviour for x in ("--behaviour", b)],
            "--profile", a.profile, "--frameworks", a.frameworks, "--devices", "cpu",
            "--report-dir", str(Path(tmp) / "report"),
            "--", "-p", "suite.bench.breakdown",
        ]  # fmt: skip
        print("breakdown:", " ".join(cmd[2:]), file=sys.stderr, flush=True)
        t0 = time.perf_counter()
        rc = subprocess.run(cmd, cwd=ROOT, env=env).returncode
        wall = time.perf_counter() - t0
        rows = [json.loads(line) for p in Path(tmp).glob("rows.*") for line in p.read_text().splitlines()]
    if not rows:
        raise SystemExit(f"breakdown: the run recorded no test (exit status {rc})")
    out = {
        "machine": this_machine(),
        "suite_revision": subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
        ).stdout.strip()
        or None,
        "selection": a.behaviour or "all",
        "profile": a.profile,
        "wall_s": round(wall, 1),
        "exit": rc,
        "columns": summarise(rows),
        "modules": summarise(rows, by=lambda r: f"{r['test'].split('::')[0].rsplit('/', 1)[-1]} {r['column']}"),
        "measured": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    path = write_result(a.out, out)
    print(f"{'column':26} {'ex/s':>6} " + " ".join(f"{p:>13}" for p in PARTS))
    for name, c in sorted(out["columns"].items()):
        print(f"{name:26} {c['examples_per_s'] or 0:6.1f} " + " ".join(f"{c['seconds'][p]:13.1f}" for p in PARTS))
    print(f"breakdown: {len(rows)} tests, {wall:.0f} s -> {path}")
    return rc


if __name__ == "__main__":
    raise SystemExit(main())
