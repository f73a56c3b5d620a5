"""Indices out of range, classified: which rule a framework applied to each out-of-range id of a
lookup (forward) and where its cotangent went (gradient), shared by the behaviours about ids
as data (gather-out-of-range, lookup-out-of-range).

Ids fall in three out-of-range categories: ``above`` (i >= n), ``negative`` (-n <= i < 0,
NumPy's "count from the end") and ``below`` (i < -n). :func:`observe` runs every API on the
mixed ids in one program, and where a run refuses, each category on its own (the other
out-of-range positions set to 0) to see which one is refused.
"""

from __future__ import annotations

import itertools
import re

import numpy as np
from hypothesis import strategies as st

from suite import compare as cmp
from suite.behaviours import declared_skip

CATEGORIES = ("above", "negative", "below")
TORCH_CUDA_ASSERT = "https://github.com/pytorch/pytorch/issues/55027"


def categories(indices, n) -> np.ndarray:
    """``in-range``, ``above`` (i >= n), ``negative`` (-n <= i < 0) or ``below`` (i < -n) per index.

    >>> categories([0, 5, -1, -6], 5).tolist()
    ['in-range', 'above', 'negative', 'below']
    """
    i = np.asarray(indices)
    return np.where(i >= n, "above", np.where(i >= 0, "in-range", np.where(i >= -n, "negative", "below")))


def ids(n, *, in_range_only=False):
    """A strategy for one id into ``n`` rows: in range, the boundaries (-1, 0, n-1, n, -n,
    -n-1) drawn often, and far outside on each side (``in_range_only``: only [0, n))."""
    inside = st.integers(0, n - 1)
    if in_range_only:
        return inside
    edges = st.sampled_from(sorted({-1, 0, n - 1, n, -n, -n - 1}))
    far = st.one_of(st.integers(n, n + 6), st.integers(-n, -1), st.integers(-n - 6, -n - 1))
    return st.one_of(inside, edges, far)


def every_category(n: int, k: int) -> np.ndarray:
    """``k`` (at least 4) int32 ids into ``n`` rows with each category at least once, for a case
    module's explicit examples: one row's observations never wait for a random draw to reach
    a category.

    >>> every_category(3, 5).tolist(), categories(every_category(1, 4), 1).tolist()
    ([1, 3, -1, -4, 5], ['in-range', 'above', 'negative', 'below'])
    """
    if k < 4:
        raise ValueError(f"{k} ids cannot hold the four categories")
    base = [n // 2, n, -1, -n - 1]
    extra = [n + 2, 0, -n - 3, n - 1]
    return np.array((base + extra * k)[:k], np.int32)


def distinct(dtype, shape, lo=0.5, hi=4.0) -> np.ndarray:
    """Distinct nonzero values of both signs with magnitudes in [lo, hi] (no two rules coincide).

    >>> distinct(np.float32, (3,)).tolist()
    [0.5, -2.25, 4.0]
    """
    n = int(np.prod(shape))
    mags = np.linspace(lo, hi, n) if n > 1 else np.array([lo])
    return (mags * np.where(np.arange(n) % 2 == 0, 1.0, -1.0)).astype(dtype).reshape(shape)


def positive(dtype, shape, lo=0.5, hi=4.0) -> np.ndarray:
    """Distinct positive values in [lo, hi] (cotangents), last first."""
    return np.abs(distinct(dtype, shape, lo, hi)).ravel()[::-1].reshape(shape).copy()


def isolate(indices, n, category) -> np.ndarray:
    """The indices with every out-of-range position not in ``category`` replaced by 0."""
    indices = np.asarray(indices)
    cats = categories(indices, n)
    return np.where((cats == category) | (cats == "in-range"), indices, 0).astype(indices.dtype)


def verdict(labels: set, *, none_fits: str):
    """The one label left; ``none_fits`` if none is; None if several are (cannot tell)."""
    if len(labels) == 1:
        return next(iter(labels))
    return None if labels else none_fits


def classify(out, params, indices) -> dict:
    """The forward observation per out-of-range category present in ``indices``.

    Each out-of-range position is matched against the rules: ``zero-fill`` (a zero row),
    ``nan-fill`` (a NaN row), ``clamp`` (row clip(i, 0, n-1)), ``wrap`` (row i mod n); the
    category's label is the one rule every position of it fits, ``garbage`` if none does,
    and ``None`` where the data cannot tell (n == 1, or clip(i) == i mod n everywhere).
    Params must have distinct nonzero rows. In-range positions are not looked at here.

    >>> classify(np.array([1., 2., 5.]), np.array([1., 2., 3., 4., 5.]), np.array([0, 1, 6]))
    {'above': 'clamp'}
    """
    out, params = np.asarray(out), np.asarray(params)
    n, found = len(params), {}
    for p, (i, c) in enumerate(zip(np.asarray(indices).tolist(), categories(indices, n).tolist())):
        if c == "in-range":
            continue
        row, fits = out[p], set()
        if not np.any(row):
            fits.add("zero-fill")
        if np.all(np.isnan(row)):
            fits.add("nan-fill")
        if np.array_equal(row, params[min(max(i, 0), n - 1)]):
            fits.add("clamp")
        if np.array_equal(row, params[i % n]):
            fits.add("wrap")
        found[c] = found[c] & fits if c in found else fits
    return {c: verdict(s, none_fits="garbage") for c, s in found.items()}


GRAD_RULES = {
    "dropped": lambda i, n: None,
    "clamped-row": lambda i, n: min(max(i, 0), n - 1),
    "wrapped-row": lambda i, n: i % n,
}


def slices_per_row(indices, w, n, rule: dict) -> list[list]:
    """The cotangent slices each of the ``n`` rows receives when every out-of-range category
    follows ``rule`` (category -> a :data:`GRAD_RULES` name); in-range positions reach row i."""
    rows: list[list] = [[] for _ in range(n)]
    for p, (i, c) in enumerate(zip(np.asarray(indices).tolist(), categories(indices, n).tolist())):
        row = i if c == "in-range" else GRAD_RULES[rule[c]](i, n)
        if row is not None:
            rows[row].append(np.asarray(w[p], np.float64))
    return rows


def fitting_rules(indices, n, rules, fits) -> list[dict]:
    """Every assignment of one of ``rules`` to each out-of-range category present in ``indices``
    (of ``n`` rows) for which ``fits(assignment)`` holds: the candidates a result is matched against.

    >>> fitting_rules([0, 6, -1], 5, ("dropped", "clamp"), lambda r: r["above"] == "clamp")
    [{'above': 'clamp', 'negative': 'dropped'}, {'above': 'clamp', 'negative': 'clamp'}]
    """
    present = [c for c in CATEGORIES if c in categories(indices, n)]
    assignments = (dict(zip(present, combo)) for combo in itertools.product(rules, repeat=len(present)))
    return [rule for rule in assignments if fits(rule)]


def matching_rules(got, params, indices, w, *, tol, update=None, dtype=None) -> list[dict]:
    """Every assignment of a rule (``dropped``, ``clamped-row``, ``wrapped-row``) to the
    out-of-range categories present whose implied result matches ``got`` within ``tol``: per
    row, ``update(slices)`` of the cotangent slices the row receives (default: their sum, the
    gradient). ``dtype``: whose rounding sets the floor (default ``got``'s; the float64 rows
    implied would otherwise hold a float32 result at float64's)."""
    params = np.asarray(params)
    dtype = dtype if dtype is not None else np.asarray(got).dtype
    update = update or (lambda slices: np.sum(slices, axis=0) if slices else 0.0)
    n = len(params)

    def fits(rule):
        ref = np.zeros(params.shape, np.float64)
        for row, slices in enumerate(slices_per_row(indices, w, n, rule)):
            ref[row] = update(slices)
        return cmp.rel_err(got, ref, dtype=dtype) <= tol

    return fitting_rules(indices, n, GRAD_RULES, fits)


def label_rules(matches: list[dict], present) -> dict:
    """A category's label: its rule in the ``matches``, ``other`` if none matched, ``None`` if
    several rules match (the data cannot tell them apart)."""
    return {c: verdict({m[c] for m in matches}, none_fits="other") for c in present}


def classify_rows(got, params, indices, w, *, tol, update=None, dtype=None) -> dict:
    """Which params rows received each out-of-range position's cotangent, per category: the
    :func:`label_rules` of the :func:`matching_rules` (``dtype`` as there).

    >>> classify_rows(np.array([1., 10., 0, 0, 0]), np.arange(5.), np.array([0, 1, 6]),
    ...               np.array([1., 10., 100.]), tol=0.0)
    {'above': 'dropped'}
    """
    present = [c for c in CATEGORIES if c in categories(indices, len(params))]
    return label_rules(matching_rules(got, params, indices, w, tol=tol, update=update, dtype=dtype), present)


def classify_grad(grad, params, indices, w, *, tol) -> dict:
    """:func:`classify_rows` of a gradient (each row the sum of the cotangents it received)."""
    return classify_rows(grad, params, indices, w, tol=tol)


def error_site(exc) -> str:
    """Which check refused: ``indices`` (a gather/scatter kernel) or ``segment_ids`` (the
    unsorted_segment_sum that densifies an IndexedSlices gradient)."""
    m = re.search(r"\b(segment_ids|indices)\[\d+\]", str(exc))
    return m.group(1) if m else type(exc).__name__


def observe(subject, record, table, indices, n, apis, kind, run, judge, *, key="{kind}:{api}[{c}]", sites=True):
    """Check the ``kind`` observation of each API per out-of-range category against the
    expectations ``table`` (keys: ``key`` formatted with ``kind``, ``api`` and the category
    ``c``). ``run(apis, ids)`` runs the APIs in one program and returns their results in
    order; ``judge(api, ids, result)`` labels one result per category. All APIs run on the
    mixed ``indices`` first; where that refuses, each API runs alone, and where an API
    refuses the mixed indices, each category runs alone to see which one it refuses. ``sites``:
    record which check refused (``refused-by:<key>``, TensorFlow); off where two kernels that
    check race (a step's lookup and its gradient's segment sum in one graph)."""
    __tracebackhide__ = True
    present = [c for c in CATEGORIES if c in categories(indices, n)]
    if not present:
        return
    try:
        first = dict(zip(apis, run(apis, indices)))
    except Exception as e:  # noqa: BLE001 - a refusal; for a single API it is that API's answer
        first = {apis[0]: e} if len(apis) == 1 else {}
    for api in apis:
        runs = [(indices, present)]
        while runs:
            idx, cats = runs.pop(0)
            try:
                result = first.pop(api) if api in first else run((api,), idx)[0]
                if isinstance(result, Exception):
                    raise result
            except Exception as e:  # the framework's refusal is the observation
                if len(cats) > 1:
                    runs = [(isolate(indices, n, c), [c]) for c in cats]
                    continue
                name = key.format(kind=kind, api=api, c=cats[0])
                record.check(table, **{name: cmp.error_name(e)})
                if sites and subject.framework == "tensorflow":
                    record.observe(**{f"refused-by:{name}": error_site(e)})
                continue
            labels = judge(api, idx, result)
            for c in cats:
                if labels[c] is not None:  # None: this example cannot tell two rules apart
                    record.check(table, **{key.format(kind=kind, api=api, c=c): labels[c]})


def skip_torch_cuda(subject, indices=None, n=None):
    """A declared skip for a PyTorch CUDA row that would index out of range (every such row when
    ``indices`` is None): the device-side assert poisons the process's CUDA context."""
    if subject.framework != "torch" or subject.device != "gpu":
        return
    if indices is None or np.any(categories(indices, n) != "in-range"):
        declared_skip(
            "PyTorch CUDA index kernels fail out-of-range indices with a device-side assert that "
            "poisons the CUDA context for the rest of the process",
            link=TORCH_CUDA_ASSERT,
        )
