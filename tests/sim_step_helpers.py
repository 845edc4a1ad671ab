"""Rollouts of the crazyflie-goto env on each step backend (eager, compiled graph, native C), and the
comparison the step-backend tests share (tests/test_sim_compiled.py, tests/test_sim_native.py); the real backup
controllers flying the env's robots, one tick (:func:`backup_wrenches`: tests/test_stop_reaction.py,
tests/test_backup_stop.py, tests/test_battery_braking.py)."""

from __future__ import annotations

import math

import torch

from sim.envs import GotoEnv, GotoEnvCfg
from sim.envs.backends import CompiledStep

PATHS = ("eager", "compile", "native")


def rollout(path: str, n: int = 8, steps: int = 40, uncompiled_graphs: bool = False, randomize: bool = True) -> list[dict]:
    """``steps`` env steps of random actions (NaN and inf among them) on one step backend, every output cloned.

    Every backend draws from the same counter-based streams, so all three see the same numbers.
    Episodes of 15 steps: resets inside the rollout. ``uncompiled_graphs``: the compile backend runs the
    function it compiles uncompiled (the resets drawn for every environment and kept with ``where``,
    where the eager backend draws them for the finished environments only).
    """
    assert path in PATHS, path
    cfg = GotoEnvCfg()
    cfg.physics.compile = path == "compile"
    cfg.physics.native = path == "native"
    cfg.randomization.enabled = randomize
    cfg.command.episode_length_s = 0.15  # time-outs every 15 steps: resets inside the rollout
    env = GotoEnv(cfg, num_envs=n, seed=3)
    if uncompiled_graphs:  # the fused function runs eagerly: the same code, no compilation
        env.backend = CompiledStep(env._fused, env.device, compile=False)
    gen = torch.Generator().manual_seed(0)
    out = []
    for i in range(steps):
        a = (torch.rand(n, 4, generator=gen) * 2 - 1) * 1.5
        if i == 5:
            a[0] = float("nan")
            a[1, 0] = float("inf")
            a[2, 1] = -float("inf")
        obs, rew, dones, extras = env.step(a)
        out.append({"policy": obs["policy"].clone(), "critic": obs["critic"].clone(), "reward": rew.clone(), "dones": dones.clone(),
                    **{f"end/{k}": v.clone() for k, v in extras["episode_end"].items()}})
    return out


def assert_same(reference: list[dict], other: list[dict], exact: list[dict] | None = None, tol: float = 1e-5) -> None:
    """``other`` gives ``reference``'s values (to ``tol``), dtypes and layouts, step by step; with ``exact``,
    ``other`` equals it bit for bit (determinism)."""
    assert sum(int(s["dones"].sum()) for s in reference) > 0, "the rollout must exercise resets"
    for i, (e, c) in enumerate(zip(reference, other)):
        for key in e:
            assert e[key].dtype == c[key].dtype and e[key].shape == c[key].shape, (i, key)
            if key in ("policy", "critic"):  # the fused step's are feature-major views (step_core.observation_groups)
                assert c[key].stride() == (1, c[key].shape[0]), (i, key, c[key].stride())
            else:
                assert e[key].is_contiguous() == c[key].is_contiguous(), (i, key)
            assert torch.allclose(e[key].double(), c[key].double(), atol=tol, rtol=tol), (i, key, (e[key].double() - c[key].double()).abs().max())
            if exact is not None:
                assert torch.equal(c[key], exact[i][key]), (i, key)


def reference_reset_draws(env: GotoEnv, n: int, start_scale: float, generator: torch.Generator):
    """The configured reset distributions written plainly with torch.rand/randn/randint on a generator: the
    reference the counter-based draws of ``step_core.reset_draws`` are checked against (the eager step drew
    this way before every backend moved to the counter streams). Returns (state rows of the body, the rotor
    speeds, the battery and the goal (21, n), parameter rows (15, n) in layout order, action latency steps (n,))."""
    from sim.envs.math_utils import quat_from_rotvec, quat_mul

    g, cfg = generator, env.cfg
    cmd, r, robot = cfg.command, cfg.randomization, env.robot

    def rand(*shape):
        return torch.rand(shape, generator=g)

    def uniform(k, lo, hi):
        return lo + (hi - lo) * rand(n, k)

    def random_unit():
        v = torch.randn((n, 3), generator=g)
        return v / torch.linalg.vector_norm(v, dim=-1, keepdim=True).clamp(min=1e-6)

    if r.enabled:
        direction = random_unit()
        tau_lo, tau_hi = r.motor_time_constant_train_range_s or r.motor_time_constant_range_s
        params = {
            "mass_scale": uniform(1, *r.mass_scale_range), "inertia_scale": uniform(3, *r.inertia_scale_range),
            "thrust_coefficient_scale": uniform(1, *r.thrust_coefficient_scale_range),
            "torque_coefficient_scale": uniform(1, *r.torque_coefficient_scale_range),
            "motor_time_constant_s": torch.exp(uniform(1, math.log(tau_lo), math.log(tau_hi))).clamp(tau_lo, tau_hi),
            "battery_open_circuit_v": uniform(1, *r.battery_open_circuit_range_v),
            "battery_resistance_ohm": uniform(1, *r.battery_resistance_range_ohm),
            "disturbance_force_w": direction * uniform(1, 0.0, r.max_disturbance_force_n),
            "disturbance_torque_b": uniform(3, -r.max_disturbance_torque_nm, r.max_disturbance_torque_nm),
        }
        lat_lo, lat_hi = r.action_latency_steps_range
        latency = torch.randint(int(lat_lo), int(lat_hi) + 1, (n,), generator=g)
    else:
        one = torch.ones((n, 1))
        params = {"mass_scale": one, "inertia_scale": torch.ones((n, 3)), "thrust_coefficient_scale": one, "torque_coefficient_scale": one,
                  "motor_time_constant_s": one * robot.motor_time_constant_s, "battery_open_circuit_v": one * 3.8,
                  "battery_resistance_ohm": one * 0.045, "disturbance_force_w": torch.zeros((n, 3)),
                  "disturbance_torque_b": torch.zeros((n, 3))}
        latency = torch.zeros(n, dtype=torch.long)
    pos = torch.empty((n, 3))
    pos[:, :2] = (2.0 * rand(n, 2) - 1.0) * cmd.spawn_xy_half_extent_m
    lo, hi = cmd.spawn_height_range_m
    pos[:, 2] = lo + (hi - lo) * rand(n)
    # attitude: random yaw, then a tilt of random size about a random horizontal axis
    yaw = (2.0 * rand(n) - 1.0) * math.pi
    q_yaw = torch.stack((torch.cos(yaw / 2), torch.zeros_like(yaw), torch.zeros_like(yaw), torch.sin(yaw / 2)), dim=-1)
    axis_angle = 2.0 * math.pi * rand(n)
    tilt = cmd.max_initial_tilt_rad * start_scale * rand(n)
    rotvec = torch.stack((torch.cos(axis_angle), torch.sin(axis_angle), torch.zeros_like(tilt)), dim=-1) * tilt.unsqueeze(-1)
    quat = quat_mul(quat_from_rotvec(rotvec), q_yaw)
    vel = random_unit() * (cmd.max_initial_speed_mps * start_scale * rand(n, 1))
    omega = (2.0 * rand(n, 3) - 1.0) * (cmd.max_initial_body_rate_radps * start_scale)
    radius = cmd.subgoal_radius_m * rand(n, 1).pow(1.0 / 3.0)
    goal = pos + random_unit() * radius
    goal[:, 2] = goal[:, 2].clamp(min=cmd.min_goal_height_m)
    kf = robot.thrust_coefficient_n_per_rpm2 * params["thrust_coefficient_scale"]
    hover = torch.sqrt(robot.mass_kg * params["mass_scale"] * cfg.physics.gravity_mps2 / (4.0 * kf))
    # the battery sagged under the hover load (robot_hrl/robots/crazyflie_2x/actuators.py loaded_voltage_v)
    weight = robot.mass_kg * params["mass_scale"] * cfg.physics.gravity_mps2
    battery = params["battery_open_circuit_v"] - params["battery_resistance_ohm"] * (0.24 + (4.44 - 0.24) / (57.9e-3 * 9.80665) * weight)
    state = torch.cat((pos.t(), quat.t(), vel.t(), omega.t(), hover.t().expand(4, n), battery.t(), goal.t()))
    rows = torch.cat([params[name].t() for name, _, _ in env.layout.params])
    return state, rows, latency


def backup_wrenches(env, rows, models, backups, target) -> torch.Tensor:
    """One tick of the real backup controllers flying the batched simulator's robots ``rows``: each airframe's stopping
    model takes its row's simulated battery voltage, each backup commands from the row's ground-truth state toward
    ``target``; the wrenches (collective thrust N, body torques N m), one row per robot."""
    from robot_hrl.safety.frames import rotation_from_quat

    volts = env._state[rows][0].double().tolist()
    pos, vel = env.position_w.double().tolist(), env.linear_velocity_w.double().tolist()
    quat, rates = env.quat_wxyz.double().tolist(), env.angular_velocity_b.double().tolist()
    out = []
    for i, (model, backup) in enumerate(zip(models, backups)):
        model.set_battery_voltage(volts[i])
        out.append(backup.command(pos[i], vel[i], rotation_from_quat(*quat[i]), rates[i], target))
    return torch.tensor(out, dtype=torch.float32)
