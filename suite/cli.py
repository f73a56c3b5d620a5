"""Command line: ``autodiff-semantics run | list`` (also ``python -m suite``).

    autodiff-semantics run [--behaviour ID ...] [--profile P] [--report-dir DIR] [--jobs N] [--shard I/N]
                           [-- PYTEST_ARGS]
    autodiff-semantics list
    autodiff-semantics report [REPORT ...] [--out DIR] [--bench JSON]
    autodiff-semantics diff OLD NEW
    autodiff-semantics merge SHARD.json ... -o merged.json
    autodiff-semantics upgrade OLD NEW          (tox -e tfOLD,tfNEW, then diff)
    autodiff-semantics bisect OLD NEW           (which tf-nightly made each change)
    autodiff-semantics bench [--quick] [--device cpu|gpu] [--save NAME] [--compare ID]
    autodiff-semantics faults [--fault NAME ...] [--jobs N] [--list]

``run`` runs the case modules under pytest with the report plugin and exits with pytest's
status: 0 when every case passed, non-zero when one failed (2 for bad input).
"""

from __future__ import annotations

import argparse
import difflib
import os
import shlex
import sys
from pathlib import Path

from suite import behaviours as bh, bisection, frameworks, nightlies, options
from suite.bench.table import BenchFileError, bench_table, load_bench
from suite.report import diff, files, merge, query, schema
from suite.report.files import ReportFileError
from suite.report.schema import ReportError
from suite.supervisor import supervise


class CliError(Exception):
    pass


def _repo_root() -> Path:
    """The directory that holds ``cases/``: a checkout, or site-packages for the wheel."""
    return bh.default_cases_dir().parent


def _behaviour_ids(ids, known) -> list[str]:
    out = []
    for i in ids:
        if i not in known:
            close = difflib.get_close_matches(i, known, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise CliError(
                f"unknown behaviour {i!r}{hint}; run 'autodiff-semantics list' to see the {len(known)} known ids"
            )
        out.append(i)
    return out


def cmd_list(args) -> int:
    found = bh.discover(args.cases)
    if args.json:
        import json

        print(
            json.dumps(
                [
                    {
                        "id": b.id,
                        "title": b.title,
                        "sources": list(b.sources),
                        "modes": list(b.modes),
                        "links": list(b.links),
                        "floor": b.floor.as_dict() if b.floor else None,
                    }
                    for b in found.values()
                ],
                indent=1,
            )
        )
        return 0
    w = max(len(b.id) for b in found.values()) if found else 2
    print(f"{'id'.ljust(w)}  {'sources'.ljust(9)}  {'modes'.ljust(26)}  title")
    for b in found.values():
        print(f"{b.id.ljust(w)}  {','.join(b.sources).ljust(9)}  {','.join(b.modes).ljust(26)}  {b.title}")
    return 0


def cmd_run(args, pytest_args) -> int:
    # before any test starts: a run that cannot write its report must not run
    files.check_report_dir(args.report_dir)
    if args.versioned_dir:
        files.check_report_dir(args.versioned_dir)
    cases = Path(args.cases) if args.cases else bh.default_cases_dir()
    found = bh.discover(cases)
    ids = _behaviour_ids(args.behaviour or [], list(found))
    os.environ[options.RERUN_ARGS_ENV] = shlex.join(rerun_args(pytest_args))  # for the reproducers
    pytest_args = [_anchor_node_id(a, cases.parent) for a in pytest_args]
    targets = [str(cases / found[i].module_file) for i in ids] or ([] if _has_paths(pytest_args) else [str(cases)])
    argv = [
        *targets,
        *options.as_pytest_args(vars(args)),
        "-p",
        "suite.plugin",
        "--rootdir",
        str(cases.parent),
        "-p",
        "no:cacheprovider",
        "-p",
        "no:benchmark",
        f"--junitxml={Path(args.report_dir) / 'latest.junit.xml'}",
    ]
    if not args.verbose:
        argv += ["-q"]
    modules = len(ids) or (_selected_modules(pytest_args) if _has_paths(pytest_args) else len(found))
    jobs = resolve_jobs(args.jobs, modules)
    argv += _parallel_args(jobs) + _shard_args(args.shard, args.durations_from, Path(args.report_dir))
    argv += pytest_args
    workers = "one process" if jobs == "1" else f"{jobs} workers"
    print(
        f"autodiff-semantics: running {len(ids) or len(found)} behaviour(s), profile {args.profile}, "
        f"{workers}, report in {args.report_dir}/",
        file=sys.stderr,
    )
    rc = supervise(argv, Path(args.report_dir))
    if args.versioned_dir and (Path(args.report_dir) / "latest.json").exists():
        for p in files.save_versioned(Path(args.report_dir), Path(args.versioned_dir)):
            print(f"autodiff-semantics: wrote {p}", file=sys.stderr)
    d = Path(args.report_dir)
    if (d / "latest.json").exists():
        print(f"autodiff-semantics: report {d / 'latest.html'} (also latest.md, latest.json)", flush=True)
    return rc


#: Workers a case may kill before a parallel run gives up (the serial supervisor's limit).
MAX_CRASHES = 25


def resolve_jobs(jobs: str | None, modules: int, cpus: int | None = None) -> str:
    """The workers a run gets. ``auto`` (the default): one per CPU, but no more than the case
    modules selected, and one process for a single module: workers split a run by module
    (``loadfile``), so a second worker on one module only pays its own start (importing three
    frameworks, about 10 s here). A number is taken as it is.

    >>> resolve_jobs("auto", 36, cpus=2), resolve_jobs(None, 1, cpus=2), resolve_jobs("auto", 3, cpus=8)
    ('2', '1', '3')
    >>> resolve_jobs("4", 1, cpus=2)
    '4'
    """
    if jobs not in (None, "auto"):
        return str(jobs)
    if cpus is None:
        cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return str(max(1, min(cpus, modules)))


def _selected_modules(pytest_args) -> int:
    return len({a.split("::", 1)[0] for a in pytest_args if "::" in a or a.endswith(".py")})


def _parallel_args(jobs) -> list[str]:
    """``--jobs N`` -> pytest-xdist's workers. Distributed by module (``loadfile``): a case
    module's tests share the functions its runners traced and compiled, and its v1 graphs and
    JAX caches stay in one worker, as in a serial run. A case that kills its worker becomes a
    ``crashed`` row and xdist starts a new worker."""
    if jobs in (None, "1"):
        return []
    try:
        import xdist  # noqa: F401
    except ImportError:
        raise CliError("--jobs needs pytest-xdist: pip install pytest-xdist") from None
    return ["-n", jobs, "--dist", "loadfile", "--max-worker-restart", str(MAX_CRASHES)]


def _shard_args(shard, durations_from, report_dir: Path) -> list[str]:
    """``--shard i/n`` -> pytest-split's group i of n, balanced by the durations of a report's
    rows when ``--durations-from`` names one (else by test count)."""
    if shard is None:
        if durations_from:
            raise CliError("--durations-from only balances shards: give --shard i/n too")
        return []
    try:
        import pytest_split  # noqa: F401
    except ImportError:
        raise CliError("--shard needs pytest-split: pip install pytest-split") from None
    i, n = shard
    out = ["--splits", str(n), "--group", str(i), "--splitting-algorithm", "least_duration"]
    if durations_from:
        import json

        report = schema.load(durations_from)
        durations = {r["test"]: r["duration_s"] for r in report["results"] if r.get("duration_s")}
        path = report_dir / ".shard-durations.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(durations))
        out += ["--durations-path", str(path)]
    return out


def cmd_merge(args) -> int:
    """Join shard reports (``run --shard i/n`` on several machines) into one report."""
    paths = [Path(p) for p in args.reports]
    if not args.update:
        _refuse_overwriting_an_input(args.output, paths)
    elif len(paths) < 2:
        raise CliError("merge --update needs the baseline and at least one report to take behaviours from")
    elif any(Path(args.output).resolve() == p.resolve() for p in paths[1:]):
        raise CliError(f"the output {args.output} is one of the reports taken from: write it elsewhere")
    reports = [schema.load(p) for p in paths]
    names = [str(p) for p in paths]
    if args.update:  # MergeError -> exit 2
        merged = merge.update(reports[0], reports[1:], names)
        taken = sorted({r["behaviour"] for rep in reports[1:] for r in rep["results"]})
        what = f"{paths[0]} with {len(taken)} behaviour(s) of {len(paths) - 1} report(s) ({', '.join(taken)})"
    else:
        merged = merge.merge(reports, names)
        what = f"{len(paths)} reports"
    out = Path(args.output)
    out.parent.mkdir(parents=True, exist_ok=True)
    schema.write_json(merged, out)  # atomic: the baseline itself may be the output
    print(f"merged {what}: {len(merged['results'])} rows -> {out}")
    if merged.get("incomplete"):
        print(f"  behaviours that did not run whole in any of them: {', '.join(merged['incomplete'])}")
    stale = [d for d in merged.get("declared", []) if d["status"] == "stale"]
    for d in stale:
        print(f"  FAILED: stale declaration {d['key']}={d['observed']!r} ({d['module']}): {d['reason']}")
    bad = query.failures(merged)
    if bad:
        print(f"  {len(bad)} failed, errored or crashed row(s)")
    return 1 if stale or bad else 0


def cmd_report(args) -> int:
    """One report: its page. Several: the version matrix page, with each release's own page
    one link away (``<stem>-releases/``). Exactly two: the upgrade view (the changelog
    first) above the matrix."""
    paths = files.expand_reports(args.reports or [files.default_report()])
    reports = [schema.load(p) for p in paths]  # ReportError -> exit 2 with the file and problem
    bench = load_bench(args.bench) if args.bench else []
    out_dir = Path(args.out) if args.out else paths[0].parent
    stem = args.name or (paths[0].stem if len(paths) == 1 else "upgrade" if len(paths) == 2 else "matrix")
    if args.out and Path(args.out).suffix in (".html", ".md"):  # a page's path: its stem and folder
        out_dir, stem = Path(args.out).parent, args.name or Path(args.out).stem
    _refuse_overwriting_an_input(out_dir / f"{stem}.md", paths)
    _refuse_overwriting_an_input(out_dir / f"{stem}.html", paths)
    md, page = files.write_pages(paths, reports, out_dir, stem, bench)
    if args.readme:
        files.update_readme(Path(args.readme), reports)
        print(f"updated the version matrix in {args.readme}")
    for r, p in zip(reports, paths):
        flag = " (PARTIAL: interrupted run)" if r.get("partial") else ""
        print(f"{p}: {len(r['results'])} rows{flag}")
    print(f"wrote {md} and {page}")
    return 0


def cmd_progress(args) -> int:
    """One line per running (or ended) run: rows done, failures, the time left."""
    # imported here, not above: the writer brings pytest (0.5 s), which every other command but
    # run (whose pytest is a child process) does without; --help starts in 0.3 s
    from suite.report.writer import stream_progress

    status = 0
    for p in args.streams or [Path("reports") / "latest.jsonl"]:
        p = Path(p)
        try:
            print(stream_progress(p / "latest.jsonl" if p.is_dir() else p))
        except ReportError as e:  # this one has not started (or is no report): say so, go on
            print(f"autodiff-semantics: error: {e}", file=sys.stderr)
            status = 2
    return status


def cmd_upgrade(args) -> int:
    """Run two TensorFlow release lines through tox and print the changelog between them."""
    import subprocess

    root = _repo_root()
    envs = []
    for v in (args.old, args.new):
        parts = v.split(".")
        if v == "nightly":
            envs.append("nightly")
            continue
        if len(parts) < 2 or not all(x.isdigit() for x in parts[:2]):
            raise CliError(f"version {v!r} is not like 2.15 (or 'nightly')")
        envs.append(f"tf{parts[0]}{parts[1]}")
    if not args.no_run:
        where = next((d for d in (Path.cwd(), root) if (d / "tox.ini").is_file()), None)
        if where is None:
            raise CliError(
                "upgrade runs the release envs of tox.ini: run it in a clone of the repository "
                "(or pass --no-run to diff reports that are already there)"
            )
        cmd = ["tox", "-e", ",".join(envs)]
        print("autodiff-semantics: " + " ".join(cmd), file=sys.stderr, flush=True)
        subprocess.run(cmd, cwd=where)  # failing cases are expected: the diff says which
    reports = []
    for v, env in zip((args.old, args.new), envs):
        found = files.find_release_report(v, root)
        if found is None:
            raise CliError(
                (
                    "no reports/nightly/tf-*.json "
                    if v == "nightly"
                    else f"no reports/tf-{v}.*.json nor reports/baselines/tf-{v}.*.json "
                )
                + f"(run 'tox -e {env}' first, or drop --no-run)"
            )
        reports.append(found)
    args.old, args.new = str(reports[0]), str(reports[1])
    return cmd_diff(args)


def _bisect_report(spec: str) -> Path:
    """A report given as a path, a release (``2.21.0``: the committed baseline) or a nightly
    (``2.23.0.dev20261026``: reports/nightly/)."""
    if Path(spec).suffix in (".json", ".jsonl") or Path(spec).exists():
        return Path(spec)
    if bisection.is_nightly(spec):
        name = f"tf-{bisection.pep440(spec).replace('.dev', '-dev')}.json"
        for base in dict.fromkeys((Path.cwd() / "reports", _repo_root() / "reports")):
            if (base / "nightly" / name).exists():
                return base / "nightly" / name
        raise CliError(f"no reports/nightly/{name} for {spec} (run 'tox -e nightly' on that nightly first)")
    found = files.find_release_report(spec, _repo_root())
    if found is None:
        raise CliError(f"no report of TensorFlow {spec}: give a report file, or a version with a committed baseline")
    return found


def _tf_version(report: dict, path) -> str:
    v = ((report.get("environment") or {}).get("frameworks") or {}).get("tensorflow", {}).get("version")
    if not v:
        raise CliError(f"{path}: the report does not say which TensorFlow it ran")
    return bisection.pep440(str(v))


def _watches(old: dict, new: dict, paths, keys) -> list:
    """The changed TensorFlow observations to place, only those naming one of ``keys`` if given."""
    ws = bisection.watches(diff.diff(old, new, str(paths[0]), str(paths[1])).changes)
    return [w for w in ws if any(k in w.key or k in w.test for k in keys)] if keys else ws


def cmd_bisect(args) -> int:
    """Place each change between two reports on the tf-nightly that made it."""
    paths = [_bisect_report(args.old), _bisect_report(args.new)]
    old, new = (schema.load(p) for p in paths)
    ws = _watches(old, new, paths, args.key)
    if not ws:
        print("no TensorFlow row changed an observation or its outcome between them: nothing to bisect")
        return 0
    versions_ = [_tf_version(r, p) for r, p in zip((old, new), paths)]
    say = lambda s: print(f"bisect: {s}", file=sys.stderr, flush=True)  # noqa: E731
    cands = bisection.candidates(nightlies.offered(), *versions_)
    if not cands:
        raise CliError(f"the package index offers no tf-nightly between {versions_[0]} and {versions_[1]}")
    labels = [p.name for p in paths]
    fresh = bisection.new_state(labels[0], labels[1], cands, ws)
    state = bisection.resume(bisection.load_state(args.state), fresh)
    say(
        f"{len(ws)} changed observations in {len({w.test for w in ws})} rows; {len(cands)} nightlies from "
        f"{cands[0]} to {cands[-1]}; {bisection.status_line(state)} (state: {args.state})"
    )
    if args.dry_run:
        step = bisection.plan(state)
        print("nothing left to probe" if step is None else f"next: tf-nightly {step[0]}, {len(step[1])} rows")
        return 0
    envs = nightlies.Envs(
        Path(args.cache_dir) if args.cache_dir else nightlies.default_cache(),
        keep_envs=max(args.keep_envs, args.jobs),
        keep_wheels=args.keep_wheels,
        out=say,
    )
    n = bisection.run(
        state,
        envs.probe,
        save=lambda s: bisection.save_state(s, args.state),
        progress=say,
        max_probes=args.max_probes,
        jobs=args.jobs,
    )
    bisection.save_state(state, args.state)
    say(f"{n} probes ({envs.installed} nightlies installed); {bisection.status_line(state)}")
    _print_placements(bisection.results(state))
    return 1 if any(r["status"] == "open" for r in bisection.results(state)) else 0


def _placement(r: dict) -> str:
    """Where a bisected change was placed: its first nightly, the last old one and the compare
    link; else its status (``open``, ``flaky``, ...)."""
    flip = next((f for f in reversed(r["flips"]) if f["to"] == r["new"]), None)
    if not flip or r["status"] != "placed":
        return r["status"]
    where = f"first in tf-nightly {flip['first_new']} ({flip['first_date']}); last old {flip['last_old']}"
    return where + (f"; {flip['compare']}" if flip["compare"] else "")


def _print_placements(results) -> None:
    """One line per placement, with the keys it holds."""
    groups: dict = {}
    for r in results:
        groups.setdefault(_placement(r), []).append(r)
    for where, rs in groups.items():
        keys = sorted({r["key"] for r in rs})
        print(f"{where}: {len(rs)} change(s): {', '.join(keys[:6])}{' ...' if len(keys) > 6 else ''}")


def cmd_diff(args) -> int:
    _refuse_overwriting_an_input(args.output, [args.old, args.new])
    old, new = schema.load(args.old), schema.load(args.new)
    log = diff.diff(old, new, args.old, args.new, whole=args.whole)
    text = diff.markdown(log)
    if args.output:
        Path(args.output).write_text(text, encoding="utf-8")
    print(text)
    return 1 if log.regressions else 0


def cmd_faults(args) -> int:
    # imported here, not above: the catalogue brings Hypothesis and its 41 modules (0.3 s)
    from suite.faults import CATALOGUE, runner

    if args.list:
        for f in sorted(CATALOGUE.values(), key=lambda f: f.name):
            print(f"{f.name:36s} breaks {', '.join(f.breaks)}: {f.description}")
        return 0
    return runner.run(
        args.fault,
        jobs=args.jobs,
        profile=args.profile,
        with_control=not args.no_control,
        seed=args.seed,
        out=lambda s: print(s, flush=True),
    )


def cmd_bench(args, pytest_args) -> int:
    import json
    import subprocess

    root = _repo_root()
    if not (root / "benchmarks").is_dir():
        raise CliError(
            f"bench runs the benchmarks/ of a checkout, and {root} has none: run it from a clone of the repository"
        )
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
    cmd = [
        sys.executable,
        "-m",
        "pytest",
        str(root / "benchmarks"),
        "--rootdir",
        str(root),
        "-p",
        "no:cacheprovider",
        "--bench-size",
        size,
        "--devices",
        args.device,
        f"--benchmark-json={out}",
        "-q",
        "--benchmark-columns=median,iqr,rounds",
        "--benchmark-sort=name",
        "--report-dir",
        str(out.parent / "run"),
    ]
    storage = f"file://{(out.parent / 'storage').resolve()}"
    if args.save:
        cmd += [f"--benchmark-storage={storage}", f"--benchmark-save={args.save}"]
    if args.compare:
        cmd += [
            f"--benchmark-storage={storage}",
            f"--benchmark-compare={args.compare}",
            f"--benchmark-compare-fail=median:{args.threshold}",
        ]
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
    env = frameworks.environment()
    if not any("gpu" in (info.get("devices") or []) for info in env.values()):
        seen = "; ".join(
            f"{name}: {','.join(info.get('devices') or []) or 'not installed'}" for name, info in env.items()
        )
        raise CliError(f"no GPU is visible to any framework ({seen})")


def _anchor_node_id(arg: str, root: Path) -> str:
    """A report's node id (``cases/test_x.py::test[...]``) names a file beside the cases, not
    in the working directory: anchor it there when it is not found here, so a reproducer
    runs from any directory (its node id in the report stays the same: pytest's rootdir is
    ``root``)."""
    path, sep, rest = arg.partition("::")
    if not path.endswith(".py") or Path(path).exists() or not (root / path).exists():
        return arg
    return str(root / path) + sep + rest


def rerun_args(pytest_args) -> list[str]:
    """Of the pytest arguments a user gave ``run``, those a reproducer must repeat: not the
    selection (paths, node ids) and not the Hypothesis seed (the reproducer names the seed the
    run used).

    >>> rerun_args(["cases/test_a.py::t[x]", "-k", "seed", "--hypothesis-seed=3", "-p", "suite.faults.plugin"])
    ['-k', 'seed', '-p', 'suite.faults.plugin']
    """
    out, skip = [], False
    for a in pytest_args:
        if skip:
            skip = False
        elif a == "--hypothesis-seed":
            skip = True
        elif not (a.startswith("--hypothesis-seed=") or "::" in a or a.endswith(".py")):
            out.append(a)
    return out


def _has_paths(pytest_args) -> bool:
    return any("::" in a or a.endswith(".py") for a in pytest_args)


def _positive_int(value: str) -> int:
    try:
        n = int(value)
    except ValueError:
        n = 0
    if n < 1:
        raise argparse.ArgumentTypeError(f"{value!r} is not a positive whole number")
    return n


def _jobs(value: str) -> str:
    if value == "auto":
        return value
    return str(_positive_int(value))


def _shard(value: str) -> tuple[int, int]:
    import re

    m = re.fullmatch(r"(\d+)/(\d+)", value.strip())
    if not m or not 1 <= int(m.group(1)) <= int(m.group(2)):
        raise argparse.ArgumentTypeError(f"{value!r} is not a shard like 1/4 (i/n with 1 <= i <= n)")
    return int(m.group(1)), int(m.group(2))


def _threshold(value: str) -> str:
    import re

    if not re.fullmatch(r"\d+(\.\d+)?%?", value):
        raise argparse.ArgumentTypeError(f"{value!r} is not a percentage like 20% (or a time like 0.001)")
    return value


def _version() -> str:
    from importlib import metadata

    try:
        return metadata.version("autodiff-semantics")
    except metadata.PackageNotFoundError:  # a checkout on sys.path, not installed
        return "(not installed)"


def _refuse_overwriting_an_input(out, inputs) -> None:
    """An output path that is one of the inputs would destroy it (``merge a b -o a``)."""
    if out is None:
        return
    target = Path(out).resolve()
    for i in inputs:
        if Path(i).resolve() == target:
            raise CliError(f"the output {out} is also an input: write it elsewhere")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="autodiff-semantics", description="Cross-framework test suite for TensorFlow autodiff semantics."
    )
    p.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    r = sub.add_parser(
        "run",
        help="run the cases and write the report",
        description="Run the cases and write the report. Arguments after '--' go to pytest.",
    )
    r.add_argument(
        "--behaviour", "-b", action="append", metavar="ID", help="behaviour id to run (repeatable; default: all)"
    )
    options.add_to_argparse(r)
    r.add_argument("--cases", metavar="DIR", help="cases directory (default: the installed cases package)")
    r.add_argument("--verbose", "-v", action="store_true", help="one line per test")
    r.add_argument(
        "--jobs",
        "-j",
        type=_jobs,
        metavar="N",
        help="run the cases on N pytest-xdist workers (1: one process), or 'auto': one per CPU, at most one per "
        "behaviour selected, one process for a single behaviour (default: auto)",
    )
    r.add_argument(
        "--shard",
        type=_shard,
        metavar="I/N",
        help="run only shard I of N (pytest-split); join the shards' reports with 'autodiff-semantics merge'",
    )
    r.add_argument(
        "--durations-from",
        metavar="REPORT",
        help="balance the shards by the durations of this report's rows (default: by test count)",
    )
    r.add_argument(
        "--versioned-dir",
        metavar="DIR",
        help="also copy the report to DIR/tf-<version>.{json,md,html} (the tox matrix uses this)",
    )
    rep = sub.add_parser(
        "report",
        help="render reports as Markdown and self-contained HTML",
        description="Render one report, or several side by side as a version matrix. "
        "A streamed latest.jsonl from an interrupted run renders marked as partial.",
    )
    rep.add_argument(
        "reports", nargs="*", metavar="REPORT", help="report .json or .jsonl (default: reports/latest.json)"
    )
    rep.add_argument(
        "--out",
        "-o",
        metavar="DIR|PAGE",
        help="output directory, or a page path ending in .html or .md (default: beside the first report)",
    )
    rep.add_argument("--name", metavar="STEM", help="output file stem (default: the report's stem, or 'matrix')")
    rep.add_argument("--bench", action="append", metavar="JSON", help="pytest-benchmark JSON to plot (repeatable)")
    rep.add_argument("--readme", metavar="FILE", help="also regenerate the version matrix section of FILE")
    d = sub.add_parser(
        "diff",
        help="semantic changelog between two reports",
        description="Semantic changelog OLD -> NEW. Exit 0: no regression; 1: regressions; 2: bad input.",
    )
    d.add_argument("old", metavar="OLD")
    d.add_argument("new", metavar="NEW")
    d.add_argument("--out", "-o", "--output", dest="output", metavar="FILE", help="also write the Markdown here")
    d.add_argument(
        "--whole",
        action="store_true",
        help="compare every row of both, also those a subset or partial run did not run (default: those are 'not run')",
    )
    be = sub.add_parser(
        "bench",
        help="benchmarks of the hot paths against a measured ceiling",
        description="pytest-benchmark over benchmarks/; JSON in reports/benchmarks/. "
        "Arguments after '--' go to pytest.",
    )
    be.add_argument("--quick", action="store_true", help="small inputs (2^20 float32), n<=128 Jacobians")
    be.add_argument("--device", choices=("cpu", "gpu"), default="cpu", help="device (default: cpu)")
    be.add_argument(
        "--out",
        "-o",
        "--output",
        dest="output",
        metavar="FILE",
        help="JSON path (default: reports/benchmarks/<device>-<size>.json)",
    )
    be.add_argument("--save", metavar="NAME", help="also save the run in reports/benchmarks/storage for --compare")
    be.add_argument("--compare", metavar="ID", help="compare against a saved run (pytest-benchmark's compare)")
    be.add_argument(
        "--threshold", default="20%", type=_threshold, help="regression threshold on the median (default: 20%%)"
    )
    up = sub.add_parser(
        "upgrade",
        help="run two TensorFlow versions (tox) and print the changelog",
        description="tox -e tfOLD,tfNEW, then diff reports/tf-OLD*.json reports/tf-NEW*.json.",
    )
    up.add_argument("old", metavar="OLD", help="a release line, e.g. 2.15, or 'nightly'")
    up.add_argument("new", metavar="NEW", help="a release line, e.g. 2.21, or 'nightly' (tox env nightly, tf-nightly)")
    up.add_argument("--no-run", action="store_true", help="only diff the reports already there")
    up.add_argument("--out", "-o", "--output", dest="output", metavar="FILE", help="also write the Markdown here")
    up.add_argument("--whole", action="store_true", help="compare every row, also rows one run did not select")
    bi = sub.add_parser(
        "bisect",
        help="find the tf-nightly that made each change between two reports",
        description="Binary-search the tf-nightly builds the package index offers between two reports' "
        "TensorFlow versions for each changed observation: installs each probed nightly in a cached environment "
        "and runs only the rows still open. The state is saved after every probe (an interrupted bisect resumes "
        "from it) and holds each change's last old and first new nightly, their GIT_VERSIONs and the compare link. "
        "Exit 0: every change placed; 1: the search stopped before (--max-probes); 2: bad input.",
    )
    bi.add_argument("old", metavar="OLD", help="the older report: a file, a release (2.21.0) or a nightly")
    bi.add_argument("new", metavar="NEW", help="the newer report, e.g. 2.23.0.dev20261026 (reports/nightly/)")
    bi.add_argument(
        "--state", default="reports/nightly/bisect.json", help="where the search is kept (default: %(default)s)"
    )
    bi.add_argument("--key", "-k", action="append", metavar="TEXT", help="only changes whose key or row contains TEXT")
    bi.add_argument("--max-probes", type=_positive_int, metavar="N", help="stop after N probes (resume later)")
    bi.add_argument(
        "--cache-dir", metavar="DIR", help="wheels and environments (default: ~/.cache/autodiff-semantics/bisect)"
    )
    bi.add_argument("--keep-envs", type=_positive_int, default=2, metavar="N", help="environments kept (default: 2)")
    bi.add_argument("--keep-wheels", type=_positive_int, default=4, metavar="N", help="wheels kept (default: 4)")
    bi.add_argument(
        "--jobs",
        "-j",
        type=_positive_int,
        default=min(2, os.cpu_count() or 1),
        metavar="N",
        help="nightlies probed at once (default: 2, or 1 on one CPU): a probe waits on its download and install",
    )
    bi.add_argument("--dry-run", action="store_true", help="say what is left and the next probe, install nothing")
    fl = sub.add_parser(
        "faults",
        help="self-check: run the cases under each injected fault",
        description="Run the relevant cases under each fault of the catalogue (in subprocesses) "
        "and print the kill matrix. Exit 1 if any fault survives.",
    )
    fl.add_argument("--fault", "-f", action="append", metavar="NAME", help="fault to run (repeatable; default: all)")
    fl.add_argument("--jobs", "-j", type=_positive_int, metavar="N", help="parallel subprocesses (default: CPU count)")
    fl.add_argument("--profile", choices=options.PROFILES, default="ci", help="Hypothesis profile (default: ci)")
    fl.add_argument("--no-control", action="store_true", help="skip the control run without any fault")
    fl.add_argument(
        "--seed",
        type=int,
        metavar="N",
        help="Hypothesis seed (default: the profile's derandomized draws); kills must hold for any seed",
    )
    fl.add_argument("--list", action="store_true", help="list the catalogue and exit")
    mg = sub.add_parser(
        "merge",
        help="join shard reports into one report",
        description="Join the reports of 'run --shard i/n' (or of runs of other behaviours) into one report that "
        "'report' and 'diff' accept. Refuses reports of different environments. "
        "Exit 0: merged and clean; 1: merged, with failed rows or stale declarations; 2: bad input.",
    )
    mg.add_argument("reports", nargs="+", metavar="REPORT", help="report .json or .jsonl")
    mg.add_argument(
        "--out", "-o", "--output", dest="output", required=True, metavar="FILE", help="the merged report (.json)"
    )
    mg.add_argument(
        "--update",
        action="store_true",
        help="incremental baseline: the first report is a baseline, and the rows, declarations and deprecations "
        "of each behaviour the later reports ran replace its own (same TensorFlow, profile and options; the "
        "output may be the baseline itself; environment.behaviour_runs records which suite revision ran each)",
    )
    pr = sub.add_parser(
        "progress",
        help="where a running report is: rows done, failures, time left",
        description="One line per run from its streamed latest.jsonl (a run in progress, or ended): rows done "
        "of the rows collected, failures so far and the time left, estimated from the rows so far. For watching a "
        "long run from another terminal, e.g. 'autodiff-semantics progress reports/runs/*' during a tox matrix.",
    )
    pr.add_argument(
        "streams", nargs="*", metavar="STREAM", help="a latest.jsonl or its folder (default: reports/latest.jsonl)"
    )
    ls = sub.add_parser("list", help="list the behaviours", description="List the behaviours the cases check.")
    ls.add_argument("--json", action="store_true", help="JSON instead of a table")
    ls.add_argument("--cases", metavar="DIR", help="cases directory (default: the installed cases package)")
    return p


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    extra = []
    if "--" in argv:
        i = argv.index("--")
        argv, extra = argv[:i], argv[i + 1 :]
    parser = build_parser()
    args = parser.parse_args(argv)  # exits 2 with a usage message on a bad flag
    if extra and args.command not in ("run", "bench"):
        parser.error(f"arguments after '--' are only for 'run' and 'bench' (got {' '.join(extra)})")
    try:
        if args.command in ("run", "bench", None):  # none: run's own message
            return (cmd_bench if args.command == "bench" else cmd_run)(args, extra)
        return {
            "list": cmd_list,
            "report": cmd_report,
            "diff": cmd_diff,
            "faults": cmd_faults,
            "merge": cmd_merge,
            "upgrade": cmd_upgrade,
            "bisect": cmd_bisect,
            "progress": cmd_progress,
        }[args.command](args)
    except (
        CliError,
        ReportFileError,
        BenchFileError,
        FileNotFoundError,
        ValueError,
        OSError,
        bisection.ProbeError,
    ) as e:
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
