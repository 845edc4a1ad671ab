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


def physics_substep_soa(
    position: tuple, quat: tuple, velocity: tuple, omega: tuple, rpm: tuple, rpm_cmd: tuple,
    motor_alpha: torch.Tensor, thrust_coefficient: torch.Tensor, torque_coefficient: torch.Tensor,
    mass: torch.Tensor, inertia: tuple, force_ext_w: tuple, torque_ext_b: tuple,
    rotor_xy: tuple, spin: tuple,
    dt: float, gravity: float, rpm_min: float, rpm_max: float, floor_z: float, ground_friction: float,
):
    """``physics_substep`` in structure-of-arrays form: the same equations, term by term.

    Every vector is a tuple of (N,) tensors (position (x, y, z), quat (w, x, y, z), rotor speeds
    (4), ...) and the rotor geometry is plain floats (rotor_xy ((x, y),) * 4, spin (4)), so that
    a compiled graph is one element-wise loop over the environments (vectorized over N) instead
    of loops over rows of 3 or 4. Returns (position, quat, velocity, omega, rpm, contact).
    """
    rpm = tuple((r + motor_alpha * (c - r)).clamp(rpm_min, rpm_max) for r, c in zip(rpm, rpm_cmd))
    f = [thrust_coefficient * r * r for r in rpm]
    thrust = f[0] + f[1] + f[2] + f[3]
    tau = (
        (f[0] * rotor_xy[0][1] + f[1] * rotor_xy[1][1] + f[2] * rotor_xy[2][1] + f[3] * rotor_xy[3][1]) + torque_ext_b[0],
        -(f[0] * rotor_xy[0][0] + f[1] * rotor_xy[1][0] + f[2] * rotor_xy[2][0] + f[3] * rotor_xy[3][0]) + torque_ext_b[1],
        -(f[0] * spin[0] + f[1] * spin[1] + f[2] * spin[2] + f[3] * spin[3]) * torque_coefficient + torque_ext_b[2],
    )
    w, x, y, z = quat
    body_z_w = (2 * (x * z + w * y), 2 * (y * z - w * x), 1 - 2 * (x * x + y * y))
    acc = [(b * thrust + fe) / mass for b, fe in zip(body_z_w, force_ext_w)]
    acc[2] = acc[2] - gravity
    velocity = tuple(v + a * dt for v, a in zip(velocity, acc))
    position = tuple(p + v * dt for p, v in zip(position, velocity))
    iw = tuple(i * o for i, o in zip(inertia, omega))
    cross = (omega[1] * iw[2] - omega[2] * iw[1], omega[2] * iw[0] - omega[0] * iw[2], omega[0] * iw[1] - omega[1] * iw[0])
    omega = tuple(o + ((t - c) / i) * dt for o, t, c, i in zip(omega, tau, cross, inertia))
    # attitude: q <- q (x) exp(omega dt), renormalized (math_utils.quat_from_rotvec, quat_mul)
    v = tuple(o * dt for o in omega)
    angle = torch.sqrt(v[0] * v[0] + v[1] * v[1] + v[2] * v[2])
    half = 0.5 * angle
    small = angle < 1e-4
    k = torch.where(small, 0.5 - angle * angle / 48.0, torch.sin(half) / torch.where(small, torch.ones_like(angle), angle))
    bw, bx, by, bz = torch.cos(half), v[0] * k, v[1] * k, v[2] * k
    q = (
        w * bw - x * bx - y * by - z * bz,
        w * bx + x * bw + y * bz - z * by,
        w * by - x * bz + y * bw + z * bx,
        w * bz + x * by - y * bx + z * bw,
    )
    norm = torch.sqrt(q[0] * q[0] + q[1] * q[1] + q[2] * q[2] + q[3] * q[3])
    quat = tuple(c / norm for c in q)
    # floor: no penetration; inelastic normal impact, friction on sliding and spinning
    contact = position[2] <= floor_z
    position = (position[0], position[1], position[2].clamp(min=floor_z))
    keep = 1.0 - ground_friction * contact.to(velocity[0].dtype)
    velocity = (velocity[0] * keep, velocity[1] * keep, torch.where(contact, velocity[2].clamp(min=0.0), velocity[2]))
    omega = tuple(o * keep for o in omega)
    return position, quat, velocity, omega, rpm, contact


def body_to_world(quat: torch.Tensor, v_b: torch.Tensor) -> torch.Tensor:
    return quat_rotate(quat, v_b)
