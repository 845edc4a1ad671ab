"""Batched torch rotation helpers. Quaternions (w, x, y, z), Hamilton, body-to-world."""

from __future__ import annotations

import torch


def quat_mul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Hamilton product a ⊗ b of (..., 4) quaternions."""
    aw, ax, ay, az = a.unbind(-1)
    bw, bx, by, bz = b.unbind(-1)
    return torch.stack(
        (
            aw * bw - ax * bx - ay * by - az * bz,
            aw * bx + ax * bw + ay * bz - az * by,
            aw * by - ax * bz + ay * bw + az * bx,
            aw * bz + ax * by - ay * bx + az * bw,
        ),
        dim=-1,
    )


def rotation_matrix_from_quat(q: torch.Tensor) -> torch.Tensor:
    """Body-to-world rotation matrices (..., 3, 3) of (..., 4) unit quaternions."""
    w, x, y, z = q.unbind(-1)
    r = torch.stack(
        (
            1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y),
            2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x),
            2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y),
        ),
        dim=-1,
    )
    return r.reshape(q.shape[:-1] + (3, 3))


def quat_from_rotvec(v: torch.Tensor) -> torch.Tensor:
    """Quaternion exp of a rotation vector (..., 3) (angle * axis), safe at zero angle."""
    angle = torch.linalg.vector_norm(v, dim=-1, keepdim=True)
    half = 0.5 * angle
    # sin(half)/angle -> 0.5 as angle -> 0; use the Taylor expansion below 1e-4 rad
    small = angle < 1e-4
    k = torch.where(small, 0.5 - angle * angle / 48.0, torch.sin(half) / torch.where(small, torch.ones_like(angle), angle))
    return torch.cat((torch.cos(half), v * k), dim=-1)


def quat_rotate(q: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Rotate (..., 3) vectors from body to world by (..., 4) quaternions."""
    w = q[..., :1]
    u = q[..., 1:]
    t = 2.0 * torch.linalg.cross(u, v, dim=-1)
    return v + w * t + torch.linalg.cross(u, t, dim=-1)


def quat_rotate_inverse(q: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Rotate (..., 3) vectors from world to body."""
    w = q[..., :1]
    u = -q[..., 1:]
    t = 2.0 * torch.linalg.cross(u, v, dim=-1)
    return v + w * t + torch.linalg.cross(u, t, dim=-1)
