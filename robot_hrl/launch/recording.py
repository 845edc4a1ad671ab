"""Record every topic of the graph to a rosbag2 bag in MCAP storage (robot_hrl.recording)."""

from __future__ import annotations

from pathlib import Path

from robot_hrl.transport.interface import Durability, QoS, Reliability

RECORD_DEPTH = 200
SENSOR_RECORD_QOS = QoS(Reliability.BEST_EFFORT, Durability.VOLATILE, depth=RECORD_DEPTH)
"""A best-effort reader hears reliable and best-effort publishers alike."""
LATCHED_RECORD_QOS = QoS(Reliability.RELIABLE, Durability.TRANSIENT_LOCAL, depth=RECORD_DEPTH)
"""Latched topics (task, plan, planner status, estop): also the sample published before the recorder joined."""


def start_recording(node, path: str | Path, topics: dict[str, tuple[str, bool]], namespace: str = ""):
    """A :class:`robot_hrl.recording.TopicRecorder` on ``node`` for ``topics`` (name -> (ROS type, latched))."""
    from robot_hrl.recording import TopicRecorder

    spec = {topic: (ros_type, LATCHED_RECORD_QOS if latched else SENSOR_RECORD_QOS)
            for topic, (ros_type, latched) in topics.items()}
    return TopicRecorder(node, path, spec)
