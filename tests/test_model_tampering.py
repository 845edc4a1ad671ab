"""Model files (issue #16, finding 9): a model without its checksum sidecar loads with a loud warning, and is
refused with require_sha256 (on in launch/params/navigation.yaml); a contract edited to implausible values is
refused by name against the robot model. The edits are made to a copy of the shipped model with onnx (the
graph untouched, only the contract's metadata rewritten), then loaded by the real runtime (onnxruntime)."""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path

import onnx
import pytest
import yaml

from robot_hrl.contract.plausibility import plausibility_problems
from robot_hrl.contract.schema import PolicyContract
from robot_hrl.errors import ContractError, ModelLoadError
from robot_hrl.robots import CRAZYFLIE_2X
from robot_hrl.runtime import OnnxPolicy, write_sha256_sidecar

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = ROOT / "models" / "crazyflie_goto.onnx"
CONTRACT_KEY = "robot_hrl.contract"


def _edited(tmp_path: Path, edit) -> Path:
    model = onnx.load(str(SHIPPED))
    props = {p.key: p for p in model.metadata_props}
    contract = json.loads(props[CONTRACT_KEY].value)
    edit(contract)
    props[CONTRACT_KEY].value = json.dumps(contract)
    out = tmp_path / "edited.onnx"
    onnx.save(model, str(out))
    write_sha256_sidecar(out)  # a consistent sidecar: the edit itself must be caught
    return out


def test_a_model_without_its_sidecar_warns_loudly_and_require_sha256_refuses_it(tmp_path, caplog):
    bare = tmp_path / "bare.onnx"
    shutil.copyfile(SHIPPED, bare)
    with caplog.at_level(logging.WARNING, logger="robot_hrl.runtime"):
        policy = OnnxPolicy(bare, CRAZYFLIE_2X, provider="cpu")
    assert policy.sha256 is None
    assert any("MODEL INTEGRITY NOT CHECKED" in r.getMessage() and "bare.onnx.sha256" in r.getMessage() for r in caplog.records)
    with pytest.raises(ModelLoadError, match=r"no checksum file bare\.onnx\.sha256 and require_sha256 is on.*sha256sum"):
        OnnxPolicy(bare, CRAZYFLIE_2X, provider="cpu", require_sha256=True)
    # with its sidecar it loads under require_sha256; bit-flipped weights are refused
    write_sha256_sidecar(bare)
    assert OnnxPolicy(bare, CRAZYFLIE_2X, provider="cpu", require_sha256=True).sha256 is not None
    data = bytearray(bare.read_bytes())
    data[len(data) // 2] ^= 0x10
    bare.write_bytes(bytes(data))
    with pytest.raises(ModelLoadError, match="integrity check failed"):
        OnnxPolicy(bare, CRAZYFLIE_2X, provider="cpu", require_sha256=True)


def test_the_launch_requires_the_sidecar():
    params = yaml.safe_load((ROOT / "launch" / "params" / "navigation.yaml").read_text())
    assert params["skill_node"]["ros__parameters"]["require_sha256"] is True


def _scale_term(name, factor):
    def edit(c):
        for t in c["action"]["terms"]:
            if t["name"] == name:
                t["low"], t["high"] = t["low"] * factor, t["high"] * factor
    return edit


def _clip(name, lo, hi):
    def edit(c):
        for t in c["observations"]:
            if t["name"] == name:
                t["clip"] = [lo, hi]
    return edit


EDITS = {
    "thrust x10": (_scale_term("collective_thrust", 10.0), "collective_thrust"),
    "torque x100": (_scale_term("torque_x", 100.0), "torque_x"),
    "subgoal error clip +-200 m": (_clip("subgoal_error_w", -200.0, 200.0), "subgoal radii"),
    "velocity clip +-100 m/s": (_clip("linear_velocity_w", -100.0, 100.0), "speed limit"),
    "body rate clip +-500 rad/s": (_clip("angular_velocity_b", -500.0, 500.0), "gyro"),
    "normalized clip +-3": (_clip("last_action", -3.0, 3.0), r"within \[-1, 1\]"),
    "5 Hz": (lambda c: c.update(control_rate_hz=5.0), "control rate"),
    "20 m subgoal radius": (lambda c: c.update(subgoal_radius_m=20.0), "subgoal radius 20"),
}


@pytest.mark.parametrize("name", sorted(EDITS))
def test_an_implausible_contract_is_refused_by_name(tmp_path, name):
    edit, match = EDITS[name]
    with pytest.raises(ContractError, match=match):
        OnnxPolicy(_edited(tmp_path, edit), CRAZYFLIE_2X, provider="cpu")


def test_a_rate_other_than_the_shields_is_refused(tmp_path):
    """50 Hz is a plausible rate, but not the one the Crazyflie's shield is designed for (100 Hz)."""
    from robot_hrl.safety import load_shield_config

    contract = PolicyContract.from_json(json.dumps({**json.loads(_metadata()[CONTRACT_KEY]), "control_rate_hz": 50.0}))
    rate = load_shield_config(CRAZYFLIE_2X.shield_config_path).control_rate_hz
    problems = plausibility_problems(contract, CRAZYFLIE_2X, shield_control_rate_hz=rate)
    assert any("shield is designed for 100 Hz" in p for p in problems)
    assert plausibility_problems(contract, CRAZYFLIE_2X) == []


def test_the_shipped_contract_is_plausible():
    contract = PolicyContract.from_json(_metadata()[CONTRACT_KEY])
    assert plausibility_problems(contract, CRAZYFLIE_2X, shield_control_rate_hz=100.0) == []


def _metadata() -> dict:
    return {p.key: p.value for p in onnx.load(str(SHIPPED)).metadata_props}
