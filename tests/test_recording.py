"""MCAP recording: a bag written from live DDS traffic of another process, read back with rosbags."""

from __future__ import annotations

import subprocess
from pathlib import Path as FsPath
import sys

import numpy as np
import pytest
from dds_helpers import GUARD_S, Peer, peer_env, spin_until, use_domain
from rosbags.rosbag2 import Reader
from rosbags.typesys import Stores, get_typestore

from robot_hrl.errors import ConfigError
from robot_hrl.msgs import DiagnosticArray, Image, MessageTypeError, Odometry, Path, String, array_from_image
from robot_hrl.recording import BagWriter, RecordingError, TopicRecorder
from robot_hrl.transport import LATCHED_QOS, QoS, create_node

TYPESTORE = get_typestore(Stores.ROS2_HUMBLE)
N = 15


def _read_bag(path):
    out: dict[str, list] = {}
    with Reader(path) as reader:
        assert list(FsPath(path).glob("*.mcap")), "MCAP storage"
        for conn, timestamp, raw in reader.messages():
            msg = TYPESTORE.deserialize_cdr(raw, conn.msgtype)  # every message decodes with ROS 2's definitions
            out.setdefault(conn.topic, []).append((conn.msgtype, timestamp, msg, raw))
    return out


def test_record_explicit_topics_from_another_process(monkeypatch, tmp_path):
    domain = use_domain(monkeypatch)
    bag = tmp_path / "run_bag"
    with Peer(domain, "stream", str(N)) as peer:
        peer.expect("READY")
        node = create_node("recorder", backend="cyclonedds", domain_id=domain)
        deep = QoS(depth=1000)
        rec = TopicRecorder(node, bag, {"/odom": (Odometry, deep), "/camera/image_raw": ("sensor_msgs/msg/Image", deep),
                                        "diagnostics": (DiagnosticArray, deep), "/plan": (Path, LATCHED_QOS)})
        counts = rec.bag.counts
        spin_until(node, lambda: all(counts[t] >= N for t in ("/odom", "/camera/image_raw", "/diagnostics"))
                   and counts["/plan"] == 1, what="all messages recorded")
        rec.close()
        node.shutdown()
    got = _read_bag(bag)
    assert sorted(got) == ["/camera/image_raw", "/diagnostics", "/odom", "/plan"]
    odoms = got["/odom"]
    assert [m.pose.pose.position.x for _, _, m, _ in odoms] == [float(i) for i in range(N)]
    assert all(t == "nav_msgs/msg/Odometry" for t, _, _, _ in odoms)
    assert [ts for _, ts, _, _ in odoms] == sorted(ts for _, ts, _, _ in odoms)  # receive time, in order
    # the bag holds the wire bytes: our own classes decode them too
    img = array_from_image(Image.deserialize(got["/camera/image_raw"][3][3]))
    assert img.shape == (4, 6, 3) and np.all(img == 3)
    diag = got["/diagnostics"][4][2]
    assert diag.status[0].name == "shield 4" and diag.status[0].values[0].value == "4"
    plan = got["/plan"][0][2]
    assert plan.header.frame_id == "map" and plan.poses[2].pose.position.x == 2.0
    # plain MCAP readers (Foxglove) see ROS 2 schemas and CDR messages
    from mcap.reader import make_reader

    (mcap_file,) = FsPath(bag).glob("*.mcap")
    with open(mcap_file, "rb") as f:
        seen = {(ch.topic, ch.message_encoding, sc.name, sc.encoding)
                for sc, ch, _ in make_reader(f).iter_messages()}
    assert ("/odom", "cdr", "nav_msgs/msg/Odometry", "ros2msg") in seen


def test_record_all_discovers_topics(monkeypatch, tmp_path):
    domain = use_domain(monkeypatch)
    bag = tmp_path / "all_bag"
    with Peer(domain, "talk", "/cf1", "/cf2") as peer:
        peer.expect("READY")
        node = create_node("recorder", backend="cyclonedds", domain_id=domain)
        rec = TopicRecorder(node, bag, topics=None, discover_period_s=0.1)
        spin_until(node, lambda: rec.bag.counts.get("/cf1/chatter", 0) >= 3 and rec.bag.counts.get("/cf2/chatter", 0) >= 3,
                   what="chatter in both namespaces recorded")
        rec.close()
        node.shutdown()
    got = _read_bag(bag)
    assert {"/cf1/chatter", "/cf2/chatter"} <= set(got)
    assert all(m.data.startswith("/cf1 ") for _, _, m, _ in got["/cf1/chatter"])


def test_bag_writer_errors(tmp_path):
    with BagWriter(tmp_path / "b") as bag:
        bag.add_topic("/task", "std_msgs/msg/String")
        bag.add_topic("/task", "std_msgs/msg/String")  # again: fine
        with pytest.raises(RecordingError, match="type std_msgs/msg/String"):
            bag.add_topic("/task", "nav_msgs/msg/Odometry")
        with pytest.raises(MessageTypeError, match="no ROS 2 definition"):
            bag.add_topic("/x", "foo_msgs/msg/Bar")
        with pytest.raises(RecordingError, match="add_topic first"):
            bag.write("/odom", Odometry().serialize())
        bag.write("/task", String("hello").serialize(), timestamp_ns=5)
    bag.write("/task", b"late")  # after close: ignored
    with pytest.raises(RecordingError, match="closed"):
        bag.add_topic("/y", "std_msgs/msg/String")
    with pytest.raises(RecordingError, match="exists already"):
        BagWriter(tmp_path / "b")
    with pytest.raises(RecordingError, match="does not exist"):
        BagWriter(tmp_path / "missing" / "b")
    got = _read_bag(tmp_path / "b")
    assert [(ts, m.data) for _, ts, m, _ in got["/task"]] == [(5, "hello")]


def test_recorder_refuses_unknown_types(monkeypatch, tmp_path):
    domain = use_domain(monkeypatch)
    node = create_node("recorder", backend="cyclonedds", domain_id=domain)
    with pytest.raises(MessageTypeError, match="unknown message type"):
        TopicRecorder(node, tmp_path / "b", {"/x": "foo_msgs/msg/Bar"})
    assert (tmp_path / "b").exists()  # the bag was closed cleanly

    class NoGraph:
        namespace = ""

    with pytest.raises(ConfigError, match="cannot discover"):
        TopicRecorder(NoGraph(), tmp_path / "c", topics=None)
    node.shutdown()


def test_cli_help_and_bad_arguments(tmp_path):
    env = peer_env(1)
    run = lambda *a: subprocess.run([sys.executable, "-m", "robot_hrl.recording", *a], capture_output=True,  # noqa: E731
                                    text=True, env=env, timeout=60)
    out = run("--help")
    assert out.returncode == 0 and "MCAP" in out.stdout
    out = run(str(tmp_path / "x"))
    assert out.returncode == 2 and "--all or at least one --topic" in out.stderr
    out = run(str(tmp_path / "x"), "--topic", "/odom")
    assert out.returncode == 2 and "NAME:TYPE" in out.stderr


def test_cli_records_all_topics_until_interrupted(monkeypatch, tmp_path):
    import signal

    domain = use_domain(monkeypatch)
    bag = tmp_path / "cli_bag"
    with Peer(domain, "talk", "/cf1") as peer:
        peer.expect("READY")
        proc = subprocess.Popen([sys.executable, "-m", "robot_hrl.recording", str(bag), "--all", "--domain-id",
                                 str(domain)], env=peer_env(domain), stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True)
        import threading

        guard = threading.Timer(GUARD_S, proc.kill)  # a hang guard, not a measurement
        guard.start()
        try:
            for line in proc.stdout:  # the recorder says when it has found and subscribed the topic
                if line.startswith("recording /cf1/chatter"):
                    break
            proc.send_signal(signal.SIGINT)
            out, _ = proc.communicate(timeout=60)
        finally:
            guard.cancel()
            if proc.poll() is None:
                proc.kill()
    assert proc.returncode == 0, out
    assert f"wrote {bag}" in out
    with Reader(bag) as reader:
        assert [c.topic for c in reader.connections] == ["/cf1/chatter"]
        assert all(TYPESTORE.deserialize_cdr(raw, c.msgtype).data.startswith("/cf1 ")
                   for c, _, raw in reader.messages())
