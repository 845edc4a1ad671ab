"""The skill node's state machine: what ``/skill/status`` says the skill is doing (the planner's reading
of it: robot_hrl.nodes.skill_status).

``waiting`` (no state yet), ``idle`` (nothing asked, or nothing to fly to), ``tracking``,
``reached`` (within ``reached_radius_m`` and slower than ``reached_speed_mps``), ``blocked`` (no
progress for ``blocked_after_s``), ``holding`` (the shield's backup holds), ``landing``, ``landed``,
``estop``; from the shield's mode and reason and the robot's progress toward the requested subgoal.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from robot_hrl.nodes.common import finite_or_none


@dataclass
class SkillConfig:
    reached_radius_m: float = 0.15
    """A subgoal is reached within this distance..."""
    reached_speed_mps: float = 0.3
    """...and below this speed."""
    blocked_after_s: float = 3.0
    """'blocked': no progress towards the requested subgoal for this long while not reached."""
    progress_m: float = 0.05
    """Progress smaller than this does not count."""
    land_request_m: float = 0.05
    """A subgoal this close above the floor (or below it) is a landing request (robots that land)."""


class SkillStateMachine:
    """The state of the skill, tick by tick (one of robot_hrl.nodes.skill_status.SKILL_STATES), and the status report."""

    def __init__(self, config: SkillConfig):
        self.config = config
        self.best_distance = math.inf
        """Closest the robot came to the requested subgoal, m."""
        self.progress_at: float | None = None
        """When it last came closer by ``progress_m``."""

    def new_request(self, now: float) -> None:
        """A different subgoal was requested: progress starts over."""
        self.best_distance = math.inf
        self.progress_at = now

    def state(self, mode: str, reason: str, state, requested, now: float, land: bool, latched: bool) -> str:
        if mode == "motors_off":
            return "estop" if latched else "landed"
        if mode == "backup_land":
            return "landing"
        watchdog_hold = mode == "backup_hold" and reason.startswith(("watchdog", "battery", "estop"))
        if watchdog_hold or land or state is None or requested is None:
            return "holding" if mode == "backup_hold" else "idle"
        # The policy flies, or the shield holds it off its subgoal (fence, altitude, obstacles, limits).
        d = float(np.linalg.norm(np.asarray(state.position_w) - requested))
        speed = float(np.linalg.norm(state.linear_velocity_w))
        if d <= self.config.reached_radius_m and speed <= self.config.reached_speed_mps:
            self.progress_at = now
            return "reached"
        if d < self.best_distance - self.config.progress_m:
            self.best_distance = d
            self.progress_at = now
        if self.progress_at is not None and now - self.progress_at >= self.config.blocked_after_s:
            return "blocked"
        return "holding" if mode == "backup_hold" else "tracking"

    @staticmethod
    def report(status_state: str, state, mode: str, reason: str, now: float, requested, safe_subgoal) -> dict[str, Any]:
        """The ``/skill/status`` JSON object (plain data, no NaN)."""
        distance = speed = None
        if state is not None and requested is not None and np.all(np.isfinite(requested)):
            distance = round(float(np.linalg.norm(np.asarray(state.position_w) - requested)), 4)
        if state is not None:
            speed = round(float(np.linalg.norm(state.linear_velocity_w)), 4)
        return {
            "state": status_state, "t": round(now, 4), "mode": mode, "reason": reason,
            "requested": None if requested is None else [finite_or_none(v) for v in requested],
            "subgoal": None if safe_subgoal is None else [round(float(v), 4) for v in safe_subgoal],
            "distance": distance, "speed": speed,
            "position": None if state is None else [round(float(v), 4) for v in state.position_w],
        }
