"""The rclpy backend, against a real ROS 2 install (skipped where rclpy cannot be imported)."""

from __future__ import annotations

import pytest

rclpy = pytest.importorskip("rclpy")

from dds_helpers import Peer, spin_until, use_domain  # noqa: E402

from robot_hrl.msgs import Odometry, String  # noqa: E402
from robot_hrl.transport import COMMAND_QOS, LATCHED_QOS, create_node  # noqa: E402
from robot_hrl.transport.rclpy_backend import RclpyNode, our_qos, ros_qos  # noqa: E402

pytestmark = pytest.mark.ros


@pytest.fixture
def domain(monkeypatch):
    return use_domain(monkeypatch)


def test_auto_picks_rclpy_and_parameters_work(domain):
    node = create_node("unit", namespace="/cf1", parameters={"rate_hz": 200}, domain_id=domain)
    try:
        assert isinstance(node, RclpyNode)
        assert node.declare_parameter("rate_hz", 100) == 200
        assert node.declare_parameter("radius", 0.5) == 0.5
        with pytest.raises(KeyError):
            node.get_parameter("nope")
    finally:
        node.shutdown()


def test_qos_round_trip():
    for qos in (COMMAND_QOS, LATCHED_QOS):
        assert our_qos(ros_qos(qos)) == qos


def test_in_process_publish_subscribe(domain):
    node = create_node("unit", backend="rclpy", domain_id=domain)
    got = []
    node.create_subscription(String, "chatter", got.append)
    pub = node.create_publisher(String, "chatter")
    spin_until(node, lambda: pub.get_subscription_count() > 0, what="matching")
    pub.publish(String("hello"))
    spin_until(node, lambda: got, what="delivery")
    assert got == [String("hello")]
    node.shutdown()


def test_rclpy_node_talks_to_a_cyclonedds_process(domain, monkeypatch):
    # The peer runs our Cyclone backend; this process runs rclpy (with rmw_cyclonedds_cpp).
    monkeypatch.setenv("RMW_IMPLEMENTATION", "rmw_cyclonedds_cpp")
    with Peer(domain, "echo", "/odom", "/odom_echo") as peer:
        peer.expect("READY")
        node = create_node("rclpy_side", backend="rclpy", domain_id=domain)
        got = []
        node.create_subscription(Odometry, "/odom_echo", got.append)
        pub = node.create_publisher(Odometry, "/odom")
        spin_until(node, lambda: pub.get_subscription_count() > 0, what="discovery across backends")
        msg = Odometry()
        msg.pose.pose.position.x = 3.0
        pub.publish(msg)
        spin_until(node, lambda: got, what="the echo")
        assert got[0] == msg
        node.shutdown()
