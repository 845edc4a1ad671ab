"""The ``navigate`` level for the Crazyflie: its exported ONNX (+ contract) -> ``src/nav_model.[ch]`` and
``src/nav_io.[ch]``, generated beside the goto skill's controller (``robot-hrl export-c GOTO --navigate NAV``).

The network goes through the goto's lowering and C generator (deploy/crazyflie/graph.py, c_model.py) with the
symbol prefix ``nav``; the memory, observation and action mapping come from the level's contract
(deploy/crazyflie/c_navigate.py). Refused, with the reason and the fix: a file that is not a navigate level, a
level trained over another goto model or contract than the one it is generated with (the contract names the
skill's sha256 and its contract's), a level for another robot or ranger suite, a recurrent level whose graph's state
does not match its contract's ``recurrent`` (the GRU's state is kept in nav_io.c between decisions).

The level's weights are stored as float32 or, ``weights="float16"`` (``--navigate-weights float16``), as IEEE 754
binary16 (half the flash of its matrices; c_model.py, deploy/crazyflie/float16.py): the C then computes the network
with its weights rounded to float16, and its parity is checked against that network
(deploy/crazyflie/navigate_parity.py's :func:`onnxruntime_navigator` runs the rounded copy).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

from robot_hrl.contract import CONTRACT_METADATA_KEY, PolicyContract
from robot_hrl.contract.navigate import NavigateContract
from robot_hrl.errors import ContractError
from robot_hrl.robots import get_robot
from robot_hrl.sensing import RangeSensorSpec, robot_range_sensors

from deploy.crazyflie.c_model import generate_model_c
from deploy.crazyflie.c_navigate import NAV_PREFIX, NAV_TASK_SOURCES, check_navigate_contract, generate_navigate_c
from deploy.crazyflie.c_navigate_task import generate_navigate_task_c
from deploy.crazyflie.errors import CodegenError
from deploy.crazyflie.float16 import WEIGHT_STORAGES
from deploy.crazyflie.graph import LoweredModel, load_onnx, lower_onnx


NAVIGATE_WEIGHTS = "float16"
"""The navigate level's default weight storage (``--navigate-weights``): float16, since the shipped level (a GRU of 16
beside its MLP) fits the 128 KiB flash beside the goto skill only that way (82900 B for both levels; 131996 B with
float32 weights); its outputs are within 0.0038 of the float32 network's, its subgoals within 1.7 mm
(benchmarks/README.md, "Issue #19: the creep into the blind sector", the C in 16 bits). float32 is the network the level was trained and
evaluated as (the Python planner node runs it), for a level that fits with it."""


@dataclass
class NavigateLevel:
    """What :func:`generate_navigate_level` wrote."""

    model_path: Path
    model: LoweredModel
    contract: NavigateContract
    model_sha256: str
    sensors: tuple[RangeSensorSpec, ...]
    src_dir: Path
    weights: str = "float32"
    """How nav_model.c stores the network's matrices: ``float32`` or ``float16`` (binary16, converted as read)."""

    @property
    def sources(self) -> list[Path]:
        """The level's C and its firmware task (nav_task.c)."""
        return [self.src_dir / s for s in NAV_TASK_SOURCES]

    def manifest(self) -> dict:
        return {"model": str(self.model_path), "model_sha256": self.model_sha256,
                "contract": json.loads(self.contract.to_json()),
                "layers": [list(d.weight.shape[::-1]) for d in self.model.dense_layers], "weights": self.weights,
                "sources": [f"src/{s}" for s in NAV_TASK_SOURCES]}


def read_navigate_contract(onnx_model, path: Path) -> NavigateContract:
    """The level's contract; a skill's model (or anything else) is refused with what to pass instead."""
    meta = {p.key: p.value for p in onnx_model.metadata_props}
    text = meta.get(CONTRACT_METADATA_KEY)
    try:
        skill = json.loads(text).get("skill") if text else None
    except (json.JSONDecodeError, AttributeError):
        skill = None
    if skill is not None and skill != "navigate":
        raise CodegenError(f"--navigate {path}: this is the model of skill {skill!r}, not a navigate level; give the "
                           "level (e.g. models/crazyflie_navigate.onnx) to --navigate and the goto skill as the model")
    try:
        return NavigateContract.from_json(text)
    except ContractError as exc:
        raise CodegenError(f"--navigate {path}: {exc}") from None


def recurrent_mismatch(lowered: LoweredModel, onnx_model, contract: NavigateContract) -> str | None:
    """What differs between the graph's state (its second input and output) and the contract's ``recurrent``, or None."""
    spec = contract.recurrent
    if spec is None:
        return (None if not lowered.recurrent else
                f"the graph carries a state ({lowered.state_input!r}, {lowered.state_size} floats), its contract has no "
                "recurrent section")
    if not lowered.recurrent:
        return f"the contract keeps a {spec.kind.upper()} state of {spec.hidden_size}, the graph takes none"
    names = (lowered.state_input, onnx_model.graph.output[1].name)
    if names != (spec.input_name, spec.output_name) or lowered.state_size != spec.hidden_size:
        return (f"the graph's state is {names[0]!r} -> {names[1]!r} of {lowered.state_size}, its contract says "
                f"{spec.input_name!r} -> {spec.output_name!r} of {spec.hidden_size}")
    return None


def generate_navigate_level(model_path: str | Path, src_dir: str | Path, goto_contract: PolicyContract,
                            goto_sha256: str, banner_tail: str, weights: str = NAVIGATE_WEIGHTS) -> NavigateLevel:
    """Check the level against the goto skill it will command and the robot, lower it and write its C to ``src_dir``,
    its matrices stored as ``weights`` (one of :data:`~deploy.crazyflie.float16.WEIGHT_STORAGES`)."""
    if weights not in WEIGHT_STORAGES:
        raise CodegenError(f"--navigate-weights {weights!r}: give one of {', '.join(WEIGHT_STORAGES)}")
    path = Path(model_path)
    onnx_model = load_onnx(path)
    contract = read_navigate_contract(onnx_model, path)
    problems = contract.lower_skill_mismatches(goto_contract, goto_sha256)
    if problems:
        raise CodegenError(f"--navigate {path} does not fit the goto skill it would command onboard: " + "; ".join(problems)
                           + ". Generate with the goto model the level was trained over, or retrain the level "
                           "(python sim/train_navigate.py --skill <goto model>)")
    try:
        robot = get_robot(contract.robot.name)
    except KeyError as exc:
        raise CodegenError(str(exc.args[0])) from None
    problems = contract.robot_mismatches(robot)
    if problems:
        raise CodegenError(f"--navigate {path} does not fit the robot: " + "; ".join(problems))
    sensors = robot_range_sensors(robot)
    try:
        check_navigate_contract(contract, sensors)
    except CodegenError as exc:
        raise CodegenError(f"--navigate {path}: {exc}") from None
    lowered = lower_onnx(onnx_model, allow_state=True)  # (a recurrent level's state: nav_io.c keeps it)
    if lowered.input_size != contract.observation_size or lowered.output_size != contract.action_size:
        raise CodegenError(f"--navigate {path}: the graph maps {lowered.input_size} -> {lowered.output_size}, its contract "
                           f"says {contract.observation_size} -> {contract.action_size}; re-export the level")
    problem = recurrent_mismatch(lowered, onnx_model, contract)
    if problem:
        raise CodegenError(f"--navigate {path}: {problem}; the file was changed after export: export the level again")
    sha = hashlib.sha256(path.read_bytes()).hexdigest()
    banner = (f"/* Generated by `robot-hrl export-c --navigate` from {path.name} (sha256 {sha[:16]}...).\n"
              f" * Level 'navigate' over the goto skill (sha256 {goto_sha256[:16]}...), robot '{contract.robot.name}', "
              f"{contract.decision_rate_hz:g} Hz, {contract.observation_size} observations -> a subgoal; weights {weights}.\n"
              f" * {banner_tail}\n * Do not edit: regenerate from the ONNX model. */")
    model_h, model_c = generate_model_c(lowered, "nav_model.h", banner, prefix=NAV_PREFIX, weights=weights)
    io_h, io_c = generate_navigate_c(contract, sensors, banner)
    task_c = generate_navigate_task_c(contract, sensors, banner)
    src = Path(src_dir)
    src.mkdir(parents=True, exist_ok=True)
    for name, text in (("nav_model.h", model_h), ("nav_model.c", model_c), ("nav_io.h", io_h), ("nav_io.c", io_c),
                       ("nav_task.c", task_c)):
        (src / name).write_text(text)
    return NavigateLevel(model_path=path, model=lowered, contract=contract, model_sha256=sha, sensors=sensors, src_dir=src,
                         weights=weights)
