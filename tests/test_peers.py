"""Self-tests of ``suite.peers``: peers answer, fail clearly, time out within the bound, and leave no
process behind: after close(), and after the pytest run that started them is interrupted."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from suite import peers as pr

ROOT = Path(__file__).resolve().parent.parent


def _alive(pid: int) -> bool:
    """Is ``pid`` a live process (not a zombie)?"""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError):
        return False


def _marked(tag: str) -> list[int]:
    """Live processes whose command line carries ``tag``."""
    found = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/cmdline", "rb") as f:
                cmd = f.read()
        except OSError:
            continue
        if tag.encode() in cmd and int(d) != os.getpid() and _alive(int(d)):
            found.append(int(d))
    return found


def _until(condition, within: float = 10.0) -> bool:
    """Poll ``condition()`` until it holds or ``within`` seconds pass."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return bool(condition())


def _gone(pids, within: float = 10.0) -> bool:
    """Whether every process of ``pids`` has exited within ``within`` seconds."""
    return _until(lambda: not any(_alive(p) for p in pids), within)


pytestmark = pytest.mark.skipif(not os.path.isdir("/proc"), reason="the checks read /proc (Linux)")


def test_peers_answer_in_rank_order_and_close_leaves_nothing():
    """Two peers answer each request in rank order; a handler's error is a PeerFailure naming the peer,
    and the peer lives on; close() kills the peers and a child one of them started."""
    with pr.PeerGroup("echo", "suite.peers:echo", size=2) as g:
        assert g.request({"x": 1}) == [{"rank": 0, "x": 1}, {"rank": 1, "x": 1}]
        assert g.request([{"x": 2}, {"x": 3}]) == [{"rank": 0, "x": 2}, {"rank": 1, "x": 3}]
        with pytest.raises(pr.PeerFailure, match=r"peer echo\[0\] .* raised ValueError during 'request': boom"):
            g.request({"raise": "boom"})
        children = [a["child"] for a in g.request({"spawn": True})]
        pids = g.pids
        assert all(_alive(p) for p in pids + children)
    assert g.closed
    assert _gone(pids + children), f"left behind: {[p for p in pids + children if _alive(p)]}"


def test_a_refusal_crosses_as_the_observation_with_its_message():
    """A peer's error sent as its answer (``cmp.remote``) arrives as ``raises:<Name>`` with the message, so
    that a declared ``raises(...)`` matches it as it would an error raised in this process."""
    from suite.compare import Raised
    from suite.expectations import raises

    with pr.PeerGroup("refuse", "suite.peers:echo", size=1) as g:
        (answer,) = g.request({"refuse": "SyncBatchNorm expected input tensor to be on GPU"})
    got = answer["refused"]
    assert isinstance(got, Raised) and got == "raises:ValueError"
    assert got.message == "SyncBatchNorm expected input tensor to be on GPU"
    assert raises("ValueError", r"to be on GPU").matches(got)
    assert not raises("ValueError", r"on the CPU").matches(got)
    assert not raises("RuntimeError", r"to be on GPU").matches(got)


def test_a_stuck_peer_times_out_with_a_clear_message():
    """A peer that does not answer within the deadline: PeerTimeout within the bound, naming the peer and
    the request and ending with its stderr; the group is killed and a later request fails at once."""
    g = pr.PeerGroup("stuck", "suite.peers:echo", size=2)
    pids = g.pids
    t = time.monotonic()
    with pytest.raises(pr.PeerTimeout, match=r"peer stuck\[0\] \(pid \d+\) gave no answer to 'nap' within 1 s"):
        g.request({"op": "nap", "sleep": 30}, timeout=1)
    assert time.monotonic() - t < 5
    assert _gone(pids)
    with pytest.raises(pr.PeerError, match="peer group stuck is gone: .*gave no answer"):
        g.request({"x": 1})


def test_a_peer_that_cannot_start_says_why():
    """A factory that raises: the start fails with its error, and nothing is left."""
    with pytest.raises(pr.PeerFailure, match=r"raised ModuleNotFoundError during 'start'"):
        pr.PeerGroup("absent", "suite.no_such_module:factory")
    assert not _marked("suite.no_such_module")


def test_free_ports_are_distinct_loopback_ports():
    ports = pr.free_ports(4)
    assert len(set(ports)) == 4 and all(0 < p < 65536 for p in ports)


_RUN = textwrap.dedent(
    """
    import sys, time
    from suite import peers as pr

    def test_hold():
        g = pr.PeerGroup("{tag}", "suite.peers:echo", size=2)
        children = [a["child"] for a in g.request({{"spawn": True}})]
        print("READY", " ".join(map(str, g.pids)), "/", " ".join(map(str, children)), flush=True)
        sys.stdout.flush()
        time.sleep(120)
    """
)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGKILL], ids=lambda s: s.name)
def test_interrupted_run_leaves_no_peer(tmp_path, sig):
    """A pytest run whose test started peers (and a peer's child) and is then sent SIGINT, SIGTERM or
    SIGKILL: no process of the peers outlives it (fixtures and atexit on SIGINT, the signal safety net
    on SIGTERM, the peers' parent-death signal on SIGKILL; the child dies with its peer's group on the
    first two)."""
    tag = f"hold{sig.name}{os.getpid()}"
    (tmp_path / "test_hold.py").write_text(_RUN.format(tag=tag))
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider", str(tmp_path / "test_hold.py")],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    peers: list[int] = []
    children: list[int] = []
    try:
        deadline = time.monotonic() + 60
        line = b""
        while b"READY" not in line and time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line and proc.poll() is not None:
                break
        assert b"READY" in line, "the inner run never started its peers"
        # The inner test names its peers and their children (scanning /proc for them raced under load).
        said = line.decode().split("READY", 1)[1].split("/")
        peers, children = [[int(x) for x in part.split()] for part in said]
        assert len(peers) == 2 and len(children) == 2, line
        assert all(_parent(p) == proc.pid and "suite.peers" in _cmdline(p) for p in peers), peers
        # Right after Popen returns, a child's /proc/<pid>/cmdline can still read empty (CI saw it: alive,
        # its parent the peer, no command line yet): wait for the exec to show before reading it.
        assert _until(lambda: all(_alive(p) and "sleep(600)" in _cmdline(p) for p in children)), [
            (p, _alive(p), _parent(p), _cmdline(p)) for p in children
        ]
        proc.send_signal(sig)
        proc.wait(timeout=30)
        assert _gone(peers, within=30), f"peers outlived the run: {[p for p in peers if _alive(p)]}"
        if sig != signal.SIGKILL:  # a peer's own child dies with its process group
            assert _gone(children, within=30), f"a peer's child outlived the run: {[p for p in children if _alive(p)]}"
    finally:
        for p in children:  # SIGKILL: the parent-death signal reaches the peers, not their children
            if _alive(p):
                os.kill(p, signal.SIGKILL)
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def _parent(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError):
        return -1


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def test_lazy_groups_start_on_first_use_once_per_key_and_all_close():
    made, closed = [], []

    class Group:
        def __init__(self, key):
            self.key = key
            made.append(key)

        def close(self):
            closed.append(self.key)

    with pytest.raises(RuntimeError, match="a failing row"):
        with pr.lazy_groups(Group) as get:
            assert made == []  # nothing started before a row asks
            a, b, a2 = get("cpu"), get("gpu"), get("cpu")
            assert a is a2 and a.key == "cpu" and b.key == "gpu" and made == ["cpu", "gpu"]
            raise RuntimeError("a failing row")
    assert sorted(closed) == ["cpu", "gpu"]  # closed also when the block fails
