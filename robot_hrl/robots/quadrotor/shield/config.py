"""The quadrotor's shield sections: ``limits`` (its limits unit), ``stopping`` (its stopping model)
and ``backup`` (its cascaded PD backup controller). Every key names its unit."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, model_validator

from robot_hrl.safety.config import BackupCommonCfg

_STRICT = ConfigDict(frozen=True, extra="forbid")


class StoppingCfg(BaseModel):
    """The stopping-distance model (robot_hrl/robots/quadrotor/shield/model.py)."""

    model_config = _STRICT
    reaction_time_s: float = Field(ge=0.0, le=2.0, description="tick + motor lag + attitude swing before braking")
    vertical_reaction_time_s: float = Field(ge=0.0, le=2.0, description="tick + motor lag before braking vertically")
    brake_decel_fraction: float = Field(gt=0.0, le=1.0, description="fraction of the model's deceleration assumed")
    thrust_fraction: float = Field(gt=0.0, le=1.0, description="the weakest robot's thrust-to-weight, as a fraction of the model's")
    thrust_fraction_max: float = Field(default=1.0, ge=1.0, le=3.0, description=(
        "the strongest robot's thrust-to-weight, as a fraction of the model's (a light airframe with strong rotors: "
        "the climb it keeps during the reaction time, the least thrust the backup brakes a climb with)"))
    airframe_mass_kg: float | None = Field(default=None, gt=0.0, le=10.0, description=(
        "the airframe's measured mass, kg: the vertical brakes divide by it. Weighed: the thrust fractions then cover "
        "the rotors' spread only; its hover thrust over g (the mass its rotors carry): both fractions 1. None: the "
        "robot model's mass, and the fractions cover the randomization's airframes"))
    motor_time_constant_s: float = Field(gt=0.0, le=1.0, description="motor lag the predictions assume (the slowest motor designed for)")
    actuation_latency_s: float = Field(ge=0.0, le=0.5, description="delay between a command and the motors, on top of one tick")
    fastest_motor_time_constant_s: float | None = Field(default=None, gt=0.0, le=1.0, description=(
        "the fastest motor designed for, s: the backup's vertical flow is simulated with it too (a fast motor drops a "
        "thrust cut at once). None: the slowest only"))

    flow_ground_effect_fraction: float = Field(default=0.0, ge=0.0, le=1.0, description=(
        "the share of the model's ground effect (robot_hrl/robots/quadrotor/ground_effect.py) the backup's vertical "
        "flow counts on near the floor (0: none)"))

    @model_validator(mode="after")
    def _motors(self) -> "StoppingCfg":
        f = self.fastest_motor_time_constant_s
        if f is not None and f > self.motor_time_constant_s:
            raise ValueError(f"stopping.fastest_motor_time_constant_s ({f}) must not exceed stopping.motor_time_constant_s "
                             f"({self.motor_time_constant_s}), the slowest motor designed for")
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


class BackupCfg(BackupCommonCfg):
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
    hold_turn_max_rate_dps: float | None = Field(
        default=None, gt=0.0, le=1000.0,
        description="while the backup holds a refused command, its yaw torque is that command's (bounded by "
        "yaw_torque_fraction) as long as the body's yaw rate is at most this, deg/s: a heading loop above the skill "
        "keeps turning the robot's front ranger toward where it was going (the range source's picture); None: the "
        "backup damps the yaw (BackupController.turned_as_commanded)")
    spin_yaw_rate_dps: float | None = Field(
        default=None, gt=0.0, le=2000.0,
        description="above this body yaw rate, deg/s, the backup's yaw torque may use the whole range instead of "
        "yaw_torque_fraction's: it brakes a yaw spin it takes over first, before its attitude loop, whose torques the "
        "motors' lag turns with the body, goes unstable (BackupController.command); None: yaw_torque_fraction always")
