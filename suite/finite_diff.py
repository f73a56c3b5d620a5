"""Finite differences in float64: the oracle that does not use anybody's autodiff.

``vjp(f, *arrays, cotangent=u)`` estimates the gradient of ``sum(u * f(*arrays))`` with
respect to each float array by differences of ``f`` alone, the way
``jax.test_util.check_grads`` and ``tf.test.compute_gradient`` do. ``f`` takes and returns
NumPy float64 arrays: a closed form, or a framework's forward pass run through a runner
(``lambda x: runner.run(Fn.of(runner), x)``), which checks that framework's gradient
against its own forward values.

``side="central"`` is second-order accurate; ``"left"``/``"right"`` are the one-sided
difference quotients a gradient at a kink or a singular point is compared with (they
exist where the function is defined on that side). Steps are scaled to each element's
magnitude; the result is float64 and has each input's shape. ``vjp_with_error`` adds each
element's Richardson error estimate. ``hvp`` differences a gradient function for
second-order checks.

>>> import numpy as np
>>> g, = vjp(lambda x: x ** 3, np.array([2.0]))
>>> bool(abs(g[0] - 12.0) < 1e-6)
True
>>> g, = vjp(np.abs, np.array([0.0]), side="right")
>>> float(g[0])
1.0
"""

from __future__ import annotations

import numpy as np

#: The step for a central difference is eps^(1/3) * max(1, |x|) (error O(h^2)); one-sided, eps^(1/2).
CENTRAL_STEP = np.finfo(np.float64).eps ** (1 / 3)
ONE_SIDED_STEP = np.finfo(np.float64).eps ** (1 / 2)
SIDES = ("central", "left", "right")

#: rtol against a central difference (float64 inputs); the whole table, with the floor that
#: the difference's own error needs, is ``suite.compare.FINITE_DIFF`` (use that).
FD_TOL = 1e-6
#: One-sided differences are first order: ``suite.compare.ONE_SIDED``.
ONE_SIDED_TOL = 1e-5


def _step(x: float, side: str, eps: float | None) -> float:
    base = eps if eps is not None else (CENTRAL_STEP if side == "central" else ONE_SIDED_STEP)
    return base * max(1.0, abs(x))


def vjp(f, *arrays, cotangent=None, side: str = "central", eps: float | None = None) -> list:
    """Gradients of ``sum(cotangent * f(*arrays))`` by differences; ``None`` for non-float inputs.

    ``cotangent=None`` means ones. The function is evaluated ``2 * size`` times (``size``
    one-sided), so keep the inputs small (the suite's shapes are).
    """
    if side not in SIDES:
        raise ValueError(f"side={side!r}: one of {SIDES}")
    xs = [np.asarray(a) for a in arrays]
    base = [x.astype(np.float64) if x.dtype.kind == "f" else x for x in xs]

    def scalar(args) -> float:
        out = np.asarray(f(*args), dtype=np.float64)
        u = np.ones_like(out) if cotangent is None else np.asarray(cotangent, dtype=np.float64)
        return float(np.sum(u * out))

    f0 = scalar(base) if side != "central" else None
    grads = []
    for i, x in enumerate(base):
        if x.dtype.kind != "f":
            grads.append(None)
            continue
        g = np.zeros(x.shape, np.float64)
        for idx in np.ndindex(x.shape):
            h = _step(float(x[idx]), side, eps)

            def at(delta):
                moved = x.copy()
                moved[idx] += delta
                return scalar([*base[:i], moved, *base[i + 1 :]])

            if side == "central":
                g[idx] = (at(h) - at(-h)) / (2 * h)
            elif side == "right":
                g[idx] = (at(h) - f0) / h
            else:
                g[idx] = (f0 - at(-h)) / h
        grads.append(g)
    return grads


def vjp_with_error(f, *arrays, cotangent=None) -> tuple[list, list]:
    """Central differences and, per element, their own error: ``(grads, errors)``.

    ``errors`` is Richardson's ``|D(h) - D(2h)|`` (``None`` for non-float inputs): D's error
    is O(h^2), so the pair differs by three times D(h)'s truncation. A floor set from it
    follows the function's third derivatives where a factorisation's conditioning falls,
    which a floor at the inputs' scale does not. It costs a second pass of ``2 * size``
    calls of ``f``: where ``f`` is a framework's forward pass, a closed bound of the third
    derivative is cheaper (``cases/test_masked_nan_gradients.truncation_scale``).

    >>> (g,), (e,) = vjp_with_error(lambda x: np.exp(x), np.array([1.0]))
    >>> bool(abs(g[0] - np.e) < 1e-9), bool(0 < e[0] < 1e-9)
    (True, True)
    """
    fds = vjp(f, *arrays, cotangent=cotangent)
    fds2 = vjp(f, *arrays, cotangent=cotangent, eps=2 * CENTRAL_STEP)
    return fds, [None if d is None else np.abs(d - d2) for d, d2 in zip(fds, fds2)]


def hvp(grad_f, x, v, *, eps: float | None = None) -> np.ndarray:
    """Hessian-vector product ``H v`` by a central difference of ``grad_f`` along ``v``.

    ``grad_f(x)`` returns the gradient at ``x`` (float64), from any framework or a closed
    form; differencing it checks the second order independently of the second backward pass.

    >>> hv = hvp(lambda x: 3 * x ** 2, np.array([2.0]), np.array([1.0]))
    >>> bool(abs(hv[0] - 12.0) < 1e-6)
    True
    """
    x = np.asarray(x, np.float64)
    v = np.asarray(v, np.float64)
    scale = max(1.0, float(np.max(np.abs(x))) if x.size else 1.0)
    h = (eps if eps is not None else CENTRAL_STEP) * scale
    return (np.asarray(grad_f(x + h * v), np.float64) - np.asarray(grad_f(x - h * v), np.float64)) / (2 * h)
