"""Closed forms of image resizing as matrices: a resize along one axis is ``M @ x`` for the
matrix of its kernel, and its gradient ``M.T @ dy`` (the cases' references for TensorFlow's,
JAX's and PyTorch's resize gradients)."""

from __future__ import annotations

import numpy as np


def triangle(n_in: int, n_out: int, radius: float = 1.0) -> np.ndarray:
    """The 1-D matrix of the triangle kernel of ``radius`` input pixels at half-pixel centres,
    each row normalised: radius 1 is bilinear, radius in/out its antialiased form.

    >>> triangle(4, 2).round(3).tolist()
    [[0.5, 0.5, 0.0, 0.0], [0.0, 0.0, 0.5, 0.5]]
    """
    centre = (np.arange(n_out)[:, None] + 0.5) * n_in / n_out
    w = np.maximum(0.0, 1.0 - np.abs(np.arange(n_in)[None, :] + 0.5 - centre) / radius)
    return w / w.sum(axis=1, keepdims=True)
