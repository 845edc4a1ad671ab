"""The Cyclone DDS backend in one process: names, QoS, timers, executor, errors, backend selection."""

from __future__ import annotations

import threading

import pytest
from dds_helpers import spin_until, use_domain

from robot_hrl.errors import ConfigError, RobotHrlError
from robot_hrl.msgs import MessageTypeError, Odometry, PoseStamped, String
from robot_hrl.transport import COMMAND_QOS, LATCHED_QOS, SENSOR_QOS, QoS, create_node, resolve_backend
from robot_hrl.transport.cyclonedds_backend import CycloneNode, CycloneTimer, TransportError, dds_qos, dds_topic_name
from robot_hrl.transport.dds_config import (
    MAX_DOMAIN_ID,
    check_domain_id,
    domain_id_from_env,
    loopback_config,
    unique_domain_id,
)


@pytest.fixture
def node(monkeypatch):
    domain = use_domain(monkeypatch)
    n = create_node("unit", namespace="/cf1", parameters={"rate_hz": 200}, backend="cyclonedds", domain_id=domain)
    yield n
    n.shutdown()


def test_topic_and_type_mapping_follow_ros2():
    assert dds_topic_name("/odom") == "rt/odom"
    assert dds_topic_name("/cf1/camera/image_raw") == "rt/cf1/camera/image_raw"
    assert Odometry.__idl_typename__ == "nav_msgs::msg::dds_::Odometry_"


@pytest.mark.parametrize("bad", ["odom", "/", "/a//b", "/odom/", "/1odom", "/od-om", "/o dom"])
def test_bad_topic_names(bad):
    with pytest.raises(TransportError):
        dds_topic_name(bad)


def test_namespace_resolution(node):
    assert node.resolve_topic("odom") == "/cf1/odom"
    assert node.resolve_topic("/odom") == "/cf1/odom"
    assert node.resolve_topic("/clock") == "/clock" and node.resolve_topic("clock") == "/clock"  # one world clock
    pub = node.create_publisher(String, "chatter")
    assert pub.topic == "/cf1/chatter"
    with pytest.raises(TransportError, match="topic name"):
        node.create_publisher(String, "")
    with pytest.raises(TransportError):
        node.create_publisher(String, "bad-name")


def test_namespace_is_normalised(monkeypatch):
    domain = use_domain(monkeypatch)
    for given in ("cf2", "/cf2", "cf2/", " /cf2/ "):
        n = CycloneNode("n", namespace=given, domain_id=domain)
        assert n.namespace == "/cf2" and n.resolve_topic("odom") == "/cf2/odom"
        n.shutdown()
    n = CycloneNode("n", namespace="", domain_id=domain)
    assert n.namespace == "" and n.resolve_topic("odom") == "/odom"
    n.shutdown()


def test_qos_mapping():
    from cyclonedds.qos import Policy

    sensor = dds_qos(SENSOR_QOS)
    assert Policy.Reliability.BestEffort in sensor and Policy.History.KeepLast(5) in sensor
    assert Policy.Durability.Volatile in sensor
    latched = dds_qos(LATCHED_QOS)
    assert Policy.Durability.TransientLocal in latched and Policy.History.KeepLast(1) in latched
    assert Policy.Reliability.Reliable in dds_qos(COMMAND_QOS)
    with pytest.raises(TransportError, match="depth"):
        dds_qos(QoS(depth=0))
    with pytest.raises(TransportError, match="QoS profile"):
        dds_qos("reliable")


def test_parameters(node):
    assert node.declare_parameter("rate_hz", 100) == 200  # the start-up value wins
    assert node.declare_parameter("radius", 0.5) == 0.5
    assert node.get_parameter("radius") == 0.5
    with pytest.raises(KeyError, match="not declared"):
        node.get_parameter("nope")


def test_in_process_publish_subscribe_and_raw(node):
    got, raw = [], []
    node.create_subscription(PoseStamped, "subgoal", got.append)
    node.create_subscription(PoseStamped, "subgoal", raw.append, raw=True)
    pub = node.create_publisher(PoseStamped, "subgoal")
    msg = PoseStamped()
    msg.pose.position.z = 1.25
    pub.publish(msg)
    spin_until(node, lambda: got and raw, what="loopback delivery")
    assert got == [msg]
    assert PoseStamped.deserialize(raw[0]) == msg and raw[0][:4] == b"\x00\x01\x00\x00"


def test_wrong_message_types_are_refused(node):
    pub = node.create_publisher(String, "chatter")
    with pytest.raises(MessageTypeError, match="std_msgs/msg/String"):
        pub.publish(Odometry())
    with pytest.raises(MessageTypeError, match="not a message class"):
        node.create_publisher(dict, "chatter2")
    with pytest.raises(TransportError, match="already used with type std_msgs/msg/String"):
        node.create_subscription(Odometry, "chatter", print)
    with pytest.raises(TransportError, match="not callable"):
        node.create_subscription(String, "chatter", None)


def test_unserializable_value_says_which_topic(node):
    pub = node.create_publisher(PoseStamped, "subgoal")
    msg = PoseStamped()
    msg.header.stamp.sec = 2**40  # does not fit int32
    with pytest.raises(MessageTypeError, match="/cf1/subgoal"):
        pub.publish(msg)


@pytest.mark.parametrize("period", [0, -1, float("nan"), float("inf"), "10ms", True])
def test_bad_timer_periods(node, period):
    with pytest.raises(TransportError, match="period"):
        node.create_timer(period, lambda: None)


def test_timer_deadlines_do_not_drift(node):
    timer = node.create_timer(0.002, lambda: None)
    start = timer._next - timer.period_s
    node.spin(until=lambda: timer.calls >= 50)
    # deadlines stay on the grid start + k * period, whatever the callbacks cost
    k = timer.calls + timer.overruns + 1
    assert timer._next == pytest.approx(start + k * timer.period_s, abs=1e-9)


def test_late_timer_skips_missed_ticks_and_keeps_its_phase(node):
    timer = CycloneTimer(node, 0.01, lambda: None)
    timer._next = 100.0
    timer._advance(100.0351)  # fired 35 ms late: ticks at 100.01, .02, .03 were missed
    assert timer.overruns == 3
    assert timer._next == pytest.approx(100.04)
    timer._advance(100.0401)
    assert timer.overruns == 3 and timer._next == pytest.approx(100.05)


def test_cancelled_timer_stops(node):
    calls = []
    timer = node.create_timer(0.001, lambda: calls.append(1))
    node.spin(until=lambda: len(calls) >= 3)
    timer.cancel()
    other = node.create_timer(0.001, lambda: None)
    node.spin(until=lambda: other.calls >= 5)
    assert len(calls) == 3


def test_shutdown_from_a_callback_and_from_another_thread(monkeypatch):
    domain = use_domain(monkeypatch)
    a = create_node("a", backend="cyclonedds", domain_id=domain)
    a.create_timer(0.001, a.shutdown)
    a.spin()
    assert a.is_shutdown
    with pytest.raises(TransportError, match="shut down"):
        a.create_publisher(String, "x")
    c = create_node("c", backend="cyclonedds", domain_id=domain)
    pub = c.create_publisher(String, "x")
    c.shutdown()
    with pytest.raises(TransportError, match="destroyed"):
        pub.publish(String("late"))
    b = CycloneNode("b", domain_id=domain)
    started = threading.Event()
    b.create_timer(0.001, started.set)
    threading.Thread(target=lambda: (started.wait(30), b.shutdown()), daemon=True).start()
    b.spin()  # returns: the guard condition wakes the wait
    assert b.is_shutdown
    b.shutdown()  # twice is fine


def test_bad_node_arguments(monkeypatch):
    domain = use_domain(monkeypatch)
    with pytest.raises(TransportError, match="node name"):
        CycloneNode("bad name", domain_id=domain)
    with pytest.raises(TransportError, match="use_sim_time"):
        CycloneNode("n", parameters={"use_sim_time": "yes"}, domain_id=domain)
    with pytest.raises(TransportError):
        CycloneNode("n", namespace="/bad ns", domain_id=domain)
    with pytest.raises(ValueError, match="domain id"):
        CycloneNode("n", domain_id=MAX_DOMAIN_ID + 1)


def test_domain_ids(monkeypatch):
    monkeypatch.setenv("ROS_DOMAIN_ID", "42")
    assert domain_id_from_env() == 42
    monkeypatch.setenv("ROS_DOMAIN_ID", "")
    assert domain_id_from_env() == 0
    monkeypatch.setenv("ROS_DOMAIN_ID", "forty")
    with pytest.raises(ValueError, match="ROS_DOMAIN_ID"):
        domain_id_from_env()
    monkeypatch.setenv("ROS_DOMAIN_ID", "300")
    with pytest.raises(ValueError, match="0..232"):
        domain_id_from_env()
    for bad in (-1, 233, 1.5, "3", True):
        with pytest.raises(RobotHrlError):  # the nodes' main() turn these into one clear line
            check_domain_id(bad)
    ids = {unique_domain_id() for _ in range(20)}
    assert len(ids) == 20 and all(0 < i <= MAX_DOMAIN_ID for i in ids)
    # Bands of different (worker, block) pairs never overlap (the e2e graphs use block 3).
    bands = {}
    for worker in range(4):
        monkeypatch.setenv("PYTEST_XDIST_WORKER_COUNT", "4")
        monkeypatch.setenv("PYTEST_XDIST_WORKER", f"gw{worker}")
        for block in range(4):
            bands[(worker, block)] = {unique_domain_id(block=block) for _ in range(60)}
    pairs = list(bands)
    assert all(not (bands[a] & bands[b]) for i, a in enumerate(pairs) for b in pairs[i + 1:])
    assert all(0 < i <= MAX_DOMAIN_ID for ids in bands.values() for i in ids)
    assert "127.0.0.1" in loopback_config() and "<AllowMulticast>false" in loopback_config()
    with pytest.raises(ValueError):
        loopback_config(0)


def test_backend_selection(monkeypatch):
    with pytest.raises(ConfigError, match="unknown transport backend 'zeromq'"):
        create_node("n", backend="zeromq")
    assert resolve_backend("cyclonedds") == "cyclonedds"
    try:
        import rclpy  # noqa: F401
    except ImportError:
        assert resolve_backend("auto") == "cyclonedds"
        with pytest.raises(ConfigError, match="rclpy cannot be imported"):
            create_node("n", backend="rclpy")
        domain = use_domain(monkeypatch)
        n = create_node("n", domain_id=domain)
        assert isinstance(n, CycloneNode)
        n.shutdown()
    else:
        assert resolve_backend("auto") == "rclpy"


# ---- the ROS 2 graph (ros_discovery_info) --------------------------------------------------------
def _graph_node(sample, name):
    return [n for n in sample.node_entities_info_seq if n.node_name == name]


def test_graph_sample_lists_the_node_and_its_endpoint_guids(monkeypatch):
    from robot_hrl.msgs.rmw_dds_common import gid_from_guid

    monkeypatch.delenv("ROS_DISTRO", raising=False)
    domain = use_domain(monkeypatch)
    n = CycloneNode("grapher", namespace="/cf3", domain_id=domain)
    root = CycloneNode("rooted", domain_id=domain)
    graph = n._participant.graph
    assert graph is root._participant.graph and graph.gid_size == 16
    pub = n.create_publisher(String, "status")
    sub = n.create_subscription(String, "cmd", lambda m: None)
    before = graph.published
    sample = graph.sample()
    assert sample.gid == gid_from_guid(n._participant.dp.guid)
    [info] = _graph_node(sample, "grapher")
    assert info.node_namespace == "/cf3" and _graph_node(sample, "rooted")[0].node_namespace == "/"
    assert info.writer_gid_seq == [gid_from_guid(pub.guid)] and info.reader_gid_seq == [gid_from_guid(sub.guid)]
    sub.destroy()  # a change: republished without the reader
    assert graph.published == before + 1 and _graph_node(graph.sample(), "grapher")[0].reader_gid_seq == []
    n.shutdown()
    assert _graph_node(graph.sample(), "grapher") == [] and _graph_node(graph.sample(), "rooted")
    root.shutdown()


def test_participant_user_data_is_the_rmw_enclave(monkeypatch):
    from cyclonedds.qos import Policy

    n = CycloneNode("enclaved", domain_id=use_domain(monkeypatch))
    assert Policy.Userdata(b"enclave=/;") in n._participant.dp.get_qos()
    n.shutdown()


@pytest.mark.parametrize("distro,size", [("humble", 24), ("jazzy", 16), ("", 16)])
def test_gid_layout_follows_ros_distro_or_the_option(monkeypatch, distro, size):
    monkeypatch.setenv("ROS_DISTRO", distro)
    n = CycloneNode("distro", domain_id=use_domain(monkeypatch))
    assert n._participant.graph.gid_size == size and len(n._participant.graph.sample().gid.data) == size
    n.shutdown()
    explicit = CycloneNode("distro", domain_id=use_domain(monkeypatch), ros_distro="humble" if size == 16 else "iron")
    assert explicit._participant.graph.gid_size == (24 if size == 16 else 16)
    explicit.shutdown()


def test_a_broken_graph_writer_never_breaks_the_node(monkeypatch, caplog):
    class Refusing:
        def write(self, sample):
            raise RuntimeError("no graph today")

    n = CycloneNode("sturdy", domain_id=use_domain(monkeypatch))
    n._participant.graph._writer = Refusing()
    got: list[str] = []
    with caplog.at_level("WARNING"):
        pub = n.create_publisher(String, "/chatter")
        n.create_subscription(String, "/chatter", lambda m: got.append(m.data))
    assert "could not publish the ROS 2 graph on ros_discovery_info" in caplog.text
    spin_until(n, lambda: pub.get_subscription_count() > 0, what="in-process match")
    pub.publish(String("still here"))
    spin_until(n, lambda: got == ["still here"], what="the message despite the graph failure")
    n.shutdown()
