"""The learned level at run time: the exported ``navigate`` ONNX on live ranges and odometry -> the next subgoal.

What the planner node (``planner:=learned``) and the PyBullet evaluation (sim/evaluate_navigate.py) run, the
same code: the contract's observation (robot_hrl.contract.navigate), the range memory
(robot_hrl.sensing.memory) fed at the contract's memory rate, onnxruntime, and the contract's action
mapping (``subgoal_from_action``). :meth:`LearnedNavigator.load` refuses a level that does not fit the goto
skill it would command (the contract names the skill's file and contract hashes) or the robot (name,
parameters, range sensors), with an error that says what to do.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from robot_hrl.contract.navigate import (
    NAVIGATE_METADATA_KEY, NavigateContract, compute_navigate_observation, subgoal_from_action,
)
from robot_hrl.errors import ContractError, ObservationError
from robot_hrl.sensing.memory import RangeMemory
from robot_hrl.sensing.range import RangeSensorSpec

Act = Callable[[np.ndarray], np.ndarray]
"""(1, observation size) float32 -> (1, 2) normalized actions."""


class LearnedNavigator:
    """One robot's learned level: feed it ranges (:meth:`sense`) and ask it for subgoals (:meth:`decide`)."""

    def __init__(self, contract: NavigateContract, sensors: Sequence[RangeSensorSpec], act: Act):
        names = tuple(s.name for s in sensors)
        if names != contract.sensors.names:
            raise ContractError(f"the navigation model observes rangers {list(contract.sensors.names)}, the robot has "
                                f"{list(names)}; retrain the level for this robot (python sim/train_navigate.py)")
        self.contract = contract
        self.sensors = tuple(sensors)
        self.act = act
        self.memory = RangeMemory.from_spec(contract.memory, sensors) if contract.memory is not None else None
        self.last_subgoal_w: np.ndarray | None = None
        self.ranges_m = np.full(len(sensors), np.inf)
        self.decisions = 0

    @classmethod
    def load(cls, model_path: str | Path, robot, skill_model_path: str | Path, provider: str = "cpu") -> "LearnedNavigator":
        """Open an exported level; refused (ContractError) when it does not fit the goto skill or the robot."""
        import onnxruntime as ort

        from robot_hrl.contract import CONTRACT_METADATA_KEY, PolicyContract
        from robot_hrl.runtime import read_model_metadata
        from robot_hrl.sensing import robot_range_sensors

        meta = read_model_metadata(model_path)
        contract = NavigateContract.from_json(meta.get(NAVIGATE_METADATA_KEY))
        skill_path = Path(skill_model_path)
        skill = PolicyContract.from_json(read_model_metadata(skill_path).get(CONTRACT_METADATA_KEY))
        contract.check_lower_skill(skill, hashlib.sha256(skill_path.read_bytes()).hexdigest())
        problems = contract.robot_mismatches(robot)
        if problems:
            raise ContractError("the navigation model does not fit this robot: " + "; ".join(problems))
        providers = ["CPUExecutionProvider"] if provider == "cpu" else None
        session = ort.InferenceSession(str(model_path), providers=providers)
        name = session.get_inputs()[0].name

        def act(obs: np.ndarray) -> np.ndarray:
            return session.run(None, {name: obs.astype(np.float32)})[0]

        return cls(contract, robot_range_sensors(robot), act)

    def reset(self) -> None:
        """A new episode or task: forget the memory and the last subgoal."""
        if self.memory is not None:
            self.memory.reset()
        self.last_subgoal_w = None
        self.ranges_m = np.full(len(self.sensors), np.inf)

    def sense(self, position_w, quat_wxyz, ranges_m) -> None:
        """The latest reading of every ranger (the contract's sensor order), at the memory's update rate."""
        r = np.asarray(ranges_m, dtype=np.float64).reshape(-1)
        if r.shape != (len(self.sensors),):
            raise ObservationError(f"expected {len(self.sensors)} ranges ({list(self.contract.sensors.names)}), got {r.shape}")
        self.ranges_m = r
        if self.memory is not None:
            self.memory.add(np.asarray(position_w)[None], np.asarray(quat_wxyz)[None], r[None])

    def observation(self, position_w, quat_wxyz, linear_velocity_w, goal_w) -> np.ndarray:
        p = np.asarray(position_w, dtype=np.float64)
        inputs = {"position_w": p, "quat_wxyz": np.asarray(quat_wxyz, dtype=np.float64),
                  "linear_velocity_w": np.asarray(linear_velocity_w, dtype=np.float64), "goal_w": np.asarray(goal_w, dtype=np.float64),
                  "ranges_m": self.ranges_m, "last_subgoal_w": p if self.last_subgoal_w is None else self.last_subgoal_w}
        if self.memory is not None:
            inputs["range_memory_yaw"] = self.memory.sectors(p[None], np.asarray(quat_wxyz)[None])[0]
        return compute_navigate_observation(self.contract.observations, inputs)

    def decide(self, position_w, quat_wxyz, linear_velocity_w, goal_w) -> np.ndarray:
        """The next subgoal (3,), world ENU, at the contract's flight height."""
        obs = self.observation(position_w, quat_wxyz, linear_velocity_w, goal_w)
        action = np.asarray(self.act(obs[None]), dtype=np.float64).reshape(-1, 2)[0]
        subgoal = subgoal_from_action(action, np.asarray(position_w, dtype=np.float64), np.asarray(quat_wxyz, dtype=np.float64),
                                      self.contract)
        self.last_subgoal_w = subgoal
        self.decisions += 1
        return subgoal
