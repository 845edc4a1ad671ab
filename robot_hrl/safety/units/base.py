"""The shield unit interface and the per-tick scratchpad the units share.

A unit owns a named subset of constraints. Each control tick the composed
:class:`robot_hrl.safety.shield.Shield` fills one :class:`Tick` (reused, no allocation) and
calls every unit's :meth:`ShieldUnit.check` (one signature for every unit) in the order the
robot's shield YAML lists them. A unit either

* passes the command through unchanged (the constraint holds),
* changes ``tick.cmd`` so that its constraints hold (a clamp), recording the change, or
* declares the command unsafe (``tick.reject(...)``) or asks for hold / land / motors off,
  and the shield hands the tick to the backup controller. Every request is kept with the
  first unit that made it: the most restrictive outcome wins in the shield's mode decision
  (motors off, then land, then hold, then the clamped command).

A unit's ``stage`` says when it runs: ``input`` units judge the tick's inputs (fresh state and
subgoal, battery, latches) before the command exists; ``command`` units shape or judge the
command whenever the policy's output is usable; ``envelope`` units judge it against the world
and need a measured (not dead-reckoned) state; the ``subgoal`` unit filters subgoals on arrival.
A unit is built from the shield's :class:`ShieldContext` (:meth:`ShieldUnit.build`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from robot_hrl.safety.records import ERROR, LEVEL_NAMES, OK, WARN, Intervention, UnitCounters

STAGES = ("input", "command", "envelope", "subgoal")
"""When a unit runs, in this order within a tick (see the module docstring)."""


@dataclass(frozen=True)
class ShieldContext:
    """What a unit is built from."""

    config: Any
    """The validated shield configuration (robot_hrl.safety.config.ShieldConfig)."""
    model: Any
    """The robot family's shield model: constants, the stopping model (robot_hrl.safety.stopping)."""
    world: Any
    """The world file (fence, boxes)."""
    robot: Any
    """The robot (robot_hrl.robots.base.Robot)."""
    subgoal_radius_m: float
    """The contract's subgoal radius."""


class Tick:
    """Everything one control tick's units read and write, in plain floats.

    The shield owns one instance and refills it every tick.
    """

    __slots__ = (
        "now", "dt", "has_state", "predicted", "p", "v", "r", "w",
        "cmd", "policy", "prev", "est", "policy_valid",
        "state_ok", "state_age", "subgoal_ok", "subgoal_w", "subgoal_age", "inference_s", "output_finite", "battery_v",
        "reject_unit", "reject_constraint", "reject_detail",
        "hold_unit", "hold_constraint", "land_unit", "land_constraint", "motors_off",
        "interventions", "landing", "stop_box", "handback", "mode_prev", "reason_stage_prev",
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
        """Body-to-world rotation, row-major; column 2 (r[2], r[5], r[8]) is body z."""
        self.w = [0.0, 0.0, 0.0]
        self.cmd = [0.0, 0.0, 0.0, 0.0]
        """The command being shaped, in the contract's command space (a quadrotor: [collective thrust N,
        tau_x, tau_y, tau_z N m]; a differential drive: [forward speed m/s, yaw rate rad/s])."""
        self.policy = (0.0, 0.0, 0.0, 0.0)
        """The policy's command as it arrived, for the records."""
        self.prev = [0.0, 0.0, 0.0, 0.0]
        """Last tick's output command."""
        self.est = [0.0, 0.0, 0.0, 0.0]
        """Estimate of what the actuators produce now: a first-order lag of past outputs with the slowest
        actuator the shield is designed for (same layout as ``cmd``)."""
        self.policy_valid = True
        self.state_ok = False
        """A state has arrived, finite and well-formed (the watchdog judges its age)."""
        self.state_age = float("inf")
        """Age of that state, s."""
        self.subgoal_ok = False
        """A finite subgoal is set."""
        self.subgoal_w = None
        """The subgoal (x, y, z world, m) as the policy flies to it, None when missing or not finite."""
        self.subgoal_age = 0.0
        """Age of the subgoal, s."""
        self.inference_s = 0.0
        """How long the policy's inference took, s."""
        self.output_finite = True
        """The policy's output is finite."""
        self.battery_v = None
        """Battery voltage, V (None: unknown)."""
        self.landing = False
        self.mode_prev = "policy"
        """The shield's mode on the previous tick."""
        self.reason_stage_prev = ""
        """The stage of the unit that put the backup in charge then ('' in policy mode): ``input`` for a fault."""
        self.handback = False
        """The policy got control back from the backup less than the family's hand-back window ago: the stopping model
        counts what this tick's command commits the slow actuators to."""
        self.clear()

    # ---- a quadrotor's view of the actuator estimate --------------------------------------------
    @property
    def thrust_est(self) -> float:
        """Collective thrust the motors produce now (``est[0]``), N."""
        return self.est[0]

    @thrust_est.setter
    def thrust_est(self, value: float) -> None:
        self.est[0] = value

    @property
    def torque_est(self) -> tuple:
        """Body torques the motors produce now (``est[1:4]``), N m."""
        e = self.est
        return (e[1], e[2], e[3])

    @torque_est.setter
    def torque_est(self, value) -> None:
        self.est[1], self.est[2], self.est[3] = value

    def inputs_in_doubt(self, any_landing: bool) -> str | None:
        """Why an online estimate must not trust this tick's inputs, or None: ``takeover`` (the motors were off, or the
        backup held or landed for an input unit's reason; with ``any_landing`` for any landing), ``no_state`` (none, or
        a non-finite one), ``stale_state`` (old or dead-reckoned). The hover-thrust and motor-lag units restart on it."""
        prev_mode = self.mode_prev
        if prev_mode == "motors_off" or (prev_mode == "backup_land" and any_landing) or (
                prev_mode in ("backup_hold", "backup_land") and self.reason_stage_prev == "input"):
            return "takeover"
        if not self.state_ok:
            return "no_state"
        if self.predicted or not self.has_state:
            return "stale_state"
        return None

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

    def request_motors_off(self, unit: "ShieldUnit", constraint: str) -> None:
        if self.motors_off is None:
            self.motors_off = unit
        unit.active_constraint = constraint


class ShieldUnit:
    """Base class: a name, the constraints it owns, when it runs, counters, a diagnostic status."""

    name: str = "unit"
    constraints: tuple[str, ...] = ()
    description: str = ""
    stage: str = "command"
    """``input``, ``command``, ``envelope`` or ``subgoal`` (see the module docstring)."""
    section: str | None = None
    """The shield YAML section holding this unit's limits (None: it has none)."""
    config_model: type | None = None
    """The pydantic model of that section."""

    def __init__(self):
        self.counters = UnitCounters(self.constraints)
        self.active_constraint: str | None = None
        """The constraint that acted on the latest tick (None: nothing)."""

    @classmethod
    def build(cls, ctx: ShieldContext) -> "ShieldUnit":
        """The unit for a shield (default: no arguments)."""
        return cls()

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


__all__ = ["ERROR", "OK", "STAGES", "ShieldContext", "ShieldUnit", "Tick", "WARN"]
