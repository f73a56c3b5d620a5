"""One version rule for the whole suite: declarations' ranges, report file names, ``upgrade``
and the version matrix. It does not depend on the installed ``packaging``: with packaging
26.4 ``>=2.16`` matched ``2.23.0.dev20261026`` and with 25.0 it did not (five false
failures on tf-nightly), and file names sorted ``2.23.0rc1`` after ``2.23.0``.

Order: within a release, dev < alpha < beta < rc < final < post, and a pre-release's own
dev builds come before it (``2.23.0rc1.dev5 < 2.23.0rc1``). TensorFlow's nightlies spell
their version ``2.23.0-dev20261026``; a local part (``+cpu``) is ignored.

A release line includes its pre-releases: a bound written without a pre-release part
stands for the first build of that release, so ``>=2.23`` holds for ``2.23.0.dev20261026``
(a nightly already behaves as 2.23 will) and ``<2.23`` does not.

>>> sorted(["2.23.0", "2.23.0rc1", "2.23.0-dev20261026", "2.21.0"], key=key)
['2.21.0', '2.23.0-dev20261026', '2.23.0rc1', '2.23.0']
>>> [in_range(v, ">=2.23") for v in ("2.22.1", "2.23.0.dev20261026", "2.23.0rc1", "2.23.0")]
[False, True, True, True]
>>> [in_range(v, "<2.23") for v in ("2.22.1", "2.23.0.dev20261026", "2.23.0rc1", "2.23.0")]
[True, False, False, False]
"""

from __future__ import annotations

import dataclasses
import functools
import re

_PRE = {"a": 1, "alpha": 1, "b": 2, "beta": 2, "c": 3, "rc": 3, "pre": 3, "preview": 3}
_FINAL = 9
_VERSION = re.compile(
    r"""^\s*v?
    (?P<release>\d+(?:\.\d+)*)
    (?:[-_.]?(?P<pre>alpha|beta|preview|pre|rc|a|b|c)[-_.]?(?P<pre_n>\d*))?
    (?:(?:-|[-_.]?post[-_.]?)(?P<post>\d+))?
    (?:[-_.]?dev[-_.]?(?P<dev>\d*))?
    (?:\+[a-z0-9.]+)?
    \s*$""",
    re.X | re.I,
)
_CLAUSE = re.compile(r"^\s*(>=|<=|==|!=|>|<|~=)\s*([^\s,]+)\s*$")


class VersionError(ValueError):
    """A version or a range this rule cannot read; the message quotes it."""


@dataclasses.dataclass(frozen=True, order=False)
class Release:
    release: tuple[int, ...]
    pre: tuple[int, int] | None  # (rank, number): a1 -> (1, 1), rc2 -> (3, 2)
    post: int | None
    dev: int | None

    @property
    def is_prerelease(self) -> bool:
        return self.pre is not None or self.dev is not None

    @property
    def line(self) -> tuple[int, int]:
        """The release line: ``2.23.0rc1`` -> (2, 23)."""
        return (self.release + (0, 0))[:2]

    def sort_key(self) -> tuple:
        rel = self.release + (0,) * (4 - len(self.release)) if len(self.release) < 4 else self.release
        if self.pre is None:
            phase = (0, 0) if self.dev is not None and self.post is None else (_FINAL, 0)
        else:
            phase = self.pre
        post = -1 if self.post is None else self.post
        dev = (0, self.dev) if self.dev is not None else (1, 0)
        return (rel, phase, post, dev)


def parse(text) -> Release:
    """Read a version string (``2.21.0``, ``2.23.0rc1``, ``2.23.0-dev20261026``, ``2.13.0+cpu``).

    >>> parse("2.23.0-dev20261026")
    Release(release=(2, 23, 0), pre=None, post=None, dev=20261026)
    """
    m = _VERSION.match(str(text))
    if not m:
        raise VersionError(f"not a version: {text!r}")
    pre = (_PRE[m["pre"].lower()], int(m["pre_n"] or 0)) if m["pre"] else None
    return Release(
        release=tuple(int(x) for x in m["release"].split(".")),
        pre=pre,
        post=int(m["post"]) if m["post"] else None,
        dev=int(m["dev"] or 0) if m["dev"] is not None else None,
    )


def key(text) -> tuple:
    """Sort key of a version string (see the module's order)."""
    return parse(text).sort_key()


def _first_build(v: Release) -> tuple:
    """A bound without a pre-release part stands for the first build of that release."""
    if v.is_prerelease or v.post is not None:
        return v.sort_key()
    return Release(v.release, None, None, 0).sort_key()


def _clause(version: Release, op: str, bound: str) -> bool:
    if bound.endswith(".*"):
        prefix = parse(bound[:-2]).release
        hit = (version.release + (0,) * len(prefix))[: len(prefix)] == prefix
        return hit if op == "==" else not hit
    b = parse(bound)
    v = version.sort_key()
    if op == ">=":
        return v >= _first_build(b)
    if op == "<":
        return v < _first_build(b)
    if op == "<=":
        return v <= b.sort_key()
    if op == ">":
        return v > b.sort_key()
    if op == "~=":
        prefix = b.release[:-1]
        return v >= _first_build(b) and (version.release + (0,) * len(prefix))[: len(prefix)] == prefix
    same = v == b.sort_key()
    return same if op == "==" else not same


def check_range(spec: str) -> None:
    """Raise :class:`VersionError` on a range this rule cannot read (at import of a case)."""
    for part in spec.split(","):
        m = _CLAUSE.match(part)
        if not m:
            raise VersionError(f"not a version range: {spec!r} (clause {part.strip()!r})")
        op, bound = m[1], m[2]
        if bound.endswith(".*") and op not in ("==", "!="):
            raise VersionError(f"not a version range: {spec!r} (a wildcard only goes with == or !=)")
        v = parse(bound[:-2] if bound.endswith(".*") else bound)
        if op == "~=" and len(v.release) < 2:
            raise VersionError(f"not a version range: {spec!r} (~= needs at least two release numbers)")


@functools.lru_cache(maxsize=4096)
def in_range(version, spec: str) -> bool:
    """Does ``version`` fall in ``spec`` (clauses like ``>=2.18,<2.21`` joined by commas)?

    >>> in_range("2.21.0", ">=2.18,<2.21"), in_range("2.20.0+cpu", ">=2.18,<2.21")
    (False, True)
    >>> in_range("0.4.30", "<=0.4.30"), in_range("2.12.1", "==2.12.*")
    (True, True)
    """
    check_range(spec)
    v = parse(version)
    return all(_clause(v, m[1], m[2]) for m in (_CLAUSE.match(p) for p in spec.split(",")))


def of_report_name(path) -> str | None:
    """The version in a report file's name: ``reports/nightly/tf-2.23.0-dev20261026.json`` ->
    ``2.23.0-dev20261026`` (None when the name has none).

    >>> of_report_name("tf-2.21.0.junit.xml"), of_report_name("latest.json")
    ('2.21.0', None)
    """
    name = str(path).replace("\\", "/").rsplit("/", 1)[-1]
    m = re.match(r"^tf-(.+?)(?:\.junit\.xml|\.jsonl|\.json|\.md|\.html)?$", name)
    if not m:
        return None
    try:
        parse(m[1])
    except VersionError:
        return None
    return m[1]


def label(text) -> str:
    """A version for people and file names as TensorFlow prints it (``2.23.0-dev20261026``),
    without a local part."""
    return str(text).split("+", 1)[0]
