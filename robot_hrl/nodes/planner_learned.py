"""The planner node's ``learned`` mode: the map-free navigate level flies every ``goto`` step.

The task, its takeoff and landing come from the symbolic planner on the world's fence and landmarks
(:class:`robot_hrl.planning.learned.LearnedPlanner`: no obstacles, no map). While a ``goto`` step runs, the
:class:`robot_hrl.planning.learned.LearnedNavigator` decides the next subgoal at its contract's rate from the
live rangers (``/range/<name>`` sensor_msgs/Range, best effort) and ``/odom``, exactly as the PyBullet
evaluation runs it (sim/evaluate_navigate.py); the node publishes it on ``/subgoal`` (the skill node's shield
checks it like any other) and ends the step when the robot is within ``goal_tolerance_m`` of the target.

Ranges are read REP 117's way (+inf: no target, -inf: too close), converted to the level's observation by
:func:`robot_hrl.planning.learned.range_for_observation`; a NaN or negative range is refused (counted on the
node's ``inputs`` diagnostics) and the sensor's previous reading stays. Until every ranger has reported once,
the level does not decide (no subgoal is sent for the goto step; the skill node's watchdog holds).
"""

from __future__ import annotations

import os
from functools import partial

import numpy as np

from robot_hrl.errors import ObservationError
from robot_hrl.msgs import range_class_for_distro
from robot_hrl.transport.interface import SENSOR_QOS


class LearnedDriver:
    """Wires a :class:`~robot_hrl.planning.learned.LearnedPlanner` into a :class:`PlannerNode`."""

    def __init__(self, planner_node, planner):
        self.pn = planner_node
        self.planner = planner
        self.nav = planner.navigator
        contract = self.nav.contract
        self.ranges_m: dict[str, float | None] = {s.name: None for s in self.nav.sensors}
        self.range_class = range_class_for_distro(os.environ.get("ROS_DISTRO"))
        """The Range layout of this ROS distribution (the sim node publishes the same)."""
        for spec in self.nav.sensors:
            planner_node.inputs.subscribe(self.range_class, spec.topic, partial(self._on_range, spec), SENSOR_QOS)
        self.decision_rate_hz = float(contract.decision_rate_hz)
        self.memory_rate_hz = float(contract.memory.update_rate_hz) if contract.memory is not None else self.decision_rate_hz
        planner_node.inputs.timer(1.0 / self.decision_rate_hz, self._decide)
        self._separate_sensing = abs(self.memory_rate_hz - self.decision_rate_hz) > 1e-9
        if self._separate_sensing:
            planner_node.inputs.timer(1.0 / self.memory_rate_hz, self._sense)
        self.state = None
        """(position_w, quat_wxyz, linear_velocity_w, stamp_s) of the latest odometry."""
        self.subgoal: np.ndarray | None = None
        """The level's latest subgoal for the running goto step (None: none decided yet)."""
        self.decisions = 0
        self._warned_waiting = False

    @staticmethod
    def make_planner(p: dict, world, subgoal_radius_m: float, robot_radius_m: float):
        """The ``learned`` planner of the node's parameters; ContractError (the node does not start) when the level
        does not fit the goto skill (``model``) or the robot."""
        from robot_hrl.nodes.resources import resolve_resource
        from robot_hrl.planning import PlannerConfig as GridConfig
        from robot_hrl.planning.learned import LearnedNavigator, LearnedPlanner
        from robot_hrl.robots import get_robot

        robot = get_robot(str(p["robot"]))
        navigator = LearnedNavigator.load(resolve_resource(str(p["navigate_model"]), "navigate model"), robot,
                                          resolve_resource(str(p["model"]), "model file"), provider="cpu")
        config = GridConfig(robot_radius_m=robot_radius_m, safety_margin_m=float(p["safety_margin_m"]))
        return LearnedPlanner(world, subgoal_radius_m, navigator, config, float(p["goal_tolerance_m"]))

    # ---- state ------------------------------------------------------------------------------------
    def step(self):
        core = self.pn.core
        step = core.current_step
        return step if core.state == "executing" and step is not None and step.action == "goto" else None

    def active(self) -> bool:
        """A goto step runs: the level gives the subgoals."""
        return self.step() is not None

    # ---- inputs -----------------------------------------------------------------------------------
    def _on_range(self, spec, msg) -> None:
        from robot_hrl.planning.learned import range_for_observation

        try:
            self.ranges_m[spec.name] = range_for_observation(spec, msg.range)
        except ObservationError as exc:
            self.pn.inputs.reject(spec.topic, str(exc))

    def on_state(self, st) -> None:
        """The latest odometry the planner node's validator accepted (robot_hrl.safety.units.odometry)."""
        if not st.is_finite():
            return
        self.state = (st.position_w, st.quat_wxyz, st.linear_velocity_w, float(st.stamp_s))
        step = self.step()
        if step is not None and float(np.linalg.norm(st.position_w - np.asarray(step.target))) < self.planner.goal_tolerance_m:
            now = self.pn._now()
            self.pn.core.complete_step(now)
            self.pn.core.events.append(f"learned level: reached {step.label} within {self.planner.goal_tolerance_m:g} m "
                                       f"({self.decisions} decisions)")
            self.subgoal = None
            self.pn._send_subgoal()
            self.pn._publish_status()

    # ---- the level --------------------------------------------------------------------------------
    def _ready(self) -> bool:
        missing = [n for n, r in self.ranges_m.items() if r is None]
        if self.state is None or missing:
            if not self._warned_waiting and self.active():
                self._warned_waiting = True
                what = "odometry" if self.state is None else f"the rangers {missing}"
                self.pn.node.get_logger().warning(f"learned level: waiting for {what} before its first decision")
            return False
        return True

    def _sense(self) -> None:
        if not self._ready():
            return
        p, q, _, _ = self.state
        self.nav.sense(p, q, [self.ranges_m[s.name] for s in self.nav.sensors])

    def _decide(self) -> None:
        if not self._separate_sensing:
            self._sense()
        step = self.step()
        if step is None:
            self.subgoal = None
            return
        if not self._ready():
            return
        p, q, v, _ = self.state
        subgoal = self.nav.decide(p, q, v, np.asarray(step.target, dtype=np.float64))
        if not np.all(np.isfinite(subgoal)):
            self.pn.node.get_logger().error(f"learned level: non-finite subgoal {subgoal.tolist()}; kept the previous one")
            return
        self.subgoal = subgoal
        self.decisions += 1
        self.pn._send_subgoal()
