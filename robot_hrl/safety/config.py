"""Shield configuration: every limit, with its unit in its name, from one YAML file.

``load_shield_config(path)`` reads and validates ``robot_hrl/safety/crazyflie_shield.yaml``
(or another file of the same shape) with pydantic. Unknown keys, missing keys, wrong types and
inconsistent values raise :class:`robot_hrl.errors.ConfigError` naming the file and the key.
pydantic is used here only: the per-tick path reads plain floats copied out of these models.
"""

from __future__ import annotations

from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from robot_hrl.errors import ConfigError

DEFAULT_SHIELD_CONFIG = Path(__file__).resolve().parents[1] / "robots" / "crazyflie_2x" / "shield.yaml"
"""The Crazyflie 2.x shield limits shipped with the package."""

_STRICT = ConfigDict(frozen=True, extra="forbid")


class StoppingCfg(BaseModel):
    """The stopping-distance model (robot_hrl/safety/model.py)."""

    model_config = _STRICT
    reaction_time_s: float = Field(ge=0.0, le=2.0, description="tick + motor lag + attitude swing before braking")
    vertical_reaction_time_s: float = Field(ge=0.0, le=2.0, description="tick + motor lag before braking vertically")
    brake_decel_fraction: float = Field(gt=0.0, le=1.0, description="fraction of the model's deceleration assumed")
    thrust_fraction: float = Field(gt=0.0, le=1.0, description="the weakest robot's thrust-to-weight, as a fraction of the model's")
    motor_time_constant_s: float = Field(gt=0.0, le=1.0, description="motor lag the predictions assume (the slowest motor designed for)")
    actuation_latency_s: float = Field(ge=0.0, le=0.5, description="delay between a command and the motors, on top of one tick")


class SubgoalCfg(BaseModel):
    model_config = _STRICT
    fence_margin_m: float = Field(ge=0.0)
    obstacle_margin_m: float = Field(ge=0.0)
    min_altitude_m: float = Field(ge=0.0)


class GeofenceCfg(BaseModel):
    model_config = _STRICT
    margin_m: float = Field(ge=0.0)


class AltitudeCfg(BaseModel):
    model_config = _STRICT
    min_altitude_m: float = Field(ge=0.0)
    max_altitude_m: float = Field(gt=0.0)
    margin_m: float = Field(ge=0.0)

    @model_validator(mode="after")
    def _ordered(self) -> "AltitudeCfg":
        if not self.min_altitude_m < self.max_altitude_m:
            raise ValueError(f"altitude.min_altitude_m ({self.min_altitude_m}) must be below altitude.max_altitude_m ({self.max_altitude_m})")
        return self


class LimitsCfg(BaseModel):
    model_config = _STRICT
    max_tilt_deg: float = Field(gt=0.0, lt=90.0)
    attitude_horizon_s: float = Field(gt=0.0, le=1.0)
    max_roll_pitch_rate_dps: float = Field(gt=0.0)
    max_yaw_rate_dps: float = Field(gt=0.0)
    body_rate_horizon_s: float = Field(gt=0.0, le=1.0)
    max_speed_mps: float = Field(gt=0.0)
    speed_horizon_s: float = Field(ge=0.0, le=1.0)
    min_thrust_n: float = Field(ge=0.0)
    max_thrust_n: float = Field(gt=0.0)
    max_action_slew_per_s: float = Field(gt=0.0)
    tilted_yaw_torque_fraction: float = Field(ge=0.0, le=1.0)
    motor_counter_torque_fraction: float = Field(ge=0.0, le=1.0, description="counter-torque (fraction of the range) assumed to cancel the torque in the motors")

    @model_validator(mode="after")
    def _ordered(self) -> "LimitsCfg":
        if not self.min_thrust_n < self.max_thrust_n:
            raise ValueError(f"limits.min_thrust_n ({self.min_thrust_n}) must be below limits.max_thrust_n ({self.max_thrust_n})")
        return self


class WatchdogCfg(BaseModel):
    model_config = _STRICT
    state_timeout_s: float = Field(gt=0.0)
    subgoal_timeout_s: float = Field(gt=0.0)
    inference_deadline_s: float = Field(gt=0.0)
    hold_s: float = Field(ge=0.0)


class ObstaclesCfg(BaseModel):
    model_config = _STRICT
    stop_distance_m: float = Field(ge=0.0)
    slowdown_distance_m: float = Field(ge=0.0)
    slowdown_ratio: float = Field(gt=0.0, le=1.0)
    approach_margin_m: float = Field(ge=0.0)

    @model_validator(mode="after")
    def _ordered(self) -> "ObstaclesCfg":
        if self.slowdown_distance_m < self.stop_distance_m:
            raise ValueError(
                f"obstacles.slowdown_distance_m ({self.slowdown_distance_m}) must be >= obstacles.stop_distance_m ({self.stop_distance_m})"
            )
        return self


class BatteryCfg(BaseModel):
    model_config = _STRICT
    hold_voltage_v: float = Field(gt=0.0)
    land_voltage_v: float = Field(gt=0.0)
    debounce_s: float = Field(ge=0.0)
    hold_s: float = Field(ge=0.0)

    @model_validator(mode="after")
    def _ordered(self) -> "BatteryCfg":
        if not self.land_voltage_v < self.hold_voltage_v:
            raise ValueError(f"battery.land_voltage_v ({self.land_voltage_v}) must be below battery.hold_voltage_v ({self.hold_voltage_v})")
        return self


class BackupCfg(BaseModel):
    model_config = _STRICT
    max_speed_mps: float = Field(gt=0.0)
    max_tilt_deg: float = Field(gt=0.0, lt=90.0)
    position_gain_per_s: float = Field(gt=0.0)
    velocity_gain_per_s: float = Field(gt=0.0)
    attitude_gain_per_s2: float = Field(gt=0.0)
    rate_gain_per_s: float = Field(gt=0.0)
    rate_lead_s: float = Field(ge=0.0, le=0.1, description="the rate term acts on the rate predicted this far ahead (lead)")
    velocity_integral_gain_per_s2: float = Field(ge=0.0)
    integral_limit_mps2: float = Field(ge=0.0)
    yaw_torque_fraction: float = Field(gt=0.0, le=1.0)
    recovery_angle_deg: float = Field(gt=0.0, lt=180.0)
    recovery_thrust_fraction_of_weight: float = Field(ge=0.0, le=2.0)
    min_thrust_fraction_of_weight: float = Field(ge=0.0, lt=1.0)
    max_thrust_fraction_of_max: float = Field(gt=0.0, le=1.0)
    land_speed_mps: float = Field(gt=0.0)
    touchdown_altitude_m: float = Field(ge=0.0)
    land_timeout_s: float = Field(gt=0.0)
    recover_s: float = Field(ge=0.0)
    hold_inset_m: float = Field(ge=0.0, le=0.5, description="the hold target keeps this far inside the fence and altitude band")


class ShieldConfig(BaseModel):
    """Every limit the shield units enforce."""

    model_config = _STRICT
    robot: str = Field(description="robot model name in robot_hrl.robots, e.g. crazyflie_2x")
    control_rate_hz: float = Field(gt=0.0)
    stopping: StoppingCfg
    subgoal: SubgoalCfg
    geofence: GeofenceCfg
    altitude: AltitudeCfg
    limits: LimitsCfg
    watchdog: WatchdogCfg
    obstacles: ObstaclesCfg
    battery: BatteryCfg
    backup: BackupCfg


def _describe(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err["loc"]) or "(top level)"
        parts.append(f"{loc}: {err['msg']}")
    return "; ".join(parts)


def parse_shield_config(data, source: str = "<dict>") -> ShieldConfig:
    """Validate an already-parsed mapping; errors name ``source`` and every bad key."""
    if not isinstance(data, dict):
        raise ConfigError(f"shield config {source} must be a mapping of sections (stopping, limits, ...), got {type(data).__name__}")
    try:
        return ShieldConfig.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(
            f"shield config {source} is invalid: {_describe(exc)}. See {DEFAULT_SHIELD_CONFIG.name} for every key and its unit"
        ) from None


def load_shield_config(path: str | Path = DEFAULT_SHIELD_CONFIG) -> ShieldConfig:
    """Load and validate a shield configuration YAML file."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"shield config {str(path)!r} does not exist; start from {DEFAULT_SHIELD_CONFIG}")
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        raise ConfigError(f"shield config {str(path)!r} is not valid YAML: {exc}") from None
    return parse_shield_config(data, repr(str(path)))
