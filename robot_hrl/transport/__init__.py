"""Node interface and its backends (rclpy, Cyclone DDS)."""

from robot_hrl.transport.interface import (
    COMMAND_QOS,
    LATCHED_QOS,
    SENSOR_QOS,
    Durability,
    Node,
    Publisher,
    QoS,
    Reliability,
    Subscription,
    Timer,
)

__all__ = ["COMMAND_QOS", "Durability", "LATCHED_QOS", "Node", "Publisher", "QoS", "Reliability", "SENSOR_QOS",
           "Subscription", "Timer"]
