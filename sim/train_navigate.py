"""Train the ``navigate`` level over the frozen goto skill, on a density curriculum: DAgger from a privileged
expert first (sim/agents/dagger_navigate.py), then PPO (rsl-rl-lib) fine-tunes the same actor.

    python sim/train_navigate.py --run-dir runs/navigate --minutes 15
    python sim/train_navigate.py --dagger-iterations 0 ...    # PPO alone, from scratch (phase 1)
    python sim/train_navigate.py --skill models/new_goto.onnx --run-dir runs/navigate_new   # retrain over a new skill
    python sim/train_navigate.py --init-onnx models/crazyflie_navigate.onnx --dagger-iterations 0 --critic-warmup 10 \
        --range-shield-envs 128 --shield-stop-weight -0.5 --start-level 2 --run-dir runs/nav_shield   # fine-tune the
        # shipped level with the runtime's shield in the loop of 128 of the environments

Writes TensorBoard logs, checkpoints (model_<it>.pt), train_cfg.json, navigate_contract.json (the
contract names the skill's file hash) and, with --export, the ONNX (deploy/onnx_export/navigate.py).
The run stops at --max-iterations or after --minutes of wall time, whichever comes first.
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python sim/train_navigate.py", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__.split("\n\n", 1)[1])
    p.add_argument("--skill", default="models/crazyflie_goto.onnx", help="the frozen goto skill (.onnx with its contract)")
    p.add_argument("--run-dir", default="runs/navigate", help="where logs, checkpoints and the contract go")
    p.add_argument("--num-envs", type=int, default=512, help="parallel environments")
    p.add_argument("--max-iterations", type=int, default=400, help="PPO iterations at most")
    p.add_argument("--minutes", type=float, default=15.0, help="wall-time budget; the run saves and stops after it")
    p.add_argument("--rooms-per-density", type=int, default=300, help="training rooms per density (training seeds)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=2, help="torch threads (the machine is shared: 1 or 2)")
    p.add_argument("--no-curriculum", action="store_true", help="every density from the start")
    p.add_argument("--resume", default=None, metavar="CHECKPOINT", help="continue from this model_<it>.pt (same skill)")
    p.add_argument("--start-level", type=int, default=0, help="curriculum level to start at (0 sparse, 1 +medium, 2 +dense)")
    p.add_argument("--dagger-iterations", type=int, default=30,
                   help="DAgger iterations from the geodesic expert before PPO (0: PPO from scratch); not on --resume")
    p.add_argument("--dagger-init", default=None, metavar="CHECKPOINT",
                   help="start DAgger from this model_<it>.pt's actor (student only from the first iteration: beta 0)")
    p.add_argument("--expert-margin", type=float, default=None, metavar="M",
                   help="the expert's hard margin: obstacles grown by the robot radius + this (default GeodesicExpertCfg's 0.25)")
    p.add_argument("--expert-clearance", type=float, default=0.0, metavar="M",
                   help="clearance-aware expert labels: candidates closer than this to an obstacle pay for it (0: off)")
    p.add_argument("--near-weight", type=float, default=0.0,
                   help="DAgger loss weighting of near-obstacle decisions: up to 1 + this for states within --near-m (0: off)")
    p.add_argument("--near-m", type=float, default=0.8, help="clearance under which a state's weight rises (--near-weight)")
    p.add_argument("--dagger-checkpoint-every", type=int, default=0, metavar="N",
                   help="keep the actor every N DAgger iterations as <run-dir>/dagger_checkpoints/it_<n>.pt (0: never)")
    p.add_argument("--proximity", choices=["rangers", "all_directions"], default="rangers",
                   help="the proximity penalty's distance: the four rangers' true ranges (blind between their cones) or the "
                        "true distance to the nearest obstacle in any direction (privileged; rewards.proximity_source)")
    p.add_argument("--proximity-weight", type=float, default=None, help="rewards.proximity_weight (default -1.0)")
    p.add_argument("--init-onnx", default=None, metavar="ONNX",
                   help="start the actor from an exported navigate level (its contract must match this run's: same skill, "
                        "sensors, memory); the critic starts fresh (see --critic-warmup); not with --resume")
    p.add_argument("--trail", action="store_true",
                   help="the level also observes its trail (the trail_yaw term: its own earlier positions, nearest per sector; "
                        "NavigateTrailCfg); with --init-onnx of a level without it, the trail's inputs start at zero weight (an "
                        "--init-onnx level that keeps a trail is fine-tuned with its own, --trail or not)")
    p.add_argument("--heading", action="store_true",
                   help="fly with the heading loop under the skill (robot_hrl.runtime.heading: the robot turns to face its "
                        "velocity, so the front ranger looks along its path, and the skill observes the world turned to its "
                        "own yaw, measured first by sim/skill_yaw.py; NavigateHeadingCfg); the exported contract names it, "
                        "and every runtime that flies the level runs it. An --init-onnx level that has one keeps it")
    p.add_argument("--heading-lead-s", type=float, default=None, metavar="S",
                   help="with --heading: the loop's lead into turns (HeadingSpec.lead_s: the yaw target faces v + S a_turn; "
                        "default 0, or the --init-onnx level's own)")
    p.add_argument("--heading-max-yaw-rate-radps", type=float, default=None, metavar="R",
                   help="with --heading: the loop's yaw rate command is clipped to R rad/s (HeadingSpec.max_yaw_rate_radps; "
                        "default 0: no limit, or the --init-onnx level's own)")
    p.add_argument("--init-std", type=float, default=0.2, help="the exploration std of an --init-onnx actor")
    p.add_argument("--critic-warmup", type=int, default=0, metavar="N",
                   help="first N PPO iterations train the critic only (the actor frozen): a fresh critic under a trained actor")
    p.add_argument("--range-shield-envs", type=int, default=0, metavar="N",
                   help="the first N environments fly through the runtime's shield with the range source, the room unmapped "
                        "for it (sim/navigate_shield.py, as the shielded evaluation; about 200 us per environment and control "
                        "tick here), on charged batteries (all environments: SHIELDED_BATTERY_RANGE_V)")
    p.add_argument("--shield-stop-weight", type=float, default=None,
                   help="rewards.shield_stop_weight: times the share of a decision's ticks the range source acted on (e.g. -0.5)")
    p.add_argument("--learning-rate", type=float, default=None,
                   help="PPO's starting learning rate (default the cfg's 1e-3; the adaptive schedule moves it): lower for a "
                        "fine-tune on few environments (at 96 shielded environments 1e-3 collapsed the shipped level's "
                        "training success from 0.9 to 0.2 in three iterations)")
    p.add_argument("--memory-gru", type=int, default=0, metavar="H",
                   help="the level keeps a GRU memory of H units beside its MLP (sim/agents/memory_model.py; DAgger fitted "
                        "through time, rsl_rl's recurrent PPO); with --init-onnx of a feed-forward level the memory's "
                        "columns start at zero weight (0: none)")
    p.add_argument("--export", default=None, metavar="ONNX", help="export the final policy to this .onnx")
    return p


def check_args(args) -> None:
    """Refuse option values that do not make a run, before anything is built (SystemExit naming the fix)."""
    if args.init_onnx and args.resume:
        raise SystemExit("--init-onnx and --resume both give the actor: choose one")
    if not 0 <= args.range_shield_envs <= args.num_envs:
        raise SystemExit(f"--range-shield-envs {args.range_shield_envs}: give 0 (no shield) to --num-envs ({args.num_envs})")
    if args.memory_gru < 0:
        raise SystemExit(f"--memory-gru {args.memory_gru}: give 0 (no memory) or the GRU's units, e.g. 32")
    if args.critic_warmup < 0:
        raise SystemExit(f"--critic-warmup {args.critic_warmup}: give 0 (none) or more iterations")
    for flag, value in (("--learning-rate", args.learning_rate), ("--init-std", args.init_std)):
        if value is not None and not value > 0:  # (NaN too)
            raise SystemExit(f"{flag} {value}: give a positive number")


def _set_heading_field(heading, flag: str, field: str, value: float, example: str) -> None:
    """Set one HeadingSpec field of the run's loop from its option, within the contract's own bounds (SystemExit with
    the fix: no loop to set it on, or a value the contract would refuse)."""
    from robot_hrl.contract.navigate import HeadingSpec

    if not heading.enabled:
        raise SystemExit(f"{flag} needs the heading loop: add --heading (or give an --init-onnx level that has one)")
    bounds = HeadingSpec.model_fields[field].metadata  # (the contract's Ge and Le)
    lo = next(b.ge for b in bounds if hasattr(b, "ge"))
    hi = next(b.le for b in bounds if hasattr(b, "le"))
    if not (math.isfinite(value) and lo <= value <= hi):
        raise SystemExit(f"{flag} {value}: give a value in [{lo:g}, {hi:g}] (the contract's range of heading.{field}), "
                         f"e.g. {example}")
    setattr(heading, field, value)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    check_args(args)
    import torch
    from rsl_rl.runners import OnPolicyRunner

    from sim.agents.ppo_navigate import ppo_navigate_cfg
    from sim.envs.navigate_env import NavigateEnv
    from sim.envs.navigate_env_cfg import NavigateEnvCfg

    torch.set_num_threads(args.threads)
    torch.set_flush_denormal(True)
    torch.manual_seed(args.seed)
    run_dir = Path(args.run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    cfg = NavigateEnvCfg(skill_path=args.skill, rooms_per_density=args.rooms_per_density)
    cfg.curriculum.enabled = not args.no_curriculum
    cfg.trail.enabled = args.trail
    cfg.heading.enabled = args.heading
    if args.init_onnx:  # a level that keeps a trail fine-tunes with it (the run must observe what the file does)
        from sim.agents.warm_start import navigate_contract_of, refuse_recurrent_init
        from sim.envs.navigate_env_cfg import NavigateTrailCfg

        own = navigate_contract_of(Path(args.init_onnx))
        refuse_recurrent_init(Path(args.init_onnx), own)
        if own.trail is not None:
            cfg.trail = NavigateTrailCfg.of(own.trail)
        if own.heading is not None:
            from sim.envs.navigate_env_cfg import NavigateHeadingCfg

            cfg.heading = NavigateHeadingCfg.of(own.heading)
    for flag, field, value, example in (("--heading-lead-s", "lead_s", args.heading_lead_s, "0.4"),
                                        ("--heading-max-yaw-rate-radps", "max_yaw_rate_radps",
                                         args.heading_max_yaw_rate_radps, "2")):
        if value is not None:
            _set_heading_field(cfg.heading, flag, field, value, example)
    if cfg.heading.enabled and cfg.heading.skill_yaw_rad is None:  # the yaw the skill is shown under the loop
        from sim.skill_yaw import equilibrium_yaw

        cfg.heading.skill_yaw_rad, spread = equilibrium_yaw(cfg.skill_path)
        print(f"heading: the goto skill's own yaw {cfg.heading.skill_yaw_rad:.4f} rad (final yaws within {spread:.4f} rad)")
    cfg.rewards.proximity_source = args.proximity
    if args.proximity_weight is not None:
        cfg.rewards.proximity_weight = args.proximity_weight
    if args.shield_stop_weight is not None:
        cfg.rewards.shield_stop_weight = args.shield_stop_weight
    if args.range_shield_envs:
        from sim.navigate_shield import shielded_randomization

        cfg.randomization = shielded_randomization()
    t0 = time.perf_counter()
    from robot_hrl.world.rooms import generate_room, room_seeds
    from sim.envs.nav_rooms import RoomPool

    rooms = [generate_room(d, s, cfg.room_split) for d in cfg.densities
             for s in room_seeds(cfg.room_split, cfg.rooms_per_density, cfg.room_seed_offset)]
    env = NavigateEnv(cfg, num_envs=args.num_envs, seed=args.seed, pool=RoomPool.from_rooms(rooms))
    if args.range_shield_envs:
        from robot_hrl.runtime import OnnxPolicy
        from sim.navigate_shield import BatchedShield

        active = torch.arange(args.num_envs) < args.range_shield_envs
        env.shield = BatchedShield(env, rooms, OnnxPolicy(args.skill, provider="cpu"), seed=args.seed, active=active)
        env.reset()
    setup_s = time.perf_counter() - t0
    (run_dir / "navigate_contract.json").write_text(env.contract.to_json())
    train_cfg = ppo_navigate_cfg(args.memory_gru)
    if args.learning_rate is not None:
        train_cfg["algorithm"]["learning_rate"] = args.learning_rate
    (run_dir / "train_cfg.json").write_text(json.dumps(train_cfg, indent=1))
    import dataclasses
    (run_dir / "navigate_env_cfg.json").write_text(json.dumps(dataclasses.asdict(cfg), indent=1))
    runner = OnPolicyRunner(env, train_cfg, log_dir=str(run_dir), device="cpu")
    env.level = max(env.level, min(args.start_level, 2))
    if args.resume:
        runner.load(args.resume)
    if args.init_onnx:
        from sim.agents.warm_start import warm_start_navigate

        warm_start_navigate(Path(args.init_onnx), runner.alg.actor, env.contract, std=args.init_std)
    start = time.perf_counter()
    from tqdm import tqdm

    dagger = None
    if args.dagger_iterations > 0 and not args.resume:
        from torch.utils.tensorboard import SummaryWriter

        from sim.agents.dagger_navigate import DaggerCfg, run_dagger
        from sim.navigate_expert import GeodesicExpert, GeodesicExpertCfg

        expert_cfg = GeodesicExpertCfg(clearance_m=args.expert_clearance)
        if args.expert_margin is not None:
            expert_cfg.safety_margin_m = args.expert_margin
        expert = GeodesicExpert(rooms, env.contract.max_offset_m, expert_cfg)
        with tqdm(total=args.dagger_iterations, desc="navigate DAgger", unit="it") as bar:
            writer = SummaryWriter(str(run_dir / "dagger"))
            dagger_cfg = DaggerCfg(iterations=args.dagger_iterations, near_weight=args.near_weight, near_m=args.near_m,
                                   checkpoint_every=args.dagger_checkpoint_every)
            keep = run_dir / "dagger_checkpoints"
            if args.dagger_init:
                runner.alg.actor.load_state_dict(torch.load(args.dagger_init, map_location="cpu", weights_only=False)["actor_state_dict"])
                dagger_cfg.beta_decay_iterations = 0
            dagger = run_dagger(env, runner.alg.actor, expert, dagger_cfg, writer, bar,
                                on_iteration=lambda it: runner.save(str(run_dir / "model_0.pt")),
                                should_stop=lambda: time.perf_counter() - start > args.minutes * 60,
                                on_checkpoint=lambda n: (keep.mkdir(exist_ok=True), runner.save(str(keep / f"it_{n}.pt"))))
            dagger["init"] = args.dagger_init
            dagger["cfg"] = dataclasses.asdict(dagger_cfg)
            dagger["expert"] = dataclasses.asdict(expert_cfg)
            writer.close()
        dagger["wall_s"] = time.perf_counter() - start
        runner.save(str(run_dir / "model_0.pt"))
        env.reset()
        runner.alg.actor.reset()  # (a recurrent level's state: the new flights start from zeros)
    done_it, chunk = 0, 10
    if args.critic_warmup > 0:
        actor_params = list(runner.alg.actor.parameters())
        for q in actor_params:
            q.requires_grad_(False)
        with tqdm(total=args.critic_warmup, desc="critic warm-up (actor frozen)", unit="it") as bar:
            while bar.n < args.critic_warmup:
                n = min(chunk, args.critic_warmup - bar.n)
                runner.learn(n, init_at_random_ep_len=False)
                runner.current_learning_iteration += 1
                bar.update(n)
        for q in actor_params:
            q.requires_grad_(True)
        # (the adaptive schedule moved the rate on the frozen actor's KL): the fine-tune starts at the cfg's rate
        runner.alg.learning_rate = train_cfg["algorithm"]["learning_rate"]
        for group in runner.alg.optimizer.param_groups:
            group["lr"] = runner.alg.learning_rate

    bar = tqdm(total=args.max_iterations, desc="navigate PPO", unit="it")
    while done_it < args.max_iterations and time.perf_counter() - start < args.minutes * 60:
        n = min(chunk, args.max_iterations - done_it)
        runner.learn(n, init_at_random_ep_len=False)
        runner.current_learning_iteration += 1
        done_it += n
        bar.update(n)
        bar.set_postfix(level=env.level)
        runner.save(str(run_dir / f"model_{runner.current_learning_iteration}.pt"))
    bar.close()
    wall = time.perf_counter() - start
    summary = {"dagger": dagger, "iterations": done_it, "total_iterations": runner.current_learning_iteration, "resumed_from": args.resume, "init_onnx": args.init_onnx,
               "critic_warmup": args.critic_warmup, "range_shield_envs": args.range_shield_envs, "training_wall_s": wall, "setup_s": setup_s, "num_envs": args.num_envs,
               "decisions": done_it * train_cfg["num_steps_per_env"] * args.num_envs, "final_level": env.level,
               "skill": args.skill, "skill_sha256": env.skill.sha256, "command": " ".join(sys.argv)}
    (run_dir / "train_summary.json").write_text(json.dumps(summary, indent=1))
    print(json.dumps(summary, indent=1))
    if args.export:
        return subprocess.call([sys.executable, "-m", "deploy.onnx_export.navigate", str(run_dir), "--out", args.export], cwd=REPO)
    return 0


if __name__ == "__main__":
    sys.exit(main())
