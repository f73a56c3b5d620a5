"""TensorFlow and Keras deprecation warnings, recorded per behaviour (informational).

An upgrade check wants to know what the new release deprecates, so deprecations are not
filtered away: the report keeps, per behaviour, the deprecation messages its cases made
TensorFlow or Keras emit, and ``diff`` lists the new ones. They come two ways:

- Python warnings (``DeprecationWarning``, ``PendingDeprecationWarning``,
  ``FutureWarning``) raised from TensorFlow or Keras code, which pytest records per test;
- TensorFlow's own ``deprecation`` decorator, which logs through the ``tensorflow``
  logger instead, once per process per symbol; :func:`start_test` forgets what it
  printed, so each behaviour sees its own.

Messages are normalised (the caller's file and line dropped, first line only) so the
same deprecation reads the same in every checkout.

>>> normalise("From /x/y.py:12: calling foo (from tensorflow.python.ops) is deprecated\\nInstructions: ...")
'calling foo (from tensorflow.python.ops) is deprecated'
"""

from __future__ import annotations

import logging
import re

CATEGORIES = (DeprecationWarning, PendingDeprecationWarning, FutureWarning)
_OWNERS = re.compile(r"[/\\](tensorflow|tf_keras|keras)[/\\]")


def normalise(message: str) -> str:
    first = str(message).strip().splitlines()[0] if str(message).strip() else ""
    first = re.sub(r"^From \S+:\d+: ", "", first)
    return re.sub(r" at 0x[0-9a-f]+", "", first)[:300]


def from_framework(filename: str) -> bool:
    """A warning raised inside TensorFlow or Keras (not by the suite or a case)."""
    return bool(_OWNERS.search(filename or ""))


class Collector(logging.Filter):
    """Catches TensorFlow's logged deprecations for the test that is running; lets only
    errors through to the handlers (the suite keeps TensorFlow's console quiet)."""

    def __init__(self):
        super().__init__()
        self.current: str | None = None
        self.found: list[tuple[str, str]] = []  # (nodeid, message)

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            text = record.getMessage()
        except Exception:  # noqa: BLE001 - a malformed record must not break a test
            return record.levelno >= logging.ERROR
        if "deprecat" in text.lower() and self.current:
            self.found.append((self.current, normalise(text)))
        return record.levelno >= logging.ERROR

    def take(self) -> list[tuple[str, str]]:
        out, self.found = self.found, []
        return out


_collector: Collector | None = None


def install(tf_module) -> Collector:
    """Route TensorFlow's logger through one :class:`Collector` (idempotent)."""
    global _collector
    logger = tf_module.get_logger()
    if _collector is None:
        _collector = Collector()
    if _collector not in logger.filters:
        logger.addFilter(_collector)
    logger.setLevel(logging.WARNING)
    return _collector


def on_load(name: str, module) -> None:
    """The hook a session registers with ``frameworks.on_load``: TensorFlow's logger routed
    through the collector as soon as TensorFlow is imported (deprecations recorded per behaviour;
    the console shows errors only)."""
    if name == "tensorflow":
        install(module)


def start_test(nodeid: str) -> None:
    """Attribute what TensorFlow logs from now on to ``nodeid``, and let it log again the
    deprecations it already printed once in this process."""
    if _collector is None:
        return
    _collector.current = nodeid
    try:
        from tensorflow.python.util import deprecation

        deprecation._PRINTED_WARNING.clear()  # private: per-process "printed once" memory
    except (ImportError, AttributeError):
        pass


def take() -> list[tuple[str, str]]:
    return _collector.take() if _collector is not None else []
