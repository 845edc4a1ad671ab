"""Shared harness of the end-to-end tests (no tests here).

A :class:`GraphRun` starts the real node graph through the launcher's own code: sim, skill and
planner nodes as separate processes over Cyclone DDS, loopback only, on a DDS domain of the
test's own, on simulated time (the sim runs in lockstep, faster than real time when it can).
The test process joins with a node of its own to watch (and to misbehave: rogue subgoals,
malformed tasks). Waits are for conditions, bounded by generous wall-clock limits; nothing
asserts a duration.
"""

from __future__ import annotations

import json
import signal
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from robot_hrl.launch.launcher import Launcher, LaunchOptions
from robot_hrl.msgs import DiagnosticArray, PoseStamped, String, seconds_from_time
from robot_hrl.transport.dds_config import unique_domain_id
from robot_hrl.transport.interface import COMMAND_QOS, LATCHED_QOS

WAIT_S = 150.0
"""Wall-clock bound of any single wait (a bound for a stuck run, not a timing assertion)."""

HOVER_TASK = "takeoff 1.0; hover 600"
E2E_DOMAIN_BLOCK = 3
"""Every test of the nodes takes its domain ids from block 3 (one band per pytest-xdist worker), away
from block 0 (the transport tests); a counter per worker process keeps them apart."""


@dataclass
class Seen:
    skill: list[dict] = field(default_factory=list)
    planner: list[dict] = field(default_factory=list)
    diagnostics: list[tuple[float, str, int, str, dict]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def skill_states(self) -> list[str]:
        with self.lock:
            states = [s.get("state") for s in self.skill]
        return [s for i, s in enumerate(states) if i == 0 or s != states[i - 1]]

    def diags(self, name_part: str) -> list[tuple[float, str, int, str, dict]]:
        with self.lock:
            return [d for d in self.diagnostics if name_part in d[1]]


class GraphRun:
    def __init__(self, tmp_path: Path, params: dict | None = None, use_sim: str = "true"):
        # Every test of the nodes uses block 3: a band of domain ids per pytest-xdist worker, away
        # from block 0 (the transport tests); one counter per worker process keeps them apart.
        self.domain_id = unique_domain_id(block=E2E_DOMAIN_BLOCK)
        self.launcher = Launcher(LaunchOptions(
            arguments={"use_sim": use_sim}, out=tmp_path / "run", domain_id=self.domain_id, record=False, live=False,
            params=params or {}))
        self.seen = Seen()

    def __enter__(self) -> "GraphRun":
        lr = self.launcher
        lr.start_monitor()
        node = self.node = lr.node
        seen = self.seen

        def skill(msg):
            with seen.lock:
                seen.skill.append(json.loads(msg.data))

        def planner(msg):
            with seen.lock:
                seen.planner.append(json.loads(msg.data))

        def diag(msg):
            t = seconds_from_time(msg.header.stamp)
            with seen.lock:
                for st in msg.status:
                    seen.diagnostics.append((t, st.name, int(st.level), st.message,
                                             {kv.key: kv.value for kv in st.values}))

        node.create_subscription(String, "/skill/status", skill, COMMAND_QOS)
        node.create_subscription(String, "/planner/status", planner, LATCHED_QOS)
        node.create_subscription(DiagnosticArray, "/diagnostics", diag, COMMAND_QOS)
        self.task_pub = node.create_publisher(String, "/task", LATCHED_QOS)
        self.subgoal_pub = node.create_publisher(PoseStamped, "/subgoal", COMMAND_QOS)
        lr.start_nodes()
        return self

    def __exit__(self, *exc) -> None:
        self.launcher.stop_nodes()
        self.node.shutdown()

    # ---- helpers ------------------------------------------------------------------------------
    def send_task(self, text: str) -> None:
        """Once the planner's /task subscription is matched: it takes ROS 2's default QoS (volatile),
        so a task sent before it exists is not kept for it."""
        self.wait_for("the planner's /task subscription", lambda: self.task_pub.get_subscription_count() > 0)
        self.task_pub.publish(String(data=text))

    def wait_for(self, what: str, condition, limit_s: float = WAIT_S) -> None:
        end = time.monotonic() + limit_s
        while not condition():
            dead = self.launcher.dead_nodes()
            if dead:
                logs = "\n".join(f"--- {n}\n{self.launcher.log_tail(n, 30)}" for n in dead)
                pytest.fail(f"while waiting for {what}: node(s) {dead} exited\n{logs}")
            if time.monotonic() > end:
                logs = "\n".join(f"--- {n}\n{self.launcher.log_tail(n, 20)}" for n in self.launcher.procs)
                pytest.fail(f"gave up waiting for {what} after {limit_s:g} s wall; skill states "
                            f"{self.seen.skill_states()[-12:]}; last planner status "
                            f"{self.seen.planner[-1:] if self.seen.planner else None}\n{logs}")
            self.node.spin(until=_after(0.05))

    def spin_sim_seconds(self, seconds: float) -> None:
        """Let ``seconds`` of simulated time pass."""
        start = self.launcher.monitor.sim_time_s
        self.wait_for(f"{seconds} s of sim time", lambda: self.launcher.monitor.sim_time_s >= start + seconds)

    def last_skill(self) -> dict:
        with self.seen.lock:
            return dict(self.seen.skill[-1]) if self.seen.skill else {}

    def skill_state_is(self, *states: str):
        return lambda: self.last_skill().get("state") in states

    def hovering(self) -> bool:
        with self.seen.lock:
            p = self.seen.planner[-1] if self.seen.planner else {}
        return p.get("state") == "hovering" and self.last_skill().get("state") == "reached"

    def kill(self, name: str) -> None:
        proc = self.launcher.procs[name]
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        del self.launcher.procs[name]  # an expected death

    def sim_truth(self) -> dict:
        d = self.seen.diags("sim_node")
        return d[-1][4] if d else {}


def _after(seconds: float):
    end = time.monotonic() + seconds
    return lambda: time.monotonic() >= end
