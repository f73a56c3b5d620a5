"""Self-tests of the fault catalogue and the self-check (a fast subset; tox -e faults runs all)."""

import subprocess
import sys

import pytest

from suite import behaviours as bh
from suite.faults import CATALOGUE


def test_every_fault_names_known_behaviours_and_every_behaviour_has_a_fault():
    known = bh.discover()
    for f in CATALOGUE.values():
        assert f.breaks and set(f.breaks) <= set(known), f"{f.name} names {f.breaks}"
        assert f.description
    covered = {b for f in CATALOGUE.values() for b in f.breaks}
    assert set(known) <= covered, f"behaviours with no fault: {sorted(set(known) - covered)}"


def test_unknown_fault_is_a_clear_error():
    p = subprocess.run(
        [sys.executable, "-m", "suite", "faults", "--fault", "no-such-fault"], capture_output=True, text=True
    )
    assert p.returncode == 2 and "unknown fault(s) no-such-fault" in p.stderr


@pytest.mark.slow
def test_faults_command_kills_a_fault_and_prints_the_matrix():
    p = subprocess.run(
        [sys.executable, "-m", "suite", "faults", "--fault", "stop-gradient-identity"],
        capture_output=True,
        text=True,
        timeout=1500,
    )
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-2000:]
    assert "stop-gradient-identity: killed" in p.stdout
    assert "kill rate: 1/1 (100%)" in p.stdout
    assert "| stop-gradient-identity | straight-through-estimator |" in p.stdout
