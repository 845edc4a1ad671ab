"""The skill node: the policy at a fixed rate, every command through the shield.

Topics (relative to the node's namespace):

- in  ``/odom`` nav_msgs/Odometry (best effort): the state; its twist is in the body frame.
- in  ``/subgoal`` geometry_msgs/PoseStamped (reliable): where to go (world ENU, m). It passes
  the shield's subgoal unit first (finite, inside the fence, outside obstacles, within the
  contract's subgoal radius). A subgoal on the floor (z at or below the world's floor plus
  ``land_request_m``) asks for a landing under it. Subgoals must keep arriving (the planner
  re-sends them): when they stop, the watchdog holds, then lands.
- in  ``/estop`` std_msgs/Bool (latched): ``true`` latches the emergency stop (motors off),
  ``false`` releases it.
- out ``/cmd_wrench`` geometry_msgs/WrenchStamped, frame ``base_link``: ``wrench.force.z`` is the
  collective thrust (N), ``wrench.torque`` the body torques (N m); x/y forces are zero. This is
  crazyflie-firmware's ``controlModeForceTorque`` command; simulators apply the firmware mixer.
- out ``/skill/status`` std_msgs/String JSON: ``state`` (waiting, idle, tracking, reached,
  blocked, holding, landing, landed, estop), ``requested`` and ``subgoal`` (after the shield),
  ``distance`` to the requested subgoal, ``speed``, the shield ``mode`` and its ``reason``.
- out ``/diagnostics``: one status per shield unit (interventions by constraint), the shield
  summary (mode, interventions by unit) and the deadline monitor (tick p50/p99, misses).

Timing: without ``use_sim_time`` a fixed-rate loop at the contract's rate (absolute deadlines,
missed deadlines counted): it sleeps in the executor (taking messages) until ``spin_margin_us``
before each deadline, then busy-waits to it; the cyclic garbage collector runs right after a
tick, not at a random allocation; ``realtime_priority`` and ``cpu_affinity`` optionally give the
loop's thread SCHED_FIFO and a core of its own. With ``use_sim_time`` one tick per control
period of ``/clock``, so the node follows a simulator running faster than real time.
"""

from __future__ import annotations

import math
import os
import struct
import sys
import threading
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from robot_hrl.errors import ConfigError
from robot_hrl.msgs import Bool, Clock, DiagnosticArray, Odometry, PoseStamped, String, WrenchStamped
from robot_hrl.geometry import rotation_matrix_from_quat
from robot_hrl.msgs import header, seconds_from_time, state_from_odometry, time_from_seconds
from robot_hrl.nodes.common import (
    ERROR, OK, WARN, diag_array, diag_status, finite_or_none, json_string, position_of, run_main,
)
from robot_hrl.nodes.deadline import (
    DDS_THREAD_PREFIXES, DeadlineMonitor, FixedRateSchedule, LoopGc, LoopTiming, set_fifo, threads_named, wait_until,
)
from robot_hrl.state import RobotState
from robot_hrl.transport.interface import COMMAND_QOS, INPUT_QOS, SENSOR_QOS


@dataclass
class SkillConfig:
    reached_radius_m: float = 0.15
    """A subgoal is reached within this distance..."""
    reached_speed_mps: float = 0.3
    """...and below this speed."""
    blocked_after_s: float = 3.0
    """'blocked': no progress towards the requested subgoal for this long while not reached."""
    progress_m: float = 0.05
    """Progress smaller than this does not count."""
    land_request_m: float = 0.05
    """A subgoal this close above the floor (or below it) is a landing request."""


class TickOutput:
    """One tick's command and state; the full status dict is built only when asked for (it is
    published at ``status_rate_hz``, not every tick)."""

    __slots__ = ("wrench", "mode", "state", "interventions", "_make", "_status")

    def __init__(self, wrench: np.ndarray, mode: str, state: str, interventions, make_status):
        self.wrench = wrench
        self.mode = mode
        self.state = state
        self.interventions = interventions
        self._make = make_status
        self._status = None

    @property
    def status(self) -> dict[str, Any]:
        if self._status is None:
            self._status = self._make()
        return self._status


class SkillCore:
    """Policy, then shield, once per tick; no I/O. Thread-safe inputs (callbacks may run elsewhere)."""

    def __init__(self, policy, shield, world, config: SkillConfig | None = None):
        self.policy = policy
        self.shield = shield
        self.world = world
        self.config = config or SkillConfig()
        self.floor_z = float(world.bounds.min[2])
        self._last_actions = np.zeros(4)
        self._nan_actions = np.full(4, np.nan)
        self._lock = threading.Lock()
        self.state = None
        self.state_received_s: float | None = None
        self.requested: np.ndarray | None = None
        self.safe_subgoal: np.ndarray | None = None
        self.subgoal_received_s: float | None = None
        self.subgoals_received = 0
        self.subgoals_shielded = 0
        """Subgoals the subgoal unit changed (clamped, or replaced when non-finite)."""
        self.land_requested = False
        self.odom_errors = 0
        self.last_odom_error = ""
        self._best_distance = math.inf
        self._progress_at: float | None = None
        self.interventions: dict[str, int] = {}
        self.last_mode = "idle"
        self.last_reason = ""
        self.last_status: dict[str, Any] = {"state": "waiting"}
        self.last_state = "waiting"
        self.engaged = False
        """A finite subgoal has arrived since start: the policy flies."""
        self.landed_request: np.ndarray | None = None
        """The requested subgoal when the shield cut the motors after landing."""
        self._reset_faults = False
        self._land_sent = False
        self._subgoal_active: set = set()
        self._tick_active: set = set()

    # ---- inputs -------------------------------------------------------------------------------
    def on_state(self, state, now: float) -> None:
        with self._lock:
            self.state = state
            self.state_received_s = now

    def on_bad_odometry(self, error: str) -> None:
        with self._lock:
            self.odom_errors += 1
            self.last_odom_error = error

    def on_subgoal(self, position, now: float) -> list:
        """Pass a requested subgoal through the shield's subgoal unit; returns its interventions."""
        p = np.asarray(position, dtype=np.float64)
        with self._lock:
            current = None if self.state is None else np.asarray(self.state.position_w, dtype=np.float64)
            self.subgoals_received += 1
            finite = bool(np.all(np.isfinite(p)))
            land = finite and p[2] <= self.floor_z + self.config.land_request_m
            if land:
                # A landing request: the shield checks the point as if it were in the air; the
                # backup lands under where the robot is (the planner sends the point below it).
                probe = np.array([p[0], p[1], self.floor_z + 1.0])
                safe, interventions = self._filter_subgoal(probe, current, now)
                safe = np.array([safe[0], safe[1], p[2]])
            else:
                safe, interventions = self._filter_subgoal(p, current, now)
            new_request = self.requested is None or not np.array_equal(p, self.requested, equal_nan=True)
            self._count_subgoal(interventions, new_request)
            if interventions:
                self.subgoals_shielded += 1
            if new_request:
                self._best_distance = math.inf
                self._progress_at = now
            self.requested = p
            self.safe_subgoal = safe
            self.subgoal_received_s = now
            self.land_requested = land
            if finite and not land:
                if not self.engaged:
                    self.engaged = True
                elif self.last_mode == "motors_off" and not self.shield_latched() and new_request \
                        and self.landed_request is not None and not np.array_equal(p, self.landed_request) \
                        and self._state_fresh(now):
                    self._reset_faults = True  # landed, and a new flight is asked for: take off again
            return interventions

    def _state_fresh(self, now: float) -> bool:
        """A state younger than the shield's state timeout (never take off again on stale odometry)."""
        if self.state is None:
            return False
        watchdog = getattr(self.shield, "watchdog", None)
        timeout = float(getattr(watchdog, "state_timeout", 0.1))
        return now - float(self.state.stamp_s) <= timeout

    def _filter_subgoal(self, p, current, now):
        safe, interventions = self.shield.filter_subgoal(p, current, now)
        return np.asarray(safe, dtype=np.float64), list(interventions or [])

    def _count_subgoal(self, interventions, new_request: bool) -> None:
        """Subgoal interventions count once per distinct requested subgoal (the planner re-sends it)."""
        for item in interventions or []:
            key = (item.unit, item.constraint)
            if new_request or key not in self._subgoal_active:
                self.interventions[item.unit] = self.interventions.get(item.unit, 0) + 1
        self._subgoal_active = {(i.unit, i.constraint) for i in interventions or []}

    def _count_tick(self, interventions, land_requested: bool) -> None:
        """Tick interventions count once per episode: when a unit.constraint starts acting.
        The landing that carries out a request is not an intervention."""
        active = set()
        for item in interventions or []:
            key = (item.unit, item.constraint)
            if land_requested and key in (("watchdog", "stale_subgoal"), ("command", "land_request")):
                continue
            active.add(key)
            if key not in self._tick_active:
                self.interventions[item.unit] = self.interventions.get(item.unit, 0) + 1
        self._tick_active = active

    def estop(self, latch: bool, now: float) -> None:
        with self._lock:
            if latch:
                self.shield.estop("/estop", now)
            else:
                self.shield.reset_estop()

    # ---- the tick -----------------------------------------------------------------------------
    def tick(self, now: float) -> TickOutput:
        with self._lock:
            state, subgoal = self.state, self.safe_subgoal
            state_stamp = None if state is None else state.stamp_s
            subgoal_stamp = self.subgoal_received_s
            land = self.land_requested
            engaged = self.engaged
            if self._reset_faults:
                self._reset_faults = False
                self.landed_request = None
                self.shield.reset_faults()
                if hasattr(self.policy, "reset"):
                    self.policy.reset()
        if not engaged and not self.shield_latched():
            # Nothing asked of us yet (on the ground, motors off): idle; the shield has nothing to guard.
            name = "waiting" if state is None else "idle"
            self.last_state = name
            return TickOutput(np.zeros(4), "idle", name, (), lambda: self._status(name, state, "idle", "", now))
        t0 = time.perf_counter()
        actions = self._last_actions  # no new command (landing, no state yet): the last one again
        if state is not None and subgoal is not None and not land:
            try:
                actions = self.policy.step(state, subgoal)
            except Exception as exc:  # noqa: BLE001 - an observation error: the watchdog sees a non-finite output
                self.last_reason = f"policy: {exc}"
                actions = self._nan_actions
        inference_s = time.perf_counter() - t0
        wrench, actions_out, mode, reason, interventions = self.shield_step(now, state, state_stamp, subgoal, subgoal_stamp,
                                                               actions, inference_s, land)
        self._count_tick(interventions, land)
        self._last_actions = actions_out
        if mode == "motors_off" and self.last_mode != "motors_off":
            self.landed_request = None if self.requested is None else self.requested.copy()
        self.last_mode = mode
        self.last_reason = reason
        status_state = self._state_of(mode, state, now, land)
        self.last_state = status_state
        return TickOutput(np.asarray(wrench, dtype=np.float64), mode, status_state, interventions,
                          lambda: self._status(status_state, state, mode, reason, now))

    def shield_step(self, now, state, state_stamp, subgoal, subgoal_stamp, actions, inference_s, land):
        """One shield tick. A requested landing goes to ``Shield.request_land`` once (the shield's
        command unit: backup land, then motors off, latched until a new flight resets it)."""
        from robot_hrl.safety import ShieldInput

        request_land = getattr(self.shield, "request_land", None)
        if land and not self._land_sent:
            self._land_sent = True
            if request_land is not None:
                request_land(now, "landing requested on /subgoal")
        elif not land:
            self._land_sent = False
        # Without request_land (older shields) the subgoal is withheld: the watchdog holds, then lands.
        inp = ShieldInput(now, state, actions, subgoal_w=None if land and request_land is None else subgoal,
                          subgoal_stamp_s=subgoal_stamp, state_stamp_s=state_stamp, inference_s=inference_s)
        out = self.shield.step(inp)
        return out.wrench, out.actions, str(out.mode), out.reason, out.interventions

    def shield_latched(self) -> bool:
        return bool(getattr(self.shield, "estopped", False))

    def _state_of(self, mode: str, state, now: float, land: bool) -> str:
        if mode == "motors_off":
            return "estop" if self.shield_latched() else "landed"
        if mode == "backup_land":
            return "landing"
        watchdog_hold = mode == "backup_hold" and self.last_reason.startswith(("watchdog", "battery", "estop"))
        if watchdog_hold or land or state is None or self.requested is None:
            return "holding" if mode == "backup_hold" else "idle"
        # The policy flies, or the shield holds it off its subgoal (fence, altitude, obstacles, limits).
        d = float(np.linalg.norm(np.asarray(state.position_w) - self.requested))
        speed = float(np.linalg.norm(state.linear_velocity_w))
        if d <= self.config.reached_radius_m and speed <= self.config.reached_speed_mps:
            self._progress_at = now
            return "reached"
        if d < self._best_distance - self.config.progress_m:
            self._best_distance = d
            self._progress_at = now
        if self._progress_at is not None and now - self._progress_at >= self.config.blocked_after_s:
            return "blocked"
        return "holding" if mode == "backup_hold" else "tracking"

    def _status(self, status_state: str, state, mode: str, reason: str, now: float) -> dict[str, Any]:
        distance = speed = None
        if state is not None and self.requested is not None and np.all(np.isfinite(self.requested)):
            distance = round(float(np.linalg.norm(np.asarray(state.position_w) - self.requested)), 4)
        if state is not None:
            speed = round(float(np.linalg.norm(state.linear_velocity_w)), 4)
        s = {
            "state": status_state, "t": round(now, 4), "mode": mode, "reason": reason,
            "requested": None if self.requested is None else [finite_or_none(v) for v in self.requested],
            "subgoal": None if self.safe_subgoal is None else [round(float(v), 4) for v in self.safe_subgoal],
            "distance": distance, "speed": speed,
            "position": None if state is None else [round(float(v), 4) for v in state.position_w],
        }
        self.last_status = s
        return s


COMMAND_FRAME = "base_link"


def wrench_msg(wrench: np.ndarray, stamp_s: float) -> WrenchStamped:
    msg = WrenchStamped(header=header(stamp_s, COMMAND_FRAME))
    msg.wrench.force.z = float(wrench[0])
    msg.wrench.torque.x, msg.wrench.torque.y, msg.wrench.torque.z = (float(v) for v in wrench[1:4])
    return msg


class WrenchEncoder:
    """The CDR bytes of :func:`wrench_msg`, packed with one precompiled :class:`struct.Struct` (a few
    microseconds instead of the ~26 us of the generic Python serializer, on every tick's path to the
    motors). The layout is XCDR1 little-endian, as ROS 2 sends it: encapsulation header, stamp
    (int32 sec, uint32 nanosec), frame_id (uint32 length with the NUL, bytes, padding to 8), then
    force x y z and torque x y z as float64. tests/test_skill_node_timing.py checks it byte for byte
    against ``WrenchStamped.serialize()``."""

    _ENCAPSULATION = b"\x00\x01\x00\x00"  # CDR_LE, no options

    def __init__(self, frame_id: str = COMMAND_FRAME):
        name = frame_id.encode() + b"\0"
        pad = -(4 + 4 + 4 + len(name)) % 8  # the doubles are 8-aligned, counted after the encapsulation
        self._struct = struct.Struct(f"<4siiI{len(name)}s{pad}x6d")
        self._name = name

    def encode(self, wrench: np.ndarray, stamp_s: float) -> bytes:
        t = time_from_seconds(stamp_s)  # the one stamp conversion (rounding, range checks) of the stack
        w = wrench.tolist() if isinstance(wrench, np.ndarray) else [float(v) for v in wrench]
        return self._struct.pack(self._ENCAPSULATION, t.sec, t.nanosec, len(self._name), self._name,
                                 0.0, 0.0, w[0], w[1], w[2], w[3])


_CDR_LE = b"\x00\x01"
_STAMP_AND_LEN = struct.Struct("<iII")
_U32 = struct.Struct("<I")
_POSE = struct.Struct("<7d")
_TWIST = struct.Struct("<6d")
_COVARIANCE_BYTES = 36 * 8


class OdometryDecoder:
    """The :class:`RobotState` of ``/odom``'s CDR bytes, reading the 13 numbers it needs with
    precompiled :class:`struct.Struct` s instead of decoding the whole message (two 36-element
    covariances, nested classes: ~35 us hot, ~130 us on a cold loop, on the path to the motors).

    The state is computed exactly as :func:`robot_hrl.msgs.state_from_odometry` does (same numpy
    operations, so the same bits); any sample off the fast path (another encapsulation, lengths
    that do not add up, an unusable quaternion, non-finite values) goes the generic way,
    ``state_from_odometry(Odometry.deserialize(data))``, which raises its errors.
    tests/test_skill_node_timing.py compares the two."""

    def __call__(self, data: bytes) -> RobotState:
        state = self.fast(data)
        if state is None:
            state = state_from_odometry(Odometry.deserialize(data))
        return state

    @staticmethod
    def fast(data: bytes) -> RobotState | None:
        """The state, or None when the sample is off the fast path."""
        if len(data) < 4 or data[:2] != _CDR_LE:
            return None
        body = memoryview(data)[4:]  # XCDR1 aligns to the start of the body
        try:
            sec, nanosec, frame_len = _STAMP_AND_LEN.unpack_from(body, 0)
            if frame_len < 1:
                return None
            o = (12 + frame_len + 3) & ~3
            (child_len,) = _U32.unpack_from(body, o)
            if child_len < 1:
                return None
            o = (o + 4 + child_len + 7) & ~7
            if o + 56 + _COVARIANCE_BYTES + 48 + _COVARIANCE_BYTES > len(body):
                return None
            x, y, z, qx, qy, qz, qw = _POSE.unpack_from(body, o)
            vx, vy, vz, wx, wy, wz = _TWIST.unpack_from(body, o + 56 + _COVARIANCE_BYTES)
        except struct.error:
            return None
        q = np.array([qw, qx, qy, qz], dtype=np.float64)
        n = float(np.linalg.norm(q))
        if not np.isfinite(n) or n < 1e-9:
            return None
        q = q / n
        v_body = np.array([vx, vy, vz], dtype=np.float64)
        state = RobotState(position_w=np.array([x, y, z], dtype=np.float64), quat_wxyz=q,
                           linear_velocity_w=rotation_matrix_from_quat(q) @ v_body,
                           angular_velocity_b=np.array([wx, wy, wz], dtype=np.float64),
                           stamp_s=sec + nanosec * 1e-9)
        return state if state.is_finite() else None


class CommandPublisher:
    """``/cmd_wrench``: the pre-encoded CDR bytes through ``Publisher.publish_raw``."""

    def __init__(self, publisher):
        self.publisher = publisher
        self._raw = publisher.publish_raw
        self._encoder = WrenchEncoder()

    def publish(self, wrench: np.ndarray, stamp_s: float) -> None:
        self._raw(self._encoder.encode(wrench, stamp_s))


class SkillNode:
    """I/O wiring of :class:`SkillCore`: subscriptions, the fixed-rate loop, publishers."""

    def __init__(self, node, policy=None, shield=None):
        self.node = node
        p = {name: node.declare_parameter(name, default) for name, default in (
            ("robot", "crazyflie_2x"), ("world", "models/worlds/demo.yaml"), ("model", "models/crazyflie_goto.onnx"),
            ("provider", "auto"), ("control_rate_hz", 0.0), ("shield_config", ""), ("reached_radius_m", 0.15),
            ("reached_speed_mps", 0.3), ("blocked_after_s", 3.0), ("status_rate_hz", 10.0),
            ("diagnostics_rate_hz", 2.0), ("use_sim_time", False), ("realtime_priority", 0),
            ("spin_margin_us", round(LoopTiming.spin_margin_s * 1e6, 3)), ("gc_after_tick", LoopTiming.gc_after_tick),
            ("cpu_affinity", LoopTiming.cpu), ("realtime_dds_threads", LoopTiming.realtime_dds_threads),
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
                                control_rate_hz=rate)
        self.policy = policy
        self.rate_hz = float(p["control_rate_hz"]) or float(policy.contract.control_rate_hz)
        self.period_s = 1.0 / self.rate_hz
        if shield is None:
            from robot_hrl.safety import Shield

            path = str(p["shield_config"]).strip()
            shield = Shield.from_yaml(resolve_resource(path, "shield config") if path else None, robot, self.world,
                                      policy.contract.subgoal_radius_m)
        self.shield = shield
        self.core = SkillCore(policy, shield, self.world,
                              SkillConfig(float(p["reached_radius_m"]), float(p["reached_speed_mps"]),
                                          float(p["blocked_after_s"])))
        self.deadline = DeadlineMonitor(self.period_s)
        self.use_sim_time = bool(p["use_sim_time"])
        self.cmd_pub = node.create_publisher(WrenchStamped, "/cmd_wrench", COMMAND_QOS)
        self._command = CommandPublisher(self.cmd_pub)
        self.loop_gc = LoopGc(self.timing.gc_after_tick)
        self.status_pub = node.create_publisher(String, "/skill/status", COMMAND_QOS)
        self.diag_pub = node.create_publisher(DiagnosticArray, "/diagnostics", COMMAND_QOS)
        # Raw CDR in: the decoder reads only what the state needs (see OdometryDecoder).
        self._decode_odom = OdometryDecoder()
        node.create_subscription(Odometry, "/odom", self._on_odom, SENSOR_QOS, raw=True)
        # INPUT_QOS: ROS 2's default profile, so `ros2 topic pub` with its defaults reaches the node
        node.create_subscription(PoseStamped, "/subgoal", self._on_subgoal, INPUT_QOS)
        node.create_subscription(Bool, "/estop", self._on_estop, INPUT_QOS)
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
        """(wrench, stamp) of the latest tick, re-sent while /clock stands still."""
        self._restore_thread: list = []
        """Undo actions of set_realtime_priority / set_cpu_affinity, run when the loop ends."""

    # ---- callbacks ----------------------------------------------------------------------------
    def _on_odom(self, data: bytes) -> None:
        try:
            state = self._decode_odom(data)
        except Exception as exc:  # noqa: BLE001 - a bad estimate is counted, and goes stale
            self.core.on_bad_odometry(str(exc))
            return
        self.core.on_state(state, self.node.now())

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
        self._command.publish(out.wrench, now)
        self._last_command = (out.wrench, now)
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
        if self._subgoal_reports:
            values["last_subgoal_intervention"] = self._subgoal_reports[-1]
        for unit, n in core.interventions.items():
            values[f"interventions.{unit}"] = n
        statuses.append(diag_status("skill_node: interventions", level, f"mode {mode}"
                                    + (f" ({core.last_reason})" if core.last_reason else ""), values))
        stats = {**self.deadline.stats(), "gc_collections_after_tick": self.loop_gc.collections}
        d_level = OK if stats["misses"] == 0 else WARN
        statuses.append(diag_status("skill_node: deadline", d_level,
                                    f"{stats['misses']} missed deadline(s) in {stats['ticks']} ticks at "
                                    f"{self.rate_hz:g} Hz", stats))
        self.diag_pub.publish(diag_array(now, statuses))

    def set_realtime_priority(self) -> bool:
        """SCHED_FIFO for the thread that runs the loop (real time only; needs CAP_SYS_NICE, e.g. root
        or `ulimit -r`); without the permission a warning, and the loop runs at normal priority."""
        prio = int(self.p["realtime_priority"])
        if prio <= 0 or self.use_sim_time:
            return False
        try:
            self._restore_thread.append(set_fifo(0, prio))
        except (OSError, AttributeError) as exc:
            self.node.get_logger().warning(f"realtime_priority={prio}: SCHED_FIFO refused ({exc}); "
                                           "running at normal priority")
            return False
        self.node.get_logger().info(f"control loop at SCHED_FIFO priority {prio}")
        if self.timing.realtime_dds_threads:
            self.raise_dds_threads(max(1, prio - 1))
        return True

    def raise_dds_threads(self, priority: int) -> list[str]:
        """SCHED_FIFO ``priority`` for this process's DDS threads (see ``LoopTiming.realtime_dds_threads``);
        restored when the loop ends. Returns the names of the threads raised."""
        raised = []
        for tid, name in threads_named(DDS_THREAD_PREFIXES):
            try:
                self._restore_thread.append(set_fifo(tid, priority))
            except OSError as exc:  # the thread ended, or no permission: the loop still runs
                self.node.get_logger().warning(f"DDS thread {name} ({tid}) stays at normal priority: {exc}")
                continue
            raised.append(f"{name}({tid})")
        if raised:
            self.node.get_logger().info(f"DDS threads at SCHED_FIFO priority {priority}: {', '.join(raised)}")
        return raised

    def set_cpu_affinity(self) -> bool:
        """Pin the calling (loop) thread to ``cpu_affinity``; an unknown CPU gives a warning and no
        pinning. Threads started before (DDS, onnxruntime) keep their own affinity."""
        cpu = self.timing.cpu
        if cpu < 0:
            return False
        try:
            previous = os.sched_getaffinity(0)
            os.sched_setaffinity(0, {cpu})
        except (OSError, AttributeError, ValueError) as exc:
            self.node.get_logger().warning(f"cpu_affinity={cpu}: refused ({exc}); the loop is not pinned")
            return False
        self._restore_thread.append(lambda: os.sched_setaffinity(0, previous))
        self.node.get_logger().info(f"control loop pinned to CPU {cpu}")
        return True

    def restore_thread(self) -> None:
        """Give the loop's thread back its scheduling and affinity (the thread may go on, e.g. in a
        test or benchmark, after the loop)."""
        while self._restore_thread:
            try:
                self._restore_thread.pop()()
            except OSError as exc:
                self.node.get_logger().warning(f"could not restore the thread's scheduling: {exc}")

    def run(self, stop: threading.Event) -> None:
        self.loop_gc.start()
        try:
            self.set_realtime_priority()
            self.set_cpu_affinity()
            if self.use_sim_time:
                self.node.spin(until=stop.is_set)  # the ticks come from /clock
            else:
                self._run_realtime(stop)
        finally:
            self.restore_thread()
            self.loop_gc.close()

    def _stopped(self, stop: threading.Event) -> bool:
        return stop.is_set() or bool(getattr(self.node, "is_shutdown", False))

    def _run_realtime(self, stop: threading.Event) -> None:
        """The fixed-rate loop on the node's single-threaded executor (callbacks and ticks in one
        thread: no lock or GIL hand-over between them). Between deadlines the executor sleeps and runs
        the callbacks of arriving messages; ``spin_margin_us`` before a deadline it stops sleeping and
        polls, so the tick starts on time on a warm CPU."""
        node = self.node
        schedule = FixedRateSchedule(self.period_s, time.perf_counter())

        def stopped() -> bool:
            return self._stopped(stop)

        def poll() -> None:
            node.spin_once(0.0)

        while not stopped():
            wait_until(schedule.next_s, self.timing.spin_margin_s, node.spin_once, poll, stop=stopped)
            if stopped():
                return
            late, skipped = schedule.start_tick(time.perf_counter())
            self.tick(node.now(), late_s=late, skipped=skipped)

    def close(self) -> None:
        self.loop_gc.close()
        try:
            self.publish_diagnostics(self.node.now())
        except Exception:  # noqa: BLE001 - best effort at shutdown
            pass


def main(argv: list[str] | None = None) -> int:
    return run_main("skill_node", SkillNode, argv)


if __name__ == "__main__":
    sys.exit(main())
