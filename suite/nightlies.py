"""tf-nightly builds for ``autodiff-semantics bisect``: what the package index offers, and a
cached environment per build in which the suite probes it (:class:`Envs`).

A probe's environment is a virtual environment holding only the nightly and what it pulls in
(its Keras nightly pinned to the newest one published by the same day, so a probe of October
does not run November's Keras), on top of the running interpreter's site-packages (a ``.pth``
line appended after its own), where JAX, PyTorch, pytest and this suite come from: the oracles
and the suite are the same in every probe, only TensorFlow moves. The wheel is downloaded once
into ``<cache>/wheels`` and the environment kept in ``<cache>/envs/<version>``; both are bounded
(the least recently used go first), so a bisect that is resumed, or run again over other
reports, reuses what it installed. Each probe runs the asked rows with the ci profile, one
process, and its own persistent XLA cache directory (executables of one build are not loaded by
another).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import time
import urllib.request
import venv
from pathlib import Path

from suite.bisection import OUTCOME, Probe, ProbeError, nightly_date, pep440

INDEX = "https://pypi.org/pypi/{name}/json"
PTH = "_autodiff_semantics_base.pth"


def default_cache(environ=os.environ) -> Path:
    """``$XDG_CACHE_HOME/autodiff-semantics/bisect`` (or ``~/.cache/...``).

    >>> str(default_cache({"XDG_CACHE_HOME": "/x"}))
    '/x/autodiff-semantics/bisect'
    """
    base = environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "autodiff-semantics" / "bisect"


def _index(name: str, timeout: float = 60.0) -> dict:
    try:
        with urllib.request.urlopen(INDEX.format(name=name), timeout=timeout) as r:
            return json.load(r)
    except (OSError, ValueError) as e:
        raise ProbeError(f"cannot read the package index for {name} ({e})") from None


def installable(files) -> bool:
    """Does a release have a wheel this interpreter can install?"""
    from packaging.tags import sys_tags
    from packaging.utils import InvalidWheelFilename, parse_wheel_filename

    mine = set(sys_tags())
    for f in files:
        try:
            _, _, _, tags = parse_wheel_filename(f["filename"])
        except (InvalidWheelFilename, KeyError):
            continue
        if tags & mine:
            return True
    return False


def offered(name: str = "tf-nightly") -> list[str]:
    """The nightly versions the package index offers with a wheel for this machine."""
    releases = _index(name)["releases"]
    return [v for v, files in releases.items() if files and installable(files)]


def keras_for(version: str, releases: dict | None = None) -> str | None:
    """The newest keras-nightly uploaded no later than the day of tf-nightly ``version``.

    >>> rel = {"3.13.0.dev2026102503": [{"upload_time": "2026-10-25T03:00:00"}],
    ...        "3.13.0.dev2026102703": [{"upload_time": "2026-10-27T03:00:00"}]}
    >>> keras_for("2.23.0.dev20261026", rel)
    '3.13.0.dev2026102503'
    """
    if releases is None:
        try:
            releases = _index("keras-nightly")["releases"]
        except ProbeError:
            return None
    day = nightly_date(version)
    best = None
    for v, files in releases.items():
        times = [f.get("upload_time", "") for f in files]
        if times and max(times)[:10] <= day and (best is None or max(times) > best[0]):
            best = (max(times), v)
    return best and best[1]


class Envs:
    """The nightlies' wheels and environments under ``root``, at most ``keep_envs`` environments
    and ``keep_wheels`` wheels (least recently used removed first)."""

    def __init__(self, root, *, keep_envs: int = 2, keep_wheels: int = 4, python: str = sys.executable, out=print):
        self.root = Path(root)
        self.keep_envs, self.keep_wheels = keep_envs, keep_wheels
        self.python, self.out = python, out
        self.installed = 0  # environments made by this process

    def _pip(self, python, *args, timeout=1800):
        cmd = [str(python), "-m", "pip", "--disable-pip-version-check", "-q", *args]
        try:
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            raise ProbeError(f"pip {' '.join(args[:2])} took over {timeout} s") from None
        if done.returncode:
            tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
            raise ProbeError(f"pip {args[0]} failed: {' / '.join(tail)}")

    def wheel(self, version: str) -> Path:
        d = self.root / "wheels"
        d.mkdir(parents=True, exist_ok=True)
        found = sorted(d.glob(f"tf_nightly-{version}-*.whl"))
        if not found:
            self.out(f"downloading tf-nightly {version}")
            self._pip(
                self.python, "download", "--no-deps", "--only-binary", ":all:", "-d", str(d), f"tf-nightly=={version}"
            )
            found = sorted(d.glob(f"tf_nightly-{version}-*.whl"))
            if not found:
                raise ProbeError(f"no tf-nightly {version} wheel for this machine")
            _bound(d.glob("tf_nightly-*.whl"), self.keep_wheels)
        os.utime(found[0])
        return found[0]

    def env(self, version: str) -> Path:
        """The environment's python for ``version``, made if needed."""
        d = self.root / "envs" / version
        py = d / "bin" / "python"
        ready = d / ".ready"
        if not ready.exists():
            whl = self.wheel(version)
            shutil.rmtree(d, ignore_errors=True)
            self.out(f"installing tf-nightly {version} into {d}")
            venv.create(d, with_pip=True)
            extra = [f"keras-nightly=={k}"] if (k := keras_for(version)) else []
            self._pip(py, "install", str(whl), *extra)
            site = Path(
                subprocess.run(
                    [str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                    capture_output=True,
                    text=True,
                    check=True,
                ).stdout.strip()
            )
            base = sysconfig.get_paths()["purelib"]
            (site / PTH).write_text(f"import site; site.addsitedir({base!r})\n", encoding="utf-8")
            ready.write_text(version, encoding="utf-8")
            self.installed += 1
            _bound((p / ".ready" for p in (self.root / "envs").iterdir()), self.keep_envs, whole=True)
        os.utime(ready)
        return py

    def probe(self, version: str, tests, *, timeout: float = 3600) -> Probe:
        """Run ``tests`` (node ids) on tf-nightly ``version``: each row's observed keys and outcome."""
        try:
            py = self.env(version)
        except OSError as e:
            raise ProbeError(f"cannot make the environment ({e})") from None
        out = self.root / "runs" / version
        shutil.rmtree(out, ignore_errors=True)
        env = dict(os.environ)
        flags = env.get("TF_XLA_FLAGS", "")
        env["TF_XLA_FLAGS"] = f"{flags} --tf_xla_persistent_cache_directory={self.root / 'tf-xla' / version}".strip()
        cmd = [str(py), "-m", "suite", "run", "--profile", "ci", "--jobs", "1", "--report-dir", str(out), "--", *tests]
        start = time.monotonic()
        out.mkdir(parents=True, exist_ok=True)
        log = out / "probe.log"  # the run's own output, for a person to read when a probe fails
        try:
            with open(log, "w", encoding="utf-8") as f:
                subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, text=True, timeout=timeout, env=env)
        except subprocess.TimeoutExpired:
            raise ProbeError(f"its rows took over {timeout:.0f} s (its output: {log})") from None
        report = out / "latest.json"
        if not report.exists():
            raise ProbeError(f"the suite wrote no report (its output: {log})")
        r = json.loads(report.read_text(encoding="utf-8"))
        tf = r["environment"]["frameworks"].get("tensorflow", {})
        if pep440(str(tf.get("version", ""))) != version:
            raise ProbeError(
                f"the environment imported TensorFlow {tf.get('version') or tf.get('error')}, not {version}"
            )
        observed = {row["test"]: {**row.get("observed", {}), OUTCOME: row["outcome"]} for row in r["results"]}
        self.out(
            f"tf-nightly {version} ({nightly_date(version)}): {len(observed)} rows in {time.monotonic() - start:.0f} s"
        )
        return Probe(tf.get("git_version"), observed)


def _bound(markers, limit: int, *, whole: bool = False) -> None:
    """Remove all but the ``limit`` most recently used (by mtime) of ``markers`` (at least the
    newest one); ``whole``: a marker stands for its directory."""
    items = []
    for m in markers:
        try:
            items.append((m.stat().st_mtime, m))
        except OSError:
            continue
    items.sort(key=lambda e: e[0], reverse=True)
    for _, m in items[max(limit, 1) :]:
        if whole:
            shutil.rmtree(m.parent, ignore_errors=True)
        else:
            m.unlink(missing_ok=True)
