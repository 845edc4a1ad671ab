"""The stopping box against the backup controller's real stop (the batched torch simulator's chain: ground truth).

The box (robot_hrl/robots/quadrotor/shield/model.py, ``stopping_box``) says: the judged command acts for the
reaction time, then the robot brakes a speed ``v`` over ``v^2 / (2 b)``, ``b`` the model's braking deceleration.
What really stops the robot is the backup (robot_hrl/robots/quadrotor/shield/backup.py): a position loop into a
velocity loop, whose linear part stops a slow motion over about ``0.135 v`` (kp 2 /s, kv 5 /s: its step response),
more than ``v^2 / (2 b)`` below a few tenths of a metre per second. Here the robot is put near level at a random
vertical and horizontal velocity on airframes drawn from the training's randomization (mass, inertia, rotors, motor
lag, latency, battery), the judged command flies one tick, then the backup holds the point where it took over (the
shield's ``safe_position`` far from any bound); the farthest the robot gets along each axis before that axis's
motion has stopped is compared with the box computed at the start (docs/safety.md, "The backup's stop").
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, Phase, example, given, settings
from hypothesis import strategies as st

from robot_hrl.contract import command_to_normalized
from robot_hrl.robots.crazyflie_2x import actuators
from robot_hrl.robots.quadrotor.shield import BackupController
from robot_hrl.robots.quadrotor.shield.model import backup_linear_stop_s, stopping_box
from robot_hrl.safety.frames import rotation_from_quat
from sim.safety_eval import eval_env_cfg
from sim.tasks import make_env
from sim_step_helpers import backup_wrenches
from tests.test_stop_reaction import AIRFRAME_DRAWS, R_RANGE, RAND, ROBOT, V_RANGE, _quat_tilted, _set_airframes, _shield

START_Z_M = 20.0
WINDOW_S = 2.0
TOLERANCE_M = 0.002
"""The simulator's integration against the box's closed form (a 10 ms tick): what the comparison forgives."""

states = st.fixed_dictionaries({
    **AIRFRAME_DRAWS,
    "tilt_deg": st.just(0.0), "azimuth": st.just(0.0),
    "vz": st.floats(-1.5, 1.5),              # vertical velocity, m/s (negative: descending) ...
    "vh": st.floats(0.0, 2.0),               # ... or a horizontal speed, m/s
    "heading": st.floats(-math.pi, math.pi),  # ... in this direction
    "cmd": st.floats(0.8, 1.2),              # the judged command's thrust (and the motors'), the airframe's weights
    "estimate": st.booleans(),
    "vertical": st.booleans(),
}).map(lambda d: {**d, "vh": 0.0} if d["vertical"] else {**d, "vz": 0.0, "vh": max(d["vh"], 1e-3), "cmd": 1.0})
"""Level, moving either vertically or horizontally (braking both at once is the coupling below), on any airframe of the
randomization, with or without a hover-thrust estimate: without one the backup feeds the model's mass forward and a
heavy, weak airframe sinks while held, a light, strong one climbs (the box counts both: ``backup_sag_down_m``,
``backup_sag_up_m``)."""

NOMINAL = {"mass": 1.0, "kf": 1.0, "inertia": 1.0, "tau": 0.05, "latency": 0, "v_oc": 4.0, "r": 0.03, "tilt_deg": 0.0,
           "azimuth": 0.0, "vz": -0.15, "vh": 0.0, "heading": 0.0, "cmd": 1.0, "estimate": False}
"""Level at hover thrust, a slow descent: where the box's ``v^2 / 2b`` is smallest against the backup's linear stop."""


def fly(draws):
    """Per draw: (the farthest travel along -z, +z, x, y before that motion stopped; the box's extents along them)."""
    n = len(draws)
    env = make_env("crazyflie-goto", n, device="cpu", cfg=eval_env_cfg(5.0, True), seed=0)
    _set_airframes(env, draws)
    weight = np.array([ROBOT.weight_n * d["mass"] for d in draws])
    kf = np.array([ROBOT.thrust_coefficient_n_per_rpm2 * d["kf"] for d in draws])
    quats = [_quat_tilted(math.radians(d["tilt_deg"]), d["azimuth"]) for d in draws]
    vel0 = np.array([[d["vh"] * math.cos(d["heading"]), d["vh"] * math.sin(d["heading"]), d["vz"]] for d in draws])
    env.position_w[:] = torch.tensor([[0.0, 0.0, START_Z_M]] * n)
    env.quat_wxyz[:] = torch.tensor(quats)
    env.linear_velocity_w[:] = torch.tensor(vel0, dtype=torch.float32)
    env.angular_velocity_b[:] = 0.0
    # the command: a fraction of the airframe's weight, along its body z; the motors settled at it
    cmd_n = np.array([d["cmd"] for d in draws]) * weight
    env.rotor_rpm[:] = torch.tensor(np.sqrt(cmd_n / (4 * kf)), dtype=torch.float32).unsqueeze(-1).expand(n, 4)
    rows = env.layout.rows("battery_voltage_v")
    env._state[rows] = torch.tensor([[float(actuators.loaded_voltage_v(t, d["v_oc"], d["r"])) for t, d in zip(cmd_n, draws)]],
                                    dtype=torch.float32)
    cmd = torch.tensor([[t, 0.0, 0.0, 0.0] for t in cmd_n], dtype=torch.float32)
    judged = command_to_normalized(env.contract.action, cmd)
    env.last_action[:] = judged
    for k in range(env.action_buffer.shape[1]):
        env.action_buffer[:, k] = judged
    shields = [_shield(w / d["kf"] if d["estimate"] else None) for w, d in zip(weight, draws)]
    models = [s.model for s in shields]
    backups = [BackupController(m, s.config) for m, s in zip(models, shields)]
    measured = env._state[rows][0].double().tolist()
    p0 = np.array([0.0, 0.0, START_Z_M])
    box = np.zeros((n, 4))  # extents along -z, +z, sign(vx) x, sign(vy) y
    for i, m in enumerate(models):
        m.set_battery_voltage(measured[i])
        x0, x1, y0, y1, z0, z1, _ = stopping_box(m, p0.tolist(), vel0[i].tolist(), rotation_from_quat(*quats[i]),
                                                  [0.0, 0.0, 0.0], float(cmd_n[i]), float(cmd_n[i]))
        box[i] = (p0[2] - z0, z1 - p0[2], x1 - p0[0] if vel0[i, 0] >= 0 else p0[0] - x0,
                  y1 - p0[1] if vel0[i, 1] >= 0 else p0[1] - y0)
    sign = np.stack([-np.ones(n), np.ones(n), np.where(vel0[:, 0] >= 0, 1.0, -1.0), np.where(vel0[:, 1] >= 0, 1.0, -1.0)], 1)
    axis = [2, 2, 0, 1]
    travel = np.zeros((n, 4))
    stopped = np.zeros((n, 4), dtype=bool)
    # an axis's motion toward its side has stopped once its velocity along that side is no longer positive
    stopped[:, 0] = vel0[:, 2] > 0.0
    stopped[:, 1] = vel0[:, 2] < 0.0
    target = p0.tolist()
    for k in range(int(round(WINDOW_S / env.step_dt))):
        if k == 0:
            wrench = cmd
        else:
            wrench = backup_wrenches(env, rows, models, backups, target)
        env.step(command_to_normalized(env.contract.action, wrench))
        pos = env.position_w.double().numpy()
        vel = env.linear_velocity_w.double().numpy()
        along = (pos[:, axis] - p0[axis]) * sign
        travel = np.where(stopped, travel, np.maximum(travel, along))
        stopped |= vel[:, axis] * sign <= 0.0
    return travel, box, stopped


def shortfalls(draws):
    """(travel - box, m: positive where the box is short) per draw and side (-z, +z, x, y), and which stopped."""
    travel, box, stopped = fly(draws)
    return travel - box, stopped


# no shrinking: each example is a batched flight of 16 airframes (a failure is printed as drawn)
@settings(max_examples=4, deadline=None, database=None, derandomize=True, phases=[Phase.explicit, Phase.generate],
          suppress_health_check=[HealthCheck.too_slow])
@given(draws=st.lists(states, min_size=16, max_size=16))
@example(draws=[{**NOMINAL, "vz": vz, "tau": tau, "latency": lat}
                for vz in (-0.05, -0.1, 0.1, 0.2) for tau, lat in ((0.02, 0), (0.15, 1))]
         + [{**NOMINAL, "vz": 0.0, "vh": vh, "heading": h, "tau": 0.15, "latency": 1}
            for vh, h in ((0.05, 0.0), (0.1, 0.5), (0.2, 1.0), (0.4, 2.0))]
         + [{**NOMINAL, "vz": vz, "mass": 36 / 31.5, "kf": 0.9, "estimate": True, "tau": 0.15, "latency": 1,
             "v_oc": V_RANGE[0], "r": R_RANGE[1], "cmd": c} for vz, c in ((-0.1, 1.0), (-0.3, 1.2), (-0.5, 0.8), (0.3, 0.8))])
def test_the_backup_stops_inside_the_box(draws):
    short, _ = shortfalls(draws)
    for i, d in enumerate(draws):
        # the axes it moves along (a drift's brake costs height: the coupling below)
        for j, side in ((0, "down"), (1, "up")) if d["vh"] == 0.0 else ((2, "x"), (3, "y")):
            assert short[i, j] <= TOLERANCE_M, (side, d, float(short[i, j]))


def test_the_linear_stop_grows_with_every_lag():
    """The derivation's shape: slower motors, more latency, the attitude loop's lag: a longer linear stop; without any
    lag the loop's own (k_p 2, k_v 5: zeta 0.79) peak, about 0.135 s."""
    assert 0.13 < backup_linear_stop_s(2.0, 5.0, (), 0.0) < 0.14
    taus = [backup_linear_stop_s(2.0, 5.0, (t,), 0.02) for t in (0.02, 0.05, 0.1, 0.15)]
    assert all(a < b for a, b in zip(taus, taus[1:]))
    assert backup_linear_stop_s(2.0, 5.0, (0.15,), 0.02) > backup_linear_stop_s(2.0, 5.0, (0.15,), 0.01)
    assert backup_linear_stop_s(2.0, 5.0, (0.15, 0.15), 0.02) > taus[-1]
    m = _shield(None).model
    m.set_battery_voltage(3.9)
    assert m.backup_stop_vertical_s == backup_linear_stop_s(2.0, 5.0, (0.15,), 0.02)
    assert 0.0 < m.backup_stop_vertical_s2 == backup_linear_stop_s(2.0, 5.0, (0.15,), 0.02, 0.0, 1.0)  # the command's push
    # a slow motion: the linear stop is the longer one; a fast one: the full brake
    assert m.stopping_distance(0.1, 0.0, 0.1, m.brake_up, 0.0, m.backup_stop_vertical_s) == 0.1 * m.backup_stop_vertical_s
    fast = m.stopping_distance(1.5, 0.0, 1.5, m.brake_up, 0.0, m.backup_stop_vertical_s)
    assert math.isclose(fast, 1.5 * 1.5 / (2 * m.brake_up))


def test_braking_a_drift_keeps_the_height_before_the_estimate():
    """Braking a 1.2 m/s drift with 0.14 s motors sinks the nominal airframe 3.5-4.8 cm (the thrust tilts before the
    slow rotors spool up); before the hover-thrust estimate converges the box's floor counts the hold's sag on the
    weakest airframe (28 cm), which covers it."""
    short, _ = shortfalls([{**NOMINAL, "vz": 0.0, "vh": 1.2, "tau": 0.14, "latency": 1}])
    assert short[0, 0] <= TOLERANCE_M, float(short[0, 0])


@pytest.mark.xfail(strict=True, reason="not covered: the backup's horizontal brake tilts the thrust before the slow rotors "
                   "spool up, and a heavy, weak airframe sinks below the box's floor even with its converged estimate's "
                   "sag counted (docs/safety.md, \"The backup's stop\")")
def test_braking_a_drift_keeps_the_height():
    short, _ = shortfalls([{**NOMINAL, "vz": 0.0, "vh": 1.5, "tau": 0.15, "latency": 1, "estimate": True,
                            "mass": 36 / 31.5, "kf": 0.9}])
    assert short[0, 0] <= TOLERANCE_M, float(short[0, 0])


def test_the_hold_sags_inside_the_box_before_the_estimate():
    """Before the hover-thrust estimate converges the backup feeds the model's mass forward: a light, strong airframe
    (27 g, rotors 1.1) climbs while held, a heavy, weak one (36 g, rotors 0.9) sinks, on the emptiest, most resistive
    battery of the randomization too, where the backup's thrust saturates a little above its weight (issue #16: the
    adversary's descent onto a landmark with the obstacles' thrust clamp on). The box counts the hold's sag
    (``backup_hold_sag_m``) on both sides."""
    light = {**NOMINAL, "mass": 27 / 31.5, "kf": 1.1}
    heavy = {**NOMINAL, "mass": 36 / 31.5, "kf": 0.9}
    empty = {"v_oc": V_RANGE[0], "r": R_RANGE[1]}
    draws = ([{**light, "vz": vz, "tau": tau, "latency": lat} for vz in (0.0, 0.1) for tau, lat in ((0.05, 0), (0.15, 1))]
             + [{**heavy, "vz": vz, "tau": tau, "latency": lat, **bat} for vz in (0.0, -0.1) for tau, lat in ((0.05, 0), (0.15, 1))
                for bat in ({}, empty)])
    short, stopped = shortfalls(draws)
    for i, d in enumerate(draws):
        j = 1 if d["mass"] < 1.0 else 0
        assert stopped[i, j], d
        assert short[i, j] <= TOLERANCE_M, (d, float(short[i, j]))


def test_the_sag_follows_the_airframe_range():
    """The sag is the backup's vertical loop on the airframe the model allows: none on the exact airframe, more the
    further the thrust ratio is from 1, more when the backup's thrust saturates (an empty battery), a few cm once a
    converged estimate narrows the range."""
    from robot_hrl.robots.quadrotor.shield.model import backup_hold_sag_m

    args = (2.0, 5.0, 2.0, 2.0, 0.15, 0.02, 9.80665)
    assert backup_hold_sag_m(*args, 1.0) == 0.0
    down = [backup_hold_sag_m(*args, r) for r in (0.95, 0.9, 0.85, 0.7875)]
    assert all(0.0 < a < b for a, b in zip(down, down[1:]))
    assert 0.25 < down[-1] < 0.3
    assert backup_hold_sag_m(*args, 0.7875, -7.0, 0.5) > down[-1]  # the thrust saturates just above the weight
    m = _shield(None).model
    m.set_battery_voltage(3.9)
    assert m.thrust_ratio_range() == (m.weak_fraction_cfg, m.strong_fraction_cfg)
    assert m.backup_sag_down_m > 0.25 and m.backup_sag_up_m > 0.15
    converged = _shield(ROBOT.weight_n).model
    converged.set_battery_voltage(3.9)
    lo, hi = converged.thrust_ratio_range()
    assert 0.85 < lo < 1.0 < hi < 1.15
    assert 0.0 < converged.backup_sag_down_m < 0.12 and 0.0 < converged.backup_sag_up_m < 0.12
