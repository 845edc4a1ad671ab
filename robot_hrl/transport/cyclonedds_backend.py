"""The node interface on Cyclone DDS, speaking the ROS 2 wire protocol without a ROS 2 install.

Mapping (as rmw_cyclonedds does it):

- topic ``/x`` in namespace ``/robot1`` is DDS topic ``rt/robot1/x``;
- type ``pkg/msg/T`` is DDS type ``pkg::msg::dds_::T_`` (the classes of :mod:`robot_hrl.msgs`),
  XCDR1 little-endian, the CDR bytes ROS 2 sends;
- QoS: reliability, durability and keep-last depth map one to one;
- domain id: ``domain_id=`` or ``ROS_DOMAIN_ID`` (0 when unset); one DomainParticipant per
  process and domain, shared by the nodes in it;
- the ROS 2 graph: the participant carries USER_DATA ``enclave=/;`` and publishes an
  ``rmw_dds_common/msg/ParticipantEntitiesInfo`` on ``ros_discovery_info`` (its GID and, per
  node, namespace, name and the GIDs of the node's readers and writers), republished whenever a
  node, publisher or subscription comes or goes; this is what ``ros2 node list`` reads. The
  GID layout (16 or 24 bytes) follows ``ROS_DISTRO`` or ``CycloneNode(ros_distro=...)``
  (:func:`robot_hrl.transport.dds_config.ros_gid_size`). A failure there is logged, never
  raised: the node works without it.

:meth:`CycloneNode.spin` is a single-threaded executor: it waits on a WaitSet (one read
condition per subscription) until the next timer deadline, runs the callbacks of the samples
that arrived, and fires due timers. Timer deadlines are absolute (``start + k * period`` on
``time.perf_counter``), so a 100-500 Hz loop does not drift; a late tick is run once and the
missed ones are skipped (counted in :attr:`CycloneTimer.overruns`), as rclpy does.

A sample that cannot be decoded (wrong type on the topic, truncated bytes) is dropped, logged
and counted (:attr:`CycloneSubscription.dropped`, :attr:`CycloneNode.dropped_samples`); the node
keeps running.
"""

from __future__ import annotations

import logging
import math
import threading
import time
import uuid
from dataclasses import dataclass
from typing import Any, Callable

from cyclonedds.core import DDSException, GuardCondition, InstanceState, ReadCondition, SampleState, ViewState, WaitSet
from cyclonedds.domain import DomainParticipant
from cyclonedds.idl import IdlStruct
from cyclonedds.pub import DataWriter
from cyclonedds.qos import Policy, Qos
from cyclonedds.sub import DataReader
from cyclonedds.topic import Topic
from cyclonedds.util import duration

from cyclonedds._clayer import ddspy_take, ddspy_write  # raw CDR in and out: decode errors stay ours

from robot_hrl.msgs import Clock, MessageTypeError, ros_type_from_dds, ros_type_name, seconds_from_time
from robot_hrl.msgs.rmw_dds_common import NAME_BOUND, entities_info_classes, gid_from_guid
from robot_hrl.transport.dds_config import check_domain_id, domain_id_from_env, ros_gid_size
from robot_hrl.transport.interface import (
    COMMAND_QOS,
    SENSOR_QOS,
    Durability,
    Node,
    Publisher,
    QoS,
    Reliability,
    Subscription,
    Timer,
    TransportError,
)

ROS_TOPIC_PREFIX = "rt"
"""rmw_cyclonedds prefixes ROS topics with ``rt/`` (services use ``rq/``/``rr/``)."""

_MAX_WAIT_S = 0.05
"""Longest single wait, so that ``until()`` is checked at least this often."""
_TAKE_BATCH = 64

_ANY = SampleState.Any | ViewState.Any | InstanceState.Any

ROS_DISCOVERY_TOPIC = "ros_discovery_info"
"""The DDS topic of the ROS 2 graph (no ``rt/`` prefix: rmw creates it outside the ROS names)."""
ENCLAVE = "/"
"""The security enclave rcl gives a context by default; rmw puts it in the participant's USER_DATA."""

_log = logging.getLogger(__name__)


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


def dds_topic_name(ros_topic: str) -> str:
    """``/robot1/odom`` -> ``rt/robot1/odom``."""
    if not ros_topic.startswith("/") or ros_topic == "/" or "//" in ros_topic or ros_topic.endswith("/"):
        raise TransportError(f"{ros_topic!r} is not a fully qualified ROS topic name like '/ns/odom'")
    for part in ros_topic[1:].split("/"):
        if not (part[0].isalpha() or part[0] == "_") or not all(c.isalnum() or c == "_" for c in part):
            raise TransportError(f"topic name {ros_topic!r}: token {part!r} must start with a letter or '_' and "
                                 "contain only letters, digits and '_' (ROS 2 naming rules)")
    return ROS_TOPIC_PREFIX + ros_topic


def dds_qos(qos: QoS) -> Qos:
    """The Cyclone DDS QoS of one of our profiles (as rmw_cyclonedds maps a ROS 2 profile)."""
    if not isinstance(qos, QoS):
        raise TransportError(f"expected a robot_hrl.transport.QoS profile, got {qos!r}")
    if qos.depth < 1:
        raise TransportError(f"QoS depth must be at least 1, got {qos.depth}")
    policies = [
        Policy.Reliability.Reliable(max_blocking_time=duration(milliseconds=100))
        if qos.reliability is Reliability.RELIABLE else Policy.Reliability.BestEffort,
        Policy.Durability.TransientLocal if qos.durability is Durability.TRANSIENT_LOCAL else Policy.Durability.Volatile,
        Policy.History.KeepLast(qos.depth),
    ]
    return Qos(*policies)


# ---- one DomainParticipant per process and domain ---------------------------------------------------
def _create_domain_participant(domain_id: int) -> DomainParticipant:
    """A DomainParticipant with rmw's USER_DATA; without it if the QoS is refused (the graph is
    a courtesy to ROS 2 tools, the node must still run)."""
    try:
        return DomainParticipant(domain_id, qos=Qos(Policy.Userdata(participant_user_data())))
    except DDSException as exc:
        _log.warning("DDS participant with USER_DATA %r refused (%s); joining domain %d without it",
                     participant_user_data(), exc, domain_id)
    return DomainParticipant(domain_id)


class _RosGraph:
    """This participant's ``ParticipantEntitiesInfo`` on ``ros_discovery_info``, kept up to date as
    rmw_cyclonedds does: one sample per participant, republished whole on every change.

    Every method logs and swallows its errors: ``ros2 node list`` is a nicety, the node's own
    topics must work without it."""

    def __init__(self, dp: DomainParticipant, gid_size: int):
        self.gid_size = gid_size
        self.published = 0
        """Samples written (one per change)."""
        self._nodes: dict[int, "CycloneNode"] = {}  # id(node) -> node, in creation order
        self._lock = threading.Lock()
        self._writer: DataWriter | None = None
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
        except Exception as exc:  # noqa: BLE001
            _log.warning("cannot publish the ROS 2 graph on %s (%s: %s); `ros2 node list` will not show this "
                         "process's nodes, their topics work", ROS_DISCOVERY_TOPIC, type(exc).__name__, exc)
            self._writer = None

    def add_node(self, node: "CycloneNode") -> None:
        with self._lock:
            self._nodes[id(node)] = node
            self._publish_locked()

    def remove_node(self, node: "CycloneNode") -> None:
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

    def close(self) -> None:
        with self._lock:
            self._nodes.clear()
            self._writer = None


class _Participant:
    def __init__(self, domain_id: int, gid_size: int):
        self.domain_id = domain_id
        try:
            self.dp = _create_domain_participant(domain_id)
        except DDSException as exc:
            raise TransportError(f"could not join DDS domain {domain_id}: {exc}. Check CYCLONEDDS_URI "
                                 "(robot_hrl.transport.dds_config.loopback_config() is a known-good profile)") from exc
        self.topics: dict[str, Topic] = {}
        self.users = 0
        self._graph_readers = None
        self.graph = _RosGraph(self.dp, gid_size)

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


_PARTICIPANTS: dict[int, _Participant] = {}
_PARTICIPANTS_LOCK = threading.Lock()


def _acquire_participant(domain_id: int, gid_size: int) -> _Participant:
    with _PARTICIPANTS_LOCK:
        p = _PARTICIPANTS.get(domain_id)
        if p is None:
            p = _PARTICIPANTS[domain_id] = _Participant(domain_id, gid_size)
        elif p.graph.gid_size != gid_size:
            # one participant, one ros_discovery_info sample: the first node chose its layout
            _log.warning("domain %d already publishes %d-byte ROS 2 graph GIDs in this process; "
                         "a node asking for %d-byte ones shares them", domain_id, p.graph.gid_size, gid_size)
        p.users += 1
        return p


def _release_participant(p: _Participant) -> None:
    with _PARTICIPANTS_LOCK:
        p.users -= 1
        if p.users <= 0 and _PARTICIPANTS.get(p.domain_id) is p:
            del _PARTICIPANTS[p.domain_id]
            p.graph.close()
            p.topics.clear()
            p._graph_readers = None
            p.dp = None  # the Python wrapper deletes the DDS entity and its children


def _check_msg_type(msg_type: Any) -> type:
    if not (isinstance(msg_type, type) and issubclass(msg_type, IdlStruct)):
        raise MessageTypeError(f"{msg_type!r} is not a message class; use one of robot_hrl.msgs (e.g. Odometry)")
    ros_type_name(msg_type)  # raises on a non-ROS DDS type name
    return msg_type


@dataclass(frozen=True)
class EndpointInfo:
    """A publisher or subscription seen on the domain (cf. rclpy's TopicEndpointInfo)."""

    topic_name: str
    topic_type: str
    qos: QoS


def _our_qos(dds: Qos) -> QoS:
    depth = 1
    for policy in dds:
        if isinstance(policy, Policy.History.KeepLast):
            depth = policy.depth
    return QoS(
        Reliability.BEST_EFFORT if Policy.Reliability.BestEffort in dds else Reliability.RELIABLE,
        Durability.TRANSIENT_LOCAL if Policy.Durability.TransientLocal in dds else Durability.VOLATILE,
        depth=max(1, depth),
    )


def _ros_endpoint(sample) -> EndpointInfo | None:
    name, typename = sample.topic_name, sample.type_name
    if not name.startswith(ROS_TOPIC_PREFIX + "/"):
        return None
    try:
        ros_type = ros_type_from_dds(typename)
    except MessageTypeError:
        return None
    return EndpointInfo(name[len(ROS_TOPIC_PREFIX):], ros_type, _our_qos(sample.qos))


# ---- entities -----------------------------------------------------------------------------------
class CyclonePublisher(Publisher):
    def __init__(self, node: "CycloneNode", msg_type: type, topic: str, qos: QoS):
        self.msg_type = msg_type
        self.topic = topic
        self.qos = qos
        self._writer = DataWriter(node._participant.dp, node._participant.topic(dds_topic_name(topic), msg_type),
                                  qos=dds_qos(qos))
        self.guid = entity_guid(self._writer)
        """The DDS GUID of the writer (its GID in the ROS 2 graph), None if unreadable."""

    def publish(self, msg: Any) -> None:
        if type(msg) is not self.msg_type:
            raise MessageTypeError(f"publisher on {self.topic} carries {ros_type_name(self.msg_type)}, "
                                   f"got {type(msg).__module__}.{type(msg).__name__}")
        writer = self._writer
        if writer is None:
            raise TransportError(f"publisher on {self.topic} was destroyed (its node was shut down)")
        try:
            writer.write(msg)
        except DDSException as exc:
            raise TransportError(f"could not publish on {self.topic}: {exc}") from exc
        except Exception as exc:  # noqa: BLE001
            # cyclonedds raises assorted exceptions (struct.error, AssertionError) for values
            # that do not fit the field types; say which message and topic.
            raise MessageTypeError(f"cannot serialize {type(msg).__name__} for {self.topic}: "
                                   f"{type(exc).__name__}: {exc} (a field has a value outside its ROS type?)") from exc

    def publish_raw(self, cdr: bytes) -> None:
        """Publish already serialized CDR bytes (with their 4-byte encapsulation header), e.g. from a bag."""
        if self._writer is None:
            raise TransportError(f"publisher on {self.topic} was destroyed (its node was shut down)")
        data = bytes(cdr)
        data = data.ljust((len(data) + 3) & ~3, b"\0")
        ret = ddspy_write(self._writer._ref, data)
        if ret < 0:
            raise TransportError(f"could not publish raw bytes on {self.topic}: DDS error {ret}")

    def get_subscription_count(self) -> int:
        return self._writer.get_publication_matched_status().current_count

    def destroy(self) -> None:
        self._writer = None


class CycloneSubscription(Subscription):
    def __init__(self, node: "CycloneNode", msg_type: type, topic: str, callback: Callable[[Any], None],
                 qos: QoS, raw: bool):
        self.msg_type = msg_type
        self.topic = topic
        self.callback = callback
        self.qos = qos
        self.raw = raw
        self.received = 0
        """Samples delivered to the callback."""
        self.dropped = 0
        """Samples that could not be decoded, dropped."""
        self._node = node
        self._reader = DataReader(node._participant.dp, node._participant.topic(dds_topic_name(topic), msg_type),
                                  qos=dds_qos(qos))
        self.guid = entity_guid(self._reader)
        """The DDS GUID of the reader (its GID in the ROS 2 graph), None if unreadable."""
        self._condition = ReadCondition(self._reader, _ANY)
        node._waitset.attach(self._condition)

    def get_publisher_count(self) -> int:
        return self._reader.get_subscription_matched_status().current_count

    def _drain(self) -> None:
        while self._reader is not None:
            batch = ddspy_take(self._reader._ref, _ANY, _TAKE_BATCH)
            if isinstance(batch, int):
                raise TransportError(f"could not take samples on {self.topic}: DDS error {batch}")
            for data, info in batch:
                if not info.valid_data:
                    continue  # instance state change (writer gone), no data
                if self.raw:
                    self.received += 1
                    self.callback(data)
                    if self._reader is None:
                        return
                    continue
                try:
                    msg = self.msg_type.deserialize(data)
                except Exception as exc:  # noqa: BLE001 - any decode failure: drop, log, count
                    self.dropped += 1
                    self._node._on_dropped(self, data, exc)
                    continue
                self.received += 1
                self.callback(msg)
                if self._reader is None:  # the callback destroyed this subscription
                    return
            if len(batch) < _TAKE_BATCH:
                return

    def destroy(self) -> None:
        if self._reader is None:
            return
        try:
            self._node._waitset.detach(self._condition)
        except DDSException:
            pass
        self._node._subscriptions.remove(self)
        self._condition = None
        self._reader = None
        if not self._node._shutdown:
            self._node._participant.graph.update()


class CycloneTimer(Timer):
    def __init__(self, node: "CycloneNode", period_s: float, callback: Callable[[], None]):
        self.period_s = float(period_s)
        self.callback = callback
        self.calls = 0
        self.overruns = 0
        """Ticks skipped because a previous one ran late."""
        self.last_deadline: float | None = None
        """When the running (or last) callback was due, on the timer clock (``time.perf_counter``, or
        sim time): ``time.perf_counter() - timer.last_deadline`` is its lateness."""
        self._node = node
        self._next: float | None = None
        self.cancelled = False
        self.reset()

    def cancel(self) -> None:
        self.cancelled = True
        if self in self._node._timers:
            self._node._timers.remove(self)

    def reset(self) -> None:
        """Restart the period from now (from the first /clock message under sim time)."""
        node = self._node
        self._next = None if (node.use_sim_time and node._sim_time is None) else node._timer_clock() + self.period_s

    def _due(self, now: float) -> bool:
        if self._next is None or self._next - now > 2 * self.period_s:  # first /clock, or sim time went back
            self._next = now + self.period_s
            return False
        return now >= self._next

    def _advance(self, now: float) -> None:
        self._next += self.period_s
        if self._next <= now:  # late by more than a period: skip the missed ticks, keep the phase
            missed = math.floor((now - self._next) / self.period_s) + 1
            self.overruns += missed
            self._next += missed * self.period_s


# ---- the node -----------------------------------------------------------------------------------
class CycloneNode(Node):
    """A node on Cyclone DDS. Parameters come from the constructor's dict; ``use_sim_time``
    (bool) makes :meth:`now` and the timers follow ``/clock``."""

    def __init__(self, name: str, namespace: str = "", parameters: dict[str, Any] | None = None,
                 domain_id: int | None = None, ros_distro: str | None = None):
        """``ros_distro`` picks the layout of the ROS 2 graph GIDs this process publishes
        (``"humble"``: 24 bytes; ``"jazzy"``: 16); by default ``ROS_DISTRO``, else 16."""
        if not name or not all(c.isalnum() or c == "_" for c in name) or name[0].isdigit():
            raise TransportError(f"node name {name!r} must be letters, digits and '_' and not start with a digit")
        super().__init__(name, namespace, parameters)  # makes the namespace absolute
        if self.namespace:
            dds_topic_name(self.namespace + "/x")  # validates the namespace
        self.domain_id = check_domain_id(domain_id) if domain_id is not None else domain_id_from_env()
        use_sim_time = self._parameters.get("use_sim_time", False)
        if not isinstance(use_sim_time, bool):
            raise TransportError(f"parameter use_sim_time must be true or false, got {use_sim_time!r}")
        self.use_sim_time = use_sim_time
        self.dropped_samples = 0
        """Samples dropped on all subscriptions because they could not be decoded."""
        self._participant = _acquire_participant(self.domain_id, ros_gid_size(ros_distro))
        self._waitset = WaitSet(self._participant.dp)
        self._guard = GuardCondition(self._participant.dp)
        self._waitset.attach(self._guard)
        self._subscriptions: list[CycloneSubscription] = []
        self._publishers: list[CyclonePublisher] = []
        self._timers: list[CycloneTimer] = []
        self._shutdown = False
        self._spinning = False
        self._destroy_lock = threading.Lock()
        self._sim_time: float | None = None
        self._participant.graph.add_node(self)  # rmw announces a node before it has any endpoint
        if self.use_sim_time:
            self.create_subscription(Clock, "/clock", self._on_clock, SENSOR_QOS)  # global: see GLOBAL_TOPICS

    # ---- topics -------------------------------------------------------------------------------
    def resolve_topic(self, topic: str) -> str:
        if not isinstance(topic, str) or not topic.strip("/"):
            raise TransportError(f"topic name must be a non-empty string like 'odom' or '/odom', got {topic!r}")
        return super().resolve_topic(topic)

    def create_publisher(self, msg_type: type, topic: str, qos: QoS = COMMAND_QOS) -> CyclonePublisher:
        self._check_alive()
        pub = CyclonePublisher(self, _check_msg_type(msg_type), self.resolve_topic(topic), qos)
        self._publishers.append(pub)
        self._participant.graph.update()
        return pub

    def create_subscription(self, msg_type: type, topic: str, callback: Callable[[Any], None],
                            qos: QoS = COMMAND_QOS, *, raw: bool = False) -> CycloneSubscription:
        """Subscribe; ``raw=True`` hands the callback the sample's CDR bytes (with the 4-byte
        encapsulation header) instead of a decoded message, as rclpy's ``raw=True`` does."""
        self._check_alive()
        if not callable(callback):
            raise TransportError(f"subscription callback for {topic!r} is not callable: {callback!r}")
        sub = CycloneSubscription(self, _check_msg_type(msg_type), self.resolve_topic(topic), callback, qos, raw)
        self._subscriptions.append(sub)
        self._participant.graph.update()
        return sub

    def _graph_guids(self) -> tuple[list[uuid.UUID], list[uuid.UUID]]:
        """The GUIDs of this node's live DDS readers and writers, for ros_discovery_info."""
        readers = [s.guid for s in self._subscriptions if s._reader is not None and s.guid is not None]
        writers = [p.guid for p in self._publishers if p._writer is not None and p.guid is not None]
        return readers, writers

    def _on_dropped(self, sub: CycloneSubscription, data: bytes, exc: Exception) -> None:
        self.dropped_samples += 1
        if sub.dropped <= 3 or sub.dropped % 100 == 0:
            self._logger.warning("dropped an undecodable %s sample on %s (%d bytes, %s: %s); %d dropped so far",
                                 ros_type_name(sub.msg_type), sub.topic, len(data), type(exc).__name__, exc,
                                 sub.dropped)

    # ---- time ---------------------------------------------------------------------------------
    def _on_clock(self, msg: Clock) -> None:
        self._sim_time = seconds_from_time(msg.clock)

    def _timer_clock(self) -> float:
        if self.use_sim_time:
            return self._sim_time if self._sim_time is not None else 0.0
        return time.perf_counter()

    def now(self) -> float:
        if self.use_sim_time:
            return self._sim_time if self._sim_time is not None else 0.0
        return time.time()

    def create_timer(self, period_s: float, callback: Callable[[], None]) -> CycloneTimer:
        self._check_alive()
        if isinstance(period_s, bool) or not isinstance(period_s, (int, float)) or not math.isfinite(period_s) \
                or period_s <= 0:
            raise TransportError(f"timer period must be a positive number of seconds, got {period_s!r}")
        if not callable(callback):
            raise TransportError(f"timer callback is not callable: {callback!r}")
        timer = CycloneTimer(self, period_s, callback)
        self._timers.append(timer)
        return timer

    # ---- graph ----------------------------------------------------------------------------------
    def get_topic_names_and_types(self) -> list[tuple[str, list[str]]]:
        """ROS topics with a publisher or subscription on the domain, as rclpy returns them:
        ``[("/odom", ["nav_msgs/msg/Odometry"]), ...]``, sorted by name."""
        self._check_alive()
        found: dict[str, set[str]] = {}
        for publications in (True, False):
            for sample in self._participant.endpoints(publications):
                info = _ros_endpoint(sample)
                if info is not None:
                    found.setdefault(info.topic_name, set()).add(info.topic_type)
        return [(name, sorted(types)) for name, types in sorted(found.items())]

    def get_publishers_info_by_topic(self, topic: str) -> list[EndpointInfo]:
        """The publishers of a (fully qualified) topic on the domain, with their QoS."""
        self._check_alive()
        infos = [_ros_endpoint(s) for s in self._participant.endpoints(True)]
        return [i for i in infos if i is not None and i.topic_name == topic]

    def get_subscriptions_info_by_topic(self, topic: str) -> list[EndpointInfo]:
        """The subscriptions of a (fully qualified) topic on the domain, with their QoS."""
        self._check_alive()
        infos = [_ros_endpoint(s) for s in self._participant.endpoints(False)]
        return [i for i in infos if i is not None and i.topic_name == topic]

    # ---- executor -----------------------------------------------------------------------------
    def spin_once(self, timeout_s: float = 0.0) -> None:
        """Wait up to ``timeout_s`` (less when a timer is due earlier), then run what is ready."""
        self._check_alive()
        self._spinning = True
        try:
            self._spin_once(timeout_s)
        finally:
            self._spinning = False
            if self._shutdown:
                self._destroy()

    def _spin_once(self, timeout_s: float) -> None:
        timeout = max(0.0, float(timeout_s))
        if self._timers and not self.use_sim_time:
            now = time.perf_counter()
            nearest = min((t._next for t in self._timers if t._next is not None), default=now + timeout)
            timeout = min(timeout, max(0.0, nearest - now))
        if timeout > 0:
            self._waitset.wait(int(timeout * 1e9))
        if self._shutdown:
            return
        for sub in list(self._subscriptions):
            sub._drain()
        self._fire_timers()

    def _fire_timers(self) -> None:
        if not self._timers:
            return
        if self.use_sim_time and self._sim_time is None:
            return  # no /clock yet: time stands still, as in ROS 2
        now = self._timer_clock()
        for timer in list(self._timers):
            if timer.cancelled or not timer._due(now):
                continue
            timer.last_deadline = timer._next
            timer._advance(now)
            timer.calls += 1
            timer.callback()
            if self._shutdown:
                return

    def spin(self, until: Callable[[], bool] | None = None) -> None:
        self._check_alive()
        self._spinning = True
        try:
            while not self._shutdown:
                if until is not None and until():
                    return
                self._spin_once(_MAX_WAIT_S)
        finally:
            self._spinning = False
            if self._shutdown:
                self._destroy()

    def shutdown(self) -> None:
        """Stop spinning and release the DDS entities. From another thread (or a callback) it
        wakes the spinning thread, which releases them when it returns."""
        if self._shutdown:
            return
        self._shutdown = True
        try:
            self._guard.set(True)
        except DDSException:
            pass
        if not self._spinning:
            self._destroy()

    def _destroy(self) -> None:
        with self._destroy_lock:
            if self._waitset is None:
                return
            self._destroy_entities()

    def _destroy_entities(self) -> None:
        self._participant.graph.remove_node(self)
        for sub in list(self._subscriptions):
            sub.destroy()
        for pub in self._publishers:
            pub.destroy()
        self._timers.clear()
        self._publishers.clear()
        self._waitset = None
        self._guard = None
        _release_participant(self._participant)

    def _check_alive(self) -> None:
        if self._shutdown:
            raise TransportError(f"node {self.name!r} was shut down")

    @property
    def is_shutdown(self) -> bool:
        return self._shutdown

    def __enter__(self) -> "CycloneNode":
        return self

    def __exit__(self, *exc) -> None:
        self.shutdown()


_log.addHandler(logging.NullHandler())
