"""Self-tests of suite.strategies: bounded values, the shape menu, half-way points."""

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from hypothesis.extra import numpy as hnp

from suite import strategies as ss


@given(x=ss.float_arrays())
def test_float_arrays_are_bounded_finite_and_from_the_menu(x):
    assert x.dtype in (np.float32, np.float64)
    assert (x.dtype, x.shape) in [(np.dtype(d), s) for d, s in ss.PAIR_MENU]
    assert np.all(np.isfinite(x)) and np.all(np.abs(x) <= 10)
    tiny = np.finfo(x.dtype).tiny
    assert not np.any((x != 0) & (np.abs(x) < tiny)), "no subnormals"


@given(xw=ss.values_and_cotangents())
def test_cotangents_match_shape_and_dtype(xw):
    assert xw.w.shape == xw.x.shape and xw.w.dtype == xw.x.dtype


@settings(max_examples=200)
@given(data=st.data())
def test_halfway_arrays_reach_half_way_points(data):
    x = data.draw(ss.float_arrays(shape=(5,), halfway=True))
    assert np.all(np.abs(x) <= 10)


def test_halfway_strategy_can_produce_half_way_points():
    from hypothesis import find

    x = find(ss.float_arrays(shape=(3,), halfway=True), lambda a: np.any(np.abs(a - np.floor(a)) == 0.5))
    assert np.any(np.abs(x - np.floor(x)) == 0.5)


@given(m=ss.masked_arrays())
def test_masks_are_boolean_and_shaped_like_x(m):
    assert m.mask.dtype == np.bool_ and m.mask.shape == m.x.shape


def test_cotangents_reach_signed_zeros_and_tiny_magnitudes():
    """A gradient zeroed where it is small must meet a cotangent that makes it small."""
    from hypothesis import find

    x = np.zeros(5, np.float32)
    tiny = find(ss.like(x), lambda a: np.any((a != 0) & (np.abs(a) < 1e-4)), settings=settings(max_examples=500))
    assert tiny.dtype == np.float32
    neg0 = find(ss.like(x), lambda a: np.any((a == 0) & np.signbit(a)), settings=settings(max_examples=500))
    assert np.signbit(neg0).any()


def test_edge_values_respect_dtype_and_bounds():
    assert all(v >= 0 or v == 0 for v in ss.edge_values(np.float32, ("zero", "tiny"), lo=0.0))
    assert 1e-30 not in ss.edge_values(np.float16, ("tiny",))  # below float16's smallest normal
    assert np.isnan(ss.edge_values(np.float64, ("nan",))[0])
    with pytest.raises(ValueError, match="unknown edges"):
        ss.edge_values(np.float32, ("huge",))


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_edge_values_are_exact_in_their_dtype(dtype):
    """NumPy 1.x (the TF <= 2.17 envs) makes Hypothesis refuse an element that changes when
    cast, so every edge value is already the dtype's own number (1e-5 as float32 is not 1e-5)."""
    for v in ss.edge_values(dtype, ss.EDGES):
        assert np.isnan(v) or float(np.asarray(v, dtype=dtype)) == v, v


def test_the_default_pair_menu_gives_each_dtype_a_scalar_a_vector_and_a_matrix():
    for d in ss.FLOAT_DTYPES:
        ranks = {len(s) for dt, s in ss.PAIR_MENU if np.dtype(dt) == np.dtype(d)}
        assert {0, 1, 2} <= ranks, (d, ranks)
    assert {s for _, s in ss.PAIR_MENU} <= set(ss.SHAPE_MENU)
    assert len(set(ss.PAIR_MENU)) == len(ss.PAIR_MENU) < len(ss.SHAPE_MENU) * len(ss.FLOAT_DTYPES)


@pytest.mark.parametrize("shapes", [((2, 3),), ((), (3,)), ((), (3,), (2, 3)), ss.SHAPE_MENU])
def test_paired_covers_every_shape_and_dtype_with_as_few_signatures_as_the_longer(shapes):
    pairs = ss.paired(shapes)
    assert len(pairs) == max(len(shapes), len(ss.FLOAT_DTYPES))
    assert {s for _, s in pairs} == set(shapes)
    assert {d for d, _ in pairs} == {np.dtype(d) for d in ss.FLOAT_DTYPES}


@settings(max_examples=60)
@given(data=st.data())
def test_dtype_filter_keeps_that_dtypes_pairs(data):
    x = data.draw(ss.float_arrays(dtype=np.float64))
    assert (x.dtype, x.shape) in [(np.dtype(d), s) for d, s in ss.PAIR_MENU]
    d, s = data.draw(ss.dtypes_and_shapes(shapes=((), (3,), (2, 3)), min_dims=1))
    assert len(s) >= 1


def test_paired_and_dtypes_and_shapes_refuse_an_empty_menu():
    with pytest.raises(ValueError, match="at least one shape"):
        ss.paired(())
    with pytest.raises(ValueError, match="no \\(dtype, shape\\) pair"):
        ss.dtypes_and_shapes(shapes=((), (3,)), min_dims=2)


def test_derandomized_draws_ignore_local_modules(tmp_path, monkeypatch):
    """Hypothesis reads constants from the local modules loaded so far into some draws; the
    suite pins that pool (``pin_constant_pool``), so loading one more module (another case
    module, a pytest-xdist worker's different set) leaves a derandomized test's examples as
    they were. Unpinned, this module changed 189 of these 200 draws."""
    from suite.report.plugin import pin_constant_pool

    pin_constant_pool()  # False where a Hypothesis has no such pool: the draws below still say

    def draws():
        out = []

        @settings(max_examples=200, derandomize=True, database=None)
        @given(st.floats(-1e6, 1e6))
        def t(x):
            out.append(x)

        t()
        return out

    before = draws()
    (tmp_path / "adsem_local_constants.py").write_text("MAGIC = 4321.1234\nOTHER = 98765.5\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import adsem_local_constants  # noqa: F401

    after = draws()
    assert after == before and 4321.1234 not in after


def test_cached_factories_keep_one_object_per_argument_set_and_tell_signed_zeros_apart():
    """Composites call their factories on every draw: a cached factory gives back the same
    object for the same arguments, and a different one where arguments are equal but not the
    same value (0.0 and -0.0, 1 and 1.0 and True, a list and its tuple count as one)."""
    calls = []

    @ss.cached
    def floats(lo, hi):
        calls.append((lo, hi))
        return st.floats(lo, hi)

    assert floats(0.0, 1.0) is floats(0.0, 1.0) and len(calls) == 1
    assert floats(-0.0, 1.0) is not floats(0.0, 1.0) and len(calls) == 2
    assert ss.choice([0.0, -0.0]) is ss.choice((0.0, -0.0))
    assert ss.choice((0.0, -0.0)) is not ss.choice((0.0, 0.0))
    assert ss.choice((1,)) is not ss.choice((1.0,)) is not ss.choice((True,))
    assert ss.arrays(np.float32, (2,), elements=floats(0.0, 1.0)) is ss.arrays(
        np.float32, (2,), elements=floats(0.0, 1.0)
    )
    assert ss.either(floats(0.0, 1.0), floats(-0.0, 1.0)) is ss.either(floats(0.0, 1.0), floats(-0.0, 1.0))


def test_cached_strategies_draw_what_fresh_ones_draw():
    """Caching only saves building the strategy again: the derandomized examples are the ones
    the uncached composite draws."""

    def composite(make_arrays, make_choice):
        @st.composite
        def draw_one(draw):
            d = draw(make_choice((np.float32, np.float64)))
            return draw(make_arrays(d, (2, 3), elements=st.floats(-1, 1, width=32))), draw(make_choice((0.0, -0.0)))

        return draw_one()

    def draws(strategy):
        out = []

        @settings(max_examples=60, derandomize=True, database=None)
        @given(strategy)
        def t(x):
            out.append((x[0].dtype.str, x[0].tobytes(), np.signbit(x[1])))

        t()
        return out

    fresh = draws(composite(lambda d, s, elements: hnp.arrays(d, s, elements=elements), st.sampled_from))
    assert draws(composite(ss.arrays, ss.choice)) == fresh


def test_the_largest_policy_draws_one_signature_per_dtype_and_all_draws_the_menu():
    """``largest`` (the quick and ci profiles): each dtype's largest shape of a row's menu, also
    for a menu a case gives; ``all``: the whole menu, as before."""
    try:
        ss.use_signatures("largest")
        drawn = {(x.dtype, x.shape) for x in _many(ss.float_arrays())}
        assert drawn == {(np.dtype(np.float32), (2, 3)), (np.dtype(np.float64), (5,))}
        pairs = {p for p in _many(ss.dtypes_and_shapes(shapes=((1,), (3,), (2, 3), (2, 1))))}
        assert pairs == {(np.dtype(np.float32), (2, 3)), (np.dtype(np.float64), (3,))}
        ss.use_signatures("all")
        assert len({(x.dtype, x.shape) for x in _many(ss.float_arrays())}) > 2
    finally:
        ss.use_signatures("all")
    with pytest.raises(ValueError, match="unknown signature policy"):
        ss.use_signatures("smallest")


def _many(strategy, n=150):
    out = []

    @settings(max_examples=n, database=None, deadline=None)
    @given(v=strategy)
    def collect(v):
        out.append(v)

    collect()
    return out


_PROFILE_PROBE = """
import numpy as np
from hypothesis import given, settings
from suite import strategies as ss

@given(x=ss.float_arrays())
def test_probe(x):
    print(f"PROBE {settings().max_examples} {ss.SIGNATURES['policy']}")
"""


@pytest.mark.parametrize("profile, examples, policy", [("quick", 1, "largest"), ("ci", 5, "largest"),
                                                      ("dev", 20, "all"), ("thorough", 300, "all")])  # fmt: skip
def test_each_profile_sets_its_examples_and_signature_policy(tmp_path, profile, examples, policy):
    """The plugin loads the profile's examples and signature policy before the cases are collected."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    (tmp_path / "test_probe.py").write_text(_PROFILE_PROBE)
    root = Path(__file__).resolve().parents[1]
    args = ["-p", "suite.plugin", "--profile", profile, "-s", "-q", "-p", "no:cacheprovider"]
    p = subprocess.run(
        [sys.executable, "-m", "pytest", *args, str(tmp_path / "test_probe.py")],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=600,
        env={**os.environ, "PYTHONPATH": str(root)},
    )
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    assert f"PROBE {examples} {policy}" in p.stdout
