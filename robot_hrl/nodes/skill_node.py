"""The skill node: the policy at a fixed rate, every command through the shield.

Topics (relative to the node's namespace):

- in  ``/odom`` nav_msgs/Odometry (best effort): the state; its twist is in the body frame.
- in  ``/subgoal`` geometry_msgs/PoseStamped (reliable): where to go (world ENU, m). It passes
  the shield's subgoal unit first (finite, inside the fence, outside obstacles, within the
  contract's subgoal radius). For a robot that flies, a subgoal on the floor (z at or below the
  world's floor plus ``land_request_m``) asks for a landing under it. Subgoals must keep arriving
  (the planner re-sends them): when they stop, the watchdog holds, then lands.
- in  ``/battery`` sensor_msgs/BatteryState (best effort): the battery voltage the robot measures (the Crazyflie:
  the firmware's filtered ``pm.vbat``). Judged on arrival (finite, plausible for the robot, not stamped in the
  future; robot_hrl.nodes.battery_input); the shield's stopping model and backup brake with the thrust the actuator
  chain reaches at it, and with the worst-case battery while it is missing, refused or older than
  ``battery_timeout_s``. Refusals are counted by name on ``/diagnostics``.
- in  ``/estop`` std_msgs/Bool (latched): ``true`` latches the emergency stop (motors off),
  ``false`` releases it.
- out the robot's command (robot_hrl.nodes.skill_command): the topic and frame from the robot, the
  message from the contract's action mode. The Crazyflie: ``/cmd_wrench`` geometry_msgs/WrenchStamped,
  frame ``base_link``, ``wrench.force.z`` the collective thrust (N), ``wrench.torque`` the body torques
  (N m), x/y forces zero: crazyflie-firmware's ``controlModeForceTorque`` command (simulators apply the
  firmware mixer). A differential drive: ``/cmd_vel`` geometry_msgs/TwistStamped, ``twist.linear.x``
  (m/s) and ``twist.angular.z`` (rad/s), as ros2_controllers' diff_drive_controller takes it.
- out ``/skill/status`` std_msgs/String JSON: ``state`` (waiting, idle, tracking, reached,
  blocked, holding, landing, landed, estop; robot_hrl.nodes.skill_state), ``requested`` and
  ``subgoal`` (after the shield), ``distance`` to the requested subgoal, ``speed``, the shield
  ``mode`` and its ``reason``.
- out ``/diagnostics``: one status per shield unit (interventions by constraint), the shield
  summary (mode, interventions by unit) and the deadline monitor (tick p50/p99, misses).

The parts: :class:`~robot_hrl.nodes.skill_core.SkillCore` (policy then shield, no I/O), the status
state machine (``skill_state``), the fast CDR codecs (``skill_codecs``), the command output
(``skill_command``) and the real-time loop (``skill_loop``: fixed rate, or one tick per control
period of ``/clock`` with ``use_sim_time``). This module wires them to a node.
"""

from __future__ import annotations

import math
import sys
import time

from robot_hrl.errors import ConfigError
from robot_hrl.msgs import BatteryState, Bool, Clock, DiagnosticArray, Odometry, PoseStamped, String, seconds_from_time
from robot_hrl.nodes.common import ERROR, OK, WARN, diag_array, diag_status, json_string, position_of, run_main
from robot_hrl.nodes.deadline import DeadlineMonitor, LoopGc, LoopTiming
from robot_hrl.nodes.skill_codecs import COMMAND_FRAME, OdometryDecoder, StampedCommandEncoder, WrenchEncoder, wrench_msg
from robot_hrl.nodes.skill_command import CommandChannel, CommandPublisher
from robot_hrl.nodes.skill_core import SkillCore, TickOutput
from robot_hrl.nodes.skill_loop import RealtimeLoop
from robot_hrl.nodes.skill_state import SkillConfig, SkillStateMachine
from robot_hrl.robots import DEFAULT_ROBOT
from robot_hrl.transport.interface import COMMAND_QOS, INPUT_QOS, SENSOR_QOS

__all__ = [
    "COMMAND_FRAME", "CommandChannel", "CommandPublisher", "OdometryDecoder", "SkillConfig", "SkillCore", "SkillNode",
    "SkillStateMachine", "StampedCommandEncoder", "TickOutput", "WrenchEncoder", "main", "wrench_msg",
]


class SkillNode(RealtimeLoop):
    """I/O wiring of :class:`SkillCore`: subscriptions, publishers, the real-time loop (:class:`RealtimeLoop`)."""

    GRAPH_CHECK_S = 2.0
    """How often the publishers of the command topic and /odom are counted (robot_hrl.nodes.graph_watch)."""
    _graph_status: tuple = (0, "not checked yet", {})

    def __init__(self, node, policy=None, shield=None):
        self.node = node
        p = {name: node.declare_parameter(name, default) for name, default in (
            ("robot", DEFAULT_ROBOT), ("world", "models/worlds/demo.yaml"), ("model", "models/crazyflie_goto.onnx"),
            ("provider", "auto"), ("require_sha256", False), ("control_rate_hz", 0.0), ("shield_config", ""), ("reached_radius_m", 0.15),
            ("reached_speed_mps", 0.3), ("blocked_after_s", 3.0), ("status_rate_hz", 10.0),
            ("diagnostics_rate_hz", 2.0), ("use_sim_time", False), ("realtime_priority", 0),
            ("spin_margin_us", round(LoopTiming.spin_margin_s * 1e6, 3)), ("gc_after_tick", LoopTiming.gc_after_tick),
            ("cpu_affinity", LoopTiming.cpu), ("realtime_dds_threads", LoopTiming.realtime_dds_threads),
            ("range_shield", False), ("battery_timeout_s", 0.5), ("heading_model", ""),
        )}
        self.p = p
        from robot_hrl.nodes.resources import resolve_resource
        from robot_hrl.robots import get_robot
        from robot_hrl.world import load_world

        for key in ("status_rate_hz", "diagnostics_rate_hz"):
            if not float(p[key]) > 0:
                raise ConfigError(f"skill_node: {key}={p[key]!r} must be > 0")
        if not 0 <= int(p["realtime_priority"]) <= 99:
            raise ConfigError(f"skill_node: realtime_priority={p['realtime_priority']!r}: 0 (off) or 1..99 (SCHED_FIFO)")
        self.timing = LoopTiming.from_params(p["spin_margin_us"], p["gc_after_tick"], p["cpu_affinity"],
                                             p["realtime_dds_threads"])
        if float(p["control_rate_hz"]) < 0:
            raise ConfigError(f"skill_node: control_rate_hz={p['control_rate_hz']!r} must be >= 0 (0 = the contract's)")
        try:
            robot = get_robot(str(p["robot"]))
        except KeyError as exc:
            raise ConfigError(str(exc).strip('"')) from None
        self.world = load_world(resolve_resource(p["world"], "world file"))
        if policy is None:
            from robot_hrl.runtime import OnnxPolicy

            rate = float(p["control_rate_hz"]) or None
            policy = OnnxPolicy(resolve_resource(p["model"], "model file"), robot, provider=str(p["provider"]),
                                control_rate_hz=rate, require_sha256=bool(p["require_sha256"]))
        self.policy = policy
        self.rate_hz = float(p["control_rate_hz"]) or float(policy.contract.control_rate_hz)
        self.period_s = 1.0 / self.rate_hz
        if shield is None:
            from robot_hrl.safety import Shield

            path = str(p["shield_config"]).strip()
            path = resolve_resource(path, "shield config") if path else None
            if bool(p["range_shield"]):
                shield = range_shield(path, robot, self.world, policy.contract.subgoal_radius_m, policy.contract.action)
            else:
                shield = Shield.from_yaml(path, robot, self.world, policy.contract.subgoal_radius_m,
                                          action=policy.contract.action)
        self.shield = shield
        self.robot = robot
        shield_rate = getattr(getattr(shield, "config", None), "control_rate_hz", None)
        if shield_rate is not None and abs(float(shield_rate) - self.rate_hz) > 1e-9:
            raise ConfigError(f"skill_node: the model runs at {self.rate_hz:g} Hz, the robot's shield is designed for "
                              f"{float(shield_rate):g} Hz (its control_rate_hz: the stopping model and limits assume "
                              "that period); use a model trained at that rate, or a shield_config for this one")
        self.channel = CommandChannel.of(robot, policy.contract.action.mode)
        """The robot's command topic and the message of the contract's action mode."""
        heading = None
        if str(p["heading_model"]).strip():
            from robot_hrl.runtime.heading import heading_of_level

            heading = heading_of_level(resolve_resource(str(p["heading_model"]).strip(), "navigate model (heading_model)"),
                                       policy)
        self.heading = heading
        """The yaw loop the learned level was trained with (its contract's ``heading``), or None."""
        self.core = SkillCore(policy, shield, self.world,
                              SkillConfig(float(p["reached_radius_m"]), float(p["reached_speed_mps"]),
                                          float(p["blocked_after_s"])), lands=robot.lands, heading=heading)
        if not float(p["battery_timeout_s"]) > 0:
            raise ConfigError(f"skill_node: battery_timeout_s={p['battery_timeout_s']!r} must be > 0")
        self.core.battery.timeout_s = float(p["battery_timeout_s"])
        self.deadline = DeadlineMonitor(self.period_s)
        self.use_sim_time = bool(p["use_sim_time"])
        self.cmd_pub = node.create_publisher(self.channel.message_class, self.channel.topic, COMMAND_QOS)
        self._command = CommandPublisher(self.cmd_pub, self.channel)
        self.loop_gc = LoopGc(self.timing.gc_after_tick)
        self.status_pub = node.create_publisher(String, "/skill/status", COMMAND_QOS)
        self.diag_pub = node.create_publisher(DiagnosticArray, "/diagnostics", COMMAND_QOS)
        # Raw CDR in: the decoder reads only what the state needs (see OdometryDecoder).
        self._decode_odom = OdometryDecoder()
        odom_sub = node.create_subscription(Odometry, "/odom", self._on_odom, SENSOR_QOS, raw=True)
        from robot_hrl.nodes.graph_watch import GraphWatch

        self.graph = GraphWatch(node)
        """Second writers: another publisher of our command topic, a second /odom source (on /diagnostics)."""
        self.graph.watch_topic(self.channel.topic, 1, "command writer (the motors would take its commands too)")
        self.graph.watch_subscription("/odom", odom_sub, 1, "odometry source")
        self._next_graph_s = 0.0
        # INPUT_QOS: ROS 2's default profile, so `ros2 topic pub` with its defaults reaches the node
        node.create_subscription(PoseStamped, "/subgoal", self._on_subgoal, INPUT_QOS)
        node.create_subscription(Bool, "/estop", self._on_estop, INPUT_QOS)
        node.create_subscription(BatteryState, "/battery", self._on_battery, SENSOR_QOS)
        self.range_errors = 0
        """Range readings refused (NaN, negative, a non-finite stamp): dropped, the sensor goes stale."""
        self.last_range_error = ""
        self._range_unit = self._subscribe_ranges(node)
        self._next_tick_s: float | None = None
        self._next_status_s = 0.0
        self._next_diag_s = 0.0
        self._last_state_name = None
        self._subgoal_reports: list[str] = []
        if self.use_sim_time:
            # Created after /odom: on a wake-up the odometry of the period is taken before its clock.
            node.create_subscription(Clock, "/clock", self._on_clock, SENSOR_QOS)
        self.ticks = 0
        self._last_command: tuple = (None, None)
        """(command, stamp) of the latest tick, re-sent while /clock stands still."""
        self._restore_thread: list = []
        """Undo actions of set_realtime_priority / set_cpu_affinity, run when the loop ends."""

    def _subscribe_ranges(self, node):
        """The live rangers of the shield's ``range_obstacles`` unit (when listed): ``/range/<name>``, best effort."""
        import os
        from functools import partial

        from robot_hrl.msgs import range_class_for_distro

        try:
            unit = self.shield.unit("range_obstacles")
        except (KeyError, AttributeError):
            return None
        if unit is None:
            return None
        cls = range_class_for_distro(os.environ.get("ROS_DISTRO"))
        for spec in unit.specs:
            node.create_subscription(cls, spec.topic, partial(self._on_range, spec.name), SENSOR_QOS)
        return unit

    def _on_range(self, name: str, msg) -> None:
        from robot_hrl.errors import ObservationError

        try:
            self._range_unit.update(name, msg.range, seconds_from_time(msg.header.stamp))
        except ObservationError as exc:
            self.range_errors += 1
            self.last_range_error = str(exc)
            if self.range_errors <= 3 or self.range_errors % 100 == 0:
                self.node.get_logger().warning(f"range reading refused: {exc} ({self.range_errors} so far)")

    # ---- callbacks ----------------------------------------------------------------------------
    def _on_odom(self, data: bytes) -> None:
        try:
            state = self._decode_odom(data)
            frame_id, child_frame_id = self._decode_odom.frames(data)
        except Exception as exc:  # noqa: BLE001 - a bad estimate is counted, and goes stale
            self.core.on_bad_odometry(str(exc), self.node.now())
            return
        self.core.on_state(state, self.node.now(), frame_id, child_frame_id)

    def _on_battery(self, msg) -> None:
        try:
            refusal = self.core.on_battery(msg.voltage, seconds_from_time(msg.header.stamp), self.node.now())
        except Exception as exc:  # noqa: BLE001 - a malformed sample is refused, the node goes on
            refusal = self.core.battery._refuse("malformed", str(exc))
        if refusal is not None:
            n = sum(self.core.battery.refused.values())
            if n <= 3 or n % 100 == 0:
                self.node.get_logger().warning(f"battery reading refused: {refusal} ({n} so far)")

    def _on_subgoal(self, msg: PoseStamped) -> None:
        interventions = self.core.on_subgoal(position_of(msg), self.node.now())
        for item in interventions:
            text = repr(item)
            self.node.get_logger().warning(f"subgoal shielded: {text}")
            self._subgoal_reports.append(text)
        del self._subgoal_reports[:-5]

    def _on_estop(self, msg: Bool) -> None:
        self.core.estop(bool(msg.data), self.node.now())
        self.node.get_logger().error("emergency stop " + ("LATCHED" if msg.data else "released"))
        self.publish_diagnostics(self.node.now())

    def _on_clock(self, msg: Clock) -> None:
        now = seconds_from_time(msg.clock)
        if self._next_tick_s is None or now < self._next_tick_s - 1.0:  # first tick, or the clock restarted
            self._next_tick_s = now
        if now + 1e-6 >= self._next_tick_s:
            skipped = max(0, int(math.floor((now - self._next_tick_s) / self.period_s + 1e-6)))
            self._next_tick_s += (skipped + 1) * self.period_s
            self.tick(now, late_s=0.0, skipped=0)
        elif now == self._last_command[1]:
            # The clock stands still: the sim waits for this period's command (at start-up, the first
            # one may have gone out before discovery matched the sim's subscription). Send it again.
            self._command.publish(*self._last_command)

    # ---- the loop -----------------------------------------------------------------------------
    def tick(self, now: float, late_s: float = 0.0, skipped: int = 0) -> None:
        t0 = time.perf_counter()
        out = self.core.tick(now)
        self._command.publish(out.command, now)
        self._last_command = (out.command, now)
        duration = time.perf_counter() - t0
        self.deadline.record(duration, late_s, skipped)
        self.ticks += 1
        state_name = out.state
        if now >= self._next_status_s or state_name != self._last_state_name:
            self._next_status_s = now + 1.0 / float(self.p["status_rate_hz"])
            self.status_pub.publish(json_string(out.status))
            if state_name != self._last_state_name:
                self.node.get_logger().info(f"state {self._last_state_name} -> {state_name} "
                                            f"(mode {out.mode}{': ' + self.core.last_reason if self.core.last_reason else ''})")
                self._last_state_name = state_name
        if now >= self._next_diag_s or out.interventions and now >= self._next_diag_s - 0.4:
            self._next_diag_s = now + 1.0 / float(self.p["diagnostics_rate_hz"])
            self.publish_diagnostics(now)
        self.loop_gc.after_tick()  # in the slack before the next deadline, not inside a tick

    def publish_diagnostics(self, now: float) -> None:
        statuses = []
        try:
            unit_diags = list(self.shield.diagnostics())
        except Exception as exc:  # noqa: BLE001
            unit_diags = [{"name": "shield", "level": ERROR, "message": f"diagnostics failed: {exc}", "values": {}}]
        for d in unit_diags:
            statuses.append(diag_status(f"skill_node: {d.get('name', 'shield')}", int(d.get("level", OK)),
                                        str(d.get("message", "")), dict(d.get("values", {})),
                                        hardware_id=str(d.get("hardware_id", ""))))
        core = self.core
        level = OK
        mode = core.last_mode
        if mode not in ("nominal", "idle", "policy"):
            level = WARN
        if core.last_state == "estop":
            level = ERROR
        values = {"mode": mode, "state": core.last_state, "reason": core.last_reason,
                  "subgoals_received": core.subgoals_received, "subgoals_shielded": core.subgoals_shielded,
                  "odometry_errors": core.odom_errors}
        if core.last_odom_error:
            values["last_odometry_error"] = core.last_odom_error
        if self._range_unit is not None:
            values["range_errors"] = self.range_errors
            if self.last_range_error:
                values["last_range_error"] = self.last_range_error
        if self._subgoal_reports:
            values["last_subgoal_intervention"] = self._subgoal_reports[-1]
        for unit, n in core.interventions.items():
            values[f"interventions.{unit}"] = n
        statuses.append(diag_status("skill_node: interventions", level, f"mode {mode}"
                                    + (f" ({core.last_reason})" if core.last_reason else ""), values))
        if now >= self._next_graph_s:  # the discovery data, every GRAPH_CHECK_S (not every diagnostics period)
            self._next_graph_s = now + self.GRAPH_CHECK_S
            self._graph_status = self.graph.diagnostic()
        g_level, g_message, g_values = self._graph_status
        statuses.append(diag_status("skill_node: graph", g_level, g_message, g_values))
        b_message, b_values = core.battery.status(now)
        b_level = OK if core.battery.voltage(now) is not None else WARN  # refusals are named in its values
        statuses.append(diag_status("skill_node: battery", b_level, b_message, b_values))
        stats = {**self.deadline.stats(), "gc_collections_after_tick": self.loop_gc.collections}
        d_level = OK if stats["misses"] == 0 else WARN
        statuses.append(diag_status("skill_node: deadline", d_level,
                                    f"{stats['misses']} missed deadline(s) in {stats['ticks']} ticks at "
                                    f"{self.rate_hz:g} Hz", stats))
        self.diag_pub.publish(diag_array(now, statuses))

    def close(self) -> None:
        self.loop_gc.close()
        try:
            self.publish_diagnostics(self.node.now())
        except Exception:  # noqa: BLE001 - best effort at shutdown
            pass


RANGE_SHIELD_FILE = "shield_ranges.yaml"
"""The robot's range-source overlay, next to its shield.yaml: the ``range_obstacles`` section and the keys of the
``backup`` section the range source changes."""


def range_shield(path, robot, world, subgoal_radius_m: float, action):
    """The robot's shield (or the file ``path``) with its ``range_obstacles`` unit listed after the map's
    ``obstacles`` unit (both sources on). The zones: the file's own ``range_obstacles`` section, else the robot's
    overlay ``robot_hrl/robots/<robot>/shield_ranges.yaml``, whose ``backup`` keys then replace the file's."""
    from pathlib import Path

    import yaml

    from robot_hrl.safety import Shield
    from robot_hrl.safety.config import parse_shield_config

    source = Path(path or robot.shield_config_path)
    data = yaml.safe_load(source.read_text())
    if not isinstance(data, dict):
        raise ConfigError(f"skill_node: {source} is not a shield config (a YAML mapping)")
    if "range_obstacles" not in data:
        overlay = Path(robot.shield_config_path).with_name(RANGE_SHIELD_FILE)
        if not overlay.is_file():
            raise ConfigError(f"skill_node: range_shield=true needs the range source's zones: a range_obstacles section "
                              f"in {source}, or {overlay} (robot {robot.name!r} has none); see docs/safety.md")
        extra = yaml.safe_load(overlay.read_text()) or {}
        if not isinstance(extra, dict) or not isinstance(extra.get("backup") or {}, dict):
            raise ConfigError(f"skill_node: {overlay} must be a YAML mapping with range_obstacles (and optionally backup) "
                              "sections; see docs/safety.md")
        data["range_obstacles"] = extra.get("range_obstacles")
        if extra.get("backup"):
            data["backup"] = {**(data.get("backup") or {}), **extra["backup"]}
    units = list(data.get("units") or [])
    if "range_obstacles" not in units:
        units.insert(units.index("subgoal") if "subgoal" in units else len(units), "range_obstacles")
    data["units"] = units
    return Shield(parse_shield_config(data, str(source)), robot, world, subgoal_radius_m, action=action)


def main(argv: list[str] | None = None) -> int:
    return run_main("skill_node", SkillNode, argv)


if __name__ == "__main__":
    sys.exit(main())
