"""Task registry: ``make_env(task, num_envs, device, cfg, seed)``, ``default_agent_cfg(task)`` and
``task_runtime(task)`` (how ``sim/train.py`` evaluates and reports a task).

Built-in task: ``crazyflie-goto``. Isaac Lab task names (``Isaac-...``) go through
``sim/isaaclab_adapter/`` when Isaac Lab is installed.
"""

from __future__ import annotations

from dataclasses import dataclass
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

DEFAULT_AGENT_CFGS = {"crazyflie-goto": "sim.agents.ppo_goto:ppo_goto_cfg",
                      "Isaac-Crazyflie-Goto-Direct": "sim.agents.ppo_goto:ppo_goto_cfg"}
"""Tasks trained with the project's PPO cfg (the Isaac Lab twin of crazyflie-goto too: its KL schedule is not an
Isaac Lab runner cfg field)."""


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


def default_agent_cfg(task: str, device: str = "cpu") -> dict:
    """The rsl_rl train cfg for ``task`` (a fresh copy); ``device`` goes into Isaac Lab's cfgs (theirs say cuda:0)."""
    from sim.agents.ppo_goto import ppo_goto_cfg

    if task in DEFAULT_AGENT_CFGS:
        cfg = ppo_goto_cfg()
        if is_isaaclab_task(task):
            cfg["device"] = device
        return cfg
    if is_isaaclab_task(task):
        from sim.isaaclab_adapter import isaaclab_agent_cfg

        return isaaclab_agent_cfg(task, device)
    raise ConfigError(f"unknown task {task!r}; built-in tasks: {sorted(TASKS)}")


@dataclass(frozen=True)
class TaskRuntime:
    """How ``sim/train.py`` evaluates and reports a task."""

    evaluate: Callable[..., dict]
    """(env, policy, num_episodes, stop_below=None) -> result dict; ``policy`` is rsl_rl's inference policy."""
    summary: Callable[[dict], str]
    """result -> one line for the end of training."""
    evaluates_on_training_env: bool
    """True: evaluations step the training env (Isaac Lab: one simulation per process), which they leave reset."""
    check_env: Callable[[Any, Any], None]
    """(env, args) -> None: refuse arguments the task cannot honour, once the env exists."""


def _goto_evaluate(env, policy, num_episodes: int, stop_below: float | None = None) -> dict:
    from sim.evaluation import evaluate, policy_act_fn

    return evaluate(env, policy_act_fn(policy), num_episodes, stop_below=stop_below)


def _goto_summary(result: dict) -> str:
    return (
        f"success {result['success_rate']:.3f}, crash {result['crash_rate']:.3f}, "
        f"final position error {result['mean_final_position_error_m']:.3f} m over {result['num_episodes']} episodes"
    )


def task_runtime(task: str) -> TaskRuntime:
    """The :class:`TaskRuntime` of ``task``."""
    if task in TASKS:
        return TaskRuntime(_goto_evaluate, _goto_summary, False, lambda env, args: None)
    if is_isaaclab_task(task):
        from sim.isaaclab_adapter.evaluator import evaluate_isaaclab, summary
        from sim.isaaclab_adapter.training import check_env_for_args

        return TaskRuntime(evaluate_isaaclab, summary, True, check_env_for_args)
    raise ConfigError(f"unknown task {task!r}; built-in tasks: {sorted(TASKS)}")
