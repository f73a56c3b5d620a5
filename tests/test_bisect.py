"""``autodiff-semantics bisect`` against a fake package index and a fake runner: the search
places each change between two adjacent nightlies, splits keys that flip on different builds,
reports every flip it finds, says when a change predates the oldest nightly, steps around a
build that cannot be installed, and resumes an interrupted search without probing again."""

import json

import pytest

from suite import bisection as bs, cli, nightlies

NIGHTLIES = [f"2.22.0.dev202603{d:02d}" for d in range(1, 21)]  # 20 builds, oldest first


def fake_runner(truth, calls=None, broken=()):
    """A probe that answers ``truth[(test, key)](index)`` for each asked test, as the suite's report would."""

    def probe(version, tests):
        if calls is not None:
            calls.append((version, tuple(tests)))
        if version in broken:
            raise bs.ProbeError("no wheel for this machine")
        i = NIGHTLIES.index(version)
        observed = {}
        for (test, key), f in truth.items():
            if test in tests:
                observed.setdefault(test, {bs.OUTCOME: "passed"})[key] = f(i)
        return bs.Probe(f"v2.22.0-{i}-g{i:07x}abc", observed)

    return probe


def search(truth, watches, **kw):
    state = bs.new_state("old.json", "new.json", NIGHTLIES, watches)
    calls = []
    n = bs.run(state, fake_runner(truth, calls, **kw), save=lambda s: None)
    return state, calls, n, {(r["test"], r["key"]): r for r in bs.results(state)}


def step(at, old="zero", new="nan"):
    return lambda i: old if i < at else new


def test_a_single_flip_is_placed_between_adjacent_nightlies_in_log_probes():
    state, calls, n, res = search({("t", "k"): step(13)}, [bs.Watch("t", "k", "zero", "nan")])
    r = res[("t", "k")]
    assert r["status"] == "placed"
    assert [(f["last_old"], f["first_new"], f["from"], f["to"]) for f in r["flips"]] == [
        (NIGHTLIES[12], NIGHTLIES[13], "zero", "nan")
    ]
    f = r["flips"][0]
    assert f["first_date"] == "2026-03-14" and f["adjacent"]
    assert f["compare"] == f"{bs.TF_REPO}/compare/{12:07x}abc...{13:07x}abc"
    assert n <= 2 + 5  # the two ends, then halving 19 gaps
    assert bs.first_seen(state)[("t", "k")]["first_new"] == NIGHTLIES[13]


def test_keys_that_flip_on_different_nightlies_are_split_and_each_placed():
    truth = {("a", "k"): step(4), ("b", "k"): step(15), ("b", "k2"): step(15, "1", "2"), ("c", "k"): step(4)}
    ws = [bs.Watch("a", "k", "zero", "nan"), bs.Watch("b", "k", "zero", "nan"), bs.Watch("b", "k2", "1", "2")]
    ws.append(bs.Watch("c", "k", "zero", "nan"))
    state, calls, n, res = search(truth, ws)
    firsts = {k: r["flips"][0]["first_new"] for k, r in res.items()}
    assert firsts == {
        ("a", "k"): NIGHTLIES[4],
        ("c", "k"): NIGHTLIES[4],
        ("b", "k"): NIGHTLIES[15],
        ("b", "k2"): NIGHTLIES[15],
    }
    assert all(r["status"] == "placed" for r in res.values())
    # keys that flip together are probed together: a, c share every probe after the split
    assert n <= 2 + 2 * 5
    assert all(("a" in tests) == ("c" in tests) for _, tests in calls)


def test_two_probes_at_once_place_every_change_where_one_at_a_time_does():
    truth = {("a", "k"): step(4), ("b", "k"): step(15), ("c", "k"): step(9, "1", "2")}
    ws = [bs.Watch("a", "k", "zero", "nan"), bs.Watch("b", "k", "zero", "nan"), bs.Watch("c", "k", "1", "2")]
    _, _, serial, one = search(truth, ws)
    state = bs.new_state("old.json", "new.json", NIGHTLIES, ws)
    calls = []
    n = bs.run(state, fake_runner(truth, calls), save=lambda s: None, jobs=2)
    two = {(r["test"], r["key"]): r for r in bs.results(state)}
    assert {k: r["flips"] for k, r in two.items()} == {k: r["flips"] for k, r in one.items()}
    assert all(r["status"] == "placed" for r in two.values())
    assert len({v for v, _ in calls}) == len(calls) == n  # no nightly probed twice


def test_a_key_that_flips_back_and_forth_is_reported_with_every_flip_found():
    # key k goes zero -> nan at 10, back to zero at 15, nan again at 18; key j (same row) flips at 16,
    # so the search also probes inside k's dip
    def k(i):
        return "nan" if 10 <= i < 15 or i >= 18 else "zero"

    truth = {("t", "k"): k, ("t", "j"): step(16, "1", "2")}
    state, calls, n, res = search(truth, [bs.Watch("t", "k", "zero", "nan"), bs.Watch("t", "j", "1", "2")])
    flips = [(f["last_old"], f["first_new"], f["from"], f["to"]) for f in res[("t", "k")]["flips"]]
    assert flips == [
        (NIGHTLIES[9], NIGHTLIES[10], "zero", "nan"),
        (NIGHTLIES[14], NIGHTLIES[15], "nan", "zero"),
        (NIGHTLIES[17], NIGHTLIES[18], "zero", "nan"),
    ]
    assert res[("t", "k")]["status"] == "placed"
    assert bs.first_seen(state)[("t", "k")]["first_new"] == NIGHTLIES[18]  # the flip that stayed


def test_a_change_already_in_the_oldest_nightly_is_reported_as_such_not_guessed():
    state, calls, n, res = search({("t", "k"): lambda i: "nan"}, [bs.Watch("t", "k", "zero", "nan")])
    assert res[("t", "k")]["status"] == "before the oldest nightly" and res[("t", "k")]["flips"] == []
    assert n == 2 and [v for v, _ in calls] == [NIGHTLIES[0], NIGHTLIES[-1]]


def test_a_newest_nightly_that_does_not_answer_the_reports_new_value_is_not_reproduced():
    state, calls, n, res = search({("t", "k"): lambda i: "zero"}, [bs.Watch("t", "k", "zero", "nan")])
    assert res[("t", "k")]["status"] == "not reproduced"


def test_a_nightly_that_cannot_be_installed_is_set_aside_and_its_neighbours_probed():
    broken = {NIGHTLIES[13]}
    state, calls, n, res = search({("t", "k"): step(13)}, [bs.Watch("t", "k", "zero", "nan")], broken=broken)
    f = res[("t", "k")]["flips"][0]
    assert (f["last_old"], f["first_new"]) == (NIGHTLIES[12], NIGHTLIES[14]) and f["adjacent"]  # adjacent among usable
    assert state["broken"] == {NIGHTLIES[13]: "no wheel for this machine"}


def test_an_interrupted_search_resumes_from_its_saved_state_without_probing_again(tmp_path):
    path = tmp_path / "bisect.json"
    truth = {("a", "k"): step(7), ("b", "k"): step(16)}
    ws = [bs.Watch("a", "k", "zero", "nan"), bs.Watch("b", "k", "zero", "nan")]
    _, _, whole, expected = search(truth, ws)

    calls = []
    answer = fake_runner(truth, calls)

    def interrupted(version, tests):
        if len(calls) == 3:
            raise KeyboardInterrupt
        return answer(version, tests)

    state = bs.new_state("old.json", "new.json", NIGHTLIES, ws)
    with pytest.raises(KeyboardInterrupt):
        bs.run(state, interrupted, save=lambda s: bs.save_state(s, path))
    saved = bs.load_state(path)
    assert len(saved["probes"]) == 3
    resumed = bs.resume(saved, bs.new_state("old.json", "new.json", NIGHTLIES, ws))
    more = []
    n = bs.run(resumed, fake_runner(truth, more), save=lambda s: bs.save_state(s, path))
    assert 3 + n == whole
    assert not {v for v, _ in more} & {v for v, _ in calls}
    assert {(r["test"], r["key"]): r["flips"] for r in bs.results(resumed)} == {
        k: r["flips"] for k, r in expected.items()
    }
    # a state of other reports is not reused
    assert bs.resume(saved, bs.new_state("x.json", "new.json", NIGHTLIES, ws))["probes"] == {}


def test_a_corrupt_state_is_an_error_naming_the_file(tmp_path):
    bad = tmp_path / "bisect.json"
    bad.write_text("{not json")
    with pytest.raises(bs.BisectError, match="bisect.json: not a bisect state"):
        bs.load_state(bad)


def test_the_fake_index_offers_only_nightlies_with_a_wheel_for_this_machine(monkeypatch):
    linux = "tf_nightly-{}-cp311-cp311-manylinux_2_27_x86_64.whl"
    releases = {
        "2.21.0.dev20260202": [{"filename": linux.format("2.21.0.dev20260202")}],
        "2.22.0.dev20260204": [{"filename": "tf_nightly-2.22.0.dev20260204-cp311-cp311-macosx_12_0_arm64.whl"}],
        "2.22.0.dev20260205": [],
        "2.23.0.dev20261026": [{"filename": linux.format("2.23.0.dev20261026")}],
        "2.23.0.dev20261027": [{"filename": linux.format("2.23.0.dev20261027")}],
    }
    monkeypatch.setattr(nightlies, "_index", lambda name, timeout=60.0: {"releases": releases})
    monkeypatch.setattr(nightlies, "installable", lambda files: any("manylinux" in f["filename"] for f in files))
    offered = nightlies.offered()
    assert bs.candidates(offered, "2.21.0", "2.23.0-dev20261026") == ["2.21.0.dev20260202", "2.23.0.dev20261026"]
    assert bs.candidates(offered, "2.21.0.dev20260202", "2.23.0.dev20261027")[-1] == "2.23.0.dev20261027"


def _report(version, rows):
    return {
        "schema_version": 1,
        "created": "2026-11-28T00:00:00Z",
        "environment": {"frameworks": {"tensorflow": {"version": version, "devices": ["cpu"]}}},
        "results": [
            {
                "behaviour": "b",
                "test": t,
                "framework": t.split("[")[1].split("-")[0],
                "mode": t.split("-")[1],
                "device": "cpu",
                "outcome": "passed",
                "observed": obs,
                "expected": {k: v for k, v in obs.items()},
                "max_rel_err": {},
                "duration_s": 0.1,
            }
            for t, obs in rows.items()
        ],
    }


def test_the_command_bisects_two_reports_with_a_fake_index_and_runner(tmp_path, monkeypatch, capsys):
    t_tf, t_jax = "cases/test_b.py::test_x[tensorflow-eager-cpu]", "cases/test_b.py::test_x[jax-eager-cpu]"
    old = tmp_path / "tf-2.21.0.json"
    new = tmp_path / "tf-2.22.0-dev20260320.json"
    old.write_text(json.dumps(_report("2.21.0", {t_tf: {"k": "zero"}, t_jax: {"k": "zero"}})))
    new.write_text(json.dumps(_report("2.22.0-dev20260320", {t_tf: {"k": "nan"}, t_jax: {"k": "nan"}})))
    monkeypatch.setattr(nightlies, "offered", lambda name="tf-nightly": NIGHTLIES)
    calls = []
    monkeypatch.setattr(
        nightlies.Envs, "probe", lambda self, v, tests: fake_runner({(t_tf, "k"): step(11)}, calls)(v, tests)
    )
    state = tmp_path / "bisect.json"
    assert cli.main(["bisect", str(old), str(new), "--state", str(state), "--cache-dir", str(tmp_path / "c")]) == 0
    out = capsys.readouterr().out
    assert f"first in tf-nightly {NIGHTLIES[11]} (2026-03-12)" in out and "compare/" in out
    saved = json.loads(state.read_text())
    assert [r["key"] for r in saved["results"]] == ["k"]  # the JAX row is not TensorFlow's to bisect
    assert all(t_jax not in tests for _, tests in calls)
    # run again: everything is placed, nothing is probed
    calls.clear()
    assert cli.main(["bisect", str(old), str(new), "--state", str(state), "--cache-dir", str(tmp_path / "c")]) == 0
    assert calls == []


def test_a_probe_whose_run_writes_no_report_names_the_log_that_holds_its_output(tmp_path, monkeypatch):
    fake = tmp_path / "python"  # stands for a nightly's python: says why it failed, writes nothing
    fake.write_text("#!/bin/sh\necho 'ImportError: the nightly is broken'\nexit 1\n")
    fake.chmod(0o755)
    envs = nightlies.Envs(tmp_path / "cache", out=lambda line: None)
    monkeypatch.setattr(nightlies.Envs, "env", lambda self, version: fake)
    with pytest.raises(bs.ProbeError, match="probe.log") as err:
        envs.probe(NIGHTLIES[0], ["cases/test_x.py::test_y"])
    log = tmp_path / "cache" / "runs" / NIGHTLIES[0] / "probe.log"
    assert str(log) in str(err.value)
    assert "the nightly is broken" in log.read_text()
