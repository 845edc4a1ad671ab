#!/usr/bin/env python
"""Train a skill with PPO (rsl-rl-lib OnPolicyRunner) in the batched torch simulator.

Examples (from the repository root):

    python sim/train.py                                   # crazyflie-goto, CPU, runs/crazyflie_goto
    python sim/train.py --num-envs 4096 --max-iterations 300 --run-dir runs/my_run
    python sim/train.py --target-success 0.95             # stop when an evaluation reaches 95 %
    python sim/train.py --resume runs/my_run              # continue from the latest checkpoint
    torchrun --nproc_per_node=4 sim/train.py --distributed --device cuda   # one process per GPU

At the end the policy is evaluated on --eval-episodes whole episodes with domain
randomization on; the result is printed and written to <run-dir>/eval.json.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import io
import json
import os
import random
import shlex
import subprocess
import sys
import time
from pathlib import Path

_REPO_ROOT = Path(__file__).resolve().parents[1]
if str(_REPO_ROOT) not in sys.path:  # `python sim/train.py` from anywhere
    sys.path.insert(0, str(_REPO_ROOT))

DEFAULT_TASK = "crazyflie-goto"


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python sim/train.py",
        description=__doc__.split("\n\n")[0] + " Writes checkpoints, TensorBoard logs, run_config.json and eval.json to --run-dir.",
        epilog="Run dir contents: model_<it>.pt (rsl_rl checkpoints), run_config.json, eval.json, TensorBoard events "
        "(tensorboard --logdir <run-dir>). Load a run in Python with sim.runs.load_run(run_dir).",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    p.add_argument("--task", default=DEFAULT_TASK, help="task name: 'crazyflie-goto', or an Isaac Lab task (Isaac-...) when Isaac Lab is installed")
    p.add_argument("--num-envs", type=int, default=2048, help="parallel environments")
    p.add_argument("--device", default="cpu", help="torch device: cpu, cuda, cuda:N")
    p.add_argument("--max-iterations", type=int, default=1000, help="PPO iterations (each: num_steps_per_env x num_envs env steps)")
    p.add_argument("--seed", type=int, default=0, help="random seed; same seed + same device => same result")
    p.add_argument("--run-dir", default=None, help="output directory (default runs/<task with _>)")
    p.add_argument("--resume", default=None, metavar="RUN_DIR_OR_CHECKPOINT", help="continue from a checkpoint file or the latest checkpoint of a run dir")
    p.add_argument("--target-success", type=float, default=None, metavar="X", help="stop as soon as an evaluation reaches success rate X (0..1); an evaluation itself stops once so many episodes failed that X is out of reach (shown as eval <rate>)")
    p.add_argument("--eval-interval", type=int, default=10, help="iterations between evaluations during training (with --target-success)")
    p.add_argument("--eval-skip-margin", type=float, default=0.3, metavar="M",
                   help="with --target-success: skip a due evaluation while the rolling success rate of the training episodes (stochastic "
                   "actions, so below the evaluation's) is more than M under the target; every 5th due evaluation runs regardless "
                   "(an evaluation costs about as much as 3-5 iterations; 1 evaluates every --eval-interval)")
    p.add_argument("--eval-episodes", type=int, default=1000, help="episodes of the final evaluation (randomization on)")
    p.add_argument("--eval-episodes-during-training", type=int, default=500, help="episodes of each evaluation during training")
    p.add_argument("--no-randomization", action="store_true", help="train on the nominal robot (no domain randomization, noise, latency)")
    p.add_argument("--env-cfg", default=None, metavar="JSON", help="JSON file or string of env cfg overrides, e.g. '{\"curriculum\": {\"ramp_steps\": 5000}}'")
    p.add_argument("--eval-env-cfg", default=None, metavar="JSON", help="JSON file or string of overrides applied on top of the training env cfg for every evaluation, "
                   "e.g. '{\"randomization\": {\"max_disturbance_force_n\": 0.02}}' (evaluations always draw the motor lag "
                   "from the whole motor_time_constant_range_s, not from the training's motor_time_constant_train_range_s)")
    p.add_argument("--agent-cfg", default=None, metavar="JSON", help="JSON file or string merged into the rsl_rl train cfg, e.g. '{\"num_steps_per_env\": 32}'")
    p.add_argument("--threads", type=int, default=1, help="CPU threads for torch (1 is fastest on a shared or small CPU; raise it on a dedicated many-core machine)")
    step = p.add_mutually_exclusive_group()
    step.add_argument("--native", action="store_true", help="the simulator step as C built with the system C compiler (~1 s, cached): the compiled path's "
                      "computation and random stream, 10-20x the eager step; the default on the CPU when a C compiler is found")
    step.add_argument("--compile", action="store_true", help="one torch.compiled graph per control step, resets included (2.4-5x the eager step at 1024+ envs; "
                      "the native step's random stream; the first step compiles for 60-100 s on a fresh machine; for GPUs)")
    step.add_argument("--eager", action="store_true", help="the plain torch step (its own random stream; the default on GPUs, and on CPUs without a C compiler)")
    p.add_argument("--distributed", action="store_true", help="multi-GPU data-parallel training; launch with torchrun --nproc_per_node=N")
    p.add_argument("--no-progress", action="store_true", help="no progress bar (log lines instead)")
    return p


def _json_arg(text: str | None, what: str) -> dict:
    from robot_hrl.errors import ConfigError

    if text is None:
        return {}
    source = Path(text).read_text() if Path(text).is_file() else text
    try:
        value = json.loads(source)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{what} is neither a JSON file nor a JSON string ({exc})") from None
    if not isinstance(value, dict):
        raise ConfigError(f"{what} must be a JSON object, got {type(value).__name__}")
    return value


def _deep_update(base: dict, override: dict) -> dict:
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(base.get(key), dict):
            _deep_update(base[key], value)
        else:
            base[key] = value
    return base


def _git_commit() -> str | None:
    try:
        return subprocess.run(["git", "rev-parse", "HEAD"], cwd=_REPO_ROOT, capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None


def seed_everything(seed: int) -> None:
    import numpy as np
    import torch

    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def _native_by_default(args, device: str) -> bool:
    """No step flag on a CPU: the native step when a C compiler is there (else eager, with a note)."""
    import torch

    from sim.envs.native.build import compiler_missing

    if args.eager or args.compile or args.native or torch.device(device).type != "cpu":
        return False
    reason = compiler_missing()
    if reason:
        print(f"note: the eager simulator step: {reason}")
    return reason is None


def validate_args(args) -> None:
    from robot_hrl.errors import ConfigError

    if args.num_envs < 1:
        raise ConfigError(f"--num-envs must be >= 1, got {args.num_envs}")
    if args.max_iterations < 1:
        raise ConfigError(f"--max-iterations must be >= 1, got {args.max_iterations}")
    if args.target_success is not None and not 0.0 <= args.target_success <= 1.0:
        raise ConfigError(f"--target-success must be in [0, 1] (0: stop at the first evaluation), got {args.target_success}")
    if args.threads < 1:
        raise ConfigError(f"--threads must be >= 1, got {args.threads}")
    if not 0.0 <= args.eval_skip_margin <= 1.0:
        raise ConfigError(f"--eval-skip-margin must be in [0, 1] (1: never skip an evaluation), got {args.eval_skip_margin}")
    if args.eval_interval < 1 or args.eval_episodes < 1 or args.eval_episodes_during_training < 1:
        raise ConfigError("--eval-interval, --eval-episodes and --eval-episodes-during-training must be >= 1")


def evaluation_cfg(env_cfg_dict: dict) -> dict:
    """A training env cfg as evaluations use it: the curriculum at its final values and the motor lag
    drawn from its whole range (not the training's part of it)."""
    cfg = copy.deepcopy(env_cfg_dict)
    if "curriculum" in cfg:
        cfg["curriculum"]["enabled"] = False
    if "motor_time_constant_train_range_s" in cfg.get("randomization", {}):
        cfg["randomization"]["motor_time_constant_train_range_s"] = None
    return cfg


def make_eval_env(task: str, env_cfg_dict: dict, num_envs: int, device: str, seed: int):
    """Evaluation env of a training env cfg (see :func:`evaluation_cfg`)."""
    from sim.tasks import make_env

    return make_env(task, num_envs=num_envs, device=device, cfg=evaluation_cfg(env_cfg_dict), seed=seed)


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    from robot_hrl.errors import RobotHrlError

    try:
        return run(args, argv)
    except RobotHrlError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


def run(args, argv: list[str] | None = None) -> int:
    import torch

    from robot_hrl.errors import ConfigError
    from sim.agents.kl_schedule import DesiredKlSchedule
    from sim.agents.runner import TrainingRunner
    from sim.agents.fast_elu import use_fast_elu
    from sim.agents.update_speedups import install_permuted_mini_batches, use_fused_adam
    from sim.envs.native import NativeBuildError
    from sim.envs.goto_env_cfg import GotoEnvCfg
    from sim.runs import EVAL_FILE, RUN_CONFIG, latest_checkpoint
    from sim.tasks import TASKS, default_agent_cfg, is_isaaclab_task, make_env, task_runtime

    validate_args(args)
    torch.set_num_threads(args.threads)
    rank, world = 0, 1
    device = args.device
    if args.distributed:
        from sim.distributed import setup_distributed

        rank, world, device = setup_distributed(args.device)
    elif int(os.environ.get("WORLD_SIZE", "1")) > 1:
        raise ConfigError("WORLD_SIZE > 1 is set (torchrun?) but --distributed was not given; add --distributed")
    main_process = rank == 0
    seed = args.seed + rank
    seed_everything(seed)

    # configs
    env_cfg_dict: dict | None = None
    if args.task in TASKS:
        base = GotoEnvCfg().to_dict()
        overrides = _json_arg(args.env_cfg, "--env-cfg")
        _deep_update(base, overrides)
        if args.no_randomization:
            base["randomization"]["enabled"] = False
        if args.compile:
            base["physics"]["compile"] = True
        step_chosen = isinstance(overrides.get("physics"), dict) and {"native", "compile"} & set(overrides["physics"])
        if args.native or (not step_chosen and _native_by_default(args, device)):
            base["physics"]["native"] = True
        env_cfg_dict = GotoEnvCfg.from_dict(base).validate().to_dict()
        eval_cfg = evaluation_cfg(env_cfg_dict)
        _deep_update(eval_cfg, _json_arg(args.eval_env_cfg, "--eval-env-cfg"))
        eval_env_cfg_dict = GotoEnvCfg.from_dict(eval_cfg).validate().to_dict()
    elif is_isaaclab_task(args.task):  # overrides of the task's registered env cfg (sim/isaaclab_adapter/training.py)
        from sim.isaaclab_adapter.training import isaaclab_env_cfg_overrides

        env_cfg_dict = eval_env_cfg_dict = isaaclab_env_cfg_overrides(args, _json_arg(args.env_cfg, "--env-cfg"))
    elif args.env_cfg or args.eval_env_cfg or args.no_randomization or args.compile or args.native or args.eager:
        raise ConfigError("--env-cfg, --eval-env-cfg, --no-randomization, --compile, --native and --eager apply to the built-in tasks only")
    runtime = task_runtime(args.task)
    agent_cfg = default_agent_cfg(args.task, device)
    _deep_update(agent_cfg, _json_arg(args.agent_cfg, "--agent-cfg"))
    saved_agent_cfg = copy.deepcopy(agent_cfg)
    kl_schedule = DesiredKlSchedule.from_train_cfg(agent_cfg)

    run_dir = Path(args.run_dir or Path("runs") / args.task.replace("-", "_"))
    if main_process:
        run_dir.mkdir(parents=True, exist_ok=True)
    env = make_env(args.task, num_envs=args.num_envs, device=device, cfg=env_cfg_dict, seed=seed)
    runtime.check_env(env, args)
    with contextlib.redirect_stdout(io.StringIO()):  # rsl_rl prints the model structure
        runner = TrainingRunner(env, agent_cfg, log_dir=str(run_dir) if main_process else None, device=device,
                                kl_schedule=kl_schedule, show_progress=not args.no_progress)
    # same mini-batches and update rule, less bookkeeping (sim/agents/update_speedups.py); before a resume loads the optimizer
    install_permuted_mini_batches(runner.alg)
    use_fused_adam(runner.alg)
    if torch.device(device).type == "cpu":  # the same function, 3-4x faster on the CPU (sim/agents/fast_elu.py)
        try:
            use_fast_elu(runner.alg.actor)
            use_fast_elu(runner.alg.critic)
        except NativeBuildError as exc:
            print(f"note: training with torch's ELU: {exc}")
    if args.resume:
        resume = Path(args.resume)
        ckpt = latest_checkpoint(resume) if resume.is_dir() else resume
        if not ckpt.is_file():
            raise ConfigError(f"--resume {args.resume}: no such checkpoint file or run directory")
        runner.load(str(ckpt), map_location=device)
        runner.current_learning_iteration += 1
        if hasattr(env, "common_step_counter"):  # the curriculum continues where the checkpoint left it
            env.common_step_counter = runner.current_learning_iteration * agent_cfg["num_steps_per_env"]
        print(f"resumed from {ckpt} (iteration {runner.current_learning_iteration})")

    if main_process:
        config = {
            "task": args.task,
            "env_cfg": env_cfg_dict,
            "eval_env_cfg": eval_env_cfg_dict,
            "agent_cfg": saved_agent_cfg,
            "seed": args.seed,
            "device": str(device),
            "num_envs": args.num_envs,
            "world_size": world,
            "command": " ".join(shlex.quote(a) for a in [sys.executable, *sys.argv]) if argv is None else "python sim/train.py " + " ".join(shlex.quote(a) for a in argv),
            "git_commit": _git_commit(),
            "torch_version": torch.__version__,
        }
        if hasattr(env, "cfg_dict"):  # Isaac Lab: the registered cfg with the overrides applied, for the record
            config["resolved_env_cfg"] = env.cfg_dict
        if args.resume:  # keep the provenance chain of fine-tuned runs
            resume = Path(args.resume)
            parent_dir = resume if resume.is_dir() else resume.parent
            config["resumed_from"] = str(latest_checkpoint(resume) if resume.is_dir() else resume)
            parent_cfg = parent_dir / RUN_CONFIG
            if parent_cfg.is_file():
                config["parent_run_config"] = json.loads(parent_cfg.read_text())
        (run_dir / RUN_CONFIG).write_text(json.dumps(config, indent=2))

    eval_env = None
    timers = runner.timers
    history: list[dict] = []

    def policy_eval(num_episodes: int, stop_below: float | None = None) -> dict:
        nonlocal eval_env
        t = time.perf_counter()
        if eval_env is None:
            eval_env = env if runtime.evaluates_on_training_env else make_eval_env(
                args.task, eval_env_cfg_dict, min(num_episodes, 1000), device, seed + 10_000)
        policy = runner.get_inference_policy(device=device)
        result = runtime.evaluate(eval_env, policy, num_episodes, stop_below=stop_below)
        if runtime.evaluates_on_training_env:  # the env was reset: rsl_rl's running episode sums restart with it
            runner.logger.cur_reward_sum.zero_()
            runner.logger.cur_episode_length.zero_()
        runner.alg.train_mode()
        timers.evaluation_s += time.perf_counter() - t
        return result

    def on_iteration(it: int, stats: dict) -> bool:
        if args.target_success is None:
            return False
        # evaluate every --eval-interval iterations, but only once the training episodes come within
        # --eval-skip-margin of the target (1000 episodes cost as much as several iterations), and
        # every 5th time regardless (the stochastic policy's success can lag the evaluation's a lot)
        if (it + 1) % args.eval_interval != 0:
            return False
        threshold = args.target_success - args.eval_skip_margin
        train_success = stats["train_success"]  # nan before any training episode ended
        promising = threshold <= 0.0 or (train_success == train_success and train_success >= threshold)
        if not (promising or (it + 1) % (5 * args.eval_interval) == 0):
            return False
        # stops as soon as too many episodes failed for the target to be reachable (exact, not a guess)
        result = policy_eval(args.eval_episodes_during_training, stop_below=args.target_success)
        stats["observations_stale"] = runtime.evaluates_on_training_env
        history.append({"iteration": it, "elapsed_s": round(time.perf_counter() - t_start, 3), **result})
        if result["stopped_early"]:
            stats["eval_success_at_most"] = result["success_rate_at_most"]
            reached = False
        else:
            stats["eval_success"] = result["success_rate"]
            if runner.logger.writer is not None:
                runner.logger.writer.add_scalar("Eval/success_rate", result["success_rate"], it)
            reached = result["success_rate"] >= args.target_success
        if world > 1:
            flag = torch.tensor(float(reached), device=device)
            torch.distributed.broadcast(flag, src=0)
            reached = bool(flag.item())
        return reached

    runner.on_iteration = on_iteration
    t_start = time.perf_counter()
    iterations = runner.learn(args.max_iterations)  # rsl_rl's loop, hooked (sim/agents/runner.py)
    train_wall = time.perf_counter() - t_start
    timers.other_s = max(0.0, train_wall - timers.simulation_s - timers.inference_s - timers.ppo_update_s - timers.evaluation_s)
    env_steps = iterations * agent_cfg["num_steps_per_env"] * args.num_envs * world

    if main_process:
        t = time.perf_counter()
        result = policy_eval(args.eval_episodes)
        final_eval_s = time.perf_counter() - t
        report = {
            "task": args.task,
            **result,
            "train_wall_time_s": round(train_wall, 3),
            "final_eval_wall_time_s": round(final_eval_s, 3),
            "env_steps": env_steps,
            "iterations": iterations,
            "num_envs": args.num_envs,
            "device": str(device),
            "seed": args.seed,
            "randomization": bool(eval_env_cfg_dict["randomization"].get("enabled", True)) if "randomization" in eval_env_cfg_dict else None,
            "eval_env_cfg_differs_from_training": eval_env_cfg_dict != env_cfg_dict,
            "target_success": args.target_success,
            "target_reached": None if args.target_success is None else any(
                not h["stopped_early"] and h["success_rate"] >= args.target_success for h in history),
            "time_breakdown_s": timers.as_dict(),
            "desired_kl_switched_at_iteration": None if kl_schedule is None else kl_schedule.switched_at_iteration,
            "evaluations_during_training": history,
            "checkpoint": str(latest_checkpoint(run_dir)),
        }
        (run_dir / EVAL_FILE).write_text(json.dumps(report, indent=2))
        print(
            f"\n{args.task}: {runtime.summary(result)}; "
            f"trained {iterations} iterations / {env_steps} env steps in {train_wall:.1f} s "
            f"(simulation {timers.simulation_s:.1f} s, inference {timers.inference_s:.1f} s, PPO update {timers.ppo_update_s:.1f} s, "
            f"evaluation {timers.evaluation_s:.1f} s)\nwrote {run_dir / EVAL_FILE}"
        )
    if world > 1:
        torch.distributed.barrier()
    return 0


if __name__ == "__main__":
    sys.exit(main())
