"""The rigid body of the batched quadrotor, structure-of-arrays: one physics step under the rotors' wrench.

The actuator chain (``robot_hrl.robots.<robot>.actuators``) gives the rotors' thrust along body +z
and their torque on the body; this integrates the body: semi-implicit (symplectic) Euler for the
translational and rotational velocities with Euler's equations (gyroscopic term included), the
attitude advanced by the exact exponential map of the body rate, renormalized, and the floor.

Every vector is a tuple of (N,) tensors (position (x, y, z), quat (w, x, y, z), ...), so that a
compiled graph is one element-wise loop over the environments (vectorized over N) instead of loops
over rows of 3 or 4. It runs in float32 (the step) or float64 (tests/test_pybullet_parity.py).
``sim/envs/native/control_step.c`` is its C twin (tests/test_sim_native.py).
"""

from __future__ import annotations

import torch


def rigid_body_substep(
    position: tuple, quat: tuple, velocity: tuple, omega: tuple, thrust: torch.Tensor, rotor_torque_b: tuple,
    mass: torch.Tensor, inertia: tuple, force_ext_w: tuple, torque_ext_b: tuple,
    dt: float, gravity: float, floor_z: float, ground_friction: float,
):
    """One physics step. ``thrust`` and ``rotor_torque_b`` are the rotors' (the chain's ``Substep``);
    the external force (world) and torque (body) add to them. Returns (position, quat, velocity, omega, contact)."""
    tau = tuple(t + e for t, e in zip(rotor_torque_b, torque_ext_b))
    w, x, y, z = quat
    # translational dynamics (world): R e_z * T / m - g e_z + F_ext / m
    body_z_w = (2 * (x * z + w * y), 2 * (y * z - w * x), 1 - 2 * (x * x + y * y))
    acc = [(b * thrust + fe) / mass for b, fe in zip(body_z_w, force_ext_w)]
    acc[2] = acc[2] - gravity
    velocity = tuple(v + a * dt for v, a in zip(velocity, acc))
    position = tuple(p + v * dt for p, v in zip(position, velocity))
    # rotational dynamics (body): I w_dot = tau - w x (I w)
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
    return position, quat, velocity, omega, contact
