"""A case that kills its pytest-xdist worker must neither run again nor strand the rest of a
parallel run. Simulated: the scheduler against workers that behave as pytest-xdist's do (a
worker runs a test once it holds the next one, or once it is told to stop; the controller
tells every worker to stop once the scheduler says the tests are finished)."""

from types import SimpleNamespace

import pytest

xdist_scheduler = pytest.importorskip("xdist.scheduler")

from suite.scheduling import CrashSafeLoadFile  # noqa: E402

#: Three modules; their sizes order xdist's queue (largest first): m1 to gw0, m2 to gw1, m3 queued.
COLLECTION = [f"m{m}.py::t{i}" for m, n in ((1, 4), (2, 3), (3, 2)) for i in range(n)]


class Worker:
    def __init__(self, name):
        self.name, self.queue, self.shutting_down = name, [], False
        self.gateway = SimpleNamespace(id=name)

    def send_runtest_some(self, indices):
        self.queue += indices

    def shutdown(self):
        self.shutting_down = True

    def can_run(self):
        return len(self.queue) >= 2 or (self.shutting_down and self.queue)

    def __repr__(self):
        return self.name


def simulate(scheduler_class, crash, script):
    """Run COLLECTION on two workers; ``crash`` kills the worker that runs it (a new one takes
    its place); ``script`` names which worker takes each of the first steps. Returns the tests
    run, the crashed ones, and the tests left when no worker could go on."""
    config = SimpleNamespace(getvalue=lambda name: ["2*popen"], option=SimpleNamespace(loadscopereorder=True))
    sched = scheduler_class(config)
    workers = []

    def start(name):
        w = Worker(name)
        workers.append(w)
        sched.add_node(w)
        sched.add_node_collection(w, COLLECTION)
        return w

    start("gw0"), start("gw1")
    sched.schedule()
    ran, crashed = [], []
    script = list(script)
    while True:
        if sched.tests_finished:  # as xdist's controller does after every event
            for w in workers:
                w.shutdown()
        live = [w for w in workers if w.can_run()]
        if not live:
            break
        named = [w for w in live if script and w.name == script[0]]
        w = named[0] if named else live[0]
        if named:
            script.pop(0)
        test = COLLECTION[w.queue.pop(0)]
        if test == crash:
            workers.remove(w)
            crashed.append(sched.remove_node(w))
            start(f"gw{len(workers) + len(crashed)}")
            sched.schedule()
            continue
        ran.append(test)
        sched.mark_test_complete(w, COLLECTION.index(test))
        if w.shutting_down and not w.queue:
            workers.remove(w)
            assert sched.remove_node(w) is None
    left = [COLLECTION[i] for w in workers for i in w.queue] + [t for u in sched.workqueue.values() for t in u]
    return ran, crashed, left


#: gw1 runs m2's first test (and is handed m3), gw0 runs m1 to its end and stops (the queue is
#: empty), then gw1 dies in m2's last test while it holds m3.
SCRIPT = ["gw1", "gw0", "gw0", "gw0", "gw0", "gw1"]


def test_a_worker_that_dies_at_the_end_of_a_module_strands_nothing():
    ran, crashed, left = simulate(CrashSafeLoadFile, "m2.py::t2", SCRIPT)
    assert crashed == ["m2.py::t2"] and left == []
    assert sorted(ran) == sorted(t for t in COLLECTION if t != "m2.py::t2"), "each other test once"


@pytest.mark.parametrize("crash", COLLECTION)
def test_wherever_a_worker_dies_the_rest_runs_once(crash):
    for script in ([], SCRIPT, ["gw1"] * 4):
        ran, crashed, left = simulate(CrashSafeLoadFile, crash, script)
        assert crashed == [crash] and left == []
        assert sorted(ran) == sorted(t for t in COLLECTION if t != crash)


def test_xdists_own_loadfile_scheduler_strands_the_next_module():
    """Why the suite has its own scheduler (pytest-xdist 3.8): the new worker is handed the
    crashed test alone, waits for a second test, and the next module stays queued. If this
    fails, pytest-xdist has fixed it and CrashSafeLoadFile may go."""
    ran, crashed, left = simulate(xdist_scheduler.LoadFileScheduling, "m2.py::t2", SCRIPT)
    assert crashed == ["m2.py::t2"]
    assert left == ["m2.py::t2", "m3.py::t0", "m3.py::t1"], "the crashed test handed out again, m3 stranded"
