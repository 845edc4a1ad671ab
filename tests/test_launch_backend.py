"""One backend per launch, the environment each gets, the DDS profile a stock ROS 2 discovers, the
QoS table of the docs against the graph's, the estop tool and the Publisher interface. Without
rclpy (the main suite) and with it (.ci/ros): the defaults must not depend on it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from robot_hrl.errors import ConfigError
from robot_hrl.launch import graph
from robot_hrl.launch.cli import COMMAND
from robot_hrl.launch.launcher import Launcher, LaunchOptions
from robot_hrl.transport import rclpy_available
from robot_hrl.transport.dds_config import (
    HEARTBEAT_INTERVAL_S,
    LOCALHOST_RANGE,
    RANGE_VARIABLE,
    SPDP_INTERVAL_S,
    loopback_config,
)

REPO = Path(__file__).resolve().parents[1]


def _launcher(tmp_path, monkeypatch, backend="cyclonedds", loopback=True, **env) -> Launcher:
    for key in ("CYCLONEDDS_URI", RANGE_VARIABLE):
        monkeypatch.delenv(key, raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    return Launcher(LaunchOptions(arguments={}, out=tmp_path / "run", domain_id=7, loopback=loopback,
                                  backend=backend, record=False, live=False))


def test_the_cli_default_backend_is_cyclonedds_with_or_without_rclpy():
    import argparse

    parser = argparse.ArgumentParser()
    COMMAND.add_arguments(parser)
    assert parser.parse_args(["navigation"]).backend == graph.DEFAULT_BACKEND == "cyclonedds"
    assert parser.parse_args(["navigation", "--backend", "rclpy"]).backend == "rclpy"
    with pytest.raises(SystemExit):
        parser.parse_args(["navigation", "--backend", "auto"])  # a launch is on one named backend


def test_every_node_of_a_launch_gets_the_launch_backend(tmp_path, monkeypatch):
    launcher = _launcher(tmp_path, monkeypatch)
    for spec in graph.NAVIGATION_NODES:
        cmd = launcher.command(spec)
        assert cmd[cmd.index("--backend") + 1] == "cyclonedds"
    if rclpy_available():
        launcher = _launcher(tmp_path, monkeypatch, backend="rclpy")
        for spec in graph.NAVIGATION_NODES:
            cmd = launcher.command(spec)
            assert cmd[cmd.index("--backend") + 1] == "rclpy"


def test_cyclonedds_launch_is_loopback_and_says_what_a_ros2_user_needs(tmp_path, monkeypatch):
    launcher = _launcher(tmp_path, monkeypatch)
    assert "127.0.0.1" in launcher.env["CYCLONEDDS_URI"] and launcher.env["ROS_DOMAIN_ID"] == "7"
    assert RANGE_VARIABLE not in launcher.env
    note = launcher.discovery_note()
    assert "ROS_DOMAIN_ID=7" in note and "default settings" in note and "CYCLONEDDS_URI=file://" in note
    profile = Path(note.split("CYCLONEDDS_URI=file://")[1].split()[0])
    assert profile.read_text() == launcher.env["CYCLONEDDS_URI"]


def test_a_users_dds_settings_are_left_alone(tmp_path, monkeypatch):
    mine = "<CycloneDDS><Domain Id='any'/></CycloneDDS>"
    launcher = _launcher(tmp_path, monkeypatch, CYCLONEDDS_URI=mine)
    assert launcher.env["CYCLONEDDS_URI"] == mine
    assert "sees it" in launcher.discovery_note()
    network = _launcher(tmp_path, monkeypatch, loopback=False)
    assert "CYCLONEDDS_URI" not in network.env


@pytest.mark.skipif(not rclpy_available(), reason="the rclpy backend needs rclpy (.ci/ros runs this)")
def test_rclpy_launch_keeps_discovery_on_the_machine(tmp_path, monkeypatch):
    launcher = _launcher(tmp_path, monkeypatch, backend="rclpy")
    assert launcher.env[RANGE_VARIABLE] == LOCALHOST_RANGE and "CYCLONEDDS_URI" not in launcher.env
    assert "default settings" in launcher.discovery_note()
    assert _launcher(tmp_path, monkeypatch, backend="rclpy", **{RANGE_VARIABLE: "SUBNET"}).env[RANGE_VARIABLE] == "SUBNET"


@pytest.mark.skipif(rclpy_available(), reason="checks the refusal where rclpy is missing")
def test_rclpy_backend_without_rclpy_is_refused_with_the_fix(tmp_path, monkeypatch):
    with pytest.raises(ConfigError, match="rclpy cannot be imported.*--backend cyclonedds"):
        _launcher(tmp_path, monkeypatch, backend="rclpy")


def test_unknown_backend_is_refused(tmp_path, monkeypatch):
    with pytest.raises(ConfigError, match="choose one of cyclonedds, rclpy"):
        _launcher(tmp_path, monkeypatch, backend="zenoh")


def test_loopback_profile_reannounces_and_heartbeats_and_cyclone_accepts_it(monkeypatch):
    xml = loopback_config()
    assert f"<SPDPInterval>{SPDP_INTERVAL_S:g}s</SPDPInterval>" in xml
    assert f"{HEARTBEAT_INTERVAL_S * 1e3:g}ms</HeartbeatInterval>" in xml
    monkeypatch.setenv("CYCLONEDDS_URI", xml)
    from cyclonedds.domain import DomainParticipant

    DomainParticipant(231)  # Cyclone DDS refuses a configuration it cannot parse


def test_the_docs_qos_table_is_the_graphs():
    """docs/nodes_launch.md's topic table says what graph.TOPIC_QOS says (checked live by test_ros2_stock)."""
    text = (REPO / "docs" / "nodes_launch.md").read_text()
    rows = {}
    for line in text.splitlines():
        m = re.match(r"^\| `(/[\w/]+)` \| [^|]+ \| (\w+) \| \**(\w+)\** \|", line)
        if m:
            rows[m.group(1)] = (m.group(2), m.group(3))
    assert rows == graph.TOPIC_QOS
    assert set(graph.TOPIC_QOS) == set(graph.TOPICS)
    for topic in ("/task", "/estop", "/subgoal"):
        assert graph.TOPIC_QOS[topic][1] == graph.INPUT  # ROS 2's default publisher profile is accepted


def test_input_qos_accepts_a_default_and_a_latched_publisher():
    from robot_hrl.transport import COMMAND_QOS, INPUT_QOS, LATCHED_QOS
    from robot_hrl.transport.interface import Durability, Reliability

    assert INPUT_QOS == COMMAND_QOS  # ROS 2's default profile: reliable, volatile, keep last 10
    assert (INPUT_QOS.reliability, INPUT_QOS.durability, INPUT_QOS.depth) == \
        (Reliability.RELIABLE, Durability.VOLATILE, 10)
    # a volatile reader matches a transient-local writer; the reverse would be refused by DDS
    assert LATCHED_QOS.durability is Durability.TRANSIENT_LOCAL


def test_publish_raw_is_part_of_the_publisher_interface():
    from robot_hrl.transport import Publisher

    class OnlyPublish(Publisher):
        def publish(self, msg):
            pass

        def get_subscription_count(self):
            return 0

    with pytest.raises(TypeError, match="publish_raw"):
        OnlyPublish()


def test_the_cyclonedds_backend_keeps_its_public_names_after_the_split():
    from robot_hrl.transport import cyclonedds_backend as backend
    from robot_hrl.transport.cyclonedds_executor import CycloneTimer
    from robot_hrl.transport.cyclonedds_graph import ROS_DISCOVERY_TOPIC, ros_discovery_qos
    from robot_hrl.transport.cyclonedds_mapping import EndpointInfo, dds_qos, dds_topic_name

    assert backend.CycloneTimer is CycloneTimer and backend.EndpointInfo is EndpointInfo
    assert backend.dds_qos is dds_qos and backend.dds_topic_name is dds_topic_name
    assert backend.ROS_DISCOVERY_TOPIC == ROS_DISCOVERY_TOPIC and backend.ros_discovery_qos is ros_discovery_qos


def test_estop_without_a_subscriber_warns_and_fails(monkeypatch, capsys):
    from dds_helpers import use_domain

    from robot_hrl.nodes import estop

    domain = use_domain(monkeypatch)
    code = estop.main(["--backend", "cyclonedds", "--domain-id", str(domain), "--wait", "0.2", "--linger", "0.1"])
    assert code == 1
    assert "no subscriber within 0.2 s" in capsys.readouterr().out


def test_estop_resends_while_it_lingers(monkeypatch):
    from dds_helpers import spin_until, use_domain

    from robot_hrl.msgs import Bool
    from robot_hrl.nodes.estop import publish_for
    from robot_hrl.transport import INPUT_QOS, create_node

    use_domain(monkeypatch)
    node = create_node("estop_unit", backend="cyclonedds")
    got = []
    node.create_subscription(Bool, "/estop", got.append, INPUT_QOS)
    pub = node.create_publisher(Bool, "/estop", INPUT_QOS)
    spin_until(node, lambda: pub.get_subscription_count() > 0, what="matching")
    sent = publish_for(node, pub, Bool(data=True), linger_s=0.2, period_s=0.05)
    spin_until(node, lambda: len(got) == sent, what="every copy")
    assert sent >= 3 and all(m.data for m in got)
    node.shutdown()
