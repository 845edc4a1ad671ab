"""Domain randomization of the PyBullet quadrotor: the true airframe differs from the nominal one.

The ranges mirror the training environment's (``sim.envs.goto_env_cfg.RandomizationCfg``):
build them with :meth:`RandomizationCfg.from_training` rather than copying numbers. The
firmware (mixer and thrust-to-speed map) always uses the nominal robot; the physics uses the
sampled airframe. A fresh sample is drawn at every ``reset``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from robot_hrl.robots.quadrotor import QuadrotorParams

Range = tuple[float, float]


@dataclass(frozen=True)
class RandomizationCfg:
    """Uniform ranges (scales multiply the nominal value); a range (a, a) fixes the value."""

    mass_scale: Range = (0.9, 1.1)
    inertia_scale: Range = (0.85, 1.15)
    """Each principal moment is scaled independently."""
    thrust_coefficient_scale: Range = (0.9, 1.1)
    torque_coefficient_scale: Range = (0.9, 1.1)
    motor_time_constant_s: Range = (0.02, 0.15)
    """Drawn log-uniformly, as in training."""
    max_disturbance_force_n: float = 0.01
    """Constant world-frame force per episode, random direction, magnitude uniform up to this."""
    max_disturbance_torque_nm: float = 5.0e-5
    """Constant body-frame torque per episode, each axis uniform in [-this, this]."""
    action_latency_steps: tuple[int, int] = (0, 1)
    """Wrenches take effect this many control steps late (inclusive range)."""
    linear_drag_coefficient_ns_per_m: Range = (0.0, 0.0)
    """Body-frame drag per m/s (one value for all axes). The training env has no drag term: 0 by default."""

    def __post_init__(self) -> None:
        for name in ("mass_scale", "inertia_scale", "thrust_coefficient_scale", "torque_coefficient_scale",
                     "motor_time_constant_s"):
            lo, hi = getattr(self, name)
            if not (math.isfinite(lo) and math.isfinite(hi) and 0 < lo <= hi):
                raise ValueError(f"randomization {name}={(lo, hi)} must satisfy 0 < low <= high")
        lo, hi = self.linear_drag_coefficient_ns_per_m
        if not (math.isfinite(lo) and math.isfinite(hi) and 0 <= lo <= hi):
            raise ValueError(f"randomization linear_drag_coefficient_ns_per_m={(lo, hi)} must satisfy 0 <= low <= high")
        if not (self.max_disturbance_force_n >= 0 and self.max_disturbance_torque_nm >= 0):
            raise ValueError("randomization max_disturbance_force_n and max_disturbance_torque_nm must be >= 0")
        lo, hi = self.action_latency_steps
        if int(lo) != lo or int(hi) != hi or not 0 <= lo <= hi:
            raise ValueError(f"randomization action_latency_steps={(lo, hi)} must be integers 0 <= low <= high")

    @classmethod
    def from_training(cls, training_cfg=None, **overrides) -> "RandomizationCfg":
        """The ranges of the training env's ``RandomizationCfg`` (default: its defaults)."""
        from sim.envs.goto_env_cfg import RandomizationCfg as TrainingRandomizationCfg

        t = training_cfg if training_cfg is not None else TrainingRandomizationCfg()
        values = dict(
            mass_scale=tuple(t.mass_scale_range),
            inertia_scale=tuple(t.inertia_scale_range),
            thrust_coefficient_scale=tuple(t.thrust_coefficient_scale_range),
            torque_coefficient_scale=tuple(t.torque_coefficient_scale_range),
            motor_time_constant_s=tuple(t.motor_time_constant_range_s),
            max_disturbance_force_n=float(t.max_disturbance_force_n),
            max_disturbance_torque_nm=float(t.max_disturbance_torque_nm),
            action_latency_steps=tuple(int(v) for v in t.action_latency_steps_range),
        )
        values.update(overrides)
        return cls(**values)


@dataclass(frozen=True)
class Dynamics:
    """The airframe and disturbances the physics integrates during one episode."""

    mass_kg: float
    inertia_kgm2: tuple[float, float, float]
    thrust_coefficient_n_per_rpm2: float
    torque_to_thrust_m: float
    motor_time_constant_s: float
    linear_drag_coefficient_ns_per_m: tuple[float, float, float]
    disturbance_force_w: tuple[float, float, float] = (0.0, 0.0, 0.0)
    disturbance_torque_b: tuple[float, float, float] = (0.0, 0.0, 0.0)
    action_latency_steps: int = 0

    @classmethod
    def nominal(cls, robot: QuadrotorParams) -> "Dynamics":
        return cls(
            mass_kg=robot.mass_kg,
            inertia_kgm2=tuple(robot.inertia_kgm2),
            thrust_coefficient_n_per_rpm2=robot.thrust_coefficient_n_per_rpm2,
            torque_to_thrust_m=robot.torque_to_thrust_m,
            motor_time_constant_s=robot.motor_time_constant_s,
            linear_drag_coefficient_ns_per_m=tuple(robot.linear_drag_coefficient_ns_per_m),
        )

    @classmethod
    def sample(cls, robot: QuadrotorParams, cfg: RandomizationCfg, rng: np.random.Generator) -> "Dynamics":
        u = lambda r: float(rng.uniform(r[0], r[1]))  # noqa: E731
        lo, hi = cfg.motor_time_constant_s
        tau = float(np.clip(math.exp(rng.uniform(math.log(lo), math.log(hi))), lo, hi))
        direction = rng.normal(size=3)
        direction /= max(float(np.linalg.norm(direction)), 1e-6)
        force = direction * rng.uniform(0.0, cfg.max_disturbance_force_n)
        torque = rng.uniform(-cfg.max_disturbance_torque_nm, cfg.max_disturbance_torque_nm, size=3)
        drag = u(cfg.linear_drag_coefficient_ns_per_m)
        return cls(
            mass_kg=robot.mass_kg * u(cfg.mass_scale),
            inertia_kgm2=tuple(float(i * rng.uniform(*cfg.inertia_scale)) for i in robot.inertia_kgm2),
            thrust_coefficient_n_per_rpm2=robot.thrust_coefficient_n_per_rpm2 * u(cfg.thrust_coefficient_scale),
            torque_to_thrust_m=robot.torque_to_thrust_m * u(cfg.torque_coefficient_scale),
            motor_time_constant_s=tau,
            linear_drag_coefficient_ns_per_m=(drag, drag, drag),
            disturbance_force_w=tuple(float(v) for v in force),
            disturbance_torque_b=tuple(float(v) for v in torque),
            action_latency_steps=int(rng.integers(cfg.action_latency_steps[0], cfg.action_latency_steps[1] + 1)),
        )
