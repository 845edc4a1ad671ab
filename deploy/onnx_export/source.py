"""Where an export starts: a training run directory or one of its checkpoints.

A run directory (written by ``sim/train.py``) holds rsl_rl checkpoints ``model_<it>.pt``,
``run_config.json`` (task, env_cfg, agent_cfg, seed, device, num_envs, command, git_commit)
and, once evaluated, ``eval.json``. The actor is rebuilt by ``sim.runs.load_run`` (the
environment and the OnPolicyRunner with the checkpoint loaded); the contract comes from the
environment (``env.contract``).
"""

from __future__ import annotations

import contextlib
import inspect
import io
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from torch import nn

from deploy.onnx_export.errors import ExportError
from robot_hrl.contract import PolicyContract

RUN_CONFIG = "run_config.json"
EVAL_FILE = "eval.json"
_CHECKPOINT = re.compile(r"^model_(\d+)\.pt$")
_CONFIG_KEYS = ("task", "env_cfg", "eval_env_cfg", "agent_cfg", "device", "num_envs", "max_iterations")
"""run_config.json entries recorded as the model's provenance 'config'."""


@dataclass
class RunSource:
    """A loaded training run, ready to export."""

    run_dir: Path
    checkpoint: Path
    iteration: int | None
    actor: nn.Module
    contract: PolicyContract
    run_config: dict[str, Any]
    eval: dict[str, Any] | None


def _read_json(path: Path, what: str) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ExportError(f"cannot read the {what} {path} ({exc}); the run directory is damaged: re-run training") from exc


def find_checkpoint(path: str | Path) -> tuple[Path, Path, int | None]:
    """(run_dir, checkpoint, iteration) for a run directory (its latest checkpoint) or a checkpoint file."""
    path = Path(path)
    if not path.exists():
        raise ExportError(
            f"{path} does not exist; give a training run directory (e.g. runs/crazyflie_goto) or one of its "
            "model_<iteration>.pt checkpoints"
        )
    if path.is_file():
        match = _CHECKPOINT.match(path.name)
        if path.suffix != ".pt":
            raise ExportError(f"{path} is not a checkpoint (expected model_<iteration>.pt or a run directory)")
        return path.parent, path, int(match.group(1)) if match else None
    found = [(int(m.group(1)), p) for p in path.iterdir() if (m := _CHECKPOINT.match(p.name))]
    if not found:
        raise ExportError(
            f"{path} holds no checkpoint (model_<iteration>.pt); is it a training run directory? Train one with "
            "`python sim/train.py` or pass a checkpoint file"
        )
    iteration, checkpoint = max(found)
    return path, checkpoint, iteration


def read_run_config(run_dir: Path) -> dict[str, Any]:
    path = run_dir / RUN_CONFIG
    if not path.is_file():
        raise ExportError(
            f"{run_dir} has no {RUN_CONFIG}; the exporter needs the run's task and configuration to rebuild the "
            "actor and its contract: export from a run directory written by sim/train.py"
        )
    config = _read_json(path, "run configuration")
    if not isinstance(config, dict) or "task" not in config:
        raise ExportError(f"{path} has no 'task' entry; it was not written by sim/train.py")
    return config


def read_eval(run_dir: Path) -> dict[str, Any] | None:
    path = run_dir / EVAL_FILE
    return _read_json(path, "evaluation") if path.is_file() else None


def eval_summary(evaluation: dict[str, Any] | None) -> dict[str, Any] | None:
    """The scalar entries of eval.json (its 'summary' object when it has one); per-episode lists are left out."""
    if evaluation is None:
        return None
    if not isinstance(evaluation, dict):
        return {"value": evaluation}
    summary = evaluation.get("summary", evaluation)
    if not isinstance(summary, dict):
        return {"summary": summary}

    def scalarish(value: Any) -> bool:
        if isinstance(value, (str, int, float, bool)) or value is None:
            return True
        if isinstance(value, dict):
            return all(scalarish(v) for v in value.values()) and len(value) <= 32
        return isinstance(value, list) and len(value) <= 8 and all(isinstance(v, (int, float, str)) for v in value)

    return {k: v for k, v in summary.items() if scalarish(v)}


def _load_actor(run_dir: Path, checkpoint: Path) -> tuple[nn.Module, PolicyContract]:
    """Rebuild env + runner through the training side's ``sim.runs.load_run``; return the actor and contract."""
    try:
        from sim.runs import load_run
    except ImportError as exc:
        raise ExportError(
            f"cannot import sim.runs ({exc}); the exporter needs the training side: `pip install -e '.[train]'`"
        ) from exc
    kwargs: dict[str, Any] = {"device": "cpu"}
    if "checkpoint" in inspect.signature(load_run).parameters:
        kwargs["checkpoint"] = checkpoint
    with contextlib.redirect_stdout(io.StringIO()):  # rsl_rl prints the model structure
        env, runner = load_run(run_dir, **kwargs)
    contract = getattr(env, "contract", None)
    if not isinstance(contract, PolicyContract):
        raise ExportError(
            f"the environment of {run_dir} has no policy contract (env.contract); only tasks that declare one "
            "(robot_hrl.contract) can be exported"
        )
    runner.alg.eval_mode()
    return runner.alg.get_policy(), contract


def load_source(path: str | Path) -> RunSource:
    """Find the checkpoint, read the run's config and evaluation, and rebuild its actor on the CPU."""
    run_dir, checkpoint, iteration = find_checkpoint(path)
    config = read_run_config(run_dir)
    evaluation = read_eval(run_dir)
    actor, contract = _load_actor(run_dir, checkpoint)
    return RunSource(run_dir, checkpoint, iteration, actor, contract, config, evaluation)


def provenance_from_source(source: RunSource, export_command: str) -> dict[str, Any]:
    """The provenance entries written into the model (keys of robot_hrl.runtime.metadata)."""
    config = source.run_config
    evaluation = eval_summary(source.eval)
    if evaluation is not None and isinstance(evaluation.get("checkpoint"), str):
        # eval.json evaluates one checkpoint (the final one); say whether it is the exported one
        evaluation["matches_exported_checkpoint"] = Path(evaluation["checkpoint"]).name == source.checkpoint.name
    return {
        "command": {"export": export_command, "train": config.get("command")},
        "git_commit": config.get("git_commit"),
        "seed": config.get("seed"),
        "config": {k: config[k] for k in _CONFIG_KEYS if k in config},
        "eval": evaluation,
        "checkpoint": {"file": source.checkpoint.name, "iteration": source.iteration, "run_dir": source.run_dir.name},
        "lineage": lineage(config),
    }


def lineage(run_config: dict[str, Any]) -> list[dict[str, Any]]:
    """The training stages that led to this run, oldest first, ending with the run itself.

    A run made with ``--resume`` records its parent's run_config.json (``parent_run_config``);
    following that chain gives every command needed to reproduce a fine-tuned model.
    """
    stages = []
    config: Any = run_config
    while isinstance(config, dict):
        stages.append({k: config.get(k) for k in ("command", "git_commit", "seed", "resumed_from")})
        config = config.get("parent_run_config")
    return stages[::-1]
