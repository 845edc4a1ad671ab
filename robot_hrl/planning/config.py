"""The symbolic planner's settings (one dataclass, read by the leg search and the verbs)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from robot_hrl.errors import PlanningError
from robot_hrl.planning.ordering import EXACT_ORDER_LIMIT


@dataclass(frozen=True)
class PlannerConfig:
    robot_radius_m: float | None = None
    """The robot's collision radius, m: ask the robot (``get_robot(name).collision_radius_m``; the
    planner node does, from its ``robot`` parameter, or takes ``robot_radius_m``). Required: the
    planner knows no robot of its own. Obstacles are inflated by this plus ``safety_margin_m``."""
    resolution_m: float = 0.05
    """Flight grid cell size."""
    safety_margin_m: float = 0.10
    subgoal_spacing_fraction: float = 0.45
    """Subgoals lie at most this fraction of the subgoal radius apart. The goto skill flies each step as its training's
    goal steps (up to the radius, from rest): the farther the next subgoal, the harder the tilt and the faster the leg.
    At 0.9 the shield changed 5.8 % of a mission's ticks after the take-off (the slowdown zone beside the boxes the legs
    pass, the attitude and body-rate limits of the steps); at 0.45, 0.65 %, for 1.2 s more per mission (18.2 -> 19.4 s;
    benchmarks/README.md, "Issue #16: whole missions")."""
    heuristic_weight: float = 1.5
    """A* heuristic weight; 1.0 is optimal on the grid, more expands fewer cells (shortcutting
    recovers most of the difference)."""
    exact_order_limit: int = EXACT_ORDER_LIMIT
    """Up to this many goals in a ``visit`` are ordered exactly, beyond by 2-opt."""
    ground_clearance_m: float = 0.05
    """The robot counts as landed below the floor plus this."""
    blocked_radius_m: float = 0.3
    """Half-width of the column blocked around a point reported blocked by the skill."""
    start_escape_m: float = 0.3
    """A start inside the inflation (not inside an obstacle) is joined to free space within this."""
    coarse_factor: int = 2
    """Grid A* first searches a grid this many times coarser (a coarse cell is blocked when any of
    its cells is), then shortcuts on the fine grid; the fine grid is searched when that fails.
    1 disables it."""
    landing_search_m: float = 1.0
    """``land`` above an obstacle (a landmark box) moves to the nearest clear spot within this first."""
    max_map_boxes: int = 200
    """A map whose occupied cells merge into at most this many rectangles is planned with the
    visibility graph too (its rectangles become full-height boxes); beyond, on the grid only."""
    use_visibility_graph: bool = True
    """Plan among the world's boxes with the exact any-angle visibility graph (octagon inflation);
    the grid (A* + shortcut) is used for map images, and when the graph finds no path."""

    @property
    def inflation_m(self) -> float:
        return self.radius_m() + self.safety_margin_m

    def radius_m(self) -> float:
        """``robot_radius_m``, checked: a finite number >= 0."""
        r = self.robot_radius_m
        if r is None:
            raise PlanningError("the planner needs the robot's collision radius: PlannerConfig(robot_radius_m=...) "
                                "(e.g. robot_hrl.robots.get_robot('crazyflie_2x').collision_radius_m)")
        if isinstance(r, bool) or not isinstance(r, (int, float)) or not math.isfinite(r) or r < 0:
            raise PlanningError(f"robot_radius_m must be a finite number of metres >= 0, got {r!r}")
        return float(r)
