"""The shared case shape: a program's spellings side by side, and ``record.against``."""

import numpy as np
import pytest

from suite import compare as cmp
from suite.program import NoSpelling, Program
from suite.report.record import Record


class Square(Program):
    def tensorflow(tf, x):
        return x * x

    def jax(jax, x):
        return x * x


class FakeRunner:
    """Runs a spelling with NumPy standing in for the framework module."""

    def __init__(self, framework, wrong=0.0):
        self.framework, self.id, self.wrong = framework, f"{framework}-fake-cpu", wrong

    def vjp(self, fn, x, cotangent=None):
        w = np.ones_like(x) if cotangent is None else cotangent
        return fn(np, x), (2 * x * w + self.wrong,)

    def run(self, fn, x):
        return fn(np, x), -x


def test_a_runner_picks_its_own_spelling_and_a_missing_one_is_named():
    assert Square.of("tensorflow")(np, 3.0) == 9.0
    assert Square.of(FakeRunner("jax")) is Square.of("jax")
    assert Square.frameworks() == ("tensorflow", "jax")
    with pytest.raises(NoSpelling, match="Square has no torch spelling"):
        Square.of("torch")


def test_against_compares_every_oracle_output_by_name_and_position():
    x = np.array([1.0, -2.0])
    rec = Record(FakeRunner("tensorflow"))
    raw = rec.against([FakeRunner("jax")], Square, x, got={"value": x * x, "grad": 2 * x}, tol=cmp.EXACT)
    assert len(raw) == 1 and rec.max_rel_err == {"jax": 0.0}
    with pytest.raises(AssertionError, match=r"grad\[tensorflow-fake-cpu\]=.* but jax-fake-cpu gives"):
        rec.against([FakeRunner("jax", wrong=1e-3)], Square, x, got={"value": x * x, "grad": 2 * x})


def test_against_skips_ellipsis_and_takes_a_tolerance_per_name():
    x = np.array([1.0, 2.0])
    rec = Record(FakeRunner("tensorflow"))
    loose = cmp.tolerance(float64=1e-2)
    rec.against([FakeRunner("jax", wrong=1e-3)], Square, x, got={"value": ..., "grad": 2 * x}, tol={"grad": loose})
    with pytest.raises(AssertionError, match="value"):
        rec.against([FakeRunner("jax")], Square, x, via="run", got={"value": x, "neg": -x})


class CountingRunner:
    """The real ``Runner`` machinery over NumPy, counting how often a program really runs."""

    @staticmethod
    def make():
        from suite.frameworks import Framework, Spec
        from suite.frameworks.base import Runner

        class Counting(Runner):
            calls = 0

            def _build(self, builder, static):
                def call(*arrays):
                    type(self).calls += 1
                    return builder(np, *arrays, **static)

                return call

        return Counting(Framework("jax", np, "0", ("cpu",)), Spec("jax", "jit", "cpu"))


def _random(np_, x):
    return x + np.random.default_rng().normal()


_random.fresh = True


def test_a_memoised_oracle_runs_each_example_once_and_hands_out_copies():
    r = CountingRunner.make()
    store = {}
    o = r.memoised(store)
    x = np.array([1.0, 2.0])
    first = o.run(Square.of("jax"), x)
    first[0] = 99.0  # a caller that writes into its answer does not change the next one
    again = o.run(Square.of("jax"), x.copy())
    assert type(r).calls == 1 and again.tolist() == [1.0, 4.0]
    o.run(Square.of("jax"), x.astype(np.float32))  # another dtype, shape or value runs again
    o.run(Square.of("jax"), np.array([1.0, 3.0]))
    assert type(r).calls == 3
    r.run(Square.of("jax"), x)  # the runner itself (a subject) always runs
    assert type(r).calls == 4
    o.memoised({}).run(Square.of("jax"), x)  # another test's store: runs
    assert type(r).calls == 5
    a, b = o.run(_random, x), o.run(_random, x)  # fn.fresh: not a function of its inputs
    assert type(r).calls == 7 and not np.array_equal(a, b)
