"""benchmarks/bench_navigate.py end to end on one held-out room per density: every simulator and planner, alone and
through the range shield, prints its row and writes its JSON."""

from __future__ import annotations

import json
import re
import subprocess
import sys


def test_bench_navigate_runs_every_simulator_alone_and_shielded(repo_root, tmp_path):
    out = tmp_path / "bench.json"
    proc = subprocess.run([sys.executable, str(repo_root / "benchmarks/bench_navigate.py"), "--rooms", "1", "--pybullet-rooms", "1",
                           "--range-shield", "--threads", "1", "--out", str(out)],
                          cwd=repo_root, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    data = json.loads(out.read_text())
    for sim in ("batched", "batched_range_shield", "pybullet", "pybullet_range_shield"):
        assert set(data[sim]) >= {"learned", "reactive"}, (sim, list(data[sim]))
        rows = [line for line in proc.stdout.splitlines() if line.startswith(f"| {sim} | learned |")]
        assert len(rows) == 3, proc.stdout
    shielded = [line for line in proc.stdout.splitlines() if line.startswith("| batched_range_shield |")]
    # the shield's column: the share of ticks it changed and the flights it landed
    assert shielded and all(re.search(r"\| \d+\.\d%, \d+ \|$", r) for r in shielded), shielded
    assert data["inference"]["p50_us"] > 0
