"""Stopping the graph the way ROS 2 launch does (ros2/launch ``ExecuteLocal``: SIGINT, then SIGTERM after
``sigterm_timeout``, then SIGKILL after ``sigkill_timeout``), with real node processes (``run_main`` on Cyclone DDS):
one that stops on SIGINT, one whose shutdown hangs in Python, one whose shutdown hangs inside a C call. The two that
hang write their threads' stacks to their logs before SIGTERM, so that the log says where they hung."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from robot_hrl.launch import launcher as launcher_module
from robot_hrl.launch.launcher import Launcher, LaunchOptions
from robot_hrl.transport.dds_config import unique_domain_id

REPO = Path(__file__).resolve().parents[1]

NODE = """
import ctypes, sys, time
from robot_hrl.nodes.common import run_main

HANG = sys.argv[1]


class Wiring:
    def __init__(self, node):
        self.node = node
        print("READY", flush=True)

    def close(self):
        if HANG == "python":
            while True:  # e.g. joining a worker thread that never ends
                time.sleep(0.05)
        if HANG == "c":
            # A C call that does not return on a signal (e.g. a DDS call that waits for its threads): glibc's
            # system() waits again on EINTR, so Python's handlers never run. Its child ends by itself.
            ctypes.CDLL(None).system(b"exec sleep 20")


sys.exit(run_main(HANG + "_node", Wiring, ["--backend", "cyclonedds"]))
"""


@pytest.fixture
def launcher(tmp_path, monkeypatch) -> Launcher:
    monkeypatch.setattr(launcher_module, "SIGTERM_TIMEOUT_S", 1.5)
    monkeypatch.setattr(launcher_module, "SIGKILL_TIMEOUT_S", 1.5)
    monkeypatch.delenv("CYCLONEDDS_URI", raising=False)
    return Launcher(LaunchOptions(arguments={}, out=tmp_path / "run", domain_id=unique_domain_id(), record=False,
                                  live=False))


def _start(lr: Launcher, name: str, hang: str) -> None:
    log = open(lr.out / "logs" / f"{name}.log", "w")  # noqa: SIM115 - closed by stop_nodes
    lr.logs[name] = log
    lr.procs[name] = subprocess.Popen([sys.executable, "-c", NODE, hang], env=lr.env, stdout=log,
                                      stderr=subprocess.STDOUT, cwd=REPO, start_new_session=True)


def test_stop_escalates_sigint_sigterm_sigkill_and_a_hung_node_leaves_its_stacks(launcher, capfd):
    for name, hang in (("planner_node", "none"), ("skill_node", "python"), ("sim_node", "c")):
        _start(launcher, name, hang)
    end = time.monotonic() + 60
    while not all("READY" in (launcher.out / "logs" / f"{n}.log").read_text() for n in launcher.procs):
        assert time.monotonic() < end, {n: launcher.log_tail(n) for n in launcher.procs}
        assert not launcher.dead_nodes(), {n: launcher.log_tail(n) for n in launcher.procs}
        time.sleep(0.05)

    codes = launcher.stop_nodes()

    logs = {n: (launcher.out / "logs" / f"{n}.log").read_text() for n in launcher.procs}
    # stops on SIGINT, cleanly
    assert codes["planner_node"] == 0, logs["planner_node"]
    assert launcher.stop_s["planner_node"] < launcher_module.SIGTERM_TIMEOUT_S
    # hangs in Python: SIGTERM, while stopping, ends it at once (exit code 128 + SIGTERM, as a shell reports it)
    assert codes["skill_node"] == 128 + signal.SIGTERM, logs["skill_node"]
    assert launcher_module.SIGTERM_TIMEOUT_S <= launcher.stop_s["skill_node"] < (
        launcher_module.SIGTERM_TIMEOUT_S + launcher_module.SIGKILL_TIMEOUT_S)
    assert "SIGTERM while stopping: exiting now" in logs["skill_node"]
    # hangs in a C call: no Python handler runs, SIGKILL ends it
    assert codes["sim_node"] == -signal.SIGKILL, logs["sim_node"]
    assert launcher.stop_s["sim_node"] >= launcher_module.SIGTERM_TIMEOUT_S + launcher_module.SIGKILL_TIMEOUT_S
    # both hung nodes' logs say where: faulthandler's stacks (written from C, so also for the C hang)
    for name in ("skill_node", "sim_node"):
        assert "most recent call first" in logs[name] and ", line " in logs[name] and " in close" in logs[name], (
            logs[name])
    assert "most recent call first" not in logs["planner_node"]
    err = capfd.readouterr().err
    assert "skill_node still running" in err and "sending SIGTERM" in err and "sim_node.log" in err, err
    assert "sim_node still running" in err and "sending SIGKILL" in err, err
