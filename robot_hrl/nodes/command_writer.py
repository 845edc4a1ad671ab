"""Which writer of a command topic is the one to obey: the sim node applies only the skill node's ``/cmd_wrench``.

DDS delivers every writer's samples to a reader; a second writer that stamps its commands with the current
``/clock`` (sim/rogue_drill.py, stamp ``clock``) is, by its content, the skill node (issue #16). Its identity is
not: the transport says which writer a sample comes from (:attr:`Subscription.last_writer_gid`, the writer's DDS
GUID) and the graph's discovery data which node owns each writer (``get_publishers_info_by_topic``:
:attr:`EndpointInfo.node_name` and ``endpoint_gid``, from ``ros_discovery_info``, what ``ros2 topic info -v``
shows). A sample is accepted when its writer belongs to the expected node.

Start-up: the discovery data of a new writer can arrive after its first samples. While the topic has exactly one
matched writer and no writer of the expected node is known yet, its samples are accepted (the behaviour before
writer identity; start-up does not stall). A backend that cannot name a sample's writer (``last_writer_gid`` is
None: rclpy, see robot_hrl/transport/rclpy_backend.py) leaves the decision to the caller's other rules.

This identifies writers on a domain where the nodes tell the truth about their names: a hostile participant can
announce itself as ``skill_node``. Authenticating writers is DDS Security's job (docs/safety.md).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

REFRESH_MIN_S = 0.25
"""Shortest wall time between two reads of the discovery data for an unknown writer (a rogue writing as fast as
it can must not turn every sample into a graph query)."""


@dataclass
class CommandWriter:
    """The expected writer of one command topic, identified by GUID from the graph's discovery data."""

    node: Any
    """Our node (its ``get_publishers_info_by_topic``)."""
    subscription: Any
    """Our subscription to the topic (its ``last_writer_gid``, ``get_publisher_count``)."""
    topic: str
    """The topic as the node names it (resolved through the node)."""
    writer_node: str
    """The name of the node whose writer is obeyed (e.g. ``skill_node``)."""
    known_gids: set = field(default_factory=set)
    """GUIDs (16 bytes) of the expected node's writers on the topic, from the discovery data."""
    foreign_gids: set = field(default_factory=set)
    """GUIDs of other writers whose samples were refused."""
    refused: int = 0
    """Samples refused for their writer."""
    accepted_unidentified: int = 0
    """Samples accepted under the start-up rule (one writer, no discovery data yet)."""
    _last_refresh: float = -1e9

    def __post_init__(self) -> None:
        resolve = getattr(self.node, "resolve_topic", None)
        self.topic = resolve(self.topic) if resolve is not None else self.topic

    def refresh(self) -> None:
        """Re-read the expected node's writers of the topic from the discovery data."""
        self._last_refresh = time.monotonic()
        info = getattr(self.node, "get_publishers_info_by_topic", None)
        if info is None:
            return
        self.known_gids = {bytes(i.endpoint_gid) for i in info(self.topic)
                           if getattr(i, "node_name", "") == self.writer_node and getattr(i, "endpoint_gid", b"")}

    def accepts(self) -> bool:
        """Whether the sample being delivered now (in the subscription's callback) comes from the expected writer."""
        gid = getattr(self.subscription, "last_writer_gid", None)
        if gid is None:
            return True  # the backend cannot name writers: the caller's other rules decide
        if gid in self.known_gids:
            return True
        if time.monotonic() - self._last_refresh >= REFRESH_MIN_S:
            self.refresh()
            if gid in self.known_gids:
                return True
        if not self.known_gids and self._matched_writers() == 1:
            self.accepted_unidentified += 1
            return True
        self.refused += 1
        self.foreign_gids.add(gid)
        return False

    def _matched_writers(self) -> int:
        count = getattr(self.subscription, "get_publisher_count", None)
        try:
            return int(count()) if count is not None else 0
        except Exception:  # noqa: BLE001 - unknown: not "exactly one"
            return 0

    def diagnostic_values(self) -> dict:
        return {"command_writer": (f"{self.writer_node} ({len(self.known_gids)} writer(s) identified)"
                                   if self.known_gids else f"{self.writer_node} (not identified yet)"),
                "foreign_writer_commands": self.refused, "foreign_writers": len(self.foreign_gids),
                "commands_accepted_unidentified": self.accepted_unidentified}
