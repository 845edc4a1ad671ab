"""The shield unit interface and the per-tick scratchpad the units share.

A unit owns a named subset of constraints. Each control tick the composed
:class:`robot_hrl.safety.shield.Shield` fills one :class:`Tick` (reused, no allocation) and
calls every unit's :meth:`ShieldUnit.check` in a fixed order. A unit either

* passes the command through unchanged (the constraint holds),
* changes ``tick.cmd`` so that its constraints hold (a clamp), recording the change, or
* declares the command unsafe (``tick.reject(...)``) or asks for hold / land / motors off,
  and the shield hands the tick to the backup controller.
"""

from __future__ import annotations

from robot_hrl.safety.records import ERROR, LEVEL_NAMES, OK, WARN, Intervention, UnitCounters


class Tick:
    """Everything one control tick's units read and write, in plain floats.

    The shield owns one instance and refills it every tick.
    """

    __slots__ = (
        "now", "dt", "has_state", "predicted", "p", "v", "r", "w",
        "cmd", "policy", "prev", "thrust_est", "torque_est", "policy_valid",
        "reject_unit", "reject_constraint", "reject_detail",
        "hold_unit", "hold_constraint", "land_unit", "land_constraint", "motors_off",
        "interventions", "landing", "stop_box",
    )

    def __init__(self):
        self.now = 0.0
        self.dt = 0.01
        self.has_state = False
        """A state (measured, or dead-reckoned while the odometry is stale) is available."""
        self.predicted = False
        """The state is dead-reckoned, not measured."""
        self.p = [0.0, 0.0, 0.0]
        self.v = [0.0, 0.0, 0.0]
        self.r = (1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0)
        """Body-to-world rotation, row-major; column 2 (r[2], r[5], r[8]) is the thrust axis."""
        self.w = [0.0, 0.0, 0.0]
        self.cmd = [0.0, 0.0, 0.0, 0.0]
        """The command being shaped: [collective thrust N, tau_x, tau_y, tau_z N m]."""
        self.policy = (0.0, 0.0, 0.0, 0.0)
        """The policy's command as it arrived (wrench), for the records."""
        self.prev = [0.0, 0.0, 0.0, 0.0]
        """Last tick's output wrench."""
        self.thrust_est = 0.0
        """Estimate of the thrust the motors produce now (first-order lag of past outputs)."""
        self.torque_est = (0.0, 0.0, 0.0)
        """Estimate of the body torques the motors produce now (same lag), N m."""
        self.policy_valid = True
        self.landing = False
        self.clear()

    def clear(self) -> None:
        self.reject_unit = None
        self.reject_constraint = ""
        self.reject_detail = ""
        self.hold_unit = None
        self.hold_constraint = ""
        self.land_unit = None
        self.land_constraint = ""
        self.motors_off = None
        self.interventions = None
        self.stop_box = None

    # ---- what units call ------------------------------------------------------------------
    def record(self, unit: "ShieldUnit", constraint: str, before, after, action: str = "clamp", detail: str = "") -> Intervention:
        item = Intervention(self.now, unit.name, constraint, before, after, action, detail)
        unit.counters.record(item)
        unit.active_constraint = constraint
        if self.interventions is None:
            self.interventions = [item]
        else:
            self.interventions.append(item)
        return item

    def reject(self, unit: "ShieldUnit", constraint: str, detail: str = "") -> None:
        """The policy's command cannot be made safe by this unit: the backup holds."""
        if self.reject_unit is None:
            self.reject_unit = unit
            self.reject_constraint = constraint
            self.reject_detail = detail
        unit.active_constraint = constraint

    def request_hold(self, unit: "ShieldUnit", constraint: str) -> None:
        if self.hold_unit is None:
            self.hold_unit = unit
            self.hold_constraint = constraint
        unit.active_constraint = constraint

    def request_land(self, unit: "ShieldUnit", constraint: str) -> None:
        if self.land_unit is None:
            self.land_unit = unit
            self.land_constraint = constraint
        unit.active_constraint = constraint


class ShieldUnit:
    """Base class: a name, the constraints it owns, counters, a diagnostic status."""

    name: str = "unit"
    constraints: tuple[str, ...] = ()
    description: str = ""

    def __init__(self):
        self.counters = UnitCounters(self.constraints)
        self.active_constraint: str | None = None
        """The constraint that acted on the latest tick (None: nothing)."""

    def check(self, tick: Tick) -> None:  # pragma: no cover - interface
        raise NotImplementedError

    def begin(self) -> None:
        self.counters.checks += 1
        self.active_constraint = None

    def reset(self) -> None:
        """Clear latches (the emergency stop overrides this to do nothing: it has its own reset)."""

    def status(self) -> tuple[int, str]:
        """(level, message) of the latest tick, for diagnostic_msgs/DiagnosticStatus."""
        if self.active_constraint is None:
            return OK, "ok"
        return WARN, f"intervening: {self.active_constraint}"

    def diagnostic(self, hardware_id: str) -> dict:
        level, message = self.status()
        c = self.counters
        values = {"checks": str(c.checks), "interventions": str(c.interventions), "level_name": LEVEL_NAMES[level]}
        for k, n in c.by_constraint.items():
            values[f"count.{k}"] = str(n)
        last = c.last_intervention
        if last is not None:
            values["last.time_s"] = f"{last.time_s:.3f}"
            values["last.constraint"] = last.constraint
            values["last.action"] = last.action
        return {"name": f"shield/{self.name}", "level": level, "message": message, "hardware_id": hardware_id, "values": values}


__all__ = ["ERROR", "OK", "WARN", "ShieldUnit", "Tick"]
