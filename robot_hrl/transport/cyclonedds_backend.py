"""The node interface on Cyclone DDS, speaking the ROS 2 wire protocol without a ROS 2 install.

Its parts, one module each:

- :mod:`~robot_hrl.transport.cyclonedds_mapping`: names, types and QoS as rmw_cyclonedds maps them
  (``/x`` is ``rt/x``, ``pkg/msg/T`` is ``pkg::msg::dds_::T_``, XCDR1 little-endian);
- :mod:`~robot_hrl.transport.cyclonedds_graph`: the ROS 2 graph (``ros_discovery_info``), what
  ``ros2 node list`` reads;
- :mod:`~robot_hrl.transport.cyclonedds_participant`: one DomainParticipant per process and domain
  (``domain_id=`` or ``ROS_DOMAIN_ID``, 0 when unset), shared by the nodes in it;
- :mod:`~robot_hrl.transport.cyclonedds_executor`: the single-threaded executor and its timers;
- this module: publishers, subscriptions and the node.

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
from typing import Any, Callable

from cyclonedds.core import DDSException, InstanceState, ReadCondition, SampleState, ViewState
from cyclonedds.idl import IdlStruct
from cyclonedds.pub import DataWriter
from cyclonedds.sub import DataReader

from cyclonedds._clayer import ddspy_take, ddspy_write  # raw CDR in and out: decode errors stay ours

from robot_hrl.msgs import Clock, MessageTypeError, ros_type_name, seconds_from_time
from robot_hrl.transport.cyclonedds_executor import CycloneExecutor, CycloneTimer
from robot_hrl.transport.cyclonedds_graph import (  # noqa: F401 - re-exported: the backend's public names
    ENCLAVE,
    ROS_DISCOVERY_TOPIC,
    entity_guid,
    participant_user_data,
    ros_discovery_qos,
)
from robot_hrl.transport.cyclonedds_mapping import (  # noqa: F401 - re-exported
    ROS_TOPIC_PREFIX,
    EndpointInfo,
    dds_qos,
    dds_topic_name,
    qos_from_dds,
    ros_endpoint,
)
from robot_hrl.transport.cyclonedds_participant import acquire_participant, release_participant
from robot_hrl.transport.dds_config import check_domain_id, domain_id_from_env, ros_gid_size
from robot_hrl.transport.interface import (
    COMMAND_QOS,
    SENSOR_QOS,
    Node,
    Publisher,
    QoS,
    Subscription,
    TransportError,
)

_MAX_WAIT_S = 0.05
"""Longest single wait, so that ``until()`` is checked at least this often."""
_TAKE_BATCH = 64

_ANY = SampleState.Any | ViewState.Any | InstanceState.Any

_log = logging.getLogger(__name__)


def _check_msg_type(msg_type: Any) -> type:
    if not (isinstance(msg_type, type) and issubclass(msg_type, IdlStruct)):
        raise MessageTypeError(f"{msg_type!r} is not a message class; use one of robot_hrl.msgs (e.g. Odometry)")
    ros_type_name(msg_type)  # raises on a non-ROS DDS type name
    return msg_type


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
        self.last_writer_gid: bytes | None = None
        """During a callback: the DDS GUID (16 bytes) of the sample's writer (None if it could not be resolved)."""
        self._writer_gids: dict[int, bytes | None] = {}
        """Publication instance handle -> writer GUID, resolved through the reader's matched publication data."""
        self._node = node
        self._reader = DataReader(node._participant.dp, node._participant.topic(dds_topic_name(topic), msg_type),
                                  qos=dds_qos(qos))
        self.guid = entity_guid(self._reader)
        """The DDS GUID of the reader (its GID in the ROS 2 graph), None if unreadable."""
        self._condition = ReadCondition(self._reader, _ANY)
        node._executor.add_subscription(self, self._condition)

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
                self.last_writer_gid = self._writer_gid(info.publication_handle)
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

    def _writer_gid(self, handle: int) -> bytes | None:
        """The GUID of the writer with this publication handle (cached per handle; a handle is never reused
        for another writer within a participant's life)."""
        if handle in self._writer_gids:
            return self._writer_gids[handle]
        gid = None
        try:
            data = self._reader.get_matched_publication_data(handle)
            gid = data.key.bytes if data is not None else None
        except Exception as exc:  # noqa: BLE001 - an unresolvable writer is reported as unknown (None)
            _log.warning("%s: could not resolve the writer of a sample (handle %d): %s: %s", self.topic, handle,
                         type(exc).__name__, exc)
        if gid is not None:
            self._writer_gids[handle] = gid
        return gid

    def destroy(self) -> None:
        if self._reader is None:
            return
        self._node._executor.remove_subscription(self, self._condition)
        self._condition = None
        self._reader = None
        if not self._node._shutdown:
            self._node._participant.graph.update()


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
        self._participant = acquire_participant(self.domain_id, ros_gid_size(ros_distro))
        self._executor = CycloneExecutor(self._participant.dp, self)
        self._publishers: list[CyclonePublisher] = []
        self._shutdown = False
        self._spinning = False
        self._destroyed = False
        self._destroy_lock = threading.Lock()
        self._sim_time: float | None = None
        self._participant.graph.add_node(self)  # rmw announces a node before it has any endpoint
        if self.use_sim_time:
            self.create_subscription(Clock, "/clock", self._on_clock, SENSOR_QOS)  # global: see GLOBAL_TOPICS

    @property
    def _subscriptions(self) -> list["CycloneSubscription"]:
        return self._executor.subscriptions

    @property
    def _timers(self) -> list[CycloneTimer]:
        return self._executor.timers

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

    def _clock_started(self) -> bool:
        """False under sim time until the first /clock message: timers do not run yet."""
        return not self.use_sim_time or self._sim_time is not None

    def _timer_clock(self) -> float:
        if self.use_sim_time:
            return self._sim_time if self._sim_time is not None else 0.0
        return time.perf_counter()

    def _remove_timer(self, timer: CycloneTimer) -> None:
        self._executor.remove_timer(timer)

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
        self._executor.add_timer(timer)
        return timer

    # ---- graph ----------------------------------------------------------------------------------
    def get_topic_names_and_types(self) -> list[tuple[str, list[str]]]:
        """ROS topics with a publisher or subscription on the domain, as rclpy returns them:
        ``[("/odom", ["nav_msgs/msg/Odometry"]), ...]``, sorted by name."""
        self._check_alive()
        found: dict[str, set[str]] = {}
        for publications in (True, False):
            for sample in self._participant.endpoints(publications):
                info = ros_endpoint(sample)
                if info is not None:
                    found.setdefault(info.topic_name, set()).add(info.topic_type)
        return [(name, sorted(types)) for name, types in sorted(found.items())]

    def get_publishers_info_by_topic(self, topic: str) -> list[EndpointInfo]:
        """The publishers of a (fully qualified) topic on the domain, with their QoS."""
        self._check_alive()
        return self._endpoints_info(topic, True)

    def _endpoints_info(self, topic: str, publications: bool) -> list[EndpointInfo]:
        samples = [s for s in self._participant.endpoints(publications) if s.topic_name == dds_topic_name(topic)]
        nodes = self._participant.graph.endpoint_nodes() if samples else {}
        infos = [ros_endpoint(s, nodes) for s in samples]
        return [i for i in infos if i is not None and i.topic_name == topic]

    def get_subscriptions_info_by_topic(self, topic: str) -> list[EndpointInfo]:
        """The subscriptions of a (fully qualified) topic on the domain, with their QoS."""
        self._check_alive()
        return self._endpoints_info(topic, False)

    # ---- executor -----------------------------------------------------------------------------
    def _stopped(self) -> bool:
        return self._shutdown

    def spin_once(self, timeout_s: float = 0.0) -> None:
        """Wait up to ``timeout_s`` (less when a timer is due earlier), then run what is ready."""
        self._check_alive()
        self._spinning = True
        try:
            self._executor.spin_once(timeout_s, self._stopped)
        finally:
            self._spinning = False
            if self._shutdown:
                self._destroy()

    def spin(self, until: Callable[[], bool] | None = None) -> None:
        self._check_alive()
        self._spinning = True
        try:
            while not self._shutdown:
                if until is not None and until():
                    return
                self._executor.spin_once(_MAX_WAIT_S, self._stopped)
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
        self._executor.wake()
        if not self._spinning:
            self._destroy()

    def _destroy(self) -> None:
        with self._destroy_lock:
            if self._destroyed:
                return
            self._destroyed = True
            self._participant.graph.remove_node(self)
            for sub in list(self._subscriptions):
                sub.destroy()
            for pub in self._publishers:
                pub.destroy()
            self._publishers.clear()
            self._executor.close()
            release_participant(self._participant)

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
