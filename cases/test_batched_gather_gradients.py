"""Batched gather gradients: tf.gather with batch_dims and axis > batch_dims, every (axis, batch_dims) pair.

``tf.gather(params, indices, axis=a, batch_dims=b)`` picks, in each of the ``b`` leading batch
positions, the slices of ``params`` along axis ``a`` that that batch's own row of ``indices``
names. Its gradient is the transpose: each cotangent element is added back into the params
slot it came from (a scatter-add, accumulating repeated indices). ``_GatherV2Grad`` computes
it by moving axis ``a`` next to the batch axes, offsetting each batch's indices by its place
in the flattened params and summing with ``UnsortedSegmentSum``; tensorflow#50075 (TF 2.5)
reports that with ``batch_dims=1, axis=2`` this raised ``segment_ids[1] = 20 is out of range
[0, 12)`` for params of shape (4, 20, 3) and gave wrong gradients for (4, 2, 3): the batch
offsets were not those of the gathered axis.

One op-table entry, ``gather``, whose program runs every pair at once (:data:`PAIRS`):
``params`` is a (6, 12) array whose flattened elements are cut, in order, into each pair's
params (6 or 12 elements: a row holds two pairs or one), gathered with the pair's fixed
indices (repeated, so the gradient accumulates), flattened and padded with zeros to the
size of its params. A pair's gradient is its own slice of the gradient, so a failure still
shows which pair broke, for the rows of one entry instead of nine entries'. 72 elements are
as many as Hypothesis draws four arrays of in one example without exceeding its entropy
limit (measured: 88 fail its health check), hence the small shapes and the size-1 axes. The
pairs: params of rank 3 with indices of rank 2 (3 for ``batch_dims=2``), every ``batch_dims`` in
0..2 with ``axis`` in ``batch_dims``..2; ``batch_dims=1, axis=2`` with the middle axis wider than the gathered one
(3 > 2: where TF 2.5 raised), narrower (2 < 3: where it was wrong), and with indices of rank 1,
equal to ``batch_dims`` (the issue's program); ``batch_dims=-1, axis=-1`` (the gradient's
branch for a negative ``batch_dims``). The generic properties check it in every mode against
``jnp.take_along_axis`` and ``torch.gather`` (the indices broadcast to the result's rank) and
against the float64 NumPy gather (``np.take`` per batch) and its central differences: a linear
map's differences are its transpose, the scatter-add of the cotangent.

Measured with TF 2.21 (eager, tf.function, XLA, v1 graph): every pair agrees with JAX,
PyTorch and the differences, so nothing is declared.

Sources: https://github.com/tensorflow/tensorflow/issues/50075,
https://github.com/tensorflow/tensorflow/blob/master/tensorflow/python/ops/array_grad.py
"""

import dataclasses

import numpy as np

from suite import ops
from suite.behaviours import Floor, behaviour
from suite.ops import properties

TF_ISSUE = "https://github.com/tensorflow/tensorflow/issues/50075"
TF_GATHER = "https://www.tensorflow.org/api_docs/python/tf/gather"
TF_ARRAY_GRAD = "https://github.com/tensorflow/tensorflow/blob/master/tensorflow/python/ops/array_grad.py"
JAX_TAKE_ALONG = "https://docs.jax.dev/en/latest/_autosummary/jax.numpy.take_along_axis.html"
TORCH_GATHER = "https://pytorch.org/docs/stable/generated/torch.gather.html"

BEHAVIOUR = behaviour(
    "batched-gather-gradients",
    sources=[],
    links=[TF_ISSUE, TF_GATHER, TF_ARRAY_GRAD, JAX_TAKE_ALONG, TORCH_GATHER],
    floor=Floor(
        "array",
        "Every float comparison is the op table's (the generic rows of the one gather entry). The entry is mixing "
        "(elementwise=False): a params element's gradient sums the cotangents of every repeat of its index, so "
        "the op table keeps its array-level floor.",
    ),
)


@dataclasses.dataclass(frozen=True)
class Pair:
    """One gather of the program: ``params`` of ``shape`` (6 or 12 elements), its ``indices``,
    ``axis`` and ``batch_dims`` as passed to ``tf.gather`` (negative ones included)."""

    name: str
    shape: tuple
    indices: np.ndarray
    axis: int
    batch_dims: int

    @property
    def normal(self) -> tuple:
        """(axis, batch_dims), each made non-negative."""
        axis = self.axis + len(self.shape) if self.axis < 0 else self.axis
        return axis, self.batch_dims + self.indices.ndim if self.batch_dims < 0 else self.batch_dims

    @property
    def along(self) -> tuple:
        """The gather as one ``take_along_axis``: (params' shape with a size-1 axis before the
        gathered one for each further index dimension, the indices (int64) in that rank with
        size-1 axes where they broadcast, the gathered axis, the result's shape). Indices of rank
        ``batch_dims`` gather along a size-1 index axis that the final reshape drops."""
        axis, b = self.normal
        idx = self.indices if self.indices.ndim > b else self.indices[..., None]
        r, rest = idx.ndim - b, len(self.shape) - axis - 1
        shape = self.shape[:axis] + (1,) * (r - 1) + self.shape[axis:]
        index = idx.reshape(idx.shape[:b] + (1,) * (axis - b) + idx.shape[b:] + (1,) * rest).astype(np.int64)
        return shape, index, axis + r - 1, self.shape[:axis] + idx.shape[b:] + self.shape[axis + 1 :]


def _i(*rows):
    return np.array(rows, np.int32)


#: Every pair, in the order of the flattened params: rows 0 and 1 of the params hold two pairs
#: each, rows 2, 3 and 4 one each, row 5 the last two. The indices repeat, so their gradients
#: accumulate.
PAIRS = (
    Pair("batch_dims=0,axis=0", (3, 2, 1), _i([2, 0, 2]), 0, 0),
    Pair("batch_dims=0,axis=1", (2, 3, 1), _i([2, 0, 2]), 1, 0),
    Pair("batch_dims=0,axis=2", (2, 1, 3), _i([1], [1], [0]), 2, 0),
    Pair("batch_dims=1,axis=1", (2, 3, 1), _i([2, 2, 0], [1, 0, 1]), 1, 1),
    Pair("batch_dims=1,axis=2,wide", (2, 3, 2), _i([1, 1], [0, 1]), 2, 1),
    Pair("batch_dims=1,axis=2,narrow", (2, 2, 3), _i([2, 2, 0], [1, 0, 1]), 2, 1),
    Pair("batch_dims=1,axis=2,rank-1-indices", (2, 3, 2), _i(1, 0), 2, 1),
    Pair("batch_dims=2,axis=2", (2, 1, 3), _i([[2, 2, 0]], [[1, 0, 1]]), 2, 2),
    Pair("batch_dims=-1,axis=-1", (2, 1, 3), _i([0, 2, 2], [1, 1, 0]), -1, -1),
)
SHAPE = (6, 12)  # the params: 72 elements, as many as an example's draws afford (Hypothesis' entropy)
STARTS = np.cumsum([0] + [int(np.prod(p.shape)) for p in PAIRS]).tolist()


def _gather(tf, x):
    flat, parts = tf.reshape(x, [-1]), []
    for p, a, b in zip(PAIRS, STARTS, STARTS[1:]):
        y = tf.gather(tf.reshape(flat[a:b], p.shape), p.indices, axis=p.axis, batch_dims=p.batch_dims)
        y = tf.reshape(y, [-1])
        parts.append(tf.pad(y, [[0, b - a - y.shape[0]]]))
    return tf.reshape(tf.concat(parts, 0), SHAPE)


def _take_along_axis(jax, x):
    jnp, flat, parts = jax.numpy, x.reshape(-1), []
    for p, a, b in zip(PAIRS, STARTS, STARTS[1:]):
        shape, index, axis, _ = p.along
        y = jnp.take_along_axis(flat[a:b].reshape(shape), index, axis=axis).reshape(-1)
        parts.append(jnp.pad(y, (0, b - a - y.size)))
    return jnp.concatenate(parts).reshape(SHAPE)


def _torch_gather(torch, x):
    flat, parts = x.reshape(-1), []
    for p, a, b in zip(PAIRS, STARTS, STARTS[1:]):
        shape, index, axis, out = p.along
        params = flat[a:b].reshape(shape).expand(*(-1 if d == axis else n for d, n in enumerate(out)))
        y = torch.gather(params, axis, torch.as_tensor(index, device=x.device).expand(out)).reshape(-1)
        parts.append(torch.nn.functional.pad(y, (0, b - a - y.numel())))
    return torch.cat(parts).reshape(SHAPE)


def _reference(x):
    flat, parts = np.asarray(x, np.float64).reshape(-1), []
    for p, a, b in zip(PAIRS, STARTS, STARTS[1:]):
        axis, n = p.normal
        params = flat[a:b].reshape(p.shape)
        y = np.stack([np.take(params[i], p.indices[i], axis=axis - n) for i in np.ndindex(*p.shape[:n])]).ravel()
        parts.append(np.pad(y, (0, b - a - y.size)))
    return np.concatenate(parts).reshape(SHAPE)


ops.register(
    ops.Op(
        "gather",
        behaviour="batched-gather-gradients",
        tensorflow=_gather,
        jax=_take_along_axis,
        torch=_torch_gather,
        reference=_reference,
        elementwise=False,  # a params element's gradient sums the cotangents of every repeat
        pairs=((np.float32, SHAPE), (np.float64, SHAPE)),
    )
)

properties.bind(globals(), "batched-gather-gradients")
