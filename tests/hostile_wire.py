"""Hostile inputs on the wire, shared by tests/test_nodes_hostile_wire.py and benchmarks/bench_hostile_inputs.py.

The planner node and the skill node run as separate processes (real Cyclone DDS, loopback, a
domain of their own). A :class:`WireRig` joins with a node of its own that publishes on every
topic the two subscribe to: messages with extreme values (NaN, infinities, 1e308, subnormals,
huge strings) and raw CDR bytes (a valid sample with bytes overwritten at random: whatever gets
past the writer's own structure check reaches the nodes' decoders). It watches /diagnostics,
/planner/status, /skill/status and /subgoal, and can tell whether a node process has died.

The hypothesis strategies here generate the inputs; the tests and the benchmark draw from them.
"""

from __future__ import annotations

import json
import logging
import math
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from hypothesis import strategies as st

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from robot_hrl.msgs import BatteryState, Bool, DiagnosticArray, Image, Odometry, PoseStamped, String  # noqa: E402
from robot_hrl.transport.dds_config import loopback_env  # noqa: E402
from robot_hrl.transport.interface import COMMAND_QOS, LATCHED_QOS, SENSOR_QOS, QoS  # noqa: E402

GUARD_S = 60.0
"""How long a wait may take before it counts as hung (a guard, not a measurement)."""
START_POSITION = (0.5, 0.5, 0.0125)
HOVER_TASK = "takeoff 1.0; hover 600"

# ---- values ------------------------------------------------------------------------------------------
EXTREME_FLOATS = (math.nan, math.inf, -math.inf, 1e308, -1e308, 1.7976931348623157e308, 5e-324, -0.0, 1e-300,
                  1e15, -1e15, 0.0)
_floats = st.one_of(st.sampled_from(EXTREME_FLOATS), st.floats(allow_nan=True, allow_infinity=True),
                    st.floats(-10, 10))
_text = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=60)
"""Any text a ROS 2 string can carry (no lone surrogates: a CDR string is UTF-8)."""

HOSTILE_TASKS = (
    '{"steps": ' + "[" * 50000 + "]" * 50000 + "}",
    '{"steps": [{"action": "takeoff", "altitude_m": ' + "9" * 400 + "}]}",
    '{"steps": [{"action": "takeoff"}, {"action": "hover", "duration_s": NaN}]}',
    '{"steps": [{"action": "takeoff"}, {"action": "hover", "duration_s": 1e999}]}',
    '{"steps": [{"action": "land"}], "steps": [{"action": "takeoff", "altitude_m": 99}]}',
    "takeoff 1; goto 1e308 1e308 1",
    "takeoff 1; goto nan 1 1",
    "takeoff 1; goto red_b\u043ex",
    "takeoff 1; " + "hover 0.01; " * 70,
    "takeoff 1; visit " + " ".join(["red_box"] * 40),
    "takeoff 1; goto " + "x" * 100 + "; land",
    "hover 1e400",
    "takeoff 1; hover 99999",
    "goto " + "1" * 400 + " 1 1",
    "x" * 70000,
    "\u0000\u0001\u0002",
)
"""Tasks a careless or hostile user sends: each must be refused with a reason."""
BIG_VISIT = "takeoff 1; visit " + " ".join(f"{0.5 + (i % 5) * 0.7:.1f},{0.5 + (i // 5) * 0.6:.1f},1" for i in range(32))
"""A task at the limit (32 targets): refused (some points lie in the pillars) or planned in time, never a hang."""

HOSTILE_STATUSES = (
    '{"state": "reached", "requested": ["a", "b", "c"]}',
    '{"state": "reached", "requested": [NaN, 1, 1]}',
    '{"state": "reached", "distance": 1e999}',
    '{"state": "blocked", "requested": ' + "[" * 5000 + "]" * 5000 + "}",
    '{"state": "landed", "requested": [' + "9" * 400 + ", 1, 1]}",
    '{"state": ["reached"]}',
    '{"state": "teleported"}',
    "[1, 2, 3]",
    "null",
    "",
    '{"state": "reached", "state": "landed"}',
    '{"state": "reached", "distance": -1}',
    '{"state": "reached", "requested": {"x": 1}}',
)


def odometry(position, quat_xyzw=(0.0, 0.0, 0.0, 1.0), twist=(0.0,) * 6, frame="odom", child="base_link",
             stamp_s: float = 0.0) -> Odometry:
    msg = Odometry()
    msg.header.frame_id, msg.child_frame_id = frame, child
    sec = int(stamp_s) if math.isfinite(stamp_s) and abs(stamp_s) < 2e9 else 0
    msg.header.stamp.sec = sec
    p, o = msg.pose.pose.position, msg.pose.pose.orientation
    p.x, p.y, p.z = (float(v) for v in position)
    o.x, o.y, o.z, o.w = (float(v) for v in quat_xyzw)
    t = msg.twist.twist
    t.linear.x, t.linear.y, t.linear.z, t.angular.x, t.angular.y, t.angular.z = (float(v) for v in twist)
    return msg


def pose(position, frame="map") -> PoseStamped:
    msg = PoseStamped()
    msg.header.frame_id = frame
    msg.pose.position.x, msg.pose.position.y, msg.pose.position.z = (float(v) for v in position)
    return msg


_json_value = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False, allow_infinity=False), _text),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_text, inner, max_size=4), max_leaves=12)

odom_msgs = st.builds(odometry, st.tuples(_floats, _floats, _floats), st.tuples(_floats, _floats, _floats, _floats),
                      st.tuples(*[_floats] * 6), _text, _text, _floats)
subgoal_msgs = st.builds(pose, st.tuples(_floats, _floats, _floats), _text)
image_msgs = st.builds(
    lambda h, w, enc, step, data, big: Image(height=h, width=w, encoding=enc, is_bigendian=big, step=step, data=data),
    st.integers(0, 2 ** 32 - 1) | st.integers(0, 8), st.integers(0, 2 ** 32 - 1) | st.integers(0, 8),
    st.sampled_from(["rgb8", "bgr8", "mono8", "16UC1", "32FC1", "", "yuv422"]) | _text,
    st.integers(0, 2 ** 32 - 1) | st.integers(0, 32), st.binary(max_size=2048), st.integers(0, 255))
task_msgs = st.one_of(st.sampled_from((*HOSTILE_TASKS, BIG_VISIT)), _text,
                      st.builds(lambda v: json.dumps({"steps": v}), _json_value)).map(lambda t: String(data=t))
status_msgs = st.one_of(
    st.sampled_from(HOSTILE_STATUSES), _text,
    st.builds(json.dumps, st.fixed_dictionaries(
        {}, optional={"state": st.sampled_from(["reached", "blocked", "landed", "tracking", "idle"]) | _text,
                      "requested": st.lists(_json_value, max_size=4) | _json_value,
                      "distance": _json_value, "speed": _json_value}))).map(lambda t: String(data=t))
estop_msgs = st.builds(Bool, st.booleans())


def battery(voltage: float, stamp_s: float = 0.0) -> BatteryState:
    """A sensor_msgs/BatteryState; its voltage is a float32, so 1e308 can only travel as inf (as a float32 cast gives)."""
    if math.isfinite(voltage) and abs(voltage) > 3.4e38:
        voltage = math.copysign(math.inf, voltage)
    msg = BatteryState(voltage=voltage, present=True)
    msg.header.stamp.sec = int(stamp_s) if math.isfinite(stamp_s) and 0 <= stamp_s < 2 ** 31 else 0
    return msg


battery_msgs = st.builds(battery, _floats | st.floats(-10.0, 10.0), st.floats(0.0, 1e6))

TOPICS = {
    # topic: (message class, QoS, strategy, which node subscribes)
    "/task": (String, LATCHED_QOS, task_msgs, "planner"),
    "/odom": (Odometry, SENSOR_QOS, odom_msgs, "both"),
    "/skill/status": (String, COMMAND_QOS, status_msgs, "planner"),
    "/camera/image_raw": (Image, SENSOR_QOS, image_msgs, "planner"),
    "/subgoal": (PoseStamped, COMMAND_QOS, subgoal_msgs, "skill"),
    "/estop": (Bool, LATCHED_QOS, estop_msgs, "skill"),
    "/battery": (BatteryState, SENSOR_QOS, battery_msgs, "skill"),
}
"""Every topic the planner node (planner:=vlm, so it takes images) and the skill node subscribe to."""


@st.composite
def wire_inputs(draw):
    """One hostile input: (topic, message, None) or (topic, message, byte mutations) for raw CDR."""
    topic = draw(st.sampled_from(sorted(TOPICS)))
    msg = draw(TOPICS[topic][2])
    mutations = draw(st.none() | st.lists(st.tuples(st.integers(0, 1 << 20), st.integers(0, 255)),
                                          min_size=1, max_size=8))
    return topic, msg, mutations


def mutate(data: bytes, mutations) -> bytes:
    """Overwrite bytes of a CDR sample (never the 4-byte encapsulation header)."""
    buf = bytearray(data)
    if len(buf) <= 4:
        return bytes(buf)
    for pos, value in mutations:
        buf[4 + pos % (len(buf) - 4)] = value
    return bytes(buf)


# ---- the rig ----------------------------------------------------------------------------------------
def quiet_domain_id(block: int, tries: int = 20) -> int:
    """A domain id of this test's own (:func:`unique_domain_id`) on which nobody else is talking: other
    runs of the suite on the same machine (other checkouts) walk the same ids, so an id is skipped while
    a participant is heard on it."""
    import random

    from robot_hrl.transport.dds_config import unique_domain_id
    from robot_hrl.transport.quiet_domain import first_quiet_domain

    for _ in range(random.randrange(8)):
        unique_domain_id(block=block)  # start somewhere else in the band than a parallel run would
    return first_quiet_domain(unique_domain_id(block=block) for _ in range(tries))
@dataclass
class Seen:
    planner: list[dict] = field(default_factory=list)
    skill: list[dict] = field(default_factory=list)
    diagnostics: dict[str, tuple[int, str, dict]] = field(default_factory=dict)
    """The latest status of each name."""
    diagnostic_counts: dict[str, int] = field(default_factory=dict)
    subgoals: int = 0
    last_subgoal_s: float | None = None
    """``time.monotonic()`` of the latest /subgoal (the planner's heartbeat)."""
    max_subgoal_gap_s: float = 0.0
    """The longest silence of the heartbeat since :meth:`WireRig.reset_gap`."""
    bad_subgoals: list[tuple[float, float, float]] = field(default_factory=list)
    """Subgoals sent that were not finite or outside the world's fence."""
    lock: threading.Lock = field(default_factory=threading.Lock)


class WireRig:
    """The planner node and the skill node as processes, and a node of our own to feed and watch them."""

    def __init__(self, domain_id: int, log_dir: Path, planner_params: dict | None = None):
        self.domain_id = domain_id
        self.log_dir = Path(log_dir)
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.env = {**os.environ, **loopback_env(domain_id), "PYTHONUNBUFFERED": "1",
                    "PYTHONPATH": os.pathsep.join([str(REPO_ROOT), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)}
        self.planner_params = {"planner": "vlm", "llm_url": "http://127.0.0.1:9/v1", "llm_timeout_s": 1.0,
                               "subgoal_radius_m": 1.0, "task": HOVER_TASK, **(planner_params or {})}
        self.skill_params = {"spin_margin_us": 0.0, "realtime_priority": 0}
        self.procs: dict[str, subprocess.Popen] = {}
        self.seen = Seen()
        self.sent = 0
        self.refused_by_writer = 0

    def _start(self, name: str, module: str, params: dict) -> None:
        args = [sys.executable, "-m", module, "--backend", "cyclonedds", "--domain-id", str(self.domain_id), "--ros-args"]
        for key, value in params.items():
            args += ["-p", f"{key}:={value}"]
        log = open(self.log_dir / f"{name}.log", "w")
        self.procs[name] = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, env=self.env, cwd=str(REPO_ROOT))

    def __enter__(self) -> "WireRig":
        from robot_hrl.transport import create_node

        self._saved_env = {k: os.environ.get(k) for k in ("CYCLONEDDS_URI", "ROS_DOMAIN_ID")}
        os.environ.update(loopback_env(self.domain_id))  # this process joins with the same DDS configuration
        self.node = create_node("hostile", backend="cyclonedds", domain_id=self.domain_id)
        logging.getLogger("hostile").setLevel(logging.ERROR)  # our own observer drops what we send: not news
        self._start("planner_node", "robot_hrl.nodes.planner_node", self.planner_params)
        self._start("skill_node", "robot_hrl.nodes.skill_node", self.skill_params)
        deep = QoS(depth=1000)
        self.pubs = {topic: self.node.create_publisher(cls, topic, deep if qos is not LATCHED_QOS else qos)
                     for topic, (cls, qos, _, _) in TOPICS.items()}
        seen = self.seen

        def on_json(into):
            def cb(msg):
                try:  # our own hostile statuses come back on /skill/status too
                    value = json.loads(msg.data)
                except (ValueError, RecursionError):
                    return
                if not isinstance(value, dict):
                    return
                with seen.lock:
                    into.append(value)
            return cb

        def on_diag(msg):
            with seen.lock:
                for st_ in msg.status:
                    seen.diagnostics[st_.name] = (st_.level, st_.message, {kv.key: kv.value for kv in st_.values})
                    seen.diagnostic_counts[st_.name] = seen.diagnostic_counts.get(st_.name, 0) + 1

        from robot_hrl.world import load_world

        bounds = load_world(REPO_ROOT / "models" / "worlds" / "demo.yaml").bounds

        def on_subgoal(msg):
            # The planner's heartbeat: frame "map", stamped with the wall clock. Our own hostile subgoals for
            # the skill node arrive here too, stamped 0 (a randomly mutated stamp and frame could pass: rare).
            if msg.header.frame_id != "map" or msg.header.stamp.sec < 1_000_000_000:
                return
            p = (msg.pose.position.x, msg.pose.position.y, msg.pose.position.z)
            now = time.monotonic()
            with seen.lock:
                seen.subgoals += 1
                if seen.last_subgoal_s is not None:
                    seen.max_subgoal_gap_s = max(seen.max_subgoal_gap_s, now - seen.last_subgoal_s)
                seen.last_subgoal_s = now
                if not (all(math.isfinite(v) for v in p) and bounds.contains(p)):
                    seen.bad_subgoals.append(p)

        self.node.create_subscription(String, "/planner/status", on_json(seen.planner), LATCHED_QOS)
        self.node.create_subscription(String, "/skill/status", on_json(seen.skill), COMMAND_QOS)
        self.node.create_subscription(DiagnosticArray, "/diagnostics", on_diag, COMMAND_QOS)
        self.node.create_subscription(PoseStamped, "/subgoal", on_subgoal, COMMAND_QOS)
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def stop(self) -> dict[str, int | None]:
        codes = {}
        for name, proc in self.procs.items():
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for name, proc in self.procs.items():
            try:
                codes[name] = proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()
                codes[name] = proc.wait(5)
        if getattr(self, "node", None) is not None:
            self.node.shutdown()
            self.node = None
        for key, value in getattr(self, "_saved_env", {}).items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        return codes

    # ---- watching --------------------------------------------------------------------------------
    def dead(self) -> dict[str, int]:
        """Node processes that have exited, with their exit codes."""
        return {name: proc.returncode for name, proc in self.procs.items() if proc.poll() is not None}

    def log(self, name: str) -> str:
        path = self.log_dir / f"{name}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def spin(self, seconds: float) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            self.node.spin_once(0.01)

    def wait_for(self, what: str, condition, guard_s: float = GUARD_S) -> None:
        end = time.monotonic() + guard_s
        while not condition():
            if self.dead():
                raise AssertionError(f"while waiting for {what}: node(s) died {self.dead()}\n"
                                     + "\n".join(self.log(n)[-3000:] for n in self.dead()))
            if time.monotonic() > end:
                raise AssertionError(f"timed out after {guard_s} s waiting for {what}")
            self.node.spin_once(0.02)

    def reset_gap(self) -> None:
        """Start measuring the heartbeat's longest silence afresh."""
        with self.seen.lock:
            self.seen.max_subgoal_gap_s = 0.0
            self.seen.last_subgoal_s = time.monotonic()

    def heartbeat_gap_s(self) -> float:
        """The longest silence of the heartbeat since :meth:`reset_gap`, the current one included."""
        with self.seen.lock:
            current = 0.0 if self.seen.last_subgoal_s is None else time.monotonic() - self.seen.last_subgoal_s
            return max(self.seen.max_subgoal_gap_s, current)

    def diag_count(self, name: str) -> int:
        with self.seen.lock:
            return self.seen.diagnostic_counts.get(name, 0)

    def diag(self, name: str) -> tuple[int, str, dict] | None:
        with self.seen.lock:
            return self.seen.diagnostics.get(name)

    def last(self, which: str) -> dict:
        with self.seen.lock:
            items = getattr(self.seen, which)
            return dict(items[-1]) if items else {}

    def ready(self) -> None:
        """Both nodes up and matched; the planner flying its start task (it waits for odometry)."""
        self.wait_for("the publishers matched with both nodes", lambda: all(
            self.pubs[t].get_subscription_count() > 0 for t in TOPICS))
        self.wait_for("the skill node's status", lambda: bool(self.last("skill")))
        self.send("/odom", odometry(START_POSITION))
        self.wait_for("the planner's plan", lambda: self.last("planner").get("state") in ("executing", "done"))

    # ---- feeding ---------------------------------------------------------------------------------
    def send(self, topic: str, msg, mutations=None) -> bool:
        """Publish ``msg`` on ``topic`` (raw CDR bytes, mutated, when ``mutations``); False when the
        writer refused the bytes (Cyclone DDS checks a raw sample's structure)."""
        from robot_hrl.transport.cyclonedds_backend import TransportError

        pub = self.pubs[topic]
        self.sent += 1
        if mutations is None:
            pub.publish(msg)
            return True
        try:
            pub.publish_raw(mutate(msg.serialize(), mutations))
        except TransportError:
            self.refused_by_writer += 1
            return False
        return True
