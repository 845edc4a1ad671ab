"""Latency of a nav_msgs/Odometry between two processes over loopback Cyclone DDS.

This process publishes /odom; a second process (this script in the ``echo`` role) takes each
message and publishes it back on /odom_echo. Each ping waits for its echo (ping-pong at
``--rate`` Hz, as a control loop would), so queueing does not inflate the figures.

- round trip: publish -> echo process -> back, on this process's monotonic clock;
- one way: the sender's ``time.monotonic_ns()`` travels in ``header.stamp``; CLOCK_MONOTONIC is
  one clock for all processes of a Linux machine, so the receiver subtracts it directly.

Both processes use the stack's Cyclone DDS node backend (Python serialization included), a
loopback-only configuration and a domain of their own.

    python benchmarks/bench_dds_latency.py --count 2000 --rate 200

Building blocks for other latency benchmarks (e.g. /odom -> /cmd_wrench through the skill node):
:func:`bench_env`, :func:`spawn`, :class:`PingPong` (publish a message, wait for the matching
reply on another topic) and :func:`summarize`.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from robot_hrl.msgs import Odometry  # noqa: E402
from robot_hrl.transport import COMMAND_QOS, QoS, create_node  # noqa: E402
from robot_hrl.transport.dds_config import loopback_env  # noqa: E402

DEFAULT_DOMAIN = 201


# ---- building blocks --------------------------------------------------------------------------------
def bench_env(domain_id: int) -> dict[str, str]:
    """Environment for a benchmark process: loopback DDS on ``domain_id``, this checkout importable."""
    env = dict(os.environ)
    env.update(loopback_env(domain_id))
    env["PYTHONPATH"] = os.pathsep.join([str(REPO_ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env["PYTHONUNBUFFERED"] = "1"
    return env


def spawn(args: list[str], domain_id: int) -> subprocess.Popen:
    """Start ``python ARGS...`` on the benchmark's domain; it stops when its stdin closes
    (the roles here) or when terminated."""
    return subprocess.Popen([sys.executable, *args], env=bench_env(domain_id), stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True, cwd=str(REPO_ROOT))


def wait_for_line(proc: subprocess.Popen, prefix: str) -> str:
    for line in proc.stdout:
        if line.startswith(prefix):
            return line.strip()
    raise RuntimeError(f"process {proc.args} exited before printing {prefix!r}")


def stamp_now(msg: Any) -> None:
    """Put this machine's CLOCK_MONOTONIC into ``msg.header.stamp``."""
    ns = time.monotonic_ns()
    msg.header.stamp.sec, msg.header.stamp.nanosec = divmod(ns, 1_000_000_000)


def age_s(msg: Any) -> float:
    """Seconds since the CLOCK_MONOTONIC stamp of :func:`stamp_now`."""
    sent = msg.header.stamp.sec * 1_000_000_000 + msg.header.stamp.nanosec
    return (time.monotonic_ns() - sent) * 1e-9


@dataclass
class Summary:
    count: int
    p50_ms: float
    p90_ms: float
    p99_ms: float
    max_ms: float
    mean_ms: float

    def line(self, what: str) -> str:
        return (f"{what:<28s} n={self.count:5d}  p50 {self.p50_ms:7.3f} ms  p90 {self.p90_ms:7.3f} ms  "
                f"p99 {self.p99_ms:7.3f} ms  max {self.max_ms:7.3f} ms  mean {self.mean_ms:7.3f} ms")


def summarize(seconds: list[float]) -> Summary:
    a = np.asarray(seconds, dtype=np.float64) * 1e3
    return Summary(len(a), *(float(np.percentile(a, q)) for q in (50, 90, 99)), float(a.max()), float(a.mean()))


class PingPong:
    """Publish on one topic, wait for the reply on another, time it.

    ``match(reply, ping) -> bool`` pairs a reply with the ping (default: any reply). A reply
    that does not arrive within ``timeout_s`` counts as lost."""

    def __init__(self, node, out_type: type, out_topic: str, in_type: type, in_topic: str,
                 qos: QoS = COMMAND_QOS, match: Callable[[Any, Any], bool] | None = None):
        self.node = node
        self.pub = node.create_publisher(out_type, out_topic, qos)
        self._replies: list[tuple[int, Any]] = []
        self.sub = node.create_subscription(in_type, in_topic, lambda m: self._replies.append((time.perf_counter_ns(), m)),
                                            qos)
        self.match = match or (lambda reply, ping: True)
        self.lost = 0

    def wait_matched(self, timeout_s: float = 30.0) -> None:
        end = time.monotonic() + timeout_s
        while not (self.pub.get_subscription_count() > 0 and self.sub.get_publisher_count() > 0):
            if time.monotonic() > end:
                raise RuntimeError("the other process was not discovered; is it running on the same domain?")
            self.node.spin_once(0.01)

    def ping(self, msg: Any, timeout_s: float = 1.0) -> tuple[float, Any] | None:
        """Publish ``msg``; returns (round trip s, reply) or None when lost."""
        self._replies.clear()
        t0 = time.perf_counter_ns()
        self.pub.publish(msg)
        end = t0 + int(timeout_s * 1e9)
        while True:
            for t, reply in self._replies:
                if self.match(reply, msg):
                    return (t - t0) * 1e-9, reply
            now = time.perf_counter_ns()
            if now > end:
                self.lost += 1
                return None
            self.node.spin_once((end - now) * 1e-9)


def codec_cost(count: int = 2000) -> dict[str, Summary]:
    """Python CDR serialize / deserialize time of one Odometry (part of every latency above)."""
    msg = Odometry()
    ser, de = [], []
    for _ in range(count):
        t0 = time.perf_counter()
        data = msg.serialize()
        t1 = time.perf_counter()
        Odometry.deserialize(data)
        t2 = time.perf_counter()
        ser.append(t1 - t0)
        de.append(t2 - t1)
    return {"serialize Odometry": summarize(ser), "deserialize Odometry": summarize(de)}


def timer_jitter(rate_hz: float, seconds: float, domain_id: int) -> Summary:
    """How late a node timer's callbacks start against their deadline grid, over ``seconds``
    (the executor the skill node's control loop runs on); skipped ticks are counted apart."""
    os.environ.update(loopback_env(domain_id))
    node = create_node("timer_bench", backend="cyclonedds", domain_id=domain_id)
    lateness: list[float] = []
    timer = node.create_timer(1.0 / rate_hz, lambda: lateness.append(time.perf_counter() - timer.last_deadline))
    n = int(seconds * rate_hz)
    node.spin(until=lambda: len(lateness) + timer.overruns >= n)
    node.shutdown()
    summary = summarize(lateness)
    summary.overruns = timer.overruns  # type: ignore[attr-defined]
    return summary


# ---- roles ------------------------------------------------------------------------------------------
def echo_main(topic_in: str, topic_out: str) -> None:
    """Echo Odometry: restamp with our monotonic time, keep the forward one-way latency in
    twist.covariance[0]."""
    import threading

    node = create_node("echo", backend="cyclonedds")
    pub = node.create_publisher(Odometry, topic_out, COMMAND_QOS)

    def on_odom(msg: Odometry) -> None:
        msg.twist.covariance[0] = age_s(msg)
        stamp_now(msg)
        pub.publish(msg)

    node.create_subscription(Odometry, topic_in, on_odom, COMMAND_QOS)
    threading.Thread(target=lambda: (sys.stdin.read(), node.shutdown()), daemon=True).start()
    print("READY", flush=True)
    node.spin()


def run(count: int, rate_hz: float, warmup: int, domain_id: int) -> dict[str, Summary]:
    os.environ.update(loopback_env(domain_id))
    echo = spawn([str(Path(__file__).resolve()), "--role", "echo"], domain_id)
    try:
        wait_for_line(echo, "READY")
        node = create_node("bench", backend="cyclonedds", domain_id=domain_id)
        seq = {"i": 0}
        probe = PingPong(node, Odometry, "/odom", Odometry, "/odom_echo",
                         match=lambda reply, ping: reply.pose.pose.position.x == ping.pose.pose.position.x)
        probe.wait_matched()
        rtt, forward, back = [], [], []
        period = 1.0 / rate_hz
        next_t = time.perf_counter()
        try:
            from tqdm import tqdm
            progress = tqdm(total=warmup + count, desc="ping-pong", unit="msg")
        except ImportError:  # pragma: no cover
            progress = None
        for i in range(warmup + count):
            msg = Odometry()
            msg.header.frame_id = "odom"
            msg.child_frame_id = "base_link"
            seq["i"] += 1
            msg.pose.pose.position.x = float(seq["i"])
            stamp_now(msg)
            result = probe.ping(msg)
            if result is not None and i >= warmup:
                rt, reply = result
                rtt.append(rt)
                back.append(age_s(reply))
                forward.append(reply.twist.covariance[0])
            if progress is not None:
                progress.update()
            next_t += period
            while (delay := next_t - time.perf_counter()) > 0:
                node.spin_once(delay)
        if progress is not None:
            progress.close()
        node.shutdown()
        results = {"round trip": summarize(rtt), "one way (this -> echo)": summarize(forward),
                   "one way (echo -> this)": summarize(back)}
        results["lost"] = probe.lost
        return results
    finally:
        if echo.stdin:
            echo.stdin.close()
        try:
            echo.wait(10)
        except subprocess.TimeoutExpired:
            echo.kill()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] + " Prints p50/p90/p99 latencies.")
    parser.add_argument("--count", type=int, default=2000, help="measured ping-pongs (default 2000)")
    parser.add_argument("--warmup", type=int, default=100, help="ping-pongs run before measuring (default 100)")
    parser.add_argument("--rate", type=float, default=200.0, help="pings per second (default 200)")
    parser.add_argument("--domain-id", type=int, default=DEFAULT_DOMAIN, help=f"DDS domain (default {DEFAULT_DOMAIN})")
    parser.add_argument("--timer-rate", type=float, default=500.0,
                        help="also measure a node timer's lateness at this rate, Hz (0: skip; default 500)")
    parser.add_argument("--timer-seconds", type=float, default=5.0, help="how long to run the timer (default 5 s)")
    parser.add_argument("--role", choices=["bench", "echo"], default="bench", help=argparse.SUPPRESS)
    parser.add_argument("--topics", nargs=2, default=["/odom", "/odom_echo"], help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.role == "echo":
        echo_main(*args.topics)
        return 0
    if args.count < 1 or args.rate <= 0 or args.warmup < 0:
        parser.error("--count must be >= 1, --rate > 0, --warmup >= 0")
    results = run(args.count, args.rate, args.warmup, args.domain_id)
    size = len(Odometry().serialize())
    print(f"nav_msgs/Odometry ({size} bytes CDR), two processes, loopback Cyclone DDS, reliable keep-last 10, "
          f"ping-pong at {args.rate:g} Hz")
    for what, summary in results.items():
        if what != "lost":
            print(summary.line(what))
    print(f"lost: {results['lost']} of {args.count + args.warmup}")
    for what, summary in codec_cost().items():
        print(summary.line(what))
    if args.timer_rate > 0:
        jitter = timer_jitter(args.timer_rate, args.timer_seconds, args.domain_id)
        print(jitter.line(f"timer {args.timer_rate:g} Hz lateness") + f"  overruns {jitter.overruns}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
