"""Faults for ``custom-backward``: a custom backward that stops taking effect."""

from __future__ import annotations

import contextlib
import functools

from .custom_gradient_calling_conventions import CUSTOM_GRADIENT, wrong_custom_gradient
from .patch import replaces


@replaces(*CUSTOM_GRADIENT, name="custom-gradient-ignored")
@wrong_custom_gradient
def _custom_gradient_ignored(tf, original, f):
    """tf.custom_gradient drops the grad_fn: the forward's own gradient is used"""

    @functools.wraps(f)
    def forward_only(*args, **kwargs):
        return f(*args, **kwargs)[0]

    return forward_only


@replaces(*CUSTOM_GRADIENT, name="custom-gradient-upstream-ones")
@wrong_custom_gradient
def _custom_gradient_upstream_ones(tf, original, f):
    """tf.custom_gradient calls grad_fn with ones instead of the upstream gradient"""

    @functools.wraps(f)
    def forward(*args, **kwargs):
        y, grad_fn = f(*args, **kwargs)

        @functools.wraps(grad_fn)
        def grad(*upstream, **kwargs):
            return grad_fn(*[tf.ones_like(u) for u in upstream], **kwargs)

        return y, grad

    return original(forward)


@replaces("Graph.gradient_override_map", name="gradient-override-map-ignored")
@contextlib.contextmanager
def _gradient_override_map_ignored(tf, original, self, op_type_map):
    """Graph.gradient_override_map is a no-op: ops keep their registered gradient"""
    yield
