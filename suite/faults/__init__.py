"""Fault catalogue: small in-process patches that give TensorFlow wrong semantics.

A fault is switched on with ``AUTODIFF_SEMANTICS_FAULTS=name[,name...]`` in the
environment of a test process; :func:`apply` runs right after the framework is
imported (``suite.frameworks.load``). Each fault names the behaviours that must catch it.
The self-check runs the relevant cases under each fault and expects them to fail.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Callable


@dataclasses.dataclass(frozen=True)
class Fault:
    name: str
    framework: str
    breaks: tuple[str, ...]
    description: str
    patch: Callable


CATALOGUE: dict[str, Fault] = {}


def fault(name, *, framework="tensorflow", breaks, description):
    def deco(patch):
        if name in CATALOGUE:  # a silent overwrite would drop a fault from the self-check
            raise ValueError(
                f"fault {name!r} is registered twice ({CATALOGUE[name].patch.__module__} and "
                f"{patch.__module__}); name it once, listing every behaviour in breaks="
            )
        CATALOGUE[name] = Fault(name, framework, tuple(breaks), description, patch)
        return patch

    return deco


def active() -> list[str]:
    names = [n.strip() for n in os.environ.get("AUTODIFF_SEMANTICS_FAULTS", "").split(",") if n.strip()]
    unknown = [n for n in names if n not in CATALOGUE]
    if unknown:
        raise KeyError(f"unknown fault(s) {unknown}; known: {sorted(CATALOGUE)}")
    return names


def apply(framework: str, module) -> None:
    for name in active():
        f = CATALOGUE[name]
        if f.framework == framework:
            f.patch(module)


def _register_all() -> None:
    """Import every module of this package: each registers its faults with @fault."""
    import importlib
    import pkgutil

    for m in pkgutil.iter_modules(__path__):
        importlib.import_module(f"{__name__}.{m.name}")


_register_all()
