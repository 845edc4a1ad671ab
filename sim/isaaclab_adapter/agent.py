"""The rsl_rl runner cfg an Isaac Lab task registers (``rsl_rl_cfg_entry_point``), as rsl_rl's dict."""

from __future__ import annotations

import copy
import functools

from robot_hrl.errors import ConfigError
from sim.isaaclab_adapter.availability import require_isaaclab


@functools.lru_cache(maxsize=8)
def _registered(task: str):
    require_isaaclab()
    import gymnasium as gym
    from isaaclab_tasks.utils import resolve_task_config

    from sim.isaaclab_adapter.env import register_tasks, unknown_task_message

    register_tasks()
    if task not in gym.registry:
        raise ConfigError(unknown_task_message(task, sorted(k for k in gym.registry if k.startswith("Isaac"))))
    if "rsl_rl_cfg_entry_point" not in gym.spec(task).kwargs:
        raise ConfigError(f"{task} registers no rsl_rl agent cfg (rsl_rl_cfg_entry_point); pass one with --agent-cfg")
    # overrides=[]: no Hydra arguments (None would read them from sys.argv, i.e. sim/train.py's flags)
    _, agent_cfg = resolve_task_config(task, "rsl_rl_cfg_entry_point", overrides=[])
    return agent_cfg


def registered_agent_cfg(task: str):
    """A copy of the task's registered ``RslRlOnPolicyRunnerCfg`` (presets resolved)."""
    return copy.deepcopy(_registered(task))


def isaaclab_agent_cfg(task: str, device: str = "cpu") -> dict:
    """The task's rsl_rl runner cfg as the dict rsl_rl's OnPolicyRunner takes, for the installed rsl-rl-lib,
    with ``device`` set (the registered cfgs say ``cuda:0``)."""
    import importlib.metadata as md

    from isaaclab.utils import to_dict
    from isaaclab_rl.rsl_rl import handle_deprecated_rsl_rl_cfg

    agent_cfg = handle_deprecated_rsl_rl_cfg(registered_agent_cfg(task), md.version("rsl-rl-lib"))
    agent_cfg.device = device
    return to_dict(agent_cfg)
