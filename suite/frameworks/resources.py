"""Framework resources that live for one test: v1 Sessions, tf.data iterators, thread pools.

A v1 ``Session`` (with its ``IteratorResource`` and tf.data thread pools) that is still
open when the interpreter shuts down is destroyed inside ``Py_FinalizeEx``, where its
destructor waits for tf.data's autotune threads: measured, a finished run then sat for
minutes before exiting. So everything of the kind is registered here when it is made and
closed when the test that made it ends (the report plugin's ``_framework_resources``
fixture calls :func:`release`), and interpreter shutdown has nothing left to wait for.

Caches that hold such resources (compiled v1 graphs, a case's Sessions) are
:class:`PerTest` dicts: they serve every Hypothesis example of a test, so a graph is still
built once per test, and are emptied with the rest.

>>> from suite.frameworks import resources
>>> class Handle:
...     closed = False
...     def close(self): self.closed = True
>>> h = resources.track(Handle())
>>> resources.release()
1
>>> h.closed
True
"""

from __future__ import annotations

import weakref

_open: list = []
_caches: "weakref.WeakSet[PerTest]" = weakref.WeakSet()


def track(obj, close=None):
    """Close ``obj`` (``obj.close()``, or ``close()`` when given) when the current test ends;
    returns ``obj``. Resources are closed in reverse order of creation."""
    _open.append((obj, close or obj.close))
    return obj


class PerTest(dict):
    """A cache that is emptied when the current test ends (after its resources are closed)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        _caches.add(self)

    __hash__ = object.__hash__  # a WeakSet member (dicts are unhashable by default)


def pending() -> int:
    """How many resources are open now."""
    return len(_open)


def release() -> int:
    """Close every tracked resource (newest first) and empty every :class:`PerTest` cache.

    Returns how many resources were closed. A close that raises does not stop the others;
    the first error is raised after all were tried."""
    closed, first = 0, None
    while _open:
        _, close = _open.pop()
        try:
            close()
        except Exception as e:  # noqa: BLE001 - every resource must get its close
            first = first or e
        closed += 1
    for cache in list(_caches):
        cache.clear()
    if first is not None:
        raise first
    return closed
