"""rsl-rl-lib training configurations."""

from sim.agents.ppo_goto import ppo_goto_cfg

__all__ = ["ppo_goto_cfg"]
