"""The benchmark results as a table and as plot data, and the machine they ran on."""

from __future__ import annotations

from pathlib import Path

from suite.report import query


class BenchFileError(ValueError):
    """A benchmark JSON that cannot be used; the message names the file and the problem."""


def load_bench(paths) -> list:
    import json

    out = []
    for p in paths:
        try:
            data = json.loads(Path(p).read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            raise BenchFileError(f"{p}: cannot read benchmark results ({e})") from None
        if not isinstance(data, dict) or not isinstance(data.get("benchmarks"), list):
            raise BenchFileError(f"{p}: not a pytest-benchmark JSON (no 'benchmarks' list)")
        machine = f"{p}: " + describe_machine(data.get("machine_info") or {})
        for b in data["benchmarks"]:
            info = b.get("extra_info", {})
            out.append(
                {
                    "path": info.get("path", b.get("group")),
                    "subject": info.get("subject", b.get("name")),
                    "gbps": info.get("gbps"),
                    "ceiling_gbps": info.get("ceiling_gbps"),
                    "machine": machine,
                }
            )
    return out


def describe_machine(mi: dict) -> str:
    """One line naming the host and what ran on it, from a benchmark JSON's machine_info."""
    cpu = mi.get("cpu") or {}
    parts = [
        f"{cpu.get('brand_raw') or mi.get('processor') or mi.get('machine') or 'unknown CPU'}, "
        f"{cpu.get('count', '?')} cores, {mi.get('system', '')} {mi.get('release', '')}".strip()
    ]
    fws = mi.get("frameworks") or {}
    parts += [query.framework_label(k, v) for k, v in fws.items()]
    if mi.get("bench_size"):
        parts.append(f"size {mi['bench_size']}")
    return "; ".join(parts)


def bench_table(data) -> list[str]:
    """Hot path x subject: GB/s, fraction of the ceiling, time ratio to the fastest subject."""
    rows = []
    for b in data.get("benchmarks", []):
        i = b.get("extra_info", {})
        if "path" in i:
            rows.append(i)
    fastest = {}
    for r in rows:
        fastest[r["path"]] = min(fastest.get(r["path"], float("inf")), r["median_s"])
    lines = [f"{'hot path':44s} {'subject':26s} {'median ms':>10s} {'GB/s':>8s} {'of ceiling':>10s} {'x fastest':>9s}"]
    for r in sorted(rows, key=lambda r: (r["path"], r["median_s"])):
        lines.append(
            f"{r['path']:44s} {r['subject']:26s} {1e3 * r['median_s']:10.3f} {r['gbps'] or 0:8.2f} "
            f"{100 * (r['fraction_of_ceiling'] or 0):9.1f}% {r['median_s'] / fastest[r['path']]:9.2f}"
        )
    if rows:
        lines.append(f"ceiling: copy bandwidth {rows[0]['ceiling_gbps']:.2f} GB/s measured in this run")
    return lines


def this_machine() -> dict:
    """The machine a benchmark script ran on (CPU count, the CPU's model and vector extensions,
    platform, Python): measured now."""
    import os
    import platform

    from suite.frameworks import cpu_description

    return {
        "cpus": os.cpu_count(),
        "cpu": cpu_description(),
        "platform": platform.platform(),
        "python": platform.python_version(),
    }


def write_result(path, out: dict) -> Path:
    """Write a benchmark script's result as indented JSON, creating its folder."""
    import json

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
    return path
