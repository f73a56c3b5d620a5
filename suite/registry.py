"""The frameworks the suite knows, one record each: the one place a framework's name, label,
modes, reference mode, runner module and import rank are written (issue 48). Everything else
reads these tables; adding a framework is a runner module, one record here, its extras in
``pyproject.toml`` and its spellings in the cases.

>>> NAMES, IMPORT_ORDER, ORACLES
(('tensorflow', 'jax', 'torch'), ('torch', 'tensorflow', 'jax'), ('jax', 'torch'))
>>> MODES["jax"], REFERENCE_MODE["torch"], LABELS["torch"]
(('eager', 'jit'), 'eager', 'PyTorch')
"""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class Entry:
    #: the module name, as options, row ids and reports spell it
    name: str
    #: as a person reads it on a page
    label: str
    #: execution modes, in the order rows are shown
    modes: tuple[str, ...]
    #: the mode in which it answers as an oracle for the other frameworks' rows (None: never)
    reference_mode: str | None
    #: the mode a single op runs fastest in (the benchmarks' ceilings)
    fastest_mode: str
    #: the module whose ``make(fw, spec)`` builds its runners
    runner: str
    #: its place in the import order (process hygiene, DESIGN.md: torch before TensorFlow)
    import_rank: int


REGISTRY = (
    Entry("tensorflow", "TensorFlow", ("eager", "function", "xla", "graph"), None, "eager",
          "suite.frameworks.tf_runner", 1),
    Entry("jax", "JAX", ("eager", "jit"), "jit", "jit", "suite.frameworks.jax_runner", 2),
    Entry("torch", "PyTorch", ("eager",), "eager", "eager", "suite.frameworks.torch_runner", 0),
)  # fmt: skip

BY_NAME = {e.name: e for e in REGISTRY}
#: in the order rows, options and pages show them
NAMES = tuple(e.name for e in REGISTRY)
#: in the order they are imported
IMPORT_ORDER = tuple(e.name for e in sorted(REGISTRY, key=lambda e: e.import_rank))
MODES = {e.name: e.modes for e in REGISTRY}
REFERENCE_MODE = {e.name: e.reference_mode for e in REGISTRY if e.reference_mode}
#: the frameworks that answer as oracles, in display order
ORACLES = tuple(REFERENCE_MODE)
LABELS = {e.name: e.label for e in REGISTRY}
