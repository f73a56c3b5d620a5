"""Signals the run received (the handler that turns SIGINT and SIGTERM into a
KeyboardInterrupt, and the list a swallowed one is still found in)."""

from __future__ import annotations

import signal

#: Signals this process received. A KeyboardInterrupt raised by the handler can be swallowed
#: where it lands (framework C++ boundaries turn a Python error in a callback into an error
#: status, which a case may then record as an observation); the run still stops after the
#: case and ends as interrupted.
_SIGNALLED: list[int] = []


def _raise_interrupt(signum, frame):
    """The first signal interrupts the run; later ones (Ctrl-C pressed again while the run
    writes its partial report) are noted and change nothing: a second KeyboardInterrupt in
    the middle of writing the report printed a long traceback and could lose the report."""
    _SIGNALLED.append(signum)
    if len(_SIGNALLED) == 1:
        raise KeyboardInterrupt(f"signal {signal.Signals(signum).name}")
