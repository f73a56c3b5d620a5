"""Command line: ``autodiff-semantics run | list`` (also ``python -m suite``).

    autodiff-semantics run [--behaviour ID ...] [--profile P] [--report-dir DIR] [-- PYTEST_ARGS]
    autodiff-semantics list
    autodiff-semantics report [REPORT ...] [--out DIR] [--bench JSON]
    autodiff-semantics diff OLD NEW
    autodiff-semantics upgrade OLD NEW          (tox -e tfOLD,tfNEW, then diff)
    autodiff-semantics bench [--quick] [--device cpu|gpu] [--save NAME] [--compare ID]
    autodiff-semantics faults [--fault NAME ...] [--jobs N] [--list]

``run`` runs the case modules under pytest with the report plugin and exits with pytest's
status: 0 when every case passed, non-zero when one failed (2 for bad input).
"""
from __future__ import annotations

import argparse
import difflib
import sys
from pathlib import Path

from suite import behaviours as bh

PROFILES = ("dev", "ci", "thorough")


class CliError(Exception):
    pass


def _repo_root() -> Path:
    return bh.default_cases_dir().parent


def _behaviour_ids(ids, known) -> list[str]:
    out = []
    for i in ids:
        if i not in known:
            close = difflib.get_close_matches(i, known, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise CliError(f"unknown behaviour {i!r}{hint}; run 'autodiff-semantics list' to see the {len(known)} known ids")
        out.append(i)
    return out


def cmd_list(args) -> int:
    found = bh.discover(args.cases)
    if args.json:
        import json

        print(json.dumps([{"id": b.id, "title": b.title, "sources": list(b.sources), "modes": list(b.modes),
                           "links": list(b.links)} for b in found.values()], indent=1))
        return 0
    w = max(len(b.id) for b in found.values()) if found else 2
    print(f"{'id'.ljust(w)}  {'sources'.ljust(9)}  {'modes'.ljust(26)}  title")
    for b in found.values():
        print(f"{b.id.ljust(w)}  {','.join(b.sources).ljust(9)}  {','.join(b.modes).ljust(26)}  {b.title}")
    return 0


def cmd_run(args, pytest_args) -> int:
    from suite.report.files import ReportDirError, check_report_dir

    try:  # before any test starts: a run that cannot write its report must not run
        check_report_dir(args.report_dir)
        if args.versioned_dir:
            check_report_dir(args.versioned_dir)
    except ReportDirError as e:
        raise CliError(str(e)) from None
    cases = Path(args.cases or bh.default_cases_dir())
    found = bh.discover(cases)
    ids = _behaviour_ids(args.behaviour or [], list(found))
    targets = [str(cases / found[i].module_file) for i in ids] or ([] if _has_paths(pytest_args) else [str(cases)])
    argv = [*targets, "--profile", args.profile, "--report-dir", args.report_dir,
            "--rootdir", str(_repo_root()), "-p", "no:cacheprovider",
            f"--junitxml={Path(args.report_dir) / 'latest.junit.xml'}"]
    for opt in ("frameworks", "modes", "devices"):
        if getattr(args, opt):
            argv += [f"--{opt}", getattr(args, opt)]
    if not args.verbose:
        argv += ["-q"]
    argv += pytest_args
    print(f"autodiff-semantics: running {len(ids) or len(found)} behaviour(s), profile {args.profile}, "
          f"report in {args.report_dir}/", file=sys.stderr)
    rc = supervise(argv, Path(args.report_dir))
    if args.versioned_dir and (Path(args.report_dir) / "latest.json").exists():
        for p in save_versioned(Path(args.report_dir), Path(args.versioned_dir)):
            print(f"autodiff-semantics: wrote {p}", file=sys.stderr)
    d = Path(args.report_dir)
    if (d / "latest.json").exists():
        print(f"autodiff-semantics: report {d / 'latest.html'} (also latest.md, latest.json)", flush=True)
    return rc


def supervise(argv, report_dir: Path, *, max_crashes=25) -> int:
    """Run pytest in a child process; when a case kills the interpreter, record that case
    as ``crashed`` (with the signal) and resume the run without it and without the cases
    already done, appending to the same stream. Returns 0 iff nothing failed or crashed."""
    import json
    import signal
    import subprocess

    from suite.report import schema

    jsonl = report_dir / "latest.jsonl"
    done: list[str] = []
    crashes = 0
    extra: list[str] = []
    while True:
        cmd = [sys.executable, "-m", "pytest", *argv, *extra]
        # The child gets a process group of its own, so a signal reaches it once, from us:
        # Ctrl-C (to the terminal's group) and ``kill -INT <pid>`` (to this process alone,
        # as timeout, IDEs and job runners send it) both end the run the same way, and a
        # second SIGINT from the group cannot break the child while it writes the report.
        child = subprocess.Popen(cmd, **_own_process_group())
        signalled = []

        def forward(signum, frame):
            signalled.append(signum)
            child.send_signal(signum)

        previous = {s: signal.signal(s, forward) for s in (signal.SIGINT, signal.SIGTERM)}
        try:
            rc = child.wait()
        finally:
            for s, handler in previous.items():
                signal.signal(s, handler)
        if signalled or (rc == 2 and _interrupted(jsonl)):
            print("autodiff-semantics: interrupted; the partial report is in "
                  f"{report_dir}/latest.json (render it with 'autodiff-semantics report')", file=sys.stderr)
            return 130
        if rc >= 0 or crashes >= max_crashes:
            break
        # Killed by a signal: find the case that was running.
        started, finished = _progress(jsonl)
        running = [t for t in started if t not in finished]
        crashed = running[-1] if running else None
        sig = signal.Signals(-rc).name if -rc in signal.Signals.__members__.values() else str(-rc)
        if crashed is None:
            print(f"autodiff-semantics: pytest died with {sig} outside any case", file=sys.stderr)
            return 1
        crashes += 1
        print(f"autodiff-semantics: {crashed} crashed the interpreter ({sig}); resuming without it", file=sys.stderr)
        with open(jsonl, "a", encoding="utf-8") as fh:
            fh.write(json.dumps({"kind": "row", **_crashed_row(crashed, sig)}) + "\n")
        done = sorted(set(finished) | {crashed})
        extra = ["--report-append", *[f"--deselect={t}" for t in done]]
    if rc == 4:  # pytest's usage error (its message is above): bad input, as for our own flags
        return 2
    if rc == 5 and crashes:  # the resumed process had nothing left to run
        rc = 0
    if rc in (0, 1):
        try:
            report = schema.load(report_dir / "latest.json")
        except schema.ReportError:
            return rc or 1
        bad = [r for r in report["results"] if r["outcome"] in ("failed", "error", "crashed")]
        return 1 if bad else 0
    if rc == 5:
        print("autodiff-semantics: no case was collected (check --behaviour and the pytest arguments)", file=sys.stderr)
    return rc


def _own_process_group() -> dict:
    import os

    if sys.version_info >= (3, 11):
        return {"process_group": 0}
    return {"preexec_fn": os.setpgrp}  # pragma: no cover - Python 3.10


def _interrupted(jsonl: Path) -> bool:
    import json

    try:
        last = jsonl.read_text(encoding="utf-8").splitlines()[-1]
        return bool(json.loads(last).get("interrupted"))
    except (OSError, IndexError, ValueError):
        return False


def _progress(jsonl: Path):
    import json

    started, finished = [], set()
    try:
        lines = jsonl.read_text(encoding="utf-8").splitlines()
    except OSError:
        return started, finished
    for line in lines:
        try:
            obj = json.loads(line)
        except json.JSONDecodeError:
            continue
        if obj.get("kind") == "start":
            started.append(obj["test"])
        elif obj.get("kind") == "row":
            finished.add(obj["test"])
    return started, finished


def _crashed_row(nodeid: str, sig: str) -> dict:
    import re

    m = re.search(r"\[(\w+)-(\w+)-(\w+)\]$", nodeid)
    fw, mode, dev = m.groups() if m else ("none", "none", "cpu")
    path = nodeid.split("::")[0]
    beh = Path(path).stem[len("test_"):].replace("_", "-")
    return {"behaviour": beh, "test": nodeid, "framework": fw, "mode": mode, "device": dev, "outcome": "crashed",
            "observed": {}, "expected": {}, "max_rel_err": {}, "examples": 0, "duration_s": 0.0,
            "error": f"the interpreter died with {sig} while this case ran",
            "signal": sig, "reproducer": f"# reproduces {nodeid}\n#   autodiff-semantics run -- '{nodeid}'"}


def _default_report(report_dir="reports") -> Path:
    d = Path(report_dir)
    return d / "latest.json" if (d / "latest.json").exists() else d / "latest.jsonl"


def cmd_report(args) -> int:
    """One report: its page. Several: the version matrix page, with each release's own page
    one link away (``<stem>-releases/``). Exactly two: the upgrade view (the changelog
    first) above the matrix."""
    from suite.report import diff, html, render, schema

    paths = _expand_reports(args.reports or [_default_report()])
    reports = [schema.load(p) for p in paths]  # ReportError -> exit 2 with the file and problem
    bench = _load_bench(args.bench) if args.bench else []
    out_dir = Path(args.out) if args.out else paths[0].parent
    out_dir.mkdir(parents=True, exist_ok=True)
    stem = args.name or (paths[0].stem if len(paths) == 1 else "matrix")
    labels = [str(p) for p in paths]
    if len(reports) == 1:
        md = render.markdown(reports[0])
        page = html.page(reports, labels, bench)
    else:
        sub = out_dir / f"{stem}-releases"
        sub.mkdir(exist_ok=True)
        details, names = [], set()
        for p, r in zip(paths, reports):
            name = p.stem if p.stem not in names else f"{p.stem}-{len(names)}"
            names.add(name)
            (sub / f"{name}.md").write_text(render.markdown(r), encoding="utf-8")
            (sub / f"{name}.html").write_text(html.page([r], [str(p)]), encoding="utf-8")
            details.append(f"{sub.name}/{name}")
        upgrade = None
        if len(reports) == 2:
            upgrade = diff.markdown(diff.diff(reports[0], reports[1], labels[0], labels[1]))
        md = ((upgrade + "\n") if upgrade else "") + render.matrix_markdown(reports, [d + ".md" for d in details])
        page = html.page(reports, labels, bench, details=[d + ".html" for d in details], upgrade=upgrade)
    (out_dir / f"{stem}.md").write_text(md, encoding="utf-8")
    (out_dir / f"{stem}.html").write_text(page, encoding="utf-8")
    if args.readme:
        _update_readme(Path(args.readme), reports)
        print(f"updated the version matrix in {args.readme}")
    for r, p in zip(reports, paths):
        flag = " (PARTIAL: interrupted run)" if r.get("partial") else ""
        print(f"{p}: {len(r['results'])} rows{flag}")
    print(f"wrote {out_dir / (stem + '.md')} and {out_dir / (stem + '.html')}")
    return 0


def _version_key(path: Path):
    import re

    return tuple(int(x) for x in re.findall(r"\d+", path.stem))


def _expand_reports(items) -> list[Path]:
    """Report files; a directory stands for its tf-*.json, in version order."""
    out = []
    for item in items:
        p = Path(item)
        if p.is_dir():
            found = sorted(p.glob("tf-*.json"), key=_version_key)
            if not found:
                raise CliError(f"{p}: no tf-*.json reports in this directory")
            out += found
        else:
            out.append(p)
    return out


def _tf_version(report_dir: Path) -> str | None:
    import json

    try:
        return json.loads((report_dir / "latest.json").read_text())["environment"]["frameworks"]["tensorflow"]["version"]
    except (OSError, ValueError, KeyError, TypeError):
        return None


def save_versioned(report_dir: Path, dest: Path) -> list[Path]:
    """Copy latest.{json,md,html} to dest/tf-<version>.* (the matrix's per-version reports)."""
    import shutil

    v = _tf_version(report_dir)
    if not v:
        raise CliError(f"{report_dir}/latest.json has no TensorFlow version (is TensorFlow installed?)")
    dest.mkdir(parents=True, exist_ok=True)
    out = []
    for ext in ("json", "md", "html", "junit.xml"):
        src = report_dir / f"latest.{ext}"
        if src.exists():
            shutil.copyfile(src, dest / f"tf-{v}.{ext}")
            out.append(dest / f"tf-{v}.{ext}")
    return out


def cmd_upgrade(args) -> int:
    """Run two TensorFlow release lines through tox and print the changelog between them."""
    import subprocess

    root = _repo_root()
    envs = []
    for v in (args.old, args.new):
        parts = v.split(".")
        if len(parts) < 2 or not all(x.isdigit() for x in parts[:2]):
            raise CliError(f"version {v!r} is not like 2.15")
        envs.append(f"tf{parts[0]}{parts[1]}")
    if not args.no_run:
        cmd = ["tox", "-e", ",".join(envs)]
        print("autodiff-semantics: " + " ".join(cmd), file=sys.stderr, flush=True)
        subprocess.run(cmd, cwd=root)  # failing cases are expected: the diff says which
    reports = []
    for v, env in zip((args.old, args.new), envs):
        found = _find_release_report(v, root)
        if found is None:
            raise CliError(f"no reports/tf-{v}.*.json nor reports/baselines/tf-{v}.*.json "
                           f"(run 'tox -e {env}' first, or drop --no-run)")
        reports.append(found)
    args.old, args.new = str(reports[0]), str(reports[1])
    return cmd_diff(args)


def _find_release_report(version: str, root: Path) -> Path | None:
    """The newest patch of a release line: reports/ (fresh tox runs) first, then the
    committed baselines; in the working directory, then beside the cases."""
    for base in dict.fromkeys((Path.cwd() / "reports", root / "reports")):
        for d in (base, base / "baselines"):
            found = sorted([*d.glob(f"tf-{version}.json"), *d.glob(f"tf-{version}.*.json")], key=_version_key)
            found = [f for f in found if not f.name.endswith(".junit.xml")]
            if found:
                return found[-1]
    return None


BEGIN, END = "<!-- version-matrix:begin -->", "<!-- version-matrix:end -->"


def _update_readme(path: Path, reports) -> None:
    """Replace the README section between the version-matrix markers with the matrix and
    the changelog between consecutive releases, generated from the reports."""
    from suite.report import render

    text = path.read_text(encoding="utf-8")
    if BEGIN not in text or END not in text:
        raise CliError(f"{path}: no {BEGIN} ... {END} section to replace")
    body = [BEGIN, "", "Generated by `autodiff-semantics report reports/baselines --readme README.md` from the "
            "committed baselines (TensorFlow rows; `ok n/m` = passed rows of m).", ""]
    body += render.version_matrix_md(reports) + ["", "Changelog between consecutive releases (measured):", ""]
    body += render.consecutive_changes_md(reports) + ["", END]
    head, rest = text.split(BEGIN, 1)
    tail = rest.split(END, 1)[1]
    path.write_text(head + "\n".join(body) + tail, encoding="utf-8")


def _load_bench(paths) -> list:
    import json

    out = []
    for p in paths:
        try:
            data = json.loads(Path(p).read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            raise CliError(f"{p}: cannot read benchmark results ({e})") from None
        if not isinstance(data, dict) or not isinstance(data.get("benchmarks"), list):
            raise CliError(f"{p}: not a pytest-benchmark JSON (no 'benchmarks' list)")
        machine = f"{p}: " + describe_machine(data.get("machine_info") or {})
        for b in data["benchmarks"]:
            info = b.get("extra_info", {})
            out.append({"path": info.get("path", b.get("group")), "subject": info.get("subject", b.get("name")),
                        "gbps": info.get("gbps"), "ceiling_gbps": info.get("ceiling_gbps"), "machine": machine})
    return out


def describe_machine(mi: dict) -> str:
    """One line naming the host and what ran on it, from a benchmark JSON's machine_info."""
    from suite.report import render

    cpu = mi.get("cpu") or {}
    parts = [f"{cpu.get('brand_raw') or mi.get('processor') or mi.get('machine') or 'unknown CPU'}, "
             f"{cpu.get('count', '?')} cores, {mi.get('system', '')} {mi.get('release', '')}".strip()]
    fws = mi.get("frameworks") or {}
    parts += [render.framework_label(k, v) for k, v in fws.items()]
    if mi.get("bench_size"):
        parts.append(f"size {mi['bench_size']}")
    return "; ".join(parts)


def cmd_diff(args) -> int:
    from suite.report import diff, schema

    old, new = schema.load(args.old), schema.load(args.new)
    log = diff.diff(old, new, args.old, args.new)
    text = diff.markdown(log)
    if args.output:
        Path(args.output).write_text(text, encoding="utf-8")
    print(text)
    return 1 if log.regressions else 0


def cmd_faults(args) -> int:
    from suite.faults import CATALOGUE, runner

    if args.list:
        for f in sorted(CATALOGUE.values(), key=lambda f: f.name):
            print(f"{f.name:36s} breaks {', '.join(f.breaks)}: {f.description}")
        return 0
    return runner.run(args.fault, jobs=args.jobs, profile=args.profile, with_control=not args.no_control,
                      out=lambda s: print(s, flush=True))


def cmd_bench(args, pytest_args) -> int:
    import json
    import subprocess

    root = _repo_root()
    try:
        import pytest_benchmark  # noqa: F401
    except ImportError:
        raise CliError("bench needs pytest-benchmark: pip install 'autodiff-semantics[bench]'") from None
    if args.device == "gpu":
        _require_a_gpu()
    size = "quick" if args.quick else "full"
    out = Path(args.output or f"reports/benchmarks/{args.device}-{size}.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.unlink(missing_ok=True)  # a run that dies before writing must not print an older run's table
    cmd = [sys.executable, "-m", "pytest", str(root / "benchmarks"), "--rootdir", str(root), "-p", "no:cacheprovider",
           "--bench-size", size, "--devices", args.device, f"--benchmark-json={out}", "-q",
           "--benchmark-columns=median,iqr,rounds", "--benchmark-sort=name", "--report-dir", str(out.parent / "run")]
    storage = f"file://{(out.parent / 'storage').resolve()}"
    if args.save:
        cmd += [f"--benchmark-storage={storage}", f"--benchmark-save={args.save}"]
    if args.compare:
        cmd += [f"--benchmark-storage={storage}", f"--benchmark-compare={args.compare}",
                f"--benchmark-compare-fail=median:{args.threshold}"]
    cmd += pytest_args
    print(f"autodiff-semantics: benchmarks ({size}, {args.device}) -> {out}", file=sys.stderr, flush=True)
    rc = subprocess.run(cmd).returncode
    try:
        data = json.loads(out.read_text())
    except (OSError, ValueError):
        print(f"autodiff-semantics: no benchmark results in {out}", file=sys.stderr)
        return rc or 1
    for line in bench_table(data):
        print(line)
    return rc


def _require_a_gpu() -> None:
    """``bench --device gpu`` with no GPU would only skip every benchmark: say so instead."""
    from suite import frameworks

    env = frameworks.environment()
    if not any("gpu" in (info.get("devices") or []) for info in env.values()):
        seen = "; ".join(f"{name}: {','.join(info.get('devices') or []) or 'not installed'}"
                         for name, info in env.items())
        raise CliError(f"no GPU is visible to any framework ({seen})")


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
        lines.append(f"{r['path']:44s} {r['subject']:26s} {1e3 * r['median_s']:10.3f} {r['gbps'] or 0:8.2f} "
                     f"{100 * (r['fraction_of_ceiling'] or 0):9.1f}% {r['median_s'] / fastest[r['path']]:9.2f}")
    if rows:
        lines.append(f"ceiling: copy bandwidth {rows[0]['ceiling_gbps']:.2f} GB/s measured in this run")
    return lines


def _has_paths(pytest_args) -> bool:
    return any("::" in a or a.endswith(".py") for a in pytest_args)


def _csv_of(known, what):
    """An argparse type: a comma-separated subset of ``known`` (a bad value exits 2)."""
    def parse(value: str) -> str:
        items = [v.strip() for v in value.split(",") if v.strip()]
        bad = [v for v in items if v not in known]
        if bad or not items:
            hint = ""
            for b in bad:
                close = difflib.get_close_matches(b, known, n=1)
                hint += f" (did you mean {close[0]!r}?)" if close else ""
            raise argparse.ArgumentTypeError(f"unknown {what} {', '.join(map(repr, bad or [value]))}{hint}; "
                                             f"choose from {','.join(known)}")
        return ",".join(items)
    return parse


def _positive_int(value: str) -> int:
    try:
        n = int(value)
    except ValueError:
        n = 0
    if n < 1:
        raise argparse.ArgumentTypeError(f"{value!r} is not a positive whole number")
    return n


def _threshold(value: str) -> str:
    import re

    if not re.fullmatch(r"\d+(\.\d+)?%?", value):
        raise argparse.ArgumentTypeError(f"{value!r} is not a percentage like 20% (or a time like 0.001)")
    return value


def build_parser() -> argparse.ArgumentParser:
    from suite import frameworks as fw

    p = argparse.ArgumentParser(prog="autodiff-semantics",
                                description="Cross-framework test suite for TensorFlow autodiff semantics.")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    r = sub.add_parser("run", help="run the cases and write the report",
                       description="Run the cases and write the report. Arguments after '--' go to pytest.")
    r.add_argument("--behaviour", "-b", action="append", metavar="ID",
                   help="behaviour id to run (repeatable; default: all)")
    r.add_argument("--profile", choices=PROFILES, default="dev",
                   help="Hypothesis profile (default: dev; ci is derandomized)")
    r.add_argument("--report-dir", default="reports", metavar="DIR", help="report directory (default: reports)")
    r.add_argument("--frameworks", metavar="LIST", type=_csv_of(("tensorflow", "jax", "torch"), "framework"), help="comma-separated: tensorflow,jax,torch (default: all)")
    r.add_argument("--modes", metavar="LIST", type=_csv_of(fw.MODES["tensorflow"], "mode"), help="TensorFlow modes: eager,function,xla,graph (default: all)")
    r.add_argument("--devices", metavar="LIST", type=_csv_of(fw.DEVICES, "device"), help="cpu,gpu (default: both; gpu rows skip without a GPU)")
    r.add_argument("--cases", metavar="DIR", help="cases directory (default: the checkout's cases/)")
    r.add_argument("--verbose", "-v", action="store_true", help="one line per test")
    r.add_argument("--versioned-dir", metavar="DIR",
                   help="also copy the report to DIR/tf-<version>.{json,md,html} (the tox matrix uses this)")
    rep = sub.add_parser("report", help="render reports as Markdown and self-contained HTML",
                         description="Render one report, or several side by side as a version matrix. "
                                     "A streamed latest.jsonl from an interrupted run renders marked as partial.")
    rep.add_argument("reports", nargs="*", metavar="REPORT", help="report .json or .jsonl (default: reports/latest.json)")
    rep.add_argument("--out", metavar="DIR", help="output directory (default: beside the first report)")
    rep.add_argument("--name", metavar="STEM", help="output file stem (default: the report's stem, or 'matrix')")
    rep.add_argument("--bench", action="append", metavar="JSON", help="pytest-benchmark JSON to plot (repeatable)")
    rep.add_argument("--readme", metavar="FILE", help="also regenerate the version matrix section of FILE")
    d = sub.add_parser("diff", help="semantic changelog between two reports",
                       description="Semantic changelog OLD -> NEW. Exit 0: no regression; 1: regressions; 2: bad input.")
    d.add_argument("old", metavar="OLD")
    d.add_argument("new", metavar="NEW")
    d.add_argument("--output", "-o", metavar="FILE", help="also write the Markdown here")
    be = sub.add_parser("bench", help="benchmarks of the hot paths against a measured ceiling",
                        description="pytest-benchmark over benchmarks/; JSON in reports/benchmarks/. "
                                    "Arguments after '--' go to pytest.")
    be.add_argument("--quick", action="store_true", help="small inputs (2^20 float32), n<=128 Jacobians")
    be.add_argument("--device", choices=("cpu", "gpu"), default="cpu", help="device (default: cpu)")
    be.add_argument("--output", metavar="FILE", help="JSON path (default: reports/benchmarks/<device>-<size>.json)")
    be.add_argument("--save", metavar="NAME", help="also save the run in reports/benchmarks/storage for --compare")
    be.add_argument("--compare", metavar="ID", help="compare against a saved run (pytest-benchmark's compare)")
    be.add_argument("--threshold", default="20%", type=_threshold, help="regression threshold on the median (default: 20%%)")
    up = sub.add_parser("upgrade", help="run two TensorFlow versions (tox) and print the changelog",
                        description="tox -e tfOLD,tfNEW, then diff reports/tf-OLD*.json reports/tf-NEW*.json.")
    up.add_argument("old", metavar="OLD", help="e.g. 2.15")
    up.add_argument("new", metavar="NEW", help="e.g. 2.21")
    up.add_argument("--no-run", action="store_true", help="only diff the reports already there")
    up.add_argument("--output", "-o", metavar="FILE", help="also write the Markdown here")
    fl = sub.add_parser("faults", help="self-check: run the cases under each injected fault",
                        description="Run the relevant cases under each fault of the catalogue (in subprocesses) "
                                    "and print the kill matrix. Exit 1 if any fault survives.")
    fl.add_argument("--fault", "-f", action="append", metavar="NAME", help="fault to run (repeatable; default: all)")
    fl.add_argument("--jobs", "-j", type=_positive_int, metavar="N", help="parallel subprocesses (default: CPU count)")
    fl.add_argument("--profile", choices=PROFILES, default="ci", help="Hypothesis profile (default: ci)")
    fl.add_argument("--no-control", action="store_true", help="skip the control run without any fault")
    fl.add_argument("--list", action="store_true", help="list the catalogue and exit")
    ls = sub.add_parser("list", help="list the behaviours", description="List the behaviours the cases check.")
    ls.add_argument("--json", action="store_true", help="JSON instead of a table")
    ls.add_argument("--cases", metavar="DIR", help="cases directory (default: the checkout's cases/)")
    return p


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    extra = []
    if "--" in argv:
        i = argv.index("--")
        argv, extra = argv[:i], argv[i + 1:]
    parser = build_parser()
    args = parser.parse_args(argv)  # exits 2 with a usage message on a bad flag
    if extra and args.command not in ("run", "bench"):
        parser.error(f"arguments after '--' are only for 'run' and 'bench' (got {' '.join(extra)})")
    try:
        if args.command == "list":
            return cmd_list(args)
        if args.command == "report":
            return cmd_report(args)
        if args.command == "diff":
            return cmd_diff(args)
        if args.command == "faults":
            return cmd_faults(args)
        if args.command == "upgrade":
            return cmd_upgrade(args)
        if args.command == "bench":
            return cmd_bench(args, extra)
        return cmd_run(args, extra)
    except (CliError, FileNotFoundError, ValueError, OSError) as e:
        print(f"autodiff-semantics: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("autodiff-semantics: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # output piped into head & co.
        sys.stderr.close()
        return 0


if __name__ == "__main__":
    raise SystemExit(main())
