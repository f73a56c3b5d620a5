"""The run options, defined once: the ``autodiff-semantics run`` flags and the pytest
plugin's options are built from this table, so their names, defaults, allowed values
and help never drift apart.

>>> [o.flag for o in RUN_OPTIONS]
['--frameworks', '--modes', '--devices', '--profile', '--allow-missing', '--report-dir']
>>> parse_list("tensorflow, jax", FRAMEWORKS, "framework")
['tensorflow', 'jax']
"""

from __future__ import annotations

import dataclasses
import difflib

from suite import registry

#: Frameworks in the order rows are shown (``suite.registry``; ``suite.frameworks`` imports torch first).
FRAMEWORKS = registry.NAMES
TF_MODES = registry.MODES["tensorflow"]
DEVICES = ("cpu", "gpu")
#: Hypothesis profiles (registered by the plugin) and their drawn examples per row, beyond the
#: row's explicit ``@example``s (every subject row alike). quick and ci are derandomized and
#: draw one input signature per dtype (``suite.strategies.SIGNATURES``); dev and thorough draw
#: the whole (dtype, shape) menu. ci draws 5 (issue 46: explicit examples reach every declared key,
#: the drawn ones add coverage; 10 drew nothing a whole run's rows observe that 5 and the explicit
#: examples do not, and cost 1.34x the wall: 895 s against 667 s, measured as a pair on 2026-11-30).
PROFILE_EXAMPLES = {"quick": 1, "dev": 20, "ci": 5, "thorough": 300}
PROFILES = tuple(PROFILE_EXAMPLES)
#: The profiles that draw one signature per dtype (the largest shape).
ONE_SIGNATURE_PER_DTYPE = ("quick", "ci")
#: The pytest arguments a user gave ``run`` beyond the selection (``-k``, ``-p ... --fault``),
#: which ``run`` hands to its pytest process for the reproducers it prints (issue 49).
RERUN_ARGS_ENV = "AUTODIFF_SEMANTICS_RERUN_ARGS"
#: set by ``autodiff-semantics run`` in the pytest process it supervises: once the report, the
#: JUnit XML and the summary are written, that process ends without the interpreter's
#: finalization (TensorFlow's, JAX's and PyTorch's atexit handlers and module teardown: 5-8 s
#: of a run that has nothing left to write, measured in pairs on adam-epsilon)
FAST_EXIT_ENV = "AUTODIFF_SEMANTICS_FAST_EXIT"
#: Where a printed reproducer writes its report, so it never overwrites the run it came from.
REPRO_REPORT_DIR = "reports/repro"
#: What ``--allow-missing`` can name.
MISSABLE = (*FRAMEWORKS, "gpu")


class BadValue(ValueError):
    """A flag value outside its choices; the message names the value and the choices."""


def parse_list(value: str, known, what: str) -> list[str]:
    """A comma-separated subset of ``known``; :class:`BadValue` (with a did-you-mean) otherwise."""
    items = [v.strip() for v in str(value).split(",") if v.strip()]
    bad = [v for v in items if v not in known]
    if bad or not items:
        hint = ""
        for b in bad:
            close = difflib.get_close_matches(b, known, n=1)
            hint += f" (did you mean {close[0]!r}?)" if close else ""
        raise BadValue(f"unknown {what} {', '.join(map(repr, bad or [value]))}{hint}; choose from {','.join(known)}")
    return items


@dataclasses.dataclass(frozen=True)
class Option:
    flag: str
    default: str
    help: str
    metavar: str
    choices: tuple | None = None  # one of these
    items: tuple | None = None  # a comma-separated subset of these
    item: str = ""  # what one item is called in messages
    allow_empty: bool = False  # an empty list is a value (none of them)

    @property
    def dest(self) -> str:
        return self.flag.lstrip("-").replace("-", "_")

    def parse(self, value):
        if self.items is not None:
            if self.allow_empty and not str(value).strip():
                return []
            return parse_list(value, self.items, self.item)
        if self.choices is not None and value not in self.choices:
            raise BadValue(f"unknown {self.item} {value!r}; choose from {', '.join(self.choices)}")
        return value


RUN_OPTIONS = (
    Option(
        "--frameworks",
        ",".join(FRAMEWORKS),
        "comma-separated frameworks to run as subjects and oracles "
        "(default: tensorflow,jax,torch; one that is not installed gives skipped rows)",
        "LIST",
        items=FRAMEWORKS,
        item="framework",
    ),
    Option(
        "--modes",
        ",".join(TF_MODES),
        "comma-separated TensorFlow modes (default: eager,function,xla,graph)",
        "LIST",
        items=TF_MODES,
        item="mode",
    ),
    Option(
        "--devices",
        ",".join(DEVICES),
        "comma-separated devices (default: cpu,gpu; gpu rows are skipped with the reason when no GPU is visible)",
        "LIST",
        items=DEVICES,
        item="device",
    ),
    Option(
        "--profile",
        "dev",
        f"Hypothesis profile: quick ({PROFILE_EXAMPLES['quick']} drawn example a row beside the explicit "
        f"ones, derandomized, one shape per dtype: a first run or a PR check, comparable with a ci baseline "
        f"on every key it observes), dev ({PROFILE_EXAMPLES['dev']} examples), ci ({PROFILE_EXAMPLES['ci']}, "
        f"derandomized, one shape per dtype) or thorough ({PROFILE_EXAMPLES['thorough']}, every shape) "
        f"(default: dev)",
        "NAME",
        choices=PROFILES,
        item="profile",
    ),
    Option(
        "--allow-missing",
        "",
        "comma-separated things this run may lack without failing: tensorflow, jax, torch (not importable) "
        "and gpu (visible to JAX or PyTorch but not to TensorFlow); their rows are still written as skipped "
        "and the report header lists them (default: none; a missing one fails the run)",
        "LIST",
        items=MISSABLE,
        item="missable thing",
        allow_empty=True,
    ),
    Option(
        "--report-dir",
        "reports",
        "where latest.{json,jsonl,md,html} go, relative to the working directory (default: reports)",
        "DIR",
    ),
)


def add_to_argparse(parser) -> None:
    """The run flags on an argparse parser; a bad value exits 2 with the option's message."""
    import argparse

    def typed(opt):
        def parse(value):
            try:
                opt.parse(value)
            except BadValue as e:
                raise argparse.ArgumentTypeError(str(e)) from None
            return value

        return parse

    for opt in RUN_OPTIONS:
        parser.add_argument(opt.flag, default=opt.default, metavar=opt.metavar, help=opt.help, type=typed(opt))


def add_to_pytest(group) -> None:
    """The same options on the pytest plugin's option group (parsed in ``pytest_configure``)."""
    for opt in RUN_OPTIONS:
        group.addoption(opt.flag, default=opt.default, metavar=opt.metavar, help=opt.help)


def as_pytest_args(values: dict) -> list[str]:
    """``{"frameworks": "tensorflow", ...}`` -> the pytest arguments that ask for the same."""
    out = []
    for opt in RUN_OPTIONS:
        v = values.get(opt.dest)
        if v is not None:
            out += [opt.flag, str(v)]
    return out
