"""Batched torch environments (rsl-rl-lib VecEnv)."""

from sim.envs.goto_env import GotoEnv
from sim.envs.goto_env_cfg import (
    CommandCfg,
    CurriculumCfg,
    GotoEnvCfg,
    ObservationNoiseCfg,
    PhysicsCfg,
    RandomizationCfg,
    RewardsCfg,
    SuccessCfg,
    TerminationCfg,
)

__all__ = [
    "CommandCfg", "CurriculumCfg", "GotoEnv", "GotoEnvCfg", "ObservationNoiseCfg", "PhysicsCfg",
    "RandomizationCfg", "RewardsCfg", "SuccessCfg", "TerminationCfg",
]
