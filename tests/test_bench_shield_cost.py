"""benchmarks/bench_shield_cost.py end to end on a few short episodes: the breakdown it prints, its JSON and its PNG
(the figures of issue 16's "what the shield costs the shipped policy" come from this script)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_the_breakdown_is_written_and_agrees_with_itself(tmp_path):
    png, out = tmp_path / "cost.png", tmp_path / "cost.json"
    proc = subprocess.run([sys.executable, str(REPO / "benchmarks" / "bench_shield_cost.py"), "--episodes", "4",
                           "--episode-s", "1.0", "--seed", "0", "--png", str(png), "--json", str(out)],
                          cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "outcomes:" in proc.stdout
    d = json.loads(out.read_text())
    assert d["episodes"] == 4 and d["ticks"] > 0
    assert d["ticks"] == 4 * 100  # every episode's ticks at the control rate, in all
    assert 0 <= d["intervened_ticks"] <= d["ticks"]
    assert abs(d["intervention_rate"] - d["intervened_ticks"] / d["ticks"]) < 1e-12
    assert d["violations_shielded"] == 0  # the shipped policy under the shield: judged from the simulator's truth
    assert png.stat().st_size > 1000 and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_help_explains_itself():
    proc = subprocess.run([sys.executable, str(REPO / "benchmarks" / "bench_shield_cost.py"), "--help"],
                          cwd=REPO, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and "--episodes" in proc.stdout
