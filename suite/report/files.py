"""Report files on disk: the report directory, versioned copies, report paths.

>>> import tempfile, pathlib
>>> d = pathlib.Path(tempfile.mkdtemp()) / "reports"
>>> check_report_dir(d) == d and d.is_dir()
True
"""
from __future__ import annotations

import os
import tempfile
from pathlib import Path


class ReportDirError(ValueError):
    """A report directory that cannot be written; the message names the path and the problem."""


def check_report_dir(path) -> Path:
    """Create ``path`` if needed and prove a file can be written there, before any test runs.

    Raises :class:`ReportDirError` with one line: the path and what is wrong with it."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise ReportDirError(f"--report-dir {path}: is a file, not a directory")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        raise ReportDirError(f"--report-dir {path}: a parent of it is a file, not a directory") from None
    except OSError as e:
        raise ReportDirError(f"--report-dir {path}: cannot create it ({e.strerror or e})") from None
    try:
        fd, probe = tempfile.mkstemp(dir=path, prefix=".write-check-")
        os.close(fd)
        os.unlink(probe)
    except OSError as e:
        raise ReportDirError(f"--report-dir {path}: cannot write there ({e.strerror or e})") from None
    return path
