"""Faults for straight-through-estimator: ``y = x + stop_gradient(round(x) - x)`` goes wrong.

- ``round-half-away-from-zero``: ``tf.round`` rounds k + 0.5 away from zero (C's ``round``,
  XLA's ``RoundNearestAfz``) instead of to even, the rule the seed's half-way points turn on;
  its gradient stays the registered ``None``.
- ``round-gradient-straight-through``: the registered gradient of ``Round`` passes the
  upstream gradient through (a built-in STE) instead of ``None``.
- ``stop-gradient-leaks-fraction``: ``tf.stop_gradient`` lets 1/1024 of the upstream gradient
  through (as if lowered to a gradient-scaling op with a non-zero scale): the STE gradient,
  the frozen entries of a partial stop and a stopped occurrence all get a small wrong term
  that only an exact (or tight) comparison sees.

Every patch replaces a public function or a registered gradient, so it holds in eager,
tf.function, XLA and v1 graph mode alike.
"""

from __future__ import annotations

from . import fault
from .catalogue import _set

LEAK = 2.0**-10


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


@fault(
    "round-half-away-from-zero",
    breaks=["straight-through-estimator"],
    description="tf.round rounds half-way points away from zero (0.5 -> 1, 2.5 -> 3, -1.5 -> -2) "
    "instead of to even; the gradient stays None",
)
def _round_half_away_from_zero(tf):
    original, stop = tf.round, tf.stop_gradient

    def round_(x, name=None):
        x = tf.convert_to_tensor(x)
        if not x.dtype.is_floating:
            return original(x, name=name)
        a = tf.abs(x)
        whole = tf.floor(a)
        halfway = tf.equal(a - whole, 0.5)  # exact: a - floor(a) is representable
        away = tf.sign(x) * (whole + 1)
        # Only half-way points change (never to a signed zero); stop_gradient keeps Round's None.
        return stop(tf.where(halfway, away, original(x)))

    _set(tf, ["round", "math.round"], round_)


@fault(
    "round-gradient-straight-through",
    breaks=["straight-through-estimator"],
    description="the registered gradient of Round passes the upstream gradient through "
    "(a built-in straight-through estimator) instead of None",
)
def _round_gradient_straight_through(tf):
    reregister(tf, "round-gradient-straight-through", "Round", lambda original: lambda op, grad: grad)


@fault(
    "stop-gradient-leaks-fraction",
    breaks=["straight-through-estimator", "partial-stop-gradient", "per-occurrence-gradients"],
    description="tf.stop_gradient passes 1/1024 of the upstream gradient through instead of none",
)
def _stop_gradient_leaks_fraction(tf):
    stop = tf.stop_gradient

    @tf.custom_gradient
    def _leaky(t):
        return stop(t), lambda dy: dy * tf.constant(LEAK, dy.dtype)

    def stop_gradient(input, name=None):  # noqa: A002  (TensorFlow's argument name)
        # A Variable is read first, so the leak flows to it through ReadVariableOp, as a
        # read's gradient would.
        return _leaky(tf.convert_to_tensor(input))

    _set(tf, ["stop_gradient", "compat.v1.stop_gradient"], stop_gradient)
