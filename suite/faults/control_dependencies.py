"""Faults for ``control-dependencies``: ordering of variable updates and reads that stops holding."""

from __future__ import annotations

import contextlib

from . import fault
from .patch import replaces


@replaces(
    "control_dependencies",
    "compat.v1.control_dependencies",
    name="control-dependencies-noop",
    breaks=["control-dependencies", "batch-norm-update-ops"],
)
def _control_dependencies_noop(tf, original, control_inputs):
    """tf.control_dependencies is a no-op context manager: ops built inside get no control inputs"""
    return contextlib.nullcontext()


@fault("auto-control-deps-dropped")
def _auto_control_deps_dropped(tf):
    """tf.function adds no automatic control dependencies: stateful ops are neither ordered nor kept when their results
    are unused"""
    from tensorflow.python.framework import auto_control_deps as acd

    def __exit__(self, unused_type, unused_value, unused_traceback):
        if tf.executing_eagerly():
            return
        # Leave the graph as the real __exit__ does, without adding any control edge.
        outer = getattr(self._graph, "outer_graph", None)
        self._graph._add_control_dependencies = outer._add_control_dependencies if outer is not None else False
        self._graph.experimental_acd_manager = None
        self.collective_manager_ids_used = {}

    acd.AutomaticControlDependencies.__exit__ = __exit__


@fault("assign-returns-snapshot")
def _assign_returns_snapshot(tf):
    """Variable.assign/assign_add/assign_sub return a snapshot of the new value, not the updated variable"""
    from tensorflow.python.ops import resource_variable_ops as rvo

    # ResourceVariable holds its own reference to each BaseResourceVariable method: patch both.
    for cls in (rvo.BaseResourceVariable, rvo.ResourceVariable):
        for attr in ("assign", "assign_add", "assign_sub"):
            if attr not in cls.__dict__:
                continue

            def method(self, value, use_locking=None, name=None, read_value=True, _original=cls.__dict__[attr]):
                out = _original(self, value, use_locking=use_locking, name=name, read_value=read_value)
                return tf.identity(out) if read_value else out

            setattr(cls, attr, method)
