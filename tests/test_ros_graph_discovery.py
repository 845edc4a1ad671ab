"""The ROS 2 graph over real processes: a node in another process announces itself on
``ros_discovery_info`` as rmw_cyclonedds does, so ``ros2 node list`` can show it.

The test process does not use our backend to listen: it opens a plain Cyclone DDS participant
with a reader of ``rmw_dds_common/msg/ParticipantEntitiesInfo`` (the layout of the child's
``ROS_DISTRO``) and the builtin discovery readers, and checks that the announced GIDs are the
GUIDs of the DDS readers and writers the child created (the DCPSPublication/DCPSSubscription
keys, which is what ROS 2's graph cache matches them against).

Run as a script, this file is the child: ``python tests/test_ros_graph_discovery.py NAME NS``.
"""

from __future__ import annotations

import sys
import time
import uuid
from pathlib import Path

import pytest
from dds_helpers import GUARD_S, Peer, unique_domain_id, use_domain

NODE_NAME = "graph_talker"
NAMESPACE = "/cf7"


# ---- the child -------------------------------------------------------------------------------------
def _child(name: str, namespace: str) -> None:
    """A node with two publishers and a subscription; on the stdin line ``more`` it adds a
    publisher (the graph sample must be republished); stops when stdin closes."""
    import threading

    from robot_hrl.msgs import Odometry, String
    from robot_hrl.transport import create_node

    node = create_node(name, namespace=namespace, backend="cyclonedds")
    node.create_publisher(Odometry, "odom")
    node.create_publisher(String, "status")
    node.create_subscription(String, "cmd", lambda _m: None)
    requests: list[str] = []

    def watch_stdin() -> None:
        for line in sys.stdin:
            requests.append(line.strip())
        node.shutdown()

    def serve() -> bool:  # runs on the spinning thread: entities are created there
        while requests:
            if requests.pop(0) == "more":
                node.create_publisher(String, "extra")
                print("MORE", flush=True)
        return False

    threading.Thread(target=watch_stdin, daemon=True).start()
    print("READY", flush=True)
    node.spin(until=serve)


# ---- the test side ---------------------------------------------------------------------------------
class _Listener:
    """A plain Cyclone DDS participant reading ros_discovery_info and the builtin topics."""

    def __init__(self, domain_id: int, gid_size: int):
        from cyclonedds.builtin import (
            BuiltinDataReader,
            BuiltinTopicDcpsParticipant,
            BuiltinTopicDcpsPublication,
            BuiltinTopicDcpsSubscription,
        )
        from cyclonedds.domain import DomainParticipant
        from cyclonedds.sub import DataReader
        from cyclonedds.topic import Topic

        from robot_hrl.msgs.rmw_dds_common import entities_info_classes
        from robot_hrl.transport.cyclonedds_backend import ROS_DISCOVERY_TOPIC, ros_discovery_qos

        self.dp = DomainParticipant(domain_id)
        cls = entities_info_classes(gid_size).participant
        self.info = DataReader(self.dp, Topic(self.dp, ROS_DISCOVERY_TOPIC, cls), qos=ros_discovery_qos())
        self.participants = BuiltinDataReader(self.dp, BuiltinTopicDcpsParticipant)
        self.publications = BuiltinDataReader(self.dp, BuiltinTopicDcpsPublication)
        self.subscriptions = BuiltinDataReader(self.dp, BuiltinTopicDcpsSubscription)
        self.samples: list = []

    def wait_for_node(self, name: str, namespace: str, writers: int, readers: int, what: str):
        """The latest sample that lists the node with that many writers and readers."""
        end = time.monotonic() + GUARD_S
        while time.monotonic() < end:
            self.samples += self.info.take(N=100)
            for sample in reversed(self.samples):
                for node in sample.node_entities_info_seq:
                    if (node.node_name, node.node_namespace) == (name, namespace) \
                            and len(node.writer_gid_seq) == writers and len(node.reader_gid_seq) == readers:
                        return sample, node
            time.sleep(0.05)
        seen = [[(n.node_namespace, n.node_name, len(n.writer_gid_seq), len(n.reader_gid_seq))
                 for n in s.node_entities_info_seq] for s in self.samples]
        raise AssertionError(f"no ros_discovery_info sample with node {namespace}/{name} ({writers} writers, "
                             f"{readers} readers) within {GUARD_S} s ({what}); samples seen: {seen}")

    def endpoints(self, reader, participant: uuid.UUID, topics: set[str], what: str) -> dict[str, uuid.UUID]:
        """DDS topic name -> endpoint GUID of ``participant``'s endpoints on ``topics``."""
        end = time.monotonic() + GUARD_S
        found: dict[str, uuid.UUID] = {}
        while time.monotonic() < end:
            found = {s.topic_name: s.key for s in reader.read(N=10_000)
                     if s.participant_key == participant and s.topic_name in topics}
            if set(found) == topics:
                return found
            time.sleep(0.05)
        raise AssertionError(f"builtin discovery did not show the child's {what} on {sorted(topics)} within "
                             f"{GUARD_S} s; found {found}")

    def user_data(self, participant: uuid.UUID) -> bytes | None:
        from cyclonedds.qos import Policy

        end = time.monotonic() + GUARD_S
        while time.monotonic() < end:
            for sample in self.participants.read(N=1000):
                if sample.key == participant:
                    for policy in sample.qos:
                        if isinstance(policy, Policy.Userdata):
                            return policy.data
                    return None
            time.sleep(0.05)
        raise AssertionError(f"participant {participant} not discovered within {GUARD_S} s")


def _gids(seq) -> set[bytes]:
    return {bytes(g.data) for g in seq}


@pytest.mark.parametrize("ros_distro,gid_size", [("jazzy", 16), ("humble", 24)])
def test_node_in_another_process_is_announced_with_its_endpoint_gids(ros_distro, gid_size, monkeypatch):
    domain = use_domain(monkeypatch, unique_domain_id(block=2))  # loopback profile for our listener too
    listener = _Listener(domain, gid_size)
    child = Peer(domain, NODE_NAME, NAMESPACE, extra_env={"ROS_DISTRO": ros_distro}, script=Path(__file__).resolve())
    try:
        child.expect("READY")
        sample, node = listener.wait_for_node(NODE_NAME, NAMESPACE, writers=2, readers=1, what="the first sample")
        pad = bytes(gid_size - 16)
        assert len(sample.gid.data) == gid_size and sample.gid.data.endswith(pad)
        participant = uuid.UUID(bytes=bytes(sample.gid.data[:16]))
        assert participant.bytes[12:] == b"\x00\x00\x01\xc1", "the GID is the participant's GUID (entity id 0x1c1)"
        assert listener.user_data(participant) == b"enclave=/;"

        writers = listener.endpoints(listener.publications, participant, {"rt/cf7/odom", "rt/cf7/status"},
                                     "writers")
        readers = listener.endpoints(listener.subscriptions, participant, {"rt/cf7/cmd"}, "readers")
        assert _gids(node.writer_gid_seq) == {g.bytes + pad for g in writers.values()}
        assert _gids(node.reader_gid_seq) == {g.bytes + pad for g in readers.values()}

        # a new publisher: the same sample is republished with it
        child.send("more")
        child.expect("MORE")
        _, node = listener.wait_for_node(NODE_NAME, NAMESPACE, writers=3, readers=1, what="after a new publisher")
        writers = listener.endpoints(listener.publications, participant,
                                     {"rt/cf7/odom", "rt/cf7/status", "rt/cf7/extra"}, "writers")
        assert _gids(node.writer_gid_seq) == {g.bytes + pad for g in writers.values()}
    finally:
        assert child.close() == 0, child.stderr[-3000:]


if __name__ == "__main__":
    _child(*sys.argv[1:3])
