"""ROS map_server maps: reading, writing, orientation, the shipped demo map, bad files, maps with worlds."""

from __future__ import annotations

import subprocess
import sys

import cv2
import numpy as np
import pytest
import yaml

from robot_hrl.errors import WorldError
from robot_hrl.errors import PlanningError
from robot_hrl.planning import OccupancyMap, PlannerConfig, SymbolicPlanner, load_map, rasterize_world, save_map
from robot_hrl.planning.maps import occupied_rectangles
from robot_hrl.world import Box, World, load_world
from robot_hrl.robots import CRAZYFLIE_2X

ROBOT_RADIUS_M = CRAZYFLIE_2X.collision_radius_m
"""The planner asks the robot for its collision radius; these tests fly the Crazyflie 2.x."""


def write_map(folder, pixels: np.ndarray, name="m", ext=".pgm", **meta):
    cv2.imwrite(str(folder / f"{name}{ext}"), pixels)
    data = {"image": f"{name}{ext}", "resolution": 0.5, "origin": [0.0, 0.0, 0.0], "negate": 0,
            "occupied_thresh": 0.65, "free_thresh": 0.196, "mode": "trinary"}
    data.update(meta)
    data = {k: v for k, v in data.items() if v is not None}
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_image_row_zero_is_the_top(tmp_path):
    image = np.full((4, 6), 254, np.uint8)
    image[0, 0] = 0  # top-left pixel: min x, MAX y
    image[3, 5] = 205  # bottom-right: unknown (p = 0.2, between the thresholds)
    grid = load_map(write_map(tmp_path, image, origin=[-1.0, 2.0, 0.0]))
    assert grid.shape == (4, 6) and grid.resolution == 0.5 and grid.origin == (-1.0, 2.0)
    assert grid.occupied[3, 0] and grid.occupied[0, 5]  # unknown counts as occupied
    assert grid.occupied.sum() == 2
    assert grid.occupied_at([[-0.75, 3.75], [-0.75, 2.25], [100.0, 100.0]]).tolist() == [True, False, True]
    assert grid.extent == (-1.0, 2.0, 2.0, 4.0)


def test_negate_png_and_modes(tmp_path):
    image = np.zeros((3, 3), np.uint8)
    image[1, 1] = 255
    grid = load_map(write_map(tmp_path, image, name="neg", ext=".png", negate=1))
    assert grid.occupied.sum() == 1 and grid.occupied[1, 1]
    raw = np.zeros((3, 3), np.uint8)
    raw[0, 0] = 100
    raw[2, 2] = 255
    grid = load_map(write_map(tmp_path, raw, name="raw", mode="raw"))
    assert grid.occupied.sum() == 2


def test_save_and_load_round_trip(tmp_path):
    occ = np.zeros((5, 7), bool)
    occ[1, 2] = occ[4, 6] = True
    grid = OccupancyMap(occ, 0.1, (1.0, -2.0))
    back = load_map(save_map(grid, tmp_path / "round.yaml"))
    assert np.array_equal(back.occupied, occ) and back.resolution == 0.1 and back.origin == (1.0, -2.0)


def test_shipped_demo_map_matches_the_demo_world(repo_root, demo_world_path):
    shipped = load_map(repo_root / "models" / "maps" / "demo.yaml")
    world = load_world(demo_world_path)
    fresh = rasterize_world(world, shipped.resolution, z_band=(0.5, 2.0))
    assert np.array_equal(shipped.occupied, fresh.occupied)
    assert shipped.origin == fresh.origin
    # Used with the demo world it changes nothing: the same plan, landmarks still reachable.
    task = "takeoff 1; visit red_box green_box blue_box; land"
    with_map = SymbolicPlanner(world, 1.0, occupancy_map=shipped, config=PlannerConfig(robot_radius_m=ROBOT_RADIUS_M)).plan(task, world.start)
    without = SymbolicPlanner(world, 1.0, config=PlannerConfig(robot_radius_m=ROBOT_RADIUS_M)).plan(task, world.start)
    assert with_map.goal_labels == without.goal_labels
    assert with_map.path_length_m == pytest.approx(without.path_length_m, rel=0.03)


def test_map_generator_cli(tmp_path, demo_world_path):
    out = subprocess.run([sys.executable, "-m", "robot_hrl.planning.make_map", "--world", str(demo_world_path),
                          "--out", str(tmp_path / "gen.yaml")], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert load_map(tmp_path / "gen.yaml").shape == (100, 100)
    bad_band = subprocess.run([sys.executable, "-m", "robot_hrl.planning.make_map", "--world", str(demo_world_path),
                               "--out", str(tmp_path / "y.yaml"), "--z-band", "2", "1"], capture_output=True, text=True)
    assert bad_band.returncode == 1 and "LO must not exceed HI" in bad_band.stderr
    bad = subprocess.run([sys.executable, "-m", "robot_hrl.planning.make_map", "--world", str(tmp_path / "none.yaml"),
                          "--out", str(tmp_path / "x.yaml")], capture_output=True, text=True)
    assert bad.returncode == 1 and "does not exist" in bad.stderr


@pytest.mark.parametrize("meta, needle", [
    ({"resolution": -0.1}, "resolution must be a positive"),
    ({"resolution": "fine"}, "must be numbers"),
    ({"origin": [0.0, 0.0]}, "origin must be"),
    ({"origin": [0.0, 0.0, 0.5]}, "yaw 0.5 is not supported"),
    ({"free_thresh": 0.7}, "free_thresh < occupied_thresh"),
    ({"negate": 2}, "negate must be 0 or 1"),
    ({"mode": "fancy"}, "mode must be one of"),
    ({"image": "missing.pgm"}, "does not exist next to it"),
    ({"image": None}, "missing field"),
    ({"colour": "red"}, "unknown field"),
])
def test_bad_map_files_are_explained(tmp_path, meta, needle):
    path = write_map(tmp_path, np.full((4, 4), 254, np.uint8), **meta)
    with pytest.raises(WorldError, match=needle):
        load_map(path)


def test_unreadable_files(tmp_path):
    with pytest.raises(WorldError, match="does not exist"):
        load_map(tmp_path / "nope.yaml")
    (tmp_path / "bad.yaml").write_text("image: [unclosed")
    with pytest.raises(WorldError, match="not valid YAML"):
        load_map(tmp_path / "bad.yaml")
    (tmp_path / "list.yaml").write_text("- 1\n- 2\n")
    with pytest.raises(WorldError, match="must hold a mapping"):
        load_map(tmp_path / "list.yaml")
    (tmp_path / "junk.pgm").write_bytes(b"this is not an image")
    (tmp_path / "junk.yaml").write_text(yaml.safe_dump({"image": "junk.pgm", "resolution": 0.1, "origin": [0, 0, 0]}))
    with pytest.raises(WorldError, match="cannot be read"):
        load_map(tmp_path / "junk.yaml")


def _world(**extra) -> World:
    return World.model_validate({"name": "w", "bounds": {"min": [0, 0, 0], "max": [10, 10, 3]},
                                 "start": [1.0, 1.0, 0.0], **extra})


def test_map_obstacles_are_full_height_and_force_a_detour(tmp_path):
    image = np.full((20, 20), 254, np.uint8)  # 0.5 m pixels over 10 x 10 m
    image[2:20, 9:11] = 0  # a wall at x 4.5..5.5 from y = 0 up to y = 9 (rows count from the top)
    path = write_map(tmp_path, image)
    world = _world()
    planner = SymbolicPlanner(world, 1.0, occupancy_map=load_map(path), config=PlannerConfig(robot_radius_m=ROBOT_RADIUS_M))
    plan = planner.plan("takeoff 2.5; goto 8 2 2.5", (2.0, 2.0, 0.0))
    xy = plan.steps[1].path[:, :2]
    assert xy[:, 1].max() > 9.0  # over the wall's top end, not through it
    assert plan.path_length_m > 2.5 + 2 * 7.0
    assert planner.stats["graph_legs"] == 1  # the map's wall became a box of the visibility graph
    grid_map = load_map(path)
    wall = Box(center=(5.0, 4.5, 1.5), size=(1.0, 9.0, 3.0))
    for a, b in zip(xy[:-1], xy[1:]):
        for t in np.linspace(0, 1, 200):
            p = a + (b - a) * t
            assert not grid_map.occupied_at(p[None])[0]
            assert wall.distance([p[0], p[1], 1.0]) >= 0.165 - 1e-6
    grid_only = SymbolicPlanner(world, 1.0, occupancy_map=grid_map, config=PlannerConfig(robot_radius_m=ROBOT_RADIUS_M, max_map_boxes=0))
    plan2 = grid_only.plan("takeoff 2.5; goto 8 2 2.5", (2.0, 2.0, 0.0))
    assert grid_only.stats["grid_legs"] == 1 and grid_only.stats["graph_legs"] == 0
    assert plan2.path_length_m == pytest.approx(plan.path_length_m, rel=0.05)
    with pytest.raises(PlanningError, match="occupied map cell"):
        planner.plan("takeoff 1; goto 5 5 1", (2.0, 2.0, 0.0))


def test_occupied_rectangles_cover_exactly_the_occupied_cells():
    rng = np.random.default_rng(2)
    occ = rng.random((40, 50)) < 0.3
    occ[5:20, 10:30] = True
    grid = OccupancyMap(occ, 0.1, (0.0, 0.0))
    rects = occupied_rectangles(grid)
    cover = np.zeros_like(occ, dtype=int)
    for r0, r1, c0, c1 in rects:
        cover[r0:r1, c0:c1] += 1
    assert np.array_equal(cover, occ.astype(int))  # every occupied cell once, nothing else
    assert occupied_rectangles(grid, max_count=10) is None


def test_map_and_world_must_agree(tmp_path):
    small = write_map(tmp_path, np.full((4, 4), 254, np.uint8), name="small")
    with pytest.raises(WorldError, match="must cover the world's bounds"):
        SymbolicPlanner(_world(), 1.0, occupancy_map=load_map(small), config=PlannerConfig(robot_radius_m=ROBOT_RADIUS_M))
    image = np.full((20, 20), 254, np.uint8)
    image[17:20, 0:4] = 0  # covers the start (1, 1)
    start_blocked = write_map(tmp_path, image, name="start")
    with pytest.raises(WorldError, match="start"):
        SymbolicPlanner(_world(), 1.0, occupancy_map=load_map(start_blocked), config=PlannerConfig(robot_radius_m=ROBOT_RADIUS_M))


def test_world_file_naming_a_map(tmp_path):
    image = np.full((20, 20), 254, np.uint8)
    write_map(tmp_path, image, name="arena")
    world_path = tmp_path / "world.yaml"
    world_path.write_text(yaml.safe_dump({"name": "w", "bounds": {"min": [0, 0, 0], "max": [10, 10, 3]},
                                          "start": [1, 1, 0], "map": "arena.yaml"}))
    planner = SymbolicPlanner.from_file(world_path, 1.0, config=PlannerConfig(robot_radius_m=ROBOT_RADIUS_M))
    assert planner.plan("takeoff 1; goto 8 8 1", (1.0, 1.0, 0.0)).path_length_m > 9.0


def test_rasterize_for_an_altitude_band(demo_world_path):
    world = load_world(demo_world_path)
    everything = rasterize_world(world, 0.05)
    flight = rasterize_world(world, 0.05, z_band=(0.5, 1.5))
    ground = rasterize_world(world, 0.05, include_landmarks=False)
    assert flight.occupied.sum() == ground.occupied.sum() < everything.occupied.sum()
    red = world.landmark("red_box")
    assert everything.occupied_at([red.center[:2]])[0] and not flight.occupied_at([red.center[:2]])[0]
    with pytest.raises(WorldError, match="resolution"):
        rasterize_world(world, 0.0)
