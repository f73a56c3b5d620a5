"""How a parallel run (``run --jobs N``) hands case modules to pytest-xdist's workers, and what
happens to the rest of a module when a case kills its worker.

pytest-xdist's ``loadfile`` scheduler gives each worker whole modules (their runners' traced
programs, v1 graphs and JAX caches stay in one process). When a worker dies it puts the dead
worker's modules back in its queue, the crashed test among them, and starts a new worker. Two
things then go wrong with the stock scheduler (pytest-xdist 3.8):

- the crashed test is handed out again, so the new worker would run it (and die) once more;
- a worker that joins late is given one module, not "at least two tests" as the first workers
  are. A worker runs a test only once it holds the next one (or is told to stop), so when that
  module is the crashed test alone (it died in a module's last test, or in the teardown after
  it, while it held the next module), the new worker waits for a second test that nobody sends:
  the other workers have stopped, the next module stays queued and the run hangs without a
  report (seen: a whole ci run whose worker died at the end of one module left 39 tests of the
  next one queued).

:class:`CrashSafeLoadFile` fixes both: the crashed test is done (its ``crashed`` row is the
report's), and a worker is topped up until it holds two tests or the queue is empty, at every
point where work is handed out.
"""

from __future__ import annotations

from xdist.scheduler import LoadFileScheduling


class CrashSafeLoadFile(LoadFileScheduling):
    """``--dist loadfile`` that never runs a crashed test twice nor strands a module."""

    def remove_node(self, node):
        workload = self.assigned_work.pop(node)
        crashitem = next((t for unit in workload.values() for t, done in unit.items() if not done), None)
        if crashitem is None:
            return None
        workload[self._split_scope(crashitem)][crashitem] = True  # reported as crashed: not again
        self.workqueue.update((scope, unit) for scope, unit in workload.items() if not all(unit.values()))
        for other in self.assigned_work:
            self._reschedule(other)
        return crashitem

    def _reschedule(self, node):
        super()._reschedule(node)
        self._top_up(node)

    def schedule(self):
        super().schedule()
        if self.collection is not None:
            for node in self.nodes:
                self._top_up(node)

    def _top_up(self, node):
        """Modules for ``node`` until it holds two tests: one it runs and the next one."""
        while self.workqueue and not node.shutting_down and self._pending_of(self.assigned_work[node]) < 2:
            self._assign_work_unit(node)
