"""An Isaac Lab 3.0 task as an rsl_rl VecEnv, launched kitless.

The flow of Isaac Lab's own rsl_rl entry point (``isaaclab_rl/entrypoints/backends/train_rsl_rl.py``,
3.0.0), without its CLI: ``parse_env_cfg`` (the registered cfg, presets resolved) → overrides,
device, number of envs, seed → ``isaaclab.app.launch_simulation(env_cfg, {"device": ...})``, which
starts nothing for a kitless config (Newton physics, no Kit camera or visualizer) and Isaac Sim's
Kit otherwise → ``gymnasium.make(task, cfg=env_cfg)`` → ``RslRlVecEnvWrapper``.

What the wrapper adds (:class:`IsaacLabVecEnv`): the task id, ``step_dt``, ``cfg_dict`` (the
resolved env cfg as JSON-safe data, for run records), per-episode success in
``extras["episode_end"]["success"]`` where the task defines it (``success.py``), and ``close()``
that also ends the launch.

Isaac Lab allows one simulation context per process (``RuntimeError: Simulation context already
exists``). :func:`make_isaaclab_env` refuses a second live env with an error that says what to do
(close the first, evaluate on the training env, or use a child process); after ``close()`` a new
one can be made.
"""

from __future__ import annotations

import contextlib
import difflib
import json
import os
from typing import Any

from robot_hrl.errors import ConfigError
from sim.isaaclab_adapter.availability import require_isaaclab

_LIVE: dict[str, Any] = {"env": None}
"""The open Isaac Lab env of this process, if any (one simulation context per process)."""

TASK_MODULES: tuple[str, ...] = ("sim.isaaclab_adapter.crazyflie",)
"""Modules that register this project's own Isaac Lab task ids with gymnasium (``gym.register``), imported
before a task id is looked up; Isaac Lab's own tasks register when ``isaaclab_tasks`` is imported."""

RESERVED_OVERRIDES = {("scene", "num_envs"): "--num-envs / num_envs", ("sim", "device"): "--device / device", ("seed",): "--seed / seed"}
"""Env cfg fields that have their own argument; overrides may not set them."""


def register_tasks() -> None:
    """Import Isaac Lab's tasks and :data:`TASK_MODULES`, so that their ids are in ``gymnasium.registry``."""
    import importlib

    import isaaclab_tasks  # noqa: F401  (registers the Isaac-* tasks with gymnasium)

    for module in TASK_MODULES:
        importlib.import_module(module)


def live_env():
    """The Isaac Lab env open in this process, or None."""
    return _LIVE["env"]


def unknown_task_message(task: str, registered: list[str]) -> str:
    """What to say for a task id that Isaac Lab does not register (3.0 renamed many)."""
    close = difflib.get_close_matches(task, registered, n=3, cutoff=0.5)
    hint = f" Did you mean {', '.join(close)}?" if close else ""
    return (
        f"Isaac Lab has no task {task!r}.{hint} Isaac Lab 3.0 dropped the -v0 suffixes (Isaac-Cartpole-Direct, "
        f"Isaac-Velocity-Flat-AnymalD, ...) and removed the quadcopter task; registered: {', '.join(registered[:40])}"
        + (" ..." if len(registered) > 40 else "")
    )


def _check_overrides(overrides: dict, path: tuple = ()) -> None:
    for key, value in overrides.items():
        here = (*path, key)
        if here in RESERVED_OVERRIDES:
            raise ConfigError(f"env cfg override {'.'.join(here)!r}: set it with {RESERVED_OVERRIDES[here]}, not in the overrides")
        if isinstance(value, dict):
            _check_overrides(value, here)


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _merged(base: dict, update: dict) -> dict:
    out = dict(base)
    for key, value in update.items():
        out[key] = _merged(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


def _set_numbers(cfg, overrides: dict) -> dict:
    """Set the numeric leaves whose field holds a number of the other type (Isaac Lab's ``from_dict`` refuses
    3.0 for a field declared as 5, e.g. the manager-based Cartpole's ``episode_length_s``) and the leaves whose
    field is None (``from_dict`` refuses any type there); return the rest."""
    rest = {}
    for key, value in overrides.items():
        current = getattr(cfg, key, None) if hasattr(cfg, key) else None
        if isinstance(value, dict) and isinstance(current, dict):
            # a plain dict field (e.g. the Crazyflie task's ``goto``): merged (from_dict wants each key to exist)
            setattr(cfg, key, _merged(current, value))
        elif isinstance(value, dict) and current is not None:
            rest[key] = _set_numbers(current, value)
        elif _is_number(value) and _is_number(current):
            setattr(cfg, key, value)
        elif current is None and hasattr(cfg, key) and not isinstance(value, dict):
            # from_dict also refuses any value for a field that is None (an optional term cfg's clip or scale)
            setattr(cfg, key, tuple(value) if isinstance(value, list) else value)
        else:
            rest[key] = value
    return rest


def apply_overrides(env_cfg, overrides: dict | None, task: str) -> None:
    """Apply a nested dict of overrides to an Isaac Lab env cfg (``configclass.from_dict``)."""
    if not overrides:
        return
    if not isinstance(overrides, dict):
        raise ConfigError(f"Isaac Lab env cfg overrides must be a dict, got {type(overrides).__name__}")
    _check_overrides(overrides)
    try:
        env_cfg.from_dict(_set_numbers(env_cfg, overrides))
    except (KeyError, ValueError, TypeError) as exc:
        raise ConfigError(
            f"env cfg override {json.dumps(overrides)} does not fit {task}'s {type(env_cfg).__name__}: {exc}. "
            "Overrides are nested dicts of the cfg's own fields, e.g. {\"episode_length_s\": 3.0}"
        ) from None


def json_safe(value: Any) -> Any:
    """``value`` as plain JSON data: objects, classes and callables become their repr."""
    return json.loads(json.dumps(value, default=repr))


def _wrapper_class():
    from isaaclab_rl.rsl_rl import RslRlVecEnvWrapper

    from sim.isaaclab_adapter.success import success_source

    class IsaacLabVecEnv(RslRlVecEnvWrapper):
        """``RslRlVecEnvWrapper`` + task id, step_dt, cfg_dict, per-episode success, and the launch it owns."""

        def __init__(self, env, task: str, clip_actions: float | None, launch: contextlib.ExitStack):
            self._launch = launch
            self.closed = False
            super().__init__(env, clip_actions=clip_actions)  # resets the env
            self.task = task
            self.step_dt = float(self.unwrapped.step_dt)
            self.cfg_dict = json_safe(self.unwrapped.cfg.to_dict())
            self.success = success_source(self.unwrapped, task)
            self._task_reports_episode_end: bool | None = None

        def step(self, actions):
            obs, rewards, dones, extras = super().step(actions)
            if self._task_reports_episode_end is None:  # decided once, before this wrapper writes the key
                self._task_reports_episode_end = "episode_end" in extras
            if self.success is not None and not self._task_reports_episode_end:
                extras["episode_end"] = {"success": self.success.read()}
            return obs, rewards, dones, extras

        @property
        def contract(self):
            """The task's policy contract, generated from this env (``sim/isaaclab_adapter/contract.py``)."""
            from sim.isaaclab_adapter.contract import contract_from_env

            return contract_from_env(self)

        def close(self):
            if self.closed:
                return
            try:
                super().close()
            finally:
                self.closed = True
                self._launch.close()
                if _LIVE["env"] is self:
                    _LIVE["env"] = None

    return IsaacLabVecEnv


def make_isaaclab_env(
    task: str,
    num_envs: int,
    device: str = "cpu",
    seed: int | None = None,
    env_cfg_overrides: dict | None = None,
    clip_actions: float | None | str = "task",
):
    """Build the Isaac Lab task ``task`` as an rsl_rl VecEnv (:class:`IsaacLabVecEnv`), kitless when it can be.

    ``env_cfg_overrides``: nested dict applied to the registered env cfg (not num_envs, device or
    seed, which have their own arguments). ``clip_actions``: ``"task"`` takes the task's registered
    rsl_rl cfg's ``clip_actions`` (as Isaac Lab's train script does), or a number, or None.
    """
    require_isaaclab()
    if not isinstance(num_envs, int) or isinstance(num_envs, bool) or num_envs < 1:
        raise ConfigError(f"num_envs must be a positive integer, got {num_envs!r}")
    import gymnasium as gym
    from isaaclab.app import launch_simulation
    from isaaclab_tasks.utils import parse_env_cfg

    register_tasks()
    if task not in gym.registry:
        raise ConfigError(unknown_task_message(task, sorted(k for k in gym.registry if k.startswith("Isaac"))))
    env_cfg = parse_env_cfg(task, device=device, num_envs=num_envs)
    apply_overrides(env_cfg, env_cfg_overrides, task)
    if seed is not None:
        env_cfg.seed = int(seed)
    if clip_actions == "task":
        from sim.isaaclab_adapter.agent import registered_agent_cfg

        clip_actions = getattr(registered_agent_cfg(task), "clip_actions", None)

    current = _LIVE["env"]
    if current is not None:
        raise ConfigError(
            f"Isaac Lab allows one simulation per process and {current.task} is still open here: close it first "
            "(env.close()), evaluate on that env, or build the second env in a child process"
        )
    launch = contextlib.ExitStack()
    try:
        try:
            launch.enter_context(launch_simulation(env_cfg, {"device": device}))
        except (Exception, SystemExit) as exc:  # Kit needed and missing (Isaac Lab logs why and raises SystemExit(1))
            raise ConfigError(
                f"Isaac Lab could not launch {task} on {device!r} ({type(exc).__name__}: {exc}). The pip install runs "
                "kitless tasks only: Newton physics (sim.physics a NewtonCfg; SimulationCfg's default is PhysX, which "
                "needs Isaac Sim), no Kit camera or visualizer; other tasks need Isaac Sim"
            ) from exc
        try:
            env = gym.make(task, cfg=env_cfg)
        except FileNotFoundError as exc:
            raise ConfigError(_asset_hint(task, exc)) from exc
        except Exception as exc:
            if "usd" in str(exc).lower() or "asset" in str(exc).lower():
                raise ConfigError(_asset_hint(task, exc)) from exc
            raise
        wrapped = _wrapper_class()(env, task=task, clip_actions=clip_actions, launch=launch)
    except BaseException:
        launch.close()
        raise
    _LIVE["env"] = wrapped
    return wrapped


def _asset_hint(task: str, exc: BaseException) -> str:
    root = os.environ.get("ISAACSIM_ASSET_ROOT")
    where = f"ISAACSIM_ASSET_ROOT={root}" if root else "ISAACSIM_ASSET_ROOT is unset, so Isaac Lab looks on NVIDIA's asset server"
    return (
        f"{task}: an asset could not be loaded ({type(exc).__name__}: {exc}); {where}. Point ISAACSIM_ASSET_ROOT at a "
        "directory holding Isaac Lab's assets; `python -m sim.isaaclab_adapter.assets` writes local stand-ins for the "
        "tasks this project tests (ground plane, cartpole) and prints the directory"
    )
