"""Domain randomization of the PyBullet quadrotor: the true airframe differs from the nominal one.

The ranges mirror the training environment's (``sim.envs.goto_env_cfg.RandomizationCfg``):
build them with :meth:`RandomizationCfg.from_training` rather than copying numbers. The
firmware (mixer and thrust-to-speed map) always uses the nominal robot; the physics uses the
sampled airframe. A fresh sample is drawn at every ``reset``. The actuator chain's parameters
(``robot_hrl.robots.<robot>.actuators.PARAMETERS``) are drawn from their declarations: each has a
range field here named as the parameter.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Mapping

import numpy as np

from robot_hrl.robots import CRAZYFLIE_2X
from robot_hrl.robots.actuator_chain import chain_of
from robot_hrl.robots.quadrotor import QuadrotorParams

Range = tuple[float, float]


@dataclass(frozen=True)
class RandomizationCfg:
    """Uniform ranges (scales multiply the nominal value); a range (a, a) fixes the value."""

    mass_scale: Range = (27.0 / 31.5, 36.0 / 31.5)
    """27 to 36 g, as in training."""
    inertia_scale: Range = (0.85, 1.15)
    """Each principal moment is scaled independently."""
    thrust_coefficient_scale: Range = (0.9, 1.1)
    torque_coefficient_scale: Range = (0.9, 1.1)
    motor_time_constant_s: Range = (0.02, 0.15)
    """Drawn log-uniformly, as in training."""
    battery_open_circuit_v: Range = (3.3, 4.2)
    """The battery's open-circuit voltage, V (actuators.py OPEN_CIRCUIT_RANGE_V)."""
    battery_resistance_ohm: Range = (0.03, 0.06)
    """The battery's resistance, ohm (actuators.py RESISTANCE_RANGE_OHM)."""
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
                     "motor_time_constant_s", "battery_open_circuit_v", "battery_resistance_ohm"):
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
    def from_training(cls, training_cfg=None, robot: QuadrotorParams = CRAZYFLIE_2X, **overrides) -> "RandomizationCfg":
        """The ranges of the training env's ``RandomizationCfg`` (default: its defaults); the parameters of
        ``robot``'s actuator chain from their whole ranges (``ChainParameter.range_key``), not training's part."""
        from robot_hrl.robots.actuator_chain import chain_of
        from sim.envs.goto_env_cfg import RandomizationCfg as TrainingRandomizationCfg

        t = training_cfg if training_cfg is not None else TrainingRandomizationCfg()
        values = dict(
            mass_scale=tuple(t.mass_scale_range),
            inertia_scale=tuple(t.inertia_scale_range),
            max_disturbance_force_n=float(t.max_disturbance_force_n),
            max_disturbance_torque_nm=float(t.max_disturbance_torque_nm),
            action_latency_steps=tuple(int(v) for v in t.action_latency_steps_range),
        )
        for p in chain_of(robot.name).PARAMETERS:
            values[p.name] = tuple(getattr(t, p.range_key))
        values.update(overrides)
        return cls(**values)

    def chain_range(self, parameter) -> Range:
        """The range of an actuator-chain parameter (the field named as the parameter)."""
        if not hasattr(self, parameter.name):
            raise ValueError(f"sim.pybullet.RandomizationCfg has no range for the actuator chain's parameter {parameter.name!r}; "
                             f"add a field {parameter.name}: Range to sim/pybullet/randomization.py")
        return getattr(self, parameter.name)


@dataclass(frozen=True)
class Dynamics:
    """The airframe and disturbances the physics integrates during one episode."""

    mass_kg: float
    inertia_kgm2: tuple[float, float, float]
    linear_drag_coefficient_ns_per_m: tuple[float, float, float]
    chain_parameters: Mapping[str, float] = field(default_factory=dict)
    """The actuator chain's parameters (``robot_hrl.robots.<robot>.actuators.PARAMETERS``) by name."""
    disturbance_force_w: tuple[float, float, float] = (0.0, 0.0, 0.0)
    disturbance_torque_b: tuple[float, float, float] = (0.0, 0.0, 0.0)
    action_latency_steps: int = 0

    @classmethod
    def nominal(cls, robot: QuadrotorParams) -> "Dynamics":
        chain = chain_of(robot.name)
        k = chain.constants(robot)
        return cls(
            mass_kg=robot.mass_kg,
            inertia_kgm2=tuple(robot.inertia_kgm2),
            linear_drag_coefficient_ns_per_m=tuple(robot.linear_drag_coefficient_ns_per_m),
            chain_parameters={p.name: float(p.nominal(k)) for p in chain.PARAMETERS},
        )

    @classmethod
    def sample(cls, robot: QuadrotorParams, cfg: RandomizationCfg, rng: np.random.Generator) -> "Dynamics":
        """A random airframe. The draws keep their historical order (the log-uniform chain parameters first,
        the uniform ones after the inertia), so a seed gives the airframes it always gave."""
        u = lambda r: float(rng.uniform(r[0], r[1]))  # noqa: E731
        chain = chain_of(robot.name)
        chain_parameters: dict[str, float] = {}
        for p in chain.PARAMETERS:
            if p.distribution == "log_uniform":
                lo, hi = cfg.chain_range(p)
                chain_parameters[p.name] = float(np.clip(math.exp(rng.uniform(math.log(lo), math.log(hi))), lo, hi))
        direction = rng.normal(size=3)
        direction /= max(float(np.linalg.norm(direction)), 1e-6)
        force = direction * rng.uniform(0.0, cfg.max_disturbance_force_n)
        torque = rng.uniform(-cfg.max_disturbance_torque_nm, cfg.max_disturbance_torque_nm, size=3)
        drag = u(cfg.linear_drag_coefficient_ns_per_m)
        mass_kg = robot.mass_kg * u(cfg.mass_scale)
        inertia = tuple(float(i * rng.uniform(*cfg.inertia_scale)) for i in robot.inertia_kgm2)
        for p in chain.PARAMETERS:
            if p.distribution == "uniform":
                chain_parameters[p.name] = u(cfg.chain_range(p))
            elif p.distribution != "log_uniform":
                raise ValueError(f"chain parameter {p.name!r}: unknown distribution {p.distribution!r}")
        return cls(
            mass_kg=mass_kg,
            inertia_kgm2=inertia,
            linear_drag_coefficient_ns_per_m=(drag, drag, drag),
            chain_parameters={p.name: chain_parameters[p.name] for p in chain.PARAMETERS},
            disturbance_force_w=tuple(float(v) for v in force),
            disturbance_torque_b=tuple(float(v) for v in torque),
            action_latency_steps=int(rng.integers(cfg.action_latency_steps[0], cfg.action_latency_steps[1] + 1)),
        )
