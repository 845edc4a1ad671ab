"""Closed-loop safety evaluation: the shield in the loop of the batched torch simulator.

Policies (``--policy``):

* ``random``: uniform random normalized actions every tick;
* ``adversary``: an aggressive cascaded controller that drives at a point outside the fence,
  below the floor, above the ceiling, or inside an obstacle (chosen per episode), with tilt up
  to 60 deg and full thrust;
* ``pd``: a nominal, well-behaved cascaded PD controller flying to goals within the subgoal
  radius (the shield's intervention rate in nominal flight);
* ``trained``: the shipped ONNX policy (robot_hrl.runtime), with and without the shield.

Each environment carries its own single-sample :class:`robot_hrl.safety.Shield` (the runtime
code, called in a Python loop). Violations are judged on the simulator's true state against
the world file: the collision sphere (``collision_radius_m``) leaving the fence (x, y) or
crossing the ceiling; floor contact outside a commanded landing; the sphere touching an
obstacle or landmark box. The required figure is zero of each.

    python sim/safety_eval.py --policy random --episodes 1000
    python sim/safety_eval.py --policy adversary --episodes 1000 --world models/worlds/demo.yaml
"""

from __future__ import annotations

import argparse
import math
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from robot_hrl.contract import command_to_normalized
from robot_hrl.safety import Shield, ShieldInput, load_shield_config
from robot_hrl.robots.quadrotor.shield import BackupController
from robot_hrl.state import RobotState
from robot_hrl.world import load_world
from sim.envs.math_utils import quat_from_rotvec, quat_mul, quat_rotate_inverse, rotation_matrix_from_quat
from sim.tasks import make_env

REPO_ROOT = Path(__file__).resolve().parents[1]
DEFAULT_WORLD = REPO_ROOT / "models" / "worlds" / "demo.yaml"


def eval_env_cfg(episode_length_s: float, randomize: bool = False, randomization: dict | None = None) -> dict:
    """The env configuration of the evaluation: no auto-termination (violations are counted,
    not ended), long episodes, nominal robot unless ``randomize``, curriculum at its end.
    ``randomization``: overrides of the training's randomization ranges (with ``randomize``),
    e.g. ``{"motor_time_constant_range_s": (0.1, 0.15), "action_latency_steps_range": (1, 1)}``."""
    rand = {"enabled": bool(randomize)}
    if randomize:
        # judged over the whole motor-lag range (0.02-0.15 s), not the training's slow part of it
        rand["motor_time_constant_train_range_s"] = None
        rand.update(randomization or {})
    return {
        "command": {"episode_length_s": episode_length_s + 10.0},
        "terminations": {"terminate_on_ground_contact": False, "out_of_bounds_distance_m": 1e6, "ceiling_m": 1e6},
        "randomization": rand,
        "curriculum": {"enabled": False},
    }


@dataclass
class EvalResult:
    policy: str
    shielded: bool
    episodes: int = 0
    ticks: int = 0
    fence_violations: int = 0
    """Ticks (summed over episodes) on which the collision sphere was outside the fence (x, y)."""
    altitude_violations: int = 0
    """Ticks with floor contact outside a commanded landing, or the sphere above the fence top."""
    collisions: int = 0
    """Ticks with the collision sphere touching a declared obstacle or landmark box."""
    episodes_with_violation: int = 0
    intervention_ticks: int = 0
    mode_ticks: dict = field(default_factory=dict)
    by_constraint: dict = field(default_factory=dict)
    """Intervention records per 'unit.constraint'."""
    successes: int = 0
    shield_seconds: float = 0.0
    """Wall time spent inside Shield.step (all environments)."""
    episode_success: list = field(default_factory=list)
    """Per episode (trained and pd policies): ended at the goal, slow, without a violation."""
    episode_violated: list = field(default_factory=list)
    """Per episode: any violation (ground truth)."""

    @property
    def violations(self) -> int:
        return self.fence_violations + self.altitude_violations + self.collisions

    def summary(self) -> str:
        rate = self.intervention_ticks / max(self.ticks, 1)
        s = (
            f"{self.policy:>9} shield={'on ' if self.shielded else 'off'} episodes={self.episodes} ticks={self.ticks} "
            f"fence_violations={self.fence_violations} altitude_violations={self.altitude_violations} "
            f"collisions={self.collisions} episodes_with_violation={self.episodes_with_violation} "
            f"intervention_rate={rate:.4f}"
        )
        if self.policy in ("trained", "pd"):
            s += f" success_rate={self.successes / max(self.episodes, 1):.4f}"
        if self.mode_ticks:
            s += " modes=" + ",".join(f"{k}:{v}" for k, v in self.mode_ticks.items())
        if self.by_constraint:
            top = sorted(self.by_constraint.items(), key=lambda kv: -kv[1])[:6]
            s += " records=" + ",".join(f"{k}:{v}" for k, v in top)
        if self.shielded and self.ticks:
            s += f" shield_us_per_tick={self.shield_seconds / self.ticks * 1e6:.1f}"
        return s


# ---- spawning ---------------------------------------------------------------------------------
def sample_free_starts(world, n: int, rng: np.random.Generator, clearance_m: float, z_range=(0.6, 1.5)) -> np.ndarray:
    """n positions inside the fence (``clearance_m`` in), away from every box by ``clearance_m``."""
    lo = np.asarray(world.bounds.min) + clearance_m
    hi = np.asarray(world.bounds.max) - clearance_m
    out = []
    while len(out) < n:
        p = rng.uniform(lo, hi)
        p[2] = rng.uniform(*z_range)
        if not world.collides(p, margin=clearance_m):
            out.append(p)
    return np.asarray(out)


def set_states(env, ids: torch.Tensor, pos: np.ndarray, rng: np.random.Generator, max_tilt_rad: float, max_speed: float, max_rate: float):
    """Put environments ``ids`` at ``pos`` with a random small attitude, velocity and body rate."""
    n = len(ids)
    dev = env.device
    f32 = dict(dtype=torch.float32, device=dev)
    yaw = torch.tensor(rng.uniform(-math.pi, math.pi, n), **f32)
    q_yaw = torch.stack((torch.cos(yaw / 2), torch.zeros_like(yaw), torch.zeros_like(yaw), torch.sin(yaw / 2)), dim=-1)
    axis = rng.uniform(0, 2 * math.pi, n)
    tilt = rng.uniform(0, max_tilt_rad, n)
    rotvec = torch.tensor(np.stack((np.cos(axis) * tilt, np.sin(axis) * tilt, np.zeros(n)), -1), **f32)
    env.quat_wxyz[ids] = quat_mul(quat_from_rotvec(rotvec), q_yaw)
    env.position_w[ids] = torch.tensor(pos, **f32)
    d = rng.normal(size=(n, 3))
    d /= np.linalg.norm(d, axis=1, keepdims=True)
    env.linear_velocity_w[ids] = torch.tensor(d * rng.uniform(0, max_speed, (n, 1)), **f32)
    env.angular_velocity_b[ids] = torch.tensor(rng.uniform(-max_rate, max_rate, (n, 3)), **f32)
    env.rotor_rpm[ids] = float(env.robot.hover_rpm)
    env.last_action[ids] = 0.0
    env.action_buffer[ids] = 0.0
    env.episode_length_buf[ids] = 0


# ---- adversarial policies ---------------------------------------------------------------------
def adversary_targets(world, n: int, rng: np.random.Generator) -> np.ndarray:
    """Per episode: a point 1-3 m beyond a fence wall, below the floor, above the ceiling, or an
    obstacle's centre."""
    lo, hi = np.asarray(world.bounds.min), np.asarray(world.bounds.max)
    boxes = world.solid_boxes()
    out = np.empty((n, 3))
    for i in range(n):
        kind = rng.integers(0, 4)
        p = rng.uniform(lo, hi)
        if kind == 0:  # a wall
            axis = rng.integers(0, 2)
            p[axis] = (hi[axis] + rng.uniform(1, 3)) if rng.random() < 0.5 else (lo[axis] - rng.uniform(1, 3))
        elif kind == 1:  # the floor
            p[2] = lo[2] - rng.uniform(1, 3)
        elif kind == 2:  # the ceiling
            p[2] = hi[2] + rng.uniform(1, 3)
        else:  # an obstacle
            box = boxes[rng.integers(0, len(boxes))]
            p = np.asarray(box.center) + rng.uniform(-0.5, 0.5, 3) * np.asarray(box.size)
        out[i] = p
    return out


def adversary_actions(env, targets: torch.Tensor, max_tilt_rad: float = math.radians(60.0)) -> torch.Tensor:
    """Aggressive cascaded controller toward ``targets`` (batched torch): normalized actions."""
    robot = env.robot
    pos, vel, q, w = env.position_w, env.linear_velocity_w, env.quat_wxyz, env.angular_velocity_b
    g = env.cfg.physics.gravity_mps2
    a = 6.0 * (targets - pos) - 1.0 * vel
    a[:, 2] = a[:, 2].clamp(-g, 2.0 * g)
    ah = torch.linalg.vector_norm(a[:, :2], dim=-1, keepdim=True)
    ah_max = (a[:, 2:3] + g).clamp(min=0.5) * math.tan(max_tilt_rad)
    a[:, :2] = a[:, :2] * torch.clamp(ah_max / ah.clamp(min=1e-6), max=1.0)
    f = robot.mass_kg * (a + torch.tensor([0.0, 0.0, g], device=env.device))
    r = rotation_matrix_from_quat(q)
    zb = r[:, :, 2]
    thrust = (f * zb).sum(-1).clamp(min=0.0)
    zd = f / torch.linalg.vector_norm(f, dim=-1, keepdim=True).clamp(min=1e-9)
    err_w = torch.linalg.cross(zb, zd, dim=-1)
    err_b = quat_rotate_inverse(q, err_w)
    tau = torch.tensor(robot.inertia_kgm2, dtype=torch.float32, device=env.device) * (400.0 * err_b - 30.0 * w)
    wrench = torch.cat((thrust.unsqueeze(-1), tau), dim=-1)
    return command_to_normalized(env.contract.action, wrench)


# ---- violation checks on the true state -------------------------------------------------------
class ViolationChecker:
    def __init__(self, world, robot, env):
        dev = env.device
        r = robot.collision_radius_m
        self.r = r
        self.lo = torch.tensor(world.bounds.min, dtype=torch.float32, device=dev)
        self.hi = torch.tensor(world.bounds.max, dtype=torch.float32, device=dev)
        boxes = world.solid_boxes()
        self.box_lo = torch.tensor(np.array([b.lower - r for b in boxes]), dtype=torch.float32, device=dev).reshape(-1, 3)
        self.box_hi = torch.tensor(np.array([b.upper + r for b in boxes]), dtype=torch.float32, device=dev).reshape(-1, 3)
        self.contact_z = env.contact_height

    def __call__(self, pos: torch.Tensor, landing: torch.Tensor):
        """(fence, altitude, collision) bool tensors (N,)."""
        fence = ((pos[:, :2] - self.r) < self.lo[:2]).any(-1) | ((pos[:, :2] + self.r) > self.hi[:2]).any(-1)
        altitude = ((pos[:, 2] <= self.contact_z) & ~landing) | ((pos[:, 2] + self.r) > self.hi[2])
        p = pos.unsqueeze(1)
        inside = ((p >= self.box_lo) & (p <= self.box_hi)).all(-1)  # (N, boxes): inside the inflated box
        if inside.shape[1]:
            # the sphere touches the box when the distance to the (un-inflated) box is below r
            lo, hi = self.box_lo + self.r, self.box_hi - self.r
            d = torch.clamp(torch.maximum(lo - p, p - hi), min=0.0)
            collision = (torch.linalg.vector_norm(d, dim=-1) < self.r).any(-1)
        else:
            collision = torch.zeros_like(fence)
        return fence, altitude, collision


class ViolationTrace:
    """The ground truth of the ticks before each episode's first violation, printed when it happens: the airframe's
    randomized parameters, then per tick the true position, velocity, tilt, body rates, the applied command
    (normalized), the shield's mode and reason and the battery voltage it was fed."""

    def __init__(self, env, ticks: int):
        from collections import deque

        self.ticks = deque(maxlen=ticks)

    def record(self, k: int, env, applied, modes, volts) -> None:
        r = rotation_matrix_from_quat(env.quat_wxyz)
        tilt = torch.rad2deg(torch.arccos(r[:, 2, 2].clamp(-1.0, 1.0)))
        self.ticks.append((k, env.position_w.double().numpy().copy(), env.linear_velocity_w.double().numpy().copy(),
                           tilt.double().numpy(), env.angular_velocity_b.double().numpy().copy(), np.asarray(applied).copy(),
                           modes, volts))

    def report_new(self, k: int, fence, altitude, collision, violated, env) -> None:
        new = (fence | altitude | collision) & ~violated
        for i in torch.nonzero(new).flatten().tolist():
            kinds = [n for n, m in (("fence", fence), ("altitude", altitude), ("collision", collision)) if bool(m[i])]
            params = {name: [round(float(x), 4) for x in v[i].reshape(-1).tolist()] for name, v in env.params.items()}
            print(f"--- episode {i}: first violation ({', '.join(kinds)}) at tick {k}; parameters {params}")
            for tk, pos, vel, tilt, w, applied, modes, volts in self.ticks:
                mode = "" if modes is None else modes[i]
                volt = "" if volts is None else f" V={volts[i]:.3f}"
                print(f"  t={tk:4d} p=({pos[i, 0]:+.3f},{pos[i, 1]:+.3f},{pos[i, 2]:+.3f}) v=({vel[i, 0]:+.2f},{vel[i, 1]:+.2f},"
                      f"{vel[i, 2]:+.2f}) tilt={tilt[i]:5.1f} w=({w[i, 0]:+.1f},{w[i, 1]:+.1f},{w[i, 2]:+.1f}) "
                      f"a=({applied[i, 0]:+.2f},{applied[i, 1]:+.2f},{applied[i, 2]:+.2f},{applied[i, 3]:+.2f}){volt} {mode}")


# ---- the loop ---------------------------------------------------------------------------------
def run(
    policy: str = "random",
    episodes: int = 1000,
    episode_s: float = 5.0,
    world_path: str | Path = DEFAULT_WORLD,
    shield_config: str | Path | None = None,
    shielded: bool = True,
    seed: int = 0,
    randomize: bool = False,
    subgoal_radius_m: float = 1.0,
    progress: bool = False,
    onnx_path: str | Path | None = None,
    randomization: dict | None = None,
    battery: bool = True,
    declare_mass: str | bool = False,
    trace_ticks: int = 0,
    observer=None,
    warm_s: float = 0.0,
) -> EvalResult:
    """Run ``episodes`` episodes at once (one batched env) and count violations.
    ``randomization``: overrides of the randomization ranges when ``randomize`` (see :func:`eval_env_cfg`).
    ``battery``: each shield gets its env's measured battery voltage every tick (the actuator chain's
    ``battery_voltage_v`` row: the filtered voltage under load, as the firmware measures it); False: none (the
    stopping model's worst case). ``declare_mass``: each shield's config declares its airframe
    (``stopping.airframe_mass_kg``): ``"mass"`` (or True) its true mass, as weighed, with ``stopping.thrust_fraction``
    and ``thrust_fraction_max`` covering the rotors' spread only (the randomization's
    ``thrust_coefficient_scale_range``); ``"hover-thrust"`` the mass its rotors carry at a command, i.e. the collective
    thrust it hovers at over g (true mass over its thrust scale, as a hover log gives it), with both fractions 1.
    ``observer``: called every tick before the physics step as ``observer(k, env, outputs, shields)`` (``outputs``:
    each episode's ShieldOutput, None without the shield): per-tick analyses (benchmarks/bench_shield_cost.py).
    ``warm_s`` (trained and pd policies): before the timed episode the policy holds its start for this long with the
    same shield in the loop (the spawn's tilt, speed and rates settle, the hover-thrust estimate converges, as after a
    take-off the shield saw); then the goal is set and the episode's ``episode_s`` are counted. Violations are judged on
    the warm-up too; interventions, modes, successes and the observer only on the timed part."""
    torch.set_num_threads(1)  # the shield loop is single-threaded; idle torch workers would only spin
    world = load_world(world_path)
    rng = np.random.default_rng(seed)
    torch.manual_seed(seed)
    env = make_env("crazyflie-goto", episodes, device="cpu", cfg=eval_env_cfg(episode_s, randomize, randomization), seed=seed)
    robot = env.robot
    config = load_shield_config(shield_config) if shield_config is not None else load_shield_config()
    if shielded and declare_mass:
        masses = (robot.mass_kg * env.params["mass_scale"][:, 0]).double().numpy()
        if declare_mass == "hover-thrust":  # the thrust it hovers at, over g: the mass its rotors really carry
            masses = masses / env.params["thrust_coefficient_scale"][:, 0].double().numpy()
            spread = (1.0, 1.0)
        else:
            spread = tuple(float(x) for x in env.cfg.randomization.thrust_coefficient_scale_range)  # rotors are not weighed
        shields = [Shield(declared_mass_config(config, float(m), spread), robot, world, subgoal_radius_m) for m in masses]
    else:
        shields = [Shield(config, robot, world, subgoal_radius_m) for _ in range(episodes)] if shielded else None
    battery_rows = env.layout.rows("battery_voltage_v") if battery and any(n == "battery_voltage_v" for n, _, _ in env.layout.state) else None
    ids = torch.arange(episodes)
    starts = sample_free_starts(world, episodes, rng, clearance_m=0.6)
    set_states(env, ids, starts, rng, max_tilt_rad=math.radians(10), max_speed=0.3, max_rate=0.5)
    env.goal_w[:] = torch.tensor(starts, dtype=torch.float32)
    onnx = None
    if not (math.isfinite(warm_s) and warm_s >= 0.0):
        raise ValueError(f"warm_s must be a finite number of seconds >= 0, got {warm_s!r}")
    if warm_s > 0.0 and policy not in ("trained", "pd"):
        raise ValueError(f"warm_s is for the trained and pd policies (a hover before the episode), not {policy!r}")
    warm_steps = int(round(warm_s / env.step_dt)) if warm_s > 0.0 else 0
    if policy == "adversary":
        targets = torch.tensor(adversary_targets(world, episodes, rng), dtype=torch.float32)
    elif policy == "trained":
        onnx = _load_onnx(onnx_path, robot)
        env.goal_w[:] = torch.tensor(sample_goals(robot, world, starts, rng, subgoal_radius_m), dtype=torch.float32)
        applied = np.zeros((episodes, 4))
    elif policy == "pd":
        env.goal_w[:] = torch.tensor(sample_goals(robot, world, starts, rng, subgoal_radius_m), dtype=torch.float32)
        pd_shield = Shield(config, robot, world, subgoal_radius_m)
        pd = [BackupController(pd_shield.model, config) for _ in range(episodes)]  # one per episode: each keeps its own state
    elif policy != "random":
        raise ValueError(f"unknown policy {policy!r}; choose random, adversary, pd or trained")
    goals_w = env.goal_w.clone()
    if warm_steps:  # the warm-up holds the start; the goals are set when the timed episode begins
        env.goal_w[:] = torch.tensor(starts, dtype=torch.float32)
    checker = ViolationChecker(world, robot, env)
    trace = ViolationTrace(env, trace_ticks) if trace_ticks > 0 else None
    result = EvalResult(policy=policy, shielded=shielded, episodes=episodes)
    violated = torch.zeros(episodes, dtype=torch.bool)
    steps = int(round(episode_s / env.step_dt))
    dt = env.step_dt
    landing = torch.zeros(episodes, dtype=torch.bool)
    mode_ticks: dict[str, int] = {}
    by_constraint = result.by_constraint
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=warm_steps + steps, desc=f"{policy} shield={'on' if shielded else 'off'}", unit="tick")
    for kk in range(warm_steps + steps):
        now = kk * dt
        k = kk - warm_steps  # the timed episode's tick (negative during the warm-up)
        timed = k >= 0
        if k == 0 and warm_steps:
            env.goal_w[:] = goals_w
        if policy == "random":
            actions = torch.rand((episodes, 4)) * 2.0 - 1.0
        elif policy == "adversary":
            actions = adversary_actions(env, targets)
        elif policy == "pd":
            actions = torch.tensor(_pd_actions(pd, env), dtype=torch.float32)
        else:
            actions = torch.tensor(_trained_actions(onnx, env, applied), dtype=torch.float32)
        if shielded:
            pos = env.position_w.double().numpy()
            quat = env.quat_wxyz.double().numpy()
            vel = env.linear_velocity_w.double().numpy()
            omega = env.angular_velocity_b.double().numpy()
            goal = env.goal_w.double().numpy()
            act = actions.double().numpy()
            volts = measured_battery_v(env, battery_rows)
            out = np.empty((episodes, 4))
            modes_now = [""] * episodes
            outs = [None] * episodes if observer is not None else None
            t0 = time.perf_counter()
            for i in range(episodes):
                state = RobotState(pos[i], quat[i], vel[i], omega[i], now)
                o = shields[i].step(ShieldInput(now, state, act[i], subgoal_w=goal[i], subgoal_stamp_s=now,
                                                battery_v=None if volts is None else volts[i]))
                out[i] = o.actions
                if outs is not None:
                    outs[i] = o
                if o.interventions and timed:
                    result.intervention_ticks += 1
                    for rec in o.interventions:
                        key = f"{rec.unit}.{rec.constraint}"
                        by_constraint[key] = by_constraint.get(key, 0) + 1
                if timed:
                    mode_ticks[o.mode] = mode_ticks.get(o.mode, 0) + 1
                modes_now[i] = o.mode if o.mode == "policy" else f"{o.mode}({o.reason})"
                if o.mode in ("backup_land", "motors_off"):
                    landing[i] = True
            result.shield_seconds += time.perf_counter() - t0
            actions = torch.tensor(out, dtype=torch.float32)
            if observer is not None and timed:
                observer(k, env, outs, shields)
        elif observer is not None and timed:
            observer(k, env, None, None)
        if policy == "trained":
            applied = actions.double().numpy()
        env.step(actions)
        fence, altitude, collision = checker(env.position_w, landing)
        result.fence_violations += int(fence.sum())
        result.altitude_violations += int(altitude.sum())
        result.collisions += int(collision.sum())
        if trace is not None:
            trace.record(k, env, out if shielded else actions.double().numpy(), modes_now if shielded else None,
                         volts if shielded else None)
            trace.report_new(k, fence, altitude, collision, violated, env)
        violated |= fence | altitude | collision
        if timed:
            result.ticks += episodes
        if bar is not None:
            bar.update(1)
    if bar is not None:
        bar.close()
    if policy in ("trained", "pd"):
        err = torch.linalg.vector_norm(env.position_w - env.goal_w, dim=-1)
        speed = torch.linalg.vector_norm(env.linear_velocity_w, dim=-1)
        ok = (err < env.cfg.success.position_tolerance_m) & (speed < env.cfg.success.speed_tolerance_mps) & ~violated
        result.successes = int(ok.sum())
        result.episode_success = ok.tolist()
    result.episode_violated = violated.tolist()
    result.episodes_with_violation = int(violated.sum())
    result.mode_ticks = mode_ticks
    return result


def measured_battery_v(env, rows) -> list[float] | None:
    """Each env's battery voltage as the firmware measures it (the actuator chain's ``battery_voltage_v`` row: the
    filtered voltage under load), or None without that row."""
    if rows is None:
        return None
    return env._state[rows][0].double().tolist()


def declared_mass_config(config, mass_kg: float, thrust_spread: tuple[float, float]):
    """``config`` with the airframe's measured mass declared (``stopping.airframe_mass_kg``) and
    ``stopping.thrust_fraction`` / ``thrust_fraction_max`` left to cover the rotors' spread only (``thrust_spread``: the
    weakest and strongest rotors' force over the fit's)."""
    stopping = config.stopping.model_copy(update={"airframe_mass_kg": mass_kg, "thrust_fraction": thrust_spread[0],
                                                  "thrust_fraction_max": thrust_spread[1]})
    return config.model_copy(update={"stopping": stopping})


def _load_onnx(onnx_path, robot):
    from robot_hrl.runtime.policy import OnnxPolicy

    path = Path(onnx_path) if onnx_path is not None else REPO_ROOT / "models" / "crazyflie_goto.onnx"
    return OnnxPolicy(path, robot=robot, provider="cpu")


def sample_goals(robot, world, starts: np.ndarray, rng: np.random.Generator, subgoal_radius_m: float) -> np.ndarray:
    """One goal per episode, uniform in the subgoal-radius ball around its start, in free space
    (already satisfying the subgoal shield, so shielded and unshielded runs fly to the same goals)."""
    probe = Shield(load_shield_config(), robot, world, subgoal_radius_m)
    goals = np.empty_like(starts)
    for i, p in enumerate(starts):
        while True:
            d = rng.normal(size=3)
            g = p + d / np.linalg.norm(d) * subgoal_radius_m * rng.random() ** (1 / 3)
            if probe.subgoal.satisfied(list(g), list(p)):
                goals[i] = g
                break
    return goals


def _pd_actions(controllers: list, env) -> np.ndarray:
    """A nominal, well-behaved controller (the backup's cascaded PD, flying to the goal): the
    reference for the shield's intervention rate in nominal flight."""
    from robot_hrl.safety.frames import rotation_from_quat

    pos = env.position_w.double().numpy()
    vel = env.linear_velocity_w.double().numpy()
    quat = env.quat_wxyz.double().numpy()
    omega = env.angular_velocity_b.double().numpy()
    goal = env.goal_w.double().numpy()
    out = np.empty((len(pos), 4))
    for i in range(len(pos)):
        m = controllers[i].m
        w = controllers[i].command(pos[i].tolist(), vel[i].tolist(), rotation_from_quat(*quat[i].tolist()), omega[i].tolist(), goal[i].tolist())
        out[i] = [m.wrench_to_action(j, w[j]) for j in range(4)]
    return out


def _trained_actions(onnx, env, applied: np.ndarray) -> np.ndarray:
    """Batched inference on the contract's observation (last action = the applied action)."""
    from robot_hrl.contract import compute_observation

    inputs = {
        "position_w": env.position_w.double().numpy(),
        "quat_wxyz": env.quat_wxyz.double().numpy(),
        "linear_velocity_w": env.linear_velocity_w.double().numpy(),
        "angular_velocity_b": env.angular_velocity_b.double().numpy(),
        "subgoal_w": env.goal_w.double().numpy(),
        "last_action": applied,
        # the position error's integral: the env's state row (advanced by every step with the go-to default)
        "position_error_integral": env.position_error_integral.double().numpy(),
    }
    obs = compute_observation(onnx.contract.observations, inputs)
    return np.asarray(onnx.infer(obs), dtype=np.float64)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        description="Closed-loop safety evaluation of the shield in the torch simulator: adversarial policies "
        "(uniform random actions; a controller driving at the fence, the floor, the ceiling and the obstacles), "
        "batched episodes, violations counted on the true state against the world file."
    )
    parser.add_argument(
        "--policy", choices=("random", "adversary", "pd", "trained"), default="random",
        help="the policy the shield guards (pd: a nominal cascaded PD flying to goals; trained: models/crazyflie_goto.onnx, or --onnx)",
    )
    parser.add_argument("--onnx", default=None, help="ONNX policy for --policy trained")
    parser.add_argument("--episodes", type=int, default=1000, help="batched episodes (one env each)")
    parser.add_argument("--episode-s", type=float, default=5.0, help="episode length, s")
    parser.add_argument("--world", default=str(DEFAULT_WORLD), help="world file (fence and obstacles)")
    parser.add_argument("--config", default=None, help="shield YAML (default: the robot's own, robot_hrl/robots/crazyflie_2x/shield.yaml)")
    parser.add_argument("--no-shield", action="store_true", help="run without the shield (to see what it prevents)")
    parser.add_argument("--randomize", action="store_true", help="domain randomization on (mass, inertia, motors, disturbances, latency)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-battery", action="store_true",
                        help="feed the shield no battery voltage (it brakes with the actuator chain's worst case); by default "
                        "each shield gets its env's measured voltage every tick, as the skill node gets /battery")
    parser.add_argument("--declare-mass", nargs="?", const="mass", default=None, choices=("mass", "hover-thrust"),
                        help="each shield's config declares its airframe (stopping.airframe_mass_kg): 'mass' (the default) "
                        "its true mass, as weighed, the thrust fractions covering the rotors' spread only; 'hover-thrust' "
                        "the thrust it hovers at over g (mass over rotor scale, from a hover log), fractions 1")
    parser.add_argument("--warm-s", type=float, default=0.0, metavar="S",
                        help="trained and pd policies: hold the start for S seconds with the shield in the loop before the timed "
                        "episode (the spawn settles and the hover-thrust estimate converges, as after a take-off the shield saw); "
                        "interventions are counted on the timed part only, violations on both. 0 (default): a fresh shield at "
                        "the spawn, the start of a flight")
    parser.add_argument("--trace", type=int, default=0, metavar="TICKS",
                        help="print the ground truth of the TICKS ticks before each episode's first violation (and its "
                        "randomized parameters): to find why the shield let it happen")
    args = parser.parse_args(argv)
    res = run(
        args.policy, args.episodes, args.episode_s, args.world, args.config, not args.no_shield, args.seed, args.randomize,
        progress=True, onnx_path=args.onnx, battery=not args.no_battery, declare_mass=args.declare_mass or False,
        trace_ticks=args.trace, warm_s=args.warm_s,
    )
    print(res.summary())
    return 0 if (res.violations == 0 or args.no_shield) else 1


if __name__ == "__main__":
    raise SystemExit(main())
