"""Declared expectations and divergences: framework x mode x device x version range.

An observation key (``round_grad``, ``forward``...) has a default, what the frameworks
agree on, and may have declared divergences: a different observation for a matching
framework/mode/device/version range, each with a reason and a documentation link.
A declared divergence is asserted exactly as agreement is: when TensorFlow changes, the
test fails and the report shows the old (declared) and new (observed) value.

>>> EXPECT = expectations(
...     {"round_grad": "zero"},
...     expect("round_grad", "none", framework="tensorflow",
...            reason="tf.round registers a None gradient",
...            link="https://github.com/tensorflow/tensorflow/blob/master/tensorflow/python/ops/math_grad.py"))
"""

from __future__ import annotations

import dataclasses
import itertools
import sys

from suite import registry, versions as vr

_ALL: list["Expectation"] = []


@dataclasses.dataclass(frozen=True)
class Raises:
    """An expected error: its class name and a regular expression its message must match
    (``re.search``). The report shows ``raises:<Class>``; a different class, or the same
    class for another reason (another message), does not match.

    >>> from suite.compare import error_name
    >>> Raises("ValueError", r"must be a scalar").matches(error_name(ValueError("x must be a scalar")))
    True
    >>> Raises("ValueError", r"must be a scalar").matches(error_name(ValueError("shapes differ")))
    False
    """

    error: str
    message: str

    def __post_init__(self):
        import re

        if not self.message:
            raise ValueError(f"raises({self.error!r}) needs a message pattern: the class alone matches any failure")
        re.compile(self.message)

    def __str__(self) -> str:
        return f"raises:{self.error}"

    def matches(self, observed) -> bool:
        import re

        if str(observed) != str(self):
            return False
        message = getattr(observed, "message", None)
        return message is not None and re.search(self.message, message) is not None

    def describe(self) -> str:
        return f"raises:{self.error} /{self.message}/"


def raises(error: str, message: str) -> Raises:
    """The expectation ``raises:<error>`` whose message matches ``message`` (a regex)."""
    return Raises(error, message)


_BARE: list[str] = []


def _check_not_bare_raises(value, where: str) -> None:
    """Note an expected ``raises:<Class>`` string without a message pattern (the self-tests
    fail on any: see :func:`bare_raises`; import does not, so one module cannot stop discovery)."""
    if isinstance(value, str) and value.startswith("raises:"):
        _BARE.append(f"{where}: {value!r} names the class alone; write raises({value[7:]!r}, r'<message pattern>')")


def bare_raises() -> list[str]:
    """Every expectation of the imported case modules that names an error class without a
    message pattern (an error of that class for another reason would pass)."""
    return list(_BARE)


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
    id: str = ""  # module:index, how rows name the declaration they were held to

    def matches(self, runner) -> bool:
        """Does the declaration apply to ``runner`` (anything with framework, mode, device, version)?"""
        if self.framework and self.framework != runner.framework:
            return False
        if self.mode and runner.mode not in self.mode.split("|"):
            return False
        if self.device and runner.device != self.device:
            return False
        if self.versions:
            try:
                return vr.in_range(runner.version, self.versions)
            except vr.VersionError:  # an unreadable version of the framework: no range holds it
                return False
        return True

    @property
    def specificity(self) -> int:
        return sum(x is not None for x in (self.framework, self.mode, self.device, self.versions))

    def as_dict(self) -> dict:
        return {
            "key": self.key,
            "observed": self.observed.describe() if isinstance(self.observed, Raises) else self.observed,
            "framework": self.framework,
            "mode": self.mode,
            "device": self.device,
            "versions": self.versions,
            "reason": self.reason,
            "link": self.link,
            "module": self.module,
            "id": self.id,
        }


def expect(key: str, observed, *, framework=None, mode=None, device=None, versions=None, reason, link) -> Expectation:
    """A declared divergence. ``mode`` may list alternatives: ``"function|xla"``."""
    return _expect(key, observed, framework, mode, device, versions, reason, link, caller=sys._getframe(1))


def _expect(key, observed, framework, mode, device, versions, reason, link, *, caller) -> Expectation:
    if not reason or not link:
        raise ValueError(f"declared divergence for {key!r} needs a reason and a link")
    _check_not_bare_raises(observed, f"{caller.f_globals.get('__name__', '?')}: declared {key!r}")
    if versions:
        vr.check_range(versions)  # fail at import on a malformed range
    return Expectation(key, observed, framework, mode, device, versions, reason, link)


def expect_keys(keys, observed, *, over=None, framework=None, mode=None, device=None, versions=None, reason, link):
    """One declared divergence per key, with one answer, reason and link: ``keys`` is a list
    of keys, or one template expanded over the product of ``over``'s lists, in their order.

    >>> [e.key for e in expect_keys("grad:{api}[{c}]", "dropped", over={"api": ("sum", "max"), "c": ("above",
    ...  "below")}, reason="r", link="l")]
    ['grad:sum[above]', 'grad:sum[below]', 'grad:max[above]', 'grad:max[below]']
    """
    if over is not None:
        names = list(over)
        keys = [keys.format(**dict(zip(names, values))) for values in itertools.product(*over.values())]
    elif isinstance(keys, str):
        raise TypeError(f"expect_keys({keys!r}, ...): a list of keys, or a template with over={{name: values}}")
    caller = sys._getframe(1)
    return [_expect(k, observed, framework, mode, device, versions, reason, link, caller=caller) for k in keys]


def expect_each(key: str, *, mode=None, device=None, versions=None, **by_framework) -> list[Expectation]:
    """One declared divergence of ``key`` per framework, each with its own answer, reason and
    link: ``tensorflow=(observed, reason, link)``, ``jax=(...)``, ``torch=(...)``.

    >>> [(e.framework, e.observed) for e in expect_each("k", jax=("mean", "r", "l"), torch=("left", "r", "l"))]
    [('jax', 'mean'), ('torch', 'left')]
    """
    unknown = sorted(set(by_framework) - set(registry.NAMES))
    if unknown:
        raise ValueError(f"expect_each({key!r}): unknown framework(s) {unknown}; known: {list(registry.NAMES)}")
    caller = sys._getframe(1)
    return [
        _expect(key, observed, framework, mode, device, versions, reason, link, caller=caller)
        for framework, (observed, reason, link) in by_framework.items()
    ]


class Expectations:
    def __init__(self, defaults: dict, declared: list[Expectation], module: str, scope: str | None = None):
        """``scope``: what within the module the declarations belong to (an op-table entry), so
        that their ids stay unique when a module holds several such sets."""
        self.defaults = dict(defaults)
        for k, v in self.defaults.items():
            _check_not_bare_raises(v, f"{module}: expectation for {k!r}")
        self.declared = declared
        for i, e in enumerate(declared):
            e.module = module
            e.id = f"{module}:{i}" if scope is None else f"{module}:{scope}:{i}"
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
        return max(hits, key=lambda e: e.specificity).observed, max(hits, key=lambda e: e.specificity)


def expectations(defaults: dict, *declared: Expectation) -> Expectations:
    import sys

    return Expectations(defaults, list(declared), sys._getframe(1).f_globals.get("__name__", "?"))


def all_declared() -> list[Expectation]:
    return list(_ALL)
