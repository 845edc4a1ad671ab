"""deploy/export.py: the exported graph, its metadata, the self-check, the checksum and the CLI."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch
from tensordict import TensorDict

from deploy import export as export_cli
from deploy.onnx_export import ExportableActor, ExportError, export_policy, find_checkpoint, self_check_observations
from deploy.onnx_export.exporter import _self_check
from deploy.onnx_export.source import eval_summary, read_run_config
from robot_hrl.contract import CONTRACT_METADATA_KEY, PolicyContract, goto_contract
from robot_hrl.robots import CRAZYFLIE_2X
from robot_hrl.runtime import OnnxPolicy, decode_provenance, sha256_file

CONTRACT = goto_contract(CRAZYFLIE_2X)
PROVENANCE = {"command": {"train": "python sim/train.py", "export": "python deploy/export.py x"}, "git_commit": "0123abc", "seed": 3}


def make_actor(n_obs: int = 22, seed: int = 0):
    """A real rsl_rl actor (the class sim/agents uses) with non-trivial normalization statistics."""
    from rsl_rl.models import MLPModel

    torch.manual_seed(seed)
    obs = TensorDict({"policy": torch.zeros(4, n_obs)}, batch_size=[4])
    actor = MLPModel(
        obs, {"actor": ["policy"]}, "actor", 4, hidden_dims=[32, 32], activation="elu", obs_normalization=True,
        distribution_cfg={"class_name": "GaussianDistribution", "init_std": 0.5},
    )
    with torch.no_grad():
        actor.obs_normalizer._mean.uniform_(-0.5, 0.5)
        actor.obs_normalizer._std.uniform_(0.1, 2.0)
        actor.mlp[-1].weight.mul_(8.0)  # large outputs, so that the clip is exercised
    return actor.eval()


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    actor = make_actor()
    out = tmp_path_factory.mktemp("export") / "policy.onnx"
    report = export_policy(actor, CONTRACT, out, provenance=PROVENANCE)
    return actor, report


def test_graph_reproduces_the_actor_deterministic_path(exported):
    actor, report = exported
    obs = self_check_observations(CONTRACT, 2000, seed=5)
    with torch.inference_mode():
        expected = actor(TensorDict({"policy": torch.from_numpy(obs)}, batch_size=[len(obs)])).clamp(-1.0, 1.0).numpy()
    session = ort.InferenceSession(str(report.path), providers=["CPUExecutionProvider"])
    got = session.run(["actions"], {"obs": obs})[0]
    assert np.max(np.abs(got - expected)) <= 1e-5
    assert np.any(np.abs(got) == 1.0), "the clip to [-1, 1] was not exercised"
    assert report.max_abs_diff <= 1e-5 and report.num_checked == 1000


def test_graph_signature_ops_and_size(exported):
    _, report = exported
    model = onnx.load(str(report.path))
    (inp,), (out,) = model.graph.input, model.graph.output
    assert (inp.name, out.name) == ("obs", "actions")
    in_dims = inp.type.tensor_type.shape.dim
    assert in_dims[0].dim_param and in_dims[1].dim_value == 22  # dynamic batch
    assert set(report.ops) <= {"Sub", "Div", "Gemm", "Elu", "Clip"} and report.ops[-1] == "Clip"
    assert report.size_bytes < 64 * 1024
    # no exporter debug info (stack traces with local paths) on the nodes; stable constant names
    assert all(len(node.metadata_props) == 0 for node in model.graph.node)
    assert {"obs_mean", "obs_std_plus_eps", "action_low", "action_high"} <= {i.name for i in model.graph.initializer}
    session = ort.InferenceSession(str(report.path), providers=["CPUExecutionProvider"])
    for batch in (1, 17):
        assert session.run(None, {"obs": np.zeros((batch, 22), np.float32)})[0].shape == (batch, 4)


def test_metadata_carries_contract_and_provenance(exported):
    _, report = exported
    props = {p.key: p.value for p in onnx.load(str(report.path)).metadata_props}
    assert PolicyContract.from_json(props[CONTRACT_METADATA_KEY]) == CONTRACT
    provenance = decode_provenance(props)
    assert provenance["command"] == PROVENANCE["command"]
    assert provenance["git_commit"] == "0123abc" and provenance["seed"] == 3
    assert provenance["export"]["self_check"]["observations"] == 1000
    assert provenance["export"]["torch"] == torch.__version__


def test_sha256_sidecar_is_in_sha256sum_format(exported):
    _, report = exported
    text = report.sha256_path.read_text()
    assert text == f"{sha256_file(report.path)}  {report.path.name}\n"
    check = subprocess.run(["sha256sum", "-c", report.sha256_path.name], cwd=report.path.parent, capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr


def test_runtime_loads_the_export(exported):
    actor, report = exported
    policy = OnnxPolicy(report.path, robot=CRAZYFLIE_2X)
    assert policy.contract == CONTRACT and policy.provenance["seed"] == 3
    obs = self_check_observations(CONTRACT, 3)[2]
    with torch.inference_mode():
        expected = actor(TensorDict({"policy": torch.from_numpy(obs[None])}, batch_size=[1])).clamp(-1, 1).numpy()[0]
    np.testing.assert_allclose(policy.infer(obs), expected, atol=1e-5)


# ---- failures ------------------------------------------------------------------------------------
def test_failed_self_check_leaves_no_file(tmp_path):
    out = tmp_path / "p.onnx"
    with pytest.raises(ExportError, match="self-check failed: onnxruntime and torch differ"):
        export_policy(make_actor(), CONTRACT, out, tolerance=-1.0)  # no graph can pass a negative tolerance
    assert list(tmp_path.iterdir()) == []


def test_self_check_catches_a_graph_that_is_not_the_policy(exported):
    _, report = exported
    other = ExportableActor(make_actor(seed=1)).eval()  # same shape, other weights
    with pytest.raises(ExportError, match="self-check failed"):
        _self_check(other, report.path, self_check_observations(CONTRACT, 1000), 1e-5)


def test_actor_that_does_not_fit_the_contract(tmp_path):
    with pytest.raises(ExportError, match="takes 21 observations.*contract says 22"):
        export_policy(make_actor(n_obs=21), CONTRACT, tmp_path / "p.onnx")


def test_actor_that_is_not_an_rsl_rl_mlp(tmp_path):
    with pytest.raises(ExportError, match="not an rsl_rl MLPModel"):
        export_policy(torch.nn.Linear(22, 4), CONTRACT, tmp_path / "p.onnx")


def test_bad_output_name_and_check_size(tmp_path):
    with pytest.raises(ExportError, match=r"must end in \.onnx"):
        export_policy(make_actor(), CONTRACT, tmp_path / "p.pt")
    with pytest.raises(ExportError, match="at least 1000"):
        export_policy(make_actor(), CONTRACT, tmp_path / "p.onnx", num_check=10)


def test_sources_that_are_not_runs(tmp_path):
    with pytest.raises(ExportError, match="does not exist"):
        find_checkpoint(tmp_path / "missing")
    with pytest.raises(ExportError, match="holds no checkpoint"):
        find_checkpoint(tmp_path)
    (tmp_path / "notes.txt").write_text("x")
    with pytest.raises(ExportError, match="is not a checkpoint"):
        find_checkpoint(tmp_path / "notes.txt")
    for it in (2, 10, 9):
        (tmp_path / f"model_{it}.pt").write_bytes(b"")
    assert find_checkpoint(tmp_path) == (tmp_path, tmp_path / "model_10.pt", 10)
    with pytest.raises(ExportError, match="has no run_config.json"):
        read_run_config(tmp_path)
    (tmp_path / "run_config.json").write_text("{broken")
    with pytest.raises(ExportError, match="cannot read the run configuration"):
        read_run_config(tmp_path)


def test_eval_summary_keeps_scalars_only():
    evaluation = {"success_rate": 0.97, "num_episodes": 1000, "episodes": list(range(1000)), "time_breakdown_s": {"sim": 1.0}}
    assert eval_summary(evaluation) == {"success_rate": 0.97, "num_episodes": 1000, "time_breakdown_s": {"sim": 1.0}}
    assert eval_summary(None) is None


def test_provenance_says_when_eval_json_is_about_another_checkpoint(tmp_path):
    from deploy.onnx_export import RunSource, provenance_from_source

    source = RunSource(
        run_dir=tmp_path, checkpoint=tmp_path / "model_5.pt", iteration=5, actor=None, contract=CONTRACT,
        run_config={"task": "crazyflie-goto", "command": "python sim/train.py", "seed": 1, "git_commit": "abc", "env_cfg": {}},
        eval={"success_rate": 0.9, "checkpoint": str(tmp_path / "model_9.pt")},
    )
    provenance = provenance_from_source(source, "python deploy/export.py x")
    assert provenance["eval"]["matches_exported_checkpoint"] is False
    assert provenance["checkpoint"] == {"file": "model_5.pt", "iteration": 5, "run_dir": tmp_path.name}
    assert provenance["config"] == {"task": "crazyflie-goto", "env_cfg": {}}
    assert provenance["command"] == {"export": "python deploy/export.py x", "train": "python sim/train.py"}
    assert provenance["lineage"] == [{"command": "python sim/train.py", "git_commit": "abc", "seed": 1, "resumed_from": None}]


def test_provenance_lists_every_training_stage_of_a_fine_tuned_run(tmp_path):
    from deploy.onnx_export import RunSource, provenance_from_source

    base = {"command": "python sim/train.py --seed 0", "git_commit": "aaa", "seed": 0}
    fine = {"command": "python sim/train.py --resume runs/base --seed 1", "git_commit": "bbb", "seed": 1,
            "resumed_from": "runs/base/model_999.pt", "parent_run_config": base, "task": "crazyflie-goto",
            "env_cfg": {"a": 1}, "eval_env_cfg": {"a": 2}}
    source = RunSource(run_dir=tmp_path, checkpoint=tmp_path / "model_1499.pt", iteration=1499, actor=None,
                       contract=CONTRACT, run_config=fine, eval=None)
    provenance = provenance_from_source(source, "python deploy/export.py x")
    assert [stage["command"] for stage in provenance["lineage"]] == [base["command"], fine["command"]]
    assert provenance["lineage"][1]["resumed_from"] == "runs/base/model_999.pt"
    assert provenance["lineage"][0]["resumed_from"] is None
    assert provenance["config"]["eval_env_cfg"] == {"a": 2}


# ---- the command line ------------------------------------------------------------------------------
def test_help_explains_the_command(repo_root):
    out = subprocess.run([sys.executable, "deploy/export.py", "--help"], cwd=repo_root, capture_output=True, text=True, check=True)
    for word in ("run directory", "robot_hrl.contract", "1e-5", "sha256", "--out", "dynamic batch"):
        assert word in out.stdout


def test_cli_rejects_bad_arguments(tmp_path, capsys):
    with pytest.raises(SystemExit) as info:
        export_cli.main([str(tmp_path), "--num-check", "5"])
    assert info.value.code == 2 and "at least 1000" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        export_cli.main([str(tmp_path), "--out", "x.pt"])
    assert "must name an .onnx file" in capsys.readouterr().err
    assert export_cli.main([str(tmp_path / "nope"), "--out", str(tmp_path / "p.onnx")]) == 2
    assert "does not exist" in capsys.readouterr().err


def test_train_then_export_end_to_end(tmp_path, repo_root):
    """A real (tiny) training run of sim/train.py, exported by the real command line."""
    from sim import train

    run_dir = tmp_path / "run"
    assert train.main(["--num-envs", "32", "--max-iterations", "1", "--eval-episodes", "4", "--run-dir", str(run_dir), "--no-progress"]) == 0
    out = tmp_path / "models" / "goto.onnx"
    result = subprocess.run(
        [sys.executable, "deploy/export.py", str(run_dir), "--out", str(out)], cwd=repo_root, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == str(out)
    assert "self-check" in result.stderr and "sha256" in result.stderr

    policy = OnnxPolicy(out)
    provenance = policy.provenance
    config = json.loads((run_dir / "run_config.json").read_text())
    assert provenance["command"]["train"] == config["command"]
    assert provenance["command"]["export"].startswith("python deploy/export.py")
    assert provenance["git_commit"] == config["git_commit"] and provenance["seed"] == config["seed"]
    assert provenance["config"]["task"] == "crazyflie-goto" and "agent_cfg" in provenance["config"]
    assert provenance["eval"]["num_episodes"] == 4 and provenance["eval"]["matches_exported_checkpoint"] is True
    assert provenance["checkpoint"]["iteration"] == 0

    # the exported graph equals the checkpoint's inference policy, loaded the way sim loads it
    from sim.runs import load_run

    env, runner = load_run(run_dir)
    obs = self_check_observations(policy.contract, 1000, seed=9)
    with torch.inference_mode():
        expected = runner.get_inference_policy()(TensorDict({"policy": torch.from_numpy(obs)}, batch_size=[1000]))
    np.testing.assert_allclose(policy.infer(obs), expected.clamp(-1, 1).numpy(), atol=1e-5)
    assert policy.contract == env.contract
