"""The constants of one environment configuration, as the step backends take them.

``fused_constants(cfg, robot, contract)`` resolves a ``GotoEnvCfg`` once: every number the step uses
becomes a field of a (nested) NamedTuple, so ``torch.compile`` treats them as compile-time constants
and the native build writes them into its C header as literals. Per-step values that change (the
curriculum's scales) are not here: they come in as arguments of the step.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from robot_hrl.contract import error_integral
from robot_hrl.contract.schema import PolicyContract
from robot_hrl.robots.quadrotor import QuadrotorParams
from sim.envs.goto_env_cfg import GotoEnvCfg
from sim.envs.layout import StateLayout, actuator_chain, param_specs, state_layout


class StepConstants(NamedTuple):
    """Configuration floats of the physics, terminations and rewards."""

    decimation: int
    physics_dt: float
    gravity: float
    floor_z: float
    ground_friction: float
    contact_height: float
    terminate_on_ground_contact: bool
    out_of_bounds_distance_m: float
    ceiling_m: float
    position_tolerance_m: float
    speed_tolerance_mps: float
    position_coarse_weight: float
    position_coarse_scale_m: float
    position_fine_weight: float
    position_fine_scale_m: float
    velocity_weight: float
    angular_velocity_weight: float
    tilt_weight: float
    termination_weight: float
    integral_decay: float
    """The position error's integral: exp(-dt / time constant) per control step (robot_hrl.contract.error_integral)."""
    integral_dt_s: float
    integral_limit_m_s: float
    integral_yaw_frame: bool
    """The error is rotated into the yaw frame (the contract's frame 'yaw_flu'), else world ENU."""
    integral_active_radius_sq_m2: float | None
    """The square of the contract's ``active_radius_m`` (the error counts only within it), m^2; None: always."""


class ResetConstants(NamedTuple):
    """The distributions of a reset (``step_core.reset_draws``)."""

    randomize: bool
    """False: the nominal robot (nominal parameters, no disturbance, no latency)."""
    param_bounds: tuple[tuple[float, float], ...]
    """(low, high) of each parameter of the layout, in row order (the training range of the motor lag where configured)."""
    param_nominal: tuple[float, ...]
    """Each parameter's value without randomization."""
    action_latency_steps_range: tuple[int, int]
    spawn_xy_half_extent_m: float
    spawn_height_range_m: tuple[float, float]
    max_initial_tilt_rad: float
    max_initial_speed_mps: float
    max_initial_body_rate_radps: float
    subgoal_radius_m: float
    min_goal_height_m: float
    gravity: float


class FusedConstants(NamedTuple):
    """Everything constant of one environment configuration (the step's first argument)."""

    step: StepConstants
    reset: ResetConstants
    layout: StateLayout
    robot: str
    """The robot package whose actuator chain the step runs (``layout.actuator_chain(robot)``)."""
    chain: NamedTuple
    """The chain's constants (``<chain>.constants(robot)``)."""
    max_episode_length: int
    force_norm: float
    torque_norm: float
    term_names: tuple[str, ...]
    """The contract's observation terms, in order."""
    action_low: tuple[float, ...]
    """The contract's action bounds: the command at a = -1 and a = +1."""
    action_high: tuple[float, ...]
    mass_kg: float
    inertia_kgm2: tuple[float, float, float]
    obs_low: tuple[float, ...]
    obs_high: tuple[float, ...]
    noise_std: tuple[float, ...]
    """Per observation column; all 0: no noise."""


def _float32(values) -> tuple[float, ...]:
    """Values rounded to float32 (the step's precision), as Python floats."""
    return tuple(float(v) for v in np.asarray(list(values), dtype=np.float32))


def fused_constants(cfg: GotoEnvCfg, robot: QuadrotorParams, contract: PolicyContract) -> FusedConstants:
    """Resolve a validated ``cfg`` for ``robot`` and its policy ``contract``."""
    chain = actuator_chain(robot.name)
    cmd, rcfg, t, w, phys = cfg.command, cfg.randomization, cfg.terminations, cfg.rewards, cfg.physics
    step_dt = 1.0 / cmd.control_rate_hz
    decimation = int(round(phys.physics_rate_hz / cmd.control_rate_hz))
    floor_z = phys.ground_height_m + robot.body_height_m / 2.0
    max_latency = int(rcfg.action_latency_steps_range[1]) if rcfg.enabled else 0
    num_actions = len(contract.action.terms)
    layout = state_layout(chain, num_actions, max_latency + 1)
    k = chain.constants(robot)
    specs = param_specs(chain)
    # the integral's parameters: the contract's term, else the configuration's (the state row is kept either way)
    spec = next((t.integral for t in contract.observations if t.integral is not None), None) or cfg.error_integral()
    lows, highs, stds = [], [], []
    for term in contract.observations:
        lows += [term.clip[0]] * term.size
        highs += [term.clip[1]] * term.size
        stds += [float(getattr(rcfg.observation_noise, term.name, 0.0))] * term.size
    noisy = rcfg.enabled and any(stds)
    return FusedConstants(
        step=StepConstants(
            decimation=decimation, physics_dt=step_dt / decimation, gravity=phys.gravity_mps2, floor_z=floor_z,
            ground_friction=phys.ground_friction, contact_height=floor_z + t.ground_contact_margin_m,
            terminate_on_ground_contact=t.terminate_on_ground_contact, out_of_bounds_distance_m=t.out_of_bounds_distance_m,
            ceiling_m=t.ceiling_m, position_tolerance_m=cfg.success.position_tolerance_m,
            speed_tolerance_mps=cfg.success.speed_tolerance_mps, position_coarse_weight=w.position_coarse_weight,
            position_coarse_scale_m=w.position_coarse_scale_m, position_fine_weight=w.position_fine_weight,
            position_fine_scale_m=w.position_fine_scale_m, velocity_weight=w.velocity_weight,
            angular_velocity_weight=w.angular_velocity_weight, tilt_weight=w.tilt_weight, termination_weight=w.termination_weight,
            integral_decay=error_integral.decay(spec, cmd.control_rate_hz), integral_dt_s=step_dt, integral_limit_m_s=spec.limit_m_s,
            integral_yaw_frame=spec.frame == "yaw_flu",
            integral_active_radius_sq_m2=None if spec.active_radius_m is None else spec.active_radius_m * spec.active_radius_m,
        ),
        reset=ResetConstants(
            randomize=rcfg.enabled,
            param_bounds=tuple(s.bounds(rcfg) for s in specs),
            param_nominal=tuple(float(s.nominal(k)) for s in specs),
            action_latency_steps_range=tuple(int(v) for v in rcfg.action_latency_steps_range),
            spawn_xy_half_extent_m=cmd.spawn_xy_half_extent_m, spawn_height_range_m=tuple(cmd.spawn_height_range_m),
            max_initial_tilt_rad=cmd.max_initial_tilt_rad, max_initial_speed_mps=cmd.max_initial_speed_mps,
            max_initial_body_rate_radps=cmd.max_initial_body_rate_radps, subgoal_radius_m=cmd.subgoal_radius_m,
            min_goal_height_m=cmd.min_goal_height_m, gravity=phys.gravity_mps2,
        ),
        layout=layout,
        robot=robot.name,
        chain=k,
        max_episode_length=int(round(cmd.episode_length_s / step_dt)),
        force_norm=max(rcfg.max_disturbance_force_n, 1e-9),
        torque_norm=max(rcfg.max_disturbance_torque_nm, 1e-12),
        term_names=tuple(term.name for term in contract.observations),
        action_low=_float32(term.low for term in contract.action.terms),
        action_high=_float32(term.high for term in contract.action.terms),
        mass_kg=float(robot.mass_kg),
        inertia_kgm2=tuple(float(v) for v in robot.inertia_kgm2),
        obs_low=tuple(lows),
        obs_high=tuple(highs),
        noise_std=tuple(stds) if noisy else (0.0,) * len(stds),
    )
