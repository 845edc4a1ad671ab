"""Configuration of the ``crazyflie-goto`` environment (Isaac Lab style nested dataclasses).

Every number the environment uses lives here or in ``robot_hrl.robots.CRAZYFLIE_2X``; the
environment code holds no literals. ``GotoEnvCfg.to_dict()`` / ``GotoEnvCfg.from_dict()``
round-trip through JSON (``run_config.json``), and ``from_dict`` rejects unknown keys with an
error naming the key and the valid ones.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any

from robot_hrl.contract import DEFAULT_CONTROL_RATE_HZ, DEFAULT_SUBGOAL_RADIUS_M
from robot_hrl.errors import ConfigError
from robot_hrl.robots import STANDARD_GRAVITY_MPS2


@dataclass
class PhysicsCfg:
    """Rigid-body and motor integration."""

    physics_rate_hz: float = 200.0
    """Physics rate; must be an integer multiple of the control rate (decimation = ratio)."""
    gravity_mps2: float = STANDARD_GRAVITY_MPS2
    """Gravity magnitude (world -z)."""
    ground_height_m: float = 0.0
    """Height of the floor plane; the airframe cannot go below it."""
    ground_friction: float = 0.5
    """Fraction of horizontal velocity and body rate removed per physics step while on the floor."""
    compile: bool = False
    """Run the control step (step_core.fused_control_step) as one ``torch.compile``d graph (sim/envs/backends.py):
    the eager step's computation and random streams (the same numbers to float rounding), faster at large batch
    and on GPUs; the first step compiles (about a minute)."""
    native: bool = False
    """Run the control step as C (sim/envs/native/control_step.c, its chain and tables generated from the same
    Python), built for the configuration with the system C compiler (about 1 s, cached). CPU only; the fastest
    CPU path (benchmarks/README.md). Exclusive with ``compile``. Results agree with the torch step's to float
    rounding. Neither set: the eager torch step."""


@dataclass
class CommandCfg:
    """Initial states and goals of an episode."""

    control_rate_hz: float = DEFAULT_CONTROL_RATE_HZ
    """Policy rate (the contract's control rate)."""
    episode_length_s: float = 5.0
    """Episode duration; success is judged at its end."""
    subgoal_radius_m: float = DEFAULT_SUBGOAL_RADIUS_M
    """Goals are drawn uniformly in a ball of this radius around the start position."""
    spawn_xy_half_extent_m: float = 1.0
    """Start positions x, y uniform in [-this, this]."""
    spawn_height_range_m: tuple[float, float] = (1.0, 2.0)
    """Start heights uniform in this range."""
    min_goal_height_m: float = 0.3
    """Goals are raised to at least this height."""
    max_initial_tilt_rad: float = math.radians(30.0)
    """Start attitudes: random yaw, tilt uniform up to this angle about a random horizontal axis."""
    max_initial_speed_mps: float = 1.0
    """Start velocities: random direction, speed uniform up to this."""
    max_initial_body_rate_radps: float = 3.0
    """Start body rates: each axis uniform in [-this, this]."""
    observe_error_integral: bool = False
    """The policy also observes the leaky integral of the position error (robot_hrl.contract.GOTO_ERROR_INTEGRAL,
    issue 17's no-sag term; the step keeps it as a state row either way). The contract, and so the exported
    model, carries the term and its parameters when this is set."""
    error_integral: dict | None = None
    """The integral's parameters (the fields of ``robot_hrl.contract.ErrorIntegral``: time_constant_s, limit_m_s,
    subgoal_change_m, frame, active_radius_m) where they differ from ``GOTO_ERROR_INTEGRAL``; None: that default. An
    exported model is evaluated with its own (``benchmarks/bench_firmware_chain.py``, the navigate env's frozen skill)."""


@dataclass
class TerminationCfg:
    """When an episode ends before its time limit."""

    terminate_on_ground_contact: bool = True
    """Touching the floor is a crash and ends the episode."""
    ground_contact_margin_m: float = 0.005
    """Contact is declared this far above the lowest position the body can reach."""
    out_of_bounds_distance_m: float = 2.5
    """Ends the episode when the robot is farther than this from its goal."""
    ceiling_m: float = 5.0
    """Ends the episode above this height."""


@dataclass
class SuccessCfg:
    """Success at the end of an episode (time-out, not crashed)."""

    position_tolerance_m: float = 0.10
    """Final distance to the goal must be below this."""
    speed_tolerance_mps: float = 0.2
    """Final speed must be below this."""


@dataclass
class ObservationNoiseCfg:
    """Gaussian noise (standard deviations) added to each policy term before clipping."""

    subgoal_error_w: float = 0.005
    rotation_matrix_wb: float = 0.005
    linear_velocity_w: float = 0.02
    angular_velocity_b: float = 0.05
    last_action: float = 0.0


@dataclass
class RandomizationCfg:
    """Domain randomization, drawn per environment at every reset."""

    enabled: bool = True
    """False: nominal robot, no disturbances, no noise, no latency (evaluation against the nominal model)."""
    mass_scale_range: tuple[float, float] = (27.0 / 31.5, 36.0 / 31.5)
    """27 g (the bare Crazyflie 2.1) to 36 g (CF_MASS 29 g of crazyflie-firmware platform_defaults_cf2.h plus a
    positioning deck and more) around the nominal 31.5 g."""
    inertia_scale_range: tuple[float, float] = (0.85, 1.15)
    """Each principal moment is scaled independently."""
    thrust_coefficient_scale_range: tuple[float, float] = (0.9, 1.1)
    """Scales k_f of all four rotors (the firmware mixer keeps the nominal value)."""
    torque_coefficient_scale_range: tuple[float, float] = (0.9, 1.1)
    motor_time_constant_range_s: tuple[float, float] = (0.02, 0.15)
    """The robot's motor lag uncertainty; drawn log-uniformly. Evaluation draws from all of it."""
    motor_time_constant_train_range_s: tuple[float, float] | None = (0.05, 0.15)
    """Training draws the motor time constant from this part of the range instead (None: all of it).

    The contract's observation has no history beyond the last action, so one policy must be
    stable for every motor lag. Drawn over the whole range, the slow motors (> 0.1 s) get a
    fifth of the episodes and the policy settles on a gain they cannot follow (success 0.91,
    plateau); drawn from the slow part, it reaches 0.95 on the whole range (benchmarks/README.md).
    Evaluation envs (``sim/train.py``'s, ``sim/evaluate.py``) set this to None.
    """
    battery_open_circuit_range_v: tuple[float, float] = (3.3, 4.2)
    """The battery's open-circuit voltage (robot_hrl/robots/crazyflie_2x/actuators.py OPEN_CIRCUIT_RANGE_V)."""
    battery_resistance_range_ohm: tuple[float, float] = (0.03, 0.06)
    """The battery's resistance (actuators.py RESISTANCE_RANGE_OHM); with the mass and voltage ranges the
    thrust-to-weight under full load reaches down to about 1.35."""
    max_disturbance_force_n: float = 0.01
    """Constant external force per episode, random direction, magnitude up to this (~4 % of weight)."""
    max_disturbance_torque_nm: float = 5.0e-5
    """Constant external torque per episode, each axis uniform up to this (~2 % of the torque authority)."""
    action_latency_steps_range: tuple[int, int] = (0, 1)
    """Actions take effect this many control steps late (inclusive range)."""
    observation_noise: ObservationNoiseCfg = field(default_factory=ObservationNoiseCfg)


@dataclass
class CurriculumCfg:
    """Linear ramps over the number of control steps the environment has taken."""

    enabled: bool = True
    """False: every ramp sits at its final value from the start (use for evaluation)."""
    ramp_steps: int = 2400
    """Control steps (per environment) over which the ramps go from start to end."""
    initial_state_scale: tuple[float, float] = (0.3, 1.0)
    """Multiplies the initial tilt, speed and body rate (easy starts first)."""
    disturbance_scale: tuple[float, float] = (0.0, 1.0)
    """Multiplies the disturbance force and torque."""
    action_rate_weight_scale: tuple[float, float] = (0.2, 1.0)
    """Multiplies the action-rate penalty weight."""


@dataclass
class RewardsCfg:
    """Reward terms (sim/envs/terms/rewards.py) and their weights; a weight of 0 disables a term."""

    position_coarse_weight: float = 1.0
    position_coarse_scale_m: float = 0.5
    position_fine_weight: float = 1.0
    position_fine_scale_m: float = 0.05
    velocity_weight: float = -0.05
    angular_velocity_weight: float = -0.002
    tilt_weight: float = -0.1
    action_rate_weight: float = -0.05
    termination_weight: float = -20.0
    """Paid once on a crash or on leaving the bounds."""


@dataclass
class GotoEnvCfg:
    """The ``crazyflie-goto`` task."""

    robot: str = "crazyflie_2x"
    """Name of the robot model in robot_hrl.robots."""
    physics: PhysicsCfg = field(default_factory=PhysicsCfg)
    command: CommandCfg = field(default_factory=CommandCfg)
    terminations: TerminationCfg = field(default_factory=TerminationCfg)
    success: SuccessCfg = field(default_factory=SuccessCfg)
    randomization: RandomizationCfg = field(default_factory=RandomizationCfg)
    curriculum: CurriculumCfg = field(default_factory=CurriculumCfg)
    rewards: RewardsCfg = field(default_factory=RewardsCfg)

    def contract(self, robot):
        """The go-to contract this configuration trains ``robot`` under (its rate, subgoal radius and terms)."""
        from robot_hrl.contract import goto_contract

        cmd = self.command
        return goto_contract(robot, cmd.control_rate_hz, cmd.subgoal_radius_m,
                             error_integral=self.error_integral() if cmd.observe_error_integral else None)

    def error_integral(self):
        """The position error integral's parameters: ``command.error_integral``, else ``GOTO_ERROR_INTEGRAL``."""
        from robot_hrl.contract import GOTO_ERROR_INTEGRAL, ErrorIntegral

        spec = self.command.error_integral
        if spec is None:
            return GOTO_ERROR_INTEGRAL
        try:
            return ErrorIntegral(**spec)
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"command.error_integral {spec!r} is not a valid ErrorIntegral ({exc}); give its fields "
                              "time_constant_s, limit_m_s, subgoal_change_m, frame and optionally active_radius_m, or null") from None

    # ---- serialization --------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> "GotoEnvCfg":
        return _from_dict(cls, data or {}, "env cfg")

    def validate(self) -> "GotoEnvCfg":
        """Raise :class:`ConfigError` naming the first inconsistent value."""
        ratio = self.physics.physics_rate_hz / self.command.control_rate_hz
        if self.command.control_rate_hz <= 0 or self.physics.physics_rate_hz <= 0:
            raise ConfigError("physics.physics_rate_hz and command.control_rate_hz must be positive")
        if abs(ratio - round(ratio)) > 1e-9 or round(ratio) < 1:
            raise ConfigError(
                f"physics.physics_rate_hz ({self.physics.physics_rate_hz}) must be an integer multiple of "
                f"command.control_rate_hz ({self.command.control_rate_hz}); e.g. 200 or 500 for 100 Hz control"
            )
        if self.physics.compile and self.physics.native:
            raise ConfigError("physics.compile and physics.native are two ways to run the same step; set one of them "
                              "(native on a CPU, compile on a GPU)")
        if self.command.episode_length_s * self.command.control_rate_hz < 1:
            raise ConfigError("command.episode_length_s is shorter than one control step; make it longer")
        self.error_integral()  # a malformed command.error_integral names its fields
        if self.command.subgoal_radius_m <= 0:
            raise ConfigError(f"command.subgoal_radius_m must be > 0, got {self.command.subgoal_radius_m}")
        r = self.randomization
        for name in (
            "mass_scale_range", "inertia_scale_range", "thrust_coefficient_scale_range",
            "torque_coefficient_scale_range", "motor_time_constant_range_s", "battery_open_circuit_range_v",
            "battery_resistance_range_ohm",
        ):
            lo, hi = getattr(r, name)
            if not (0 < lo <= hi):
                raise ConfigError(f"randomization.{name} must satisfy 0 < low <= high, got {(lo, hi)}")
        if r.motor_time_constant_train_range_s is not None:
            lo, hi = r.motor_time_constant_train_range_s
            full = r.motor_time_constant_range_s
            if not (full[0] <= lo <= hi <= full[1]):
                raise ConfigError(
                    f"randomization.motor_time_constant_train_range_s {(lo, hi)} must lie inside "
                    f"motor_time_constant_range_s {tuple(full)}; widen the range or use null for all of it"
                )
        lo, hi = r.action_latency_steps_range
        if not (0 <= lo <= hi) or int(lo) != lo or int(hi) != hi:
            raise ConfigError(f"randomization.action_latency_steps_range must be integers 0 <= low <= high, got {(lo, hi)}")
        if r.max_disturbance_force_n < 0 or r.max_disturbance_torque_nm < 0:
            raise ConfigError("randomization.max_disturbance_* must be >= 0")
        if self.curriculum.ramp_steps < 0:
            raise ConfigError(f"curriculum.ramp_steps must be >= 0, got {self.curriculum.ramp_steps}")
        lo, hi = self.command.spawn_height_range_m
        if not lo <= hi:
            raise ConfigError(f"command.spawn_height_range_m must have low <= high, got {(lo, hi)}")
        return self


def _from_dict(cls, data: dict[str, Any], where: str):
    if not isinstance(data, dict):
        raise ConfigError(f"{where} must be a mapping, got {type(data).__name__}")
    fields = {f.name: f for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - set(fields))
    if unknown:
        raise ConfigError(f"unknown key(s) {unknown} in {where}; valid keys: {sorted(fields)}")
    kwargs = {}
    defaults = cls()
    for name, value in data.items():
        current = getattr(defaults, name)
        if dataclasses.is_dataclass(current):
            kwargs[name] = _from_dict(type(current), value, f"{where}.{name}")
        elif isinstance(current, tuple) or (current is None and value is not None and "tuple" in str(fields[name].type)):
            if value is None and "None" in str(fields[name].type):
                kwargs[name] = None
                continue
            n = len(current) if current is not None else 2
            if not isinstance(value, (list, tuple)) or len(value) != n:
                raise ConfigError(f"{where}.{name} must be a list of {n} numbers, got {value!r}")
            kwargs[name] = tuple(value)
        else:
            kwargs[name] = value
    return cls(**kwargs)
