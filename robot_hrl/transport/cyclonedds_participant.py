"""The participant pool: one DomainParticipant per process and domain, shared by its nodes.

rmw does the same (one participant per context). The participant is created with rmw's USER_DATA
and its :class:`~robot_hrl.transport.cyclonedds_graph.RosGraph`, counted per user, and deleted
with its topics when the last node of the domain shuts down.
"""

from __future__ import annotations

import logging
import threading

from cyclonedds.core import DDSException, InstanceState, ReadCondition, SampleState, ViewState
from cyclonedds.domain import DomainParticipant
from cyclonedds.qos import Policy, Qos
from cyclonedds.topic import Topic

from robot_hrl.msgs import ros_type_name
from robot_hrl.transport.cyclonedds_graph import RosGraph, participant_user_data
from robot_hrl.transport.interface import TransportError

_log = logging.getLogger(__name__)


def create_domain_participant(domain_id: int) -> DomainParticipant:
    """A DomainParticipant with rmw's USER_DATA; without it if the QoS is refused (the graph is
    a courtesy to ROS 2 tools, the node must still run)."""
    try:
        return DomainParticipant(domain_id, qos=Qos(Policy.Userdata(participant_user_data())))
    except DDSException as exc:
        _log.warning("DDS participant with USER_DATA %r refused (%s); joining domain %d without it",
                     participant_user_data(), exc, domain_id)
    return DomainParticipant(domain_id)


class Participant:
    """A process's DomainParticipant on one domain: its topics, its ROS graph, its users."""

    def __init__(self, domain_id: int, gid_size: int):
        self.domain_id = domain_id
        try:
            self.dp = create_domain_participant(domain_id)
        except DDSException as exc:
            raise TransportError(f"could not join DDS domain {domain_id}: {exc}. Check CYCLONEDDS_URI "
                                 "(robot_hrl.transport.dds_config.loopback_config() is a known-good profile)") from exc
        self.topics: dict[str, Topic] = {}
        self.users = 0
        self._graph_readers = None
        self.graph = RosGraph(self.dp, gid_size)

    def endpoints(self, publications: bool = True) -> list:
        """The DCPSPublication (or DCPSSubscription) samples of the alive endpoints on the domain,
        ours included."""
        from cyclonedds.builtin import BuiltinDataReader, BuiltinTopicDcpsPublication, BuiltinTopicDcpsSubscription

        if self._graph_readers is None:
            readers = []
            for builtin in (BuiltinTopicDcpsPublication, BuiltinTopicDcpsSubscription):
                reader = BuiltinDataReader(self.dp, builtin)
                readers.append((reader, ReadCondition(reader, SampleState.Any | ViewState.Any | InstanceState.Alive)))
            self._graph_readers = readers
        reader, alive = self._graph_readers[0 if publications else 1]
        return reader.read(N=100_000, condition=alive)

    def topic(self, name: str, msg_type: type) -> Topic:
        existing = self.topics.get(name)
        if existing is not None:
            if existing.data_type is not msg_type:
                raise TransportError(
                    f"topic {name!r} is already used with type {ros_type_name(existing.data_type)} in this process; "
                    f"it cannot also carry {ros_type_name(msg_type)}")
            return existing
        topic = Topic(self.dp, name, msg_type)
        self.topics[name] = topic
        return topic

    def close(self) -> None:
        self.graph.close()
        self.topics.clear()
        self._graph_readers = None
        self.dp = None  # the Python wrapper deletes the DDS entity and its children


_PARTICIPANTS: dict[int, Participant] = {}
_PARTICIPANTS_LOCK = threading.Lock()


def acquire_participant(domain_id: int, gid_size: int) -> Participant:
    """The process's participant on ``domain_id`` (created on first use), counted as one more user."""
    with _PARTICIPANTS_LOCK:
        p = _PARTICIPANTS.get(domain_id)
        if p is None:
            p = _PARTICIPANTS[domain_id] = Participant(domain_id, gid_size)
        elif p.graph.gid_size != gid_size:
            # one participant, one ros_discovery_info sample: the first node chose its layout
            _log.warning("domain %d already publishes %d-byte ROS 2 graph GIDs in this process; "
                         "a node asking for %d-byte ones shares them", domain_id, p.graph.gid_size, gid_size)
        p.users += 1
        return p


def release_participant(p: Participant) -> None:
    """One user fewer; the last one deletes the participant."""
    with _PARTICIPANTS_LOCK:
        p.users -= 1
        if p.users <= 0 and _PARTICIPANTS.get(p.domain_id) is p:
            del _PARTICIPANTS[p.domain_id]
            p.close()


_log.addHandler(logging.NullHandler())
