"""Domain randomization: per-environment physical parameters drawn at each reset."""

from __future__ import annotations

import math

import torch

from sim.envs.goto_env_cfg import RandomizationCfg


def uniform(n: int, k: int, low: float, high: float, generator: torch.Generator, device) -> torch.Tensor:
    """(n, k) uniform samples in [low, high]."""
    return low + (high - low) * torch.rand((n, k), generator=generator, device=device)


def sample_parameters(cfg: RandomizationCfg, n: int, generator: torch.Generator, device, nominal_tau_s: float) -> dict[str, torch.Tensor]:
    """Scales and values for n environments; nominal (all scales 1, no disturbance) when disabled."""
    if not cfg.enabled:
        ones = torch.ones((n, 1), device=device)
        return {
            "mass_scale": ones.clone(),
            "inertia_scale": torch.ones((n, 3), device=device),
            "thrust_coefficient_scale": ones.clone(),
            "torque_coefficient_scale": ones.clone(),
            "motor_time_constant_s": torch.full((n, 1), nominal_tau_s, device=device),
            "disturbance_force_w": torch.zeros((n, 3), device=device),
            "disturbance_torque_b": torch.zeros((n, 3), device=device),
            "action_latency_steps": torch.zeros((n,), dtype=torch.long, device=device),
        }
    direction = torch.randn((n, 3), generator=generator, device=device)
    direction = direction / torch.linalg.vector_norm(direction, dim=-1, keepdim=True).clamp(min=1e-6)
    lat_lo, lat_hi = cfg.action_latency_steps_range
    tau_lo, tau_hi = cfg.motor_time_constant_train_range_s or cfg.motor_time_constant_range_s
    return {
        "mass_scale": uniform(n, 1, *cfg.mass_scale_range, generator, device),
        "inertia_scale": uniform(n, 3, *cfg.inertia_scale_range, generator, device),
        "thrust_coefficient_scale": uniform(n, 1, *cfg.thrust_coefficient_scale_range, generator, device),
        "torque_coefficient_scale": uniform(n, 1, *cfg.torque_coefficient_scale_range, generator, device),
        # log-uniform over the span: as many slow as fast motors in relative terms
        "motor_time_constant_s": torch.exp(uniform(n, 1, math.log(tau_lo), math.log(tau_hi), generator, device)).clamp(tau_lo, tau_hi),
        "disturbance_force_w": direction * uniform(n, 1, 0.0, cfg.max_disturbance_force_n, generator, device),
        "disturbance_torque_b": uniform(n, 3, -cfg.max_disturbance_torque_nm, cfg.max_disturbance_torque_nm, generator, device),
        "action_latency_steps": torch.randint(int(lat_lo), int(lat_hi) + 1, (n,), generator=generator, device=device),
    }
