"""Faults for forward-mode-gradients: ForwardAccumulator regressions a release could plausibly ship.

- ``jvp-product-rule-drops-term``: the JVP rule TensorFlow derives for ``Mul`` ignores the
  tangent of its second operand (half a product rule); reverse mode is untouched, so
  ``u . jvp(v) != vjp(u) . v``.
- ``jvp-unconnected-zeros``: ``ForwardAccumulator.jvp`` defaults to
  ``unconnected_gradients=ZERO``: an output no tangent reached gives zeros, not ``None``.
- ``jvp-none-in-graphs``: ``ForwardAccumulator.jvp`` returns ``None`` inside tf.function, XLA and
  v1 graphs (tensorflow#60164's report); eager JVPs are right.
- ``hvp-drops-curvature``: the JVP rule of the ``*Grad`` ops a backward pass runs
  (``TanhGrad``, ``SigmoidGrad``, ...) ignores the tangent of their primal input, so a
  forward-over-reverse HVP loses the curvature term (tanh'') while first-order JVPs, which
  never meet a ``*Grad`` op, stay right.
- ``jacobian-rows-reversed``: ``GradientTape.jacobian`` returns its rows (the target's
  elements) in reverse order; JVP columns do not change.
- ``nested-jvp-constant``: ``ForwardAccumulator.jvp`` returns its result as a constant
  (``stop_gradient``, which has no JVP), so a nested (forward-over-forward) JVP is ``None``.
- ``jvp-segment-sum-drops-tangent``: the JVP rule of ``UnsortedSegmentSum`` (under
  ``unsorted_segment_mean``) drops its data's tangent, as if the op had no forward rule: J v of a
  segment mean is 0 while reverse mode is right.

The JVP rules are patched where ``_jvp_dispatch`` is registered with the C++ accumulator,
the rest on the public classes' methods, so every fault holds in eager, tf.function, XLA
and v1 graph mode alike (``jvp-none-in-graphs``, by design, everywhere but eager).
"""

from __future__ import annotations

from . import fault

BREAKS = ["forward-mode-gradients"]


def _wrap_jvp_rules(tf, fault_name, change):
    """Register ``change(op_name, tangents) -> tangents`` in front of TensorFlow's JVP rules."""
    try:
        from tensorflow.python import pywrap_tfe
        from tensorflow.python.eager import forwardprop
    except ImportError as e:  # pragma: no cover - the seam moved
        raise RuntimeError(f"fault {fault_name!r} cannot be applied to TensorFlow {tf.__version__}: {e}") from e
    original = forwardprop._jvp_dispatch  # noqa: SLF001

    def dispatch(op_name, attr_tuple, inputs, outputs, tangents, use_batch=False):
        return original(op_name, attr_tuple, inputs, outputs, change(op_name, list(tangents)), use_batch)

    pywrap_tfe.TFE_Py_RegisterJVPFunction(dispatch)


def _zero(tf, t):
    return None if t is None else tf.zeros_like(t)


@fault(
    "jvp-product-rule-drops-term",
    breaks=BREAKS,
    description="the forward-mode rule of Mul ignores the second operand's tangent: d(a*b) = da*b",
)
def _jvp_product_rule_drops_term(tf):
    def change(op_name, tangents):
        return [tangents[0], _zero(tf, tangents[1])] if op_name == "Mul" else tangents

    _wrap_jvp_rules(tf, "jvp-product-rule-drops-term", change)


@fault(
    "jvp-unconnected-zeros",
    breaks=BREAKS,
    description="ForwardAccumulator.jvp defaults to unconnected_gradients=ZERO: zeros instead of None "
    "for an output that no tangent reached",
)
def _jvp_unconnected_zeros(tf):
    jvp = tf.autodiff.ForwardAccumulator.jvp

    def zeros_by_default(self, primals, unconnected_gradients=tf.UnconnectedGradients.ZERO):
        return jvp(self, primals, unconnected_gradients=unconnected_gradients)

    tf.autodiff.ForwardAccumulator.jvp = zeros_by_default


@fault(
    "jvp-none-in-graphs",
    breaks=BREAKS,
    description="ForwardAccumulator.jvp returns None when not executing eagerly (inside tf.function, "
    "XLA and v1 graphs), as tensorflow#60164 reported",
)
def _jvp_none_in_graphs(tf):
    jvp = tf.autodiff.ForwardAccumulator.jvp

    def none_when_traced(self, primals, unconnected_gradients=tf.UnconnectedGradients.NONE):
        result = jvp(self, primals, unconnected_gradients=unconnected_gradients)
        return result if tf.executing_eagerly() else tf.nest.map_structure(lambda t: None, result)

    tf.autodiff.ForwardAccumulator.jvp = none_when_traced


@fault(
    "hvp-drops-curvature",
    breaks=BREAKS,
    description="the forward-mode rule of *Grad ops (TanhGrad, ...) ignores their primal input's tangent: "
    "forward-over-reverse Hessian-vector products lose the curvature term",
)
def _hvp_drops_curvature(tf):
    def change(op_name, tangents):
        # TanhGrad(y, dy), SigmoidGrad(y, dy), ...: input 0 is the primal, 1 the upstream gradient
        return [_zero(tf, tangents[0]), *tangents[1:]] if op_name.endswith("Grad") else tangents

    _wrap_jvp_rules(tf, "hvp-drops-curvature", change)


@fault(
    "jacobian-rows-reversed",
    breaks=BREAKS,
    description="GradientTape.jacobian returns the target's rows in reverse order",
)
def _jacobian_rows_reversed(tf):
    jacobian = tf.GradientTape.jacobian

    def reversed_rows(self, target, sources, *args, **kwargs):
        result = jacobian(self, target, sources, *args, **kwargs)
        n = tf.size(target)

        def flip(j, source):
            if j is None:
                return None
            rows = tf.reshape(j, tf.concat([[n], tf.shape(source)], 0))
            return tf.reshape(tf.reverse(rows, [0]), tf.shape(j))

        return tf.nest.map_structure(flip, result, sources)

    tf.GradientTape.jacobian = reversed_rows


@fault(
    "nested-jvp-constant",
    breaks=BREAKS,
    description="ForwardAccumulator.jvp returns constants: enclosing accumulators (and tapes) see no "
    "dependence, so nested forward mode (forward over forward) gives None",
)
def _nested_jvp_constant(tf):
    jvp, stop = tf.autodiff.ForwardAccumulator.jvp, tf.stop_gradient

    def constant_jvp(self, primals, unconnected_gradients=tf.UnconnectedGradients.NONE):
        result = jvp(self, primals, unconnected_gradients=unconnected_gradients)
        return tf.nest.map_structure(lambda t: None if t is None else stop(t), result)

    tf.autodiff.ForwardAccumulator.jvp = constant_jvp


@fault(
    "jvp-segment-sum-drops-tangent",
    breaks=BREAKS,
    description="the forward-mode rule of UnsortedSegmentSum ignores its data's tangent: the JVP of "
    "unsorted_segment_sum/mean is 0",
)
def _jvp_segment_sum_drops_tangent(tf):
    def change(op_name, tangents):
        return [_zero(tf, tangents[0]), *tangents[1:]] if op_name == "UnsortedSegmentSum" else tangents

    _wrap_jvp_rules(tf, "jvp-segment-sum-drops-tangent", change)
