"""The small node API every node is written against, once.

Two backends implement it: rclpy (`robot_hrl.transport.rclpy_backend`, when ROS 2 is
installed) and Cyclone DDS (`robot_hrl.transport.cyclonedds_backend`, no ROS needed, same
wire protocol). Nodes use the message classes of :mod:`robot_hrl.msgs`, whose field names
mirror the ROS 2 definitions (``msg.pose.pose.position.x``), so node code reads like rclpy.
"""

from __future__ import annotations

import abc
import enum
import logging
from dataclasses import dataclass
from typing import Any, Callable

from robot_hrl.errors import RobotHrlError


class TransportError(RobotHrlError, ValueError):
    """A topic, node name, QoS, domain id or DDS entity is invalid or could not be set up."""


class Reliability(enum.Enum):
    RELIABLE = "reliable"
    BEST_EFFORT = "best_effort"


class Durability(enum.Enum):
    VOLATILE = "volatile"
    TRANSIENT_LOCAL = "transient_local"


@dataclass(frozen=True)
class QoS:
    """A QoS profile; only what this stack needs of ROS 2's."""

    reliability: Reliability = Reliability.RELIABLE
    durability: Durability = Durability.VOLATILE
    depth: int = 10


SENSOR_QOS = QoS(Reliability.BEST_EFFORT, Durability.VOLATILE, depth=5)
"""Sensor streams (odometry, images, clock): newest sample wins (rclpy qos_profile_sensor_data)."""
COMMAND_QOS = QoS(Reliability.RELIABLE, Durability.VOLATILE, depth=10)
"""Commands and subgoals: delivered in order."""
LATCHED_QOS = QoS(Reliability.RELIABLE, Durability.TRANSIENT_LOCAL, depth=1)
"""Plans and statuses a node publishes: a late subscriber still gets the last one."""
INPUT_QOS = QoS(Reliability.RELIABLE, Durability.VOLATILE, depth=10)
"""Subscriptions to what people and tools send (``/task``, ``/estop``, ``/subgoal``): ROS 2's default
profile (reliable, volatile, keep last 10), so ``ros2 topic pub`` with its defaults is accepted. A
volatile reader accepts volatile and transient-local writers alike; a transient-local reader would
refuse every default-QoS publisher (incompatible durability)."""


@dataclass(frozen=True)
class EndpointInfo:
    """A publisher or subscription seen on the domain (cf. rclpy's TopicEndpointInfo)."""

    topic_name: str
    topic_type: str
    qos: QoS
    node_name: str = ""
    """The node that owns the endpoint, from the graph's discovery data (``ros_discovery_info``); empty while its
    participant's graph sample has not arrived (or it publishes none: a bare DDS application)."""
    node_namespace: str = ""
    endpoint_gid: bytes = b""
    """The endpoint's DDS GUID (16 bytes; the first 16 bytes of its ROS 2 GID), empty where the backend cannot say."""


GLOBAL_TOPICS = frozenset({"/clock"})
"""Topics that are never put under a node's namespace."""


class Publisher(abc.ABC):
    @abc.abstractmethod
    def publish(self, msg: Any) -> None:
        """Publish a message of the publisher's class (:mod:`robot_hrl.msgs`)."""

    @abc.abstractmethod
    def publish_raw(self, cdr: bytes) -> None:
        """Publish a message already serialized: its CDR bytes with the 4-byte encapsulation header
        (what ``msg.serialize()`` gives, what a bag holds, what ``raw=True`` subscriptions receive)."""

    @abc.abstractmethod
    def get_subscription_count(self) -> int:
        """The subscriptions matched with this publisher now (remote ones once discovery matched them)."""


class Subscription(abc.ABC):
    last_writer_gid: bytes | None = None
    """During a callback: the DDS GUID (16 bytes) of the writer of the sample being delivered; None where the
    backend cannot say (it is set before each callback; compare with :attr:`EndpointInfo.endpoint_gid`)."""

    @abc.abstractmethod
    def destroy(self) -> None: ...


class Timer(abc.ABC):
    @abc.abstractmethod
    def cancel(self) -> None: ...


class Node(abc.ABC):
    """A named node in a namespace, with publishers, subscriptions, timers, parameters, a clock
    (honouring ``use_sim_time``) and a logger."""

    def __init__(self, name: str, namespace: str = "", parameters: dict[str, Any] | None = None):
        self.name = name
        namespace = (namespace or "").strip().rstrip("/")
        self.namespace = "/" + namespace.lstrip("/") if namespace else ""
        """Absolute ("/cf1") or empty."""
        self._parameters: dict[str, Any] = dict(parameters or {})
        self._logger = logging.getLogger(f"{self.namespace}/{name}".lstrip("/"))

    # ---- topics -------------------------------------------------------------------------------
    @abc.abstractmethod
    def create_publisher(self, msg_type: type, topic: str, qos: QoS = COMMAND_QOS) -> Publisher: ...

    @abc.abstractmethod
    def create_subscription(self, msg_type: type, topic: str, callback: Callable[[Any], None],
                            qos: QoS = COMMAND_QOS, *, raw: bool = False) -> Subscription:
        """Subscribe. A sample that cannot be decoded is dropped, logged and counted; the node
        keeps running. ``raw=True`` hands the callback the CDR bytes instead (as rclpy does)."""

    # ---- time ---------------------------------------------------------------------------------
    @abc.abstractmethod
    def create_timer(self, period_s: float, callback: Callable[[], None]) -> Timer: ...

    @abc.abstractmethod
    def now(self) -> float:
        """Seconds on the node's clock: /clock when use_sim_time is set, else wall time."""

    # ---- parameters ---------------------------------------------------------------------------
    def declare_parameter(self, name: str, default: Any) -> Any:
        """Declare a parameter; the value given at start-up (launch file, CLI) wins over the default."""
        self._parameters.setdefault(name, default)
        return self._parameters[name]

    def get_parameter(self, name: str) -> Any:
        if name not in self._parameters:
            raise KeyError(f"parameter {name!r} was not declared by node {self.name!r}")
        return self._parameters[name]

    # ---- logging and life cycle -----------------------------------------------------------------
    def get_logger(self) -> logging.Logger:
        return self._logger

    def resolve_topic(self, topic: str) -> str:
        """Relative names go under the namespace; absolute names ("/x") under it too, as the
        stack keeps one namespace per robot (fleets share a DDS domain). Exception: the topics
        of :data:`GLOBAL_TOPICS` (``/clock``: one simulated world, one clock, which ROS 2's
        ``use_sim_time`` reads from ``/clock`` whatever the node's namespace)."""
        topic = "/" + topic.lstrip("/")
        if topic in GLOBAL_TOPICS:
            return topic
        return f"{self.namespace}{topic}" if self.namespace else topic

    @abc.abstractmethod
    def spin(self, until: Callable[[], bool] | None = None) -> None:
        """Process callbacks and timers until ``until()`` is true or :meth:`shutdown`."""

    def spin_once(self, timeout_s: float = 0.0) -> None:
        """Wait at most ``timeout_s`` for work, then run what is ready (callbacks, due timers)."""
        raise NotImplementedError(f"{type(self).__name__} does not implement spin_once")

    @abc.abstractmethod
    def shutdown(self) -> None: ...
