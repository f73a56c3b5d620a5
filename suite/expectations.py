"""Declared expectations and divergences: framework x mode x device x version range.

An observation key (``round_grad``, ``forward``...) has a default, what the frameworks
agree on, and may have declared divergences: a different observation for a matching
framework/mode/device/version range, each with a reason and a documentation link.
A declared divergence is asserted exactly as agreement is: when TensorFlow changes, the
test fails and the report shows the old (declared) and new (observed) value.

>>> EXPECT = expectations(
...     {"round_grad": "zeros"},
...     expect("round_grad", "none", framework="tensorflow",
...            reason="tf.round registers a None gradient",
...            link="https://github.com/tensorflow/tensorflow/blob/master/tensorflow/python/ops/math_grad.py"))
"""

from __future__ import annotations

import dataclasses

from packaging.specifiers import SpecifierSet
from packaging.version import InvalidVersion, Version

_ALL: list["Expectation"] = []


@dataclasses.dataclass(eq=False)
class Expectation:
    key: str
    observed: object
    framework: str | None = None
    mode: str | None = None
    device: str | None = None
    versions: str | None = None
    reason: str = ""
    link: str = ""
    module: str = ""
    matched: int = 0

    def matches(self, runner) -> bool:
        if self.framework and self.framework != runner.framework:
            return False
        if self.mode and runner.mode not in self.mode.split("|"):
            return False
        if self.device and runner.device != self.device:
            return False
        if self.versions:
            try:
                v = Version(str(runner.version).split("+")[0])
            except InvalidVersion:
                return False
            if v not in SpecifierSet(self.versions):
                return False
        return True

    @property
    def specificity(self) -> int:
        return sum(x is not None for x in (self.framework, self.mode, self.device, self.versions))

    def as_dict(self) -> dict:
        return {
            "key": self.key,
            "observed": self.observed,
            "framework": self.framework,
            "mode": self.mode,
            "device": self.device,
            "versions": self.versions,
            "reason": self.reason,
            "link": self.link,
            "module": self.module,
            "matched": self.matched,
        }


def expect(key: str, observed, *, framework=None, mode=None, device=None, versions=None, reason, link) -> Expectation:
    """A declared divergence. ``mode`` may list alternatives: ``"function|xla"``."""
    if not reason or not link:
        raise ValueError(f"declared divergence for {key!r} needs a reason and a link")
    if versions:
        SpecifierSet(versions)  # fail at import on a malformed range
    return Expectation(key, observed, framework, mode, device, versions, reason, link)


class Expectations:
    def __init__(self, defaults: dict, declared: list[Expectation], module: str):
        self.defaults = dict(defaults)
        self.declared = declared
        for e in declared:
            e.module = module
            if e.key not in self.defaults:
                raise ValueError(f"declared divergence for unknown key {e.key!r}")
            _ALL.append(e)

    def lookup(self, key: str, runner) -> tuple[object, Expectation | None]:
        """The expected observation for ``runner`` and the declaration it comes from (or None)."""
        if key not in self.defaults:
            raise KeyError(f"no expectation for observation key {key!r}; known: {sorted(self.defaults)}")
        hits = [e for e in self.declared if e.key == key and e.matches(runner)]
        if not hits:
            return self.defaults[key], None
        best = max(hits, key=lambda e: e.specificity)
        best.matched += 1
        return best.observed, best


def expectations(defaults: dict, *declared: Expectation) -> Expectations:
    import sys

    return Expectations(defaults, list(declared), sys._getframe(1).f_globals.get("__name__", "?"))


def all_declared() -> list[Expectation]:
    return list(_ALL)
