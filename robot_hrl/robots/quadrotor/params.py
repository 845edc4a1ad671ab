"""Physical model of a quadrotor: the single source of truth for every consumer.

The torch simulator, the PyBullet URDF generator, the shields' stopping-distance model and
the Crazyflie C code's action mapping all read these numbers from here, so a change of
airframe is one edit.

A :class:`QuadrotorParams` is also a robot (robot_hrl.robots.base.Robot): its methods answer the
protocol (the action spec sized from these numbers, the wrench command on ``/cmd_wrench``, the
quadrotor shield). Methods are not dataclass fields, so the parameter hash does not see them.

Conventions (REP 103): world frame ENU, body frame FLU (x forward, y left, z up), SI units.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Mapping

import numpy as np

from robot_hrl.robots.base import CommandOutput, package_shield_config, resolve_mode

if TYPE_CHECKING:
    from robot_hrl.contract.schema import ActionSpec

WRENCH_COMMAND_TOPIC = "/cmd_wrench"
"""Where a quadrotor's collective thrust and body torques go (geometry_msgs/WrenchStamped, frame base_link)."""

STANDARD_GRAVITY_MPS2: float = 9.80665
"""Standard gravity (CGPM 1901), m/s^2."""


@dataclass(frozen=True)
class QuadrotorParams:
    """Rigid-body, rotor and motor parameters of an X-configuration quadrotor."""

    name: str
    """Robot name used in the policy contract, e.g. ``crazyflie_2x``."""
    mass_kg: float
    """Take-off mass including battery."""
    inertia_kgm2: tuple[float, float, float]
    """Principal moments of inertia (Ixx, Iyy, Izz) about the body FLU axes."""
    rotor_positions_m: tuple[tuple[float, float, float], ...]
    """Rotor hub positions in the body frame, in the firmware's motor order (M1..M4)."""
    rotor_spin_directions: tuple[int, ...]
    """+1 where the propeller spins counter-clockwise seen from above (its drag torque on the
    body is then clockwise, i.e. negative about body z), -1 for clockwise."""
    thrust_coefficient_n_per_rpm2: float
    """Static thrust per rotor = k_f * rpm^2."""
    torque_to_thrust_m: float
    """Rotor drag torque = this * rotor thrust (yaw moment arm)."""
    motor_time_constant_s: float
    """First-order lag from commanded to actual rotor speed."""
    rpm_min: float
    """Lowest rotor speed the ESC/driver produces while armed."""
    rpm_max: float
    """Saturation rotor speed."""
    collision_radius_m: float
    """Radius of a sphere that encloses the airframe and propellers."""
    body_height_m: float
    """Height of the airframe, used for ground contact and the URDF."""
    linear_drag_coefficient_ns_per_m: tuple[float, float, float] = (0.0, 0.0, 0.0)
    """Body-frame linear drag force per unit airspeed (N s / m)."""
    ground_effect_coefficient: float = 0.0
    """Ground-effect gain of the published model; 0 disables it."""
    propeller_radius_m: float = 0.0
    """Propeller radius, which scales the ground effect."""
    max_tilt_rad: float = 0.0
    """Largest tilt the airframe is flown at in normal operation (used by the shields)."""
    max_speed_mps: float = 0.0
    """Largest speed the airframe is flown at in normal operation (used by the shields)."""
    sources: dict[str, str] = field(default_factory=dict, compare=False)
    """Where each value comes from; excluded from the hash."""

    # ---- derived quantities -------------------------------------------------------------
    @property
    def weight_n(self) -> float:
        return self.mass_kg * STANDARD_GRAVITY_MPS2

    @property
    def max_rotor_thrust_n(self) -> float:
        return self.thrust_coefficient_n_per_rpm2 * self.rpm_max**2

    @property
    def min_rotor_thrust_n(self) -> float:
        return self.thrust_coefficient_n_per_rpm2 * self.rpm_min**2

    @property
    def max_total_thrust_n(self) -> float:
        return self.num_rotors * self.max_rotor_thrust_n

    @property
    def thrust_to_weight(self) -> float:
        return self.max_total_thrust_n / self.weight_n

    @property
    def hover_rpm(self) -> float:
        return float(np.sqrt(self.weight_n / self.num_rotors / self.thrust_coefficient_n_per_rpm2))

    @property
    def num_rotors(self) -> int:
        return len(self.rotor_positions_m)

    def allocation_matrix(self) -> np.ndarray:
        """4x4 matrix A with [thrust_z, tau_x, tau_y, tau_z] = A @ rotor_thrusts (body FLU)."""
        positions = np.asarray(self.rotor_positions_m, dtype=np.float64)
        spins = np.asarray(self.rotor_spin_directions, dtype=np.float64)
        return np.stack(
            [
                np.ones(self.num_rotors),
                positions[:, 1],  # tau_x = y * f
                -positions[:, 0],  # tau_y = -x * f
                -spins * self.torque_to_thrust_m,  # CCW rotor -> clockwise (negative) drag torque
            ]
        )

    def params_sha256(self) -> str:
        """Hash of the physical parameters: a contract records it, a mismatch is reported."""
        payload = {k: v for k, v in asdict(self).items() if k != "sources"}
        text = json.dumps(payload, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()

    # ---- the robot protocol (robot_hrl.robots.base.Robot) -------------------------------------
    @property
    def action_modes(self) -> tuple[str, ...]:
        """Collective thrust and body torques (crazyflie-firmware controlModeForceTorque)."""
        return ("collective_thrust_body_torque",)

    def action_spec(self, mode: str | None = None) -> "ActionSpec":
        """The action spec of ``mode`` (the only one: collective thrust and body torques), sized from
        these parameters (:func:`robot_hrl.robots.quadrotor.actions.quadrotor_action_spec`)."""
        resolve_mode(self, mode)
        from robot_hrl.robots.quadrotor.actions import quadrotor_action_spec

        return quadrotor_action_spec(self)

    def neutral_command(self, mode: str | None = None) -> np.ndarray:
        """Level hover at the nominal mass: [weight N, 0, 0, 0 N m]."""
        resolve_mode(self, mode)
        return np.array([self.weight_n, 0.0, 0.0, 0.0])

    def command_output(self, mode: str | None = None) -> CommandOutput:
        resolve_mode(self, mode)
        return CommandOutput(WRENCH_COMMAND_TOPIC)

    @property
    def lands(self) -> bool:
        """A quadrotor flies: a subgoal on the floor is a landing request."""
        return True

    @property
    def shield_config_path(self) -> Path:
        return package_shield_config(self.name)

    @property
    def shield_family(self) -> str:
        return "robot_hrl.robots.quadrotor.shield"

    def observation_terms(self) -> Mapping[str, Callable]:
        """The rigid-body terms of robot_hrl.contract.observations (the simulator has a twin of each)."""
        from robot_hrl.contract.observations import OBSERVATION_TERMS

        return OBSERVATION_TERMS
