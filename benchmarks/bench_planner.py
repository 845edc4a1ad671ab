"""Symbolic planner figures: planning time on a 400 x 400 grid with 5 goals, and path length vs optimal.

    python benchmarks/bench_planner.py [--trials 30] [--optimality-trials 10] [--seed 0]

Each trial builds a 20 m x 20 m world at 0.05 m cells (400 x 400) with 30 random boxes, draws
two tasks (a random start and 5 random goals at 1 m in free space) and times
``planner.plan("visit g1 ... g5", start)`` for each: the first with a fresh planner (cold: the
visibility graph of the band is built inside), the second in the same world (warm). The planner
modes run on the same tasks: the visibility graph (default for worlds of boxes), the grid as used
for map images (A* on a 2x coarser grid first), and the fine grid only.

Optimality: for the grid modes the reference is the exact any-angle shortest path on the same
inflated grid (a visibility graph over the grid's convex obstacle corners) and the best of all
120 visiting orders under those costs. The visibility graph is exact by construction for its
octagons (it runs on geometry, not on the grid, so the grid reference does not apply to it):
its reference is the best of the 120 orders with the same legs, and the printed clearance
checks that its paths keep the inflation from every box.
"""

from __future__ import annotations

import argparse
import heapq
import itertools
import math
import os
import platform
import statistics
import time

import numpy as np

from tqdm import tqdm

from robot_hrl.errors import PlanningError
from robot_hrl.planning import PlannerConfig, SymbolicPlanner, rasterize_world
from robot_hrl.planning.visibility import OctagonVisibilityGraph
from robot_hrl.planning.search import line_of_sight
from robot_hrl.world import World
from robot_hrl.robots import CRAZYFLIE_2X

ROBOT_RADIUS_M = CRAZYFLIE_2X.collision_radius_m
"""The planner asks the robot for its collision radius; these tests fly the Crazyflie 2.x."""

SIZE_M, RES_M, N_GOALS, ALT_M = 20.0, 0.05, 5, 1.0


def random_world(rng: np.random.Generator, n_boxes: int = 30) -> World:
    while True:
        try:
            return _random_world(rng, n_boxes)
        except ValueError:  # the world's start landed inside a box: draw again
            continue


def _random_world(rng: np.random.Generator, n_boxes: int) -> World:
    obstacles = []
    for i in range(n_boxes):
        c = rng.uniform(1.0, SIZE_M - 1.0, 2)
        s = rng.uniform(0.4, 3.0, 2)
        if rng.random() < 0.3:  # some long walls
            s[rng.integers(2)] = rng.uniform(4.0, 8.0)
        obstacles.append({"name": f"box{i}", "center": [float(c[0]), float(c[1]), 1.5],
                          "size": [float(s[0]), float(s[1]), 3.0]})
    return World.model_validate({"name": "bench", "bounds": {"min": [0, 0, 0], "max": [SIZE_M, SIZE_M, 3.0]},
                                 "start": [0.3, 0.3, 0.0], "obstacles": obstacles})


def free_points(planner: SymbolicPlanner, rng: np.random.Generator, n: int) -> list[np.ndarray]:
    blocked = planner.grid.blocked(ALT_M, ALT_M)
    free = np.argwhere(~blocked)
    # Keep to the largest connected region so every goal is reachable.
    import cv2

    _, labels = cv2.connectedComponents((~blocked).astype(np.uint8), connectivity=8)
    main = np.bincount(labels[~blocked]).argmax()
    free = free[labels[free[:, 0], free[:, 1]] == main]
    pick = free[rng.choice(len(free), n, replace=False)]
    return [np.array([planner.grid._xc[c], planner.grid._yc[r], ALT_M]) for r, c in pick]


def corner_points(blocked: np.ndarray) -> np.ndarray:
    """Convex corners of the blocked region, as points (cell coordinates) just off the blocked cell's corner."""
    b = np.pad(blocked, 1, constant_values=True)
    free = ~b
    pts = []
    for dy, dx in ((1, 1), (1, -1), (-1, 1), (-1, -1)):
        diag = np.roll(np.roll(b, -dy, axis=0), -dx, axis=1)
        side_y = np.roll(~b, -dy, axis=0)
        side_x = np.roll(~b, -dx, axis=1)
        mask = free & diag & side_y & side_x
        r, c = np.nonzero(mask[1:-1, 1:-1])
        # The shared corner of the free cell and its blocked diagonal neighbour, nudged into the free cell.
        x = c + 0.5 + dx * 0.5 - dx * 1e-3
        y = r + 0.5 + dy * 0.5 - dy * 1e-3
        pts.append(np.stack([x, y], axis=1))
    return np.concatenate(pts)


def optimal_tour(planner: SymbolicPlanner, start: np.ndarray, goals: list[np.ndarray]) -> float:
    blocked = planner.grid.blocked(ALT_M, ALT_M)
    terms = planner.grid.to_cell(np.stack([start, *goals])[:, :2])
    nodes = np.vstack([terms, corner_points(blocked)])
    rows: dict[int, np.ndarray] = {}

    def row(i):
        if i not in rows:
            d = np.linalg.norm(nodes - nodes[i], axis=1)
            ok = np.zeros(len(nodes), bool)
            for k in range(0, len(nodes), 256):
                sl = slice(k, k + 256)
                ok[sl] = line_of_sight(blocked, np.repeat(nodes[i:i + 1], len(nodes[sl]), axis=0), nodes[sl])
            rows[i] = np.where(ok, d, np.inf)
        return rows[i]

    def dijkstra(src):
        dist = np.full(len(nodes), np.inf)
        dist[src] = 0.0
        heap, done = [(0.0, src)], np.zeros(len(nodes), bool)
        targets = set(range(len(terms))) - {src}
        while heap and targets:
            d, i = heapq.heappop(heap)
            if done[i]:
                continue
            done[i] = True
            targets.discard(i)
            nd = d + row(i)
            better = np.nonzero(nd < dist)[0]
            dist[better] = nd[better]
            for j in better:
                heapq.heappush(heap, (nd[j], int(j)))
        return dist[: len(terms)] * planner.grid.resolution

    cost = np.stack([dijkstra(i) for i in range(len(terms))])
    best = math.inf
    for perm in itertools.permutations(range(1, len(terms))):
        route = (0, *perm)
        best = min(best, sum(cost[a, b] for a, b in zip(route[:-1], route[1:])))
    return best


def best_order_same_legs(world: World, start: np.ndarray, goals: list[np.ndarray]) -> float:
    """The shortest tour over all orders, with every leg planned exactly by the visibility graph."""
    planner = SymbolicPlanner(world, subgoal_radius_m=1.0, config=PlannerConfig(robot_radius_m=ROBOT_RADIUS_M))
    pts = [start, *goals]
    cost = {(a, b): planner.leg_cost(pts[a], pts[b]) for a in range(len(pts)) for b in range(len(pts)) if a != b}
    return min(sum(cost[a, b] for a, b in zip((0, *perm[:-1]), perm))
               for perm in itertools.permutations(range(1, len(pts))))


def min_clearance(world: World, plan) -> float:
    """Smallest distance from the flown polyline (sampled every 2 cm) to any box."""
    best = math.inf
    lower = np.array([b.lower for b in world.solid_boxes()])
    upper = np.array([b.upper for b in world.solid_boxes()])
    for step in plan.steps:
        for a, b in zip(step.path[:-1], step.path[1:]):
            n = max(2, int(np.linalg.norm(b - a) / 0.02) + 1)
            p = a + (b - a) * np.linspace(0, 1, n)[:, None]
            d = np.maximum(np.maximum(lower[None] - p[:, None], p[:, None] - upper[None]), 0.0)
            best = min(best, float(np.linalg.norm(d, axis=2).min()))
    return best


def graph_scaling(counts=(30, 60, 100, 150, 200), repeats: int = 3) -> None:
    """Visibility-graph build time (once per world and band) against the number of boxes,
    at the benchmark's box density."""
    print("visibility graph build vs number of boxes (CPU, best of %d):" % repeats)
    for n in counts:
        rng = np.random.default_rng(n)
        size = SIZE_M * math.sqrt(n / 30)
        boxes = np.column_stack([rng.uniform(1, size - 1, (n, 2)), rng.uniform(0.2, 1.5, (n, 2))])
        best, vertices = math.inf, 0
        for _ in range(repeats):
            c0 = time.process_time()
            graph = OctagonVisibilityGraph(boxes, PlannerConfig(robot_radius_m=ROBOT_RADIUS_M).inflation_m, (0.165, 0.165, size - 0.165, size - 0.165))
            best = min(best, time.process_time() - c0)
            vertices = len(graph.vertices)
        print(f"  {n:4d} boxes ({size:4.1f} m square): {vertices:5d} vertices, {best * 1e3:7.1f} ms")


def _stats(values: list[float]) -> str:
    q = statistics.quantiles(values, n=10, method="inclusive") if len(values) > 1 else values * 9
    return f"p50 {statistics.median(values):7.1f} ms, p90 {q[8]:7.1f} ms, max {max(values):7.1f} ms"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=30)
    parser.add_argument("--optimality-trials", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--scaling-only", action="store_true", help="only the graph build time vs box count")
    args = parser.parse_args()
    if args.scaling_only:
        graph_scaling()
        return
    rng = np.random.default_rng(args.seed)
    modes = {"graph": PlannerConfig(robot_radius_m=ROBOT_RADIUS_M), "map": PlannerConfig(robot_radius_m=ROBOT_RADIUS_M), "grid": PlannerConfig(robot_radius_m=ROBOT_RADIUS_M, use_visibility_graph=False),
             "grid-fine": PlannerConfig(robot_radius_m=ROBOT_RADIUS_M, use_visibility_graph=False, coarse_factor=1)}
    cold = {m: [] for m in modes}
    warm = {m: [] for m in modes}
    cold_cpu = {m: [] for m in modes}
    warm_cpu = {m: [] for m in modes}
    ratio = {m: [] for m in modes}
    legs = {m: [] for m in modes}
    clearance = {m: [] for m in modes}
    map_vs_graph: list[float] = []
    failed = {m: 0 for m in modes}
    grid_ms = []
    lengths: dict[tuple[str, int], float] = {}
    for trial in tqdm(range(args.trials), desc="trials", leave=False):
        world = random_world(rng)
        t0 = time.perf_counter()
        probe = SymbolicPlanner(world, subgoal_radius_m=1.0, config=PlannerConfig(robot_radius_m=ROBOT_RADIUS_M))
        probe.grid.blocked(ALT_M, ALT_M)
        grid_ms.append((time.perf_counter() - t0) * 1e3)
        pts = free_points(probe, rng, 2 * (N_GOALS + 1))
        tasks = []
        for k in (0, N_GOALS + 1):
            start, goals = pts[k], pts[k + 1:k + 1 + N_GOALS]
            tasks.append((start, goals, "visit " + " ".join(",".join(f"{v:.4f}" for v in g) for g in goals)))
        grid_map = rasterize_world(world, RES_M)
        bare = World.model_validate({"name": "bench_map", "bounds": world.bounds.model_dump(), "start": world.start})
        for mode, config in modes.items():
            if mode == "map":  # the same boxes, given as a map image only
                planner = SymbolicPlanner(bare, subgoal_radius_m=1.0, config=config, occupancy_map=grid_map)
            else:
                planner = SymbolicPlanner(world, subgoal_radius_m=1.0, config=config)
            planner.grid.blocked(ALT_M, ALT_M)  # the grid is built once per world, timed above
            for k, (start, goals, task) in enumerate(tasks):
                t0, c0 = time.perf_counter(), time.process_time()
                try:
                    plan = planner.plan(task, start)
                except PlanningError:
                    # Rasterizing grows boxes to whole cells: a gap the world leaves open may close.
                    failed[mode] += 1
                    lengths[mode, k] = math.nan
                    continue
                lengths[mode, k] = plan.path_length_m
                (cold if k == 0 else warm)[mode].append((time.perf_counter() - t0) * 1e3)
                (cold_cpu if k == 0 else warm_cpu)[mode].append((time.process_time() - c0) * 1e3)
            legs[mode].append(len(planner._legs) / 2)
            if trial < args.optimality_trials and not math.isnan(lengths[mode, 1]):
                start, goals, _ = tasks[-1]
                if mode == "graph":
                    ratio[mode].append(plan.path_length_m / best_order_same_legs(world, start, goals))
                    clearance[mode].append(min_clearance(world, plan))
                elif mode == "map":
                    clearance[mode].append(min_clearance(world, plan))
                else:
                    ratio[mode].append(plan.path_length_m / optimal_tour(planner, start, goals))
        map_vs_graph.extend(lengths["map", k] / lengths["graph", k] for k in range(2)
                            if not math.isnan(lengths["map", k]))
    print(f"machine: {platform.machine()}, {os.cpu_count()} CPUs, python {platform.python_version()}, "
          f"load average {os.getloadavg()[0]:.1f} at the end")
    print(f"world 20 m x 20 m, grid {int(SIZE_M / RES_M)} x {int(SIZE_M / RES_M)} cells ({RES_M} m), "
          f"30 random boxes, {N_GOALS} goals per task, {args.trials} worlds (seed {args.seed})")
    print(f"planner + grid build (world -> inflated 2.5-D band grid, once per world), wall: {_stats(grid_ms)}")
    labels = {"graph": "visibility graph over octagon-inflated boxes (default for worlds of boxes)",
              "map": "the same boxes given as a map image (cells merged into rectangles -> visibility graph)",
              "grid": "grid: A* on a 2x coarser grid, fine-grid fallback, shortcut (noisy maps, fallback)",
              "grid-fine": "grid: A* on the fine grid only (coarse_factor=1), shortcut"}
    for mode in modes:
        label = labels[mode]
        print(f"[{mode}] {label}")
        print(f"  plan, first task in a world,                   wall: {_stats(cold[mode])}")
        print(f"                                                 CPU: {_stats(cold_cpu[mode])}")
        print(f"  plan, next task in the same world,             wall: {_stats(warm[mode])}")
        print(f"                                                 CPU: {_stats(warm_cpu[mode])}")
        print(f"  legs planned per task (5 flown + lazy ordering legs): mean {statistics.mean(legs[mode]):.1f}")
        if failed[mode]:
            print(f"  tasks that could not be planned: {failed[mode]} of {2 * args.trials}")
        if mode == "map":
            print(f"  path length / visibility-graph path on the world's boxes: mean "
                  f"{statistics.mean(map_vs_graph):.4f}, min {min(map_vs_graph):.4f}, max {max(map_vs_graph):.4f}")
        if ratio[mode]:
            ref = ("best of 120 orders with the same exact octagon legs" if mode == "graph"
                   else "exact any-angle shortest tour on the same inflated grid, best of 120 orders")
            print(f"  path length / optimal ({ref}), {len(ratio[mode])} tasks: "
                  f"mean {statistics.mean(ratio[mode]):.4f}, min {min(ratio[mode]):.4f}, max {max(ratio[mode]):.4f}")
        if clearance[mode]:
            print(f"  smallest distance from the path to a box: {min(clearance[mode]):.4f} m "
                  f"(inflation {PlannerConfig(robot_radius_m=ROBOT_RADIUS_M).inflation_m:.3f} m)")

    graph_scaling()


if __name__ == "__main__":
    main()
