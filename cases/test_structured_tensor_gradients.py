"""Structured tensors' gradients: RaggedTensor, IndexedSlices and SparseTensor, duplicates included.

Sources (issue 32, second half; issue 30's SparseTensor duplicates): gradients through ragged
reductions and ``map_fn`` (tensorflow#42189, #35802), the IndexedSlices a gather's gradient is and
its densification (#12005), segment-style reductions with repeated ids (#32755, pytorch#9998).

Ragged (a flat ``values`` vector split by drawn row lengths, empty rows included): the gradient of
``sum(w * f(rt))`` with respect to ``values`` for ``f`` in ``tf.reduce_sum/mean/max(rt, axis=1)``,
``reduce_sum(tf.ragged.map_flat_values(tf.square, rt))``, ``rt.to_tensor(default_value, shape)``
and ``tf.gather(rt, ids).to_tensor(shape)``, against the padded dense closed form (padding gets no
gradient from ``values``; ``to_tensor``'s padding cotangents go to ``default_value``) and against
``jax.ops.segment_*``/``.at[].set`` on the flat values with row ids and ``torch.segment_reduce``/
``index_put``. What an empty row holds (``empty-row:<op>``) is observed per framework.

IndexedSlices: the gradient of ``tf.gather`` on a variable is one slice per id (``slices(ids)``,
duplicates kept, as PyTorch's ``F.embedding(sparse=True)`` gives); ``tf.convert_to_tensor`` sums
the duplicates (closed form ``np.add.at``, torch ``coalesce()``, JAX's dense gradient). Whether
densifying an IndexedSlices of statically unknown dense shape warns ("Converting sparse
IndexedSlices to a dense Tensor of unknown shape", tensorflow#12005) is recorded in each mode
where the program's Python body ran. One SGD step (Keras; ``tf.compat.v1.train`` in a Session) on
hand-made IndexedSlices with repeated rows, against torch SGD on an uncoalesced sparse gradient and
optax on the dense one: ``summed``, ``last`` or ``first``.

SparseTensor, gradient with respect to ``values``: ``tf.sparse.sparse_dense_matmul``,
``tf.sparse.reduce_sum(axis=1)``, ``tf.sparse.softmax``, ``tf.sparse.to_dense``, against
``torch.sparse`` (``mm``, ``sum``, ``softmax``, ``to_dense``), ``jax.experimental.sparse.BCOO``
(``@``, ``bcoo_reduce_sum``, ``todense``; softmax as segment ops on the BCOO's data) and float64
closed forms. With one repeated index (in canonical order) each op's rule is observed: ``sum``,
``last``, ``first``, or ``raises:<Error>``, and its gradient's (``each``: every duplicate gets the
cotangent at its position, the gradient of ``sum``; ``last-only``/``first-only``). With unsorted
(unique) indices: ``closed-form``, ``other`` or the refusal.

Declared surprises:

- The gradient of a gather on a variable is one slice per id (duplicates kept) in TensorFlow and
  PyTorch, a dense array in JAX; densified, all three sum the duplicates.
- XLA compiles no ragged op here (the row partition is data: "must be a compile-time constant",
  or no XLA kernel for RaggedTensorToTensor/RaggedGather) and none of SparseTensorDenseMatMul,
  SparseReduceSum, SparseSoftmax; ``to_dense`` compiles and validates nothing.
- An empty row's ``reduce_max`` is the dtype's lowest finite value in TensorFlow (the
  ``unsorted_segment_max`` underneath), -inf in JAX and PyTorch; its ``reduce_mean`` is NaN in all three.
- ``tf.sparse.to_dense`` refuses a repeated index ("is repeated") and unsorted indices ("out of
  order") unless ``validate_indices=False``, when the last duplicate wins, while its gradient gives
  every duplicate the cotangent (the gradient of a sum). PyTorch and JAX sum duplicates.
- ``tf.sparse.softmax`` assumes canonical order: with unsorted indices its values are wrong (no
  error); ``tf.sparse.reorder`` first gives the closed form.
- The unknown-shape densify warning is no longer emitted in any mode (no such warning in
  TensorFlow's source since at least 2.12; only a warning for >= 1e8 elements is left).
"""

from __future__ import annotations

import dataclasses
import logging
import warnings

import numpy as np
from hypothesis import given, strategies as st

from suite import compare as cmp, strategies as ss
from suite.behaviours import Floor, behaviour, on
from suite.compare import capped
from suite.expectations import expect, expectations, raises
from suite.frameworks.tf_runner import Variables, in_v1_graph
from suite.program import Program

RAGGED_XLA = "https://github.com/tensorflow/tensorflow/issues/55973"
XLA_NO_SPARSE_KERNEL = "https://github.com/tensorflow/tensorflow/issues/88042"  # tf.sparse ops under jit_compile
TO_DENSE_REPEATED = "https://github.com/tensorflow/tensorflow/issues/371"
TO_DENSE_VALIDATE = "https://github.com/tensorflow/tensorflow/issues/59356"
SPARSE_SOFTMAX = "https://tensorflow.org/versions/r2.9/api_docs/python/tf/raw_ops/SparseSoftmax"
SPARSE_TO_DENSE_GRAD = "https://github.com/tensorflow/tensorflow/issues/6391"
TF_UNSORTED_MAX = "https://www.tensorflow.org/api_docs/python/tf/math/unsorted_segment_max"
JAX_NO_SPARSE_GRAD = "https://github.com/jax-ml/jax/issues/18601"

BEHAVIOUR = behaviour(
    "structured-tensor-gradients",
    sources=[],
    links=[
        "https://github.com/tensorflow/tensorflow/issues/42189",
        "https://github.com/tensorflow/tensorflow/issues/35802",
        "https://github.com/tensorflow/tensorflow/issues/12005",
        "https://github.com/tensorflow/tensorflow/issues/32755",
        "https://github.com/pytorch/pytorch/issues/9998",
        TO_DENSE_REPEATED,
        SPARSE_SOFTMAX,
    ],
    floor=Floor(
        "mixed",
        "Ragged ops per element (ragged_scales): each row's sum or mean at the sum or mean of its |values| (they "
        "cancel), a max, a copy (to_tensor, gather) and every values gradient but gather's at |ref_i| (gathered "
        "cotangents, w / length, 2 v w: no cancellation), gather's at the sum of |w| over the rows that read the "
        "value; each capped at the array's max |ref| (capped: no element held more loosely than before). "
        "Array-level: IndexedSlices densified and the SGD step (sums of duplicate slices), the SparseTensor "
        "ops (matmul, reduce_sum, softmax mix entries; to_dense's duplicate rules are classified with the same "
        "array floor as the other ops), and to_tensor's default-value gradient (one sum).",
    ),
)

RAGGED_OPS = ("reduce_sum", "reduce_mean", "reduce_max", "map_flat_values", "to_tensor", "gather")
SPARSE_OPS = ("sparse_dense_matmul", "reduce_sum", "softmax", "to_dense")
DUPLICATE_OPS = ("to_dense", "to_dense[unvalidated]", "reduce_sum", "sparse_dense_matmul")
UNSORTED_OPS = (*DUPLICATE_OPS, "softmax", "reorder+softmax")
XLA_SPARSE = ("sparse_dense_matmul", "reduce_sum", "softmax", "reorder+softmax")

RAGGED_XLA_REFUSED = raises(
    "InvalidArgumentError", r"(must be a compile-time constant|unsupported operations.*Ragged(TensorToTensor|Gather))"
)
SPARSE_XLA_REFUSED = raises(
    "InvalidArgumentError", r"unsupported operations.*Sparse(TensorDenseMatMul|ReduceSum|Softmax|Reorder)"
)
REPEATED = raises("InvalidArgumentError", r"indices\[\d+\] = \[\d+,\d+\] is repeated")
OUT_OF_ORDER = raises("InvalidArgumentError", r"indices\[\d+\] = \[\d+,\d+\] is out of order")
GRAPH_MODES = "eager|function|graph"

EXPECT = expectations(
    {
        **{f"ragged:{op}": "runs" for op in RAGGED_OPS},
        "empty-row:reduce_sum": "zero",
        "empty-row:reduce_mean": "nan",
        "empty-row:reduce_max": "-inf",  # the identity of max: JAX's segment_max, torch.segment_reduce
        "padding-grad:to_tensor": "to-default-value",
        "gather-grad-form": "slices(ids)",
        "unknown-shape-warning": "not-emitted",
        "apply_gradients[duplicates]": "summed",
        **{f"sparse:{op}": "runs" for op in SPARSE_OPS},
        **{f"duplicates:{op}": "sum" for op in DUPLICATE_OPS},
        **{f"duplicates-grad:{op}": "each" for op in DUPLICATE_OPS},
        **{f"unsorted:{op}": "closed-form" for op in UNSORTED_OPS},
    },
    # -- XLA: no ragged op, no sparse op but to_dense
    *[
        expect(
            f"ragged:{op}",
            RAGGED_XLA_REFUSED,
            framework="tensorflow",
            mode="xla",
            link=RAGGED_XLA,
            reason="a ragged reduction turns its row splits into segment ids with a Range whose length is data "
            "(XLA: 'must be a compile-time constant'); to_tensor and ragged gather have no XLA "
            "kernel (RaggedTensorToTensor, RaggedGather): jit_compile=True refuses every one",
        )
        for op in RAGGED_OPS
    ],
    *[
        expect(
            key,
            SPARSE_XLA_REFUSED,
            framework="tensorflow",
            mode="xla",
            link=XLA_NO_SPARSE_KERNEL,
            reason="SparseTensorDenseMatMul, SparseReduceSum, SparseSoftmax and SparseReorder have no XLA kernel "
            "(a SparseTensor's nonzeros are data): jit_compile=True refuses the function",
        )
        for key in (
            *[f"sparse:{op}" for op in XLA_SPARSE if op in SPARSE_OPS],
            *[f"duplicates:{op}" for op in XLA_SPARSE if op in DUPLICATE_OPS],
            *[f"duplicates-grad:{op}" for op in XLA_SPARSE if op in DUPLICATE_OPS],
            *[f"unsorted:{op}" for op in XLA_SPARSE],
        )
    ],
    expect(
        "empty-row:reduce_max",
        "lowest",
        framework="tensorflow",
        link=TF_UNSORTED_MAX,
        reason="a ragged reduce_max is tf.math.unsorted_segment_max over the row ids, which gives a segment with no "
        "element numeric_limits<T>::lowest() (the dtype's finite minimum), not -inf; no value gets a gradient from it",
    ),
    # -- tf.sparse.to_dense: validated by default, last duplicate wins without validation
    expect(
        "duplicates:to_dense",
        REPEATED,
        framework="tensorflow",
        mode=GRAPH_MODES,
        link=TO_DENSE_VALIDATE,
        reason="validate_indices=True (the default) checks that indices are sorted with no repeats: "
        "'indices[i] = [r,c] is repeated' (InvalidArgumentError); PyTorch's to_dense and JAX's todense sum them",
    ),
    expect(
        "duplicates-grad:to_dense",
        REPEATED,
        framework="tensorflow",
        mode=GRAPH_MODES,
        link=TO_DENSE_VALIDATE,
        reason="the forward's SparseToDense refuses the repeated index, so there is no gradient",
    ),
    *[
        expect(
            key,
            "last",
            framework="tensorflow",
            mode=mode,
            link=TO_DENSE_REPEATED,
            reason="SparseToDense writes each value in turn without accumulating: the last duplicate wins "
            "('intentional', tensorflow#371); " + why,
        )
        for key, mode, why in (
            ("duplicates:to_dense[unvalidated]", None, "validate_indices=False skips the check"),
            ("duplicates:to_dense", "xla", "the XLA kernel validates nothing and scatters without accumulating"),
        )
    ],
    expect(
        "unsorted:to_dense",
        OUT_OF_ORDER,
        framework="tensorflow",
        mode=GRAPH_MODES,
        link=TO_DENSE_VALIDATE,
        reason="validate_indices=True also wants lexicographic order: 'indices[i] = [r,c] is out of order. "
        "Many sparse ops require sorted indices.'; tf.sparse.reorder first, or validate_indices=False",
    ),
    expect(
        "unsorted:softmax",
        "other",
        framework="tensorflow",
        mode=GRAPH_MODES,
        link=SPARSE_SOFTMAX,
        reason="SparseSoftmax documents that its indices are 'sorted in the canonical lexicographic order' and "
        "does not check it: unsorted rows are split where the row index changes, and the values come out wrong "
        "without an error (tf.sparse.reorder first gives the closed form)",
    ),
    # -- JAX has no sparse gradient type
    expect(
        "gather-grad-form",
        "dense",
        framework="jax",
        link=JAX_NO_SPARSE_GRAD,
        reason="the gradient of an indexing op in JAX is a dense array (no IndexedSlices; jax#18601 asks for sparse "
        "gradients)",
    ),
)


# ---------------------------------------------------------------- strategies
def attempt_vjp(runner, program, args, w, **static):
    """``((value, grads), None)``, or ``(None, raises:<Error>)`` where the framework refuses the forward
    or its gradient. The forward is tried first: its refusal is the observation (a tf.function whose
    gradient is an IndexedSlices output fails under XLA with an output-count error before XLA says
    what it cannot compile); an XLA refusal is answered again without compiling."""
    if runner.mode == "xla":
        _, seen = runner.attempt("run", program.of(runner), *args, remember=cmp.xla_refusal, **static)
        if seen is not None:
            return None, seen
    return runner.attempt("vjp", program.of(runner), *args, cotangent=w, remember=cmp.xla_refusal, **static)


#: (flat values N, rows R): each with one dtype, so each compiled mode builds one program per shape
RAGGED_SHAPES = ((5, 3), (6, 4))
K = 4  # ragged gather ids


@dataclasses.dataclass(frozen=True)
class RaggedCase:
    values: np.ndarray  # (N,) distinct, nonzero: no ties for max
    lengths: np.ndarray  # (R,) int64, summing to N, zeros (empty rows) allowed
    default: np.ndarray  # 0-d: to_tensor's default_value
    ids: np.ndarray  # (K,) int32 rows to gather, repeats allowed


@st.composite
def ragged_cases(draw) -> RaggedCase:
    dtype, (n, r) = draw(ss.dtypes_and_shapes(shapes=RAGGED_SHAPES), label="dtype, (N, R)")
    cuts = sorted(draw(st.lists(st.integers(0, n), min_size=r - 1, max_size=r - 1), label="row cuts"))
    lengths = np.diff([0, *cuts, n]).astype(np.int64)
    values = draw(ss.signed_arrays((n,), dtype, unique=True), label="values")
    default = np.asarray(draw(ss.floats(dtype, -4.0, 4.0), label="default"), dtype)
    ids = np.array(draw(st.lists(st.integers(0, r - 1), min_size=K, max_size=K), label="ids"), np.int32)
    return RaggedCase(values, lengths, default, ids)


# ---------------------------------------------------------------- ragged programs
class Ragged(Program):
    """``op`` of the ragged tensor with flat ``values`` and row ``lengths``, as a dense tensor."""

    def tensorflow(tf, values, lengths, default, ids, *, op, n, r):
        if op == "gather":  # its gradient is an IndexedSlices without dense_shape, which a tf.function cannot
            values = tf.reshape(values, [-1])  # return ("Expecting 6 outputs"); Reshape's gradient densifies it
        rt = tf.RaggedTensor.from_row_lengths(values, lengths)
        if op == "reduce_sum":
            return tf.reduce_sum(rt, axis=1)
        if op == "reduce_mean":
            return tf.reduce_mean(rt, axis=1)
        if op == "reduce_max":
            return tf.reduce_max(rt, axis=1)
        if op == "map_flat_values":
            return tf.reduce_sum(tf.ragged.map_flat_values(tf.square, rt), axis=1)
        if op == "to_tensor":
            return rt.to_tensor(default_value=default, shape=[r, n])
        return tf.gather(rt, ids).to_tensor(shape=[K, n])

    def jax(jax, values, lengths, default, ids, *, op, n, r):
        jnp = jax.numpy
        rows = jnp.repeat(jnp.arange(r), lengths, total_repeat_length=n)
        if op == "reduce_sum":
            return jax.ops.segment_sum(values, rows, r)
        if op == "reduce_mean":
            return jax.ops.segment_sum(values, rows, r) / lengths.astype(values.dtype)
        if op == "reduce_max":
            return jax.ops.segment_max(values, rows, r)
        if op == "map_flat_values":
            return jax.ops.segment_sum(jnp.square(values), rows, r)
        pos = jnp.arange(n) - (jnp.cumsum(lengths) - lengths)[rows]
        if op == "to_tensor":
            return jnp.full((r, n), default, values.dtype).at[rows, pos].set(values)
        return jnp.zeros((r, n), values.dtype).at[rows, pos].set(values)[ids]

    def torch(torch, values, lengths, default, ids, *, op, n, r):
        reduce = {"reduce_sum": "sum", "reduce_mean": "mean", "reduce_max": "max"}
        if op in reduce:
            return torch.segment_reduce(values, reduce[op], lengths=lengths)
        if op == "map_flat_values":
            return torch.segment_reduce(values**2, "sum", lengths=lengths)
        rows = torch.repeat_interleave(torch.arange(r, device=values.device), lengths)
        pos = torch.arange(n, device=values.device) - (torch.cumsum(lengths, 0) - lengths)[rows]
        if op == "to_tensor":
            base = default * torch.ones((r, n), dtype=values.dtype, device=values.device)
            return base.index_put((rows, pos), values)
        dense = torch.zeros((r, n), dtype=values.dtype, device=values.device).index_put((rows, pos), values)
        return dense[ids.long()]


def ragged_closed_form(case, op, w):
    """Float64 ``(value, d values, d default)`` of ``sum(w * op(rt))``; an empty row's value is NaN
    here (its observed value is a label of its own)."""
    v, lengths = case.values.astype(np.float64), case.lengths
    r, n = len(lengths), len(v)
    rows = np.repeat(np.arange(r), lengths)
    pos = np.arange(n) - (np.cumsum(lengths) - lengths)[rows]
    w = np.asarray(w, np.float64)
    dd = 0.0
    if op in ("reduce_sum", "reduce_mean", "reduce_max", "map_flat_values"):
        out = np.full(r, np.nan)
        for i in range(r):
            seg = v[rows == i]
            if seg.size:
                out[i] = {
                    "reduce_sum": seg.sum(),
                    "reduce_mean": seg.mean(),
                    "reduce_max": seg.max(),
                    "map_flat_values": np.square(seg).sum(),
                }[op]
        g = {
            "reduce_sum": w[rows],
            "reduce_mean": w[rows] / np.maximum(lengths[rows], 1),
            "reduce_max": w[rows] * (v == out[rows]),
            "map_flat_values": 2 * v * w[rows],
        }[op]
        return out, g, dd
    dense = np.zeros((r, n))
    dense[rows, pos] = v
    if op == "to_tensor":
        mask = np.zeros((r, n), bool)
        mask[rows, pos] = True
        return np.where(mask, dense, float(case.default)), w[rows, pos], float(w[~mask].sum())
    g = np.array([w[case.ids == rows[j], pos[j]].sum() for j in range(n)])
    return dense[case.ids], g, dd


def ragged_scales(case, op, w, ref, ref_gv):
    """Per-element scales (float64) of ``op``'s value and values gradient: the row sums and means of
    ``|values|`` (their terms, which cancel), the sum of ``|w|`` over the gathered rows that read each
    value; elsewhere the element's own magnitude (a max, a copy, a gathered cotangent, w / length, 2 v w)."""
    value = np.abs(ref)
    if op in ("reduce_sum", "reduce_mean"):
        value = np.abs(ragged_closed_form(dataclasses.replace(case, values=np.abs(case.values)), op, w)[0])
    grad = np.abs(ref_gv)
    if op == "gather":
        grad = ragged_closed_form(case, op, np.abs(np.asarray(w, np.float64)))[1]
    return value, grad


def fill_label(x, dtype) -> str:
    """What an empty row holds: ``zero``, ``lowest`` (the dtype's finite minimum), ``-inf``, ``nan``, ``other``."""
    x = np.unique(np.asarray(x, np.float64))
    if x.size != 1:
        return "nan" if np.isnan(x).all() else "mixed"
    names = {0.0: "zero", float(np.finfo(dtype).min): "lowest", -np.inf: "-inf"}
    return "nan" if np.isnan(x[0]) else names.get(float(x[0]), "other")


def _ragged_cotangent(case, op, data):
    r, n = len(case.lengths), len(case.values)
    shape = {"to_tensor": (r, n), "gather": (K, n)}.get(op, (r,))
    return data.draw(ss.cotangents(shape, case.values.dtype, 0.5), label=op)


def _ragged_args(case):
    return case.values, case.lengths, case.default, case.ids


# ---------------------------------------------------------------- ragged properties
@given(case=ragged_cases(), data=st.data())
def test_ragged_gradients_match_the_padded_closed_form(subject, oracles, record, case, data):
    """Each ragged op's value and gradient against the padded dense closed form and the oracles;
    padding gets no gradient from values; what an empty row holds is declared."""
    ws = {op: _ragged_cotangent(case, op, data) for op in RAGGED_OPS}
    record.example(values=case.values, lengths=case.lengths, default=case.default, ids=case.ids, **ws)
    n, r = len(case.values), len(case.lengths)
    empty = case.lengths == 0
    for op in RAGGED_OPS:
        res, seen = attempt_vjp(subject, Ragged, _ragged_args(case), ws[op], op=op, n=n, r=r)
        record.check(EXPECT, **{f"ragged:{op}": seen or "runs"})
        if seen is not None:
            continue
        out, (gv, _, gd, _) = res
        ref, ref_gv, ref_gd = ragged_closed_form(case, op, ws[op])
        full = ~empty if ref.ndim == 1 and len(ref) == r and op != "gather" else np.ones(len(ref), bool)
        at, at_gv = ragged_scales(case, op, ws[op], ref, ref_gv)
        value_ref = ref[full].astype(out.dtype)
        record.close(
            name=f"{op} value", out=out[full], ref=value_ref, oracle="closed-form", scale=capped(at[full], value_ref)
        )
        ref_gv_ = ref_gv.astype(gv.dtype)
        record.close(name=f"{op} d values", out=gv, ref=ref_gv_, oracle="closed-form", scale=capped(at_gv, ref_gv_))
        if op in ("reduce_sum", "reduce_mean", "reduce_max") and empty.any():
            record.check(EXPECT, **{f"empty-row:{op}": fill_label(out[empty], out.dtype)})
        if op == "to_tensor":
            kind = "dropped" if gd is None or not np.any(gd) else "to-default-value"
            # padding cotangents that sum to 0, within rounding of their terms (5 and -5: a thorough run's
            # draw), give the default value a zero gradient either way: such an example cannot tell the two
            # apart and observes nothing (the comparison below still holds the gradient)
            terms = ragged_closed_form(case, op, np.abs(ws[op]))[2]
            cancels = abs(ref_gd) <= cmp.allowed(out.dtype, terms)
            if not (cancels and gd is not None and kind == "dropped"):
                record.check(EXPECT, **{"padding-grad:to_tensor": kind})
            if gd is not None:  # a sum of the padding's cotangents, which may cancel: held at their terms
                record.close(name="to_tensor d default", out=gd, ref=np.asarray(ref_gd, gd.dtype), oracle="closed-form",
                             scale=max(terms, abs(ref_gd)))  # fmt: skip
        for o in oracles:
            theirs, seen_o = attempt_vjp(o, Ragged, _ragged_args(case), ws[op], op=op, n=n, r=r)
            if seen_o is not None:
                record.note(f"{o.id} {op}: {seen_o}; not compared")
                continue
            theirs_value = np.asarray(theirs[0])[full]
            at_o = capped(at[full], theirs_value)
            record.close(name=f"{op} value", out=out[full], ref=theirs_value, oracle=o.id, scale=at_o)
            at_o = capped(at_gv, theirs[1][0])
            record.close(name=f"{op} d values", out=gv, ref=theirs[1][0], oracle=o.id, scale=at_o)
            if op in ("reduce_sum", "reduce_mean", "reduce_max") and empty.any():
                record.observe(**{f"{o.id}:empty-row:{op}": fill_label(np.asarray(theirs[0])[empty], out.dtype)})


# ---------------------------------------------------------------- IndexedSlices
TABLE_SHAPES = ((4, 2), (3, 3))
IDS = 5  # more ids than rows: some row repeats
LR = 0.5
VARIABLES = Variables()


@dataclasses.dataclass(frozen=True)
class SlicesCase:
    table: np.ndarray  # (n, d)
    ids: np.ndarray  # (IDS,) int32 in [0, n): repeats
    w: np.ndarray  # (IDS, d) cotangent of the gathered rows (or the slices' values)


@st.composite
def slices_cases(draw) -> SlicesCase:
    dtype, shape = draw(ss.dtypes_and_shapes(shapes=TABLE_SHAPES), label="dtype, table shape")
    table = draw(ss.float_arrays(dtype=dtype, shape=shape, min_value=-4, max_value=4), label="table")
    ids = np.array(draw(st.lists(st.integers(0, shape[0] - 1), min_size=IDS, max_size=IDS), label="ids"), np.int32)
    w = draw(ss.cotangents((IDS, shape[1]), dtype, 0.5), label="w")
    return SlicesCase(table, ids, w)


def _summed(case) -> np.ndarray:
    out = np.zeros(case.table.shape, np.float64)
    np.add.at(out, case.ids, case.w.astype(np.float64))
    return out


class GatherGrad(Program):
    """The gradient of ``sum(w * gather(table_variable, ids))``: ``(sliced, rows, values, dense)``,
    ``rows``/``values`` the sparse gradient's slices (empty when it is dense), ``dense`` it densified."""

    def tensorflow(tf, table, ids, w, *, sig=None):
        var = VARIABLES.get(tf, table, name="table")
        if in_v1_graph():
            g = tf.gradients(tf.gather(var, ids), var, grad_ys=w)[0]
        else:
            with tf.GradientTape() as tape:
                y = tf.gather(var, ids)
            g = tape.gradient(y, var, output_gradients=w)
        if isinstance(g, tf.IndexedSlices):
            return tf.constant(True), g.indices, g.values, tf.convert_to_tensor(g)
        return tf.constant(False), tf.zeros([0], ids.dtype), tf.zeros([0, tf.shape(table)[1]], table.dtype), g

    def jax(jax, table, ids, w):
        g = jax.vjp(lambda t: t[ids], table)[1](w)[0]
        return False, jax.numpy.zeros([0], ids.dtype), jax.numpy.zeros([0, table.shape[1]], table.dtype), g

    def torch(torch, table, ids, w):
        p = table.clone().requires_grad_(True)
        g = torch.autograd.grad(torch.nn.functional.embedding(ids.long(), p, sparse=True), p, grad_outputs=w)[0]
        if g.is_sparse:  # uncoalesced: one slice per id, as looked up
            return True, g._indices()[0], g._values(), g.coalesce().to_dense()  # noqa: SLF001
        return False, torch.zeros([0], dtype=ids.dtype), torch.zeros([0, table.shape[1]], dtype=table.dtype), g


def grad_form(sliced, rows, values, case) -> str:
    if not sliced:
        return "dense"
    if np.array_equal(rows, case.ids) and np.array_equal(values, case.w):
        return "slices(ids)"
    if np.array_equal(np.sort(rows), np.unique(case.ids)):
        return "slices(coalesced)"
    return "slices(other)"


def _sig(runner, case) -> dict:
    return {"sig": (case.table.dtype.str, case.table.shape)} if runner.framework == "tensorflow" else {}


@given(case=slices_cases())
def test_gather_gradient_is_slices_and_densifies_by_summing(subject, oracles, record, case):
    """The gradient of a gather on a variable: its form (slices per id, or dense), and densified it sums duplicates."""
    record.example(table=case.table, ids=case.ids, w=case.w)
    sliced, rows, values, dense = subject.run(
        GatherGrad.of(subject), case.table, case.ids, case.w, **_sig(subject, case)
    )
    record.check(EXPECT, **{"gather-grad-form": grad_form(bool(sliced), rows, values, case)})
    record.close(name="densified", out=dense, ref=_summed(case).astype(dense.dtype), oracle="closed-form")
    got = {"sliced": ..., "rows": ..., "values": ..., "densified": dense}
    record.against(oracles, GatherGrad, case.table, case.ids, case.w, via="run", got=got)


_BODY_RUNS = [0]  # how often DensifyUnknownShape's Python body ran: once per trace, every call eagerly
UNKNOWN_SHAPE = "dense Tensor of unknown shape"


class DensifyUnknownShape(Program):
    """tf.convert_to_tensor of a gather's IndexedSlices gradient whose dense_shape is not static."""

    def tensorflow(tf, table, ids, w):
        _BODY_RUNS[0] += 1
        table = tf.compat.v1.placeholder_with_default(table, [None, None])  # the static shape erased
        if in_v1_graph():
            g = tf.gradients(tf.gather(table, ids), table, grad_ys=w)[0]
        else:
            with tf.GradientTape() as tape:
                tape.watch(table)
                y = tf.gather(table, ids)
            g = tape.gradient(y, table, output_gradients=w)
        return tf.convert_to_tensor(g)


class _Messages(logging.Handler):
    def __init__(self):
        super().__init__()
        self.seen: list[str] = []

    def emit(self, rec):
        self.seen.append(rec.getMessage())


@on("tensorflow")  # the warning is TensorFlow's: JAX and PyTorch have no IndexedSlices conversion
@given(case=slices_cases())
def test_unknown_shape_densify_warning_is_declared(subject, record, case):
    """Whether densifying IndexedSlices of unknown dense shape warns (warnings module or tensorflow logger)."""
    record.example(table=case.table, ids=case.ids, w=case.w)
    before, handler = _BODY_RUNS[0], _Messages()
    logger = logging.getLogger("tensorflow")
    logger.addHandler(handler)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            dense = subject.run(DensifyUnknownShape.of(subject), case.table, case.ids, case.w)
    finally:
        logger.removeHandler(handler)
    record.close(name="densified", out=dense, ref=_summed(case).astype(dense.dtype), oracle="closed-form")
    if _BODY_RUNS[0] > before:  # traced (or eager) now: the conversion ran in Python during this call
        said = [str(m.message) for m in caught] + handler.seen
        record.check(
            EXPECT, **{"unknown-shape-warning": "emitted" if any(UNKNOWN_SHAPE in s for s in said) else "not-emitted"}
        )


class _TFStep:
    """The variable and Keras SGD of a function/XLA row, built eagerly once per (row, dtype, shape)."""

    def __init__(self, tf, dtype, shape):
        self.var = tf.Variable(tf.zeros(shape, dtype))
        self.opt = tf.keras.optimizers.SGD(LR)
        self.opt.build([self.var])


_STEPS: dict = {}


class SgdStep(Program):
    """The table after one SGD step on the IndexedSlices gradient ``(values w, indices ids)``."""

    def tensorflow(tf, table, ids, w, *, state=None):
        slices = tf.IndexedSlices(w, ids, tf.shape(table))
        if in_v1_graph():
            var = tf.compat.v1.Variable(table)
            train = tf.compat.v1.train.GradientDescentOptimizer(LR).apply_gradients([(slices, var)])
            with tf.control_dependencies([train]):
                return var.read_value()
        if state is None:
            var, opt = tf.Variable(table), tf.keras.optimizers.SGD(LR)
        else:
            var, opt = state.var, state.opt
            var.assign(table)
        opt.apply_gradients([(slices, var)])
        return var.read_value()

    tensorflow.exact_shapes = True  # the Session's variable needs a static shape

    def jax(jax, table, ids, w):
        import optax

        o = optax.sgd(LR)
        updates, _ = o.update(jax.numpy.zeros_like(table).at[ids].add(w), o.init(table), table)
        return optax.apply_updates(table, updates)

    def torch(torch, table, ids, w):
        p = torch.nn.Parameter(table.clone())
        p.grad = torch.sparse_coo_tensor(ids.long()[None], w, table.shape)  # uncoalesced, duplicates kept
        torch.optim.SGD([p], lr=LR).step()
        return p.detach()


def step_rule(new, case) -> str:
    """Which reading of the repeated slices one step applied: ``summed``, ``last``, ``first`` or ``other``."""
    t = case.table.astype(np.float64)
    refs = {"summed": t - LR * _summed(case)}
    for name, order in (("last", range(IDS)), ("first", reversed(range(IDS)))):
        ref = t.copy()
        for i in order:
            ref[case.ids[i]] = t[case.ids[i]] - LR * case.w[i]
        refs[name] = ref
    tol = cmp.GRAD.of(case.table.dtype)
    return next((k for k, ref in refs.items() if cmp.rel_err(new, ref, dtype=case.table.dtype) <= tol), "other")


@given(case=slices_cases())
def test_apply_gradients_sums_repeated_slices(subject, oracles, record, case):
    """One SGD step on IndexedSlices with repeated rows moves each row by lr times its slices' sum."""
    record.example(table=case.table, ids=case.ids, w=case.w)
    static = {}
    if subject.framework == "tensorflow" and subject.mode in ("function", "xla"):
        key = (subject.id, case.table.dtype.str, case.table.shape)
        if key not in _STEPS:
            with subject.module.device(subject.device_name):
                _STEPS[key] = _TFStep(subject.module, case.table.dtype, case.table.shape)
        static = {"state": _STEPS[key]}
    new = subject.run(SgdStep.of(subject), case.table, case.ids, case.w, **static)
    rule = step_rule(new, case)
    record.check(EXPECT, **{"apply_gradients[duplicates]": rule})
    ref = (case.table - LR * _summed(case)).astype(case.table.dtype)
    record.close(name="step", out=new, ref=ref, oracle="closed-form")
    record.against(oracles, SgdStep, case.table, case.ids, case.w, via="run", got={"step": new})


# ---------------------------------------------------------------- SparseTensor
#: (M, K, P, nnz): a (M, K) sparse matrix with nnz entries times a (K, P) dense one
SPARSE_SHAPES = ((3, 4, 2, 5), (4, 3, 3, 6))


@dataclasses.dataclass(frozen=True)
class SparseCase:
    indices: np.ndarray  # (nnz, 2) int64
    values: np.ndarray  # (nnz,) distinct, nonzero
    b: np.ndarray  # (K, P)
    shape: tuple  # (M, K)


@st.composite
def sparse_cases(draw, *, kind="canonical") -> SparseCase:
    """``canonical``: unique indices in row-major order; ``duplicates``: one index twice (adjacent,
    otherwise in order); ``unsorted``: unique indices, not in order."""
    dtype, (m, k, p, nnz) = draw(ss.dtypes_and_shapes(shapes=SPARSE_SHAPES), label="dtype, (M, K, P, nnz)")
    cells = st.integers(0, m * k - 1)
    if kind == "duplicates":
        flat = draw(st.lists(cells, min_size=nnz - 1, max_size=nnz - 1, unique=True), label="cells")
        flat = sorted([*flat, draw(st.sampled_from(flat), label="repeated")])
    else:
        flat = sorted(draw(st.lists(cells, min_size=nnz, max_size=nnz, unique=True), label="cells"))
        if kind == "unsorted":
            rows = [f // k for f in flat]
            # some row's entries apart (a row in blocks would still be grouped right by a kernel
            # that reads runs of equal row ids)
            perm = draw(
                st.permutations(range(nnz)).filter(lambda q: _splits_a_row([rows[i] for i in q])), label="order"
            )
            flat = [flat[i] for i in perm]
    indices = np.array([[f // k, f % k] for f in flat], np.int64)
    values = draw(ss.signed_arrays((nnz,), dtype, unique=True), label="values")
    b = draw(ss.float_arrays(dtype=dtype, shape=(k, p), min_value=-2, max_value=2), label="b")
    return SparseCase(indices, values, b, (m, k))


def _splits_a_row(rows) -> bool:
    """Does some row's run of entries break (``[0, 1, 0]``)?"""
    runs = [r for n, r in enumerate(rows) if n == 0 or rows[n - 1] != r]
    return len(runs) != len(set(runs))


class Sparse(Program):
    """``op`` of the sparse matrix ``(indices, values, shape)`` (and dense ``b``), as a dense tensor."""

    def tensorflow(tf, indices, values, b, *, op, shape):
        sp = tf.SparseTensor(indices, values, shape)
        if op == "sparse_dense_matmul":
            return tf.sparse.sparse_dense_matmul(sp, b)
        if op == "reduce_sum":
            return tf.sparse.reduce_sum(sp, axis=1)
        if op == "softmax":
            return tf.sparse.softmax(sp).values
        if op == "reorder+softmax":
            return tf.sparse.softmax(tf.sparse.reorder(sp)).values
        return tf.sparse.to_dense(sp, validate_indices=op == "to_dense")

    def jax(jax, indices, values, b, *, op, shape):
        from jax.experimental import sparse

        sp = sparse.BCOO((values, indices), shape=shape)
        if op == "sparse_dense_matmul":
            return sp @ b
        if op == "reduce_sum":
            return sparse.bcoo_reduce_sum(sp, axes=(1,)).todense()
        if op.startswith("to_dense"):
            return sp.todense()
        rows = indices[:, 0]  # softmax: BCOO has none; segment ops over the BCOO's data by row
        if op == "reorder+softmax":
            order = jax.numpy.argsort(indices[:, 0] * shape[1] + indices[:, 1])
            values, rows = values[order], rows[order]
        e = jax.numpy.exp(values - jax.ops.segment_max(values, rows, shape[0])[rows])
        return e / jax.ops.segment_sum(e, rows, shape[0])[rows]

    def torch(torch, indices, values, b, *, op, shape):
        sp = torch.sparse_coo_tensor(indices.T, values, shape)
        if op == "sparse_dense_matmul":
            return torch.sparse.mm(sp, b)
        if op == "reduce_sum":
            out = torch.sparse.sum(sp, dim=1)
            return out.to_dense() if out.is_sparse else out
        if op.startswith("to_dense"):
            return sp.to_dense()
        out = torch.sparse.softmax(sp, 1).coalesce().values()  # in row-major order
        if op == "reorder+softmax":
            return out
        return out[torch.argsort(torch.argsort(indices[:, 0] * shape[1] + indices[:, 1]))]  # back to input order


def _entries(case, rule):
    """``[(row, col, value, position)]`` kept under ``rule``: ``sum`` all, ``last``/``first`` one per index."""
    kept: dict = {}
    order = range(len(case.values)) if rule != "first" else reversed(range(len(case.values)))
    for q in order:
        key = tuple(case.indices[q])
        kept.setdefault(key, []).append(q)
        if rule != "sum":
            kept[key] = [q]
    return kept


def sparse_closed_form(case, op, w, rule="sum"):
    """Float64 ``(value, d values, d b)`` of ``sum(w * op)`` with duplicates read by ``rule``."""
    m, k = case.shape
    v, b, w = case.values.astype(np.float64), case.b.astype(np.float64), np.asarray(w, np.float64)
    a = np.zeros((m, k))
    live = np.zeros(len(v), bool)
    for (i, j), qs in _entries(case, rule).items():
        a[i, j] = v[qs].sum()
        live[qs] = True
    i, j = case.indices[:, 0], case.indices[:, 1]
    if op == "sparse_dense_matmul":
        return a @ b, (w @ b.T)[i, j] * live, a.T @ w
    if op == "reduce_sum":
        return a.sum(1), w[i] * live, None
    if op.startswith("to_dense"):
        return a, w[i, j] * live, None
    lin = i * k + j  # softmax over each row's entries (unique indices), in input or sorted order
    order = np.argsort(lin) if op == "reorder+softmax" else np.arange(len(v))
    vs, rows = v[order], i[order]
    y = np.zeros(len(v))
    for r in np.unique(rows):
        s = rows == r
        e = np.exp(vs[s] - vs[s].max())
        y[s] = e / e.sum()
    gs = np.zeros(len(v))
    for r in np.unique(rows):
        s = rows == r
        gs[s] = y[s] * (w[s] - np.dot(w[s], y[s]))
    g = np.zeros(len(v))
    g[order] = gs
    return y, g, None


def _sparse_cotangent(case, op, data):
    m, k = case.shape
    nnz, p = len(case.values), case.b.shape[1]
    shape = {"sparse_dense_matmul": (m, p), "reduce_sum": (m,), "softmax": (nnz,), "reorder+softmax": (nnz,)}
    return data.draw(ss.cotangents(shape.get(op, (m, k)), case.values.dtype, 0.5), label=op)


def _sparse_vjp(runner, case, op, w):
    res, seen = attempt_vjp(runner, Sparse, (case.indices, case.values, case.b), w, op=op, shape=case.shape)
    return (None if res is None else (res[0], res[1][1], res[1][2])), seen


def _sparse_example(record, case, ws):
    record.example(indices=case.indices, values=case.values, b=case.b, shape=case.shape, **ws)


@given(case=sparse_cases(), data=st.data())
def test_sparse_value_gradients_match_closed_form_and_oracles(subject, oracles, record, case, data):
    """Canonical SparseTensor ops: value, d values (and d b) against the closed form and the oracles."""
    ws = {op: _sparse_cotangent(case, op, data) for op in SPARSE_OPS}
    _sparse_example(record, case, ws)
    for op in SPARSE_OPS:
        res, seen = _sparse_vjp(subject, case, op, ws[op])
        record.check(EXPECT, **{f"sparse:{op}": seen or "runs"})
        if seen is not None:
            continue
        out, gv, gb = res
        ref, ref_gv, ref_gb = sparse_closed_form(case, op, ws[op])
        record.close(name=f"{op} value", out=out, ref=ref.astype(out.dtype), oracle="closed-form")
        # softmax's gradient y * (w - <w, y>) cancels: its floor is the cotangent's magnitude
        scale = "inputs" if "softmax" in op else None
        record.close(name=f"{op} d values", out=gv, ref=ref_gv.astype(gv.dtype), oracle="closed-form", scale=scale)
        if ref_gb is not None:
            record.close(name=f"{op} d b", out=gb, ref=ref_gb.astype(gb.dtype), oracle="closed-form")
        for o in oracles:
            theirs, seen_o = _sparse_vjp(o, case, op, ws[op])
            if seen_o is not None:
                record.note(f"{o.id} {op}: {seen_o}; not compared")
                continue
            record.close(name=f"{op} value", out=out, ref=theirs[0], oracle=o.id)
            record.close(name=f"{op} d values", out=gv, ref=theirs[1], oracle=o.id, scale=scale)
            if ref_gb is not None:
                record.close(name=f"{op} d b", out=gb, ref=theirs[2], oracle=o.id)


RULES = ("sum", "last", "first")
GRAD_RULES = {"sum": "each", "last": "last-only", "first": "first-only"}


def _rule_of(out, case, op, w, which) -> str:
    tol = cmp.GRAD.of(case.values.dtype)
    for rule in RULES:
        ref = sparse_closed_form(case, op, w, rule)[which]
        if cmp.rel_err(out, ref, dtype=case.values.dtype) <= tol:
            return rule if which == 0 else GRAD_RULES[rule]
    return "other"


@given(case=sparse_cases(kind="duplicates"), data=st.data())
def test_sparse_duplicate_indices_rule_is_declared(subject, record, case, data):
    """One index twice: each op sums the duplicates, keeps the last or the first, or refuses; and its d values."""
    ws = {op: _sparse_cotangent(case, op, data) for op in DUPLICATE_OPS}
    _sparse_example(record, case, ws)
    for op in DUPLICATE_OPS:
        res, seen = _sparse_vjp(subject, case, op, ws[op])
        rule = seen or _rule_of(res[0], case, op, ws[op], 0)
        grad_rule = seen or _rule_of(res[1], case, op, ws[op], 1)
        record.check(EXPECT, **{f"duplicates:{op}": rule, f"duplicates-grad:{op}": grad_rule})
        if seen is None and rule in RULES:
            ref = sparse_closed_form(case, op, ws[op], rule)[0]
            record.close(name=f"{op} value[{rule}]", out=res[0], ref=ref.astype(res[0].dtype), oracle="closed-form")


@given(case=sparse_cases(kind="unsorted"), data=st.data())
def test_sparse_unsorted_indices_are_declared(subject, record, case, data):
    """Unique indices out of order: each op's value and d values are the closed form, wrong, or refused."""
    ws = {op: _sparse_cotangent(case, op, data) for op in UNSORTED_OPS}
    _sparse_example(record, case, ws)
    tol = cmp.GRAD.of(case.values.dtype)
    for op in UNSORTED_OPS:
        res, seen = _sparse_vjp(subject, case, op, ws[op])
        if seen is None:
            ref, ref_gv, _ = sparse_closed_form(case, op, ws[op])
            fits = cmp.rel_err(res[0], ref, dtype=case.values.dtype) <= tol
            seen = "closed-form" if fits else "other"
            if fits:
                record.close(
                    name=f"{op} d values",
                    out=res[1],
                    ref=ref_gv.astype(res[1].dtype),
                    oracle="closed-form",
                    scale="inputs" if "softmax" in op else None,  # y * (w - <w, y>) cancels
                )
        record.check(EXPECT, **{f"unsorted:{op}": seen})
