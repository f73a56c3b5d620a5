"""Self-tests of suite.expectations: matching, specificity, version ranges, validation."""

import types

import pytest

from suite.expectations import expect, expectations


def runner(framework="tensorflow", mode="eager", device="cpu", version="2.21.0"):
    return types.SimpleNamespace(
        framework=framework, mode=mode, device=device, version=version, id=f"{framework}-{mode}-{device}"
    )


EXPECT = expectations(
    {"k": "agree"},
    expect("k", "tf", framework="tensorflow", reason="r", link="https://example.org/a"),
    expect(
        "k",
        "tf-xla-old",
        framework="tensorflow",
        mode="xla|function",
        versions="<2.16",
        reason="r",
        link="https://example.org/b",
    ),
)


def test_default_applies_where_nothing_is_declared():
    assert EXPECT.lookup("k", runner("jax", "jit"))[0] == "agree"


def test_most_specific_declaration_wins_and_version_range_applies():
    assert EXPECT.lookup("k", runner())[0] == "tf"
    assert EXPECT.lookup("k", runner(mode="xla", version="2.15.1"))[0] == "tf-xla-old"
    assert EXPECT.lookup("k", runner(mode="function", version="2.15.1"))[0] == "tf-xla-old"
    assert EXPECT.lookup("k", runner(mode="xla", version="2.21.0"))[0] == "tf"
    assert EXPECT.lookup("k", runner(mode="graph", version="2.15.1"))[0] == "tf"


def test_declared_divergence_needs_reason_and_link():
    with pytest.raises(ValueError, match="reason and a link"):
        expect("k", "x", framework="tensorflow", reason="", link="")


def test_unknown_key_is_an_error():
    with pytest.raises(KeyError):
        EXPECT.lookup("nope", runner())
    with pytest.raises(ValueError):
        expectations({"a": 1}, expect("b", 2, reason="r", link="l"))


def test_matches_are_counted_for_stale_detection():
    e = expect("k", "z", framework="torch", reason="r", link="l")
    ex = expectations({"k": "agree"}, e)
    assert e.matched == 0
    ex.lookup("k", runner("torch"))
    assert e.matched == 1
