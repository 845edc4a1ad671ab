"""Generated navigation rooms: seeded, split, solvable, goals behind obstacles, saved for the existing tools."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from robot_hrl.errors import WorldError
from robot_hrl.planning import PlannerConfig, SymbolicPlanner, load_map
from robot_hrl.robots import CRAZYFLIE_2X
from robot_hrl.planning.grid import FlightGrid
from robot_hrl.planning.search import line_of_sight
from robot_hrl.world import load_world
from robot_hrl.world.rooms import (
    DENSITIES, EVAL_SEED_START, generate_room, load_room_task, room_seeds, save_room,
)


@pytest.mark.parametrize("density", list(DENSITIES))
def test_rooms_are_seeded_and_meet_the_task(density):
    for seed in range(6):
        room = generate_room(density, seed)
        again = generate_room(density, seed)
        assert room.world == again.world and room.goal_w == again.goal_w
        start, goal = np.array(room.start_w), np.array(room.goal_w)
        assert 4.0 <= np.linalg.norm(goal - start) <= 8.0
        assert room.optimal_path_length_m >= np.linalg.norm(goal - start) - 1e-6
        # behind obstacles: the inflated straight line is blocked (judged here on a finer grid)
        grid = FlightGrid(room.world, 0.05, room.cfg.inflation_m)
        blocked = grid.blocked(1.0, 1.0)
        assert not line_of_sight(blocked, grid.to_cell(start[:2]), grid.to_cell(goal[:2]))[0]
        assert not room.world.collides(start, margin=0.5) and not room.world.collides(goal, margin=0.5)
        assert room.world.bounds.contains(goal, margin=0.7)
    other = generate_room(density, 1)
    assert other.world != generate_room(density, 2).world


def test_densities_differ_and_the_density_is_part_of_the_key():
    counts = {d: np.mean([len(generate_room(d, s).world.obstacles) for s in range(8)]) for d in DENSITIES}
    assert counts["sparse"] < counts["medium"] < counts["dense"]
    assert generate_room("sparse", 3).start_w != generate_room("dense", 3).start_w


def test_training_and_evaluation_seeds_never_overlap():
    train, held_out = room_seeds("train", 50), room_seeds("eval", 50)
    assert max(train) < EVAL_SEED_START <= min(held_out)
    with pytest.raises(WorldError, match="not a eval seed"):
        generate_room("sparse", 5, split="eval")
    with pytest.raises(WorldError, match="not a train seed"):
        generate_room("sparse", EVAL_SEED_START + 1, split="train")
    with pytest.raises(WorldError, match="non-negative integer"):
        generate_room("sparse", -1)
    with pytest.raises(WorldError, match="unknown density"):
        generate_room("packed", 1)
    room = generate_room("medium", EVAL_SEED_START + 7, split="eval")
    assert room.split == "eval"


def test_saved_room_works_with_the_planner_and_its_map(tmp_path):
    room = generate_room("dense", EVAL_SEED_START, split="eval")
    path = save_room(room, tmp_path)
    world = load_world(path)
    assert world == room.world.model_copy(update={"landmarks": ()})
    grid_map = load_map(tmp_path / world.map)
    assert grid_map.occupied.any()
    task = load_room_task(path)
    assert task["goal_w"] == list(room.goal_w) and task["split"] == "eval"
    # the symbolic planner, on the map file alone and on the world, finds a collision-free path
    config = PlannerConfig(robot_radius_m=CRAZYFLIE_2X.collision_radius_m)
    for planner in (SymbolicPlanner.from_file(path, 1.0, config), SymbolicPlanner(world, 1.0, config)):
        leg = planner.leg(np.array(room.start_w), np.array(room.goal_w))
        assert leg is not None
        dense = np.concatenate([np.linspace(a, b, 20) for a, b in zip(leg[:-1], leg[1:])])
        assert not any(world.collides(p, margin=0.05) for p in dense)
    with pytest.raises(WorldError, match="task file"):
        load_room_task(tmp_path / "missing.yaml")


def test_cli_writes_rooms(tmp_path, repo_root):
    out = subprocess.run([sys.executable, "-m", "robot_hrl.world.rooms", "--density", "sparse", "--seed",
                          str(EVAL_SEED_START), "--count", "2", "--out", str(tmp_path)],
                         capture_output=True, text=True, cwd=repo_root)
    assert out.returncode == 0, out.stderr
    assert (tmp_path / f"room_sparse_{EVAL_SEED_START + 1}.yaml").is_file()
    assert (tmp_path / f"room_sparse_{EVAL_SEED_START}.map.pgm").is_file()
    bad = subprocess.run([sys.executable, "-m", "robot_hrl.world.rooms", "--density", "sparse", "--seed", "-3",
                          "--out", str(tmp_path)], capture_output=True, text=True, cwd=repo_root)
    assert bad.returncode == 1 and "non-negative" in bad.stderr
