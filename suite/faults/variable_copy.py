"""Faults for ``variable-copy``: a copy between variables that stops being a copy."""

from __future__ import annotations

import functools

from . import fault


def _replaces_assign(*, name, description):
    """A fault that replaces ``assign`` on BaseResourceVariable and on ResourceVariable, which
    shadows it with its own wrapper (tensorflow/python/ops/weak_tensor_ops.py), by
    ``wrong(rvo, original, self, value, use_locking, name, read_value)``, ``original`` being that
    class's own ``assign``."""

    def deco(wrong):
        @fault(name, description=description)
        def patch(tf):
            from tensorflow.python.ops import resource_variable_ops as rvo

            def make(original):
                @functools.wraps(original)
                def assign(self, value, use_locking=None, name=None, read_value=True):
                    return wrong(rvo, original, self, value, use_locking, name, read_value)

                return assign

            for cls in (rvo.BaseResourceVariable, rvo.ResourceVariable):
                setattr(cls, "assign", make(cls.__dict__["assign"]))

        return wrong

    return deco


def _share_storage(dst, src):
    """Point ``dst`` (a resource variable) at ``src``'s resource: reads of ``dst`` read ``src``."""
    dst._handle = src._handle
    dst._graph_element = getattr(src, "_graph_element", None)  # what a v1 Session fetches
    dst._cached_value = None


@_replaces_assign(
    name="variable-assign-noop",
    description="tf.Variable.assign writes nothing: the variable keeps its old value",
)
def _variable_assign_noop(rvo, original, self, value, use_locking, name, read_value):
    return self if read_value else None


@_replaces_assign(
    name="assign-from-variable-aliases",
    description="v2.assign(v1) makes v2 a reference to v1's storage (the seed's claim), not a copy of v1's value",
)
def _assign_from_variable_aliases(rvo, original, self, value, use_locking, name, read_value):
    if isinstance(value, rvo.BaseResourceVariable) and value is not self:
        _share_storage(self, value)
        return self if read_value else None
    return original(self, value, use_locking=use_locking, name=name, read_value=read_value)


@fault("variable-from-variable-aliases")
def _variable_from_variable_aliases(tf):
    """tf.Variable(initial_value=v) shares v's handle instead of starting from a copy of v's value"""
    from tensorflow.python.ops import resource_variable_ops as rvo

    original = rvo.ResourceVariable.__init__

    @functools.wraps(original)
    def __init__(self, *args, **kwargs):
        original(self, *args, **kwargs)
        initial_value = kwargs.get("initial_value", args[0] if args else None)
        if isinstance(initial_value, rvo.BaseResourceVariable):
            _share_storage(self, initial_value)

    rvo.ResourceVariable.__init__ = __init__
