"""benchmarks/bench_range_picture.py (issue #19: what the range source's picture costs a planner through the shield):
the ground truth it judges the picture by, and a short real run of both pictures."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from benchmarks.bench_range_picture import surface_distance_m
from robot_hrl.world.rooms import generate_room

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "benchmarks" / "bench_range_picture.py"


def test_surface_distance_is_the_nearest_box_or_wall():
    room = generate_room("medium", 151, "train")
    box = room.world.obstacles[0]
    lo, hi = np.asarray(box.lower), np.asarray(box.upper)
    z = 0.5 * (lo[2] + hi[2])
    inside = 0.5 * (lo[:2] + hi[:2])
    assert surface_distance_m(room, inside[None], z)[0] == 0.0
    rng = np.random.default_rng(0)
    b_lo, b_hi = room.world.bounds.min, room.world.bounds.max
    pts = rng.uniform((b_lo[0], b_lo[1]), (b_hi[0], b_hi[1]), size=(200, 2))
    got = surface_distance_m(room, pts, 1.0)
    for (x, y), d in zip(pts, got):  # against the world's own Box.distance and the fence's walls, point by point
        want = min([o.distance([x, y, 1.0]) for o in room.world.obstacles]
                   + [x - b_lo[0], b_hi[0] - x, y - b_lo[1], b_hi[1] - y])
        assert abs(d - want) < 1e-9


def test_a_short_run_prints_both_pictures_and_the_oracle_keeps_no_phantom(tmp_path):
    out = tmp_path / "picture.json"
    proc = subprocess.run([sys.executable, str(SCRIPT), "--density", "medium", "--rooms", "3", "--json", str(out)],
                          cwd=REPO, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("learned")]
    assert len(lines) == 2 and " real " in lines[0] and " oracle " in lines[1]
    runs = json.loads(out.read_text())["runs"]
    for row in runs.values():
        assert row["flights"] == 3 and 0 <= row["success"] <= 3
    assert runs["real"]["stop_rejections"] > 0  # these rooms make the range stop act (the probe sees its rejections)
    # the oracle's memory holds only points within its tolerance of a true surface: none is a phantom at 0.1 m
    assert runs["oracle"]["stop_rejections"] == 0 or runs["oracle"]["nearest_hit_phantom_over_0.1_m"] == 0.0


def test_an_unknown_planner_is_refused_with_the_choices():
    proc = subprocess.run([sys.executable, str(SCRIPT), "--planner", "astar", "--rooms", "1"], cwd=REPO,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode != 0 and "--planner 'astar': choose one of" in proc.stderr, proc.stderr


@pytest.mark.parametrize("args, message", [
    (("--rooms", "0"), "--rooms must be at least 1"),
    (("--oracle-tolerance-m", "-0.1"), "--oracle-tolerance-m must be a distance >= 0"),
    (("--oracle-tolerance-m", "nan"), "--oracle-tolerance-m must be a distance >= 0"),
])
def test_bad_arguments_are_refused_with_the_fix(args, message):
    proc = subprocess.run([sys.executable, str(SCRIPT), *args], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2 and message in proc.stderr, proc.stderr
