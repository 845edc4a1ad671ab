"""The crazyflie-goto task in PyBullet, flown by an exported policy through the robot_hrl runtime.

Everything that defines the task is read from the training environment's configuration
(``sim.envs.goto_env_cfg.GotoEnvCfg``) and its term functions, never copied:

- initial states (``CommandCfg``): start x, y uniform in +-spawn_xy_half_extent_m, height in
  spawn_height_range_m; random yaw, tilt uniform up to max_initial_tilt_rad about a random
  horizontal axis; velocity of random direction, speed uniform up to max_initial_speed_mps;
  body rates uniform in +-max_initial_body_rate_radps; goal uniform in the ball of
  subgoal_radius_m around the start, raised to min_goal_height_m;
- episode length (``CommandCfg.episode_length_s``) at the contract's control rate;
- terminations (``TerminationCfg`` and ``sim.envs.terms.terminations``): a crash is touching
  the ground (a PyBullet contact, or the body centre below the training env's contact height),
  touching an obstacle, or a non-finite state; out of bounds is farther than
  out_of_bounds_distance_m from the goal or above ceiling_m;
- success (``SuccessCfg`` via ``terminations.success``): at the time-out, closer than
  position_tolerance_m to the goal and slower than speed_tolerance_mps, not crashed;
- randomization (``RandomizationCfg``): the airframe, disturbances and action latency through
  :class:`sim.pybullet.RandomizationCfg.from_training`; observation noise is applied to the
  state handed to the runtime (position, velocity, body rates; attitude as a small random
  rotation of the same standard deviation as the training's rotation-matrix noise).

With a world file, starts and goals are drawn inside the world's bounds instead of around the
origin, and samples closer than the robot's collision radius (plus a margin) to a box are drawn
again.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable

import numpy as np
import torch

from robot_hrl.geometry import quat_normalize
from robot_hrl.state import RobotState
from robot_hrl.world.world import World
from sim.envs.goto_env_cfg import GotoEnvCfg
from sim.envs.terms import terminations as term_terms
from sim.pybullet.quadrotor_sim import PyBulletQuadrotorSim
from sim.pybullet.scene import GROUND_NAME

WORLD_CLEARANCE_MARGIN_M = 0.15
"""Extra clearance from boxes and bounds for starts and goals sampled in a world file."""
MAX_SAMPLING_TRIES = 1000


@dataclass
class InitialCondition:
    position_w: np.ndarray
    quat_wxyz: np.ndarray
    linear_velocity_w: np.ndarray
    angular_velocity_b: np.ndarray
    goal_w: np.ndarray


@dataclass
class EpisodeResult:
    """One episode, with the same fields as the training env's ``extras['episode_end']``."""

    success: bool
    crashed: bool
    out_of_bounds: bool
    time_out: bool
    final_position_error_m: float
    final_speed_mps: float
    rms_position_error_m: float
    episode_length: int
    """Control steps."""
    goal_w: np.ndarray
    positions_w: np.ndarray
    """(T + 1, 3) positions from the start, one per control step."""
    position_errors_m: np.ndarray
    """(T + 1,) distance to the goal."""
    crash_reason: str | None = None
    shield_interventions: int = 0
    shield_units: dict[str, int] = field(default_factory=dict)


def _quat_mul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    aw, ax, ay, az = a
    bw, bx, by, bz = b
    return np.array([
        aw * bw - ax * bx - ay * by - az * bz,
        aw * bx + ax * bw + ay * bz - az * by,
        aw * by - ax * bz + ay * bw + az * bx,
        aw * bz + ax * by - ay * bx + az * bw,
    ])


def _quat_from_rotvec(v: np.ndarray) -> np.ndarray:
    angle = float(np.linalg.norm(v))
    if angle < 1e-12:
        return np.array([1.0, 0.0, 0.0, 0.0])
    return np.concatenate([[math.cos(angle / 2)], np.asarray(v) / angle * math.sin(angle / 2)])


def _unit(rng: np.random.Generator) -> np.ndarray:
    v = rng.normal(size=3)
    return v / max(float(np.linalg.norm(v)), 1e-6)


def sample_initial_condition(cfg: GotoEnvCfg, rng: np.random.Generator, world: World | None = None,
                             clearance_m: float = 0.0) -> InitialCondition:
    """One start state and goal, distributed as in the training env's reset (numpy twin)."""
    cmd = cfg.command
    for _ in range(MAX_SAMPLING_TRIES):
        if world is None:
            pos = np.array([*rng.uniform(-1.0, 1.0, size=2) * cmd.spawn_xy_half_extent_m,
                            rng.uniform(*cmd.spawn_height_range_m)])
        else:
            lo = np.asarray(world.bounds.min) + clearance_m
            hi = np.asarray(world.bounds.max) - clearance_m
            z_lo, z_hi = max(cmd.spawn_height_range_m[0], lo[2]), min(cmd.spawn_height_range_m[1], hi[2])
            if not (np.all(lo[:2] < hi[:2]) and z_lo <= z_hi):
                raise ValueError(f"world {world.name!r} is too small to hold the training's start states "
                                 f"(spawn heights {cmd.spawn_height_range_m} m, clearance {clearance_m:.2f} m)")
            pos = np.array([*rng.uniform(lo[:2], hi[:2]), rng.uniform(z_lo, z_hi)])
        yaw = rng.uniform(-math.pi, math.pi)
        q_yaw = np.array([math.cos(yaw / 2), 0.0, 0.0, math.sin(yaw / 2)])
        axis_angle = rng.uniform(0.0, 2 * math.pi)
        tilt = cmd.max_initial_tilt_rad * rng.uniform()
        q_tilt = _quat_from_rotvec(np.array([math.cos(axis_angle), math.sin(axis_angle), 0.0]) * tilt)
        quat = quat_normalize(_quat_mul(q_tilt, q_yaw))
        vel = _unit(rng) * cmd.max_initial_speed_mps * rng.uniform()
        omega = rng.uniform(-1.0, 1.0, size=3) * cmd.max_initial_body_rate_radps
        goal = pos + _unit(rng) * cmd.subgoal_radius_m * rng.uniform() ** (1.0 / 3.0)
        goal[2] = max(goal[2], cmd.min_goal_height_m)
        if world is None or _clear(world, pos, goal, clearance_m):
            return InitialCondition(pos, quat, vel, omega, goal)
    raise ValueError(f"could not place a start and a goal clear of the obstacles of world {world.name!r} "
                     f"in {MAX_SAMPLING_TRIES} tries; the world is too cluttered for the goto task")


def _clear(world: World, pos: np.ndarray, goal: np.ndarray, clearance_m: float) -> bool:
    if not (world.bounds.contains(pos, clearance_m) and world.bounds.contains(goal, clearance_m)):
        return False
    return not (world.collides(pos, clearance_m) or world.collides(goal, clearance_m))


def noisy_state(state: RobotState, cfg: GotoEnvCfg, rng: np.random.Generator) -> RobotState:
    """The state as the policy sees it under the training's observation noise."""
    noise = cfg.randomization.observation_noise
    rot = _quat_from_rotvec(rng.normal(scale=noise.rotation_matrix_wb, size=3))
    return RobotState(
        position_w=state.position_w + rng.normal(scale=noise.subgoal_error_w, size=3),
        quat_wxyz=quat_normalize(_quat_mul(rot, state.quat_wxyz)),
        linear_velocity_w=state.linear_velocity_w + rng.normal(scale=noise.linear_velocity_w, size=3),
        angular_velocity_b=state.angular_velocity_b + rng.normal(scale=noise.angular_velocity_b, size=3),
        stamp_s=state.stamp_s,
    )


def out_of_bounds(position_w: np.ndarray, goal_w: np.ndarray, cfg: GotoEnvCfg) -> bool:
    """Numpy twin of ``sim.envs.terms.terminations.out_of_bounds`` (per control step, so no torch
    call); ``tests/test_evaluate.py`` checks that both agree."""
    t = cfg.terminations
    return bool(np.linalg.norm(position_w - goal_w) > t.out_of_bounds_distance_m or position_w[2] > t.ceiling_m)


Controller = Callable[[RobotState, np.ndarray], np.ndarray]
"""(state, goal_w) -> wrench [thrust N, tau_x, tau_y, tau_z N m]."""


def run_episode(sim: PyBulletQuadrotorSim, controller: Controller, init: InitialCondition, cfg: GotoEnvCfg,
                rng: np.random.Generator, observation_noise: bool = False,
                on_reset: Callable[[], None] | None = None) -> EpisodeResult:
    """Fly one episode from ``init``; ends at a crash, out of bounds, or the time limit."""
    cmd, tcfg = cfg.command, cfg.terminations
    max_steps = int(round(cmd.episode_length_s * sim.control_hz))
    contact_height = cfg.physics.ground_height_m + sim.robot.body_height_m / 2.0 + tcfg.ground_contact_margin_m
    state = sim.reset(init.position_w, init.quat_wxyz, init.linear_velocity_w, init.angular_velocity_b)
    if on_reset is not None:
        on_reset()
    goal = init.goal_w
    positions = [state.position_w.copy()]
    errors = [float(np.linalg.norm(goal - state.position_w))]
    sq_sum = 0.0
    crashed = out = False
    reason = None
    steps = 0
    for steps in range(1, max_steps + 1):
        seen = noisy_state(state, cfg, rng) if observation_noise else state
        wrench = controller(seen, goal)
        if not np.all(np.isfinite(wrench)):
            # the runtime returns a non-finite output as is; the firmware would not fly it
            crashed, reason = True, "non-finite command"
            break
        state = sim.step(wrench)
        distance = float(np.linalg.norm(goal - state.position_w))
        positions.append(state.position_w.copy())
        errors.append(distance)
        sq_sum += distance**2
        if not state.is_finite():
            crashed, reason = True, "non-finite state"
        elif tcfg.terminate_on_ground_contact and (
            state.position_w[2] <= contact_height or any(c.body == GROUND_NAME for c in sim.collisions())
        ):
            crashed, reason = True, "ground"
        elif sim.collided():
            crashed = True
            reason = next((c.body for c in sim.collisions() if c.body != GROUND_NAME), "obstacle")
        if crashed:
            break
        if out_of_bounds(state.position_w, goal, cfg):
            out = True
            break
    time_out = not (crashed or out) and steps >= max_steps
    final_error = errors[-1]
    final_speed = float(np.linalg.norm(state.linear_velocity_w))
    success = bool(
        term_terms.success(torch.tensor([final_error]), torch.tensor([final_speed]),
                           cfg.success.position_tolerance_m, cfg.success.speed_tolerance_mps)[0]
    ) and time_out
    return EpisodeResult(
        success=success, crashed=crashed, out_of_bounds=out, time_out=time_out,
        final_position_error_m=final_error, final_speed_mps=final_speed,
        rms_position_error_m=math.sqrt(sq_sum / max(steps, 1)), episode_length=steps,
        goal_w=np.asarray(goal), positions_w=np.asarray(positions), position_errors_m=np.asarray(errors),
        crash_reason=reason,
    )


def summarize(results: list[EpisodeResult], step_dt_s: float) -> dict:
    """The same aggregate as ``sim.evaluation.evaluate``."""
    if not results:
        raise ValueError("no episodes to summarize")
    f = lambda key: np.array([getattr(r, key) for r in results], dtype=np.float64)  # noqa: E731
    rms = f("rms_position_error_m")
    return {
        "num_episodes": len(results),
        "success_rate": float(f("success").mean()),
        "crash_rate": float(f("crashed").mean()),
        "out_of_bounds_rate": float(f("out_of_bounds").mean()),
        "mean_final_position_error_m": float(f("final_position_error_m").mean()),
        "median_final_position_error_m": float(np.median(f("final_position_error_m"))),
        "mean_final_speed_mps": float(f("final_speed_mps").mean()),
        "rms_tracking_error_m": float(np.sqrt(np.mean(rms**2))),
        "mean_episode_length_s": float(f("episode_length").mean()) * step_dt_s,
    }
