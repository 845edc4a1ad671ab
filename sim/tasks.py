"""Task registry: ``make_env(task, num_envs, device, cfg, seed)``.

Built-in task: ``crazyflie-goto``. Isaac Lab task names (``Isaac-...``) go through
``sim/isaaclab_adapter.py`` when Isaac Lab is installed.
"""

from __future__ import annotations

from typing import Any, Callable

from robot_hrl.errors import ConfigError
from sim.envs.goto_env import GotoEnv
from sim.envs.goto_env_cfg import GotoEnvCfg


def _make_goto(num_envs: int, device: str, cfg: dict | GotoEnvCfg | None, seed: int | None) -> GotoEnv:
    if cfg is None:
        env_cfg = GotoEnvCfg()
    elif isinstance(cfg, GotoEnvCfg):
        env_cfg = cfg
    elif isinstance(cfg, dict):
        env_cfg = GotoEnvCfg.from_dict(cfg)
    else:
        raise ConfigError(f"cfg must be a dict, a GotoEnvCfg or None, got {type(cfg).__name__}")
    return GotoEnv(env_cfg, num_envs=num_envs, device=device, seed=seed)


TASKS: dict[str, Callable[..., Any]] = {"crazyflie-goto": _make_goto}
"""Built-in tasks: name -> factory(num_envs, device, cfg, seed)."""

DEFAULT_AGENT_CFGS = {"crazyflie-goto": "sim.agents.ppo_goto:ppo_goto_cfg"}


def is_isaaclab_task(task: str) -> bool:
    return isinstance(task, str) and task.startswith("Isaac-")


def make_env(task: str, num_envs: int, device: str = "cpu", cfg: dict | GotoEnvCfg | None = None, seed: int | None = None):
    """Build the vectorized environment of ``task`` (an rsl_rl VecEnv)."""
    if task in TASKS:
        return TASKS[task](num_envs, device, cfg, seed)
    if is_isaaclab_task(task):
        from sim.isaaclab_adapter import make_isaaclab_env

        return make_isaaclab_env(task, num_envs=num_envs, device=device, seed=seed, env_cfg_overrides=cfg)
    raise ConfigError(
        f"unknown task {task!r}; built-in tasks: {sorted(TASKS)}. Isaac Lab tasks (names starting with 'Isaac-') "
        "work when Isaac Lab is installed."
    )


def default_agent_cfg(task: str) -> dict:
    """The rsl_rl train cfg for ``task`` (a fresh copy)."""
    from sim.agents.ppo_goto import ppo_goto_cfg

    if task in DEFAULT_AGENT_CFGS:
        return ppo_goto_cfg()
    if is_isaaclab_task(task):
        from sim.isaaclab_adapter import isaaclab_agent_cfg

        return isaaclab_agent_cfg(task)
    raise ConfigError(f"unknown task {task!r}; built-in tasks: {sorted(TASKS)}")
