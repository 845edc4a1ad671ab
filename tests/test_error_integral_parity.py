"""The position error's integral (issue 17, no sag) built three times and proven equal: the numpy runtime
(``robot_hrl.contract.error_integral.ErrorIntegrator``, kept by ``OnnxPolicy``), the simulator's step (torch eager and
its native C twin: a state row advanced by ``step_core`` / ``control_step.c``) and the generated Crazyflie controller
(``deploy/crazyflie``: ``policyBuildObservation`` with its statics, compiled for the host with gcc).

Random tick sequences (hypothesis) with subgoal moves and resets at random moments; the simulators' sequences are
replayed through the numpy integrator from the simulator's own ground truth (positions, attitudes, goals, resets).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from robot_hrl.contract import GOTO_ERROR_INTEGRAL, ErrorIntegral, ObservationTerm, goto_contract
from robot_hrl.contract.error_integral import MIN_HEADING_NORM, TERM_NAME, ErrorIntegrator, frame_error, integral_step, yaw_frame_error
from robot_hrl.errors import ObservationError
from robot_hrl.robots import CRAZYFLIE_2X
from sim.envs.terms import error_integral as torch_integral

RATE_HZ = 100.0
SPEC = GOTO_ERROR_INTEGRAL.model_copy(update={"active_radius_m": None})
YAW_SPEC = SPEC.model_copy(update={"frame": "yaw_flu"})
GATE_M = 1.5
"""The gated specs' radius here: hypothesis' positions lie 0-6 m from the subgoal, so the gate opens and closes."""
SPECS = {"world_enu": SPEC, "yaw_flu": YAW_SPEC, "world_enu_gated": SPEC.model_copy(update={"active_radius_m": GATE_M}),
         "yaw_flu_gated": YAW_SPEC.model_copy(update={"active_radius_m": GATE_M})}
GATE_BAND = 1e-4
"""Ticks within this relative distance of the gate's radius are left out (``assume``): float32 and float64 may decide
the comparison differently there (the twins agree to their rounding, the gate's edge is a step)."""


def _unit(q):
    q = np.asarray(q, dtype=np.float64)
    n = np.linalg.norm(q)
    return q / n if n > 1e-3 else np.array([1.0, 0.0, 0.0, 0.0])


tick = st.tuples(
    st.lists(st.floats(-3.0, 3.0), min_size=3, max_size=3),  # position
    st.lists(st.floats(-1.0, 1.0), min_size=4, max_size=4),  # quaternion (normalized below)
    st.sampled_from(["keep", "keep", "keep", "nudge", "move", "reset"]),
)


def _sequence(raw, rng_seed: int = 0):
    """(position, quat, subgoal, reset) per tick from hypothesis' draws."""
    rng = np.random.default_rng(rng_seed)
    subgoal = np.array([0.5, -0.2, 1.0])
    out = []
    for pos, q, event in raw:
        reset = event == "reset"
        if event == "move":
            subgoal = subgoal + rng.uniform(-0.5, 0.5, 3)
        elif event == "nudge":  # below the restart threshold: the integral goes on
            subgoal = subgoal + 0.5 * SPEC.subgoal_change_m * rng.uniform(-1.0, 1.0, 3)
        out.append((np.array(pos), _unit(q), subgoal.copy(), reset))
    return out


def _clear_of_the_gate(seq, spec) -> bool:
    """No tick's distance to the subgoal within ``GATE_BAND`` of the gate's radius (always true without a gate)."""
    r = spec.active_radius_m
    return r is None or all(abs(np.linalg.norm(goal - pos) - r) > GATE_BAND * r for pos, _, goal, _ in seq)


def _numpy_run(seq, spec=SPEC):
    integ = ErrorIntegrator(spec, RATE_HZ)
    values = []
    for pos, quat, subgoal, reset in seq:
        if reset:
            integ.reset()
        values.append(integ.update(pos, quat, subgoal))
    return np.array(values)


def _reference_run(seq, spec=SPEC):
    """The definition written out once more, in plain Python floats (the module docstring's recurrence)."""
    decay = math.exp(-1.0 / (RATE_HZ * spec.time_constant_s))
    value, previous, last_goal, out = [0.0] * 3, None, None, []
    for pos, quat, subgoal, reset in seq:
        if reset:
            previous = None
        moved = last_goal is None or any(abs(a - b) > spec.subgoal_change_m for a, b in zip(subgoal, last_goal))
        if previous is None or moved:
            value = [0.0] * 3
        else:
            value = [min(max(decay * v + e / RATE_HZ, -spec.limit_m_s), spec.limit_m_s) for v, e in zip(value, previous)]
        w, x, y, z = quat
        # the heading: the body x axis on the horizontal plane; pointing (almost) straight up or down, its length is
        # floored at MIN_HEADING_NORM and the horizontal error shrinks (atan2 would take yaw 0 at exactly 90 deg)
        hx, hy = (1.0 - 2.0 * (y * y + z * z), 2.0 * (w * z + x * y)) if spec.frame == "yaw_flu" else (1.0, 0.0)
        h = max(math.hypot(hx, hy), MIN_HEADING_NORM)
        c, s = hx / h, hy / h
        ex, ey, ez = (g - p for g, p in zip(subgoal, pos))
        previous = [c * ex + s * ey, -s * ex + c * ey, ez]
        if spec.active_radius_m is not None and math.sqrt(ex * ex + ey * ey + ez * ez) > spec.active_radius_m:
            previous = [0.0] * 3  # conditional integration: outside the radius the error counts as zero
        last_goal = list(subgoal)
        out.append(list(value))
    return np.array(out)


@pytest.mark.parametrize("frame", SPECS)
@settings(max_examples=40, deadline=None)
@given(raw=st.lists(tick, min_size=1, max_size=60), seed=st.integers(0, 2**16))
@example(raw=[([0.0, 0.0, 0.0], [1.0, 0.0, 1.0, 0.0], "keep"), ([0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0], "keep")],
         seed=0)  # pitched exactly 90 deg (found in CI): the heading's floor, not yaw 0
def test_numpy_integrator_is_the_definition(frame, raw, seed):
    seq = _sequence(raw, seed)
    assume(_clear_of_the_gate(seq, SPECS[frame]))
    np.testing.assert_allclose(_numpy_run(seq, SPECS[frame]), _reference_run(seq, SPECS[frame]), atol=1e-9)


@pytest.mark.parametrize("frame", SPECS)
@settings(max_examples=30, deadline=None)
@given(raw=st.lists(tick, min_size=1, max_size=60), seed=st.integers(0, 2**16))
def test_torch_terms_match_numpy(frame, raw, seed):
    """The step's torch columns (``sim/envs/terms/error_integral.py``) on the same ticks, float32."""
    seq = _sequence(raw, seed)
    spec = SPECS[frame]
    assume(_clear_of_the_gate(seq, spec))
    expected = _numpy_run(seq, spec)
    gate_sq = None if spec.active_radius_m is None else spec.active_radius_m * spec.active_radius_m
    value = (torch.zeros(1),) * 3
    previous, last_goal = None, None
    decay = math.exp(-1.0 / (RATE_HZ * SPEC.time_constant_s))
    for k, (pos, quat, subgoal, reset) in enumerate(seq):
        moved = last_goal is None or bool(np.any(np.abs(subgoal - last_goal) > SPEC.subgoal_change_m))
        if reset or moved or previous is None:
            value = (torch.zeros(1),) * 3
        else:
            value = torch_integral.integral_step(value, previous, decay, 1.0 / RATE_HZ, SPEC.limit_m_s)
        cols = lambda v: tuple(torch.tensor([float(x)], dtype=torch.float32) for x in v)  # noqa: E731
        previous = torch_integral.integral_error(cols(pos), cols(quat), cols(subgoal), spec.frame == "yaw_flu", gate_sq)
        last_goal = subgoal
        np.testing.assert_allclose(torch.cat(value).numpy(), expected[k], atol=2e-6)


@pytest.mark.parametrize("native", [False, True], ids=["eager", "native"])
@pytest.mark.parametrize("frame", SPECS)
def test_simulator_step_matches_the_runtime(native, frame, monkeypatch):
    """The env's state row, observed by the policy, against the numpy integrator replayed on the env's own ground truth
    (its positions, attitudes and goals before each step; a new episode where the env reset)."""
    from sim.envs import GotoEnv
    from sim.envs.goto_env_cfg import GotoEnvCfg

    import robot_hrl.contract

    spec = SPECS[frame]
    if spec.active_radius_m is not None:  # starts lie up to 1 m from the goal: a radius that some ticks are inside
        spec = spec.model_copy(update={"active_radius_m": 0.7})
    monkeypatch.setattr(robot_hrl.contract, "GOTO_ERROR_INTEGRAL", spec)  # what GotoEnvCfg.contract reads
    cfg = GotoEnvCfg()
    cfg.command.observe_error_integral = True
    cfg.physics.native = native
    cfg.command.episode_length_s = 0.6  # several resets within the run
    env = GotoEnv(cfg, num_envs=16, seed=11)
    names = [t.name for t in env.contract.observations]
    assert names[-1] == TERM_NAME and env.contract.observations[-1].integral == spec
    start = env.contract.observation_size - 3
    integrators = [ErrorIntegrator(spec, env.contract.control_rate_hz) for _ in range(env.num_envs)]
    inside = outside = 0
    g = torch.Generator().manual_seed(5)
    hover = torch.tensor([0.25, 0.0, 0.0, 0.0])
    compared = resets = 0
    for k in range(150):
        pos, quat, goal = (env.position_w.double().numpy().copy(), env.quat_wxyz.double().numpy().copy(),
                           env.goal_w.double().numpy().copy())
        observed = env.get_observations()["critic"][:, start:start + 3].double().numpy()  # clean (no noise), clipped
        distance = np.linalg.norm(goal - pos, axis=1)
        if spec.active_radius_m is not None:
            assert np.all(np.abs(distance - spec.active_radius_m) > 1e-6), "a float32 state on the gate's edge: pick another seed"
            inside += int(np.sum(distance <= spec.active_radius_m))
            outside += int(np.sum(distance > spec.active_radius_m))
        for e, integ in enumerate(integrators):
            if env.episode_length_buf[e].item() == 0:
                integ.reset()
            expected = integ.update(pos[e], quat[e], goal[e])
            np.testing.assert_allclose(observed[e], expected, atol=2e-5, err_msg=f"env {e}, step {k}")
            compared += 1
        _, _, dones, _ = env.step(hover + 0.3 * (torch.rand(env.num_envs, 4, generator=g) - 0.5))
        resets += int(dones.sum())
    assert compared == 150 * 16 and resets >= 16
    if spec.active_radius_m is not None:
        assert inside > 100 and outside > 100, (inside, outside)  # the gate both open and closed
    assert np.abs(env.get_observations()["critic"][:, start:start + 3].numpy()).max() > 0.0


@pytest.fixture(scope="module", params=list(SPECS))
def host_controller(request, tmp_path_factory):
    from deploy.crazyflie.codegen import generate_project
    from deploy.crazyflie.example_model import build_mlp_onnx
    from deploy.crazyflie.host import HostController

    tmp = tmp_path_factory.mktemp("integral_c")
    contract = goto_contract(CRAZYFLIE_2X, error_integral=SPECS[request.param])
    model = build_mlp_onnx(tmp / "m.onnx", contract=contract)
    project = generate_project(model, tmp / "cf")
    return HostController.build(project, tmp / "host"), contract


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(raw=st.lists(tick, min_size=1, max_size=60), seed=st.integers(0, 2**16))
def test_generated_c_matches_numpy(host_controller, raw, seed):
    lib, contract = host_controller
    seq = _sequence(raw, seed)
    assume(_clear_of_the_gate(seq, contract.observations[-1].integral))
    expected = _numpy_run(seq, contract.observations[-1].integral)
    start = contract.observation_size - 3
    lib.reset_observation()
    for k, (pos, quat, subgoal, reset) in enumerate(seq):
        if reset:
            lib.reset_observation()
        row = np.concatenate((pos, quat, np.zeros(6), subgoal)).astype(np.float32)
        # float32 inputs: the numpy reference on the same float32-rounded state
        obs, ok = lib.observation(row, np.zeros(4))
        assert ok
        np.testing.assert_allclose(obs[start:], expected[k], atol=2e-5, err_msg=f"tick {k}")


def test_c_state_is_reset_by_the_controller_init(host_controller):
    lib, contract = host_controller
    start = contract.observation_size - 3
    row = np.array([0, 0, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0.05, 0, 1.0], dtype=np.float32)  # level, 50 mm short in x
    for _ in range(20):
        obs, _ = lib.observation(row, np.zeros(4))
    assert obs[start] > 0.005  # 20 ticks of a 50 mm error
    lib.init()  # controllerOutOfTreeInit: policyResetEpisode -> policyResetObservation
    obs, _ = lib.observation(row, np.zeros(4))
    assert np.all(obs[start:] == 0.0)


def test_runtime_policy_keeps_and_resets_the_integral(tmp_path):
    from deploy.crazyflie.example_model import build_mlp_onnx
    from robot_hrl.runtime import OnnxPolicy
    from robot_hrl.state import RobotState

    contract = goto_contract(CRAZYFLIE_2X, error_integral=GOTO_ERROR_INTEGRAL)
    policy = OnnxPolicy(build_mlp_onnx(tmp_path / "m.onnx", contract=contract), robot=CRAZYFLIE_2X)
    state = RobotState(position_w=np.array([0.0, 0.0, 1.0]), quat_wxyz=np.array([1.0, 0.0, 0.0, 0.0]),
                       linear_velocity_w=np.zeros(3), angular_velocity_b=np.zeros(3))
    goal = np.array([0.05, 0.0, 1.0])
    first = policy.observe(state, goal)[-3:]
    assert np.all(first == 0.0)
    for _ in range(10):
        policy.step(state, goal)
    decay = math.exp(-1.0 / (RATE_HZ * SPEC.time_constant_s))
    assert policy.last_observation[-3] == pytest.approx(sum(0.05 / RATE_HZ * decay**k for k in range(10)), rel=1e-5)
    policy.step(state, goal + np.array([0.0, 0.0, 0.01]))  # the subgoal moved 10 mm: a new integral
    assert np.all(policy.last_observation[-3:] == 0.0)
    policy.step(state, goal + np.array([0.0, 0.0, 0.01]))
    assert policy.last_observation[-3] > 0.0
    policy.reset()
    assert np.all(policy.observe(state, goal)[-3:] == 0.0)


def test_contract_names_the_parameters_and_old_contracts_are_unchanged():
    plain = goto_contract(CRAZYFLIE_2X)
    assert "integral" not in plain.to_json()  # the shipped 22-input contracts serialize as before
    c = goto_contract(CRAZYFLIE_2X, error_integral=GOTO_ERROR_INTEGRAL)
    term = c.observations[-1]
    assert c.observation_size == 25 and term.name == TERM_NAME and term.units == "m s"
    assert term.clip == (-SPEC.limit_m_s, SPEC.limit_m_s) and term.frame == SPEC.frame == "world_enu"
    again = type(c).from_json(c.to_json())
    assert again.observations[-1].integral == ErrorIntegral(time_constant_s=20.0, limit_m_s=0.05, subgoal_change_m=0.001, frame="world_enu",
                                                            active_radius_m=0.1)
    # a spec without the gate serializes without the key: contracts written before it keep their bytes and hashes
    ungated = goto_contract(CRAZYFLIE_2X, error_integral=SPEC)
    assert "active_radius_m" not in ungated.to_json() and '"active_radius_m":0.1' in c.to_json()
    assert type(c).from_json(ungated.to_json()).observations[-1].integral.active_radius_m is None
    with pytest.raises(Exception, match="greater than 0"):
        ErrorIntegral(time_constant_s=1.0, limit_m_s=0.1, subgoal_change_m=0.001, frame="world_enu", active_radius_m=0.0)
    with pytest.raises(Exception, match="error integral has 3 values"):
        ObservationTerm(name=TERM_NAME, size=4, frame="yaw_flu", units="m s", clip=(-1.0, 1.0), integral=GOTO_ERROR_INTEGRAL)
    with pytest.raises(Exception, match="greater than 0"):
        ErrorIntegral(time_constant_s=0.0, limit_m_s=0.1, subgoal_change_m=0.001, frame="world_enu")
    with pytest.raises(Exception, match="world_enu"):
        ErrorIntegral(time_constant_s=1.0, limit_m_s=0.1, subgoal_change_m=0.001, frame="body_flu")


def test_compute_observation_without_the_integral_state_names_the_fix():
    from robot_hrl.contract import compute_observation

    c = goto_contract(CRAZYFLIE_2X, error_integral=GOTO_ERROR_INTEGRAL)
    inputs = {"position_w": np.zeros(3), "quat_wxyz": np.array([1.0, 0, 0, 0]), "linear_velocity_w": np.zeros(3),
              "angular_velocity_b": np.zeros(3), "subgoal_w": np.ones(3), "last_action": np.zeros(4)}
    with pytest.raises(ObservationError, match="ErrorIntegrator"):
        compute_observation(c.observations, inputs)


def test_integral_step_clips_and_decays():
    near = 0.99 * SPEC.limit_m_s
    value = integral_step(np.array([near, -near, 0.0]), np.array([10.0, -10.0, 0.0]), SPEC, RATE_HZ)
    assert value.tolist() == [SPEC.limit_m_s, -SPEC.limit_m_s, 0.0]
    yawed = np.array([math.cos(math.pi / 4), 0, 0, math.sin(math.pi / 4)])  # 90 deg yaw: world y ahead
    assert yaw_frame_error(np.zeros(3), yawed, np.array([0.0, 1.0, 0.0])) == pytest.approx([1.0, 0.0, 0.0], abs=1e-12)
    assert frame_error(np.zeros(3), yawed, np.array([0.0, 1.0, 0.0]), "world_enu").tolist() == [0.0, 1.0, 0.0]


def test_the_gate_keeps_the_approach_free_of_the_integral():
    """Conditional integration (``active_radius_m``): zero while the robot is farther from the subgoal than the radius,
    the error integrated inside it, and only the leak outside it again."""
    spec = SPEC.model_copy(update={"active_radius_m": 0.1})
    integ = ErrorIntegrator(spec, RATE_HZ)
    level, goal = np.array([1.0, 0.0, 0.0, 0.0]), np.array([0.0, 0.0, 1.0])
    for z in np.linspace(0.0, 0.85, 60):  # an approach from 1 m to 0.15 m below: nothing integrated
        assert np.all(integ.update(np.array([0.0, 0.0, z]), level, goal) == 0.0)
    for _ in range(30):  # settled 50 mm low: integrated
        value = integ.update(np.array([0.0, 0.0, 0.95]), level, goal)
    assert value[2] > 0.01 and value[0] == value[1] == 0.0
    decay = math.exp(-1.0 / (RATE_HZ * spec.time_constant_s))
    knocked = np.array([0.0, 0.0, 0.7])  # knocked 0.3 m away: this tick still adds the last error from inside
    first = integ.update(knocked, level, goal)
    assert first[2] == pytest.approx(min(decay * value[2] + 0.05 / RATE_HZ, spec.limit_m_s))
    second = integ.update(knocked, level, goal)  # then the leak alone
    assert second[2] == pytest.approx(decay * first[2]) and integ.update(knocked, level, goal)[2] == pytest.approx(decay * second[2])


def test_the_env_configuration_names_its_integral():
    """``command.error_integral`` gives the step another ErrorIntegral (an exported model's own); a malformed one is
    refused naming the fields."""
    from sim.envs.goto_env_cfg import GotoEnvCfg
    from robot_hrl.errors import ConfigError

    cfg = GotoEnvCfg()
    cfg.command.observe_error_integral = True
    assert cfg.validate().contract(CRAZYFLIE_2X).observations[-1].integral == GOTO_ERROR_INTEGRAL
    cfg.command.error_integral = SPEC.model_dump()
    assert cfg.validate().contract(CRAZYFLIE_2X).observations[-1].integral == SPEC
    again = GotoEnvCfg.from_dict(cfg.to_dict())
    assert again.contract(CRAZYFLIE_2X).observations[-1].integral == SPEC
    cfg.command.error_integral = {"time_constant_s": 2.0}
    with pytest.raises(ConfigError, match=r"(?s)command.error_integral .* give its fields"):
        cfg.validate()


@pytest.mark.parametrize("radius_m", [-0.1, 0.0, float("nan")])
def test_a_contract_with_an_impossible_active_radius_is_refused_naming_it(radius_m):
    """``active_radius_m`` must be a positive, finite distance: a contract edited to anything else is refused, and
    the error names the field and the value (the runtime never builds a gate that never opens)."""
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="active_radius_m") as err:
        ErrorIntegral(time_constant_s=2.0, limit_m_s=0.02, subgoal_change_m=0.001, frame="world_enu",
                      active_radius_m=radius_m)
    assert str(radius_m) in str(err.value)
