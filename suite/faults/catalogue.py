"""The faults. Each patch replaces public TensorFlow behaviour the way a regression might."""

from __future__ import annotations

from . import fault


def _set(tf, dotted_names, value):
    for dotted in dotted_names:
        obj = tf
        *path, last = dotted.split(".")
        for p in path:
            obj = getattr(obj, p)
        setattr(obj, last, value)


@fault(
    "stop-gradient-identity",
    breaks=["straight-through-estimator", "partial-stop-gradient", "per-occurrence-gradients"],
    description="tf.stop_gradient lets the gradient through (behaves like tf.identity)",
)
def _stop_gradient_identity(tf):
    _set(tf, ["stop_gradient", "compat.v1.stop_gradient"], lambda input, name=None: tf.identity(input, name=name))
