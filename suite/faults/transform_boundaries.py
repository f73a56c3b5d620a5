"""Faults for transform-boundaries: a loop construct or an inner function that differentiates wrongly.

- ``scan-carry-gradient-cut``: ``tf.scan`` stops the gradient of the carried state between steps,
  so each output is differentiated through its own step only (right value, wrong gradient of
  every element after the first row).
- ``map-fn-rows-stopped``: ``tf.map_fn`` hands each row to the function behind
  ``tf.stop_gradient``: the value is right and the input gets no gradient.
- ``traced-stop-gradient-identity``: ``tf.stop_gradient`` becomes the identity where a function
  is traced (never eagerly), so an inner ``tf.function``'s straight-through estimator is
  differentiated as ``round``.

Each patch replaces a public function, so it holds in eager, tf.function, XLA and v1 graph mode
alike (the last one only where a graph is being built).
"""

from __future__ import annotations

from . import fault
from .catalogue import _set

BREAKS = ["transform-boundaries"]


@fault(
    "scan-carry-gradient-cut",
    breaks=BREAKS,
    description="tf.scan stops the gradient of the carried state between steps: each output is "
    "differentiated through its own step only",
)
def _scan_carry_gradient_cut(tf):
    original = tf.scan

    def scan(fn, elems, initializer=None, **kwargs):
        return original(lambda a, x: fn(tf.nest.map_structure(tf.stop_gradient, a), x), elems, initializer, **kwargs)

    _set(tf, ["scan"], scan)


@fault(
    "map-fn-rows-stopped",
    breaks=BREAKS,
    description="tf.map_fn passes each row to the function behind tf.stop_gradient: no gradient reaches the input",
)
def _map_fn_rows_stopped(tf):
    original = tf.map_fn

    def map_fn(fn, elems, *args, **kwargs):
        return original(lambda row: fn(tf.nest.map_structure(tf.stop_gradient, row)), elems, *args, **kwargs)

    _set(tf, ["map_fn"], map_fn)


@fault(
    "traced-stop-gradient-identity",
    breaks=BREAKS,
    description="tf.stop_gradient is the identity while a function is traced (eagerly it still stops): an inner "
    "tf.function's straight-through estimator is differentiated as round",
)
def _traced_stop_gradient_identity(tf):
    original = tf.stop_gradient

    def stop_gradient(input, name=None):  # noqa: A002  (TensorFlow's argument name)
        return original(input, name=name) if tf.executing_eagerly() else tf.identity(input, name=name)

    _set(tf, ["stop_gradient"], stop_gradient)
