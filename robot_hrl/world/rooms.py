"""Procedurally generated rooms for map-free navigation: a fence, boxes and pillars, a start and a goal.

A room is a :class:`robot_hrl.world.World` (the fence is its bounds; boxes and pillars are its
obstacles, standing on the floor and reaching above the flight height) plus a start and a goal
4-8 m apart with an obstacle across the straight line between them, so the goal lies behind
obstacles. Every room is solvable: the symbolic planner's grid search (``FlightGrid`` inflated by
the robot radius and margin, then ``astar``) finds a path at the flight height, and the room
records that path's length.

Rooms are seeded. Training rooms use seeds in ``[0, EVAL_SEED_START)`` and held-out evaluation
rooms seeds from ``EVAL_SEED_START`` on; :func:`generate_room` refuses a seed of the wrong split,
so the two sets never overlap. Each density draws from its own stream (the density is part of
the random key), so the same seed gives unrelated rooms at two densities.

``python -m robot_hrl.world.rooms --density dense --seed 1000000000 --out rooms/`` writes a
room as a world file (``--world`` works with every tool), its map (ROS map_server YAML + PGM,
which the world names) and ``<name>.task.yaml`` (start, goal, density, seed, optimal path length).
"""

from __future__ import annotations

import argparse
import math
import sys
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import yaml

from robot_hrl.errors import WorldError
from robot_hrl.robots import get_robot
from robot_hrl.world.world import Bounds, Obstacle, World

EVAL_SEED_START = 1_000_000_000
"""Seeds below this are training rooms, seeds from here on held-out evaluation rooms."""
SPLITS = ("train", "eval")

DENSITIES: dict[str, int] = {"sparse": 4, "medium": 9, "dense": 15}
"""Obstacle density: boxes and pillars placed at random besides the one across the straight line,
per room of the default 10 m x 10 m."""

_DENSITY_KEY = {name: i for i, name in enumerate(DENSITIES)}


@dataclass(frozen=True)
class RoomCfg:
    """How rooms are drawn."""

    size_xy_m: tuple[float, float] = (10.0, 10.0)
    """Inside of the fence, x and y (the fence runs from 0 to this)."""
    height_m: float = 2.5
    """Ceiling height (the fence's top)."""
    flight_height_m: float = 1.0
    """Start and goal height; navigation holds this altitude."""
    goal_distance_range_m: tuple[float, float] = (4.0, 8.0)
    """Straight-line distance from start to goal."""
    box_size_range_m: tuple[float, float] = (0.4, 1.2)
    """Footprint side of a box (each side drawn on its own)."""
    pillar_size_range_m: tuple[float, float] = (0.15, 0.35)
    """Footprint side of a (square) pillar."""
    pillar_fraction: float = 0.4
    """Share of the random obstacles that are pillars."""
    obstacle_height_range_m: tuple[float, float] = (1.6, 2.5)
    """Box heights (from the floor); pillars reach the ceiling."""
    blocker_length_range_m: tuple[float, float] = (1.5, 3.0)
    """Length of the wall placed across the straight start-goal line."""
    blocker_thickness_m: float = 0.3
    """Thickness of that wall."""
    wall_margin_m: float = 0.8
    """Start and goal keep this far from the fence."""
    clearance_m: float = 0.6
    """Start and goal keep this far from every obstacle."""
    grid_resolution_m: float = 0.1
    """Cell size of the solvability search."""
    robot: str = "crazyflie_2x"
    """The robot the rooms are drawn for (``robot_hrl.robots``): its collision radius sizes the search."""
    planner_margin_m: float = 0.10
    """Obstacles are grown by the robot's collision radius plus this for the solvability search."""
    max_tries: int = 200
    """Draws per room before giving up (a room that cannot be made solvable is an error)."""

    @property
    def inflation_m(self) -> float:
        return get_robot(self.robot).collision_radius_m + self.planner_margin_m


@dataclass(frozen=True)
class Room:
    """A generated room: the world, the task, where it came from."""

    world: World
    start_w: tuple[float, float, float]
    """Start position at the flight height, world ENU, m."""
    goal_w: tuple[float, float, float]
    """Goal position at the flight height, world ENU, m."""
    density: str
    seed: int
    split: str
    optimal_path_length_m: float
    """Length of the grid search's path (8-connected cells, then shortcut), m."""
    cfg: RoomCfg = field(default_factory=RoomCfg)

    @property
    def name(self) -> str:
        return self.world.name


def split_of_seed(seed: int) -> str:
    return "eval" if seed >= EVAL_SEED_START else "train"


def check_seed(seed: int, split: str) -> int:
    """A valid seed of ``split``, or a WorldError that says which range to use."""
    if split not in SPLITS:
        raise WorldError(f"split must be one of {SPLITS}, got {split!r}")
    if not isinstance(seed, (int, np.integer)) or isinstance(seed, bool) or seed < 0:
        raise WorldError(f"a room seed is a non-negative integer, got {seed!r}")
    if split_of_seed(int(seed)) != split:
        rng = f"[0, {EVAL_SEED_START})" if split == "train" else f"[{EVAL_SEED_START}, ...)"
        raise WorldError(f"seed {seed} is not a {split} seed: {split} rooms use seeds in {rng}, so that training "
                         "and evaluation rooms never overlap")
    return int(seed)


def _draw_blocker(rng, start, goal, cfg: RoomCfg) -> tuple[np.ndarray, np.ndarray]:
    """An axis-aligned wall across the straight line, somewhere in its middle part."""
    t = rng.uniform(0.35, 0.65)
    c = start + t * (goal - start)
    length = rng.uniform(*cfg.blocker_length_range_m)
    d = goal - start
    if abs(d[0]) >= abs(d[1]):  # the line runs mostly along x: a wall along y
        size = np.array([cfg.blocker_thickness_m, length])
    else:
        size = np.array([length, cfg.blocker_thickness_m])
    return c[:2], size


def _grid_path(world: World, start, goal, cfg: RoomCfg) -> tuple[float | None, bool]:
    """(length of the grid search's path or None, whether the straight line is blocked)."""
    from robot_hrl.planning.grid import FlightGrid
    from robot_hrl.planning.search import astar, line_of_sight, polyline_length, shortcut

    grid = FlightGrid(world, cfg.grid_resolution_m, cfg.inflation_m)
    blocked = grid.blocked(cfg.flight_height_m, cfg.flight_height_m)
    ca, cb = grid.to_cell(start[:2])[0], grid.to_cell(goal[:2])[0]
    straight_blocked = not bool(line_of_sight(blocked, ca, cb)[0])
    cells = astar(blocked, grid.cell_index(start[:2]), grid.cell_index(goal[:2]))
    if cells is None:
        return None, straight_blocked
    pts = np.vstack([ca[None], np.asarray(cells[1:-1], dtype=np.float64).reshape(-1, 2) + 0.5, cb[None]])
    pts = shortcut(blocked, pts)
    return float(polyline_length(grid.to_world(pts))), straight_blocked


def _box_distance_xy(center, size, p) -> float:
    d = np.maximum(np.abs(np.asarray(p[:2]) - center) - size / 2.0, 0.0)
    return float(np.linalg.norm(d))


def generate_room(density: str, seed: int, split: str = "train", cfg: RoomCfg | None = None) -> Room:
    """The room of ``(density, seed)``: the same arguments always give the same room."""
    cfg = cfg or RoomCfg()
    if density not in DENSITIES:
        raise WorldError(f"unknown density {density!r}; choose one of {list(DENSITIES)}")
    seed = check_seed(seed, split)
    rng = np.random.default_rng([_DENSITY_KEY[density], seed])
    sx, sy = cfg.size_xy_m
    lo_d, hi_d = cfg.goal_distance_range_m
    m = cfg.wall_margin_m
    for _ in range(cfg.max_tries):
        start = np.array([rng.uniform(m, sx - m), rng.uniform(m, sy - m), cfg.flight_height_m])
        angle, dist = rng.uniform(-math.pi, math.pi), rng.uniform(lo_d, hi_d)
        goal = start + dist * np.array([math.cos(angle), math.sin(angle), 0.0])
        if not (m <= goal[0] <= sx - m and m <= goal[1] <= sy - m):
            continue
        boxes = [(*_draw_blocker(rng, start, goal, cfg), rng.uniform(*cfg.obstacle_height_range_m), "wall")]
        placed = 0
        while placed < DENSITIES[density]:
            pillar = rng.uniform() < cfg.pillar_fraction
            if pillar:
                side = rng.uniform(*cfg.pillar_size_range_m)
                size, height, kind = np.array([side, side]), cfg.height_m, "pillar"
            else:
                size = rng.uniform(*cfg.box_size_range_m, size=2)
                height, kind = rng.uniform(*cfg.obstacle_height_range_m), "box"
            center = rng.uniform(size / 2, np.array([sx, sy]) - size / 2)
            placed += 1  # (a draw too close to the start or goal is dropped, not redrawn: fewer obstacles)
            if min(_box_distance_xy(center, size, start), _box_distance_xy(center, size, goal)) < cfg.clearance_m:
                continue
            boxes.append((center, size, height, kind))
        if min(_box_distance_xy(boxes[0][0], boxes[0][1], p) for p in (start, goal)) < cfg.clearance_m:
            continue
        counts: dict[str, int] = {}
        obstacles = []
        for center, size, height, kind in boxes:
            counts[kind] = counts.get(kind, 0) + 1
            h = min(float(height), cfg.height_m)
            grey = {"wall": (0.7, 0.65, 0.6), "box": (0.6, 0.6, 0.65), "pillar": (0.55, 0.55, 0.6)}[kind]
            obstacles.append(Obstacle(name=f"{kind}_{counts[kind]}", center=(float(center[0]), float(center[1]), h / 2.0),
                                      size=(float(size[0]), float(size[1]), h), color=grey))
        name = f"room_{density}_{seed}"
        world = World(name=name, bounds=Bounds(min=(0.0, 0.0, 0.0), max=(float(sx), float(sy), float(cfg.height_m))),
                      start=(float(start[0]), float(start[1]), 0.0), obstacles=tuple(obstacles), map=f"{name}.map.yaml")
        length, straight_blocked = _grid_path(world, start, goal, cfg)
        if length is None or not straight_blocked:
            continue
        return Room(world=world, start_w=tuple(float(v) for v in start), goal_w=tuple(float(v) for v in goal),
                    density=density, seed=seed, split=split, optimal_path_length_m=length, cfg=cfg)
    raise WorldError(f"no solvable {density} room for seed {seed} in {cfg.max_tries} draws; lower the density or "
                     "enlarge RoomCfg.size_xy_m")


def room_seeds(split: str, count: int, offset: int = 0) -> list[int]:
    """``count`` consecutive seeds of a split (training from 0, evaluation from EVAL_SEED_START)."""
    base = 0 if split == "train" else EVAL_SEED_START
    if split == "train" and offset + count > EVAL_SEED_START:
        raise WorldError(f"training seeds end at {EVAL_SEED_START}")
    return [check_seed(base + offset + i, split) for i in range(count)]


def save_room(room: Room, directory: str | Path, map_resolution_m: float = 0.05) -> Path:
    """Write ``<name>.yaml`` (the world), ``<name>.map.yaml`` + ``.pgm`` (its map, for the symbolic
    planner) and ``<name>.task.yaml`` (start, goal, provenance). Returns the world file's path."""
    from robot_hrl.planning.maps import rasterize_world, save_map

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    world_path = directory / f"{room.name}.yaml"
    data = room.world.model_dump(mode="json")
    data["landmarks"] = []
    world_path.write_text(f"# generated: python -m robot_hrl.world.rooms --density {room.density} --seed {room.seed}\n"
                          + yaml.safe_dump(data, sort_keys=False))
    save_map(rasterize_world(room.world, map_resolution_m), directory / room.world.map)
    task = {"world": world_path.name, "start_w": list(room.start_w), "goal_w": list(room.goal_w), "density": room.density,
            "seed": room.seed, "split": room.split, "optimal_path_length_m": room.optimal_path_length_m,
            "task": "takeoff {z:g}; goto {x:.3f} {y:.3f} {z:g}; land".format(x=room.goal_w[0], y=room.goal_w[1], z=room.goal_w[2])}
    (directory / f"{room.name}.task.yaml").write_text(yaml.safe_dump(task, sort_keys=False))
    return world_path


def load_room_task(world_path: str | Path) -> dict:
    """The ``.task.yaml`` next to a saved room's world file."""
    world_path = Path(world_path)
    task_path = world_path.with_name(world_path.stem + ".task.yaml")
    if not task_path.is_file():
        raise WorldError(f"{task_path} does not exist; a generated room is saved with its task file "
                         "(python -m robot_hrl.world.rooms --help)")
    return yaml.safe_load(task_path.read_text())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m robot_hrl.world.rooms",
        description="Generate seeded navigation rooms (fence, boxes, pillars; a goal 4-8 m away behind obstacles) "
                    "and write each as a world file, a map_server map and a task file.")
    parser.add_argument("--density", choices=list(DENSITIES), required=True, help="obstacle density")
    parser.add_argument("--seed", type=int, required=True,
                        help=f"first room seed: training seeds are < {EVAL_SEED_START}, evaluation seeds >= it")
    parser.add_argument("--count", type=int, default=1, help="number of consecutive seeds")
    parser.add_argument("--out", required=True, help="directory to write the rooms into")
    args = parser.parse_args(argv)
    try:
        for i in range(args.count):
            seed = args.seed + i
            room = generate_room(args.density, seed, split_of_seed(seed))
            path = save_room(room, args.out)
            print(f"wrote {path} (start {list(np.round(room.start_w, 2))}, goal {list(np.round(room.goal_w, 2))}, "
                  f"optimal path {room.optimal_path_length_m:.2f} m)")
    except WorldError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
