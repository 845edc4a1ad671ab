"""Isaac Lab tasks in the same trainer: ``python sim/train.py --task Isaac-Velocity-Flat-Anymal-D-v0``.

Written against Isaac Lab's public API (the flow of its ``scripts/reinforcement_learning/rsl_rl/train.py``):
start the Omniverse app headless (``isaaclab.app.AppLauncher``), import ``isaaclab_tasks`` so
the tasks register with gymnasium, build the env cfg (``isaaclab_tasks.utils.parse_env_cfg``),
``gymnasium.make(task, cfg=env_cfg)``, and wrap it in ``isaaclab_rl.rsl_rl.RslRlVecEnvWrapper``,
which is an rsl_rl ``VecEnv``. The agent cfg comes from the task's ``rsl_rl_cfg_entry_point``.

Without Isaac Lab installed, :func:`make_isaaclab_env` raises an error that says what to install.
"""

from __future__ import annotations

import importlib.util
from typing import Any

from robot_hrl.errors import ConfigError

INSTALL_HINT = (
    "Isaac Lab is not installed in this Python environment (module {missing!r} not found). "
    "Install Isaac Sim and Isaac Lab (https://isaac-sim.github.io/IsaacLab/main/source/setup/installation/index.html), "
    "e.g. `pip install 'isaacsim[all,extscache]' --extra-index-url https://pypi.nvidia.com` and "
    "`pip install isaaclab` (or ./isaaclab.sh --install from a source checkout, which also installs isaaclab_rl "
    "and isaaclab_tasks), then run sim/train.py with the Isaac Lab Python. Built-in tasks need none of this: "
    "--task crazyflie-goto"
)
REQUIRED_MODULES = ("isaaclab", "isaaclab_rl", "isaaclab_tasks", "gymnasium")

_APP = None


def isaaclab_available() -> bool:
    return all(importlib.util.find_spec(m) is not None for m in REQUIRED_MODULES)


def require_isaaclab() -> None:
    """Raise :class:`ConfigError` naming what to install when Isaac Lab is missing."""
    for module in REQUIRED_MODULES:
        if importlib.util.find_spec(module) is None:
            raise ConfigError(INSTALL_HINT.format(missing=module))


def _launch_app(device: str) -> Any:
    """Start the Omniverse app once (Isaac Lab modules other than the app need it running)."""
    global _APP
    if _APP is None:
        from isaaclab.app import AppLauncher

        _APP = AppLauncher(headless=True, device=device).app
    return _APP


def make_isaaclab_env(task: str, num_envs: int, device: str = "cuda:0", seed: int | None = None, env_cfg_overrides: dict | None = None):
    """Build an Isaac Lab task as an rsl_rl VecEnv (RslRlVecEnvWrapper)."""
    require_isaaclab()
    _launch_app(device)
    import gymnasium as gym
    import isaaclab_tasks  # noqa: F401  (registers the Isaac-* tasks with gymnasium)
    from isaaclab_rl.rsl_rl import RslRlVecEnvWrapper
    from isaaclab_tasks.utils import parse_env_cfg

    if task not in gym.registry:
        known = sorted(k for k in gym.registry if k.startswith("Isaac-"))
        raise ConfigError(f"Isaac Lab has no task {task!r}; registered Isaac tasks include: {known[:20]}")
    env_cfg = parse_env_cfg(task, device=device, num_envs=num_envs)
    if seed is not None:
        env_cfg.seed = seed
    for key, value in (env_cfg_overrides or {}).items():
        if not hasattr(env_cfg, key):
            raise ConfigError(f"Isaac Lab env cfg of {task} has no attribute {key!r}")
        setattr(env_cfg, key, value)
    env = gym.make(task, cfg=env_cfg)
    wrapped = RslRlVecEnvWrapper(env)
    wrapped.cfg_dict = env_cfg.to_dict() if hasattr(env_cfg, "to_dict") else {}
    return wrapped


def isaaclab_agent_cfg(task: str) -> dict:
    """The task's registered rsl_rl runner cfg as the dict rsl_rl's OnPolicyRunner takes."""
    require_isaaclab()
    _launch_app("cuda:0")
    import isaaclab_tasks  # noqa: F401
    from isaaclab_tasks.utils.parse_cfg import load_cfg_from_registry

    agent_cfg = load_cfg_from_registry(task, "rsl_rl_cfg_entry_point")
    try:  # newer Isaac Lab: adapt the cfg to the installed rsl-rl-lib version
        import importlib.metadata as md

        from isaaclab_rl.rsl_rl import handle_deprecated_rsl_rl_cfg

        agent_cfg = handle_deprecated_rsl_rl_cfg(agent_cfg, md.version("rsl-rl-lib"))
    except ImportError:
        pass
    return agent_cfg.to_dict()
