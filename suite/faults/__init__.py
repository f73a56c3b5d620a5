"""Fault catalogue: small in-process patches that give TensorFlow wrong semantics.

A fault is switched on only by its pytest plugin, ``-p suite.faults.plugin --fault NAME``
(what ``autodiff-semantics faults`` passes): nothing in a normal run reads the catalogue.
The plugin patches each framework right after it is imported, records the faults in the
report header, and the report writer then refuses versioned reports and baselines. Each
fault names the behaviours that must catch it; the self-check runs the relevant cases
under each fault and expects an assertion of theirs to fail.
"""

from __future__ import annotations

import dataclasses
from typing import Callable


@dataclasses.dataclass(frozen=True)
class Fault:
    name: str
    framework: str
    breaks: tuple[str, ...]
    description: str
    patch: Callable


CATALOGUE: dict[str, Fault] = {}


def behaviour_of(module: str) -> str:
    """The behaviour a fault module is named after: ``suite.faults.loss_gradients`` -> ``loss-gradients``."""
    return module.rsplit(".", 1)[-1].replace("_", "-")


def described(fn) -> str:
    """A fault's description: its function's docstring, on one line."""
    return " ".join((fn.__doc__ or "").split())


def fault(name, *, framework="tensorflow", breaks=None, description=None):
    """Register ``patch(module)`` as the fault ``name``. ``breaks``: the behaviours that must
    catch it (a name or a list; default, the one its module is named after); ``description``:
    what goes wrong (default, the patch's docstring)."""

    def deco(patch):
        if name in CATALOGUE:  # a silent overwrite would drop a fault from the self-check
            raise ValueError(
                f"fault {name!r} is registered twice ({CATALOGUE[name].patch.__module__} and "
                f"{patch.__module__}); name it once, listing every behaviour in breaks="
            )
        said = description or described(patch)
        if not said:
            raise ValueError(f"fault {name!r} ({patch.__module__}) says nothing: give it a docstring")
        hit = [breaks] if isinstance(breaks, str) else list(breaks or [behaviour_of(patch.__module__)])
        CATALOGUE[name] = Fault(name, framework, tuple(hit), said, patch)
        return patch

    return deco


def check_names(names) -> list[str]:
    unknown = [n for n in names if n not in CATALOGUE]
    if unknown:
        raise KeyError(f"unknown fault(s) {', '.join(unknown)}; known: {', '.join(sorted(CATALOGUE))}")
    return list(names)


def applier(names):
    """A ``suite.frameworks.on_load`` hook that patches each framework with the named faults."""
    chosen = [CATALOGUE[n] for n in check_names(names)]

    def apply(framework: str, module) -> None:
        for f in chosen:
            if f.framework == framework:
                f.patch(module)

    return apply


def _register_all() -> None:
    """Import every module of this package: each registers its faults with @fault."""
    import importlib
    import pkgutil

    for m in pkgutil.iter_modules(__path__):
        importlib.import_module(f"{__name__}.{m.name}")


_register_all()
