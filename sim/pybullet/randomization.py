"""Domain randomization of the PyBullet quadrotor: the true airframe differs from the nominal one.

The firmware (mixer and thrust-to-speed map) always uses the nominal robot; the physics uses
the sampled one. A fresh sample is drawn at every ``reset``.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np

from robot_hrl.robots.quadrotor import QuadrotorParams

Range = tuple[float, float]


@dataclass(frozen=True)
class RandomizationCfg:
    """Uniform ranges; a range (a, a) fixes the value. Scales multiply the nominal value."""

    mass_scale: Range = (0.95, 1.05)
    """Take-off mass (battery, decks)."""
    inertia_scale: Range = (0.9, 1.1)
    """All three principal moments, one common factor."""
    thrust_coefficient_scale: Range = (0.9, 1.1)
    """Propeller wear, battery voltage: thrust per rpm^2."""
    motor_time_constant_s: Range = (0.02, 0.15)
    """The span used by published Crazyflie simulators (robot_hrl/robots/crazyflie.py)."""
    linear_drag_coefficient_ns_per_m: Range = (0.0, 0.01)
    """Body-frame drag per m/s, all three axes, one common value."""

    def __post_init__(self) -> None:
        for f in fields(self):
            lo, hi = getattr(self, f.name)
            if not (np.isfinite(lo) and np.isfinite(hi) and lo <= hi):
                raise ValueError(f"randomization range {f.name}={(lo, hi)} must be finite with low <= high")
            if lo < 0:
                raise ValueError(f"randomization range {f.name}={(lo, hi)} must not be negative")
        if self.mass_scale[0] <= 0 or self.inertia_scale[0] <= 0 or self.thrust_coefficient_scale[0] <= 0:
            raise ValueError("mass, inertia and thrust-coefficient scales must be positive")


@dataclass(frozen=True)
class Dynamics:
    """The airframe the physics integrates during one episode."""

    mass_kg: float
    inertia_kgm2: tuple[float, float, float]
    thrust_coefficient_n_per_rpm2: float
    motor_time_constant_s: float
    linear_drag_coefficient_ns_per_m: tuple[float, float, float]

    @classmethod
    def nominal(cls, robot: QuadrotorParams) -> "Dynamics":
        return cls(
            mass_kg=robot.mass_kg,
            inertia_kgm2=tuple(robot.inertia_kgm2),
            thrust_coefficient_n_per_rpm2=robot.thrust_coefficient_n_per_rpm2,
            motor_time_constant_s=robot.motor_time_constant_s,
            linear_drag_coefficient_ns_per_m=tuple(robot.linear_drag_coefficient_ns_per_m),
        )

    @classmethod
    def sample(cls, robot: QuadrotorParams, cfg: RandomizationCfg, rng: np.random.Generator) -> "Dynamics":
        u = lambda r: float(rng.uniform(r[0], r[1]))  # noqa: E731
        inertia = u(cfg.inertia_scale)
        drag = u(cfg.linear_drag_coefficient_ns_per_m)
        return cls(
            mass_kg=robot.mass_kg * u(cfg.mass_scale),
            inertia_kgm2=tuple(i * inertia for i in robot.inertia_kgm2),
            thrust_coefficient_n_per_rpm2=robot.thrust_coefficient_n_per_rpm2 * u(cfg.thrust_coefficient_scale),
            motor_time_constant_s=u(cfg.motor_time_constant_s),
            linear_drag_coefficient_ns_per_m=(drag, drag, drag),
        )
