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

Act = Callable[..., np.ndarray]
"""(1, observation size) float32 -> (1, 2) normalized actions; for a recurrent level (the contract's ``recurrent``)
(observation, state [1, 1, H]) -> (actions, next state)."""


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
        self.trail = RangeMemory.for_positions(contract.trail) if contract.trail is not None else None
        """Where the robot was at its earlier decisions (the ``trail_yaw`` term), or None."""
        self.last_subgoal_w: np.ndarray | None = None
        self.ranges_m = np.full(len(sensors), np.inf)
        self.decisions = 0
        self.state: np.ndarray | None = None
        """A recurrent level's state after its last decision (None: zeros at the next; always None for a feed-forward
        level)."""
        self.state_goal_w: np.ndarray | None = None
        """The goal the state was built toward: a new goal starts from zeros (the contract's ``recurrent.reset``)."""

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
        return cls(contract, robot_range_sensors(robot), session_act(session, contract, model_path))

    def reset(self) -> None:
        """A new episode or task: forget the memory and the last subgoal."""
        if self.memory is not None:
            self.memory.reset()
        if self.trail is not None:
            self.trail.reset()
        self.last_subgoal_w = None
        self.ranges_m = np.full(len(self.sensors), np.inf)
        self.state = self.state_goal_w = None

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
        if self.trail is not None:
            inputs["trail_yaw"] = self.trail.sectors(p[None], np.asarray(quat_wxyz)[None])[0]
        return compute_navigate_observation(self.contract.observations, inputs)

    def decide(self, position_w, quat_wxyz, linear_velocity_w, goal_w) -> np.ndarray:
        """The next subgoal (3,), world ENU, at the contract's flight height."""
        obs = self.observation(position_w, quat_wxyz, linear_velocity_w, goal_w)
        if self.trail is not None:  # after the observation: the trail holds where the robot was (the batched twin's order)
            self.trail.add_points_w(np.asarray(position_w, dtype=np.float64)[None, None, :2], np.ones((1, 1), dtype=bool))
        spec = self.contract.recurrent
        if spec is None:
            action = self.act(obs[None])
        else:
            goal = np.asarray(goal_w, dtype=np.float64)
            if self.state is None or not np.array_equal(goal, self.state_goal_w):  # (set together)
                self.state, self.state_goal_w = np.zeros((1, 1, spec.hidden_size), np.float32), goal.copy()
            action, self.state = self.act(obs[None], self.state)
        action = np.asarray(action, dtype=np.float64).reshape(-1, 2)[0]
        subgoal = subgoal_from_action(action, np.asarray(position_w, dtype=np.float64), np.asarray(quat_wxyz, dtype=np.float64),
                                      self.contract)
        self.last_subgoal_w = subgoal
        self.decisions += 1
        return subgoal


def session_act(session, contract: NavigateContract, model_path: str | Path = "the level") -> Act:
    """The level's :data:`Act` on an onnxruntime session: ``act(obs)``, or for a recurrent contract
    ``act(obs, state) -> (actions, state)``. ContractError when the graph's inputs are not what the contract says (the
    observation, and the state's input when it is recurrent)."""
    inputs = [i.name for i in session.get_inputs()]
    name = inputs[0]
    spec = contract.recurrent
    wanted = [name] if spec is None else [name, spec.input_name]
    if inputs != wanted:
        raise ContractError(f"{model_path}: the graph takes inputs {inputs}, its contract says {wanted} (recurrent: "
                            f"{spec is not None}); the file was changed after export: export the level again")

    def act(obs: np.ndarray, state: np.ndarray | None = None):
        if spec is None:
            return session.run(None, {name: obs.astype(np.float32)})[0]
        actions, state = session.run(None, {name: obs.astype(np.float32), spec.input_name: state})
        return actions, state

    return act


def range_for_observation(spec: RangeSensorSpec, range_m: float) -> float:
    """A ``sensor_msgs/Range`` reading as the level observes it (REP 117 in, the simulators' convention out):
    +inf, or anything at or beyond ``max_range_m``: no target, ``max_range_m``; -inf, or anything below
    ``min_range_m``: a target too close to measure, ``min_range_m``. NaN or a negative finite value is not a
    distance: ObservationError (the reading is dropped; the level keeps the sensor's previous one)."""
    r = float(range_m)
    if r != r or (r < 0.0 and r != -np.inf):
        raise ObservationError(f"range sensor {spec.name!r}: range {range_m!r} is not a distance (REP 117: +inf for no "
                               "target, -inf for one too close); the reading is dropped")
    return float(min(max(r, spec.min_range_m), spec.max_range_m))


class LearnedPlanner:
    """The ``learned`` planner kind: the task language and the steps of the symbolic planner, on the world's fence
    and landmarks only (no obstacles: the level flies without a map); every ``goto`` step is then flown by the
    :class:`LearnedNavigator` (the planner node asks it for a subgoal at its decision rate and ends the step
    within ``goal_tolerance_m`` of the target)."""

    kind = "learned"

    def __init__(self, world, subgoal_radius_m: float, navigator: LearnedNavigator, config=None,
                 goal_tolerance_m: float = 0.3):
        from robot_hrl.planning.symbolic import SymbolicPlanner

        self.navigator = navigator
        self.goal_tolerance_m = float(goal_tolerance_m)
        self.symbolic = SymbolicPlanner(world.model_copy(update={"obstacles": ()}), subgoal_radius_m, config)

    def plan(self, task, start_position_w, deadline=None):
        plan = self.symbolic.plan(task, start_position_w, deadline=deadline)
        plan.planner = self.kind
        self.navigator.reset()
        return plan

    def replan(self, plan, position_w, blocked=None, subgoal_index=None, deadline=None):
        new = self.symbolic.replan(plan, position_w, blocked=blocked, subgoal_index=subgoal_index, deadline=deadline)
        new.planner = self.kind
        return new
