"""The descent's reaction time against the batched torch simulator's chain (ground truth).

The stopping box's floor (robot_hrl/robots/quadrotor/shield/model.py, ``stopping_box`` and
``descent_reaction_time``) says how low the robot gets if the command judged now flies its tick and the backup
then stops the descent: the tick and the latency, levelling the body from its worst predicted tilt at the airframe's
attitude response, then the rotors' spool-up with the slowest motor of the randomization, then the descent brake.
Here the robot is put in a tilted, rolling descent on airframes drawn from the training's randomization (mass,
inertia, rotors, motor lag, latency, battery), the command flies one tick, the backup holds; the true height never
goes below the box's floor computed at the start by more than the altitude unit's margin (docs/safety.md, "The
descent's reaction time"). The adversary's case of issue #16 (a near-nominal airframe with 0.14 s motors, thrust cut
and rolled to 33 deg, fell 1.16 m onto the floor with the estimate's brake) is among the examples.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from hypothesis import HealthCheck, Phase, example, given, settings
from hypothesis import strategies as st

from robot_hrl.contract import command_to_normalized
from robot_hrl.robots import get_robot
from robot_hrl.robots.crazyflie_2x import actuators
from robot_hrl.robots.quadrotor.shield import BackupController
from robot_hrl.robots.quadrotor.shield.model import descent_reaction_time, stopping_box, thrust_axes
from robot_hrl.safety import Shield, load_shield_config
from robot_hrl.safety.frames import rotation_from_quat
from robot_hrl.world import load_world
from sim.envs.goto_env_cfg import GotoEnvCfg
from sim.safety_eval import DEFAULT_WORLD, eval_env_cfg
from sim.tasks import make_env
from sim_step_helpers import backup_wrenches

ROBOT = get_robot("crazyflie_2x")
RAND = GotoEnvCfg().randomization
V_RANGE = actuators.OPEN_CIRCUIT_RANGE_V
R_RANGE = actuators.RESISTANCE_RANGE_OHM
START_Z_M = 20.0
"""High above the floor: no ground effect, nothing to hit; the judged quantity is the lowest height."""
WINDOW_S = 2.5


def _shield(hover_thrust_n: float | None) -> Shield:
    s = Shield(load_shield_config(), ROBOT, load_world(DEFAULT_WORLD), 1.0)
    if hover_thrust_n is not None:  # the stopping model on the estimate's bounds (use_in_stopping_model), as converged
        margin = 3 * 0.004 + 0.016 * hover_thrust_n  # bound_sigma x converged_sigma_n + the 1.6 % allowance
        s.model.disturbance_accel_mps2 = s.config.hover_thrust.max_disturbance_accel_mps2
        s.model.set_hover_thrust(hover_thrust_n, hover_thrust_n - margin, hover_thrust_n + margin)
    return s


def _quat_tilted(tilt_rad: float, azimuth_rad: float) -> tuple[float, float, float, float]:
    """(w, x, y, z): the body tilted by ``tilt_rad`` about the horizontal axis at ``azimuth_rad``."""
    h = 0.5 * tilt_rad
    return (math.cos(h), math.sin(h) * math.cos(azimuth_rad), math.sin(h) * math.sin(azimuth_rad), 0.0)


AIRFRAME_DRAWS = {
    "mass": st.floats(*RAND.mass_scale_range), "kf": st.floats(*RAND.thrust_coefficient_scale_range),
    "inertia": st.floats(*RAND.inertia_scale_range), "tau": st.floats(*RAND.motor_time_constant_range_s),
    "latency": st.integers(*RAND.action_latency_steps_range), "v_oc": st.floats(*V_RANGE), "r": st.floats(*R_RANGE),
}
"""An airframe of the training's randomization (the keys :func:`_set_airframes` reads), with its battery: the strategies
the backup's stop and spin tests draw from (tests/test_backup_stop.py, tests/test_backup_spin.py)."""

states = st.fixed_dictionaries({
    **AIRFRAME_DRAWS,
    "tilt_deg": st.floats(0.0, 60.0), "azimuth": st.floats(-math.pi, math.pi),
    "rate": st.floats(-6.0, 6.0),       # rad/s about the tilt axis (positive: tilting further)
    "speed": st.floats(-0.5, 1.5),      # descent speed, m/s (negative: climbing)
    "cmd": st.floats(0.0, 1.2),         # the judged command's thrust, nominal weights
    "est": st.floats(0.1, 1.5),         # the rotors' thrust now, nominal weights (the shield's estimate of it)
    "estimate": st.booleans(),          # the stopping model on a converged hover-thrust estimate of this airframe
}).map(lambda d: d if d["estimate"] else {**d, "mass": min(d["mass"], d["kf"])})
"""Without an estimate the reaction phase counts on the nominal airframe's response to the command (as before this
derivation: the worst case's weak fraction on it would hold every hover of an unknown airframe), so those draws keep
at least the nominal thrust-to-weight; with one, any airframe of the randomization."""
EPISODE_523 = {"mass": 32.4 / 31.5, "kf": 1.02, "inertia": 1.0, "tau": 0.139, "latency": 1, "v_oc": 3.9, "r": 0.03,
               "tilt_deg": 33.0, "azimuth": 0.0, "rate": 5.0, "speed": 0.2, "cmd": 0.0, "est": 0.4, "estimate": True}
"""Issue #16's case (benchmarks/README.md, "the hover-thrust estimate"): thrust cut, rolled to 33 deg and rolling on."""
CLIMBING = {"tau": 0.02129582450403119, "inertia": 1.08196990590511, "speed": -0.38340442902007155, "est": 0.40844318207870767,
            "azimuth": 0.0, "tilt_deg": 10.837710406781454, "mass": 0.9800973211718664, "rate": -0.834300739547233,
            "estimate": False, "cmd": 1.072492668292841, "r": 0.051465467474179585, "v_oc": 4.083925277093001,
            "kf": 1.0241075847299845, "latency": 0}
"""A random draw (found by a helper's run, 2026-11-24) that climbs at 0.38 m/s on 1.07 x the weight and never comes below
its start within the window: it never met the test's "stopped" condition, which the test took for "still descending"."""
SLOW_HEAVY = {"mass": RAND.mass_scale_range[1], "kf": RAND.thrust_coefficient_scale_range[0],
              "inertia": RAND.inertia_scale_range[1], "tau": RAND.motor_time_constant_range_s[1], "latency": 1,
              "v_oc": V_RANGE[0], "r": R_RANGE[1], "tilt_deg": 55.0, "azimuth": 1.0, "rate": 6.0, "speed": 1.0,
              "cmd": 0.0, "est": 0.1, "estimate": False}


def _set_airframes(env, draws) -> None:
    params = env.params
    for name, key in (("mass_scale", "mass"), ("thrust_coefficient_scale", "kf"), ("motor_time_constant_s", "tau"),
                      ("battery_open_circuit_v", "v_oc"), ("battery_resistance_ohm", "r")):
        params[name][:, 0] = torch.tensor([d[key] for d in draws], dtype=torch.float32)
    params["inertia_scale"][:] = torch.tensor([[d["inertia"]] * 3 for d in draws], dtype=torch.float32)
    params["torque_coefficient_scale"][:] = 1.0
    params["disturbance_force_w"][:] = 0.0
    params["disturbance_torque_b"][:] = 0.0
    params["action_latency_steps"][:] = torch.tensor([d["latency"] for d in draws])


def _fly(draws):
    """(lowest true height over the window, the box's floor at the start, the descent's reaction time) per draw."""
    n = len(draws)
    env = make_env("crazyflie-goto", n, device="cpu", cfg=eval_env_cfg(5.0, True), seed=0)
    _set_airframes(env, draws)
    weight = np.array([ROBOT.weight_n * d["mass"] for d in draws])
    kf = np.array([ROBOT.thrust_coefficient_n_per_rpm2 * d["kf"] for d in draws])
    quats = [_quat_tilted(math.radians(d["tilt_deg"]), d["azimuth"]) for d in draws]
    env.position_w[:] = torch.tensor([[0.0, 0.0, START_Z_M]] * n)
    env.quat_wxyz[:] = torch.tensor(quats)
    env.linear_velocity_w[:] = torch.tensor([[0.0, 0.0, -d["speed"]] for d in draws])
    # the rate about the body's tilt axis (its body x/y components: the tilt axis is horizontal and lies in the body's
    # x-y plane for a tilt without yaw)
    env.angular_velocity_b[:] = torch.tensor([[d["rate"] * math.cos(d["azimuth"]), d["rate"] * math.sin(d["azimuth"]), 0.0]
                                              for d in draws])
    est_n = np.array([d["est"] * ROBOT.weight_n for d in draws])
    env.rotor_rpm[:] = torch.tensor(np.sqrt(est_n / (4 * kf)), dtype=torch.float32).unsqueeze(-1).expand(n, 4)
    rows = env.layout.rows("battery_voltage_v")
    env._state[rows] = torch.tensor([[float(actuators.loaded_voltage_v(t, d["v_oc"], d["r"])) for t, d in zip(est_n, draws)]],
                                    dtype=torch.float32)
    cmd = torch.tensor([[d["cmd"] * ROBOT.weight_n, 0.0, 0.0, 0.0] for d in draws], dtype=torch.float32)
    judged = command_to_normalized(env.contract.action, cmd)
    env.last_action[:] = judged
    for k in range(env.action_buffer.shape[1]):  # the command flew before this tick too (a step of latency)
        env.action_buffer[:, k] = judged
    shields = [_shield(w / kf_s * 1.0 if d["estimate"] else None)
               for w, kf_s, d in zip(weight, (d["kf"] for d in draws), draws)]
    models = [s.model for s in shields]
    backups = [BackupController(m, s.config) for m, s in zip(models, shields)]
    measured = env._state[rows][0].double().tolist()
    floors, reactions = [], []
    for i, (m, d) in enumerate(zip(models, draws)):
        m.set_battery_voltage(measured[i])
        p, v = [0.0, 0.0, START_Z_M], [0.0, 0.0, -d["speed"]]
        r = rotation_from_quat(*quats[i])
        w = env.angular_velocity_b[i].double().tolist()
        c, dz = thrust_axes(m, r, w)
        floors.append(stopping_box(m, p, v, r, w, float(cmd[i, 0]), float(est_n[i]))[4])
        reactions.append(descent_reaction_time(m, min(c[2], dz[2]), w, min(float(cmd[i, 0]), float(est_n[i]))))
    lowest = np.full(n, np.inf)
    stopped = np.zeros(n, dtype=bool)
    level_cos = np.array([m.level_cos for m in models])
    vz_prev = env.linear_velocity_w[:, 2].double().numpy().copy()
    target = [0.0, 0.0, START_Z_M]  # the shield holds where the backup took over (Shield.safe_position)
    for k in range(int(round(WINDOW_S / env.step_dt))):
        if k == 0:
            wrench = cmd  # the judged command flies its tick
        else:
            wrench = backup_wrenches(env, rows, models, backups, target)
        env.step(command_to_normalized(env.contract.action, wrench))
        lowest = np.where(stopped, lowest, np.minimum(lowest, env.position_w[:, 2].double().numpy()))
        # the stop is over once the robot no longer descends, is level enough to brake and is being lifted: what comes
        # after is the hold's return to its target (an overshoot of the position loop, not the stop the box predicts)
        vz = env.linear_velocity_w[:, 2].double().numpy()
        up_cos = (1.0 - 2.0 * (env.quat_wxyz[:, 1] ** 2 + env.quat_wxyz[:, 2] ** 2)).double().numpy()
        stopped |= (vz >= 0.0) & (vz >= vz_prev) & (up_cos >= level_cos)
        vz_prev = vz.copy()
    return lowest, np.array(floors), np.array(reactions), shields[0].config.altitude.margin_m, stopped


# no shrinking: each example is a batched flight of 16 airframes (a failure is printed as drawn)
@settings(max_examples=5, deadline=None, database=None, derandomize=True, phases=[Phase.explicit, Phase.generate],
          suppress_health_check=[HealthCheck.too_slow])
@given(draws=st.lists(states, min_size=16, max_size=16))
@example(draws=[EPISODE_523, SLOW_HEAVY, {**SLOW_HEAVY, "estimate": True}, {**EPISODE_523, "tau": 0.15, "tilt_deg": 50.0},
                {**SLOW_HEAVY, "tilt_deg": 25.0, "rate": 0.0}, {**SLOW_HEAVY, "tilt_deg": 0.0, "rate": 0.0, "speed": 1.5},
                {**EPISODE_523, "speed": 1.5, "est": 0.1}, {**SLOW_HEAVY, "rate": -6.0}] * 2)
@example(draws=[CLIMBING] * 16)
def test_the_box_floor_holds_the_simulated_stop_from_any_tilt(draws):
    lowest, floors, reactions, margin, stopped = _fly(draws)
    for i, d in enumerate(draws):
        assert lowest[i] >= floors[i] - margin, (d, float(lowest[i]), float(floors[i]), float(reactions[i]))
        # still descending at the end (the weakest airframe on the emptiest battery barely hovers at the backup's 95 %
        # of its thrust): the box said so too, its floor lies further below
        # (a draw that climbs and never comes below its start height has no descent to stop: CLIMBING)
        assert stopped[i] or lowest[i] >= START_Z_M or floors[i] < lowest[i] - 1.0, (d, float(lowest[i]), float(floors[i]))


def test_the_reaction_time_grows_with_the_tilt_and_the_spool_up():
    """The derivation's shape: within the brake's tilt only the tick, the latency and the spool-up (1 to 1.5 motor
    time constants); beyond it the levelling adds at least the torque's own lag; less thrust now, a longer spool-up."""
    m = _shield(None).model
    m.set_battery_voltage(3.9)
    level, tm = [0.0, 0.0, 0.0], m.design_motor_tau
    full = m.backup_max_thrust_fraction * m.max_total_thrust
    t_rest = descent_reaction_time(m, 1.0, level, 0.0)
    t_full = descent_reaction_time(m, 1.0, level, full)
    assert math.isclose(t_rest, m.descent_dead_time_s + 1.5 * tm) and math.isclose(t_full, m.descent_dead_time_s + tm)
    assert descent_reaction_time(m, 1.0, level, 0.5 * full) < t_rest
    inside = math.cos(m.level_tilt_rad * 0.99)
    assert descent_reaction_time(m, inside, level, 0.0) == t_rest
    beyond = [descent_reaction_time(m, math.cos(math.radians(t)), level, 0.0) for t in (30.0, 40.0, 50.0, 60.0)]
    # the levelling adds at least the torque's own lag (the motor's) on top of the tick and the latency, counted once
    assert beyond[0] >= t_rest - m.descent_dead_time_s + m.tilt_lag and all(a < b for a, b in zip(beyond, beyond[1:]))
    # the levelling's clock starts now: 30 deg at rest, level level_time_s after now, then the spool-up from rest
    from robot_hrl.robots.quadrotor.shield.model import level_time_s
    c30 = math.cos(math.radians(30.0))
    assert math.isclose(beyond[0], level_time_s(m, c30, level) + 1.5 * tm)
    # by hand (the shipped YAML: T_m 0.15 s, tick 0.01 s, latency 0.01 s): level and at rest 0.01 + 0.01 + 1.5 x 0.15 =
    # 0.245 s; from 40 deg at rest, no rate: the torque lag 0.15 + 0.01 + 0.01 = 0.17 s, the tilt beyond the brake's
    # taken out at alpha, then the spool-up from rest 0.225 s, and nothing else (was 0.02 s more)
    assert math.isclose(t_rest, 0.245, abs_tol=1e-12)
    assert math.isclose(m.tilt_lag, 0.17, abs_tol=1e-12)
    delta = math.radians(40.0) - m.level_tilt_rad
    assert math.isclose(beyond[1], 0.17 + 2.0 * math.sqrt(delta / m.tilt_alpha) + 0.225, abs_tol=1e-12)
    assert level_time_s(m, c30, level) >= m.tilt_lag > m.descent_dead_time_s
    assert descent_reaction_time(m, math.cos(math.radians(40.0)), [3.0, 0.0, 0.0], 0.0) > beyond[1]
    assert 0.0 < m.level_tilt_rad <= math.radians(m_cfg_tilt()) + 1e-12


def m_cfg_tilt() -> float:
    return load_shield_config().backup.max_tilt_deg
