"""``benchmarks/breakdown.py``: where an example's time goes, per column, from a real run."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PARTS = ("generation", "subject_first", "subject_run", "oracle_first", "oracle_run", "body_other")


@pytest.mark.slow
def test_breakdown_splits_each_columns_test_time_into_its_parts(tmp_path):
    out = tmp_path / "b.json"
    p = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "breakdown.py"), "-b", "straight-through-estimator"]
        + ["--frameworks", "tensorflow,jax", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    got = json.loads(out.read_text())
    cols = got["columns"]
    assert set(cols) == {f"tensorflow-{m}-cpu" for m in ("eager", "function", "xla", "graph")} | {
        "jax-eager-cpu",
        "jax-jit-cpu",
    }
    for name, c in cols.items():
        s = c["seconds"]
        assert c["examples"] > 0 and all(s[k] >= 0 for k in PARTS), (name, c)
        assert abs(sum(s.values()) - c["test_s"]) <= 0.02 * c["test_s"] + 0.05, (name, c)
        assert s["subject_first"] > 0 and s["generation"] > 0, (name, c)  # every row traced or ran something
    # TensorFlow rows compare with JAX: its jit compiles on the first row's calls, the other
    # rows' oracle calls of the same examples are answered from memory
    assert cols["tensorflow-eager-cpu"]["seconds"]["oracle_first"] > 0
    assert cols["tensorflow-graph-cpu"]["seconds"]["oracle_first"] == 0
    assert cols["jax-jit-cpu"]["seconds"]["oracle_first"] == 0  # JAX rows have no oracle here
    assert any(k.startswith("test_straight_through_estimator.py ") for k in got["modules"])
