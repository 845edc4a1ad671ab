"""Cyclone DDS between separate processes: round trips, namespaces, domains, QoS, bad samples, sim time."""

from __future__ import annotations

import logging

import pytest
from dds_helpers import Peer, spin_until, unique_domain_id, use_domain

from robot_hrl.msgs import Odometry, String
from robot_hrl.transport import COMMAND_QOS, LATCHED_QOS, SENSOR_QOS, QoS, create_node


@pytest.fixture
def dds_domain(monkeypatch) -> int:
    return use_domain(monkeypatch)


def _odom(i: int) -> Odometry:
    msg = Odometry()
    msg.header.frame_id = "odom"
    msg.header.stamp.sec = i
    msg.child_frame_id = "base_link"
    msg.pose.pose.position.x = 0.5 * i
    msg.pose.covariance[7] = float(i)
    msg.twist.twist.angular.z = -i / 3
    return msg


def test_odometry_round_trip_through_another_process(dds_domain):
    with Peer(dds_domain, "echo", "/odom", "/odom_echo") as peer:
        peer.expect("READY")
        node = create_node("tester", backend="cyclonedds", domain_id=dds_domain)
        got: list[Odometry] = []
        node.create_subscription(Odometry, "/odom_echo", got.append, COMMAND_QOS)
        pub = node.create_publisher(Odometry, "/odom", COMMAND_QOS)
        spin_until(node, lambda: pub.get_subscription_count() > 0 and node._subscriptions[0].get_publisher_count() > 0,
                   what="discovery of the echo process")
        sent = [_odom(i) for i in range(20)]
        for i, msg in enumerate(sent):  # lock-step: a keep-last(10) history may drop a burst of 20
            pub.publish(msg)
            spin_until(node, lambda: len(got) == i + 1, what=f"echo {i}")
        assert got == sent
        node.shutdown()
    assert peer.proc.returncode == 0, peer.stderr


def test_namespaces_on_one_domain_do_not_cross(dds_domain):
    with Peer(dds_domain, "talk", "/cf1", "/cf2") as peer:
        peer.expect("READY")
        cf1 = create_node("listener", namespace="/cf1", backend="cyclonedds", domain_id=dds_domain)
        cf2 = create_node("listener", namespace="cf2", backend="cyclonedds", domain_id=dds_domain)
        got1: list[str] = []
        got2: list[str] = []
        cf1.create_subscription(String, "chatter", lambda m: got1.append(m.data))
        cf2.create_subscription(String, "chatter", lambda m: got2.append(m.data))
        spin_until([cf1, cf2], lambda: len(got1) >= 5 and len(got2) >= 5, what="chatter in both namespaces")
        assert all(s.startswith("/cf1 ") for s in got1), got1
        assert all(s.startswith("/cf2 ") for s in got2), got2
        cf1.shutdown()
        cf2.shutdown()


def test_two_domains_do_not_cross(monkeypatch):
    mine = use_domain(monkeypatch)
    other = unique_domain_id(block=3)
    assert other != mine
    # the peer publishes on both domains, alternately; this process listens on one
    with Peer(mine, "talk_domains", str(other), str(mine)) as peer:
        peer.expect("READY")
        node = create_node("listener", backend="cyclonedds", domain_id=mine)
        got: list[str] = []
        node.create_subscription(String, "/chatter", lambda m: got.append(m.data))
        spin_until(node, lambda: len(got) >= 10, what="chatter on our domain")
        assert all(s.startswith(f"domain {mine} ") for s in got), got
        node.shutdown()


def test_malformed_samples_are_dropped_counted_and_logged(dds_domain, caplog):
    rounds = 12
    with Peer(dds_domain, "malformed", "/odom", str(rounds)) as peer:
        peer.expect("READY")
        node = create_node("victim", backend="cyclonedds", domain_id=dds_domain)
        got: list[Odometry] = []
        sub = node.create_subscription(Odometry, "/odom", got.append, QoS(depth=1000))
        with caplog.at_level(logging.WARNING):
            assert peer.expect("REFUSED") == "REFUSED 3"  # Cyclone refuses structurally bad CDR at the writer
            spin_until(node, lambda: len(got) == rounds and sub.dropped == rounds,
                       what="the valid messages between the garbage")
            peer.expect("SENT")
        assert [m.header.frame_id for m in got] == [f"odom {i}" for i in range(rounds)]
        assert sub.dropped == rounds and node.dropped_samples == rounds
        assert sub.received == rounds
        assert "dropped an undecodable nav_msgs/msg/Odometry sample on /odom" in caplog.text
        node.shutdown()


def test_latched_topic_reaches_a_late_subscriber(dds_domain):
    with Peer(dds_domain, "latched", "/task", "fly to the kitchen") as peer:
        peer.expect("PUBLISHED")
        node = create_node("late", backend="cyclonedds", domain_id=dds_domain)
        got: list[str] = []
        node.create_subscription(String, "/task", lambda m: got.append(m.data), LATCHED_QOS)
        spin_until(node, lambda: len(got) >= 1, what="the latched task")
        assert got == ["fly to the kitchen"]
        node.shutdown()


def test_best_effort_subscriber_hears_reliable_publisher(dds_domain):
    with Peer(dds_domain, "talk", "/cf1") as peer:
        peer.expect("READY")
        node = create_node("sensor_like", namespace="/cf1", backend="cyclonedds", domain_id=dds_domain)
        got: list[str] = []
        node.create_subscription(String, "chatter", lambda m: got.append(m.data), SENSOR_QOS)
        spin_until(node, lambda: len(got) >= 3, what="reliable chatter on a best-effort reader")
        node.shutdown()


def test_sim_time_follows_clock_from_another_process(dds_domain):
    with Peer(dds_domain, "clock") as peer:
        peer.expect("READY")
        node = create_node("simtimed", namespace="/cf1", parameters={"use_sim_time": True}, backend="cyclonedds",
                           domain_id=dds_domain)  # /clock is global: the namespace does not hide it
        ticks: list[float] = []
        node.create_timer(0.5, lambda: ticks.append(node.now()))
        assert node.now() == 0.0  # no /clock yet: time stands still, as in ROS 2
        clock_sub = node._subscriptions[0]
        spin_until(node, lambda: clock_sub.get_publisher_count() > 0, what="the clock publisher")
        for t in ("10.0", "10.25", "10.5", "10.75", "11.0", "12.6"):
            peer.send(t)
            peer.expect(f"TICK {t}")
            spin_until(node, lambda t=t: node.now() == float(t), what=f"sim time {t}")
        # the timer starts with the first /clock (10.0) and fires every 0.5 s of sim time;
        # the jump to 12.6 runs it once and skips the missed ticks
        assert ticks == [10.5, 11.0, 12.6]
        node.shutdown()
