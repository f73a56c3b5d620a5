"""Measure the op table's error model: how far apart the frameworks really are, per element,
in units of the model's rounding (issue 47).

    python -m suite.ops.headroom [--ops tanh,elu] [--points 3000] [-o reports/headroom/tf-2.21.0.json]
    python -m suite.ops.headroom --combine reports/headroom/tf-*.json [-o reports/headroom/all.json]

For every elementwise entry of the table, dtype and quantity (value, each gradient, J t, each
second derivative), every subject (TensorFlow in each mode, JAX, PyTorch) runs one array of
``--points`` elements spread over the entry's domain and its tails (:func:`suite.ops.regimes`:
a uniform spread, magnitudes on a log scale, and every regime the entry names), and is compared
element by element with each other framework's reference runner. ``observed`` is the largest
``|out_i - ref_i| / (eps x T_i)`` (:mod:`suite.ops.error`), in units of rounding; ``tolerance``
the model's; ``headroom`` their ratio. A quantity whose headroom is above :data:`SLACK` is
``slack`` (its tolerance could hide a regression), one below 1 ``exceeded`` (a bug in the model,
not a reason to widen it); the exit status is 1 when any tolerance is exceeded.

``--combine`` reads such tables from several environments (each release's and the nightly's
TensorFlow beside the JAX and PyTorch its environment has) and judges each tolerance against
the largest error any of them saw: a tolerance is slack only if it is slack everywhere.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

from suite import compare as cmp, frameworks, ops
from suite.ops import error, properties

#: A tolerance more than this many times what any framework pair was observed to need is slack.
SLACK = 10.0
BEHAVIOURS = {
    "elementwise-gradients": "cases.test_elementwise_gradients",
    "kink-subgradients": "cases.test_kink_subgradients",
}


def inputs(op, dtype, points: int, rng) -> tuple:
    """The arguments: ``points`` elements per argument over the entry's domain and regimes,
    off its excluded points."""
    name = np.dtype(dtype).name
    cols = [rng.permutation(ops.regime_grid(op, name, points)) for _ in range(op.arity)]
    n = min(len(c) for c in cols)
    args = tuple(np.asarray(c[:n], dtype) for c in cols)
    keep = ~properties._near_mask(op, args)
    return tuple(a[keep] for a in args)


def _run(subject, op, args, w, v):
    fn = op.program.of(subject)
    out = {}
    y, grads = subject.vjp(fn, *args, cotangent=w)
    out["value"] = np.asarray(y)
    out.update({f"grad{i}": g for i, g in enumerate(grads) if g is not None})
    for name, call in (("jt", lambda: subject.jvp(fn, *args, tangents=tuple(w for _ in args))[1]),
                       ("second", lambda: subject.second_order(fn, *args, cotangent=w, cotangent2=v)[2])):  # fmt: skip
        try:
            got = call()
        except Exception:  # declared where it matters (softsign's second order in TensorFlow)
            continue
        if name == "jt":
            out["jt"] = got
        else:
            out.update({f"second{i}": h for i, h in enumerate(got) if h is not None})
    return {k: np.asarray(a) for k, a in out.items() if a is not None}


def _results(op, runners, args, w, v) -> dict:
    """Each runner's quantities (or its error), once per runner id."""
    results = {}
    for r in runners:
        if op.spelled(r.framework) and r.id not in results:
            try:
                results[r.id] = _run(r, op, args, w, v)
            except Exception as e:  # the subject's own row records it
                results[r.id] = {"error": f"{type(e).__name__}: {' '.join(str(e).split())[:160]}"}
    return results


def _worst_element(op, q, a, b, args, w, v, eps) -> tuple[float, int]:
    """The largest error of ``a`` against ``b`` in units of rounding of each element's magnitude
    (the error model's terms), and where it is."""
    kw = {"weights": w} if q.startswith("grad") else {}
    kw = {"weights": tuple(w for _ in args)} if q == "jt" else kw
    kw = {"weights": w, "weights2": v} if q.startswith("second") else kw
    t = np.maximum(np.abs(b), error.scales(op, q, args, **kw))
    with np.errstate(all="ignore"):
        e = np.where((a == b) | (np.isnan(a) & np.isnan(b)), 0.0, np.abs(a - b) / (eps * t))
    e = np.where(np.isnan(e), np.inf, e)
    i = int(np.argmax(e)) if e.size else 0
    return (float(e.flat[i]) if e.size else 0.0), i


def _verdict(op, name: str, q: str, r: dict) -> dict:
    """The table row of quantity ``q``: its tolerance, the headroom over the worst element, and
    ``exceeded``, ``slack`` (more than :data:`SLACK` times), ``exact`` or ``ok``."""
    tol = error.ulps(op, q)[name]
    return {"behaviour": op.behaviour, "op": op.name, "dtype": name, "quantity": q, "tolerance": tol,
            **_judge(tol, r["observed"]), **r}  # fmt: skip


def _judge(tolerance: float, observed: float) -> dict:
    """A tolerance's headroom over the largest error observed and its verdict: ``exact`` (no
    error seen), ``exceeded`` (below 1x), ``slack`` (more than :data:`SLACK` times) or ``ok``.

    >>> [_judge(8, x)["verdict"] for x in (0, 16, 0.5, 1)]
    ['exact', 'exceeded', 'slack', 'ok']
    """
    head = tolerance / observed if observed > 0 else float("inf")
    verdict = "exact" if observed == 0 else "exceeded" if head < 1 else "slack" if head > SLACK else "ok"
    return {"headroom": head, "verdict": verdict}


def measure(op, dtype, subjects, oracles, points: int, rng) -> list[dict]:
    """One record per quantity: the worst element over every subject and oracle of another framework."""
    args = inputs(op, dtype, points, rng)
    shape = args[0].shape
    w = (rng.choice([-1.0, 1.0], shape) * rng.uniform(0.25, 2.0, shape)).astype(dtype)
    v = (rng.choice([-1.0, 1.0], shape) * rng.uniform(0.25, 2.0, shape)).astype(dtype)
    name = np.dtype(dtype).name
    results = _results(op, [*subjects, *oracles.values()], args, w, v)
    worst: dict[str, dict] = {}
    for s in subjects:
        got = results.get(s.id, {})
        for fw, o in oracles.items():
            ref = results.get(o.id, {})
            if fw == s.framework or "error" in got or "error" in ref:
                continue
            for q in sorted(set(got) & set(ref)):
                a, b = got[q].astype(np.float64), ref[q].astype(np.float64)
                if a.shape != b.shape:
                    continue
                seen, i = _worst_element(op, q, a, b, args, w, v, cmp.EPS[name])
                if q not in worst or seen > worst[q]["observed"]:
                    at = [float(x.flat[i]) for x in args]
                    worst[q] = {"observed": seen, "subject": s.id, "oracle": o.id, "at": at,
                                "out": float(a.flat[i]), "ref": float(b.flat[i])}  # fmt: skip
    return [_verdict(op, name, q, r) for q, r in sorted(worst.items())]


def _chosen(p, wanted: str | None) -> list:
    """The elementwise entries of every table behaviour, or those ``--ops`` names."""
    for module in BEHAVIOURS.values():
        importlib.import_module(module)
    chosen = [op for b in BEHAVIOURS for op in ops.entries(b) if op.elementwise]
    if not wanted:
        return chosen
    want = wanted.split(",")
    unknown = sorted(set(want) - {op.name for op in chosen})
    if unknown:
        p.error(f"--ops: no elementwise entry named {', '.join(unknown)}")
    return [op for op in chosen if op.name in want]


def _report(rows) -> None:
    for r in rows:
        if r["verdict"] in ("exceeded", "slack"):
            where = f"{r['subject']} vs {r['oracle']} at {r['at']}: {r['out']:.4g} vs {r['ref']:.4g}"
            print(f"{r['verdict']:9s} {r['op']:14s} {r['dtype']:8s} {r['quantity']:8s} "
                  f"observed {r['observed']:9.3g} ulp of {r['tolerance']:g} ({where})")  # fmt: skip


def combine(tables: dict) -> list[dict]:
    """One row per (behaviour, op, dtype, quantity) over ``tables`` ({label: table}): the largest
    error observed in any of them (``env``: the label of the table that saw it; ``envs``: how many
    measured it), against the tolerance, which must be the same in each (tables measured at
    different tolerances are not comparable: a ValueError).

    >>> row = lambda obs: {"behaviour": "b", "op": "tanh", "dtype": "float32", "quantity": "grad0",
    ...                    "tolerance": 16.0, "observed": obs, "subject": "s", "oracle": "o"}
    >>> both = combine({"a": {"rows": [row(1.0)]}, "b": {"rows": [row(4.0)]}})
    >>> [(r["env"], r["envs"], r["headroom"], r["verdict"]) for r in both]
    [('b', 2, 4.0, 'ok')]
    >>> combine({"a": {"rows": [row(1.0)]}})[0]["verdict"]
    'slack'
    """
    worst: dict[tuple, dict] = {}
    for label, table in tables.items():
        for r in table.get("rows", []):
            key = (r["behaviour"], r["op"], r["dtype"], r["quantity"])
            best = worst.get(key)
            if best is not None and best["tolerance"] != r["tolerance"]:
                raise ValueError(
                    f"{' '.join(key)}: tolerance {r['tolerance']:g} in {label} but {best['tolerance']:g} in "
                    f"{best['env']}: measure both at one suite revision"
                )
            envs = (best or {}).get("envs", 0) + 1
            if best is None or r["observed"] > best["observed"]:
                best = {**r, "env": label}
            worst[key] = {**best, "envs": envs}
    out = [{**r, **_judge(r["tolerance"], r["observed"])} for r in worst.values()]
    return sorted(out, key=lambda r: (r["behaviour"], r["op"], r["dtype"], r["quantity"]))


def _combine_main(p, a) -> int:
    tables = {}
    for path in a.combine:
        try:
            table = json.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            p.error(f"--combine: {path}: not a headroom table ({e})")
        if not isinstance(table, dict) or not isinstance(table.get("rows"), list):
            p.error(f"--combine: {path}: not a headroom table (no 'rows')")
        tables[Path(path).stem] = table
    try:
        rows = combine(tables)
    except ValueError as e:
        p.error(f"--combine: {e}")
    _report(rows)
    counts = {v: sum(r["verdict"] == v for r in rows) for v in ("exceeded", "slack", "ok", "exact")}
    print(f"{len(rows)} tolerances over {len(tables)} environments: "
          + ", ".join(f"{n} {v}" for v, n in counts.items()), file=sys.stderr)  # fmt: skip
    if a.output:
        a.output.parent.mkdir(parents=True, exist_ok=True)
        env = {"combined": {k: t.get("environment", {}) for k, t in tables.items()}, "slack": SLACK}
        a.output.write_text(json.dumps({"environment": env, "rows": rows}, indent=1) + "\n")
    return 1 if counts["exceeded"] else 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m suite.ops.headroom", description=__doc__.split("\n\n")[0])
    p.add_argument("--ops", help="comma-separated entry names (default: every elementwise entry)")
    p.add_argument("--points", type=int, default=2000, help="elements per argument (default 2000)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("-o", "--output", type=Path, help="write the table as JSON here")
    p.add_argument("--combine", nargs="+", metavar="TABLE", help="judge the tolerances against several measured tables")
    a = p.parse_args(argv)
    if a.combine:
        return _combine_main(p, a)
    if a.points < 16:
        p.error("--points: at least 16")

    frameworks.hygiene()
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    chosen = _chosen(p, a.ops)
    subjects = frameworks.runners(devices=("cpu",))
    oracles = {o.framework: o for o in frameworks.reference_oracles()}
    if len({s.framework for s in subjects}) < 2:
        p.error("at least two frameworks must be installed to measure how far apart they are")
    rng = np.random.default_rng(a.seed)
    rows, start = [], time.monotonic()
    for k, op in enumerate(chosen, 1):
        for dtype in (np.float32, np.float64):
            if np.dtype(dtype).name in op.domain and (not op.pairs or any(np.dtype(d) == dtype for d, _ in op.pairs)):
                rows += measure(op, dtype, subjects, oracles, a.points, rng)
        print(f"[{k}/{len(chosen)}] {op.name} ({time.monotonic() - start:.0f} s)", file=sys.stderr, flush=True)
    _report(rows)
    if a.output:
        a.output.parent.mkdir(parents=True, exist_ok=True)
        env = {"versions": frameworks.package_versions(), "points": a.points, "seed": a.seed, "slack": SLACK}
        a.output.write_text(json.dumps({"environment": env, "rows": rows}, indent=1) + "\n")
    return 1 if any(r["verdict"] == "exceeded" for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
