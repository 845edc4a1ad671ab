"""Commanded landing: an operator or planner asks the robot to land (``Shield.request_land``).

Constraint ``land_request``: once requested, the backup lands and then cuts the motors;
latched until ``Shield.reset_faults()``.
"""

from __future__ import annotations

from robot_hrl.safety.records import OK, WARN
from robot_hrl.safety.units.base import ShieldUnit, Tick


class LandRequestUnit(ShieldUnit):
    name = "command"
    constraints = ("land_request",)
    description = "land (a ground robot: stop) when asked to"
    stage = "input"

    def __init__(self):
        super().__init__()
        self.reset()

    def reset(self) -> None:
        self.requested = False
        self.reason = ""
        self.requested_at_s: float | None = None

    def request(self, reason: str = "requested", now_s: float | None = None) -> None:
        if not self.requested:
            self.requested = True
            self.reason = reason
            self.requested_at_s = now_s

    def check(self, tick: Tick) -> None:
        self.begin()
        if self.requested:
            tick.request_land(self, "land_request")

    def status(self) -> tuple[int, str]:
        if self.requested:
            return WARN, f"landing on request ({self.reason})"
        return OK, "no landing requested"
