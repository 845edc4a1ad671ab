"""The goto skill's own yaw: where it turns to when nothing else steers its yaw.

A goto skill without a yaw command (``sim/envs/goto_env_cfg.py``: no yaw reward, random start yaws, world-frame
observations) is not yaw-neutral in its weights: hovering, it turns to a yaw of its own. The heading loop shows the
skill the world turned so that the robot's yaw always reads as that yaw (robot_hrl.runtime.heading.turn_observation; the
navigate contract's ``heading.skill_yaw_rad``), where the skill's ``torque_z`` only damps the yaw rate. This module
measures it in the batched simulator: robots start level at rest at yaws spread over the circle, hover at their start
for ``hover_s`` on the nominal airframe, and the final yaws' circular mean is the skill's yaw.

    python -m sim.skill_yaw models/crazyflie_goto.onnx
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

from robot_hrl.errors import ConfigError, RobotHrlError

MAX_SPREAD_RAD = 0.2
"""The final yaws must all lie this close to their circular mean: otherwise the skill has no single yaw of its own."""


def equilibrium_yaw(skill_path: str | Path, num_envs: int = 24, hover_s: float = 15.0, height_m: float = 1.0,
                    seed: int = 0) -> tuple[float, float]:
    """(yaw, spread), rad: the circular mean of the skill's final yaws from ``num_envs`` start yaws spread over the circle,
    and the largest distance of one from it. ConfigError when the spread exceeds ``MAX_SPREAD_RAD`` (a yaw-neutral or
    multi-stable skill: give the heading's ``skill_yaw_rad`` yourself)."""
    import torch

    from sim.envs.frozen_skill import FrozenSkill
    from sim.envs.nav_low_level import SkillDrivenQuadrotor
    from sim.envs.terms.navigate_observations import yaw_from_quat

    if num_envs < 2 or not (hover_s > 0 and height_m > 0):
        raise ConfigError(f"num_envs={num_envs} (>= 2), hover_s={hover_s} and height_m={height_m} (> 0) are needed")
    skill = FrozenSkill(Path(skill_path))
    low = SkillDrivenQuadrotor(skill, num_envs, seed=seed, randomize=False)
    ids = torch.arange(num_envs)
    start_yaw = -math.pi + 2.0 * math.pi * (ids.to(torch.float32) + 0.5) / num_envs
    position = torch.tensor([0.0, 0.0, float(height_m)]).expand(num_envs, 3).clone()
    low.place(ids, position, start_yaw)
    for _ in range(int(round(hover_s * skill.contract.control_rate_hz))):
        low.step(position)
    yaw = yaw_from_quat(low.quat_wxyz)
    mean = float(torch.atan2(torch.sin(yaw).mean(), torch.cos(yaw).mean()))
    spread = float(((yaw - mean + math.pi) % (2.0 * math.pi) - math.pi).abs().max())
    if not spread <= MAX_SPREAD_RAD:
        raise ConfigError(f"the skill {Path(skill_path).name} has no single yaw of its own: after {hover_s:g} s of hover "
                          f"its yaws lie up to {spread:.2f} rad from their mean {mean:.2f} rad (limit {MAX_SPREAD_RAD} rad). "
                          "It may be yaw-neutral or settle at several yaws: give the heading's skill_yaw_rad yourself "
                          "(NavigateHeadingCfg.skill_yaw_rad, e.g. 0.0 for a yaw-neutral skill)")
    return mean, spread


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m sim.skill_yaw", description=__doc__.split("\n\n")[0] + " Prints the yaw "
                                "the heading loop shows the skill (the navigate contract's heading.skill_yaw_rad).",
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("skill", help="the exported goto skill (.onnx with its contract)")
    p.add_argument("--num-envs", type=int, default=24, help="start yaws, spread evenly over the circle")
    p.add_argument("--hover-s", type=float, default=15.0, help="seconds of hover before the yaws are read")
    p.add_argument("--seed", type=int, default=0)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        yaw, spread = equilibrium_yaw(args.skill, num_envs=args.num_envs, hover_s=args.hover_s, seed=args.seed)
    except RobotHrlError as exc:  # no single yaw, a missing or corrupted model
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"skill_yaw_rad {yaw:.4f} (every final yaw within {spread:.4f} rad of it; {args.num_envs} start yaws, "
          f"{args.hover_s:g} s of hover)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
