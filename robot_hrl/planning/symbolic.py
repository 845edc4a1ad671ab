"""The symbolic planner (the default, fully offline): task language -> goals -> subgoals.

Composed of two parts: the robot-neutral leg search (:mod:`robot_hrl.planning.legs`: paths
between points among the world's boxes, for a robot of a given collision radius) and the verbs
of the robot (:mod:`robot_hrl.planning.aerial`: takeoff, land, hover, the flight band). This
module parses the task, resolves landmarks, orders ``visit`` targets, plans ``goto`` legs and
spaces subgoals at most ``subgoal_spacing_fraction * subgoal_radius_m`` apart (the skill's
radius comes from the model contract), so the subgoal shield never has to clamp them.

Every plan is checked before it is returned: each target, subgoal and path point finite, each
hover duration finite (:meth:`Plan.check_finite`). A :class:`~robot_hrl.planning.deadline.PlanningDeadline`
bounds planning: it is checked between legs.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from robot_hrl.errors import PlanningError
from robot_hrl.planning.aerial import AERIAL_VERBS, AerialVerbs
from robot_hrl.planning.config import PlannerConfig
from robot_hrl.planning.deadline import PlanningDeadline, check
from robot_hrl.planning.legs import LegSearch
from robot_hrl.planning.maps import OccupancyMap, load_map
from robot_hrl.planning.ordering import order_goals
from robot_hrl.planning.plan import Plan, PlanStep
from robot_hrl.planning.search import space_polyline
from robot_hrl.planning.task import Target, Task, TaskStep, parse_task
from robot_hrl.planning.untrusted import plain, show
from robot_hrl.world import Box, Landmark, World, load_world

__all__ = ["PlannerConfig", "SymbolicPlanner"]


class SymbolicPlanner:
    """Plans task-language tasks on a world (and its optional map) without any network."""

    name = "symbolic"

    def __init__(self, world: World, subgoal_radius_m: float, config: PlannerConfig | None = None,
                 occupancy_map: OccupancyMap | None = None):
        if not (isinstance(subgoal_radius_m, (int, float)) and math.isfinite(subgoal_radius_m) and subgoal_radius_m > 0):
            raise PlanningError(f"subgoal_radius_m must be a positive number of metres, got {subgoal_radius_m!r}")
        self.world = world
        self.config = config or PlannerConfig()
        self.subgoal_radius_m = float(subgoal_radius_m)
        self.spacing_m = self.subgoal_radius_m * self.config.subgoal_spacing_fraction
        self.legs = LegSearch(world, self.config, occupancy_map)
        self.verbs = AerialVerbs(self.legs, self.spacing_m)

    @classmethod
    def from_file(cls, world_path: str | Path, subgoal_radius_m: float, config: PlannerConfig | None = None):
        """Load a world file and the map it names (relative to it)."""
        world_path = Path(world_path)
        world = load_world(world_path)
        grid_map = load_map(world_path.parent / world.map) if world.map else None
        return cls(world, subgoal_radius_m, config, grid_map)

    # -- what the leg search and the verbs know ----------------------------------------------
    @property
    def grid(self):
        return self.legs.grid

    @property
    def stats(self) -> dict[str, int]:
        """How legs were planned (for benchmarks and diagnostics)."""
        return self.legs.stats

    @property
    def _legs(self) -> dict:
        return self.legs._legs

    @property
    def ground_z(self) -> float:
        return self.verbs.ground_z

    @property
    def min_flight_z(self) -> float:
        return self.verbs.min_flight_z

    @property
    def max_flight_z(self) -> float:
        return self.verbs.max_flight_z

    def leg(self, a: np.ndarray, b: np.ndarray) -> np.ndarray | None:
        """A collision-free 3-D polyline from a to b (both included), or None if b is unreachable."""
        return self.legs.leg(a, b)

    def leg_cost(self, a: np.ndarray, b: np.ndarray) -> float:
        return self.legs.leg_cost(a, b)

    def _airborne(self, pos: np.ndarray) -> bool:
        return self.verbs.airborne(pos)

    def _start(self, start_position_w) -> np.ndarray:
        return self.legs.check_start(start_position_w)

    # -- landmarks ---------------------------------------------------------------------------
    def resolve_landmark(self, name: str) -> Landmark:
        """A landmark by id, by colour (``red``) or by phrase (``the red box``). Names are ASCII: a
        name with other characters (a Cyrillic ``о`` in ``red_bоx``) is unknown, and the message
        shows it escaped, so it never looks like the real one."""
        known = [lm.id for lm in self.world.landmarks]
        if not name.isascii():
            raise PlanningError(f"unknown landmark {show(name)}: the name has non-ASCII characters (shown escaped), "
                                f"and landmark names are plain ASCII; world {self.world.name!r} has: {known}")
        key = name.strip().lower().replace(" ", "_")
        for prefix in ("the_", "a_"):
            key = key.removeprefix(prefix)
        for lm in self.world.landmarks:
            if lm.id.lower() == key:
                return lm
        words = set(key.split("_"))
        matches = [lm for lm in self.world.landmarks if lm.color.lower() in words]
        if len(matches) == 1:
            return matches[0]
        if len(matches) > 1:
            raise PlanningError(f"landmark {show(name)} is ambiguous: {[m.id for m in matches]} share that colour")
        raise PlanningError(f"unknown landmark {show(name)}; world {self.world.name!r} has: {known}")

    def _resolve(self, target: Target, pos: np.ndarray) -> tuple[np.ndarray, str, str | None]:
        if target.landmark is not None:
            lm = self.resolve_landmark(target.landmark)
            return lm.approach_point.astype(np.float64), lm.id, lm.id
        p = np.array(target.position, dtype=np.float64)
        if target.xy_only:
            p[2] = pos[2]
        return p, " ".join(f"{v:g}" for v in p), None

    # -- planning ----------------------------------------------------------------------------
    def plan(self, task: str | dict | Task, start_position_w, deadline: PlanningDeadline | None = None,
             **_ignored) -> Plan:
        """Plan a task (text, JSON text, JSON dict or Task) from ``start_position_w`` (world ENU, m),
        within ``deadline`` when one is given (:class:`PlanningTimeout` past it)."""
        parsed = parse_task(task)
        start = self._start(start_position_w)
        steps = self._expand(parsed.steps, start, deadline)
        plan = Plan(task=parsed, start=start, steps=steps, planner=self.name)
        plan.check_finite()
        return plan

    def _expand(self, task_steps, start: np.ndarray, deadline: PlanningDeadline | None = None) -> list[PlanStep]:
        pos = start.copy()
        out: list[PlanStep] = []
        for number, ts in enumerate(task_steps, 1):
            where = f"step {number} ({plain(str(ts), 120)})"
            check(deadline, f"planning {where}")
            if ts.action in AERIAL_VERBS:
                step = getattr(self.verbs, ts.action)(ts, pos, where)
                out.append(step)
                pos = np.asarray(step.target, dtype=np.float64) if ts.action != "hover" else pos
                continue
            # goto, visit: robot-neutral legs between goals
            self.verbs.before_move(pos, where)
            resolved = []
            for t in ts.targets:
                try:
                    p, label, lm = self._resolve(t, pos)
                    self.verbs.check_goal(p, f"goal {label}")
                except PlanningError as exc:
                    raise PlanningError(f"{where}: {exc}") from None
                resolved.append((p, label, lm))
            if ts.action == "visit" and len(resolved) > 1:
                pts = np.stack([pos, *[r[0] for r in resolved]])

                def cost(i: int, j: int) -> float:
                    check(deadline, f"ordering the targets of {where}")
                    return self.leg_cost(pts[i], pts[j])

                order = order_goals(pts, cost, self.config.exact_order_limit)
                if sorted(order) != list(range(1, len(resolved) + 1)):
                    raise PlanningError(f"{where}: internal error: the visiting order {order} is not a permutation")
                resolved = [resolved[i - 1] for i in order]
            for p, label, lm in resolved:
                check(deadline, f"planning {where}")
                path = self.leg(pos, p)
                if path is None:
                    raise PlanningError(f"{where}: {self.legs.unreachable(pos, p, label)}")
                out.append(PlanStep("goto", p, label, space_polyline(path, self.spacing_m), path, landmark=lm))
                pos = p
        return out

    # -- replanning --------------------------------------------------------------------------
    def add_obstacle(self, box: Box) -> None:
        """An obstacle seen at run time; later plans avoid it."""
        self.legs.add_obstacle(box)

    def replan(self, plan: Plan, position_w, blocked=None, subgoal_index: int | None = None,
               deadline: PlanningDeadline | None = None) -> Plan:
        """Plan the rest of ``plan`` again from ``position_w``.

        ``blocked``: what is in the way, added to the planner's obstacles for good: a Box, a list
        of Boxes, or points (N, 3) (each blocks a column of ``blocked_radius_m``). ``subgoal_index``
        is the subgoal the robot was flying to (default: the subgoal nearest to the robot).
        """
        for box in self.legs.blocked_boxes(blocked):
            self.add_obstacle(box)
        pos = self._start(position_w)
        subgoals = plan.subgoals
        if not subgoals:
            raise PlanningError("the plan has no subgoals left to replan")
        if subgoal_index is None:
            subgoal_index = int(np.argmin([np.linalg.norm(s - pos) for s in subgoals]))
        try:
            first = plan.step_index_of_subgoal(subgoal_index)
        except IndexError:
            raise PlanningError(f"subgoal index {subgoal_index} is not in the plan (it has {len(subgoals)})") from None
        remaining = []
        for s in plan.steps[first:]:
            if s.action == "takeoff":
                remaining.append(TaskStep("takeoff", altitude_m=float(s.target[2])))
            elif s.action == "land":
                remaining.append(TaskStep("land"))
            elif s.action == "hover":
                remaining.append(TaskStep("hover", duration_s=s.duration_s))
            else:
                t = Target(landmark=s.landmark) if s.landmark else Target(position=tuple(float(v) for v in s.target))
                remaining.append(TaskStep("goto", targets=(t,)))
        steps = self._expand(remaining, pos, deadline)
        new = Plan(task=Task(tuple(remaining)), start=pos, steps=steps, planner=plan.planner,
                   fallback_reason=plan.fallback_reason, rejected_answers=list(plan.rejected_answers))
        new.check_finite()
        return new
