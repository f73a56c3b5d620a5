"""Faults for transform-boundaries: a loop construct or an inner function that differentiates wrongly.

- ``scan-carry-gradient-cut``: ``tf.scan`` stops the gradient of the carried state between steps,
  so each output is differentiated through its own step only (right value, wrong gradient of
  every element after the first row).
- ``map-fn-rows-stopped``: ``tf.map_fn`` hands each row to the function behind
  ``tf.stop_gradient``: the value is right and the input gets no gradient.
- ``traced-stop-gradient-identity``: ``tf.stop_gradient`` becomes the identity where a function
  is traced (never eagerly), so an inner ``tf.function``'s straight-through estimator is
  differentiated as ``round``.
- ``resize-gradient-differentiated-as-zero``: ``ResizeBilinearGrad`` gets a zero gradient where
  it has none (NotDifferentiable), so a gradient penalty through a resize has a zero gradient
  instead of TensorFlow's None.
- ``log-of-exp-folded``: ``tf.math.log`` of a ``tf.exp`` result is the exponent itself in every
  mode, as XLA's algebraic simplifier folds it, so exp's overflow vanishes from the value.

Each patch replaces a public function, so it holds in eager, tf.function, XLA and v1 graph mode
alike (the last one only where a graph is being built).
"""

from __future__ import annotations

from . import fault
from .patch import put, regrad, replaces


@replaces("scan", name="scan-carry-gradient-cut")
def _scan_carry_gradient_cut(tf, original, fn, elems, initializer=None, **kwargs):
    """tf.scan stops the gradient of the carried state between steps: each output is differentiated through its own step
    only"""
    return original(lambda a, x: fn(tf.nest.map_structure(tf.stop_gradient, a), x), elems, initializer, **kwargs)


@replaces("map_fn", name="map-fn-rows-stopped")
def _map_fn_rows_stopped(tf, original, fn, elems, *args, **kwargs):
    """tf.map_fn passes each row to the function behind tf.stop_gradient: no gradient reaches the input"""
    return original(lambda row: fn(tf.nest.map_structure(tf.stop_gradient, row)), elems, *args, **kwargs)


@replaces("stop_gradient", name="traced-stop-gradient-identity")
def _traced_stop_gradient_identity(tf, original, input, name=None):  # noqa: A002  (TensorFlow's argument name)
    """tf.stop_gradient is the identity while a function is traced (eagerly it still stops): an inner tf.function's
    straight-through estimator is differentiated as round"""
    return original(input, name=name) if tf.executing_eagerly() else tf.identity(input, name=name)


@regrad("ResizeBilinearGrad", name="resize-gradient-differentiated-as-zero")
def _resize_gradient_as_zero(tf, original, op, grad):
    """ResizeBilinearGrad (resize's own gradient) is differentiated as zero where TensorFlow has no gradient for it: a
    gradient penalty through tf.image.resize gets zeros instead of None"""
    return [tf.zeros_like(op.inputs[0]), tf.zeros_like(op.inputs[1])]


@fault("log-of-exp-folded")
def _log_of_exp_folded(tf):
    """tf.math.log of a tf.exp result returns the exponent in every mode (XLA's algebraic rewrite made general):
    log(exp(89)) is 89 instead of inf"""
    exp, log = tf.exp, tf.math.log
    exponents = {}  # exp's result (tensor.ref(), as tensors are unhashable) -> its input

    def exp_(x, name=None):
        y = exp(x, name=name)
        if len(exponents) > 4096:  # a bounded memory of the latest results
            exponents.clear()
        exponents[y.ref()] = x
        return y

    def log_(x, name=None):
        x_in = exponents.get(x.ref()) if isinstance(x, tf.Tensor) else None
        return tf.identity(x_in, name=name) if x_in is not None else log(x, name=name)

    put(tf, ["exp", "math.exp"], exp_)
    put(tf, ["math.log"], log_)
