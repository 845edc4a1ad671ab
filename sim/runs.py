"""Run directories written by ``sim/train.py`` and how to load them back.

A run directory holds ``run_config.json`` (task, env_cfg, agent_cfg, seed, device, num_envs,
command, git_commit), rsl_rl checkpoints ``model_<it>.pt``, ``eval.json`` and TensorBoard
event files. ``load_run(run_dir)`` rebuilds the environment (one env) and the OnPolicyRunner
and loads a checkpoint, e.g. to export the actor and its observation normalizer::

    env, runner = load_run("runs/crazyflie_goto")
    actor = runner.alg.get_policy()          # rsl_rl MLPModel: actor.obs_normalizer, actor.mlp
"""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

from robot_hrl.errors import ConfigError

RUN_CONFIG = "run_config.json"
EVAL_FILE = "eval.json"
_CHECKPOINT = re.compile(r"^model_(\d+)\.pt$")


def checkpoints(run_dir: str | Path) -> list[Path]:
    """The run's checkpoints sorted by iteration."""
    run_dir = Path(run_dir)
    found = [(int(m.group(1)), p) for p in run_dir.glob("model_*.pt") if (m := _CHECKPOINT.match(p.name))]
    return [p for _, p in sorted(found)]


def latest_checkpoint(run_dir: str | Path) -> Path:
    found = checkpoints(run_dir)
    if not found:
        raise ConfigError(f"no checkpoint model_<iteration>.pt in {run_dir}; train first with `python sim/train.py --run-dir {run_dir}`")
    return found[-1]


def read_run_config(run_dir: str | Path) -> dict:
    path = Path(run_dir) / RUN_CONFIG
    if not path.is_file():
        raise ConfigError(f"{path} does not exist: {run_dir} is not a run directory written by sim/train.py")
    try:
        config = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path} is not valid JSON ({exc}); re-run training or restore the file") from None
    missing = [k for k in ("task", "env_cfg", "agent_cfg") if k not in config]
    if missing:
        raise ConfigError(f"{path} lacks key(s) {missing}; it was not written by this version of sim/train.py")
    return config


def load_run(run_dir: str | Path, device: str = "cpu", checkpoint: str | Path | None = None, num_envs: int = 1):
    """Rebuild ``(env, runner)`` from ``run_config.json`` and load the latest (or the given) checkpoint."""
    from rsl_rl.runners import OnPolicyRunner

    from sim.tasks import make_env

    config = read_run_config(run_dir)
    ckpt = Path(checkpoint) if checkpoint is not None else latest_checkpoint(run_dir)
    if not ckpt.is_absolute() and not ckpt.exists():
        ckpt = Path(run_dir) / ckpt
    if not ckpt.is_file():
        raise ConfigError(f"checkpoint {ckpt} does not exist; available: {[p.name for p in checkpoints(run_dir)]}")
    env = make_env(config["task"], num_envs=num_envs, device=device, cfg=config["env_cfg"], seed=config.get("seed"))
    runner = OnPolicyRunner(env, copy.deepcopy(config["agent_cfg"]), log_dir=None, device=device)
    runner.load(str(ckpt), map_location=device)
    runner.alg.eval_mode()
    return env, runner
