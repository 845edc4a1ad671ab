"""ROS 2 names and QoS on Cyclone DDS, as rmw_cyclonedds maps them.

- topic ``/x`` in namespace ``/robot1`` is DDS topic ``rt/robot1/x``;
- type ``pkg/msg/T`` is DDS type ``pkg::msg::dds_::T_`` (the classes of :mod:`robot_hrl.msgs`);
- QoS: reliability, durability and keep-last depth map one to one, both ways;
- a DDS endpoint seen on the domain (a built-in topic sample) is a ROS endpoint when its topic
  carries the ``rt/`` prefix and its type a ROS type name (:func:`ros_endpoint`).
"""

from __future__ import annotations

from cyclonedds.qos import Policy, Qos
from cyclonedds.util import duration

from robot_hrl.msgs import MessageTypeError, ros_type_from_dds
from robot_hrl.transport.interface import Durability, EndpointInfo, QoS, Reliability, TransportError

ROS_TOPIC_PREFIX = "rt"
"""rmw_cyclonedds prefixes ROS topics with ``rt/`` (services use ``rq/``/``rr/``)."""

RELIABLE_MAX_BLOCKING_S = 0.1
"""A reliable writer blocks at most this long on a full history (rmw_cyclonedds: 100 ms)."""


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
        Policy.Reliability.Reliable(max_blocking_time=duration(seconds=RELIABLE_MAX_BLOCKING_S))
        if qos.reliability is Reliability.RELIABLE else Policy.Reliability.BestEffort,
        Policy.Durability.TransientLocal if qos.durability is Durability.TRANSIENT_LOCAL else Policy.Durability.Volatile,
        Policy.History.KeepLast(qos.depth),
    ]
    return Qos(*policies)


def qos_from_dds(dds: Qos) -> QoS:
    """Our profile of a DDS QoS (what a discovered endpoint offers or requests)."""
    depth = 1
    for policy in dds:
        if isinstance(policy, Policy.History.KeepLast):
            depth = policy.depth
    return QoS(
        Reliability.BEST_EFFORT if Policy.Reliability.BestEffort in dds else Reliability.RELIABLE,
        Durability.TRANSIENT_LOCAL if Policy.Durability.TransientLocal in dds else Durability.VOLATILE,
        depth=max(1, depth),
    )


def ros_endpoint(sample, nodes: dict[bytes, tuple[str, str]] | None = None) -> EndpointInfo | None:
    """The ROS endpoint of a DCPSPublication/DCPSSubscription sample; None for a non-ROS one. ``nodes`` maps an
    endpoint's GUID (16 bytes) to its node's (namespace, name), from ``ros_discovery_info``."""
    name, typename = sample.topic_name, sample.type_name
    if not name.startswith(ROS_TOPIC_PREFIX + "/"):
        return None
    try:
        ros_type = ros_type_from_dds(typename)
    except MessageTypeError:
        return None
    gid = sample.key.bytes
    namespace, node = (nodes or {}).get(gid, ("", ""))
    return EndpointInfo(name[len(ROS_TOPIC_PREFIX):], ros_type, qos_from_dds(sample.qos), node_name=node,
                        node_namespace=namespace, endpoint_gid=gid)
