"""Self-tests of the command line: list, clear errors for bad input."""
import subprocess
import sys

from suite import cli


def test_list_prints_every_behaviour(capsys):
    assert cli.main(["list"]) == 0
    out = capsys.readouterr().out
    for b in ("straight-through-estimator", "partial-stop-gradient", "per-occurrence-gradients"):
        assert b in out


def test_unknown_behaviour_is_a_clear_error(capsys):
    assert cli.main(["run", "--behaviour", "straight-through-estimatr"]) == 2
    err = capsys.readouterr().err
    assert "unknown behaviour 'straight-through-estimatr'" in err and "did you mean 'straight-through-estimator'" in err


def test_bad_flag_exits_2_with_usage():
    p = subprocess.run([sys.executable, "-m", "suite", "run", "--no-such-flag"], capture_output=True, text=True)
    assert p.returncode == 2 and "unrecognized arguments: --no-such-flag" in p.stderr


def test_bad_profile_exits_2():
    p = subprocess.run([sys.executable, "-m", "suite", "run", "--profile", "fast"], capture_output=True, text=True)
    assert p.returncode == 2 and "invalid choice: 'fast'" in p.stderr
