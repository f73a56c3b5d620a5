"""Faults for ``custom-gradient-calling-conventions``: a declared backward that stops reaching
the right input, one per family of the case module.

- ``custom-gradient-keyword-gradients-dropped``: tf.custom_gradient treats keyword arguments as
  constants of the forward: their gradients are dropped (positional calls are unchanged), and
  keyword calls no longer fail outside eager execution.
- ``custom-gradient-variable-gradients-zeroed``: the variable gradients grad_fn returns through
  ``variables`` are replaced by zeros.
- ``custom-gradient-nested-outer-ignored``: a custom gradient whose forward calls another one
  drops its own backward: the inner backward and autodiff give the gradient.
- ``recompute-grad-aliased-input-counted-twice``: tf.recompute_grad differentiates the
  recomputation with respect to its arguments as given, without the identities that tell
  apart one tensor passed in two slots (tensorflow#36999): each slot gets the gradient of both.
- ``function-variable-argument-first-traced``: a tf.function keeps the tf.Variable arguments of
  its first call and uses them whatever is passed later: the gradient goes to the first-traced
  variable.

Each patch replaces a public function (tf.custom_gradient, tf.recompute_grad, tf.function) that
the case modules' programs call when they are built, so it holds in eager, tf.function, XLA
and v1 graph mode alike.
"""

from __future__ import annotations

import functools
import inspect

from . import fault
from .patch import put, replaces

CUSTOM_GRADIENT = ("custom_gradient", "compat.v1.custom_gradient")


def wrong_custom_gradient(make):
    """A wrong ``tf.custom_gradient(f=None)`` for ``@replaces(*CUSTOM_GRADIENT)``: ``make(tf, original, f)``
    gives what decorating ``f`` gives; usable bare (``@tf.custom_gradient``) and called (``@tf.custom_gradient()``)."""

    def wrong(tf, original, f=None):
        if f is None:
            return functools.partial(wrong, tf, original)
        return make(tf, original, f)

    wrong.__module__, wrong.__doc__ = make.__module__, make.__doc__  # the fault's module and description
    return wrong


def _named(fn, like):
    fn.__name__ = getattr(like, "__name__", "custom_gradient_fault")
    return fn


def _input_grads(grads, n):
    """The first ``n`` input gradients grad_fn returned (a tensor or a sequence)."""
    grads = list(grads) if isinstance(grads, (list, tuple)) else [grads]
    return grads[0] if n == 1 else grads[:n]


@replaces(*CUSTOM_GRADIENT, name="custom-gradient-keyword-gradients-dropped")
@wrong_custom_gradient
def _keyword_gradients_dropped(tf, original, f):
    """tf.custom_gradient treats keyword arguments as constants of the forward: their gradients are dropped, positional
    calls unchanged"""

    def call(*args, **kwargs):
        if not kwargs:
            return original(f)(*args)
        frozen = {k: tf.stop_gradient(v) if tf.is_tensor(v) else v for k, v in kwargs.items()}

        def positional_only(*a):
            y, grad_fn = f(*a, **frozen)

            def grad(*dys, **kw):
                out = grad_fn(*dys, **kw)
                if kw.get("variables"):
                    return _input_grads(out[0], len(a)), out[1]
                return _input_grads(out, len(a))

            return y, grad

        return original(_named(positional_only, f))(*args)

    return functools.wraps(f)(call)


@replaces(*CUSTOM_GRADIENT, name="custom-gradient-variable-gradients-zeroed")
@wrong_custom_gradient
def _variable_gradients_zeroed(tf, original, f):
    """the variable gradients a tf.custom_gradient grad_fn returns (grad_fn(*dys, variables=...)) are replaced by
    zeros"""

    def forward(*args, **kwargs):
        y, grad_fn = f(*args, **kwargs)

        def grad(*dys, variables=None):
            if not variables:
                return grad_fn(*dys)
            input_grads, _ = grad_fn(*dys, variables=variables)
            return input_grads, [tf.zeros_like(v) for v in variables]

        spec = inspect.getfullargspec(grad_fn)  # without a ``variables`` keyword: TensorFlow's own TypeError
        takes_variables = "variables" in spec.args + spec.kwonlyargs or spec.varkw is not None
        return y, grad if takes_variables else grad_fn

    return functools.wraps(f)(original(_named(forward, f)))


@fault("custom-gradient-nested-outer-ignored")
def _nested_outer_ignored(tf):
    """a tf.custom_gradient whose forward calls another custom gradient drops its own backward: the inner backward and
    autodiff of the rest give the gradient"""
    state = {"depth": 0, "inner": False}  # one per patch, kept across calls

    @wrong_custom_gradient
    def wrong(tf, original, f):
        def call(*args, **kwargs):
            if state["depth"]:  # inside another custom gradient's forward
                state["inner"] = True
                return original(f)(*args, **kwargs)
            state["depth"], state["inner"] = 1, False
            try:
                y, _ = f(*args, **kwargs)  # a plain run: its ops, the inner custom op's included, record as usual
            finally:
                state["depth"] = 0
            if state["inner"]:
                return y
            return original(f)(*args, **kwargs)

        return functools.wraps(f)(call)

    original = tf.custom_gradient

    def custom_gradient(f=None):
        return wrong(tf, original, f)

    put(tf, CUSTOM_GRADIENT, custom_gradient)


@replaces("recompute_grad", "compat.v1.recompute_grad", name="recompute-grad-aliased-input-counted-twice")
def _recompute_grad_aliased(tf, original, f):
    """tf.recompute_grad differentiates the recomputation with respect to its arguments as given (no identities), so a
    tensor passed in two slots gets the gradient of both in each"""

    @tf.custom_gradient
    def inner(*args, **kwargs):
        result = f(*args, **kwargs)

        def grad(*dresult, variables=None):
            with tf.GradientTape() as tape:
                tape.watch(args)
                if variables:
                    tape.watch(variables)
                recomputed = f(*args, **kwargs)
            sources = list(args) + list(variables or [])
            grads = tape.gradient(
                recomputed, sources, output_gradients=dresult, unconnected_gradients=tf.UnconnectedGradients.ZERO
            )
            return (grads[: len(args)], grads[len(args) :]) if variables else grads[: len(args)]

        return result, grad

    return functools.wraps(f)(inner)


@replaces("function", "compat.v1.function", name="function-variable-argument-first-traced")
def _first_traced_variable(tf, original, func=None, **options):
    """a tf.function keeps the tf.Variable arguments of its first call and uses them whatever is passed later: gradients
    go to the first-traced variable"""
    if func is None:
        return lambda f: _first_traced_variable(tf, original, f, **options)
    first = {}

    def remembered(*args, **kwargs):
        args = [first.setdefault(i, a) if isinstance(a, tf.Variable) else a for i, a in enumerate(args)]
        return func(*args, **kwargs)

    return original(_named(remembered, func), **options)
