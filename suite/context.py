"""The run context, made once per pytest process (``pytest_configure``) and passed on: which
role this process has in the run, its shard, profile and seed. The rest of the suite asks it
instead of probing pytest-xdist's and pytest-split's attributes.

>>> from types import SimpleNamespace
>>> opts = {"splits": 4, "group": 2, "profile": "ci", "hypothesis_seed": None}
>>> get = lambda k, default=None: opts.get(k, default)
>>> cfg = SimpleNamespace(option=SimpleNamespace(numprocesses=2), getoption=get)
>>> RunContext.of(cfg)
RunContext(role='controller', workers=2, worker_index=None, shard='2/4', profile='ci', seed=None)
"""

from __future__ import annotations

import dataclasses

#: roles: one pytest process runs everything (serial), or an xdist controller hands the cases
#: to its workers, which run them
ROLES = ("serial", "controller", "worker")


@dataclasses.dataclass(frozen=True)
class RunContext:
    role: str
    workers: int | None  # pytest-xdist workers of the run (run --jobs N), None when serial
    worker_index: int | None  # this worker's index (gw3 -> 3)
    shard: str | None  # pytest-split's "i/n" (run --shard i/n)
    profile: str  # the profile asked for (the loaded one may be ci-seeded)
    seed: object

    @property
    def runs_cases(self) -> bool:
        return self.role in ("serial", "worker")

    @property
    def writes_report(self) -> bool:
        return self.role in ("serial", "controller")

    @classmethod
    def of(cls, config) -> "RunContext":
        worker = getattr(config, "workerinput", None)
        workers = getattr(getattr(config, "option", None), "numprocesses", None)
        if worker is not None:
            role, n = "worker", int(worker.get("workercount") or 0) or None
            index = int(str(worker.get("workerid", "gw0"))[2:] or 0)
        else:
            role, n, index = ("controller" if workers else "serial"), (workers or None), None
        splits = config.getoption("splits", None)
        return cls(
            role=role,
            workers=n,
            worker_index=index,
            shard=f"{config.getoption('group', None)}/{splits}" if splits else None,
            profile=config.getoption("profile", None) or "dev",
            seed=config.getoption("hypothesis_seed", None),
        )


def of(config) -> RunContext:
    """The context of ``config``'s process (made once, at configure)."""
    ctx = getattr(config, "_adsem_context", None)
    if ctx is None:
        ctx = config._adsem_context = RunContext.of(config)
    return ctx
