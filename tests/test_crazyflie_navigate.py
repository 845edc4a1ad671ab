"""Both levels on the Crazyflie: the navigate level generated as C beside the goto controller.

The generated level (``src/nav_model.c``: the goto codegen's network code; ``src/nav_io.c``: range memory,
observation, subgoal mapping) against the Python level the planner node runs
(:class:`robot_hrl.planning.learned.LearnedNavigator` with onnxruntime on the shipped file), decision by decision:
on sequences of readings and poses drawn by hypothesis, on random episodes, with faults (NaN / inf poses, readings,
goals, network outputs), in a host gcc build and in the Cortex-M4 build under QEMU. The weights are whatever
``models/crazyflie_navigate.onnx`` holds at test time. Then the ``--navigate`` option: figures, refusals.
"""

from __future__ import annotations

import json
import math
import shutil

import numpy as np
import onnx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from deploy.crazyflie import navigate_parity as nav_parity
from deploy.crazyflie.cli import PARITY_TOLERANCE
from deploy.crazyflie.codegen import generate_project
from deploy.crazyflie.errors import CodegenError
from deploy.crazyflie.host import HostController
from deploy.crazyflie.host_navigate import HostNavigator
from robot_hrl.contract import CONTRACT_METADATA_KEY
from robot_hrl.contract.navigate import subgoal_from_action

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None, reason="needs a host gcc")
needs_arm = pytest.mark.skipif(shutil.which("arm-none-eabi-gcc") is None, reason="needs arm-none-eabi-gcc")
needs_qemu = pytest.mark.skipif(shutil.which("qemu-system-arm") is None or shutil.which("arm-none-eabi-gcc") is None,
                                reason="needs qemu-system-arm and arm-none-eabi-gcc")


@pytest.fixture(scope="module")
def models(repo_root):
    goto, nav = repo_root / "models" / "crazyflie_goto.onnx", repo_root / "models" / "crazyflie_navigate.onnx"
    if not (goto.is_file() and nav.is_file()):
        pytest.skip("the shipped goto skill and navigate level are needed")
    return goto, nav


@pytest.fixture(scope="module")
def built(models, tmp_path_factory):
    """(project, host C level, Python level) of the shipped pair."""
    out = tmp_path_factory.mktemp("cf_nav")
    project = generate_project(models[0], out / "cf", navigate=models[1])
    host = HostNavigator(HostController.build(project, out / "host"))
    return project, host, nav_parity.onnxruntime_navigator(project.navigate)


def _assert_same(reference: np.ndarray, c: np.ndarray) -> float:
    """C decisions (``c``) agree with the Python level's (``reference``): the same accepts and refusals, subgoals and
    observations within the parity tolerance; the largest subgoal difference, m."""
    sub, obs, disagree = nav_parity.compare(reference, c)
    assert disagree == 0, np.nonzero(reference[:, 0] != c[:, 0])
    assert sub <= PARITY_TOLERANCE and obs <= PARITY_TOLERANCE, (sub, obs)
    return sub


# ---- sequences drawn by hypothesis ------------------------------------------------------------------------------
def _f32(lo: float, hi: float):
    """float32 values within [lo, hi] (the bounds rounded inwards to float32)."""
    lo32, hi32 = np.float32(lo), np.float32(hi)
    lo32 = lo32 if lo32 >= lo else np.nextafter(lo32, np.float32(np.inf))
    hi32 = hi32 if hi32 <= hi else np.nextafter(hi32, np.float32(-np.inf))
    return st.floats(float(lo32), float(hi32), allow_nan=False, allow_infinity=False, width=32)


_RANGE = st.one_of(_f32(0.04, 4.0), st.sampled_from([0.04, 4.0]))  # and exactly at the limits (float32 0.04 < 0.04)
_READING = st.tuples(_f32(-0.6, 0.6), _f32(-0.6, 0.6), _f32(-math.pi, math.pi), _f32(-0.1, 0.1), _f32(-0.1, 0.1),
                     st.lists(_RANGE, min_size=6, max_size=6), st.lists(_f32(-4.0, 4.0), min_size=3, max_size=3))
_DECISION = st.lists(_READING, min_size=1, max_size=3)
_EPISODE = st.tuples(_f32(-5.0, 5.0), _f32(-5.0, 5.0), _f32(-5.0, 5.0), _f32(-5.0, 5.0),
                     st.lists(_DECISION, min_size=1, max_size=12))


def _episode_rows(episode, n_rangers: int) -> np.ndarray:
    x0, y0, gx, gy, decisions = episode
    rows = [np.r_[nav_parity.OP_RESET, np.zeros(nav_parity.row_size(n_rangers) - 1)]]
    pos = np.array([x0, y0, 1.0])
    goal = np.array([gx, gy, 1.0])
    for readings in decisions:
        for dx, dy, yaw, tx, ty, ranges, vel in readings:
            pos = pos + np.array([dx, dy, 0.0])
            q = np.array([math.cos(yaw / 2), tx, ty, math.sin(yaw / 2)])
            rows.append(np.r_[nav_parity.OP_SENSE, pos, q / np.linalg.norm(q), ranges, vel, goal])
        rows.append(np.r_[nav_parity.OP_DECIDE, rows[-1][1:]])
    return np.asarray(rows, dtype=np.float32)


@settings(max_examples=40, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                                     HealthCheck.too_slow])
@given(episodes=st.lists(_EPISODE, min_size=1, max_size=3))
def test_c_level_decides_as_the_python_level_on_drawn_sequences(built, episodes):
    project, host, navigator = built
    n = len(project.navigate.sensors)
    seq = np.concatenate([_episode_rows(e, n) for e in episodes])
    _assert_same(nav_parity.run_python(navigator, seq), nav_parity.run_host(host, seq))


def test_c_level_on_random_episodes_through_a_full_ring(built):
    """Long wandering episodes: the 128-point ring fills and wraps (the oldest points overwritten) in both."""
    project, host, navigator = built
    rng = np.random.default_rng(2026)
    wrapped = 0
    for _ in range(6):
        seq = nav_parity.random_sequence(rng, project.navigate.sensors, decisions=60)
        ref = nav_parity.run_python(navigator, seq)
        _assert_same(ref, nav_parity.run_host(host, seq))
        wrapped += int(navigator.memory.count[0] > navigator.memory.capacity)
    assert wrapped >= 3
    assert host.decisions >= 6 * 60


def test_c_level_over_episodes_of_several_goals(built):
    """Episodes whose goal changes twice without a reset (navigate_parity.random_sequence(goals=3): the sequences a
    recurrent level is checked on, tests/test_crazyflie_navigate_recurrent.py): the feed-forward level agrees too; goals=1
    (the default) keeps one goal per episode."""
    project, host, navigator = built
    seq = nav_parity.random_sequence(np.random.default_rng(4), project.navigate.sensors, decisions=30, goals=3)
    decided = seq[seq[:, 0] == nav_parity.OP_DECIDE]
    assert len({tuple(g) for g in decided[:, -3:]}) == 3 and np.all(seq[1:, 0] != nav_parity.OP_RESET)
    _assert_same(nav_parity.run_python(navigator, seq), nav_parity.run_host(host, seq))
    one = nav_parity.random_sequence(np.random.default_rng(4), project.navigate.sensors, decisions=30)
    again = nav_parity.random_sequence(np.random.default_rng(4), project.navigate.sensors, decisions=30, goals=1)
    np.testing.assert_array_equal(one, again)
    assert len({tuple(g) for g in one[one[:, 0] == nav_parity.OP_DECIDE][:, -3:]}) == 1


@pytest.fixture(scope="module")
def trail_built(models, tmp_path_factory, repo_root):
    """(project, host C level, Python level) of a level that also observes its trail (``trail_yaw``): an untrained
    actor of a trail run (sim/train_navigate.py --trail) over the shipped goto skill, exported as any run is. Its
    random weights read every input, the trail's included, so a trail that differed would move the subgoals."""
    import torch
    from rsl_rl.runners import OnPolicyRunner

    from deploy.onnx_export.navigate import export_navigate
    from robot_hrl.world.rooms import generate_room
    from sim.agents.ppo_navigate import ppo_navigate_cfg
    from sim.envs.nav_rooms import RoomPool
    from sim.envs.navigate_env import NavigateEnv
    from sim.envs.navigate_env_cfg import NavigateEnvCfg

    out = tmp_path_factory.mktemp("cf_nav_trail")
    cfg = NavigateEnvCfg(skill_path=str(models[0]), randomize=False)
    cfg.trail.enabled = True
    env = NavigateEnv(cfg, num_envs=2, pool=RoomPool.from_rooms([generate_room("dense", 0)]))
    run = out / "run"
    run.mkdir()
    (run / "navigate_contract.json").write_text(env.contract.to_json())
    train_cfg = ppo_navigate_cfg()
    (run / "train_cfg.json").write_text(json.dumps(train_cfg))
    torch.manual_seed(7)
    runner = OnPolicyRunner(env, train_cfg, log_dir=None, device="cpu")
    runner.save(str(run / "model_0.pt"))
    level = export_navigate(run, out / "trail_level.onnx")
    project = generate_project(models[0], out / "cf", navigate=level)
    host = HostNavigator(HostController.build(project, out / "host"))
    return project, host, nav_parity.onnxruntime_navigator(project.navigate)


def test_c_level_with_a_trail_decides_as_the_python_level(trail_built):
    """The trail's ring (nav_io.c's navTrail, written in navDecide after the observation) and its sectors against
    LearnedNavigator's numpy trail: the same observations and subgoals over wandering episodes whose trail wraps."""
    project, host, navigator = trail_built
    assert project.navigate.contract.observations[-1].name == "trail_yaw"
    rng = np.random.default_rng(11)
    wrapped = read = 0
    for _ in range(4):
        seq = nav_parity.random_sequence(rng, project.navigate.sensors, decisions=150, room_half_m=2.5)
        ref = nav_parity.run_python(navigator, seq)
        _assert_same(ref, nav_parity.run_host(host, seq))
        wrapped += int(navigator.trail.count[0] > navigator.trail.capacity)
        read += int((navigator.trail.sectors(np.zeros((1, 3)), np.array([[1.0, 0, 0, 0]])) < navigator.trail.range_m).sum())
    assert wrapped >= 2 and read > 0


# ---- faults: refused alike, and the level goes on alike --------------------------------------------------------
_FAULT_FIELDS = {"position": (1, 3), "quaternion": (4, 4), "range": (8, 6), "velocity": (14, 3), "goal": (17, 3)}


@settings(max_examples=40, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**31 - 1), field=st.sampled_from(sorted(_FAULT_FIELDS)), value=st.sampled_from([np.nan, np.inf, -np.inf]),
       moment=st.floats(0.0, 1.0), component=st.integers(0, 5))
def test_a_non_finite_input_at_any_moment_is_refused_by_both_and_neither_drifts(built, seed, field, value, moment, component):
    """A NaN or inf pose, reading, velocity or goal, in a sense or a decision row at a random moment: the Python
    level raises ObservationError where the C returns false (no subgoal; nothing remembered from a bad pose), and
    every later decision still agrees (the memory and the last subgoal were not touched)."""
    project, host, navigator = built
    seq = nav_parity.random_sequence(np.random.default_rng(seed), project.navigate.sensors, decisions=12)
    k = 1 + int(moment * (len(seq) - 2))
    start, size = _FAULT_FIELDS[field]
    seq[k, start + component % size] = value
    ref, c = nav_parity.run_python(navigator, seq), nav_parity.run_host(host, seq)
    _assert_same(ref, c)
    decide = seq[k, 0] == nav_parity.OP_DECIDE
    if (decide and field != "range") or field in ("position", "quaternion"):
        assert ref[k, 0] == 0.0  # (a decision takes the last sensed readings; a sense row ignores velocity and goal)


@settings(max_examples=200, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(action=st.lists(st.floats(allow_nan=True, allow_infinity=True, width=32), min_size=2, max_size=2),
       yaw=_f32(-math.pi, math.pi), x=_f32(-10, 10), y=_f32(-10, 10))
def test_any_network_output_maps_to_the_contracts_subgoal(built, action, yaw, x, y):
    """NaN -> 0, +-inf -> +-1, clipped, onto [-R, R], the disc of R, rotated, at the flight height: as
    subgoal_from_action maps it; never farther than R from the robot."""
    project, host, _ = built
    p = np.array([x, y, 0.7], dtype=np.float32)
    q = np.array([math.cos(yaw / 2), 0.0, 0.0, math.sin(yaw / 2)], dtype=np.float32)
    c = host.action_to_subgoal(np.array(action, dtype=np.float32), p, q)
    ref = subgoal_from_action(np.array(action, dtype=np.float64), p.astype(np.float64), q.astype(np.float64),
                              project.navigate.contract)
    assert np.all(np.isfinite(c)) and float(np.max(np.abs(c - ref))) <= PARITY_TOLERANCE
    assert math.hypot(c[0] - p[0], c[1] - p[1]) <= project.navigate.contract.max_offset_m + 1e-5


def test_nothing_is_decided_before_the_first_reading(built):
    _, host, navigator = built
    host.reset()
    navigator.reset()
    sg, ok = host.decide([0, 0, 1], [1, 0, 0, 0], [0, 0, 0], [3, 0, 1])
    assert not ok and np.all(np.isnan(sg))
    with pytest.raises(Exception, match="not finite"):
        navigator.decide(np.array([0.0, 0, 1]), np.array([1.0, 0, 0, 0]), np.zeros(3), np.array([3.0, 0, 1]))


@needs_qemu
def test_cortex_m4_build_decides_as_the_python_level(built, tmp_path):
    """The level cross-compiled with the firmware's flags and newlib (atan2f, floorf, expf), on QEMU's STM32F405."""
    from deploy.crazyflie.qemu_navigate import run_navigate_on_qemu

    project, _, navigator = built
    rng = np.random.default_rng(7)
    seq = np.concatenate([nav_parity.random_sequence(rng, project.navigate.sensors, decisions=40) for _ in range(4)])
    seq[30, 2] = np.nan  # one faulty pose: refused on the MCU too
    ref = nav_parity.run_python(navigator, seq)
    _assert_same(ref, run_navigate_on_qemu(project, seq, tmp_path / "qemu"))
    assert ref[30, 0] == 0.0


# ---- the generator: files, figures, refusals -------------------------------------------------------------------
def test_both_levels_generated_with_their_own_symbols(built):
    project, _, _ = built
    src = project.src_dir
    assert [p.name for p in project.sources][-3:] == ["nav_model.c", "nav_io.c", "nav_task.c"]
    kbuild = (src / "Kbuild").read_text()
    assert "obj-y += nav_model.o" in kbuild and "obj-y += policy_model.o" in kbuild
    nav_c = (src / "nav_model.c").read_text()
    assert "void nav_forward(" in nav_c and "policy_" not in nav_c
    io = (src / "nav_io.c").read_text()
    assert "malloc" not in io and "#include <math.h>" in io
    # the contract's numbers, not hand-written ones
    mem = project.navigate.contract.memory
    assert f"#define NAV_MEMORY_CAPACITY {mem.capacity}" in (src / "nav_io.h").read_text()
    manifest = json.loads((project.out_dir / "manifest.json").read_text())
    assert manifest["navigate"]["model_sha256"] == project.navigate.model_sha256


@needs_arm
def test_export_with_navigate_reports_both_levels_against_the_budget(models, tmp_path, capsys):
    from robot_hrl.cli import main

    out = tmp_path / "cf"
    assert main(["export-c", str(models[0]), "--navigate", str(models[1]), "--out", str(out), "--parity-samples", "500",
                 "--navigate-sequences", "3"]) == 0, capsys.readouterr().err
    printed = capsys.readouterr().out
    assert "navigate level" in printed and "both levels" in printed and "atan2f" in printed
    report = json.loads((out / "report.json").read_text())
    nav = report["navigate"]
    assert nav["decision_parity_max_m"] <= PARITY_TOLERANCE and nav["network_parity_max_abs"] <= PARITY_TOLERANCE
    assert nav["decisions_checked"] == 3 * 40
    files = report["size"]["files"]
    assert set(nav["size"]["files"]) == {"nav_model.c", "nav_io.c", "nav_task.c"}
    assert report["size"]["flash"] == sum(f["text"] + f["rodata"] + f["data"] for f in files.values())
    assert nav["size"]["flash"] < report["size"]["flash"] <= 128 * 1024
    # the memory is in RAM: capacity x 2 floats at least
    mem = json.loads((out / "manifest.json").read_text())["navigate"]["contract"]["memory"]
    assert nav["size"]["ram"] >= mem["capacity"] * 8
    assert 0 < nav["estimated_us_nominal"] < 1e6 / nav["decision_rate_hz"]
    # both levels must fit together: a budget below their sum and above the goto's alone is refused
    goto_kb = (report["size"]["flash"] - nav["size"]["flash"]) / 1024
    assert main(["export-c", str(models[0]), "--navigate", str(models[1]), "--out", str(out), "--no-parity-check",
                 "--flash-budget-kb", f"{goto_kb + 1:.1f}"]) == 1
    assert "over budget" in capsys.readouterr().err


def test_help_explains_navigate(capsys):
    from robot_hrl.cli import main

    with pytest.raises(SystemExit):
        main(["export-c", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "--navigate LEVEL.onnx" in text and "both levels together" in text and "LearnedNavigator" in text


def _copy_with(src, dst, contract_edit=None, extra_metadata=None):
    model = onnx.load(str(src))
    for prop in model.metadata_props:
        if prop.key == CONTRACT_METADATA_KEY and contract_edit is not None:
            data = json.loads(prop.value)
            contract_edit(data)
            prop.value = json.dumps(data)
    if extra_metadata:
        entry = model.metadata_props.add()
        entry.key, entry.value = extra_metadata
    onnx.save(model, str(dst))
    return dst


def test_a_goto_model_given_as_the_level_is_refused(models, tmp_path):
    with pytest.raises(CodegenError, match="skill 'goto', not a navigate level; give the level"):
        generate_project(models[0], tmp_path / "cf", navigate=models[0])


def test_the_level_given_as_the_skill_is_refused(models, tmp_path):
    with pytest.raises(CodegenError, match="is a navigate level, not a skill: give the goto skill as the model"):
        generate_project(models[1], tmp_path / "cf")


def test_a_level_over_another_goto_model_is_refused(models, tmp_path):
    other = _copy_with(models[0], tmp_path / "other_goto.onnx", extra_metadata=("robot_hrl.note", "another export"))
    with pytest.raises(CodegenError, match=r"does not fit the goto skill .*lower skill model: sha256 .*retrain the level"):
        generate_project(other, tmp_path / "cf", navigate=models[1])


def test_a_level_over_another_goto_contract_is_refused(models, tmp_path):
    def edit(data):
        data["observations"][0]["description"] = "edited"

    other = _copy_with(models[0], tmp_path / "other_contract.onnx", contract_edit=edit)
    with pytest.raises(CodegenError, match="lower skill contract: hash"):
        generate_project(other, tmp_path / "cf", navigate=models[1])


def test_a_level_with_a_term_the_mcu_cannot_build_is_refused(models, tmp_path):
    def edit(data):
        data["observations"][0]["name"] = "heading_error"

    bad = _copy_with(models[1], tmp_path / "bad_nav.onnx", contract_edit=edit)
    with pytest.raises(CodegenError, match=r"--navigate .*terms \['heading_error'\] have no onboard \(C\) implementation"):
        generate_project(models[0], tmp_path / "cf", navigate=bad)


def test_a_level_without_contract_is_refused(models, tmp_path):
    model = onnx.load(str(models[1]))
    del model.metadata_props[:]
    onnx.save(model, str(tmp_path / "bare.onnx"))
    with pytest.raises(CodegenError, match="carries no contract"):
        generate_project(models[0], tmp_path / "cf", navigate=tmp_path / "bare.onnx")


# ---- the level's app task: the firmware's services in, the commander's setpoints out ----------------------------
@pytest.mark.parametrize("seed", [5, 6, 7])
def test_the_app_task_flies_the_python_levels_subgoals(built, seed, tmp_path):
    """nav_task.c's steps (100 ms) against the planner node's learned mode on the same inputs: the memory fed at its
    rate, a decision at the decision rate toward the goal parameters, readings taken as range_for_observation takes
    them (a NaN dropped, the previous kept; +-inf clamped), the subgoal sent every step as an absolute position
    setpoint at COMMANDER_PRIORITY_EXTRX; a NaN state refused (the last subgoal held); off: nothing sent."""
    from deploy.crazyflie.host_navigate import HostNavigatorTask
    from robot_hrl.errors import ObservationError
    from robot_hrl.planning.learned import range_for_observation

    project, host, navigator = built
    task = HostNavigatorTask(HostController.build(project, tmp_path / "host_task"))
    contract, sensors = project.navigate.contract, project.navigate.sensors
    decide_every = int(round(10 / contract.decision_rate_hz))
    sense_every = int(round(10 / contract.memory.update_rate_hz))
    rng = np.random.default_rng(seed)
    _, _, _, sent0 = task.setpoint()
    refused0, decided0 = task.log("refused"), task.log("decisions")
    task.step([0, 0, 1], [1, 0, 0, 0], [0, 0, 0], np.full(6, 2.0))
    assert task.setpoint()[3] == sent0 and task.log("navState") == 0  # off by default: nothing sent
    goal = np.array([4.0, -3.0], dtype=np.float32)
    task.set_param("goalX", float(goal[0]))
    task.set_param("goalY", float(goal[1]))
    task.set_param("navEnable", 1)
    navigator.reset()
    readings = np.array([s.max_range_m for s in sensors])
    pos = np.array([-2.0, 1.0, 1.0])
    subgoal = None
    refused_steps = []
    fault = decide_every * int(rng.integers(1, 80 // decide_every))  # a decision step, drawn
    for k in range(80):
        pos = pos + np.r_[rng.uniform(-0.15, 0.15, 2), 0.0]
        yaw = rng.uniform(-math.pi, math.pi)
        q = np.array([math.cos(yaw / 2), 0.0, 0.0, math.sin(yaw / 2)])
        v = rng.normal(0.0, 0.5, 3)
        raw = np.where(rng.random(6) < 0.2, np.inf, rng.uniform(0.0, 4.5, 6))
        raw[rng.random(6) < 0.05] = np.nan
        raw[rng.random(6) < 0.05] = -np.inf
        if k == fault:
            pos_sent = pos.copy()
            pos_sent[0] = np.nan  # a faulty state estimate at a decision step
        else:
            pos_sent = pos
        p32, q32, v32 = (np.asarray(x, dtype=np.float32).astype(np.float64) for x in (pos_sent, q, v))
        raw32 = raw.astype(np.float32).astype(np.float64)
        task.step(p32, q32, v32, raw32)
        for i, s in enumerate(sensors):  # the planner node's conversion
            try:
                readings[i] = np.float32(range_for_observation(s, raw32[i]))
            except ObservationError:
                pass
        if k % sense_every == 0:
            try:
                navigator.sense(p32, q32, readings)
            except ObservationError:
                pass
        if k % decide_every == 0:
            g = np.r_[goal.astype(np.float64), contract.subgoal.flight_height_m]
            try:
                subgoal = navigator.decide(p32, q32, v32, g)
            except ObservationError:
                refused_steps.append(k)
        position, modes, priority, sent = task.setpoint()
        assert sent == sent0 + k + 1 and modes == (1, 1, 1) and priority == 3  # modeAbs, COMMANDER_PRIORITY_EXTRX
        assert float(np.max(np.abs(position - subgoal))) <= PARITY_TOLERANCE, k
    decisions = len(range(0, 80, decide_every))
    assert refused_steps == [fault] and task.log("refused") - refused0 == 1
    assert task.log("decisions") - decided0 == decisions - 1
    # within the tolerance of the goal the goal itself is held (the planner ends the goto step there)
    for k in range(decide_every):
        task.step([goal[0] + 0.1, goal[1] - 0.1, 1.0], [1, 0, 0, 0], [0, 0, 0], np.full(6, 2.0))
    position, _, _, sent = task.setpoint()
    assert task.log("navState") == 3 and np.allclose(position, [goal[0], goal[1], contract.subgoal.flight_height_m])
    task.set_param("navEnable", 0)
    task.step(pos, q, v, raw)
    assert task.setpoint()[3] == sent and task.log("navState") == 0  # off: nothing more is sent
