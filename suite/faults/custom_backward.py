"""Faults for ``custom-backward``: a custom backward that stops taking effect."""

from __future__ import annotations

import contextlib
import functools

from . import fault


def _replace_custom_gradient(tf, make_grad):
    """Wrap tf.custom_gradient so that the grad_fn it registers is ``make_grad(tf, grad_fn)``."""
    original = tf.custom_gradient

    def custom_gradient(f=None):
        if f is None:
            return custom_gradient

        @functools.wraps(f)
        def forward(*args, **kwargs):
            y, grad_fn = f(*args, **kwargs)
            return y, make_grad(tf, grad_fn)

        return original(forward) if make_grad is not None else _forward_only(f)

    tf.custom_gradient = custom_gradient
    tf.compat.v1.custom_gradient = custom_gradient


def _forward_only(f):
    @functools.wraps(f)
    def wrapper(*args, **kwargs):
        return f(*args, **kwargs)[0]

    return wrapper


@fault(
    "custom-gradient-ignored",
    breaks=["custom-backward"],
    description="tf.custom_gradient drops the grad_fn: the forward's own gradient is used",
)
def _custom_gradient_ignored(tf):
    _replace_custom_gradient(tf, None)


@fault(
    "custom-gradient-upstream-ones",
    breaks=["custom-backward"],
    description="tf.custom_gradient calls grad_fn with ones instead of the upstream gradient",
)
def _custom_gradient_upstream_ones(tf):
    def make_grad(tf, grad_fn):
        @functools.wraps(grad_fn)
        def grad(*upstream, **kwargs):
            return grad_fn(*[tf.ones_like(u) for u in upstream], **kwargs)

        return grad

    _replace_custom_gradient(tf, make_grad)


@fault(
    "gradient-override-map-ignored",
    breaks=["custom-backward"],
    description="Graph.gradient_override_map is a no-op: ops keep their registered gradient",
)
def _gradient_override_map_ignored(tf):
    @contextlib.contextmanager
    def gradient_override_map(self, op_type_map):
        yield

    tf.Graph.gradient_override_map = gradient_override_map
