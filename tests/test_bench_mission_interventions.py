"""benchmarks/bench_mission_interventions.py end to end on two short missions: a fresh shield from the ground, the
symbolic planner, the shipped policy and PyBullet (issue #16's interventions on whole missions come from it)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def test_two_missions_fly_land_and_their_figures_agree_with_the_json(tmp_path):
    out = tmp_path / "missions.json"
    proc = subprocess.run([sys.executable, str(REPO / "benchmarks" / "bench_mission_interventions.py"), "--flights", "2",
                           "--legs", "1", "--seed", "3", "--randomize", "--json", str(out)],
                          cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "violations           0 flights" in proc.stdout
    d = json.loads(out.read_text())
    assert d["randomize"] is True and len(d["flights"]) == 2
    # seed 3: the first airframe's battery starts at 3.34 V open-circuit, the battery unit holds, then lands it
    assert [(f["done"], f["battery_ended"]) for f in d["flights"]] == [(False, True), (True, False)]
    assert "done and landed      1 of 2" in proc.stdout and "ended by the battery 1" in proc.stdout
    for f in d["flights"]:
        assert f["task"].startswith("takeoff ") and f["task"].endswith("; land") and not f["violations"]
        assert 0 <= f["early_intervened"] <= f["ticks_intervened"] < f["air_ticks"]
        assert (f["landing_ticks"] > 0) is f["done"]  # the requested landing: flown by the backup, left out of the figure
        assert 0.027 <= f["airframe"]["mass_kg"] <= 0.036  # a randomized airframe, from the training's range
    changed = sum(f["ticks_intervened"] for f in d["flights"])
    air = sum(f["air_ticks"] for f in d["flights"])
    assert f"interventions        {changed} of {air} ticks in the air" in proc.stdout


def test_random_tasks_are_free_points_and_parse():
    from robot_hrl.planning import parse_task
    from robot_hrl.world import load_world

    sys.path.insert(0, str(REPO / "benchmarks"))
    from bench_mission_interventions import random_task

    world = load_world(REPO / "models" / "worlds" / "demo.yaml")
    rng = np.random.default_rng(0)
    for _ in range(20):
        task = random_task(world, rng, legs=3)
        steps = task.split("; ")
        assert len(steps) == 5 and steps[0].startswith("takeoff ") and steps[-1] == "land"
        for step in steps[1:-1]:
            p = np.array([float(x) for x in step.split()[1:]])
            assert not world.collides(p, margin=0.59) and 0.6 <= p[2] <= 1.5  # (the task rounds to the centimetre)
        assert parse_task(task) is not None


def test_bad_arguments_are_refused_with_what_to_give():
    script = str(REPO / "benchmarks" / "bench_mission_interventions.py")
    for args, needle in ((["--flights", "0"], "--flights and --legs must be at least 1"),
                         (["--margin", "-0.1"], "--margin must be a distance >= 0 m"),
                         (["--margin", "nan"], "--margin must be a distance >= 0 m"),
                         (["--config", "no/such.yaml"], "--config no/such.yaml: no such file")):
        proc = subprocess.run([sys.executable, script, *args], cwd=REPO, capture_output=True, text=True, timeout=120)
        assert proc.returncode == 2 and needle in proc.stderr, (args, proc.stderr)
