"""Curriculum: linear ramps over the environment's control-step counter."""

from __future__ import annotations

from sim.envs.goto_env_cfg import CurriculumCfg


def ramp_progress(cfg: CurriculumCfg, common_step_counter: int) -> float:
    """0 at the start of training, 1 once ``ramp_steps`` control steps have passed (1 when disabled)."""
    if not cfg.enabled or cfg.ramp_steps <= 0:
        return 1.0
    return min(1.0, max(0.0, common_step_counter / cfg.ramp_steps))


def ramp(value_range: tuple[float, float], progress: float) -> float:
    """Linear interpolation from value_range[0] (progress 0) to value_range[1] (progress 1)."""
    return value_range[0] + (value_range[1] - value_range[0]) * progress
