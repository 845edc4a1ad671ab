"""Node interface and its backends (rclpy, Cyclone DDS).

    from robot_hrl.transport import create_node, SENSOR_QOS
    node = create_node("skill", namespace="/cf1", parameters={"rate_hz": 100})
    node.create_subscription(Odometry, "odom", on_odom, SENSOR_QOS)
    node.spin()

``backend="auto"`` uses rclpy when it can be imported (a sourced ROS 2 install) and Cyclone DDS
otherwise; both speak the same ROS 2 wire protocol.
"""

from __future__ import annotations

from typing import Any

from robot_hrl.errors import ConfigError
from robot_hrl.transport.interface import (
    COMMAND_QOS,
    INPUT_QOS,
    LATCHED_QOS,
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

BACKENDS = ("auto", "rclpy", "cyclonedds")


def rclpy_available() -> bool:
    """Whether rclpy (a sourced ROS 2 install) can be imported."""
    try:
        import rclpy  # noqa: F401
    except Exception:  # noqa: BLE001 - ImportError, or a broken install raising something else
        return False
    return True


def resolve_backend(backend: str = "auto") -> str:
    """The concrete backend name ("rclpy" or "cyclonedds") that ``backend`` selects."""
    if backend not in BACKENDS:
        raise ConfigError(f"unknown transport backend {backend!r}; choose one of {', '.join(BACKENDS)}")
    if backend == "auto":
        return "rclpy" if rclpy_available() else "cyclonedds"
    return backend


def create_node(name: str, namespace: str = "", parameters: dict[str, Any] | None = None,
                backend: str = "auto", domain_id: int | None = None) -> Node:
    """A node on the chosen backend. ``domain_id`` overrides ``ROS_DOMAIN_ID`` (cyclonedds
    backend; with rclpy the domain comes from ``ROS_DOMAIN_ID`` or the rclpy context)."""
    chosen = resolve_backend(backend)
    if chosen == "rclpy":
        if not rclpy_available():
            raise ConfigError("transport backend 'rclpy' was asked for, but rclpy cannot be imported: source a "
                              "ROS 2 install (source /opt/ros/<distro>/setup.bash) or use backend='cyclonedds'")
        from robot_hrl.transport.rclpy_backend import RclpyNode

        return RclpyNode(name, namespace, parameters, domain_id=domain_id)
    from robot_hrl.transport.cyclonedds_backend import CycloneNode

    return CycloneNode(name, namespace, parameters, domain_id=domain_id)


__all__ = ["BACKENDS", "COMMAND_QOS", "Durability", "INPUT_QOS", "LATCHED_QOS", "Node", "Publisher", "QoS", "Reliability",
           "SENSOR_QOS", "Subscription", "Timer", "TransportError", "create_node", "rclpy_available", "resolve_backend"]
