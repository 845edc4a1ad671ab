"""Record a run as a rosbag2 bag in MCAP storage: Foxglove, ``ros2 bag`` and rosbags open it.

Samples are written as they arrive on the wire (raw CDR, no decode and re-encode), with the
ROS 2 type name and message definition of each topic and the receive time as the bag time,
as ``ros2 bag record`` does.

    node = create_node("recorder")
    with TopicRecorder(node, "runs/demo_bag", {"/odom": Odometry, "/plan": (Path, LATCHED_QOS)}) as rec:
        node.spin(until=done)

``topics=None`` records every topic of a known type that appears on the domain (checked once a
second), with a QoS that matches its publishers.

From the command line (``python -m robot_hrl.recording --help``)::

    python -m robot_hrl.recording runs/demo_bag --all
"""

from __future__ import annotations

import argparse
import logging
import signal
import threading
import time
from pathlib import Path
from typing import Any, Callable, Mapping

from rosbags.interfaces import Qos as BagQos
from rosbags.interfaces import QosDurability, QosHistory, QosLiveliness, QosReliability, QosTime
from rosbags.rosbag2 import StoragePlugin, Writer
from rosbags.typesys import Stores, get_typestore

from robot_hrl.errors import ConfigError, RobotHrlError
from robot_hrl.msgs import MessageTypeError, message_class, ros_type_name
from robot_hrl.transport.interface import GLOBAL_TOPICS, Durability, Node, QoS, Reliability

BAG_VERSION = 8
"""rosbag2 metadata version written (rosbags writes 8 or 9; 8 is read by more ROS 2 releases)."""
RECORD_QOS = QoS(Reliability.BEST_EFFORT, Durability.VOLATILE, depth=100)
"""Default subscription QoS: a best-effort reader hears reliable and best-effort publishers."""

_TYPESTORE = None
_log = logging.getLogger(__name__)


class RecordingError(RobotHrlError):
    """A bag could not be created or written."""


def _typestore():
    global _TYPESTORE
    if _TYPESTORE is None:
        _TYPESTORE = get_typestore(Stores.ROS2_HUMBLE)
    return _TYPESTORE


def typestore_for_class(cls: type):
    """The rosbags typestore whose definition of ``cls``'s type has ``cls``'s layout: Jazzy's for the Range with
    ``variance`` (robot_hrl.msgs.RangeJazzy), else Humble's (every other message of the stack has one layout)."""
    from robot_hrl.msgs import RangeJazzy

    return get_typestore(Stores.ROS2_JAZZY) if cls is RangeJazzy else _typestore()


def _resolve_class(msg_type) -> type:
    """A message class from a class or a ROS 2 type name; sensor_msgs/msg/Range (two layouts, in no registry) is
    the layout of this ROS 2 distribution (``ROS_DISTRO``, robot_hrl.msgs.range_class_for_distro)."""
    if not isinstance(msg_type, str):
        return msg_type
    if msg_type.replace("/msg/", "/") == "sensor_msgs/Range":
        import os

        from robot_hrl.msgs import range_class_for_distro

        return range_class_for_distro(os.environ.get("ROS_DISTRO"))
    return message_class(msg_type)


def _bag_qos(qos: QoS) -> BagQos:
    zero = QosTime(sec=0, nsec=0)
    return BagQos(
        history=QosHistory.KEEP_LAST,
        depth=qos.depth,
        reliability=QosReliability.RELIABLE if qos.reliability is Reliability.RELIABLE else QosReliability.BEST_EFFORT,
        durability=QosDurability.TRANSIENT_LOCAL if qos.durability is Durability.TRANSIENT_LOCAL else QosDurability.VOLATILE,
        deadline=zero,
        lifespan=zero,
        liveliness=QosLiveliness.AUTOMATIC,
        liveliness_lease_duration=zero,
        avoid_ros_namespace_conventions=False,
    )


class BagWriter:
    """A rosbag2 MCAP bag of raw CDR samples. Thread-safe; one connection per topic."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        if self.path.exists():
            raise RecordingError(f"{self.path} exists already; choose a new bag directory (a bag is never overwritten)")
        if not self.path.parent.is_dir():
            raise RecordingError(f"cannot create bag {self.path}: folder {self.path.parent} does not exist")
        self._writer = Writer(self.path, version=BAG_VERSION, storage_plugin=StoragePlugin.MCAP)
        self._writer.open()
        self._connections: dict[str, Any] = {}
        self._types: dict[str, str] = {}
        self._lock = threading.Lock()
        self.counts: dict[str, int] = {}
        """Messages written, by topic."""
        self.closed = False

    def add_topic(self, topic: str, ros_type: str, qos: QoS = RECORD_QOS, typestore=None) -> None:
        """``typestore``: where the type's definition comes from (default: Humble's; a Jazzy-layout
        sensor_msgs/Range needs Jazzy's, see :func:`typestore_for_class`)."""
        store = typestore or _typestore()
        with self._lock:
            self._check_open()
            if topic in self._connections:
                if self._types[topic] != ros_type:
                    raise RecordingError(f"topic {topic} is in the bag with type {self._types[topic]}, not {ros_type}")
                return
            if ros_type not in store.types:
                raise MessageTypeError(f"type {ros_type} of {topic} has no ROS 2 definition in rosbags' typestore")
            self._connections[topic] = self._writer.add_connection(
                topic, ros_type, typestore=store, offered_qos_profiles=[_bag_qos(qos)])
            self._types[topic] = ros_type
            self.counts[topic] = 0

    def write(self, topic: str, cdr: bytes, timestamp_ns: int | None = None) -> None:
        """Write one sample's CDR bytes (with their 4-byte encapsulation header)."""
        with self._lock:
            if self.closed:
                return  # a late sample after close: nothing to do
            conn = self._connections.get(topic)
            if conn is None:
                raise RecordingError(f"topic {topic} was not added to the bag; call add_topic first")
            self._writer.write(conn, time.time_ns() if timestamp_ns is None else int(timestamp_ns), bytes(cdr))
            self.counts[topic] += 1

    def close(self) -> None:
        with self._lock:
            if not self.closed:
                self.closed = True
                self._writer.close()

    def _check_open(self) -> None:
        if self.closed:
            raise RecordingError(f"bag {self.path} is closed")

    def __enter__(self) -> "BagWriter":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


TopicSpec = Mapping[str, "type | str | tuple[type | str, QoS]"]


class TopicRecorder:
    """Subscribes a node to topics (raw) and writes what arrives to a :class:`BagWriter`.

    ``topics`` maps a topic name (resolved in the node's namespace) to a message class or ROS
    type name, or to ``(type, QoS)``; ``None`` discovers topics on the domain (needs the node's
    ``get_topic_names_and_types``) once per ``discover_period_s``."""

    def __init__(self, node: Node, path: str | Path, topics: TopicSpec | None = None,
                 discover_period_s: float = 1.0, exclude: tuple[str, ...] = ()):
        self.node = node
        self.bag = BagWriter(path)
        self.exclude = set(exclude)
        self._subs: dict[str, Any] = {}
        self._timer = None
        try:
            if topics is None:
                if not hasattr(node, "get_topic_names_and_types"):
                    raise ConfigError(f"{type(node).__name__} cannot discover topics; pass topics= explicitly")
                self.discover()
                self._timer = node.create_timer(discover_period_s, self.discover)
            else:
                for topic, spec in topics.items():
                    msg_type, qos = spec if isinstance(spec, tuple) else (spec, RECORD_QOS)
                    self.add(topic, msg_type, qos)
        except BaseException:
            self.bag.close()
            raise

    def add(self, topic: str, msg_type: type | str, qos: QoS = RECORD_QOS) -> None:
        cls = _resolve_class(msg_type)
        resolved = self.node.resolve_topic(topic)
        if resolved in self._subs:
            return
        self.bag.add_topic(resolved, ros_type_name(cls), qos, typestore_for_class(cls))
        self._subs[resolved] = self.node.create_subscription(cls, topic, self._writer_for(resolved), qos, raw=True)

    def _writer_for(self, topic: str) -> Callable[[bytes], None]:
        write = self.bag.write
        return lambda cdr: write(topic, cdr)

    def discover(self) -> None:
        """Subscribe to topics of known types that appeared since the last call."""
        for topic, types in self.node.get_topic_names_and_types():
            if topic in self._subs or topic in self.exclude or len(types) != 1:
                continue
            try:
                cls = message_class(types[0])
            except MessageTypeError:
                continue  # a type the stack does not know: not recorded
            pubs = self.node.get_publishers_info_by_topic(topic)
            if not pubs:
                continue
            reliable = all(p.qos.reliability is Reliability.RELIABLE for p in pubs)
            latched = all(p.qos.durability is Durability.TRANSIENT_LOCAL for p in pubs)
            qos = QoS(Reliability.RELIABLE if reliable else Reliability.BEST_EFFORT,
                      Durability.TRANSIENT_LOCAL if latched else Durability.VOLATILE, depth=RECORD_QOS.depth)
            self._subscribe_absolute(topic, cls, qos)

    def _subscribe_absolute(self, topic: str, cls: type, qos: QoS) -> None:
        # discovered names are fully qualified; a namespaced node would prefix them again
        ns = self.node.namespace
        if topic in GLOBAL_TOPICS or not ns:
            relative = topic
        elif topic.startswith(ns + "/"):
            relative = topic[len(ns):]
        else:
            return  # another robot's topic
        self.bag.add_topic(topic, ros_type_name(cls), qos)
        self._subs[topic] = self.node.create_subscription(cls, relative, self._writer_for(topic), qos, raw=True)
        _log.info("recording %s (%s)", topic, ros_type_name(cls))

    @property
    def topics(self) -> list[str]:
        return sorted(self._subs)

    def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        for sub in self._subs.values():
            try:
                sub.destroy()
            except Exception:  # noqa: BLE001 - the node may be shut down already
                pass
        self._subs.clear()
        self.bag.close()

    def __enter__(self) -> "TopicRecorder":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m robot_hrl.recording",
        description="Record ROS 2 topics (robot_hrl's message types) to a rosbag2 MCAP bag, "
                    "over Cyclone DDS or rclpy, until Ctrl-C.")
    parser.add_argument("bag", help="bag directory to create (must not exist)")
    parser.add_argument("--all", action="store_true", help="record every topic of a known type on the domain")
    parser.add_argument("--topic", action="append", default=[], metavar="NAME:TYPE",
                        help="a topic and its type, e.g. /odom:nav_msgs/msg/Odometry (repeatable)")
    parser.add_argument("--domain-id", type=int, default=None, help="DDS domain (default: ROS_DOMAIN_ID or 0)")
    parser.add_argument("--backend", default="auto", choices=["auto", "rclpy", "cyclonedds"])
    args = parser.parse_args(argv)
    if not args.all and not args.topic:
        parser.error("give --all or at least one --topic NAME:TYPE")
    topics = None
    if not args.all:
        topics = {}
        for item in args.topic:
            name, sep, typ = item.partition(":")
            if not sep or not name or not typ:
                parser.error(f"--topic {item!r}: expected NAME:TYPE, e.g. /odom:nav_msgs/msg/Odometry")
            topics[name] = typ
    from robot_hrl.transport import create_node

    logging.basicConfig(level=logging.INFO, format="%(message)s")
    node = create_node("recorder", backend=args.backend, domain_id=args.domain_id)
    stop = threading.Event()
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    with TopicRecorder(node, args.bag, topics) as rec:
        node.spin(until=stop.is_set)
        counts = dict(rec.bag.counts)
    node.shutdown()
    for topic, n in sorted(counts.items()):
        print(f"{topic}: {n} messages")
    print(f"wrote {args.bag}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
