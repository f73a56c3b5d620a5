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
from .patch import replaces


def _changes_jvp_rules(name, description):
    """A fault that registers ``change(tf, op_name, tangents) -> tangents`` in front of
    TensorFlow's JVP rules."""

    def deco(change):
        @fault(name, description=description)
        def patch(tf):
            try:
                from tensorflow.python import pywrap_tfe
                from tensorflow.python.eager import forwardprop
            except ImportError as e:  # pragma: no cover - the seam moved
                raise RuntimeError(f"fault {name!r} cannot be applied to TensorFlow {tf.__version__}: {e}") from e
            original = forwardprop._jvp_dispatch  # noqa: SLF001

            def dispatch(op_name, attr_tuple, inputs, outputs, tangents, use_batch=False):
                return original(op_name, attr_tuple, inputs, outputs, change(tf, op_name, list(tangents)), use_batch)

            pywrap_tfe.TFE_Py_RegisterJVPFunction(dispatch)

        return change

    return deco


def _replace_jvp(tf, unconnected_default, result):
    """Replace ``ForwardAccumulator.jvp`` by one with ``unconnected_default`` as its default whose
    value is ``result(jvp)``, ``jvp`` the original's."""
    jvp = tf.autodiff.ForwardAccumulator.jvp

    def replaced(self, primals, unconnected_gradients=unconnected_default):
        return result(jvp(self, primals, unconnected_gradients=unconnected_gradients))

    tf.autodiff.ForwardAccumulator.jvp = replaced


def _zero(tf, t):
    return None if t is None else tf.zeros_like(t)


@_changes_jvp_rules(
    "jvp-product-rule-drops-term",
    description="the forward-mode rule of Mul ignores the second operand's tangent: d(a*b) = da*b",
)
def _jvp_product_rule_drops_term(tf, op_name, tangents):
    return [tangents[0], _zero(tf, tangents[1])] if op_name == "Mul" else tangents


@fault("jvp-unconnected-zeros")
def _jvp_unconnected_zeros(tf):
    """ForwardAccumulator.jvp defaults to unconnected_gradients=ZERO: zeros instead of None for an output that no
    tangent reached"""
    _replace_jvp(tf, tf.UnconnectedGradients.ZERO, lambda result: result)


@fault("jvp-none-in-graphs")
def _jvp_none_in_graphs(tf):
    """ForwardAccumulator.jvp returns None when not executing eagerly (inside tf.function, XLA and v1 graphs), as
    tensorflow#60164 reported"""

    def none_when_traced(result):
        return result if tf.executing_eagerly() else tf.nest.map_structure(lambda t: None, result)

    _replace_jvp(tf, tf.UnconnectedGradients.NONE, none_when_traced)


@_changes_jvp_rules(
    "hvp-drops-curvature",
    description="the forward-mode rule of *Grad ops (TanhGrad, ...) ignores their primal input's tangent: "
    "forward-over-reverse Hessian-vector products lose the curvature term",
)
def _hvp_drops_curvature(tf, op_name, tangents):
    # TanhGrad(y, dy), SigmoidGrad(y, dy), ...: input 0 is the primal, 1 the upstream gradient
    return [_zero(tf, tangents[0]), *tangents[1:]] if op_name.endswith("Grad") else tangents


@replaces("GradientTape.jacobian", name="jacobian-rows-reversed")
def _jacobian_rows_reversed(tf, jacobian, self, target, sources, *args, **kwargs):
    """GradientTape.jacobian returns the target's rows in reverse order"""
    result = jacobian(self, target, sources, *args, **kwargs)
    n = tf.size(target)

    def flip(j, source):
        if j is None:
            return None
        rows = tf.reshape(j, tf.concat([[n], tf.shape(source)], 0))
        return tf.reshape(tf.reverse(rows, [0]), tf.shape(j))

    return tf.nest.map_structure(flip, result, sources)


@fault("nested-jvp-constant")
def _nested_jvp_constant(tf):
    """ForwardAccumulator.jvp returns constants: enclosing accumulators (and tapes) see no dependence, so nested forward
    mode (forward over forward) gives None"""
    stop = tf.stop_gradient

    def constant(result):
        return tf.nest.map_structure(lambda t: None if t is None else stop(t), result)

    _replace_jvp(tf, tf.UnconnectedGradients.NONE, constant)


@_changes_jvp_rules(
    "jvp-segment-sum-drops-tangent",
    description="the forward-mode rule of UnsortedSegmentSum ignores its data's tangent: the JVP of "
    "unsorted_segment_sum/mean is 0",
)
def _jvp_segment_sum_drops_tangent(tf, op_name, tangents):
    return [_zero(tf, tangents[0]), *tangents[1:]] if op_name == "UnsortedSegmentSum" else tangents
