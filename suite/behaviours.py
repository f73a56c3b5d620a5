"""The Behaviour record and the registry (``autodiff-semantics list``).

Each case module declares exactly one behaviour at import time::

    BEHAVIOUR = behaviour("straight-through-estimator", sources=["000", "002"],
                          links=["https://www.tensorflow.org/api_docs/python/tf/stop_gradient"],
                          floor=Floor("element", "y = x + stop_gradient(f(x) - x) is elementwise: ..."))

The title is the first line of the module docstring. Case modules import only the suite
and NumPy/Hypothesis (frameworks arrive through the runners), so listing is cheap.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import re
import sys
from pathlib import Path

ID_RE = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")
ALL_MODES = ("eager", "function", "xla", "graph")

#: How a behaviour's float comparisons outside the op table are floored (issue 47), the
#: judgement its module states with the reason (:class:`Floor`):
FLOOR_KINDS = {
    # every compared float array mixes elements (a sum, a matrix product, a loss, a norm, an
    # optimizer over a model): an element's rounding is at the magnitude of what it was summed
    # from, which the array's largest element (or the inputs', scale="inputs") stands for
    "array": "an array-level floor: every compared result mixes elements",
    # element i of every compared array comes from element i of the inputs alone: each one's
    # floor is the rounding of its own computation (per-element scales, suite.ops.error)
    "element": "per element: every compared result is elementwise",
    # both kinds of comparison; the reason says which is which
    "mixed": "per element where a result is elementwise, an array-level floor where it mixes",
    # no float array is compared with a tolerance (kinds, exact equalities, classifications)
    "none": "no float comparison with a tolerance",
}


@dataclasses.dataclass(frozen=True)
class Floor:
    """A behaviour's error-model judgement: ``kind`` (:data:`FLOOR_KINDS`) and ``why``, the
    sentence that says why that floor is right for its comparisons (an array-level floor can
    hide a 1% error in a small element next to a large one: say why it cannot here).

    >>> Floor("array", "a loss and its gradient: each entry sums over the batch").kind
    'array'
    >>> Floor("per-op", "x")
    Traceback (most recent call last):
    ValueError: floor kind 'per-op': one of array, element, mixed, none
    """

    kind: str
    why: str

    def __post_init__(self):
        if self.kind not in FLOOR_KINDS:
            raise ValueError(f"floor kind {self.kind!r}: one of {', '.join(FLOOR_KINDS)}")
        if not self.why or not self.why.strip():
            raise ValueError(f"a {self.kind} floor needs its reason")

    def as_dict(self) -> dict:
        """As reports and ``list --json`` carry it."""
        return {"kind": self.kind, "why": self.why}


_REGISTRY: dict[str, "Behaviour"] = {}


@dataclasses.dataclass(frozen=True)
class Behaviour:
    id: str
    title: str
    sources: tuple[str, ...]
    modes: tuple[str, ...]
    links: tuple[str, ...]
    module: str
    #: the error-model judgement of its float comparisons outside the op table (issue 47)
    floor: Floor | None = None

    @property
    def module_file(self) -> str:
        return f"test_{self.id.replace('-', '_')}.py"


def behaviour(id: str, *, sources, modes=ALL_MODES, links=(), title=None, floor: Floor | None = None) -> Behaviour:
    """Declare the behaviour of the calling case module (and register it); ``floor``: how its
    float comparisons are floored, and why (:class:`Floor`)."""
    if not ID_RE.match(id):
        raise ValueError(f"behaviour id {id!r} is not kebab-case")
    frame = sys._getframe(1)
    doc = frame.f_globals.get("__doc__") or ""
    title = title or (doc.strip().splitlines() or [id])[0].strip()
    bad = set(modes) - set(ALL_MODES)
    if bad:
        raise ValueError(f"{id}: unknown modes {sorted(bad)}")
    if floor is not None and not isinstance(floor, Floor):
        raise TypeError(f"{id}: floor={floor!r}: a Floor(kind, why)")
    b = Behaviour(id, title, tuple(sources), tuple(modes), tuple(links), frame.f_globals.get("__name__", "?"), floor)
    _REGISTRY[id] = b
    return b


def floors() -> dict[str, dict]:
    """The registered behaviours' floors, ``{id: {"kind": ..., "why": ...}}`` (the report's
    ``floors``: the error-model judgement beside each behaviour's array-level headroom)."""
    judged = sorted((b for b in _REGISTRY.values() if b.floor), key=lambda b: b.id)
    return {b.id: b.floor.as_dict() for b in judged}


def default_cases_dir() -> Path:
    """The ``cases`` package that ships with ``suite``: beside it in a checkout or an
    editable install, in site-packages when installed from the wheel."""
    here = Path(__file__).resolve().parent.parent / "cases"
    if (here / "__init__.py").is_file():
        return here
    spec = importlib.util.find_spec("cases")
    if spec is not None and spec.submodule_search_locations:
        return Path(list(spec.submodule_search_locations)[0])
    raise FileNotFoundError(
        "no cases package: install autodiff-semantics (its wheel carries cases/) or pass --cases DIR"
    )


def discover(cases_dir: Path | None = None) -> dict[str, Behaviour]:
    """Import every ``cases/test_*.py`` and return the behaviours by id (sorted)."""
    cases_dir = Path(cases_dir or default_cases_dir())
    if not cases_dir.is_dir():
        raise FileNotFoundError(f"no cases directory at {cases_dir}")
    found = {}
    # The package's modules are imported under the names pytest gives them (cases.test_x),
    # so a process that lists and then runs them imports each once; another directory's
    # modules get private names.
    package = cases_dir.resolve() == default_cases_dir().resolve() if (cases_dir / "__init__.py").is_file() else False
    for path in sorted(cases_dir.glob("test_*.py")):
        name = f"cases.{path.stem}" if package else f"_cases_{path.stem}"
        if package and name not in sys.modules:
            importlib.import_module(name)
        mod = sys.modules.get(name)
        if mod is None:
            spec = importlib.util.spec_from_file_location(name, path)
            mod = importlib.util.module_from_spec(spec)
            sys.modules[name] = mod
            spec.loader.exec_module(mod)
        b = getattr(mod, "BEHAVIOUR", None)
        if b is None:
            raise ValueError(f"{path} declares no BEHAVIOUR")
        if b.module_file != path.name:
            raise ValueError(f"{path.name} declares behaviour {b.id!r}; expected file {b.module_file}")
        found[b.id] = b
    return dict(sorted(found.items()))


def on(*framework_names: str, modes=None):
    """Restrict a test to some frameworks' rows, and TensorFlow to some modes (put it
    above ``@given``). Use it where an API exists only there, and say so in the docstring.

    >>> @on("tensorflow", modes=("graph",))
    ... def test_seed_example(subject, record): ...
    """

    def deco(fn):
        fn.frameworks = tuple(framework_names)
        if modes is not None:
            fn.tf_modes = tuple(modes)
        return fn

    return deco


DECLARED_SKIP = "declared skip: "


def declared_skip(reason: str, *, link: str):
    """Skip this row on purpose, with a reason and a link (a case that skips itself any other
    way fails: no silent skips). For a row that cannot run at all where it is, such as a
    kernel that poisons the process."""
    import pytest

    if not reason or not link:
        raise ValueError("a declared skip needs a reason and a link")
    pytest.skip(f"{DECLARED_SKIP}{reason} ({link})")
