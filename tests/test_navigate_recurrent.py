"""A recurrent navigate level (``sim/train_navigate.py --memory-gru H``): a GRU beside the feed-forward level's MLP.

Warm-started from the shipped level it acts exactly as the file does; it trains with rsl_rl's recurrent PPO; its export
takes the state beside the observation (the contract's ``recurrent``) and matches the training actor over a sequence of
decisions; the runtime level (robot_hrl.planning.learned) and the batched evaluation carry the state and start each goal
from zeros; a graph that does not match its contract is refused with the fix; the Crazyflie C generator takes it (its
parity: tests/test_crazyflie_navigate_recurrent.py). The level: conftest.py's ``recurrent_run``
(tests/recurrent_level.py)."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch

from robot_hrl.contract.navigate import NAVIGATE_METADATA_KEY, NavigateContract, RecurrentSpec
from robot_hrl.errors import ContractError
from robot_hrl.geometry import quat_from_euler_rpy
from robot_hrl.planning.learned import LearnedNavigator
from robot_hrl.robots import CRAZYFLIE_2X
from robot_hrl.runtime import read_model_metadata

from recurrent_level import HIDDEN


def _actor(run):
    """The run's training actor (rsl_rl's model class from its train cfg), loaded from model_999.pt."""
    from rsl_rl.utils import resolve_callable
    from tensordict import TensorDict

    cfg = json.loads((run / "train_cfg.json").read_text())["actor"]
    contract = NavigateContract.from_json((run / "navigate_contract.json").read_text())
    model = resolve_callable(cfg["class_name"])(TensorDict({"policy": torch.zeros(1, contract.observation_size)}, batch_size=[1]),
                                                {"actor": ["policy"]}, "actor", 2,
                                                **{k: v for k, v in cfg.items() if k != "class_name"})
    model.load_state_dict(torch.load(run / "model_999.pt", weights_only=False)["actor_state_dict"])
    return model.eval(), contract


def test_a_memory_level_starts_as_the_file_it_warm_starts_from(repo_root):
    """--init-onnx with --memory-gru: the GRU's columns of the MLP's first layer start at zero, so the actor computes
    the file's actions whatever its state holds, decision after decision."""
    from rsl_rl.runners import OnPolicyRunner
    from tensordict import TensorDict

    from sim.agents.ppo_navigate import ppo_navigate_cfg
    from sim.agents.warm_start import navigate_contract_of, warm_start_navigate
    from sim.envs.nav_rooms import RoomPool
    from sim.envs.navigate_env import NavigateEnv
    from sim.envs.navigate_env_cfg import NavigateEnvCfg, NavigateHeadingCfg
    from robot_hrl.world.rooms import generate_room

    level = repo_root / "models/crazyflie_navigate_mlp.onnx"  # a feed-forward level (shipped until 2026-11-30)
    cfg = NavigateEnvCfg(skill_path=str(repo_root / "models/crazyflie_goto.onnx"), randomize=False)
    cfg.heading = NavigateHeadingCfg.of(navigate_contract_of(level).heading)
    env = NavigateEnv(cfg, num_envs=4, pool=RoomPool.from_rooms([generate_room("dense", 0)]))
    torch.manual_seed(0)
    runner = OnPolicyRunner(env, ppo_navigate_cfg(HIDDEN), log_dir=None, device="cpu")
    actor = runner.alg.actor
    assert actor.is_recurrent and actor.mlp[0].in_features == env.contract.observation_size + HIDDEN
    warm_start_navigate(level, actor, env.contract)
    session = ort.InferenceSession(str(level), providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(1)
    actor.eval()
    actor.reset()
    with torch.no_grad():
        for _ in range(4):  # the state moves; the actions do not depend on it
            x = rng.normal(size=(6, env.contract.observation_size)).astype(np.float32)
            got = actor(TensorDict({"policy": torch.from_numpy(x)}, batch_size=[6])).numpy()
            assert np.abs(np.clip(got, -1, 1) - session.run(None, {"obs": x})[0]).max() < 1e-5
    assert actor.get_hidden_state().abs().max() > 0.0


def test_the_export_names_its_state_and_matches_the_training_actor_over_a_sequence(recurrent_run):
    meta = read_model_metadata(recurrent_run / "nav.onnx")
    contract = NavigateContract.from_json(meta[NAVIGATE_METADATA_KEY])
    assert contract.recurrent == RecurrentSpec(hidden_size=HIDDEN)
    assert contract.heading is not None  # (the shipped level's loop, kept by --init-onnx)
    session = ort.InferenceSession(str(recurrent_run / "nav.onnx"), providers=["CPUExecutionProvider"])
    assert [i.name for i in session.get_inputs()] == ["obs", "h_in"]
    assert [o.name for o in session.get_outputs()] == ["actions", "h_out"]
    actor, _ = _actor(recurrent_run)
    from tensordict import TensorDict

    rng = np.random.default_rng(2)
    actor.reset()
    h = np.zeros((1, 5, HIDDEN), np.float32)
    carried_matters = 0.0
    with torch.no_grad():
        for _ in range(6):  # rsl_rl's rollout step (its own hidden state) against the graph's, the state fed back
            x = rng.normal(size=(5, contract.observation_size)).astype(np.float32)
            ref = np.clip(actor(TensorDict({"policy": torch.from_numpy(x)}, batch_size=[5])).numpy(), -1, 1)
            got, h = session.run(None, {"obs": x, "h_in": h})
            assert np.abs(ref - got).max() < 1e-5
            fresh = session.run(None, {"obs": x, "h_in": np.zeros_like(h)})[0]
            carried_matters = max(carried_matters, float(np.abs(fresh - got).max()))
    assert carried_matters > 1e-3  # (the test's level uses its state: the comparison above is not of zeros)


def test_the_runtime_level_carries_its_state_and_starts_each_goal_from_zeros(recurrent_run, repo_root):
    level, skill = recurrent_run / "nav.onnx", repo_root / "models/crazyflie_goto.onnx"
    nav = LearnedNavigator.load(level, CRAZYFLIE_2X, skill)
    session = ort.InferenceSession(str(level), providers=["CPUExecutionProvider"])
    q = quat_from_euler_rpy(0.0, 0.0, 0.3)
    p, v = np.array([0.0, 0.0, 0.5]), np.array([0.2, 0.0, 0.0])
    goal_a, goal_b = np.array([5.0, 1.0, 0.5]), np.array([-3.0, 4.0, 0.5])
    nav.sense(p, q, [1.5, 4.0, 4.0, 2.0, 4.0, 0.5])
    h = np.zeros((1, 1, HIDDEN), np.float32)
    for _ in range(3):  # the same inputs: the state alone changes the answer
        obs = nav.observation(p, q, v, goal_a)
        action, h = session.run(None, {"obs": obs[None], "h_in": h})
        nav.decide(p, q, v, goal_a)
        np.testing.assert_array_equal(nav.state, h)
    assert np.abs(nav.state).max() > 0.0
    nav.reset()  # a new task: the state goes with the memory and the last subgoal
    assert nav.state is None and nav.state_goal_w is None


def test_a_new_goal_starts_from_zeros(recurrent_run, repo_root):
    """The state built toward one goal is not carried to the next (the contract's ``recurrent.reset``: new_goal): the
    first decision toward a new goal is the graph's from zeros."""
    level, skill = recurrent_run / "nav.onnx", repo_root / "models/crazyflie_goto.onnx"
    nav = LearnedNavigator.load(level, CRAZYFLIE_2X, skill)
    session = ort.InferenceSession(str(level), providers=["CPUExecutionProvider"])
    q = quat_from_euler_rpy(0.0, 0.0, -0.4)
    p, v = np.array([1.0, 2.0, 0.5]), np.array([0.0, 0.3, 0.0])
    nav.sense(p, q, [4.0, 4.0, 4.0, 4.0, 4.0, 0.5])
    for _ in range(3):
        nav.decide(p, q, v, np.array([5.0, 1.0, 0.5]))
    goal_b = np.array([3.0, 3.0, 0.5])
    obs = nav.observation(p, q, v, goal_b)
    from_zeros, h = session.run(None, {"obs": obs[None], "h_in": np.zeros((1, 1, HIDDEN), np.float32)})
    carried, _ = session.run(None, {"obs": obs[None], "h_in": nav.state})
    assert np.abs(from_zeros - carried).max() > 1e-4  # (the test can tell the two apart)
    nav.decide(p, q, v, goal_b)
    np.testing.assert_array_equal(nav.state, h)


def test_a_graph_that_does_not_match_its_recurrent_contract_is_refused(recurrent_run, repo_root, tmp_path):
    skill = repo_root / "models/crazyflie_goto.onnx"

    def with_contract(src, edit, name):
        model = onnx.load(str(src))
        for prop in model.metadata_props:
            if prop.key == NAVIGATE_METADATA_KEY:
                data = json.loads(prop.value)
                edit(data)
                prop.value = json.dumps(data)
        onnx.save(model, str(tmp_path / name))
        return tmp_path / name

    claims = with_contract(repo_root / "models/crazyflie_navigate_mlp.onnx",
                           lambda d: d.update(recurrent={"kind": "gru", "hidden_size": 8}), "claims_state.onnx")
    with pytest.raises(ContractError, match=r"takes inputs \['obs'\], its contract says \['obs', 'h_in'\].*export the level again"):
        LearnedNavigator.load(claims, CRAZYFLIE_2X, skill)
    hides = with_contract(recurrent_run / "nav.onnx", lambda d: d.update(recurrent=None), "hides_state.onnx")
    with pytest.raises(ContractError, match=r"takes inputs \['obs', 'h_in'\], its contract says \['obs'\]"):
        LearnedNavigator.load(hides, CRAZYFLIE_2X, skill)
    out = subprocess.run([sys.executable, "sim/evaluate_navigate.py", "--model", str(claims), "--rooms", "1"],
                         capture_output=True, text=True, cwd=repo_root)  # (the batched evaluation refuses it too)
    assert out.returncode == 1 and "its contract says ['obs', 'h_in']" in out.stderr and "export the level again" in out.stderr
    bad = with_contract(recurrent_run / "nav.onnx", lambda d: d.update(recurrent={"kind": "gru", "hidden_size": 0}),
                        "bad_state.onnx")
    with pytest.raises(ContractError, match=r"(?s)malformed.*recurrent.hidden_size.*greater than 0.*re-export the model"):
        LearnedNavigator.load(bad, CRAZYFLIE_2X, skill)


def test_the_batched_evaluation_carries_the_state_and_resets_it(recurrent_run):
    from sim.evaluate_navigate import BatchedLevel

    session = ort.InferenceSession(str(recurrent_run / "nav.onnx"), providers=["CPUExecutionProvider"])
    level = BatchedLevel(session)
    assert level.hidden_size == HIDDEN
    rng = np.random.default_rng(3)
    xs = [rng.normal(size=(4, 29)).astype(np.float32) for _ in range(3)]
    h = np.zeros((1, 4, HIDDEN), np.float32)
    for x in xs:
        ref, h = session.run(None, {"obs": x, "h_in": h})
        np.testing.assert_array_equal(level(None, torch.from_numpy(x)).numpy(), ref)
    level.reset()
    ref = session.run(None, {"obs": xs[0], "h_in": np.zeros((1, 4, HIDDEN), np.float32)})[0]
    np.testing.assert_array_equal(level(None, torch.from_numpy(xs[0])).numpy(), ref)


def test_the_c_generator_takes_a_recurrent_level(recurrent_run, repo_root, tmp_path):
    """The contract passes the C generator's check, and the level's C keeps the GRU's state between decisions (its
    parity with this module's runtime level: tests/test_crazyflie_navigate_recurrent.py)."""
    from deploy.crazyflie.c_navigate import check_navigate_contract
    from deploy.crazyflie.codegen import generate_project
    from robot_hrl.sensing import robot_range_sensors

    contract = NavigateContract.from_json(read_model_metadata(recurrent_run / "nav.onnx")[NAVIGATE_METADATA_KEY])
    check_navigate_contract(contract, robot_range_sensors(CRAZYFLIE_2X))
    project = generate_project(repo_root / "models/crazyflie_goto.onnx", tmp_path / "cf", navigate=recurrent_run / "nav.onnx")
    assert project.navigate.model.state_size == HIDDEN
    assert f"#define NAV_MODEL_STATE_SIZE {HIDDEN}" in (project.src_dir / "nav_model.h").read_text()
    assert "nav_forward(obs, navState, action);" in (project.src_dir / "nav_io.c").read_text()


def test_a_negative_memory_is_refused(repo_root):
    out = subprocess.run([sys.executable, "sim/train_navigate.py", "--memory-gru", "-1"], capture_output=True, text=True,
                         cwd=repo_root)
    assert out.returncode != 0 and "--memory-gru -1: give 0 (no memory) or the GRU's units, e.g. 32" in out.stderr


def test_a_recurrent_level_is_not_warm_started_from_its_onnx_and_the_refusal_names_the_fix(repo_root, tmp_path):
    """``--init-onnx`` reads a feed-forward level's MLP; the shipped level is recurrent (a GRU of 16), whose GRU is not
    read back from its graph: refused before anything is built, with --resume and the feed-forward file named."""
    out = subprocess.run([sys.executable, "sim/train_navigate.py", "--init-onnx", "models/crazyflie_navigate.onnx",
                          "--run-dir", str(tmp_path / "run"), "--max-iterations", "1"],
                         capture_output=True, text=True, cwd=repo_root)
    assert out.returncode == 1, out.stderr[-2000:]
    assert "a recurrent level (a GRU of 16)" in out.stderr and "--resume" in out.stderr
    assert "models/crazyflie_navigate_mlp.onnx" in out.stderr
    assert not (tmp_path / "run" / "train_cfg.json").exists()
