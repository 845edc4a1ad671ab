"""Counter-based random numbers of the step: pure functions of (key, counter), evaluated inside the step.

A 32-bit integer hash ("lowbias32", C. Wellons) of (per-draw key, counter), in int32 arithmetic
(wrapping multiply, masked shifts for the logical right shift) so that inductor vectorizes it; the
C step (``sim/envs/native/control_step.c``) computes the same numbers. Every step backend (eager,
compiled, native) draws its observation noise and its resets from these streams, so they agree.
torch.randn's Mersenne Twister costs ~10 ns per number, and drawing only for the finished
environments from a generator would need their indices on the host (a dynamic shape).
"""

from __future__ import annotations

import math

import torch

_M1 = 0x7FEB352D
_M2 = 0x846CA68B - (1 << 32)
_GOLDEN64 = 0x9E3779B97F4A7C15
_MASK64 = (1 << 64) - 1
NOISE_STREAM, RESET_STREAM = 0, 1
"""``counter_key`` streams: observation noise, reset draws."""


def _hash32(x: torch.Tensor) -> torch.Tensor:
    x = x ^ ((x >> 16) & 0xFFFF)
    x = x * _M1
    x = x ^ ((x >> 15) & 0x1FFFF)
    x = x * _M2
    return x ^ ((x >> 16) & 0xFFFF)


def counter_key(seed: int, draw: int, stream: int = NOISE_STREAM) -> int:
    """The int32 key of one draw of a stream (splitmix64 of seed, draw index and stream, low 32 bits, signed)."""
    z = (((seed & 0xFFFFFFFF) << 32 | (draw & 0xFFFFFFFF)) + (2 * stream + 1) * _GOLDEN64) & _MASK64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK64
    z = (z ^ (z >> 31)) & 0xFFFFFFFF
    return z - (1 << 32) if z >= (1 << 31) else z


def noise_key(seed: int, draw: int) -> int:
    """The int32 key of one observation-noise draw (``counter_key`` of the noise stream)."""
    return counter_key(seed, draw, NOISE_STREAM)


def unit_interval(counter: torch.Tensor, key: torch.Tensor) -> torch.Tensor:
    """Uniform floats in [0, 1) (24 bits, like torch.rand) from int32 counters and a key."""
    h = _hash32(_hash32(counter) ^ key)
    return ((h >> 8) & 0xFFFFFF).float() * (1.0 / 16777216.0)


def uniforms(key: torch.Tensor, base: torch.Tensor, count: int):
    """``u(j)``: uniform number ``base + j`` of ``key`` (one per environment of ``base``), for j < count.

    Eager, the ``count`` numbers come from one batched hash (a (count, n) table: a few ops instead of a
    dozen per number); inside a compiled graph each ``u(j)`` is its own element-wise expression, which
    inductor fuses into its consumers. The numbers are the same.
    """
    if torch.compiler.is_compiling():
        return lambda j: unit_interval(base + j, key)
    table = unit_interval(base.unsqueeze(0) + torch.arange(count, dtype=base.dtype, device=base.device).unsqueeze(1), key)
    return lambda j: table[j]


def counter_gaussian(key: torch.Tensor, rows: int, n: int) -> torch.Tensor:
    """(rows, n) standard normal numbers, a pure function of the int32 ``key`` (0-dim tensor).

    Box-Muller on two 24-bit uniforms. Independent of the device and of compilation (to float
    rounding); rows must be even.
    """
    pairs = rows // 2
    counter = torch.arange(2 * pairs * n, dtype=torch.int32, device=key.device).view(pairs, n, 2)
    u = unit_interval(counter, key) + (0.5 / 16777216.0)  # (0, 1)
    radius = torch.sqrt(-2.0 * torch.log(u[..., 0]))
    angle = (2.0 * math.pi) * u[..., 1]
    return torch.cat((radius * torch.cos(angle), radius * torch.sin(angle)), dim=0)


def noise_rows(noise_std: tuple[float, ...]) -> int:
    """Rows of ``counter_gaussian`` one observation draw needs (the noisy columns, rounded up to even)."""
    k = sum(1 for s in noise_std if s > 0.0)
    return k + (k % 2)
