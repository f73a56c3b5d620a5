"""Command line: ``autodiff-semantics run | list`` (also ``python -m suite``).

    autodiff-semantics run [--behaviour ID ...] [--profile P] [--report-dir DIR] [-- PYTEST_ARGS]
    autodiff-semantics list

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
    import pytest

    cases = Path(args.cases or bh.default_cases_dir())
    found = bh.discover(cases)
    ids = _behaviour_ids(args.behaviour or [], list(found))
    targets = [str(cases / found[i].module_file) for i in ids] or ([] if _has_paths(pytest_args) else [str(cases)])
    argv = [*targets, "--profile", args.profile, "--report-dir", args.report_dir,
            "--rootdir", str(_repo_root()), "-p", "no:cacheprovider"]
    for opt in ("frameworks", "modes", "devices"):
        if getattr(args, opt):
            argv += [f"--{opt}", getattr(args, opt)]
    if not args.verbose:
        argv += ["-q"]
    argv += pytest_args
    print(f"autodiff-semantics: running {len(ids) or len(found)} behaviour(s), profile {args.profile}, "
          f"report in {args.report_dir}/", file=sys.stderr)
    code = int(pytest.main(argv))
    if code == 5:
        print("autodiff-semantics: no case was collected (check --behaviour and the pytest arguments)", file=sys.stderr)
    return code


def _has_paths(pytest_args) -> bool:
    return any("::" in a or a.endswith(".py") for a in pytest_args)


def build_parser() -> argparse.ArgumentParser:
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
    r.add_argument("--frameworks", metavar="LIST", help="comma-separated: tensorflow,jax,torch (default: all)")
    r.add_argument("--modes", metavar="LIST", help="TensorFlow modes: eager,function,xla,graph (default: all)")
    r.add_argument("--devices", metavar="LIST", help="cpu,gpu (default: both; gpu rows skip without a GPU)")
    r.add_argument("--cases", metavar="DIR", help="cases directory (default: the checkout's cases/)")
    r.add_argument("--verbose", "-v", action="store_true", help="one line per test")
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
    if extra and args.command != "run":
        parser.error(f"arguments after '--' are only for 'run' (got {' '.join(extra)})")
    try:
        if args.command == "list":
            return cmd_list(args)
        return cmd_run(args, extra)
    except (CliError, FileNotFoundError, ValueError) as e:
        print(f"autodiff-semantics: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("autodiff-semantics: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
