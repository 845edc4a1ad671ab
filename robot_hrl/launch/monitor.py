"""What the launcher learns from the graph while it runs: progress, interventions, violations.

:class:`RunMonitor` is fed decoded messages (the launcher's own node subscribes to the graph)
and keeps the figures of the result: goals reached, the flown path, shield interventions by
unit, and safety violations judged independently of the shield: with a simulator, from the ground truth it
publishes on ``/diagnostics`` (collisions, the true position leaving the fence or entering a box: a rogue
``/odom`` cannot hide or fake one, issue #16); without one (a real robot), from ``/odom`` against the world.
"""

from __future__ import annotations

import json
import math
import threading
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from robot_hrl.world import World


@dataclass
class Violation:
    t: float
    kind: str
    detail: str


@dataclass
class RunMonitor:
    world: World
    robot_radius_m: float = 0.0
    lock: threading.Lock = field(default_factory=threading.Lock)
    planner: dict[str, Any] = field(default_factory=dict)
    skill: dict[str, Any] = field(default_factory=dict)
    shield: dict[str, str] = field(default_factory=dict)
    deadline: dict[str, str] = field(default_factory=dict)
    interventions: dict[str, int] = field(default_factory=dict)
    collisions: int = 0
    violations: list[Violation] = field(default_factory=list)
    path: list[tuple[float, float, float, float]] = field(default_factory=list)
    """(t, x, y, z) samples of /odom, thinned to ``path_period_s``."""
    plan: list[tuple[float, float, float]] = field(default_factory=list)
    subgoals: list[tuple[float, float, float]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    messages: dict[str, int] = field(default_factory=dict)
    sim_time_s: float = 0.0
    """The latest stamp seen (sim time with use_sim_time, else wall-clock epoch seconds)."""
    first_stamp_s: float | None = None
    path_period_s: float = 0.05
    _outside: bool = False
    _inside_box: str | None = None
    _ground_truth: bool = False
    """A simulator's ground truth has been seen: violations are judged from it, /odom is not trusted for them."""
    _truth_counts: dict[str, int] = field(default_factory=dict)

    # ---- feeding -----------------------------------------------------------------------------
    def count(self, topic: str) -> None:
        with self.lock:
            self.messages[topic] = self.messages.get(topic, 0) + 1

    def on_odom(self, t: float, position) -> None:
        p = [float(v) for v in position]
        with self.lock:
            self.sim_time_s = max(self.sim_time_s, t)
            if self.first_stamp_s is None:
                self.first_stamp_s = t
            if not self.path or t - self.path[-1][0] >= self.path_period_s:
                self.path.append((t, *p))
            if not all(math.isfinite(v) for v in p) or self._ground_truth:
                return  # with a simulator, violations come from its ground truth (on_diagnostic), never from /odom
            outside = not self.world.bounds.contains(p)
            if outside and not self._outside:
                self.violations.append(Violation(t, "geofence", f"position {np.round(p, 3).tolist()} outside the fence"))
            self._outside = outside
            box = next((getattr(b, "name", None) or b.id for b in self.world.solid_boxes() if b.contains(p)), None)
            if box is not None and box != self._inside_box:
                self.violations.append(Violation(t, "obstacle", f"position {np.round(p, 3).tolist()} inside {box}"))
            self._inside_box = box

    def on_planner_status(self, text: str) -> None:
        with self.lock:
            self.planner = _json(text)

    def on_skill_status(self, text: str) -> None:
        with self.lock:
            self.skill = _json(text)

    def on_plan(self, points) -> None:
        with self.lock:
            self.plan = [tuple(float(v) for v in p) for p in points]

    def on_subgoal(self, position) -> None:
        with self.lock:
            p = tuple(float(v) for v in position)
            if not self.subgoals or self.subgoals[-1] != p:
                self.subgoals.append(p)

    def on_diagnostic(self, name: str, level: int, message: str, values: dict[str, str], t: float) -> None:
        with self.lock:
            if name.startswith("sim_node"):
                self.sim_time_s = max(self.sim_time_s, t)
            if name.endswith(": shield"):
                self.shield = dict(values, message=message, level=str(level))
            elif name.endswith("interventions"):
                for key, value in values.items():
                    if key.startswith("interventions."):
                        try:
                            self.interventions[key.split(".", 1)[1]] = int(float(value))
                        except ValueError:
                            pass
            elif name.endswith("deadline"):
                self.deadline = dict(values)
            elif name.startswith("sim_node"):
                if "true_position" in values:
                    self._ground_truth = True
                for key, kind, what in (("truth_fence_exits", "geofence", "true position outside the fence"),
                                        ("truth_box_entries", "obstacle", "true position inside " + values.get("truth_last_box", "a box"))):
                    try:
                        k = int(float(values.get(key, "0")))
                    except ValueError:
                        k = 0
                    while self._truth_counts.get(key, 0) < k:
                        self._truth_counts[key] = self._truth_counts.get(key, 0) + 1
                        self.violations.append(Violation(t, kind, f"{what} ({values.get('true_position', '?')}, ground truth)"))
                try:
                    n = int(float(values.get("collisions", "0")))
                except ValueError:
                    n = 0
                if n > self.collisions:
                    what = values.get("last_collision_with", "?")
                    self.violations.append(Violation(t, "collision", f"collision with {what}"))
                self.collisions = max(self.collisions, n)
            if level >= 2 and name.startswith("planner"):
                entry = f"{name}: {message}"
                if entry not in self.errors:
                    self.errors.append(entry)

    # ---- reading -----------------------------------------------------------------------------
    def snapshot(self) -> dict[str, Any]:
        with self.lock:
            return {
                "planner": dict(self.planner), "skill": dict(self.skill), "shield": dict(self.shield),
                "deadline": dict(self.deadline), "interventions": dict(self.interventions),
                "violations": len(self.violations), "collisions": self.collisions, "sim_time_s": self.sim_time_s,
                "elapsed_stamp_s": self.sim_time_s - (self.first_stamp_s or 0.0),
                "errors": list(self.errors),
            }

    def finished(self) -> bool:
        """The task is done and the robot is down (or the task had no landing and is done)."""
        with self.lock:
            state = self.planner.get("state")
            if state != "done":
                return False
            if self.planner.get("ends_landed", True):
                return self.skill.get("state") == "landed"
            return True


def _json(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except (TypeError, ValueError):
        return {"raw": str(text)}
    return value if isinstance(value, dict) else {"raw": value}
