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


def _row(outcome="passed", framework="torch", mode="eager", device="cpu", declared=None, behaviour="demo"):
    return {
        "behaviour": behaviour,
        "test": f"t[{framework}-{mode}-{device}]",
        "framework": framework,
        "mode": mode,
        "device": device,
        "outcome": outcome,
        "declared": declared or {},
    }


def _decl(**where):
    e = expect("k", "z", reason="r", link="l", **where)
    expectations({"k": "agree"}, e)
    return {**e.as_dict(), "module": "cases.test_demo"}


ENV = {"frameworks": {"torch": {"version": "2.13.0"}, "tensorflow": {"version": "2.21.0"}}}


def test_declarations_count_matches_not_lookups_and_say_what_is_stale():
    from suite.report.schema import declaration_statuses

    d = _decl(framework="torch")
    held = {"k": {"id": d["id"], "held": True}}
    looked_up = {"k": {"id": d["id"], "held": False}}  # the check failed: not a match
    (st,) = declaration_statuses([d], [_row(declared=held), _row(declared=held)], ENV)
    assert (st["matched"], st["status"]) == (2, "matched")
    (st,) = declaration_statuses([d], [_row(outcome="failed", declared=looked_up)], ENV)
    assert (st["matched"], st["status"]) == (0, "unconfirmed")
    (st,) = declaration_statuses([d], [_row()], ENV)
    assert st["status"] == "stale"
    (st,) = declaration_statuses([d], [_row()], ENV, incomplete=["demo"])
    assert st["status"] == "unconfirmed", "a behaviour that did not run whole gives no verdict"
    (st,) = declaration_statuses([d], [_row()], ENV, partial=True)
    assert st["status"] == "unconfirmed"


def test_a_declaration_for_an_absent_device_or_other_release_is_not_applicable_not_stale():
    from suite.report.schema import declaration_statuses

    gpu = _decl(framework="torch", device="gpu")
    rows = [_row(), _row(device="gpu", outcome="skipped")]
    assert declaration_statuses([gpu], rows, ENV)[0]["status"] == "not-applicable"
    old = _decl(framework="tensorflow", versions="<2.16")
    assert declaration_statuses([old], [_row(framework="tensorflow")], ENV)[0]["status"] == "not-applicable"
    assert declaration_statuses([old], [_row(framework="tensorflow", behaviour="other")], ENV) == []


def test_a_declaration_that_a_more_specific_one_shadows_for_a_release_is_not_applicable_there():
    """A framework-wide declaration with a release-scoped one of the same key: on that release
    the lookup chooses the scoped one, so the wide one matched nothing there and is not stale
    (TF 2.12's bincount gradient, JAX 0.4.30's missing dot_product_attention)."""
    from suite.report.schema import declaration_statuses

    wide = expect("k", "new", framework="tensorflow", reason="r", link="l")
    old = expect("k", "old", framework="tensorflow", versions="<2.22", reason="r", link="l")
    expectations({"k": "agree"}, wide, old)
    wide, old = ({**e.as_dict(), "module": "cases.test_demo"} for e in (wide, old))
    held = {"k": {"id": old["id"], "held": True}}
    rows = [_row(framework="tensorflow", declared=held)]
    st = {d["id"]: d["status"] for d in declaration_statuses([wide, old], rows, ENV)}
    assert st == {old["id"]: "matched", wide["id"]: "not-applicable"}
    # without its rival the wide one applies to that row, which did not match it: stale
    assert declaration_statuses([wide], rows, ENV)[0]["status"] == "stale"


def test_every_expected_error_names_its_class_and_a_message_pattern():
    """A declared ``raises:`` must say why too: the class alone passes an error of that
    class raised for any other reason."""
    from suite import behaviours
    from suite.expectations import bare_raises

    behaviours.discover()
    assert bare_raises() == []


def test_raises_matches_class_and_message_and_unavailable_is_only_a_missing_api():
    from suite import compare as cmp
    from suite.expectations import raises

    want = raises("InvalidArgumentError", r"indices\[\d+\] = \d+ is not in")
    InvalidArgumentError = type("InvalidArgumentError", (Exception,), {})
    assert want.matches(cmp.error_name(InvalidArgumentError("indices[1] = 7 is not in [0, 3)")))
    assert not want.matches(cmp.error_name(InvalidArgumentError("Incompatible shapes")))
    assert not want.matches("raises:InvalidArgumentError")  # no message to match
    with pytest.raises(ValueError, match="needs a message pattern"):
        raises("ValueError", "")
    assert cmp.unavailable_or_raised(AttributeError("module has no attribute 'layers'"), "tf.compat.v1.layers") == (
        "unavailable"
    )
    assert cmp.unavailable_or_raised(RuntimeError("eager"), "tf.gradients") == "raises:RuntimeError"


def test_op_table_entries_of_one_module_keep_distinct_declaration_ids():
    """Each op-table entry holds its own declarations; two entries of one module must not share
    ids, or the report (keyed by id) would keep one of them and drop the other's status."""
    import numpy as np

    from suite import ops

    declared = [expect("grad[{}@0]", "nan", framework="jax", reason="r", link="https://example.org/c")]
    made = [
        ops.register(
            ops.Op(
                name,
                behaviour="id-demo",
                tensorflow=abs,
                jax=abs,
                torch=abs,
                reference=np.abs,
                points=(ops.Point("0", (0.0,), "zero"),),
                declared=[
                    expect(d.key.format(name), d.observed, framework="jax", reason="r", link=d.link) for d in declared
                ],
            )  # fmt: skip
        )
        for name in ("first", "second")
    ]
    ids = [e.id for op in made for e in op.expect.declared]
    assert len(ids) == 2 and len(set(ids)) == 2, ids
    assert {op.name for op in ops.entries("id-demo")} == {"first", "second"}
