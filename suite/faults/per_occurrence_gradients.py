"""Faults for per-occurrence-gradients: a reused tensor's gradient is not the sum over its uses.

- ``occurrence-gradients-keep-last``: where a tensor (or variable) feeds several ops, reverse
  mode keeps the last gradient that arrives and drops the others (a "set" where an "add"
  was meant), in GradientTape and in tf.gradients.
- ``occurrence-gradients-mean``: the same aggregation averages the per-use gradients
  instead of summing them (an add_n swapped for a mean).
- ``custom-getter-skipped-on-reuse``: ``tf.compat.v1.variable_scope`` drops its
  ``custom_getter`` when the scope reuses variables (``reuse=True``/``AUTO_REUSE``), as if
  reuse returned the stored variable without the getter chain: the seed's wrapper that
  reads a reused scope's variables through stop_gradient no longer isolates that scope.
  (v1 graph only: custom getters exist only there.)
- ``repeated-input-counted-once``: an op that takes the same tensor in two input slots
  (``x * x``, ``x + x``, ``B @ B``) credits only the first slot, as if the tape recorded an
  op's inputs by tensor id, deduplicated (the registered gradients of Mul, Add/AddV2, Sub and
  the MatMuls drop a repeated slot's share).

The aggregation of gradients has no public seam: GradientTape aggregates in C++ through a
Python "vspace" registered once at import (``backprop._default_vspace``, re-registered
here with ``pywrap_tfe.TFE_Py_RegisterVSpace``), tf.gradients in
``gradients_util._AggregatedGrads``. Both are present from TF 2.12 to 2.21; where either
is missing the fault raises instead of silently doing nothing. Tapes inside tf.function
and XLA-compiled functions use the same vspace, so the fault holds in every mode.
"""

from __future__ import annotations

import inspect

from . import fault
from .patch import _gradient_registry, put, reregister


def _cannot(tf, fault_name, why):
    """The error of a fault whose seam this TensorFlow lacks."""
    return RuntimeError(f"fault {fault_name!r} cannot be applied to TensorFlow {tf.__version__}: {why}")


def _require(tf, fault_name, owner, attr):
    if not hasattr(owner, attr):
        raise _cannot(tf, fault_name, f"{owner.__name__}.{attr} is missing (the seam it patches has moved)")
    return getattr(owner, attr)


def _patch_aggregation(tf, fault_name, combine):
    """Aggregate several dense gradients of one tensor with ``combine(list) -> Tensor``
    instead of their sum, in the eager/tf.function tape and in tf.gradients."""
    try:
        from tensorflow.python import pywrap_tfe
        from tensorflow.python.eager import backprop
        from tensorflow.python.ops import gradients_util
    except ImportError as e:  # pragma: no cover - the seam moved
        raise _cannot(tf, fault_name, e) from e
    vspace = _require(tf, fault_name, backprop, "_default_vspace")
    register = _require(tf, fault_name, pywrap_tfe, "TFE_Py_RegisterVSpace")
    get_grads = _require(tf, fault_name, gradients_util, "_GetGrads")
    graph_aggregate = _require(tf, fault_name, gradients_util, "_AggregatedGrads")
    if not hasattr(vspace, "_replace") or "aggregate_fn" not in getattr(vspace, "_fields", ()):
        raise _cannot(tf, fault_name, "backprop._default_vspace has no aggregate_fn field")
    tape_aggregate = vspace.aggregate_fn

    def dense(grads):
        return len(grads) > 1 and all(isinstance(g, tf.Tensor) for g in grads)

    def aggregate(grads):
        return combine(list(grads)) if dense(grads) else tape_aggregate(grads)

    patched = vspace._replace(aggregate_fn=aggregate)
    register(patched)  # the C++ tape reads aggregate_fn from the registered vspace
    backprop._default_vspace = patched

    def _AggregatedGrads(grads, op, *args, **kwargs):  # noqa: N802  (TensorFlow's name)
        out_grads = get_grads(grads, op)  # the list stored in grads[op]: edit it in place
        for i, out_grad in enumerate(out_grads):
            if isinstance(out_grad, list):
                live = [g for g in out_grad if g is not None]
                if dense(live):
                    out_grads[i] = [combine(live)]
        return graph_aggregate(grads, op, *args, **kwargs)

    gradients_util._AggregatedGrads = _AggregatedGrads


@fault("occurrence-gradients-keep-last")
def _keep_last(tf):
    """GradientTape and tf.gradients keep only the last of a reused tensor's per-use gradients instead of summing
    them"""
    _patch_aggregation(tf, "occurrence-gradients-keep-last", lambda grads: grads[-1])


@fault("occurrence-gradients-mean")
def _mean(tf):
    """GradientTape and tf.gradients average a reused tensor's per-use gradients instead of summing them"""
    _patch_aggregation(
        tf, "occurrence-gradients-mean", lambda grads: tf.math.add_n(grads) / tf.cast(len(grads), grads[0].dtype)
    )


@fault("custom-getter-skipped-on-reuse")
def _custom_getter_skipped_on_reuse(tf):
    """tf.compat.v1.variable_scope ignores custom_getter when reuse is True or AUTO_REUSE: a reused scope's variables
    are returned without the getter (no stop_gradient)"""
    base = tf.compat.v1.variable_scope
    signature = inspect.signature(base.__init__)
    if "custom_getter" not in signature.parameters or "reuse" not in signature.parameters:
        raise _cannot(tf, "custom-getter-skipped-on-reuse", "variable_scope takes no custom_getter/reuse")

    class variable_scope(base):  # noqa: N801  (TensorFlow's name)
        __doc__ = base.__doc__

        def __init__(self, *args, **kwargs):
            bound = signature.bind(self, *args, **kwargs)
            if bound.arguments.get("reuse"):
                bound.arguments["custom_getter"] = None
            super().__init__(*bound.args[1:], **bound.kwargs)

    put(tf, ["compat.v1.variable_scope"], variable_scope)


# Ops whose gradient is patched by repeated-input-counted-once: the binary ops a reused
# tensor meets as both operands (x * x, x + x, B @ B); all but Mul, AddV2 and MatMul only where registered.
_BINARY = ("Mul", "AddV2", "Add", "Sub", "MatMul", "BatchMatMulV2", "BatchMatMulV3")
_REQUIRED = ("Mul", "AddV2", "MatMul")


@fault("repeated-input-counted-once")
def _repeated_input_counted_once(tf):
    """an op that takes the same tensor as two inputs (x * x, x + x, B @ B) credits the gradient to the first input slot
    only, as if the tape deduplicated an op's inputs"""
    registry = _gradient_registry(tf, "repeated-input-counted-once")

    def once(original):
        def grad_fn(op, *grads):
            out = list(original(op, *grads))
            inputs = list(op.inputs)
            for j in range(1, min(len(inputs), len(out))):
                if any(inputs[j] is inputs[i] for i in range(j)):
                    out[j] = None  # the repeated slot's share is lost
            return out

        return grad_fn

    for op_type in _BINARY:
        try:
            registry.lookup(op_type)
        except LookupError:
            if op_type not in _REQUIRED:
                continue
        # (a required op without a gradient: reregister raises "TensorFlow ... registers no gradient for ...")
        reregister(tf, "repeated-input-counted-once", op_type, once)
