"""The benchmark runner works end to end (numbers are reported by `make bench`, never asserted)."""
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_quick_benchmark_run_agrees_with_peers_and_writes_json(tmp_path):
    out = tmp_path / "bench.json"
    proc = subprocess.run([sys.executable, "benchmarks/run.py", "--quick", "--json", str(out)],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    # exit status 1 means microtorch errored or disagreed with a peer's results
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    doc = json.loads(out.read_text())
    names = {row["benchmark"] for row in doc["rows"]}
    assert {"chain 4x4", "mlp 16x16", "import microtorch"} <= names
    for row in doc["rows"]:
        assert row["error"] is None, row
        if row["benchmark"] in ("chain 4x4", "mlp 16x16") and not row["skipped"]:
            assert row["stats"]["median_us"] > 0 and row["ratio"] > 0
    viz = next(r for r in doc["rows"] if r["benchmark"] == "no viz libs after import")
    assert viz["met"] is True, viz["notes"]
