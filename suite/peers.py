"""Peer processes: a group of long-lived Python processes that a case serves requests to.

What a pytest process cannot set up in itself once TensorFlow, JAX and PyTorch are loaded (logical
devices, ``XLA_FLAGS``, ``TF_CONFIG``, a process group) runs in peers: each is started once per
module, imports its framework with its own environment, and answers many Hypothesis examples over a
pipe (pickled requests and answers, length-prefixed, on a pair of pipes of their own: whatever a
framework prints to stdout cannot corrupt them). A peer is ``python -m suite.peers
MODULE:FACTORY``; ``FACTORY(rank, size, config)`` returns the function that answers one request.

Bounded and clean, whatever happens to the run:

- every request has a deadline; a peer that misses it (a collective waiting for a dead partner)
  gets :class:`PeerTimeout`, naming the peer and ending with its stderr, and its whole group is
  killed, so a stuck peer fails the row instead of hanging the run;
- each peer is the leader of its own session (its own process group): :meth:`PeerGroup.close`
  kills the groups, and a peer's own children with it;
- a peer dies with its parent (Linux ``PR_SET_PDEATHSIG``) and when its request pipe closes; the
  parent kills every live group at exit (``atexit``) and on SIGTERM/SIGHUP before the handler that
  was there runs.

>>> with PeerGroup("echo", "suite.peers:echo", size=2) as g:   # doctest: +SKIP
...     g.request({"x": 1})
[{'rank': 0, 'x': 1}, {'rank': 1, 'x': 1}]
"""

from __future__ import annotations

import atexit
import contextlib
import os
import pickle
import select
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from pathlib import Path

import numpy as np

from suite import compare as cmp

#: Every peer's command line carries this, so a check can find leftovers (``ps -ef | grep``).
MARKER = "adsem-peer"
#: Seconds a group may take to import its framework and answer that it is ready.
START_TIMEOUT = 180.0
#: Seconds one request may take by default.
REQUEST_TIMEOUT = 60.0
_HEADER = struct.Struct("!Q")


class PeerError(RuntimeError):
    """A peer failed: it exited, or (``PeerFailure``, ``PeerTimeout``) raised or did not answer."""


class PeerFailure(PeerError):
    """The peer's handler raised; ``error`` is the class name, ``remote`` the message (the peer lives on)."""

    def __init__(self, message: str, *, error: str, remote: str):
        super().__init__(message)
        self.error, self.remote = error, remote


class PeerTimeout(PeerError):
    """A peer did not answer within its deadline (its group is killed)."""


def free_ports(n: int) -> list[int]:
    """``n`` distinct free TCP ports on 127.0.0.1, from binding port 0 (all bound at once, so they
    differ; another process could take one before the peer binds it: unlikely, not impossible)."""
    socks = []
    try:
        for _ in range(n):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def _pythonpath() -> str:
    """The directory holding ``suite`` (and ``cases``), first on the peers' path."""
    root = str(Path(__file__).resolve().parent.parent)
    rest = os.environ.get("PYTHONPATH", "")
    return root + (os.pathsep + rest if rest else "")


# ---------------------------------------------------------------- framing
def _write(fd: int, obj) -> None:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    view = memoryview(_HEADER.pack(len(data)) + data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def _read_exact(fd: int, n: int, deadline: float | None) -> bytes | None:
    """``n`` bytes from ``fd``; None at end of file; TimeoutError past ``deadline``."""
    chunks, got = [], 0
    while got < n:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise TimeoutError
        chunk = os.read(fd, min(n - got, 1 << 20))
        if not chunk:
            return None
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def _read(fd: int, deadline: float | None):
    head = _read_exact(fd, _HEADER.size, deadline)
    if head is None:
        raise EOFError
    body = _read_exact(fd, _HEADER.unpack(head)[0], deadline)
    if body is None:
        raise EOFError
    return pickle.loads(body)


# ---------------------------------------------------------------- the parent's side
_LIVE: "weakref.WeakSet[PeerGroup]" = weakref.WeakSet()
_NET = {"installed": False}


def kill_all() -> None:
    """Kill every live peer group of this process (the safety net's action)."""
    for g in list(_LIVE):
        g.close()


def _install_safety_net() -> None:
    """atexit, and SIGTERM/SIGHUP: kill the peers, then whatever handler was there (the default
    one: die of the signal). SIGINT needs none: it raises KeyboardInterrupt, fixtures close their
    groups and atexit runs. Only from the main thread (where signal handlers are set)."""
    if _NET["installed"]:
        return
    _NET["installed"] = True
    atexit.register(kill_all)
    if threading.current_thread() is not threading.main_thread():
        return
    for sig in (signal.SIGTERM, signal.SIGHUP):
        previous = signal.getsignal(sig)

        def handler(signum, frame, previous=previous):
            kill_all()
            if callable(previous):
                return previous(signum, frame)
            if previous == signal.SIG_IGN:
                return None
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)
            return None

        signal.signal(sig, handler)


class _Peer:
    def __init__(self, name: str, rank: int, proc, req_w: int, resp_r: int, stderr_path: str):
        self.name, self.rank, self.proc = name, rank, proc
        self.req_w, self.resp_r, self.stderr_path = req_w, resp_r, stderr_path

    @property
    def label(self) -> str:
        return f"peer {self.name}[{self.rank}] (pid {self.proc.pid})"

    def stderr_tail(self, chars: int = 2000) -> str:
        try:
            with open(self.stderr_path, "rb") as f:
                f.seek(0, os.SEEK_END)
                f.seek(max(0, f.tell() - chars))
                return f.read().decode("utf-8", "replace").strip()
        except OSError:
            return ""


class PeerGroup:
    """``size`` peers running ``target`` (``"module:factory"``) with ``env`` added to this process's
    environment (a value None removes the variable); ``configs``: one picklable config per rank (or one
    for all). Started at once; :meth:`request` sends a request to every peer and returns their answers
    in rank order."""

    def __init__(
        self,
        name: str,
        target: str,
        *,
        size: int = 1,
        env: dict | None = None,
        configs=None,
        start_timeout: float = START_TIMEOUT,
        timeout: float = REQUEST_TIMEOUT,
    ):
        self.name, self.target, self.size, self.timeout = name, target, size, timeout
        self.peers: list[_Peer] = []
        self.broken: str | None = None
        self.closed = False
        _install_safety_net()
        configs = configs if isinstance(configs, (list, tuple)) else [configs] * size
        full_env = {**os.environ, **(env or {}), "PYTHONPATH": _pythonpath(), "PYTHONUNBUFFERED": "1"}
        full_env = {k: v for k, v in full_env.items() if v is not None}  # env={"VAR": None} removes VAR
        _LIVE.add(self)
        try:
            for rank in range(size):
                self.peers.append(self._spawn(rank, full_env))
            deadline = time.monotonic() + start_timeout
            for p in self.peers:
                _write(p.req_w, {"rank": p.rank, "size": size, "config": configs[p.rank]})
            self._collect("start", deadline, start_timeout)
        except BaseException:
            self.close()
            raise

    def _spawn(self, rank: int, env: dict) -> _Peer:
        req_r, req_w = os.pipe()
        resp_r, resp_w = os.pipe()
        err = tempfile.NamedTemporaryFile(prefix=f"{MARKER}-{self.name}-{rank}-", suffix=".log", delete=False)
        try:
            proc = subprocess.Popen(
                [sys.executable, "-m", "suite.peers", self.target, str(req_r), str(resp_w), str(os.getpid()), MARKER],
                env={**env, "ADSEM_PEER_RANK": str(rank)},
                stdin=subprocess.DEVNULL,
                stdout=err,
                stderr=err,
                pass_fds=(req_r, resp_w),
                start_new_session=True,  # its own process group: close() kills it and its children
                close_fds=True,
            )
        finally:
            os.close(req_r)
            os.close(resp_w)
            err.close()
        os.set_inheritable(req_w, False)
        os.set_inheritable(resp_r, False)
        return _Peer(self.name, rank, proc, req_w, resp_r, err.name)

    @property
    def pids(self) -> list[int]:
        return [p.proc.pid for p in self.peers]

    def request(self, payload, *, timeout: float | None = None) -> list:
        """Send ``payload`` (or ``payload[rank]`` when it is a list) to every peer; their answers in
        rank order. A peer's handler that raised: :class:`PeerFailure` (the group lives on); a peer
        that exited or missed the deadline: :class:`PeerError`/:class:`PeerTimeout`, and the group is
        killed (a later request raises at once with the first cause)."""
        __tracebackhide__ = True
        if self.broken:
            raise PeerError(f"peer group {self.name} is gone: {self.broken}")
        timeout = self.timeout if timeout is None else timeout
        deadline = time.monotonic() + timeout
        for p in self.peers:
            try:
                _write(p.req_w, payload[p.rank] if isinstance(payload, list) else payload)
            except OSError as e:
                self._fail(PeerError, f"{p.label} cannot take a request ({e}); it exited with {p.proc.poll()}", p)
        return self._collect(
            payload.get("op", "request") if isinstance(payload, dict) else "request", deadline, timeout
        )

    def _collect(self, what: str, deadline: float, timeout: float) -> list:
        answers, failure = [], None
        for p in self.peers:
            try:
                status, value = _read(p.resp_r, deadline)
            except TimeoutError:
                self._fail(PeerTimeout, f"{p.label} gave no answer to {what!r} within {timeout:.0f} s", p)
            except (EOFError, OSError, pickle.UnpicklingError) as e:
                code = p.proc.wait(timeout=5) if p.proc.poll() is None else p.proc.returncode
                self._fail(PeerError, f"{p.label} exited (code {code}) during {what!r} ({type(e).__name__})", p)
            if status == "ok":
                answers.append(value)
            elif failure is None:
                error, remote, tb = value
                failure = PeerFailure(
                    f"{p.label} raised {error} during {what!r}: {remote}\n{tb}", error=error, remote=remote
                )
        if failure is not None:
            raise failure
        return answers

    def _fail(self, cls, message: str, peer: _Peer):
        __tracebackhide__ = True
        tail = peer.stderr_tail()
        self.broken = message
        self.close()
        raise cls(f"{message}; its group was killed. Its stderr ends:\n{tail}" if tail else f"{message}; killed")

    def close(self) -> None:
        """Kill every peer's process group and reap it; close the pipes; remove the logs. Idempotent."""
        if self.closed:
            return
        self.closed = True
        for p in self.peers:
            try:
                os.killpg(p.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        for p in self.peers:
            try:
                p.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:  # pragma: no cover - SIGKILL does not wait for us
                pass
            for fd in (p.req_w, p.resp_r):
                try:
                    os.close(fd)
                except OSError:
                    pass
            try:
                os.unlink(p.stderr_path)
            except OSError:
                pass
        _LIVE.discard(self)

    def __enter__(self) -> "PeerGroup":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self):  # pragma: no cover - a group nobody closed
        try:
            self.close()
        except Exception:
            pass


@contextlib.contextmanager
def lazy_groups(make):
    """``get(key)``: the peer group ``make(key)`` for that key, started on first use (a row that
    never asks starts nothing), all closed when the block ends. For a module fixture::

        with peers.lazy_groups(lambda device: peers.PeerGroup(...)) as get:
            yield lambda subject: get(subject.device)
    """
    groups: dict = {}

    def get(key):
        if key not in groups:
            groups[key] = make(key)
        return groups[key]

    try:
        yield get
    finally:
        for g in groups.values():
            g.close()


class Engines:
    """Named peer groups of a case module, each made by ``make(name)`` on first use and closed
    with :meth:`close` (a module fixture's teardown); one that does not start is noted on the
    rows that would have asked it, not failed. ``ask`` stacks a multi-process group's answers
    on the leading axis (:func:`stack`)::

        engines = peers.Engines(lambda name: peers.PeerGroup(name, "cases._my_peers:" + name))
        if engines.available("jax", record):
            answer = engines.ask("jax", mode="jit", op="grads", x=x)
    """

    def __init__(self, make):
        self.make, self.groups, self.broken = make, {}, {}

    def available(self, name: str, record) -> bool:
        """Whether the engine ``name`` starts; if not, the reason is noted on the row (once a module)."""
        if name not in self.broken:
            try:
                self.group(name)
                self.broken[name] = None
            except PeerError as e:
                self.broken[name] = " ".join(str(e).split())[:200]
        if self.broken[name]:
            record.note(f"{name} not cross-checked: it does not start here ({self.broken[name]})")
        return not self.broken[name]

    def group(self, name: str) -> "PeerGroup":
        if name not in self.groups:
            self.groups[name] = self.make(name)
        return self.groups[name]

    def ask(self, name: str, **request) -> object:
        """One answer: the group's only one, or its ranks' answers stacked."""
        answers = self.group(name).request(request)
        return answers[0] if len(answers) == 1 else stack(answers)

    def close(self) -> None:
        for g in self.groups.values():
            g.close()


def stack(answers: list):
    """The ranks' answers as one: arrays concatenated on the replica axis (``one_device`` is every
    rank's own, the same: the first), lists joined, dicts merged key by key, anything else the first.

    >>> stack([{"g": np.ones(1), "one_device": 1}, {"g": np.zeros(1), "one_device": 1}])
    {'g': array([1., 0.]), 'one_device': 1}
    """
    first = answers[0]
    if isinstance(first, dict):
        return {k: first[k] if k == "one_device" else stack([a[k] for a in answers]) for k in first}
    if isinstance(first, np.ndarray):
        return np.concatenate(answers)
    if isinstance(first, list):
        return [x for a in answers for x in a]
    return first


# ---------------------------------------------------------------- the peer's side
def _die_with_parent(parent: int) -> None:
    """SIGKILL when the parent dies (Linux); exit now if it already has."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # not Linux: the closed request pipe still ends the peer
        pass
    if os.getppid() != parent:
        os._exit(1)


def _load(target: str):
    import importlib

    module, _, attr = target.partition(":")
    return getattr(importlib.import_module(module), attr)


def serve(target: str, req_r: int, resp_w: int, parent: int) -> None:
    """The peer's loop: a start message, then one answer per request until the pipe closes."""
    import traceback

    _die_with_parent(parent)
    try:
        start = _read(req_r, None)
    except EOFError:
        return
    try:
        handler = _load(target)(start["rank"], start["size"], start["config"])
    except BaseException as e:
        _write(resp_w, ("error", (type(e).__name__, str(e), traceback.format_exc()[-4000:])))
        return
    _write(resp_w, ("ok", "ready"))
    while True:
        try:
            req = _read(req_r, None)
        except EOFError:
            return
        try:
            out = ("ok", handler(req))
        except Exception as e:  # the observation travels back; the peer lives on
            out = ("error", (type(e).__name__, str(e), traceback.format_exc()[-4000:]))
        _write(resp_w, out)


def echo(rank: int, size: int, config):
    """A factory for self-tests: answers ``{"rank": rank, **request}``; ``{"sleep": s}`` sleeps first;
    ``{"raise": msg}`` raises ValueError(msg); ``{"refuse": msg}`` answers ValueError(msg) as an
    observation (:func:`suite.compare.remote`: a refusal that is the answer, as a case's peer sends
    it); ``{"spawn": True}`` starts a child that sleeps and answers its pid."""

    def handle(req):
        if "sleep" in req:
            time.sleep(req["sleep"])
        if "raise" in req:
            raise ValueError(req["raise"])
        if "refuse" in req:
            return {"rank": rank, "refused": cmp.remote(ValueError(req["refuse"]))}
        if req.get("spawn"):
            child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)", MARKER])
            return {"rank": rank, "child": child.pid}
        return {"rank": rank, **req}

    return handle


if __name__ == "__main__":
    serve(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]))
