"""The navigate pipeline end to end, small: train (1 DAgger + 1 PPO iteration) -> export ONNX with the contract -> load
through onnxruntime, refused over another goto skill -> fly held-out rooms in the batched simulator and PyBullet."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import onnx
import pytest
import torch

from robot_hrl.contract.navigate import NAVIGATE_METADATA_KEY, NavigateContract
from robot_hrl.errors import ContractError
from robot_hrl.runtime import read_model_metadata
from robot_hrl.world.rooms import generate_room, room_seeds


@pytest.fixture(scope="module")
def trained(tmp_path_factory, repo_root):
    run = tmp_path_factory.mktemp("nav_run")
    out = subprocess.run([sys.executable, "sim/train_navigate.py", "--run-dir", str(run), "--num-envs", "16",
                          "--max-iterations", "1", "--rooms-per-density", "1", "--threads", "1", "--dagger-iterations", "1",
                          "--near-weight", "4", "--expert-clearance", "0.55", "--dagger-checkpoint-every", "1",
                          "--export", str(run / "nav.onnx")], capture_output=True, text=True, cwd=repo_root)
    assert out.returncode == 0, out.stderr[-3000:]
    return run


def test_export_carries_the_contract_and_matches_torch(trained):
    meta = read_model_metadata(trained / "nav.onnx")
    contract = NavigateContract.from_json(meta[NAVIGATE_METADATA_KEY])
    assert contract == NavigateContract.from_json((trained / "navigate_contract.json").read_text())
    summary = json.loads((trained / "train_summary.json").read_text())
    assert summary["iterations"] == 1 and summary["skill_sha256"] == contract.lower_skill.model_sha256
    assert summary["dagger"]["iterations"] == 1 and summary["dagger"]["samples"] == 16 * 24  # DAgger, then PPO
    assert summary["dagger"]["cfg"]["near_weight"] == 4.0 and summary["dagger"]["expert"]["clearance_m"] == 0.55
    assert (trained / "dagger_checkpoints" / "it_1.pt").is_file()  # kept to choose from, not a model_*.pt the export picks
    assert any(p.name.startswith("events.out.tfevents") for p in (trained / "dagger").iterdir())
    assert (trained / "nav.onnx.sha256").read_text().split()[0] == __import__("hashlib").sha256((trained / "nav.onnx").read_bytes()).hexdigest()
    assert any(p.name.startswith("events.out.tfevents") for p in trained.iterdir())  # TensorBoard


def test_refused_over_another_skill(trained, tmp_path, repo_root):
    from sim.evaluate_navigate import load_learned

    load_learned(trained / "nav.onnx", repo_root / "models/crazyflie_goto.onnx")
    model = onnx.load(repo_root / "models/crazyflie_goto.onnx")
    model.graph.initializer[1].float_data[:] = []  # another goto model: same contract, other weights
    arr = onnx.numpy_helper.to_array(model.graph.initializer[1]).copy() + 0.01
    model.graph.initializer[1].CopyFrom(onnx.numpy_helper.from_array(arr, model.graph.initializer[1].name))
    onnx.save(model, tmp_path / "other_goto.onnx")
    with pytest.raises(ContractError, match="another goto model"):
        load_learned(trained / "nav.onnx", tmp_path / "other_goto.onnx")
    out = subprocess.run([sys.executable, "sim/evaluate_navigate.py", "--model", str(trained / "nav.onnx"), "--skill",
                          str(tmp_path / "other_goto.onnx"), "--rooms", "1"], capture_output=True, text=True, cwd=repo_root)
    assert out.returncode == 1 and "does not fit this goto skill" in out.stderr


def test_batched_and_pybullet_evaluation_run_on_held_out_rooms(trained, repo_root, tmp_path):
    import cv2

    from sim.evaluate_navigate import (
        batched_planners, evaluate_batched, fly_pybullet, load_learned, plot_results, plot_trajectories,
    )
    from sim.navigate_baselines import reactive_potential_field

    rooms = [generate_room(d, s, "eval") for d in ("sparse", "dense") for s in room_seeds("eval", 1)]  # (short episodes: a smoke run)
    contract, session = load_learned(trained / "nav.onnx", repo_root / "models/crazyflie_goto.onnx")
    results = evaluate_batched(batched_planners(session, rooms), rooms, repo_root / "models/crazyflie_goto.onnx",
                               episode_length_s=4.0)
    assert set(results) == {"learned", "reactive", "symbolic_full_map"}
    for r in results.values():
        assert len(r["episodes"]) == 2 and all(e is not None for e in r["episodes"])
        for by in r["by_density"].values():  # one flight per density: the interval holds the rate, and is wide
            lo, hi = by["success_ci95"]
            assert lo <= by["success_rate"] <= hi and hi - lo > 0.5
        for e in r["episodes"]:
            assert e["success"] + e["collided"] + e["time_out"] == 1
        for by in r["by_density"].values():
            assert sum(by["failures"].values()) == round(by["episodes"] * (1 - by["success_rate"]))
    assert plot_results(results, tmp_path, "t").is_file()
    # every flight's path: from the room's start, at the decision rate, to where the episode ended
    for r in results.values():
        for e, room in zip(r["episodes"], rooms):
            path = np.asarray(e["path_xy_w"])
            assert path.shape[1] == 2 and len(path) >= 2
            assert np.linalg.norm(path[0] - np.asarray(room.start_w[:2])) < 0.05
            assert np.allclose(path[-1], e["end_position_w"][:2], atol=1e-3)
            assert np.linalg.norm(np.diff(path, axis=0), axis=1).max() < 5.0 * 0.5  # 5 m/s for half a second at most
    written = plot_trajectories(results, rooms, tmp_path / "paths", "navigate batched")
    assert sorted(p.name for p in written) == sorted(f"navigate_batched_{n}_{d}_paths.png" for n in results
                                                     for d in ("sparse", "dense"))
    for png in written:
        image = cv2.imread(str(png))  # the start's green dot is drawn in every panel (tab:green, BGR 44 160 44)
        assert image is not None and image.shape[0] > 100
        assert (np.abs(image.astype(int) - (44, 160, 44)).max(axis=-1) < 40).sum() > 10
    # PyBullet: the reactive planner, one room; judged against the room's geometry
    room = rooms[0]
    r = fly_pybullet(room, lambda obs: reactive_potential_field(torch.from_numpy(obs)).numpy(),
                     repo_root / "models/crazyflie_goto.onnx", seed=0, time_limit_s=4.0)
    path = r["positions_w"]
    kept = np.asarray(r["path_xy_w"])
    assert np.allclose(kept[0], path[0, :2], atol=1e-3) and np.allclose(kept[-1], path[-1, :2], atol=1e-3)
    assert abs(len(kept) - (r["time_s"] * 2.0 + 2)) <= 2  # one point per decision (2 Hz) and the last
    touched = min(o.distance(p) for o in room.world.obstacles for p in path[::5])
    assert r["success"] + r["collided"] + r["time_out"] == 1
    if not r["collided"]:
        assert touched > 0.0
    if r["success"]:
        assert np.linalg.norm(path[-1] - np.array(room.goal_w)) < 0.3
    # the learned level in PyBullet: its contract's observation (with the range memory) and decision rate
    r = fly_pybullet(room, lambda obs: session.run(None, {"obs": obs.astype(np.float32)})[0],
                     repo_root / "models/crazyflie_goto.onnx", seed=0, time_limit_s=2.0, contract=contract)
    assert contract.memory is not None and r["success"] + r["collided"] + r["time_out"] == 1


def test_evaluate_flies_only_the_planners_asked_for(repo_root, tmp_path):
    out = subprocess.run([sys.executable, "sim/evaluate_navigate.py", "--planners", "reactive", "--rooms", "1",
                          "--threads", "1", "--json", str(tmp_path / "r.json"), "--plots", str(tmp_path / "plots")],
                         capture_output=True, text=True, cwd=repo_root)
    assert out.returncode == 0, out.stderr[-2000:]
    assert set(json.loads((tmp_path / "r.json").read_text())) == {"reactive"}
    assert sorted(p.name for p in (tmp_path / "plots").iterdir()) == sorted(
        ["navigate_batched_success_by_density.png"]
        + [f"navigate_batched_reactive_{d}_paths.png" for d in ("sparse", "medium", "dense")])
    out = subprocess.run([sys.executable, "sim/evaluate_navigate.py", "--planners", "learned", "--rooms", "1"],
                         capture_output=True, text=True, cwd=repo_root)
    assert out.returncode != 0 and "['learned'] not among this run's planners" in out.stderr and "needs --model" in out.stderr


def test_a_longer_time_limit_flies_the_same_flights_and_reports_success_within_the_evaluations(repo_root, tmp_path):
    """``--time-limit-s``: until the evaluation's 30 s the flights are the same ones (the limit enters no observation
    and no random stream), so success within 30 s of a 40 s run is the 30 s run's success, flight by flight."""
    runs = {}
    for limit in ("30", "40"):
        out = subprocess.run([sys.executable, "sim/evaluate_navigate.py", "--planners", "reactive", "--rooms", "2",
                              "--threads", "1", "--time-limit-s", limit, "--json", str(tmp_path / f"{limit}.json")],
                             capture_output=True, text=True, cwd=repo_root)
        assert out.returncode == 0, out.stderr[-2000:]
        lines = [ln for ln in out.stdout.splitlines() if ln.startswith("batched")]
        assert len(lines) == 3 and all(("success within 30 s" in ln) == (limit == "40") for ln in lines)
        runs[limit] = json.loads((tmp_path / f"{limit}.json").read_text())["reactive"]
    for a, b in zip(runs["30"]["episodes"], runs["40"]["episodes"]):
        assert a["room"] == b["room"]
        assert a["success"] == (b["success"] and b["time_s"] <= 30.0)
    for d, s30 in runs["30"]["by_density"].items():
        s40 = runs["40"]["by_density"][d]
        assert s40["success_rate_within_evaluation_limit"] == s30["success_rate"] == s30["success_rate_within_evaluation_limit"]
        assert s40["success_rate"] >= s30["success_rate"]
    bad = subprocess.run([sys.executable, "sim/evaluate_navigate.py", "--time-limit-s", "-5"], capture_output=True,
                         text=True, cwd=repo_root)
    assert bad.returncode == 2 and "--time-limit-s must be a number of seconds > 0" in bad.stderr


def test_success_interval_is_scipys_wilson_interval():
    """The evaluation's 95 % interval of a success rate against scipy's own (binomtest's Wilson interval)."""
    stats = pytest.importorskip("scipy.stats")
    from sim.evaluate_navigate import success_interval

    for flights in (1, 2, 10, 30, 50, 150):
        for successes in sorted({0, 1, flights // 3, flights // 2, flights - 1, flights}):
            ci = stats.binomtest(successes, flights).proportion_ci(confidence_level=0.95, method="wilson")
            assert success_interval(successes, flights) == pytest.approx((ci.low, ci.high), abs=1e-12), (successes, flights)
    assert success_interval(0, 0) == (0.0, 1.0)
    lo, hi = success_interval(25, 30)  # PyBullet's dense figure: 0.833 cannot be told from 0.85 on 30 flights
    assert lo < 0.85 < hi
