"""Cumulative products and sums: the gradient of ``tf.math.cumprod`` at zeros, with ``exclusive`` and ``reverse``.

``tf.math.cumprod(x, exclusive=..., reverse=...)`` scans a product along the last axis; element i of
its gradient is, for each output that multiplies ``x_i``, the cotangent times the product of the
other factors (the product-of-others closed form: for ``sum(cumprod(x))`` at ``x = [0, 2, 3]`` it
is ``[1 + 2 + 2*3, 0 + 0*3, 0*2] = [9, 0, 0]``). One entry runs the four flag combinations at once,
one per row of a ``(..., 4, n)`` input (rows: default, ``exclusive``, ``reverse``, both), so the
generic properties hold every combination in every mode against JAX (``jax.lax.cumprod`` with
``reverse=``, exclusive spelled as a shifted output), PyTorch (``torch.cumprod``, flipped for
reverse, shifted for exclusive) and float64 central differences over positive values. Its special
points put a zero pattern (the issue's ``0,2,3``, two zeros ``0,0,3``, a zero at the end
``2,3,0``) in one row and ``1,2,3`` in the others, and classify each element of the gradient
against the one-sided differences of the float64 reference (``sides``): ``cumprod`` is linear in
each element, so those differences are the product-of-others closed form, and ``both``
means every element is it. ``tf.math.cumsum`` with the same four flag combinations is the
control: its gradient is a cumsum of the cotangent and every framework must agree everywhere.

Measured (TF 2.21, JAX 0.10.2, PyTorch 2.13; eager, tf.function, XLA and v1 graph alike) and
declared below:

- TensorFlow divides by ``x``: its Cumprod gradient is ``div_no_nan(cumsum(cumprod(x) * dy,
  exclusive, not reverse), x)``, so wherever ``x_i = 0`` element i is 0 instead of its product of
  others (0/0 gave NaN until ``div_no_nan``, tensorflow#3862; 0 since, tensorflow#119430): at
  ``0,2,3`` the gradient is ``[0, 0, 0]``, not ``[9, 0, 0]``. Where the true element is 0 too
  (``exclusive+reverse`` at ``0,2,3``, ``exclusive`` at ``2,3,0``) the answer is right. So it is
  through TF 2.21 and the nightlies before ``FIXED`` (2.22.0.dev20260627, bisected:
  tensorflow#120282 routes the gradient through zero factors; every element at every zero pattern
  is the product of others since, in every mode). Near 0 the same division loses elements whose
  ``cumprod(x) * dy`` underflows, and its second derivative (PyTorch's too) cancels to errors of
  about eps / x, so cumprod's drawn values start at 1/8 (``POSITIVE``: what was measured there).

Sources: https://github.com/tensorflow/tensorflow/issues/119430 (the bug and the table of wrong
elements), https://github.com/tensorflow/tensorflow/issues/3862 (the division formula and its
NaN at zeros), https://github.com/tensorflow/tensorflow/pull/120282 (the zero-safe fix, merged;
first in tf-nightly 2.22.0.dev20260627, in no release yet),
https://github.com/tensorflow/tensorflow/compare/fe9174988c7...dfb0fe03522 (the bisected range),
https://github.com/tensorflow/tensorflow/blob/master/tensorflow/python/ops/math_grad.py
"""

import numpy as np

from suite import compare as cmp, ops
from suite.behaviours import Floor, behaviour
from suite.expectations import expect
from suite.ops import properties

TF_ISSUE = "https://github.com/tensorflow/tensorflow/issues/119430"
TF_DIVISION = "https://github.com/tensorflow/tensorflow/issues/3862"
TF_FIX = "https://github.com/tensorflow/tensorflow/pull/120282"
#: the first tf-nightly whose Cumprod gradient is the product of others at zeros (bisected; the
#: nightly before, 2.22.0.dev20260626, answers as 2.21)
FIXED = "2.22.0.dev20260627"
TF_MATH_GRAD = "https://github.com/tensorflow/tensorflow/blob/master/tensorflow/python/ops/math_grad.py"
TF_CUMPROD = "https://www.tensorflow.org/api_docs/python/tf/raw_ops/Cumprod"
TORCH_CUMPROD = "https://docs.pytorch.org/docs/stable/generated/torch.cumprod.html"

BEHAVIOUR = behaviour(
    "cumulative-gradients",
    sources=[],
    links=[TF_ISSUE, TF_DIVISION, TF_FIX, TF_MATH_GRAD, TF_CUMPROD, TORCH_CUMPROD],
    floor=Floor(
        "array",
        "Every float comparison is the op table's (the generic rows of the cumprod and cumsum entries); its "
        "special points classify each element by exact one-sided differences. Both entries are mixing "
        "(elementwise=False): a scan's gradient element sums the cotangent times products (or ones) over the row, "
        "so the op table keeps their array-level floor.",
    ),
)

#: (exclusive, reverse) of each row of an entry's input, and the rows' names in the point keys
FLAGS = {
    "default": (False, False),
    "exclusive": (True, False),
    "reverse": (False, True),
    "exclusive+reverse": (True, True),
}
#: (..., 4, n): the four rows, a batch in float32 (the points are (4, 3) rows broadcast over it)
ROWS = ((np.float32, (2, 4, 3)), (np.float64, (4, 3)))
#: the zero patterns of the points, each put in one row, and the row the others hold
PATTERNS = ("0,2,3", "0,0,3", "2,3,0")
FILLER = (1.0, 2.0, 3.0)
#: cumprod's drawn values: zeros are the points' to judge, and near 0 the division formulas fail in
#: their own ways (measured in the thorough profile): TensorFlow's gradient loses an element where
#: cumprod(x) * dy underflows (x = [1.2e-38, 1, 0] in the exclusive row, dy = [0, 0, 0.5]: 0, its
#: forward mode 0.5), and TensorFlow's and PyTorch's second derivatives cancel to errors of about
#: eps / x (TensorFlow -3.7e47 at x = 6e-64 in float64, where JAX gives 0); from 1/8 neither shows
POSITIVE = {"float32": (0.125, 4.0), "float64": (0.125, 4.0)}
#: why: PyTorch's cumprod backward divides by x too, so its float32 second derivative is off by about
#: eps x (terms) / x: 1.8e-5 at x = 0.125 (measured, thorough profile), at the default 2e-5
CUMPROD_TOL = cmp.tolerance(float32=1e-4)

# where TensorFlow's element at a zero is not the product of others (measured in every mode)
DROPPED = {
    "default": PATTERNS,
    "exclusive": ("0,2,3", "0,0,3"),
    "reverse": PATTERNS,
    "exclusive+reverse": ("0,0,3", "2,3,0"),
}
DECLARED = [
    expect(
        f"grad[cumprod@{row}:{pattern}]",
        "mixed:both,zero",
        framework="tensorflow",
        versions=f"<{FIXED}",
        reason="the Cumprod gradient is div_no_nan(cumsum(cumprod(x) * dy, exclusive, not reverse), x): at x_i = 0 "
        "the division gives 0 instead of the product of the other factors (measured at 0,2,3: [0, 0, 0] where the "
        "gradient of sum(cumprod(x)) is [9, 0, 0]); fixed by tensorflow#120282 from tf-nightly 2.22.0.dev20260627 "
        "(bisected), in no release yet",
        link=TF_ISSUE,
    )
    for row, patterns in DROPPED.items()
    for pattern in patterns
]


def _tf(scan):
    def program(tf, x):
        rows = [scan(tf)(x[..., k, :], axis=-1, exclusive=e, reverse=r) for k, (e, r) in enumerate(FLAGS.values())]
        return tf.stack(rows, axis=-2)

    return program


def _jax(scan, one):
    def row(jax, x, exclusive, reverse):
        y = scan(jax)(x, axis=x.ndim - 1, reverse=reverse)
        if not exclusive:
            return y
        ones = jax.numpy.full_like(y[..., :1], one)
        parts = [y[..., 1:], ones] if reverse else [ones, y[..., :-1]]
        return jax.numpy.concatenate(parts, axis=-1)

    def program(jax, x):
        return jax.numpy.stack([row(jax, x[..., k, :], e, r) for k, (e, r) in enumerate(FLAGS.values())], axis=-2)

    return program


def _torch(scan, one):
    def row(torch, x, exclusive, reverse):
        x = x.flip(-1) if reverse else x
        y = scan(torch)(x, dim=-1)
        y = torch.cat([torch.full_like(y[..., :1], one), y[..., :-1]], dim=-1) if exclusive else y
        return y.flip(-1) if reverse else y

    def program(torch, x):
        return torch.stack([row(torch, x[..., k, :], e, r) for k, (e, r) in enumerate(FLAGS.values())], dim=-2)

    return program


def _numpy(scan, one):
    """The float64 reference: ``scan`` along the last axis of each row with its flags."""

    def reference(x):
        rows = []
        for k, (exclusive, reverse) in enumerate(FLAGS.values()):
            v = np.asarray(x, np.float64)[..., k, :]
            v = v[..., ::-1] if reverse else v
            y = scan(v, axis=-1)
            y = np.concatenate([np.full_like(y[..., :1], one), y[..., :-1]], axis=-1) if exclusive else y
            rows.append(y[..., ::-1] if reverse else y)
        return np.stack(rows, axis=-2)

    return reference


def _point(row, pattern):
    """The zero ``pattern`` in ``row``, :data:`FILLER` in the others; every element the derivative."""
    at = tuple(tuple(float(v) for v in pattern.split(",")) if name == row else FILLER for name in FLAGS)
    return ops.Point(f"{row}:{pattern}", (at,), "both")


ops.register(
    ops.Op(
        "cumprod",
        behaviour="cumulative-gradients",
        tensorflow=_tf(lambda tf: tf.math.cumprod),
        jax=_jax(lambda jax: jax.lax.cumprod, 1.0),
        torch=_torch(lambda torch: torch.cumprod, 1.0),
        reference=_numpy(np.cumprod, 1.0),
        elementwise=False,  # element i of the gradient sums products of the row: an array-level floor
        pairs=ROWS,
        domain=POSITIVE,
        tol=CUMPROD_TOL,
        sides=True,  # each element at a point: is it the reference's derivative (both one-sided differences)?
        points=tuple(_point(row, pattern) for row in FLAGS for pattern in PATTERNS),
        declared=tuple(DECLARED),
    )
)
ops.register(
    ops.Op(
        "cumsum",  # the control: the same rows, a gradient with no division
        behaviour="cumulative-gradients",
        tensorflow=_tf(lambda tf: tf.math.cumsum),
        jax=_jax(lambda jax: jax.lax.cumsum, 0.0),
        torch=_torch(lambda torch: torch.cumsum, 0.0),
        reference=_numpy(np.cumsum, 0.0),
        elementwise=False,
        pairs=ROWS,
    )
)

properties.bind(globals(), "cumulative-gradients")
