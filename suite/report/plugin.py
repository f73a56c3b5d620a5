"""The pytest plugin's namespace: what ``suite.plugin`` registers, one module a job.

- ``suite.report.profiles``: the Hypothesis profiles and the pinned constant pool;
- ``suite.report.fixtures``: ``subject``, ``oracles``, ``record`` and the per-test resources;
- ``suite.report.rows``: rows built where the cases run (outcome, record, reproducer) and the
  properties they travel on;
- ``suite.report.signals``: SIGINT/SIGTERM as an interrupt a case cannot swallow;
- ``suite.report.writer``: the streamed report, progress, and the report files at the end.

Rows stream to ``<report-dir>/latest.jsonl`` as tests finish (a header line first, a
footer line last), so an interrupted or crashed run keeps what it measured; at the end
``latest.json`` and ``latest.md`` are written and the terminal shows the matrix.
"""

from suite.report.fixtures import _framework_resources, oracles, record, subject  # noqa: F401 (pytest finds them here)
from suite.report.profiles import pin_constant_pool, register_profiles  # noqa: F401
from suite.report.rows import (  # noqa: F401
    DECLARED_PROPERTY,
    DEPRECATIONS_PROPERTY,
    DESELECTED_OUTPUT,
    ENVIRONMENT_PROPERTY,
    ROW_PROPERTY,
    RowMaker,
    environment_payload,
    failure_kind,
    make_row,
    measured_environment,
    outcome_of,
    rerun_command,
)
from suite.report.signals import _SIGNALLED, _raise_interrupt  # noqa: F401
from suite.report.writer import STALE_FAILS_IN, ReportWriter, is_device_skip, progress_line  # noqa: F401
