"""The ROS 2 graph on Cyclone DDS: what ``ros2 node list`` reads, published as rmw_cyclonedds does.

The participant carries USER_DATA ``enclave=/;`` and publishes an
``rmw_dds_common/msg/ParticipantEntitiesInfo`` on ``ros_discovery_info`` (its GID and, per node,
namespace, name and the GIDs of the node's readers and writers), republished whole whenever a
node, publisher or subscription comes or goes. The GID layout (16 or 24 bytes) follows
``ROS_DISTRO`` (:func:`robot_hrl.transport.dds_config.ros_gid_size`). A failure here is logged,
never raised: the nodes' own topics work without it.
"""

from __future__ import annotations

import logging
import threading
import uuid
from typing import Any, Protocol

from cyclonedds.domain import DomainParticipant
from cyclonedds.pub import DataWriter
from cyclonedds.qos import Policy, Qos
from cyclonedds.sub import DataReader
from cyclonedds.topic import Topic
from cyclonedds.util import duration

from robot_hrl.msgs.rmw_dds_common import NAME_BOUND, entities_info_classes, gid_from_guid

ROS_DISCOVERY_TOPIC = "ros_discovery_info"
"""The DDS topic of the ROS 2 graph (no ``rt/`` prefix: rmw creates it outside the ROS names)."""
GRAPH_READ_DEPTH = 256
"""Samples of ros_discovery_info the graph reader keeps between reads (the topic is keyless: one history for all
participants; each read folds them into :attr:`RosGraph.peers`)."""
ENCLAVE = "/"
"""The security enclave rcl gives a context by default; rmw puts it in the participant's USER_DATA."""

_log = logging.getLogger(__name__)


class GraphNode(Protocol):
    """What the graph needs of a node."""

    name: str
    namespace: str

    def _graph_guids(self) -> tuple[list[uuid.UUID], list[uuid.UUID]]: ...


def participant_user_data(enclave: str = ENCLAVE) -> bytes:
    """The participant USER_DATA rmw_cyclonedds sets: ``enclave=<enclave>;`` (no NUL)."""
    return f"enclave={enclave};".encode()


def ros_discovery_qos() -> Qos:
    """The QoS of rmw's ros_discovery_info writer: reliable, transient local, keep last 1 (a late
    joiner gets each participant's latest sample)."""
    return Qos(Policy.Reliability.Reliable(max_blocking_time=duration(milliseconds=100)),
               Policy.Durability.TransientLocal, Policy.History.KeepLast(1))


def entity_guid(entity: Any) -> uuid.UUID | None:
    """The DDS GUID of a participant, reader or writer; None (and a warning) when it cannot be read."""
    try:
        return entity.guid
    except Exception as exc:  # noqa: BLE001 - a graph detail must never break a node
        _log.warning("could not read the DDS GUID of %r (%s: %s); it is left out of ros_discovery_info",
                     entity, type(exc).__name__, exc)
        return None


class RosGraph:
    """This participant's ``ParticipantEntitiesInfo`` on ``ros_discovery_info``: one sample per
    participant, republished whole on every change.

    Every method logs and swallows its errors: ``ros2 node list`` is a nicety, the node's own
    topics must work without it."""

    def __init__(self, dp: DomainParticipant, gid_size: int):
        self.gid_size = gid_size
        self.published = 0
        """Samples written (one per change)."""
        self._nodes: dict[int, GraphNode] = {}  # id(node) -> node, in creation order
        self._lock = threading.Lock()
        self._writer: DataWriter | None = None
        self._reader: DataReader | None = None
        self.peers: dict[bytes, Any] = {}
        """The latest ParticipantEntitiesInfo of each participant heard (ours included), by participant GID."""
        self._classes = None
        self._gid = None
        try:
            self._classes = entities_info_classes(gid_size)
            guid = entity_guid(dp)
            if guid is None:
                return
            self._gid = gid_from_guid(guid, gid_size)
            topic = Topic(dp, ROS_DISCOVERY_TOPIC, self._classes.participant)
            self._writer = DataWriter(dp, topic, qos=ros_discovery_qos())
            self._reader = DataReader(dp, topic, qos=Qos(
                Policy.Reliability.Reliable(max_blocking_time=duration(milliseconds=100)),
                Policy.Durability.TransientLocal, Policy.History.KeepLast(GRAPH_READ_DEPTH)))
        except Exception as exc:  # noqa: BLE001
            _log.warning("cannot publish the ROS 2 graph on %s (%s: %s); `ros2 node list` will not show this "
                         "process's nodes, their topics work", ROS_DISCOVERY_TOPIC, type(exc).__name__, exc)
            self._writer = None

    def add_node(self, node: GraphNode) -> None:
        with self._lock:
            self._nodes[id(node)] = node
            self._publish_locked()

    def remove_node(self, node: GraphNode) -> None:
        with self._lock:
            if self._nodes.pop(id(node), None) is not None:
                self._publish_locked()

    def update(self) -> None:
        """A node's publishers or subscriptions changed: republish."""
        with self._lock:
            self._publish_locked()

    def sample(self):
        """The ParticipantEntitiesInfo as it stands (None when the graph cannot be published)."""
        with self._lock:
            return self._sample_locked()

    def _sample_locked(self):
        if self._classes is None or self._gid is None:
            return None
        classes = self._classes
        infos = []
        for node in self._nodes.values():
            namespace = node.namespace or "/"  # rcl names the root namespace "/"
            if len(namespace) > NAME_BOUND or len(node.name) > NAME_BOUND:
                _log.warning("node %s/%s: name or namespace longer than %d characters, left out of %s",
                             namespace, node.name, NAME_BOUND, ROS_DISCOVERY_TOPIC)
                continue
            readers, writers = node._graph_guids()
            infos.append(classes.node(
                node_namespace=namespace, node_name=node.name,
                reader_gid_seq=[gid_from_guid(g, self.gid_size) for g in readers],
                writer_gid_seq=[gid_from_guid(g, self.gid_size) for g in writers]))
        return classes.participant(gid=self._gid, node_entities_info_seq=infos)

    def _publish_locked(self) -> None:
        if self._writer is None:
            return
        try:
            self._writer.write(self._sample_locked())
            self.published += 1
        except Exception as exc:  # noqa: BLE001
            _log.warning("could not publish the ROS 2 graph on %s (%s: %s); the nodes keep running",
                         ROS_DISCOVERY_TOPIC, type(exc).__name__, exc)

    def endpoint_nodes(self) -> dict[bytes, tuple[str, str]]:
        """Every endpoint GUID (16 bytes) the participants on the domain have announced, to its node's
        (namespace, name): what rmw's graph cache knows (``ros2 topic info -v`` shows it). Empty when the graph
        cannot be read; logged, never raised."""
        with self._lock:
            if self._reader is not None:
                try:
                    for sample in self._reader.take(N=GRAPH_READ_DEPTH * 4):
                        self.peers[bytes(sample.gid.data)] = sample
                except Exception as exc:  # noqa: BLE001
                    _log.warning("could not read %s (%s: %s); endpoints show no node names",
                                 ROS_DISCOVERY_TOPIC, type(exc).__name__, exc)
            peers = list(self.peers.values())
        found: dict[bytes, tuple[str, str]] = {}
        for participant in peers:
            for node in participant.node_entities_info_seq:
                for gid in list(node.reader_gid_seq) + list(node.writer_gid_seq):
                    found[bytes(gid.data[:16])] = (node.node_namespace, node.node_name)
        return found

    def close(self) -> None:
        with self._lock:
            self._nodes.clear()
            self._writer = None
            self._reader = None
            self.peers.clear()


_log.addHandler(logging.NullHandler())
