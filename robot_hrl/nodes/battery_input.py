"""The measured battery voltage on its way to the shield: ``/battery`` (sensor_msgs/BatteryState) judged on arrival.

The shield's stopping model and backup brake with the thrust the actuator chain reaches at the voltage the robot
measures (robot_hrl.robots.quadrotor.shield.model.BatteryThrust); a reading it cannot believe must not raise that
thrust. So each sample is judged here, named when refused, and only a fresh, plausible one is handed on:

- ``voltage`` finite and inside the robot's plausible range (its actuator chain's ``MEASURED_VOLTAGE_RANGE_V``; the
  Crazyflie: 2.0-4.35 V): NaN, inf, negative, 1e308 (inf in float32) are refused as ``implausible_voltage``;
- ``header.stamp`` finite and not ahead of the receiver's clock by more than ``future_tolerance_s``
  (``future_stamp``): a stamp from the future would read as fresh forever;
- stale: no accepted sample younger than ``timeout_s`` -> None.

Whatever is refused or stale, the shield gets None and brakes with the chain's worst case (the safe default).
Refusals are counted by name for ``/diagnostics``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field


@dataclass
class BatteryInput:
    """The latest plausible battery reading and what was refused (thread-safe enough: floats assigned whole)."""

    range_v: tuple[float, float] = (-math.inf, math.inf)
    """Plausible readings, V (the robot's actuator chain's ``MEASURED_VOLTAGE_RANGE_V``)."""
    timeout_s: float = 0.5
    """A reading older than this is stale (5 periods of the sim node's 10 Hz /battery)."""
    future_tolerance_s: float = 0.05
    """A stamp may be this far ahead of the receiver's clock (a lockstep clock lags the sim by a period)."""
    voltage_v: float | None = None
    """The latest accepted reading, V."""
    stamp_s: float | None = None
    """Its stamp, s."""
    accepted: int = 0
    refused: dict = field(default_factory=dict)
    """Refusals by name."""
    last_refusal: str = ""

    @classmethod
    def for_shield(cls, shield, timeout_s: float = 0.5) -> "BatteryInput":
        """With the plausible range of the shield's model (its ``battery_thrust.range_v``), else any finite reading."""
        thrust = getattr(getattr(shield, "model", None), "battery_thrust", None)
        lo, hi = getattr(thrust, "range_v", (-math.inf, math.inf))
        if not lo <= hi:  # a chain without a range: nothing is believed by the model anyway
            lo, hi = -math.inf, math.inf
        return cls(range_v=(float(lo), float(hi)), timeout_s=float(timeout_s))

    def _refuse(self, name: str, detail: str) -> str:
        self.refused[name] = self.refused.get(name, 0) + 1
        self.last_refusal = f"{name}: {detail}"
        return self.last_refusal

    def update(self, voltage, stamp_s, now_s: float) -> str | None:
        """Judge one sample; returns None when accepted, else the refusal (``name: detail``)."""
        try:
            v = float(voltage)
            stamp = float(stamp_s)
        except (TypeError, ValueError) as exc:
            return self._refuse("malformed", f"{exc}")
        lo, hi = self.range_v
        if not (math.isfinite(v) and lo <= v <= hi):
            return self._refuse("implausible_voltage", f"{v!r} V is outside the plausible {lo:g}-{hi:g} V; the shield "
                                "brakes with the worst-case battery until a plausible reading arrives")
        if not math.isfinite(stamp):
            return self._refuse("malformed", f"stamp {stamp!r} is not finite")
        if stamp > now_s + self.future_tolerance_s:
            return self._refuse("future_stamp", f"stamped {stamp - now_s:.3f} s ahead of the clock")
        self.voltage_v = v
        self.stamp_s = stamp
        self.accepted += 1
        return None

    def voltage(self, now_s: float) -> float | None:
        """The reading to hand the shield now: the latest accepted one while younger than ``timeout_s``, else None."""
        v, stamp = self.voltage_v, self.stamp_s
        if v is None or stamp is None or now_s - stamp > self.timeout_s:
            return None
        return v

    def status(self, now_s: float) -> tuple[str, dict]:
        """(message, values) for ``/diagnostics``."""
        v = self.voltage(now_s)
        if v is not None:
            message = f"battery {v:.3f} V (measured)"
        elif self.voltage_v is None:
            message = "no plausible battery reading yet: braking with the worst-case battery"
        else:
            message = (f"battery reading stale ({now_s - self.stamp_s:.2f} s old > {self.timeout_s:g} s): braking with "
                       "the worst-case battery")
        values = {"battery_accepted": self.accepted, "battery_refused": sum(self.refused.values()),
                  "battery_voltage_v": "none" if v is None else f"{v:.3f}"}
        for name, n in self.refused.items():
            values[f"battery_refused.{name}"] = n
        if self.last_refusal:
            values["battery_last_refusal"] = self.last_refusal
        return message, values
