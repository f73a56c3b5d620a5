"""Hypothesis profiles of the suite and the pinned constant pool (the same draws in any
selection, worker or shard)."""

from __future__ import annotations

from hypothesis import HealthCheck, settings

from suite.options import PROFILE_EXAMPLES as N

# function_scoped_fixture: ``record`` is meant to be shared by all examples of a test
# (it accumulates observations across them); ``subject``/``oracles`` are stateless
# handles to cached runners. too_slow: the first examples include tracing and XLA
# compilation, which is a one-off cost per test, not slow data generation.
_SUPPRESS = [HealthCheck.function_scoped_fixture, HealthCheck.too_slow]


def register_profiles() -> None:
    """The Hypothesis profiles of ``suite.options.PROFILES`` (registered when a session runs cases)."""
    settings.register_profile("dev", max_examples=N["dev"], deadline=None, suppress_health_check=_SUPPRESS)
    for name in ("quick", "ci"):
        settings.register_profile(
            name,
            max_examples=N[name],
            deadline=None,
            derandomize=True,
            print_blob=True,
            suppress_health_check=_SUPPRESS,
            database=None,
        )
    settings.register_profile("thorough", max_examples=N["thorough"], deadline=None, suppress_health_check=_SUPPRESS)


def pin_constant_pool() -> bool:
    """Make a derandomized example depend on its test alone. Hypothesis mixes into ~5% of its
    choices constants it reads from the *local* modules loaded so far (not site-packages, not
    test files); which of ours are loaded differs between a whole run, one module, a
    pytest-xdist worker, a shard and an installed wheel, so the same ci test drew different
    examples in each (seen: a whole-suite failure that one module's run did not draw, and a
    ``--jobs 2`` run that drew an example the serial run did not). An empty pool, the same
    everywhere, removes that dependence. Returns False where this Hypothesis has no such pool
    (older releases; ``test_derandomized_draws_ignore_local_modules`` checks the draws either way)."""
    try:
        from hypothesis.internal.conjecture import providers
        from hypothesis.internal.constants_ast import Constants
    except ImportError:
        return False
    if not callable(getattr(providers, "_get_local_constants", None)):
        return False
    empty = Constants()
    providers._get_local_constants = lambda: empty
    cache = getattr(getattr(providers, "CONSTANTS_CACHE", None), "cache", None)
    if cache is not None:  # choices permitted per constraint, computed from the old pool
        cache.clear()
    return True
