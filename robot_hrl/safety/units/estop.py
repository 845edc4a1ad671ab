"""Emergency stop: motors off, latched until explicitly reset."""

from __future__ import annotations

from robot_hrl.safety.records import ERROR, OK
from robot_hrl.safety.units.base import ShieldUnit, Tick


class EmergencyStopUnit(ShieldUnit):
    """Constraint ``emergency_stop``: once triggered, every tick commands motors off.

    Only :meth:`release` (``Shield.reset_estop()``) clears it; ``Shield.reset_faults()`` does not.
    """

    name = "estop"
    constraints = ("emergency_stop",)
    description = "motors off while the emergency stop is latched"
    stage = "input"

    def __init__(self):
        super().__init__()
        self.latched = False
        self.reason = ""
        self.triggered_at_s: float | None = None

    def trigger(self, reason: str = "requested", now_s: float | None = None) -> None:
        if not self.latched:
            self.latched = True
            self.reason = reason
            self.triggered_at_s = now_s

    def release(self) -> None:
        self.latched = False
        self.reason = ""
        self.triggered_at_s = None

    def check(self, tick: Tick) -> None:
        self.begin()
        if self.latched:
            tick.request_motors_off(self, "emergency_stop")

    def status(self) -> tuple[int, str]:
        if self.latched:
            return ERROR, f"emergency stop latched ({self.reason}); motors off until reset"
        return OK, "released"
