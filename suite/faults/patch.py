"""Faults as data: a fault is its target and its wrong semantics, the wrapping is done here.

Three forms cover the catalogue (``fault`` itself stays for a patch of any other shape)::

    @replaces("nn.softmax", "math.softmax", name="masked-softmax-nan-leaks-across-rows")
    def _leaking(tf, softmax, logits, axis=None, name=None):
        "tf.nn.softmax spreads a fully masked row's NaN into the next row"  # the docstring: its description
        ...  # the wrong tf.nn.softmax; softmax is the original

    @regrad("Softplus", name="softplus-gradient-relu-step")
    def _relu_step(tf, original, op, dy):
        "the gradient of Softplus is relu's step (x > 0) instead of sigmoid(x)"
        ...  # the wrong registered gradient of Softplus

    @changes_grad("Log", name="log-gradient-zero-at-zero")
    def _safe_log(tf, op, g):
        "the gradient of Log is 0 where x = 0 (a 'safe log') instead of +inf"
        ...  # the registered gradient's first input gradient, changed

The description is the docstring (``description=`` where it is computed); ``breaks`` defaults
to the behaviour the module is named after (``suite/faults/loss_gradients.py`` breaks
``loss-gradients``); name others with ``breaks=``. A replacement is defined in this
module, not TensorFlow's, so autograph converts it (and the wrong semantics it calls) inside
``tf.function`` exactly as it converts a case's own code.
"""

from __future__ import annotations

import inspect

from . import described, fault


def get(tf, dotted: str):
    """The object at ``tf.<dotted>``."""
    obj = tf
    for part in dotted.split("."):
        obj = getattr(obj, part)
    return obj


def put(tf, dotted_names, value) -> None:
    """Set ``tf.<dotted>`` to ``value`` for each of ``dotted_names``."""
    for dotted in dotted_names:
        head, _, last = dotted.rpartition(".")
        setattr(get(tf, head) if head else tf, last, value)


def sum_to(tf, grad, like):
    """Reduce a broadcast gradient back to the shape of ``like`` (as a binary op's real gradient
    does): what a wrong gradient of a broadcasting op returns."""
    axes, _ = tf.raw_ops.BroadcastGradientArgs(s0=tf.shape(like), s1=tf.shape(grad))
    return tf.reshape(tf.reduce_sum(grad, axis=axes, keepdims=True), tf.shape(like))


def _gradient_registry(tf, fault_name):
    """The registry ``tf.RegisterGradient`` writes to (a clear error where it has moved)."""
    try:
        from tensorflow.python.framework import ops
    except ImportError as e:  # pragma: no cover - the seam moved
        raise RuntimeError(f"fault {fault_name!r} cannot be applied to TensorFlow {tf.__version__}: {e}") from e
    registry = getattr(ops, "gradient_registry", None) or getattr(ops, "_gradient_registry", None)
    if registry is None or not hasattr(registry, "_registry") or not hasattr(registry, "lookup"):
        raise RuntimeError(
            f"fault {fault_name!r} cannot be applied to TensorFlow {tf.__version__}: "
            "tensorflow.python.framework.ops has no gradient registry"
        )
    return registry


def reregister(tf, fault_name, op_type, make):
    """Replace the registered gradient of ``op_type`` with ``make(original)`` (tf.RegisterGradient
    refuses a duplicate, so the entry is removed first). ``original`` may be None (NotDifferentiable)."""
    registry = _gradient_registry(tf, fault_name)
    try:
        original = registry.lookup(op_type)
    except LookupError as e:
        raise RuntimeError(
            f"fault {fault_name!r}: TensorFlow {tf.__version__} registers no gradient for {op_type}"
        ) from e
    registry._registry.pop(op_type, None)  # noqa: SLF001
    tf.RegisterGradient(op_type)(make(original))


def replaces(*targets, name, description=None, breaks=None, framework="tensorflow"):
    """A fault that puts ``wrong(tf, original, *args, **kwargs)`` at every dotted ``target``;
    ``original`` is what the first target held before."""
    if not targets:
        raise ValueError(f"fault {name!r}: replaces() needs at least one target")

    def deco(wrong):
        def patch(tf):
            original = get(tf, targets[0])

            def replacement(*args, **kwargs):
                return wrong(tf, original, *args, **kwargs)

            replacement.__name__ = targets[0].rsplit(".", 1)[-1]
            try:  # what a case reads of the API (inspect.signature: does it take an argument?)
                replacement.__signature__ = inspect.signature(original)
            except (TypeError, ValueError):  # no signature to show
                pass
            put(tf, targets, replacement)

        patch.__module__ = wrong.__module__
        fault(name, framework=framework, breaks=breaks, description=description or described(wrong))(patch)
        return wrong

    return deco


def regrad(*op_types, name, description=None, breaks=None):
    """A fault that registers ``wrong(tf, original, op, *dys)`` as the gradient of each op type
    (``original``: its gradient before, None where NotDifferentiable)."""

    def deco(wrong):
        def patch(tf):
            for op_type in op_types:
                reregister(tf, name, op_type, lambda original: lambda op, *dys: wrong(tf, original, op, *dys))

        patch.__module__ = wrong.__module__
        fault(name, breaks=breaks, description=description or described(wrong))(patch)
        return wrong

    return deco


def changes_grad(*op_types, name, description=None, breaks=None):
    """A fault that keeps each op type's registered gradient but passes its (first) input
    gradient ``g`` through ``change(tf, op, g)``."""

    def deco(change):
        def wrong(tf, original, op, *dys):
            g = original(op, *dys)
            return change(tf, op, g[0] if isinstance(g, (list, tuple)) else g)

        wrong.__module__ = change.__module__
        regrad(*op_types, name=name, description=description or described(change), breaks=breaks)(wrong)
        return change

    return deco
