"""A plan: elementary steps (takeoff, goto, hover, land), each with its subgoals."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from robot_hrl.errors import PlanningError
from robot_hrl.planning.task import Task


@dataclass
class PlanStep:
    """One elementary action. ``subgoals`` are world ENU points (3,), spaced within the subgoal radius."""

    action: str
    """takeoff | goto | hover | land"""
    target: np.ndarray
    """Where the step ends (world ENU, m)."""
    label: str
    """Human-readable target: a landmark id, or the coordinates."""
    subgoals: list[np.ndarray] = field(default_factory=list)
    path: np.ndarray | None = None
    """The collision-free polyline the subgoals were spaced along, from the step's start (k, 3)."""
    duration_s: float | None = None
    """hover only."""
    landmark: str | None = None

    def to_dict(self) -> dict:
        out = {"action": self.action, "label": self.label, "target": [round(float(v), 4) for v in self.target],
               "subgoals": [[round(float(v), 4) for v in s] for s in self.subgoals]}
        if self.duration_s is not None:
            out["duration_s"] = self.duration_s
        if self.landmark is not None:
            out["landmark"] = self.landmark
        return out


@dataclass
class Plan:
    """What a planner returns. The skill flies ``subgoals`` in order."""

    task: Task
    start: np.ndarray
    steps: list[PlanStep]
    planner: str
    """The planner that produced the goals: symbolic, llm or vlm."""
    fallback_reason: str | None = None
    """Set when the LLM/VLM planner fell back to the symbolic planner, and why."""
    rejected_answers: list[str] = field(default_factory=list)
    """Why each rejected LLM/VLM answer was rejected, in order."""

    @property
    def goals(self) -> list[np.ndarray]:
        """Where each takeoff, goto and land step ends, in flight order."""
        return [s.target for s in self.steps if s.action in ("takeoff", "goto", "land")]

    @property
    def goal_labels(self) -> list[str]:
        return [s.label for s in self.steps if s.action in ("takeoff", "goto", "land")]

    @property
    def subgoals(self) -> list[np.ndarray]:
        return [g for s in self.steps for g in s.subgoals]

    def step_index_of_subgoal(self, index: int) -> int:
        """The step that subgoal ``index`` (into :attr:`subgoals`) belongs to."""
        if index < 0:
            raise IndexError(f"subgoal index {index} is negative")
        for i, s in enumerate(self.steps):
            if index < len(s.subgoals):
                return i
            index -= len(s.subgoals)
        raise IndexError("subgoal index beyond the plan")

    def check_finite(self) -> None:
        """Raise PlanningError unless every target, subgoal, path point and duration is finite
        (what a plan sends to the robot must never carry NaN or infinity)."""
        if not np.all(np.isfinite(np.asarray(self.start, dtype=np.float64))):
            raise PlanningError(f"the plan's start {np.asarray(self.start).tolist()} is not finite")
        for number, s in enumerate(self.steps, 1):
            points = [np.asarray(s.target, dtype=np.float64), *(np.asarray(g, dtype=np.float64) for g in s.subgoals)]
            if s.path is not None:
                points.append(np.asarray(s.path, dtype=np.float64))
            if not all(np.all(np.isfinite(p)) for p in points):
                raise PlanningError(f"step {number} ({s.action} {s.label}) of the plan has a non-finite point; "
                                    "the plan was refused")
            if s.duration_s is not None and not math.isfinite(float(s.duration_s)):
                raise PlanningError(f"step {number} ({s.action}) of the plan has a non-finite duration {s.duration_s!r}")

    @property
    def path_length_m(self) -> float:
        total = 0.0
        for s in self.steps:
            if s.path is not None and len(s.path) > 1:
                total += float(np.linalg.norm(np.diff(s.path, axis=0), axis=1).sum())
        return total

    def to_dict(self) -> dict:
        return {
            "planner": self.planner,
            "fallback_reason": self.fallback_reason,
            "rejected_answers": list(self.rejected_answers),
            "task": str(self.task),
            "start": [round(float(v), 4) for v in self.start],
            "goals": [{"label": lbl, "position": [round(float(v), 4) for v in g]}
                      for lbl, g in zip(self.goal_labels, self.goals)],
            "steps": [s.to_dict() for s in self.steps],
            "subgoals": [[round(float(v), 4) for v in s] for s in self.subgoals],
            "path_length_m": round(self.path_length_m, 4),
        }
