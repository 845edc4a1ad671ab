"""The hover-thrust estimate (issue #16): the shield learns the airframe it flies.

- Flown in the batched torch simulator's chain (the training's firmware chain, its mass, rotor, battery, motor-lag,
  latency and disturbance spread drawn by hypothesis), the shield in the loop: the estimate converges within
  ``CONVERGE_S`` of flight to within ``CONVERGED_ERROR`` of the airframe's true hover thrust (the simulator's
  parameters: ``(m g - F_z) / k_f scale``), and on every tick its bounds (the estimate -+ its margin) hold the truth.
- Once converged the backup's thrust feed-forward is the estimate: a heavy, weak airframe and a light, strong one held
  by the backup stay at their hold height (the sag and the creep of the nominal-mass feed-forward are gone).
- Faults at a random moment (a non-finite state, a velocity jump, the odometry stopping, the battery reading gone, a
  takeover by the backup for a fault) send the stopping model back to the worst case at once and start the estimate
  again; ``shield/hover_thrust`` on /diagnostics says so.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from robot_hrl.contract import command_to_normalized
from robot_hrl.robots import get_robot
from robot_hrl.robots.crazyflie_2x import actuators
from robot_hrl.robots.quadrotor.shield import BackupController
from robot_hrl.safety import Shield, ShieldInput, load_shield_config
from robot_hrl.safety.frames import rotation_from_quat
from robot_hrl.safety.hover_thrust import HoverThrustFilter
from robot_hrl.state import RobotState
from robot_hrl.world import load_world
from sim.envs.goto_env_cfg import GotoEnvCfg
from sim.safety_eval import DEFAULT_WORLD, eval_env_cfg, measured_battery_v
from sim.tasks import make_env

ROBOT = get_robot("crazyflie_2x")
RAND = GotoEnvCfg().randomization
G = 9.80665
CONVERGE_S = 2.0
"""The estimate converges within this much flight (a climb and descent of +-0.1 m every 4 s, the backup flying)."""
CONVERGED_ERROR = 0.01
"""... to within this fraction of the true hover thrust."""


def _config(use_in_stopping_model: bool = True):
    cfg = load_shield_config()
    ht = cfg.hover_thrust.model_copy(update={"use_in_stopping_model": use_in_stopping_model})
    return cfg.model_copy(update={"hover_thrust": ht})


def _shield(cfg=None) -> Shield:
    return Shield(cfg or _config(), ROBOT, load_world(DEFAULT_WORLD), 1.0)


airframes = st.fixed_dictionaries({
    "mass": st.floats(*RAND.mass_scale_range), "kf": st.floats(*RAND.thrust_coefficient_scale_range),
    "tau": st.floats(*RAND.motor_time_constant_range_s), "v_oc": st.floats(3.55, actuators.OPEN_CIRCUIT_RANGE_V[1]),  # above the battery unit's hold (a low-battery hold
    # is a takeover: it restarts the estimate, tested below)
    "r": st.floats(*actuators.RESISTANCE_RANGE_OHM), "latency": st.integers(*RAND.action_latency_steps_range),
    "fz": st.floats(-RAND.max_disturbance_force_n, RAND.max_disturbance_force_n),
})


def _fly(draws, seconds: float, policy, cfg=None, start_z: float = 1.0):
    """Fly ``draws`` (one airframe each) in the batched simulator with a shield each; ``policy(k, pos, vel, quat, w,
    shields) -> normalized actions (n, 4)``. Returns (shields, truth hover thrusts, per-tick log of
    (estimate, low, high, converged) arrays, heights)."""
    n = len(draws)
    env = make_env("crazyflie-goto", n, device="cpu", cfg=eval_env_cfg(seconds + 1.0, True), seed=0)
    p = env.params
    for name, key in (("mass_scale", "mass"), ("thrust_coefficient_scale", "kf"), ("motor_time_constant_s", "tau"),
                      ("battery_open_circuit_v", "v_oc"), ("battery_resistance_ohm", "r")):
        p[name][:, 0] = torch.tensor([d[key] for d in draws], dtype=torch.float32)
    p["disturbance_force_w"][:] = 0.0
    p["disturbance_force_w"][:, 2] = torch.tensor([d["fz"] for d in draws], dtype=torch.float32)
    p["disturbance_torque_b"][:] = 0.0
    p["action_latency_steps"][:] = torch.tensor([d["latency"] for d in draws])
    env.position_w[:] = torch.tensor([[1.5, 1.5, start_z]] * n)
    env.linear_velocity_w[:] = 0.0
    env.angular_velocity_b[:] = 0.0
    env.quat_wxyz[:] = torch.tensor([[1.0, 0.0, 0.0, 0.0]] * n)
    weight = np.array([ROBOT.weight_n * d["mass"] for d in draws])
    kf = np.array([ROBOT.thrust_coefficient_n_per_rpm2 * d["kf"] for d in draws])
    env.rotor_rpm[:] = torch.tensor(np.sqrt(weight / (4 * kf)), dtype=torch.float32).unsqueeze(-1).expand(n, 4)
    env.last_action[:] = 0.0
    env.action_buffer[:] = 0.0
    truth = np.array([(ROBOT.mass_kg * d["mass"] * G - float(np.float32(d["fz"]))) / float(np.float32(d["kf"])) for d in draws])
    shields = [_shield(cfg) for _ in range(n)]
    rows = env.layout.rows("battery_voltage_v")
    log, heights = [], []
    for k in range(int(round(seconds / env.step_dt))):
        now = k * env.step_dt
        pos, vel = env.position_w.double().numpy(), env.linear_velocity_w.double().numpy()
        quat, w = env.quat_wxyz.double().numpy(), env.angular_velocity_b.double().numpy()
        volts = measured_battery_v(env, rows)
        actions = policy(k, pos, vel, quat, w, shields)
        out = np.empty((n, 4))
        for i, s in enumerate(shields):
            o = s.step(ShieldInput(now, RobotState(pos[i], quat[i], vel[i], w[i], now), actions[i], subgoal_w=pos[i],
                                   subgoal_stamp_s=now, battery_v=volts[i]))
            out[i] = o.actions
        env.step(torch.tensor(out, dtype=torch.float32))
        units = [s.unit("hover_thrust") for s in shields]
        bounds = [u.bounds() for u in units]
        log.append((np.array([u.filter.hover_n for u in units]), np.array([b[0] for b in bounds]),
                    np.array([b[1] for b in bounds]), np.array([u.converged for u in units]),
                    np.array([u.narrowed for u in units])))
        heights.append(env.position_w[:, 2].double().numpy().copy())
    return shields, truth, log, np.array(heights)


def _pd_policy(amplitude_m: float, period_s: float):
    """The backup's cascaded PD (the nominal model's), flying a vertical sine around 1.0 m: what a well-behaved policy does."""
    cfg = load_shield_config()
    ref = _shield(cfg)
    controllers = {}

    def policy(k, pos, vel, quat, w, shields):
        out = np.empty((len(pos), 4))
        for i in range(len(pos)):
            c = controllers.setdefault(i, BackupController(ref.model, cfg))
            z = 1.0 + amplitude_m * math.sin(2 * math.pi * k * 0.01 / period_s)
            cmd = c.command(pos[i].tolist(), vel[i].tolist(), rotation_from_quat(*quat[i].tolist()), w[i].tolist(), [1.5, 1.5, z])
            out[i] = [ref.model.wrench_to_action(j, cmd[j]) for j in range(4)]
        return out

    return policy


@settings(max_examples=2, deadline=None, database=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(draws=st.lists(airframes, min_size=8, max_size=8))
def test_the_estimate_converges_and_its_bounds_hold_the_truth_in_the_simulators_chain(draws):
    corners = [{"mass": RAND.mass_scale_range[1], "kf": RAND.thrust_coefficient_scale_range[0], "tau": 0.15, "v_oc": 3.55,
                "r": 0.06, "latency": 1, "fz": -RAND.max_disturbance_force_n},
               {"mass": RAND.mass_scale_range[0], "kf": RAND.thrust_coefficient_scale_range[1], "tau": 0.02, "v_oc": 4.2,
                "r": 0.03, "latency": 0, "fz": RAND.max_disturbance_force_n}]
    draws = corners + list(draws)
    shields, truth, log, _ = _fly(draws, CONVERGE_S + 1.0, _pd_policy(0.1, 4.0))
    converged_at = [None] * len(draws)
    unit = shields[0].unit("hover_thrust")
    # a steady disturbance can put the truth just outside the airframe range the estimate is kept in (the lightest,
    # strongest airframe pushed up by 0.01 N): there the bound is the range's end, which the configured worst case is
    truth = np.clip(truth, unit.min_n, unit.max_n)
    for k, (est, lo, hi, conv, narrowed) in enumerate(log):
        for i in range(len(draws)):
            if conv[i]:
                converged_at[i] = k * 0.01 if converged_at[i] is None else converged_at[i]
            if conv[i] or narrowed[i]:
                # the bounds the stopping model uses (converged, or converging: narrow_after_samples) never leave the
                # truth out
                assert lo[i] <= truth[i] <= hi[i], (draws[i], k, lo[i], truth[i], hi[i])
    for i, d in enumerate(draws):
        if truth[i] in (unit.min_n, unit.max_n):  # beyond the range: the estimate sits at its end, the worst case
            continue
        assert converged_at[i] is not None and converged_at[i] <= CONVERGE_S, (d, converged_at[i])
        est = log[-1][0][i]
        assert abs(est - truth[i]) <= CONVERGED_ERROR * truth[i], (d, est, truth[i])
        m = shields[i].model
        # the stopping model's airframe lies between the configured worst cases, and the backup flies the estimate
        assert m.weak_fraction_cfg <= m.weak_fraction <= m.strong_fraction <= m.strong_fraction_cfg
        assert m.ff_mass == pytest.approx(est / G)


@pytest.mark.parametrize("airframe", [
    {"mass": 34.3 / 31.5, "kf": 0.93, "tau": 0.045, "v_oc": 3.6, "r": 0.05, "latency": 1, "fz": -0.005},  # seed 1's sinker
    {"mass": 27.0 / 31.5, "kf": 1.1, "tau": 0.14, "v_oc": 4.2, "r": 0.03, "latency": 1, "fz": 0.005},  # the creeper
])
def test_the_backup_holds_a_heavy_weak_and_a_light_strong_airframe_at_its_height(airframe):
    """A well-behaved policy flies for 2.5 s (the estimate converges), then the shield's backup controller (on the
    shield's model, fresh: no integral) holds where the robot is: with the estimate as its feed-forward it neither sinks
    nor creeps (within 3 cm of its hold height all along, from a start at up to 0.1 m/s; with the model's mass the heavy, weak one sank 0.28 m/s onto a landmark in the adversary's evaluation,
    seed 1, and the light, strong one crept into the ceiling)."""
    cfg = load_shield_config()
    pd = _pd_policy(0.0, 4.0)
    switch = 250
    hold = {}

    def policy(k, pos, vel, quat, w, shields):
        if k < switch:
            return pd(k, pos, vel, quat, w, shields)
        m = shields[0].model
        if not hold:
            hold["backup"] = BackupController(m, cfg)
            hold["target"] = pos[0].tolist()
            hold["ff"] = m.ff_mass
        cmd = hold["backup"].command(pos[0].tolist(), vel[0].tolist(), rotation_from_quat(*quat[0].tolist()), w[0].tolist(),
                                     hold["target"])
        return np.array([[m.wrench_to_action(j, cmd[j]) for j in range(4)]])

    shields, truth, log, heights = _fly([airframe], 5.0, policy)
    assert log[switch][3][0], "the estimate had not converged before the hold"
    assert hold["ff"] == pytest.approx(log[switch][0][0] / G, rel=1e-3)  # the backup flies the estimate
    target = hold["target"][2]
    held = heights[switch:, 0]
    assert np.abs(held - target).max() <= 0.03, (held.min(), held.max(), target)


# ---- faults at random moments (the filter's inputs as the shield sees them, a point-mass airframe) ------------------
FAULTS = ("nan_state", "velocity_jump", "odometry_stops", "battery_gone", "battery_nan", "fault_takeover")


def _hover_flight(shield, truth_n: float, ticks: int, start: int = 0, fault=None, fault_at: int = -1, value: float = 0.0):
    """A point mass with hover thrust ``truth_n`` flown by a thrust sine; the shield sees its odometry and a plausible
    battery. ``fault`` from ``fault_at`` on. Yields each tick's output."""
    dt = 0.01
    z, vz = 1.0, 0.0
    q, w = np.array([1.0, 0.0, 0.0, 0.0]), np.zeros(3)
    last_state = None
    for k in range(start, start + ticks):
        now = k * dt
        t_cmd = truth_n * (1.0 + 0.05 * math.sin(k * 0.05))
        state = RobotState(np.array([1.5, 1.5, z]), q, np.array([0.0, 0.0, vz]), w, now)
        battery = 3.9
        if fault is not None and k >= fault_at:
            if fault == "nan_state":
                state = RobotState(np.array([1.5, 1.5, math.nan]), q, np.array([0.0, 0.0, vz]), w, now)
            elif fault == "velocity_jump" and k == fault_at:
                state = RobotState(np.array([1.5, 1.5, z]), q, np.array([0.0, 0.0, vz + value]), w, now)
            elif fault == "odometry_stops":  # the last sample, never renewed
                if last_state is None:
                    last_state = RobotState(np.array([1.5, 1.5, z]), q, np.array([0.0, 0.0, vz]), w, now - dt)
                state = last_state
            elif fault == "battery_gone":
                battery = None
            elif fault == "battery_nan":
                battery = value
        if fault != "odometry_stops" or k < fault_at:
            last_state = state
        action = command_to_normalized(ROBOT.action_spec(), torch.tensor([[t_cmd, 0.0, 0.0, 0.0]], dtype=torch.float64))[0].numpy()
        out = shield.step(ShieldInput(now, state, action, subgoal_w=np.array([1.5, 1.5, 1.0]), subgoal_stamp_s=now,
                                      battery_v=battery))
        thrust = float(out.command[0])
        vz += (G * thrust / truth_n - G) * dt  # the airframe under the command the shield passed
        z += vz * dt
        yield k, out


@settings(max_examples=30, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow], phases=[Phase.generate])
@given(fault=st.sampled_from(FAULTS), at=st.integers(0, 150), truth=st.floats(0.245, 0.39),
       jump=st.floats(1.0, 50.0) | st.floats(-50.0, -1.0), bad_v=st.sampled_from([math.nan, -3.7, 1e308, math.inf, 0.5, 9.0]))
def test_a_fault_at_any_moment_sends_the_stopping_model_back_to_the_worst_case(fault, at, truth, jump, bad_v):
    s = _shield()
    m, unit = s.model, s.unit("hover_thrust")
    converged_k = None
    for k, _ in _hover_flight(s, truth, 300):
        if unit.converged:
            converged_k = k
            break
    assert converged_k is not None, "no convergence in 3 s of smooth flight"
    assert unit.converged and m.ff_mass == pytest.approx(unit.filter.hover_n / G)  # the estimate is in use
    fault_at = converged_k + 1 + at
    if fault == "fault_takeover":
        gen = _hover_flight(s, truth, at + 1, start=converged_k + 1)
        for _ in gen:
            pass
        s.request_land(fault_at * 0.01, reason="test")  # a land request: an input unit's takeover
        list(_hover_flight(s, truth, 2, start=fault_at))
    else:
        value = jump if fault == "velocity_jump" else bad_v
        timeout = s.watchdog.state_timeout
        limit = fault_at + 1 + (int(math.ceil(timeout / 0.01)) + 1 if fault == "odometry_stops" else 0)
        for k, _ in _hover_flight(s, truth, limit - converged_k, start=converged_k + 1, fault=fault, fault_at=fault_at,
                                  value=value):
            pass
    assert m.weak_fraction == m.weak_fraction_cfg and m.strong_fraction == m.strong_fraction_cfg, fault
    assert not unit.converged
    diag = next(d for d in s.diagnostics() if d["name"] == "shield/hover_thrust")
    assert diag["values"]["braking_on"].startswith("worst case"), diag
    expected = {"nan_state": "no_state", "velocity_jump": "velocity_jump", "odometry_stops": "stale_state",
                "battery_gone": "battery", "battery_nan": "battery", "fault_takeover": "takeover"}[fault]
    assert diag["values"]["last_fault"] == expected and int(diag["values"][f"faults.{expected}"]) == 1, diag
    # the backup keeps the last converged estimate as its feed-forward (the airframe has not changed)
    assert m.ff_mass == pytest.approx(unit.feedforward_n / G)


def test_without_the_unit_the_model_keeps_the_worst_case_and_the_nominal_feedforward():
    cfg = load_shield_config()
    cfg = cfg.model_copy(update={"units": tuple(u for u in cfg.units if u != "hover_thrust"), "hover_thrust": None})
    s = _shield(cfg)
    for _ in _hover_flight(s, 0.36, 200):
        pass
    assert s.model.weak_fraction == s.model.weak_fraction_cfg and s.model.ff_mass == s.model.mass


def test_on_by_default_in_the_stopping_model_and_off_the_estimate_feeds_the_backup_only():
    """Shipped on (the descent's reaction time is derived: docs/safety.md); off, the worst-case airframe stays."""
    for cfg, in_model in ((load_shield_config(), True), (_config(False), False)):
        assert cfg.hover_thrust.use_in_stopping_model is in_model
        s = _shield(cfg)
        unit = s.unit("hover_thrust")
        for _ in _hover_flight(s, 0.36, 300):
            pass
        assert unit.converged
        assert s.model.ff_mass == pytest.approx(unit.filter.hover_n / G) and abs(unit.filter.hover_n - 0.36) < 0.0036
        diag = next(d for d in s.diagnostics() if d["name"] == "shield/hover_thrust")
        worst = s.model.weak_fraction == s.model.weak_fraction_cfg and s.model.strong_fraction == s.model.strong_fraction_cfg
        if in_model:  # a 0.36 N hover thrust: a heavier airframe than the model's, within the range (not its worst end)
            assert not worst and s.model.weak_fraction > s.model.weak_fraction_cfg
            assert s.model.reaction_weak_fraction == pytest.approx(min(1.0, s.model.weak_fraction))
            assert diag["values"]["braking_on"] == "estimate"
        else:
            assert worst and s.model.reaction_weak_fraction == 1.0
            assert "backup only" in diag["values"]["braking_on"]


def test_the_filter_refuses_a_prior_outside_its_range_and_gates_an_outlier():
    with pytest.raises(ValueError, match="prior"):
        HoverThrustFilter(0.5, 0.1, 0.2, 0.4, 0.001, 3.0, 0.01, 0.1)
    f = HoverThrustFilter(0.3, 0.05, 0.2, 0.4, 0.001, 3.0, 0.01, 0.1)
    for _ in range(200):
        f.predict(0.01)
        assert f.fuse(G * 0.3 / 0.31 - G, 0.3, 0.01)
    before = f.hover_n
    assert not f.fuse(50.0, 0.3, 0.01)  # 5 g of innovation: gated, not fused
    assert f.hover_n == before and abs(before - 0.31) < 0.002


@settings(max_examples=60, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(truth=st.floats(0.245, 0.39), bands=st.lists(st.floats(0.0, 0.06), min_size=30, max_size=120),
       signs=st.lists(st.sampled_from((-1.0, 1.0)), min_size=120, max_size=120), seed=st.integers(0, 2**16))
def test_the_bias_bound_covers_samples_whose_thrust_is_systematically_off_by_their_band(truth, bands, signs, seed):
    """Each sample's thrust is off by its whole band, on the side hypothesis picks (the motors' lag is a systematic
    error, not noise): the estimate stays within its standard deviations plus ``bias_n`` of the truth, and ``bias_n``
    never exceeds the widest band fused."""
    rng = np.random.default_rng(seed)
    f = HoverThrustFilter(0.309, 0.075, 0.241, 0.392, 0.001, 3.0, 0.01, 0.1)
    for band, sign in zip(bands, signs):
        f.predict(0.01)
        commanded = truth * float(rng.uniform(0.8, 1.2))
        produced = commanded * (1.0 + sign * band)
        f.fuse(G * produced / truth - G, commanded, 0.01, 0.0, band)
    err = abs(f.hover_n - truth)
    assert err <= 3.0 * f.sigma_n + f.bias_n * 1.05 + 1e-4, (err, f.sigma_n, f.bias_n)
    assert f.bias_n <= max(bands) * f.hover_n + 1e-12


def test_the_bias_bound_shrinks_as_narrow_bands_outweigh_wide_ones_and_a_reset_clears_it():
    f = HoverThrustFilter(0.309, 0.075, 0.241, 0.392, 0.001, 3.0, 0.01, 0.1)
    for _ in range(20):
        f.predict(0.01)
        f.fuse(0.0, 0.309, 0.01, 0.0, 0.05)
    wide = f.bias_n
    assert 0.8 * 0.05 * 0.309 < wide <= 0.05 * 0.309 + 1e-12
    for _ in range(400):
        f.predict(0.01)
        f.fuse(0.0, 0.309, 0.01, 0.0, 0.0)
    assert f.bias_n < 0.5 * wide
    f.reset()
    assert f.bias_n == 0.0


def _narrowing(samples: int):
    cfg = load_shield_config()
    return cfg.model_copy(update={"hover_thrust": cfg.hover_thrust.model_copy(update={"narrow_after_samples": samples})})


@pytest.mark.parametrize("truth", [0.26, 0.31, 0.37])
def test_converging_the_stopping_model_narrows_to_the_bounds_and_a_fault_puts_back_the_worst_case(truth):
    """``narrow_after_samples`` (shipped 10): once that many samples are fused and no offset is detected, the stopping
    model brakes with the estimate's bounds before convergence (they hold the truth), the backup's feed-forward still
    waits for convergence; off (0), the worst case until convergence. A fault puts back the worst case at once."""
    assert load_shield_config().hover_thrust.narrow_after_samples == 10
    seen = {}
    for samples in (0, 10):
        s = _shield(_narrowing(samples))
        m, unit = s.model, s.unit("hover_thrust")
        narrowed_before = None
        for k, _ in _hover_flight(s, truth, 400):
            if unit.converged:
                break
            worst = m.weak_fraction == m.weak_fraction_cfg and m.strong_fraction == m.strong_fraction_cfg
            if unit.narrowed:
                assert unit.filter.fused >= 10 and not unit.filter.offset_detected
                lo, hi = unit.bounds()
                assert lo <= truth <= hi, (k, lo, truth, hi)
                assert m.ff_mass == m.mass  # the feed-forward waits for convergence
                diag = next(d for d in s.diagnostics() if d["name"] == "shield/hover_thrust")
                assert diag["values"]["braking_on"] == "estimate, converging (hover_thrust.narrow_after_samples)"
                if not worst and narrowed_before is None:
                    narrowed_before = k
            else:
                assert worst, (samples, k)
        assert unit.converged
        seen[samples] = narrowed_before
    assert seen[0] is None  # off: the worst case until convergence
    assert seen[10] is not None  # on: narrower than the worst case before convergence
    # a fault (a non-finite state) puts back the worst case at once, and narrowing starts again only after 10 samples
    s = _shield(_narrowing(10))
    m, unit = s.model, s.unit("hover_thrust")
    gen = _hover_flight(s, truth, 200, fault="nan_state", fault_at=150)
    for k, _ in gen:
        if k == 149:
            assert unit.narrowed
        if k >= 150:
            assert not unit.narrowed and m.weak_fraction == m.weak_fraction_cfg and m.strong_fraction == m.strong_fraction_cfg


@settings(max_examples=20, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow], phases=[Phase.generate])
@given(fault=st.sampled_from(("nan_state", "velocity_jump", "battery_gone", "battery_nan")), at=st.floats(0.0, 1.0),
       truth=st.floats(0.245, 0.39), jump=st.floats(1.0, 50.0) | st.floats(-50.0, -1.0))
def test_a_fault_at_any_moment_while_narrowing_puts_back_the_worst_case(fault, at, truth, jump):
    """The fault's moment drawn anywhere between the first narrowed tick and convergence (the shipped
    ``narrow_after_samples``): on the fault's tick the stopping model is back on the configured worst case."""
    s = _shield()
    m, unit = s.model, s.unit("hover_thrust")
    first = last = None
    probe = _shield()  # the same flight without the fault (deterministic): where narrowing starts and converges
    pu = probe.unit("hover_thrust")
    for k, _ in _hover_flight(probe, truth, 300):
        if pu.narrowed and not pu.converged and first is None:
            first = k
        if pu.converged:
            last = k
            break
    assert first is not None and last is not None and first < last, (first, last)
    fault_at = first + int(at * (last - first - 1))
    value = jump if fault == "velocity_jump" else math.nan
    for k, _ in _hover_flight(s, truth, fault_at + 1, fault=fault, fault_at=fault_at, value=value):
        if k == fault_at:
            assert not unit.narrowed and not unit.converged, (fault, k)
            assert m.weak_fraction == m.weak_fraction_cfg and m.strong_fraction == m.strong_fraction_cfg, (fault, k)


@settings(max_examples=30, deadline=None)
@given(thrusts=st.lists(st.floats(0.0, 0.6), min_size=50, max_size=400), hold=st.floats(0.05, 0.4))
def test_dropping_the_forgotten_starts_leaves_the_thrust_band_bit_for_bit(thrusts, hold):
    # the band's two starts of a motor and latency, once equal, are kept once: the band over every tick is the same
    # as with all of them kept (a random command sequence, then a hold that lets the starts meet)
    pruned, full = _shield().unit("hover_thrust"), _shield().unit("hover_thrust")
    full._distinct_lags = 10**9  # never prune
    seq = thrusts + [hold] * 800
    for t in seq:
        prev = (t, 1e-4, -1e-4, 0.0)
        assert pruned._band(prev) == full._band(prev)
    assert len(pruned._lags) <= len(full._lags)
    # after 8 s of one command the two starts of each motor and latency have met, bit for bit or to rounding: the
    # update s + a (target - s) stops moving once a |target - s| is under half an ulp, so every s within about
    # ulp / (2 a) of the target is a floating-point fixed point, and the two starts may settle on two of them (found
    # by hypothesis at hold 0.156: 0.39528470752104705 and ...783 for the slowest motor, a = 0.064, 14 ulps apart);
    # those stay two lags, the band the same
    states: dict[tuple, list[float]] = {}
    for a, j, state in pruned._lags:
        states.setdefault((a, j), []).append(state)
    assert len(states) == pruned._distinct_lags
    assert all(max(v) - min(v) <= (1.0 / a + 1.0) * math.ulp(max(v)) for (a, _), v in states.items()), states
