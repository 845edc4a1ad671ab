"""Batched quadrotor physics: firmware mixer, motor lag, rigid body, floor contact.

Pure functions of tensors, so that ``torch.compile`` can fuse them. Shapes: N environments.

Signal chain of one control step (what the firmware and the motors do):

    normalized action (N,4) --contract action spec--> wrench [T, tau_x, tau_y, tau_z]
    --firmware mixer (nominal inverse allocation + powerDistributionCap)--> rotor thrust command
    --nominal k_f--> rotor speed command (rpm) --first-order lag, saturation--> rotor speed
    --true k_f, true torque coefficient--> per-rotor thrust and drag torque --> rigid body.

Integration at the physics rate: motor speed with the exact solution of the first-order lag
(stable for any time constant), then semi-implicit (symplectic) Euler for the translational
and rotational velocities with Euler's equations (gyroscopic term included), and the
attitude advanced by the exact exponential map of the body rate, renormalized.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from robot_hrl.contract.actions import action_bounds, goto_action_spec
from robot_hrl.robots.quadrotor import QuadrotorParams
from sim.envs.math_utils import quat_from_rotvec, quat_mul, quat_rotate


@dataclass
class RobotConstants:
    """Nominal robot constants as tensors on the simulation device."""

    allocation: torch.Tensor
    """(4, 4) [T, tau] = A @ f, nominal."""
    inverse_allocation_t: torch.Tensor
    """(4, 4) transpose of the inverse allocation (firmware mixer)."""
    rotor_xy: torch.Tensor
    """(4, 2) rotor positions x, y in the body frame."""
    spin: torch.Tensor
    """(4,) +1 CCW, -1 CW."""
    action_low: torch.Tensor
    action_high: torch.Tensor
    mass_kg: float
    inertia_kgm2: torch.Tensor
    thrust_coefficient: float
    torque_to_thrust_m: float
    motor_time_constant_s: float
    rpm_min: float
    rpm_max: float
    max_rotor_thrust_n: float
    hover_rpm: float

    @classmethod
    def from_robot(cls, robot: QuadrotorParams, device: torch.device | str) -> "RobotConstants":
        alloc = robot.allocation_matrix()
        low, high = action_bounds(goto_action_spec(robot))
        f32 = dict(dtype=torch.float32, device=device)
        return cls(
            allocation=torch.tensor(alloc, **f32),
            inverse_allocation_t=torch.tensor(np.linalg.inv(alloc).T, **f32),
            rotor_xy=torch.tensor(np.asarray(robot.rotor_positions_m)[:, :2], **f32),
            spin=torch.tensor(robot.rotor_spin_directions, **f32),
            action_low=torch.tensor(low, **f32),
            action_high=torch.tensor(high, **f32),
            mass_kg=robot.mass_kg,
            inertia_kgm2=torch.tensor(robot.inertia_kgm2, **f32),
            thrust_coefficient=robot.thrust_coefficient_n_per_rpm2,
            torque_to_thrust_m=robot.torque_to_thrust_m,
            motor_time_constant_s=robot.motor_time_constant_s,
            rpm_min=robot.rpm_min,
            rpm_max=robot.rpm_max,
            max_rotor_thrust_n=robot.max_rotor_thrust_n,
            hover_rpm=robot.hover_rpm,
        )


def actions_to_wrench(actions: torch.Tensor, low: torch.Tensor, high: torch.Tensor) -> torch.Tensor:
    """Torch twin of robot_hrl.contract.actions_to_wrench: (N,4) in [-1,1] -> [T, tau_x, tau_y, tau_z]."""
    a = actions.clamp(-1.0, 1.0)
    return low + (a + 1.0) * 0.5 * (high - low)


def mix_wrench_to_rotor_thrusts(wrench: torch.Tensor, inverse_allocation_t: torch.Tensor, max_rotor_thrust_n: float) -> torch.Tensor:
    """Torch twin of robot_hrl.contract.mix_wrench_to_rotor_thrusts (firmware powerDistributionCap)."""
    thrusts = wrench @ inverse_allocation_t
    overshoot = (thrusts.amax(dim=-1, keepdim=True) - max_rotor_thrust_n).clamp(min=0.0)
    return (thrusts - overshoot).clamp(0.0, max_rotor_thrust_n)


def rotor_thrust_to_rpm(thrusts: torch.Tensor, thrust_coefficient: float, rpm_min: float, rpm_max: float) -> torch.Tensor:
    """Rotor speed command the firmware's thrust-to-PWM map aims for (nominal k_f)."""
    return torch.sqrt(thrusts.clamp(min=0.0) / thrust_coefficient).clamp(rpm_min, rpm_max)


def physics_substep(
    position: torch.Tensor,
    quat: torch.Tensor,
    velocity: torch.Tensor,
    omega: torch.Tensor,
    rpm: torch.Tensor,
    rpm_cmd: torch.Tensor,
    motor_alpha: torch.Tensor,
    thrust_coefficient: torch.Tensor,
    torque_coefficient: torch.Tensor,
    mass: torch.Tensor,
    inertia: torch.Tensor,
    force_ext_w: torch.Tensor,
    torque_ext_b: torch.Tensor,
    rotor_xy: torch.Tensor,
    spin: torch.Tensor,
    dt: float,
    gravity: float,
    rpm_min: float,
    rpm_max: float,
    floor_z: float,
    ground_friction: float,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Advance one physics step. Per-env parameters are (N,1) or (N,3); returns the new state and a contact flag.

    motor_alpha = 1 - exp(-dt / tau): the exact discretization of the first-order motor lag.
    """
    # motors: first-order lag on rotor speed, saturated
    rpm = (rpm + motor_alpha * (rpm_cmd - rpm)).clamp(rpm_min, rpm_max)
    f = thrust_coefficient * rpm * rpm  # (N,4) per-rotor thrust
    thrust = f.sum(dim=-1, keepdim=True)
    # torques in body FLU: tau_x = sum y f, tau_y = -sum x f, tau_z = -sum spin * c_tau * f
    tau = torch.stack(
        (
            (f * rotor_xy[:, 1]).sum(dim=-1),
            -(f * rotor_xy[:, 0]).sum(dim=-1),
            -(f * spin).sum(dim=-1) * torque_coefficient[:, 0],
        ),
        dim=-1,
    ) + torque_ext_b
    # translational dynamics (world): R e_z * T / m - g e_z + F_ext / m
    w, x, y, z = quat.unbind(-1)
    body_z_w = torch.stack((2 * (x * z + w * y), 2 * (y * z - w * x), 1 - 2 * (x * x + y * y)), dim=-1)
    acc = (body_z_w * thrust + force_ext_w) / mass
    acc[:, 2] -= gravity
    velocity = velocity + acc * dt
    position = position + velocity * dt
    # rotational dynamics (body): I w_dot = tau - w x (I w)
    omega_dot = (tau - torch.linalg.cross(omega, inertia * omega, dim=-1)) / inertia
    omega = omega + omega_dot * dt
    quat = quat_mul(quat, quat_from_rotvec(omega * dt))
    quat = quat / torch.linalg.vector_norm(quat, dim=-1, keepdim=True)
    # floor: no penetration; inelastic normal impact, friction on sliding and spinning
    contact = position[:, 2] <= floor_z
    position[:, 2].clamp_(min=floor_z)
    keep = 1.0 - ground_friction * contact.unsqueeze(-1).to(velocity.dtype)
    velocity[:, 2] = torch.where(contact, velocity[:, 2].clamp(min=0.0), velocity[:, 2])
    velocity[:, :2] *= keep
    omega = omega * keep
    return position, quat, velocity, omega, rpm, contact


def body_to_world(quat: torch.Tensor, v_b: torch.Tensor) -> torch.Tensor:
    return quat_rotate(quat, v_b)
