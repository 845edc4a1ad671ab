"""The shield in the loop of the batched torch simulator (the real env, nominal robot).

Adversarial policies (uniform random actions; a controller driving at the fence, the floor,
the ceiling and the obstacles) must cause zero geofence, altitude and obstacle violations;
the backup controller must fly the drone stably; odometry loss must end in a gentle landing.
The full >= 1000-episode runs are in benchmarks/bench_shield.py.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from robot_hrl.safety import Shield, ShieldInput, load_shield_config  # noqa: E402
from robot_hrl.state import RobotState  # noqa: E402
from robot_hrl.world import load_world  # noqa: E402
from sim import safety_eval  # noqa: E402


@pytest.mark.parametrize("policy", ["random", "adversary"])
def test_adversarial_policies_cause_no_violation(policy):
    res = safety_eval.run(policy, episodes=40, episode_s=3.0, seed=7)
    assert res.ticks == 40 * 300
    assert res.fence_violations == 0, res.summary()
    assert res.altitude_violations == 0, res.summary()
    assert res.collisions == 0, res.summary()
    assert res.mode_ticks.get("backup_hold", 0) > 0  # the shield was really exercised


SLOW_CORNER = {"motor_time_constant_range_s": (0.1, 0.15), "action_latency_steps_range": (1, 1)}
"""The slow end of the training's randomization: where the backup tuned for 0.05 s motors oscillated."""


@pytest.mark.parametrize("policy, ranges", [("adversary", None), ("random", SLOW_CORNER)], ids=["adversary-full-range", "random-slow-motors"])
def test_randomized_robot_causes_no_violation(policy, ranges):
    """The training's domain randomization (mass, inertia, k_f, motor lag, disturbances, latency):
    the shield, designed for the slowest motor and a step of latency, still keeps every episode
    inside the fence, the altitude band and clear of the boxes."""
    res = safety_eval.run(policy, episodes=30, episode_s=3.0, seed=3, randomize=True, randomization=ranges)
    assert res.violations == 0, res.summary()
    assert res.mode_ticks.get("backup_hold", 0) > 0


def test_without_the_shield_the_adversary_does_violate():
    """The check is not vacuous: the same episodes without the shield break the constraints."""
    res = safety_eval.run("adversary", episodes=40, episode_s=3.0, seed=7, shielded=False)
    assert res.violations > 0


SLOWEST_MOTORS = {
    "mass_scale_range": (1.0, 1.0), "inertia_scale_range": (1.0, 1.0), "thrust_coefficient_scale_range": (1.0, 1.0),
    "torque_coefficient_scale_range": (1.0, 1.0), "max_disturbance_force_n": 0.0, "max_disturbance_torque_nm": 0.0,
    "motor_time_constant_range_s": (0.15, 0.15), "action_latency_steps_range": (1, 1),
}
"""The nominal robot with the slowest motors of the training's range and a step of latency."""


def _sim(n, seed=0, ranges=None):
    world = load_world(safety_eval.DEFAULT_WORLD)
    cfg = safety_eval.eval_env_cfg(10.0, ranges is not None, ranges)
    env = safety_eval.make_env("crazyflie-goto", n, device="cpu", cfg=cfg, seed=seed)
    cfg = load_shield_config()
    shields = [Shield(cfg, env.robot, world, 1.0) for _ in range(n)]
    return world, env, shields


def _state(env, i, stamp):
    return RobotState(
        env.position_w[i].double().numpy(), env.quat_wxyz[i].double().numpy(), env.linear_velocity_w[i].double().numpy(),
        env.angular_velocity_b[i].double().numpy(), stamp,
    )


@pytest.mark.parametrize("ranges", [None, SLOWEST_MOTORS], ids=["nominal", "slowest-motors-and-latency"])
def test_backup_controller_flies_the_drone_stably(ranges):
    """A NaN policy: the backup alone recovers from tilted, moving, spinning starts and holds,
    with the nominal 0.05 s motors and with 0.15 s ones plus a step of latency (no oscillation)."""
    torch.set_num_threads(1)
    n = 16
    rng = np.random.default_rng(1)
    world, env, shields = _sim(n, ranges=ranges)
    starts = np.tile([2.0, 2.3, 1.0], (n, 1))
    safety_eval.set_states(env, torch.arange(n), starts, rng, math.radians(30), 1.0, 3.0)
    nan = np.full(4, np.nan)
    for k in range(300 if ranges is None else 450):  # 3 x slower motors settle a little later
        now = k * 0.01
        out = np.array([shields[i].step(ShieldInput(now, _state(env, i, now), nan, subgoal_w=starts[i])).actions for i in range(n)])
        env.step(torch.tensor(out, dtype=torch.float32))
    targets = np.array([s._hold_target for s in shields])
    err = np.linalg.norm(env.position_w.numpy() - targets, axis=1)
    speed = env.linear_velocity_w.norm(dim=1).numpy()
    q = env.quat_wxyz.numpy()
    tilt = np.degrees(np.arccos(np.clip(1 - 2 * (q[:, 1] ** 2 + q[:, 2] ** 2), -1, 1)))
    assert err.max() < 0.02 and speed.max() < 0.02 and tilt.max() < 1.0
    assert all(s.mode == "backup_hold" for s in shields)


def test_odometry_loss_in_flight_holds_then_lands_gently():
    """Odometry freezes at 0.5 s: hold on dead reckoning, land, motors off; no violation."""
    torch.set_num_threads(1)
    n = 8
    rng = np.random.default_rng(2)
    world, env, shields = _sim(n)
    starts = safety_eval.sample_free_starts(world, n, rng, clearance_m=0.6)
    safety_eval.set_states(env, torch.arange(n), starts, rng, 0.0, 0.0, 0.0)
    checker = safety_eval.ViolationChecker(world, env.robot, env)
    landing = torch.zeros(n, dtype=torch.bool)
    frozen = [None] * n
    max_touchdown_speed = np.zeros(n)
    modes_seen = [set() for _ in range(n)]
    nan = np.full(4, np.nan)  # the backup flies before the loss too (a stand-in for a policy)
    for k in range(int(9.0 / 0.01)):
        now = k * 0.01
        out = np.empty((n, 4))
        for i in range(n):
            if now < 0.5:
                frozen[i] = _state(env, i, now)
            o = shields[i].step(ShieldInput(now, frozen[i], nan, subgoal_w=starts[i]))
            out[i] = o.actions
            modes_seen[i].add((o.mode, o.reason))
            if o.mode in ("backup_land", "motors_off"):
                landing[i] = True
        prev_vz = env.linear_velocity_w[:, 2].numpy().copy()
        env.step(torch.tensor(out, dtype=torch.float32))
        on_floor = env.position_w[:, 2].numpy() <= env.contact_height
        max_touchdown_speed = np.where(on_floor, np.maximum(max_touchdown_speed, -prev_vz), max_touchdown_speed)
        fence, altitude, collision = checker(env.position_w, landing)
        assert not (fence | altitude | collision).any()
    for i in range(n):
        assert ("backup_hold", "watchdog.stale_state") in modes_seen[i]
        assert ("backup_land", "watchdog.stale_state") in modes_seen[i]
        assert shields[i].mode == "motors_off"
    assert (env.position_w[:, 2].numpy() <= env.contact_height + 0.01).all()  # on the floor
    assert max_touchdown_speed.max() < 1.0  # landed, not dropped (1 m/s ~ a 5 cm fall)


def test_bench_shield_prints_the_declared_airframe_row(capsys):
    """`benchmarks/bench_shield.py --only trained --declare-mass hover-thrust` prints the trained policy shielded with
    the airframe declared, after the unshielded and the undeclared rows (benchmarks/README.md's #4 row)."""
    import re
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    try:
        import bench_shield
    finally:
        sys.path.pop(0)
    assert bench_shield.main(["--only", "trained", "--episodes", "4", "--episode-s", "2", "--declare-mass", "hover-thrust"]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if line.strip().startswith("trained shield=")]
    assert len(rows) == 3, rows
    assert "shield=off" in rows[0] and "shield=on" in rows[1] and rows[2].endswith("(airframe declared: hover-thrust)")
    assert all(re.search(r"intervention_rate=\d\.\d{4}", row) for row in rows)
