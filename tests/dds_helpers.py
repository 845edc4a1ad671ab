"""Helpers for tests that talk over real Cyclone DDS between separate processes.

Each test gets a domain id of its own (``dds_domain`` fixture / :func:`unique_domain_id`) and the
loopback-only configuration (:mod:`robot_hrl.transport.dds_config`), so parallel runs
(``pytest -n 2``) never hear each other. A :class:`Peer` is a child Python process, run with
that environment; it says what it is doing on stdout, line by line, and stops when its stdin
closes. Waits have generous guards (they fail a test that hangs, they measure nothing).

    def test_x(dds_domain):
        with Peer(dds_domain, "echo", "/odom", "/odom_echo") as peer:
            peer.expect("READY")
            node = create_node("t", backend="cyclonedds", domain_id=dds_domain)
            ...

Run as a script, this file is the peer itself: ``python tests/dds_helpers.py ROLE ARGS...``.
"""

from __future__ import annotations

import os
import queue
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Callable

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from robot_hrl.transport.dds_config import loopback_env, unique_domain_id  # noqa: E402

GUARD_S = 30.0
"""How long a wait may take before the test is failed as hung (not a measurement)."""

__all__ = ["GUARD_S", "Peer", "peer_env", "spin_until", "unique_domain_id", "use_domain"]


def peer_env(domain_id: int) -> dict[str, str]:
    """The environment of a child process on ``domain_id`` (loopback DDS, this checkout importable)."""
    env = dict(os.environ)
    env.update(loopback_env(domain_id))
    env["PYTHONPATH"] = os.pathsep.join([str(REPO_ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env["PYTHONUNBUFFERED"] = "1"
    return env


def use_domain(monkeypatch, domain_id: int | None = None) -> int:
    """Put this (test) process on the loopback profile and a domain of its own; returns the id."""
    domain_id = unique_domain_id() if domain_id is None else domain_id
    for key, value in loopback_env(domain_id).items():
        monkeypatch.setenv(key, value)
    return domain_id


def spin_until(nodes, condition: Callable[[], bool], guard_s: float = GUARD_S, what: str = "condition") -> None:
    """Spin one or more nodes until ``condition()``; fail after ``guard_s`` (a hang guard)."""
    nodes = nodes if isinstance(nodes, (list, tuple)) else [nodes]
    end = time.monotonic() + guard_s
    while not condition():
        if time.monotonic() > end:
            raise AssertionError(f"timed out after {guard_s} s waiting for {what}")
        for node in nodes:
            node.spin_once(0.01)


class Peer:
    """A child process running a role of this file (or of ``script``, given ``role`` and ``args`` as its
    command-line arguments), on a DDS domain."""

    def __init__(self, domain_id: int, role: str, *args: str, extra_env: dict[str, str] | None = None,
                 script: Path | None = None):
        env = peer_env(domain_id)
        env.update(extra_env or {})
        self.role = role
        self.proc = subprocess.Popen(
            [sys.executable, str(script or Path(__file__).resolve()), role, *map(str, args)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
            cwd=str(REPO_ROOT),
        )
        self._lines: queue.Queue[str | None] = queue.Queue()
        self._stderr: list[str] = []
        threading.Thread(target=self._pump, args=(self.proc.stdout, self._lines), daemon=True).start()
        threading.Thread(target=self._pump_err, daemon=True).start()

    @staticmethod
    def _pump(stream, lines) -> None:
        for line in stream:
            lines.put(line.rstrip("\n"))
        lines.put(None)

    def _pump_err(self) -> None:
        for line in self.proc.stderr:
            self._stderr.append(line)

    def expect(self, prefix: str, guard_s: float = GUARD_S) -> str:
        """The next stdout line that starts with ``prefix`` (earlier lines are skipped)."""
        end = time.monotonic() + guard_s
        while True:
            try:
                line = self._lines.get(timeout=max(0.01, end - time.monotonic()))
            except queue.Empty:
                raise AssertionError(f"peer {self.role!r} said no {prefix!r} within {guard_s} s; "
                                     f"stderr:\n{''.join(self._stderr)[-3000:]}") from None
            if line is None:
                self.proc.wait(5)
                raise AssertionError(f"peer {self.role!r} exited ({self.proc.returncode}) before saying {prefix!r}; "
                                     f"stderr:\n{''.join(self._stderr)[-3000:]}")
            if line.startswith(prefix):
                return line

    def send(self, line: str) -> None:
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    def close(self) -> int:
        """Close the peer's stdin (it stops), wait for it; returns its exit code."""
        try:
            if self.proc.stdin and not self.proc.stdin.closed:
                self.proc.stdin.close()
        except BrokenPipeError:
            pass
        try:
            return self.proc.wait(GUARD_S)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)
            return -9

    @property
    def stderr(self) -> str:
        return "".join(self._stderr)

    def __enter__(self) -> "Peer":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


# ---- the peer side ---------------------------------------------------------------------------------
def _stop_on_stdin_eof(stop: Callable[[], None], commands: Callable[[str], None] | None = None) -> None:
    def watch():
        for line in sys.stdin:
            if commands is not None:
                commands(line.strip())
        stop()

    threading.Thread(target=watch, daemon=True).start()


def _qos(name: str):
    from robot_hrl.transport import COMMAND_QOS, LATCHED_QOS, SENSOR_QOS

    return {"sensor": SENSOR_QOS, "command": COMMAND_QOS, "latched": LATCHED_QOS}[name]


def _role_echo(topic_in: str, topic_out: str, ros_type: str = "nav_msgs/msg/Odometry", qos: str = "command") -> None:
    """Republish every message of ``topic_in`` on ``topic_out``."""
    from robot_hrl.msgs import message_class
    from robot_hrl.transport import create_node

    import json

    cls = message_class(ros_type)
    node = create_node("echo", backend="cyclonedds")
    pub = node.create_publisher(cls, topic_out, _qos(qos))
    node.create_subscription(cls, topic_in, pub.publish, _qos(qos))

    def command(line: str) -> None:
        """``graph TOPIC``: what this node sees of the domain (topics, types, the topic's endpoints)."""
        if line.startswith("graph "):
            topic = line.split(" ", 1)[1]
            endpoints = {"publishers": node.get_publishers_info_by_topic(topic),
                         "subscriptions": node.get_subscriptions_info_by_topic(topic)}
            print("GRAPH", json.dumps({
                "topics": dict(node.get_topic_names_and_types()),
                **{kind: [[e.qos.reliability.value, e.qos.durability.value] for e in found]
                   for kind, found in endpoints.items()}}), flush=True)

    _stop_on_stdin_eof(node.shutdown, command)
    print("READY", flush=True)
    node.spin()


def _talk_round_robin(nodes, labels, topic: str) -> None:
    """Each node publishes std_msgs/String "<label> <i>" on ``topic``, round robin, until stdin closes."""
    from robot_hrl.msgs import String

    pubs = [n.create_publisher(String, topic) for n in nodes]
    count = [0]

    def tick():
        for label, pub in zip(labels, pubs):
            pub.publish(String(f"{label} {count[0]}"))
        count[0] += 1

    nodes[0].create_timer(0.02, tick)
    _stop_on_stdin_eof(nodes[0].shutdown)
    print("READY", flush=True)
    nodes[0].spin()
    for n in nodes[1:]:
        n.shutdown()


def _role_talk(*namespaces: str) -> None:
    """Nodes in each namespace publish "<ns> <i>" on their ``chatter``."""
    from robot_hrl.transport import create_node

    nodes = [create_node("talker", namespace=ns, backend="cyclonedds") for ns in namespaces]
    _talk_round_robin(nodes, namespaces, "chatter")


def _role_talk_domains(*domains: str) -> None:
    """One node per domain id publishes "domain <id> <i>" on /chatter."""
    from robot_hrl.transport import create_node

    nodes = [create_node("talker", backend="cyclonedds", domain_id=int(d)) for d in domains]
    _talk_round_robin(nodes, [f"domain {d}" for d in domains], "/chatter")


def _role_malformed(topic: str, count: str) -> None:
    """Once a subscriber is matched, publish ``count`` rounds of [garbage, a valid Odometry] on ``topic``."""
    from robot_hrl.msgs import Odometry, String
    from robot_hrl.transport import QoS, create_node

    node = create_node("garbler", backend="cyclonedds")
    pub = node.create_publisher(Odometry, topic, QoS(depth=1000))  # a burst: keep it all
    _stop_on_stdin_eof(node.shutdown)
    print("READY", flush=True)
    node.spin(until=lambda: pub.get_subscription_count() > 0)
    # Cyclone DDS checks the CDR structure of a sample against its type (lengths, bounds), so
    # truncated or mistyped bytes do not leave a writer: what gets through is what only the
    # decoder sees, like strings that are not UTF-8 (a C++ node may send any bytes).
    bad = Odometry()
    bad.header.frame_id, bad.child_frame_id = "ab", "cd"
    good_bytes = bad.serialize()
    garbage = [good_bytes.replace(b"ab\x00", b"\xc3\x28\x00"), good_bytes.replace(b"cd\x00", b"\xff\xfe\x00")]
    refused = 0
    from robot_hrl.transport.cyclonedds_backend import TransportError

    for structurally_bad in (b"\x00\x01\x00\x00", String("not an odometry").serialize(), good_bytes[:-8]):
        try:
            pub.publish_raw(structurally_bad)
        except TransportError:
            refused += 1
    print("REFUSED", refused, flush=True)
    for i in range(int(count)):
        pub.publish_raw(garbage[i % len(garbage)])
        msg = Odometry()
        msg.header.frame_id = f"odom {i}"
        msg.pose.pose.position.x = float(i)
        pub.publish(msg)
    print("SENT", flush=True)
    node.spin()


def _role_latched(topic: str, text: str) -> None:
    """Publish one std_msgs/String with the latched (transient local) profile and stay up."""
    from robot_hrl.msgs import String
    from robot_hrl.transport import LATCHED_QOS, create_node

    node = create_node("latcher", backend="cyclonedds")
    pub = node.create_publisher(String, topic, LATCHED_QOS)
    pub.publish(String("stale " + text))
    pub.publish(String(text))  # depth 1: only this one is kept for late joiners
    _stop_on_stdin_eof(node.shutdown)
    print("PUBLISHED", flush=True)
    node.spin()


def _publish_once_matched(pub, msg, timeout_s: float = 10.0) -> None:
    """Publish ``msg`` once ``pub`` has matched a reader (or after ``timeout_s``). Discovery is matched from each side
    on its own: the test's reader may see this writer before this writer sees the reader, and a sample sent then goes
    nowhere (seen under load). Cyclone DDS matches in its own threads, so waiting here lets the match complete."""
    deadline = time.monotonic() + timeout_s
    while pub.get_subscription_count() == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    pub.publish(msg)


def _role_clock() -> None:
    """Publish rosgraph_msgs/Clock with the seconds read from stdin, one line each."""
    from robot_hrl.msgs import Clock, time_from_seconds
    from robot_hrl.transport import SENSOR_QOS, create_node

    node = create_node("clock", backend="cyclonedds")
    pub = node.create_publisher(Clock, "/clock", SENSOR_QOS)

    def command(line: str) -> None:
        if line:
            _publish_once_matched(pub, Clock(clock=time_from_seconds(float(line))))
            print("TICK", line, flush=True)

    _stop_on_stdin_eof(node.shutdown, command)
    print("READY", flush=True)
    node.spin()


def _role_wrench_writer(node_name: str, thrust_n: str) -> None:
    """A /cmd_wrench writer in a node named ``node_name``: each stdin line is a stamp (seconds); it publishes a
    geometry_msgs/WrenchStamped of ``thrust_n`` collective thrust with that stamp, once a reader is matched."""
    from robot_hrl.msgs import WrenchStamped
    from robot_hrl.nodes.skill_codecs import wrench_msg
    from robot_hrl.transport import COMMAND_QOS, create_node

    node = create_node(node_name, backend="cyclonedds")
    pub = node.create_publisher(WrenchStamped, "/cmd_wrench", COMMAND_QOS)

    def command(line: str) -> None:
        if line:
            _publish_once_matched(pub, wrench_msg([float(thrust_n), 0.0, 0.0, 0.0], float(line)))
            print("SENT", line, flush=True)

    _stop_on_stdin_eof(node.shutdown, command)
    print("READY", flush=True)
    node.spin()


def _role_stream(count: str) -> None:
    """Publish ``count`` Odometry, Image and DiagnosticArray messages (reliable, deep history) once
    each topic has a subscriber, then a latched Path."""
    import numpy as np

    from robot_hrl.msgs import DiagnosticArray, DiagnosticStatus, KeyValue, Odometry, Path, PoseStamped, image_from_array
    from robot_hrl.transport import LATCHED_QOS, QoS, create_node

    node = create_node("streamer", backend="cyclonedds")
    deep = QoS(depth=1000)
    odom = node.create_publisher(Odometry, "/odom", deep)
    image = node.create_publisher(type(image_from_array(np.zeros((1, 1, 3), np.uint8))), "/camera/image_raw", deep)
    diag = node.create_publisher(DiagnosticArray, "/diagnostics", deep)
    plan = node.create_publisher(Path, "/plan", LATCHED_QOS)
    path = Path()
    path.header.frame_id = "map"
    path.poses = [PoseStamped() for _ in range(3)]
    path.poses[2].pose.position.x = 2.0
    plan.publish(path)
    _stop_on_stdin_eof(node.shutdown)
    print("READY", flush=True)
    node.spin(until=lambda: all(p.get_subscription_count() > 0 for p in (odom, image, diag)))
    for i in range(int(count)):
        msg = Odometry()
        msg.header.stamp.sec = i
        msg.pose.pose.position.x = float(i)
        odom.publish(msg)
        image.publish(image_from_array(np.full((4, 6, 3), i, np.uint8), "rgb8", stamp_s=i))
        diag.publish(DiagnosticArray(status=[DiagnosticStatus(level=i % 3, name=f"shield {i}",
                                                              values=[KeyValue("k", str(i))])]))
    print("SENT", flush=True)
    node.spin()


ROLES = {"stream": _role_stream, "echo": _role_echo, "talk": _role_talk, "talk_domains": _role_talk_domains, "malformed": _role_malformed,
         "latched": _role_latched, "clock": _role_clock, "wrench_writer": _role_wrench_writer}

if __name__ == "__main__":
    ROLES[sys.argv[1]](*sys.argv[2:])
