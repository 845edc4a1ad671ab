"""The simulator as a node: PyBullet quadrotor in a world file, on the ROS 2 graph.

Topics (relative to the node's namespace):

- in  ``/cmd_wrench`` geometry_msgs/WrenchStamped, frame ``base_link``: ``force.z`` collective
  thrust (N), ``torque`` body torques (N m). Applied through the firmware mixer and motor lag. In
  lockstep only a command of the skill node's writer (``command_writer_node``, identified by its DDS GUID from
  the graph's discovery data, robot_hrl.nodes.command_writer) stamped with the current period's time is applied
  (and steps the physics); others are counted (``foreign_commands``), never applied. A second publisher on it, or a second ``/odom`` source,
  is reported on ``/diagnostics`` (robot_hrl.nodes.graph_watch).
- out ``/odom`` nav_msgs/Odometry (best effort; pose in ``odom``, twist in ``base_link``).
- out ``/clock`` rosgraph_msgs/Clock: the simulation time, when ``use_sim_time`` is set.
- out ``/camera/image_raw`` sensor_msgs/Image (rgb8), when ``camera`` is set, at ``camera_rate_hz``.
- out ``/range/<name>`` sensor_msgs/Range (best effort), when ``rangers`` is set: one topic per ranger of the
  robot (``robot_hrl.sensing.robot_range_sensors``: the Crazyflie's Multi-ranger deck and the Flow deck's down
  ranger), frame ``range_<name>``, each at its sensor's rate, from the same PyBullet ray tests the PyBullet
  evaluation uses (``sim/pybullet/ranging.py``, with the firmware's noise model). REP 117: no target is
  +inf, a target closer than ``min_range`` -inf. The world's fence walls and ceiling are then bodies too
  (``build_enclosure``), so the rangers see them.
- out ``/battery`` sensor_msgs/BatteryState (best effort), at ``battery_rate_hz``: the battery voltage as the robot
  measures it (the actuator chain's ``battery_voltage_v`` state: for the Crazyflie the firmware's filtered pm voltage
  under load), ``present`` true, LiPo, frame ``base_link``. The Crazyswarm2 driver publishes ``pm.vbatMV`` inside its
  own ``crazyflie_interfaces/msg/Status`` on ``<robot>/status`` (IMRCLab/crazyswarm2, crazyflie/src/crazyflie_server.cpp),
  not as a BatteryState, so the standard message goes on ``/battery``. Without such a chain state: not published.
- out ``/diagnostics``: collisions (with what, when), ground-truth position, sim time, real-time factor.
- in  ``/sim/inject_fault`` std_msgs/String: ``odom_stop`` / ``odom_resume`` (fault drills and
  tests; the parameter ``odom_dropout_at_s`` does the same at a given sim time).

Time. Without ``use_sim_time`` the sim paces itself to wall time (``real_time_factor``).
With it, the sim owns the clock: it publishes ``/odom`` then ``/clock`` for each control period
and, in ``lockstep`` mode, steps as soon as the motor command for that period arrives (waiting
at most ``lockstep_timeout_s`` of wall time, then stepping with the last command), so it runs as
fast as the skill node can follow. It waits for the first motor command before time starts.
"""

from __future__ import annotations

import sys
import threading
import time

import numpy as np

from robot_hrl.errors import ConfigError
from robot_hrl.msgs import Clock, Odometry, WrenchStamped, odometry_from_state, seconds_from_time, time_from_seconds
from robot_hrl.nodes.common import ERROR, OK, WARN, diag_array, diag_status, run_main
from robot_hrl.nodes.resources import resolve_resource
from robot_hrl.robots import get_robot
from robot_hrl.transport.interface import COMMAND_QOS, SENSOR_QOS
from robot_hrl.world import load_world


SPIN_JOIN_S = 2.0
"""How long the loop waits for the spin thread at shutdown (it checks its stop condition every 50 ms)."""


class SimNode:
    """Wiring of :class:`sim.pybullet.PyBulletQuadrotorSim` to the graph; the loop is :meth:`run`."""

    def __init__(self, node, sim=None):
        self.node = node
        p = {name: node.declare_parameter(name, default) for name, default in (
            ("robot", "crazyflie_2x"), ("world", "models/worlds/demo.yaml"), ("physics_hz", 500.0),
            ("control_hz", 100.0), ("real_time_factor", 1.0), ("lockstep", True), ("lockstep_timeout_s", 0.5),
            ("wait_for_command", True), ("camera", False), ("camera_rate_hz", 2.0), ("seed", 0),
            ("odom_dropout_at_s", -1.0), ("use_sim_time", False), ("diagnostics_rate_hz", 2.0),
            ("max_sim_time_s", 0.0), ("rangers", False), ("command_writer_node", "skill_node"),
            ("battery_rate_hz", 10.0),
        )}
        self.p = p
        for key in ("physics_hz", "control_hz", "camera_rate_hz", "diagnostics_rate_hz", "battery_rate_hz"):
            if not float(p[key]) > 0:
                raise ConfigError(f"sim_node parameter {key}={p[key]!r} must be > 0")
        if float(p["real_time_factor"]) < 0:
            raise ConfigError(f"sim_node parameter real_time_factor={p['real_time_factor']!r} must be >= 0")
        try:
            self.robot = get_robot(str(p["robot"]))
        except KeyError as exc:
            raise ConfigError(str(exc).strip('"')) from None
        self.world = load_world(resolve_resource(p["world"], "world file"))
        self.period_s = 1.0 / float(p["control_hz"])
        self.use_sim_time = bool(p["use_sim_time"])
        if sim is None:
            from sim.pybullet import PyBulletQuadrotorSim

            from robot_hrl.perception.camera import PinholeCamera

            sim = PyBulletQuadrotorSim(self.robot, self.world, physics_hz=float(p["physics_hz"]),
                                       control_hz=float(p["control_hz"]), gui=False,
                                       camera=PinholeCamera() if p["camera"] else None, seed=int(p["seed"]))
        self.sim = sim
        self.rangers = None
        self.range_pubs: list = []
        if bool(p["rangers"]):
            self._start_rangers(node)
        start = np.asarray(self.world.start, dtype=np.float64)
        start[2] = max(start[2], self.world.bounds.min[2] + self.robot.body_height_m / 2.0)
        # On the ground, motors off: the skill node spins them up when a subgoal arrives.
        self.sim.reset(start, np.array([1.0, 0.0, 0.0, 0.0]), motor_rpm=np.zeros(self.robot.num_rotors))
        self._lock = threading.Lock()
        self._wrench = np.zeros(4)
        self._commands = 0
        self._new_command = threading.Event()
        self.collisions: list[dict] = []
        self._in_collision = False
        self.steps = 0
        self._wall_start = None
        self.odom_pub = node.create_publisher(Odometry, "/odom", SENSOR_QOS)
        self.clock_pub = node.create_publisher(Clock, "/clock", SENSOR_QOS)
        from robot_hrl.msgs import DiagnosticArray, Image

        self.diag_pub = node.create_publisher(DiagnosticArray, "/diagnostics", COMMAND_QOS)
        self.image_pub = node.create_publisher(Image, "/camera/image_raw", SENSOR_QOS) if p["camera"] else None
        from robot_hrl.msgs import BatteryState

        self.battery_pub = (node.create_publisher(BatteryState, "/battery", SENSOR_QOS)
                            if "battery_voltage_v" in self.sim.chain_state else None)
        self._next_battery_s = 0.0
        cmd_sub = self.node.create_subscription(WrenchStamped, "/cmd_wrench", self._on_wrench, COMMAND_QOS)
        from robot_hrl.nodes.command_writer import CommandWriter

        self.writer = CommandWriter(node, cmd_sub, "/cmd_wrench", str(p["command_writer_node"]))
        """Which /cmd_wrench writer is the skill node's (lockstep applies only its commands)."""
        from robot_hrl.nodes.graph_watch import GraphWatch

        self.graph = GraphWatch(node)
        """Second writers: another /cmd_wrench publisher, another /odom source (on /diagnostics)."""
        self.graph.watch_subscription("/cmd_wrench", cmd_sub, 1, "motor command writer")
        self.graph.watch_topic("/odom", 1, "odometry source")
        self._lockstep = self.use_sim_time and bool(p["lockstep"])
        self._period_t = 0.0
        """The sim time of the period whose command the lockstep waits for."""
        self.fence_exits = 0
        """Times the true position left the world's bounds (ground truth, each exit once)."""
        self.box_entries = 0
        """Times the true position entered an obstacle or landmark box."""
        self.last_box_entry = ""
        self._truth_outside = False
        self._truth_box = None
        self.foreign_commands = 0
        """Commands in lockstep not applied: another writer's (robot_hrl.nodes.command_writer), or not stamped for the
        current period (a late one)."""
        from robot_hrl.msgs import String

        self.node.create_subscription(String, "/sim/inject_fault", self._on_fault, COMMAND_QOS)
        self._odom_stopped = False
        self._next_camera_s = 0.0
        self._next_diag_s = 0.0
        self.bad_commands = 0

    def _start_rangers(self, node) -> None:
        import os

        from sim.pybullet.ranging import PyBulletRangers, build_enclosure

        from robot_hrl.msgs import range_class_for_distro
        from robot_hrl.sensing import robot_range_sensors

        sensors = robot_range_sensors(self.robot)
        if not sensors:
            raise ConfigError(f"sim_node: rangers=true, but robot {self.robot.name!r} carries no range sensors "
                              "(robot_hrl/robots/<robot>/rangers.py)")
        build_enclosure(self.sim.bullet, self.world)
        self.rangers = PyBulletRangers(self.sim.bullet, sensors, seed=int(self.p["seed"]))
        range_class = range_class_for_distro(os.environ.get("ROS_DISTRO"))
        self.range_pubs = [node.create_publisher(range_class, s.topic, SENSOR_QOS) for s in sensors]
        self._next_range_s = [0.0] * len(sensors)

    def publish_ranges(self, t: float) -> None:
        """Every ranger whose period has come: a sensor_msgs/Range of the true pose's ray test (REP 117 limits)."""
        due = [i for i, next_s in enumerate(self._next_range_s) if t + 1e-9 >= next_s]
        if not due:
            return
        from robot_hrl.sensing import range_message

        state = self.sim.state()
        readings = self.rangers.readings(state.position_w, state.quat_wxyz)  # max_range_m where nothing is in range
        no_target = readings >= self.rangers.max_range_m
        for i in due:
            spec = self.rangers.sensors[i]
            self._next_range_s[i] = t + 1.0 / spec.update_rate_hz
            r = float("inf") if no_target[i] else float(readings[i])
            self.range_pubs[i].publish(range_message(spec, r, self.stamp(t)))

    # ---- inputs -------------------------------------------------------------------------------
    def _on_wrench(self, msg: WrenchStamped) -> None:
        w = np.array([msg.wrench.force.z, msg.wrench.torque.x, msg.wrench.torque.y, msg.wrench.torque.z])
        finite = bool(np.all(np.isfinite(w)))
        with self._lock:
            if not finite:
                self.bad_commands += 1  # a non-finite command is dropped: the last good one stays
            if self._lockstep and (abs(seconds_from_time(msg.header.stamp) - self._period_t) > 1e-6
                                   or not self.writer.accepts()):
                # in lockstep the skill node stamps its command with the period's /clock time: anything else is not
                # the command of this period (a late one); and only the skill node's writer drives the robot: a
                # second writer's command, however stamped, neither steps nor drives it
                self.foreign_commands += 1
                return
            if finite:
                self._wrench = w
            self._commands += 1
        self._new_command.set()

    def _on_fault(self, msg) -> None:
        """Fault injection for tests and drills: ``odom_stop`` / ``odom_resume``."""
        command = msg.data.strip()
        if command not in ("odom_stop", "odom_resume"):
            self.node.get_logger().error(f"unknown fault {command!r} on /sim/inject_fault; use odom_stop or odom_resume")
            return
        self._odom_stopped = command == "odom_stop"
        self.node.get_logger().warning(f"fault injection: {command} at t={self.sim_time():.2f} s")

    def _odom_dropped(self, t: float) -> bool:
        dropout = float(self.p["odom_dropout_at_s"])
        return self._odom_stopped or 0.0 <= dropout <= t

    # ---- outputs ------------------------------------------------------------------------------
    def sim_time(self) -> float:
        return float(self.sim.time_s)

    def stamp(self, t: float) -> float:
        """Message stamps: the sim time with use_sim_time (the sim owns /clock), else the wall
        clock at publication (the other nodes' clock; a sim slower than real time then shows
        as the real-time factor, not as stale data)."""
        return t if self.use_sim_time else time.time()

    def publish_state(self) -> None:
        t = self.sim_time()
        if not self._odom_dropped(t):
            state = self.sim.state()
            state.stamp_s = self.stamp(t)
            self.odom_pub.publish(odometry_from_state(state, frame_id="odom", child_frame_id="base_link"))
        if self.rangers is not None:
            self.publish_ranges(t)
        if self.battery_pub is not None and t + 1e-9 >= self._next_battery_s:
            self._next_battery_s = t + 1.0 / float(self.p["battery_rate_hz"])
            self.battery_pub.publish(battery_message(float(self.sim.chain_state["battery_voltage_v"]), self.stamp(t)))
        if self.use_sim_time:
            self.clock_pub.publish(Clock(clock=time_from_seconds(t)))
        if self.image_pub is not None and t >= self._next_camera_s:
            self._next_camera_s = t + 1.0 / float(self.p["camera_rate_hz"])
            from robot_hrl.msgs import image_from_array

            rgb, _depth = self.sim.camera_image()
            self.image_pub.publish(image_from_array(np.ascontiguousarray(rgb[..., :3]).astype(np.uint8), "rgb8",
                                                    self.stamp(t), "camera_optical"))
        if t >= self._next_diag_s:
            self._next_diag_s = t + 1.0 / float(self.p["diagnostics_rate_hz"])
            self.publish_diagnostics()

    def publish_diagnostics(self) -> None:
        t = self.sim_time()
        wall = time.monotonic() - self._wall_start if self._wall_start else 0.0
        level = ERROR if self.collisions else OK
        message = (f"{len(self.collisions)} collision(s), last with {self.collisions[-1]['with']} at "
                   f"t={self.collisions[-1]['t']:.2f} s") if self.collisions else "running"
        if self.bad_commands or self.foreign_commands:
            level = max(level, WARN)
        g_level, g_message, g_values = self.graph.diagnostic()
        values = {"sim_time_s": t, "steps": self.steps, "collisions": len(self.collisions),
                  "real_time_factor": (t / wall) if wall > 0 else 0.0, "non_finite_commands": self.bad_commands,
                  "odom": "stopped (fault injection)" if self._odom_dropped(t) else "ok",
                  "true_position": [round(float(v), 3) for v in self.sim.state().position_w],
                  "motor_rpm_mean": float(np.mean(self.sim.motor_rpm))}
        if self.collisions:
            values["last_collision_with"] = self.collisions[-1]["with"]
            values["last_collision_position"] = self.collisions[-1]["position"]
        values["foreign_commands"] = self.foreign_commands
        values.update(self.writer.diagnostic_values())
        values["truth_fence_exits"] = self.fence_exits
        values["truth_box_entries"] = self.box_entries
        if self.last_box_entry:
            values["truth_last_box"] = self.last_box_entry
        self.diag_pub.publish(diag_array(self.stamp(t), [diag_status("sim_node: graph", g_level, g_message, g_values,
                                                                     hardware_id="pybullet"),
                                                         diag_status("sim_node: physics", level, message, values,
                                                                     hardware_id="pybullet")]))

    # ---- the loop -----------------------------------------------------------------------------
    def step(self) -> None:
        with self._lock:
            wrench = self._wrench.copy()
        self.sim.step(wrench)
        self.steps += 1
        touched = sorted({c.body for c in self.sim.collisions() if c.body != "ground"})
        hit = bool(touched)
        if hit and not self._in_collision:
            what = ", ".join(touched)
            self.collisions.append({"t": self.sim_time(), "with": what,
                                    "position": [round(float(v), 3) for v in self.sim.state().position_w]})
            self.node.get_logger().error(f"collision with {what} at t={self.sim_time():.2f} s")
        self._in_collision = bool(hit)
        # the ground truth's own envelope events (the launcher's monitor judges violations from these, not from /odom)
        p = [float(v) for v in self.sim.state().position_w]
        outside = not self.world.bounds.contains(p)
        if outside and not self._truth_outside:
            self.fence_exits += 1
        self._truth_outside = outside
        box = next((getattr(b, "name", None) or b.id for b in self.world.solid_boxes() if b.contains(p)), None)
        if box is not None and box != self._truth_box:
            self.box_entries += 1
            self.last_box_entry = box
        self._truth_box = box

    def run(self, stop: threading.Event) -> None:
        """Step the world; a second thread spins the node (callbacks). Both end when ``stop`` is set
        (SIGINT/SIGTERM) or ``max_sim_time_s`` is reached; the spinner is joined before this returns,
        so the node is shut down by the thread that made it and no transport thread outlives the
        interpreter (rclpy would abort with SIGABRT)."""
        done = threading.Event()
        spinner = threading.Thread(target=self.node.spin, kwargs={"until": lambda: stop.is_set() or done.is_set()},
                                   name="sim_node spin", daemon=True)
        spinner.start()
        try:
            self._loop(stop)
        finally:
            done.set()
            spinner.join(timeout=SPIN_JOIN_S)
            if spinner.is_alive():
                self.node.get_logger().error(f"the spin thread did not stop within {SPIN_JOIN_S:g} s")

    def _loop(self, stop: threading.Event) -> None:
        lockstep = self.use_sim_time and bool(self.p["lockstep"])
        rtf = float(self.p["real_time_factor"])
        timeout = float(self.p["lockstep_timeout_s"])
        max_t = float(self.p["max_sim_time_s"])
        if bool(self.p["wait_for_command"]):
            # Publish the initial state until a motor command shows that the skill node listens.
            while not stop.is_set() and self._commands == 0:
                self.publish_state()
                self._new_command.wait(0.1)
        self._wall_start = time.monotonic()
        while not stop.is_set():
            if max_t > 0 and self.sim_time() >= max_t:
                break
            with self._lock:
                seen = self._commands
                self._new_command.clear()
                self._period_t = self.sim_time()
            self.publish_state()
            if lockstep:
                deadline = time.monotonic() + timeout
                while not stop.is_set() and self._commands == seen:
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        break
                    self._new_command.wait(remaining)
            elif rtf > 0:
                target = self._wall_start + (self.sim_time() + self.period_s) / rtf
                delay = target - time.monotonic()
                if delay > 0:
                    stop.wait(delay)
            self.step()
        self.publish_diagnostics()


POWER_SUPPLY_STATUS_DISCHARGING = 2
POWER_SUPPLY_HEALTH_GOOD = 1
POWER_SUPPLY_TECHNOLOGY_LIPO = 3
"""sensor_msgs/msg/BatteryState constants (ros2/common_interfaces, sensor_msgs/msg/BatteryState.msg)."""


def battery_message(voltage_v: float, stamp_s: float):
    """The sensor_msgs/BatteryState of a measured voltage: unknown fields NaN, as the message's definition asks."""
    from robot_hrl.msgs import BatteryState
    from robot_hrl.msgs.conversions import header

    nan = float("nan")
    return BatteryState(header=header(stamp_s, "base_link"), voltage=voltage_v, temperature=nan, current=nan, charge=nan,
                        capacity=nan, design_capacity=nan, percentage=nan,
                        power_supply_status=POWER_SUPPLY_STATUS_DISCHARGING, power_supply_health=POWER_SUPPLY_HEALTH_GOOD,
                        power_supply_technology=POWER_SUPPLY_TECHNOLOGY_LIPO, present=True)


def main(argv: list[str] | None = None) -> int:
    return run_main("sim_node", SimNode, argv)


if __name__ == "__main__":
    sys.exit(main())
