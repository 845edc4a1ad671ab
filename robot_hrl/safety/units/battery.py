"""Battery: hold, then land, on low battery; land at once on critical battery.

The voltage must stay below a threshold for ``battery.debounce_s`` (a load sag is not a low
battery). Both conditions latch until ``Shield.reset_faults()``. No voltage (None): no check.

Its diagnostic also says what the robot family's model brakes with (a quadrotor: the thrust its actuator chain
reaches on the measured battery, or the chain's worst case while there is no plausible reading).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, model_validator

from robot_hrl.safety.records import ERROR, OK, WARN
from robot_hrl.safety.units.base import ShieldContext, ShieldUnit, Tick


class BatteryCfg(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    hold_voltage_v: float = Field(gt=0.0)
    land_voltage_v: float = Field(gt=0.0)
    debounce_s: float = Field(ge=0.0)
    hold_s: float = Field(ge=0.0)

    @model_validator(mode="after")
    def _ordered(self) -> "BatteryCfg":
        if not self.land_voltage_v < self.hold_voltage_v:
            raise ValueError(f"battery.land_voltage_v ({self.land_voltage_v}) must be below battery.hold_voltage_v ({self.hold_voltage_v})")
        return self


class BatteryUnit(ShieldUnit):
    name = "battery"
    constraints = ("low_battery_hold", "low_battery_land")
    description = "hold then land below battery.hold_voltage_v, land below battery.land_voltage_v"
    stage = "input"
    section = "battery"
    config_model = BatteryCfg

    @classmethod
    def build(cls, ctx: ShieldContext) -> "BatteryUnit":
        return cls(ctx.config, ctx.model)

    def __init__(self, cfg, model=None):
        super().__init__()
        self.model = model
        """The family's model (its ``battery_v`` and ``max_total_thrust`` are shown on the diagnostic), or None."""
        b = cfg.battery
        self.hold_v = b.hold_voltage_v
        self.land_v = b.land_voltage_v
        self.debounce = b.debounce_s
        self.hold_s = b.hold_s
        self.reset()

    def reset(self) -> None:
        self.low_since: float | None = None
        self.critical_since: float | None = None
        self.hold_started: float | None = None
        self.land_latched = False
        self.voltage: float | None = None

    def check(self, tick: Tick) -> None:
        self.begin()
        now = tick.now
        voltage = tick.battery_v
        if voltage is not None:
            self.voltage = voltage
            if not voltage == voltage:  # NaN: treat as unknown, keep latches
                pass
            else:
                if voltage < self.hold_v:
                    if self.low_since is None:
                        self.low_since = now
                else:
                    self.low_since = None
                if voltage < self.land_v:
                    if self.critical_since is None:
                        self.critical_since = now
                else:
                    self.critical_since = None
                if self.critical_since is not None and now - self.critical_since >= self.debounce:
                    self.land_latched = True
                if self.low_since is not None and now - self.low_since >= self.debounce and self.hold_started is None:
                    self.hold_started = now
        if self.hold_started is not None and now - self.hold_started >= self.hold_s:
            self.land_latched = True
        if self.land_latched:
            tick.request_land(self, "low_battery_land")
        elif self.hold_started is not None:
            tick.request_hold(self, "low_battery_hold")

    def status(self) -> tuple[int, str]:
        v = "unknown" if self.voltage is None else f"{self.voltage:.2f} V"
        if self.land_latched:
            return ERROR, f"low battery ({v}): landing"
        if self.hold_started is not None:
            return WARN, f"low battery ({v}): holding before landing"
        return OK, f"battery {v}"

    def diagnostic(self, hardware_id: str) -> dict:
        d = super().diagnostic(hardware_id)
        m = self.model
        thrust = getattr(m, "max_total_thrust", None)
        if thrust is not None and hasattr(m, "battery_v"):
            measured = m.battery_v
            d["values"]["braking_thrust_n"] = f"{thrust:.4f}"
            d["values"]["braking_on"] = (f"measured battery {measured:.3f} V" if measured is not None else
                                         "worst case (no plausible battery reading)")
        return d
