"""Second writers on the graph: another publisher of the motor commands, a second odometry source.

DDS lets any participant on the domain publish on any topic: a second writer on ``/cmd_wrench`` (at
full thrust, it took the robot through the ceiling; issue #16) or a second ``/odom`` source goes
unnoticed by the topic's readers, which take every sample. A :class:`GraphWatch` counts, through the
transport's graph introspection, the publishers of the topics a node depends on and names every topic
with more than it expects, for the node's ``/diagnostics`` (ERROR). It detects; it cannot stop a writer:
locking the graph down is DDS Security's job (docs/nodes_launch.md, "Locking the graph down").

A count comes from a subscription's matched publishers (``get_publisher_count``, a status read) where
the node subscribes to the topic, else from ``node.get_publishers_info_by_topic`` (the discovery data).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from robot_hrl.nodes.common import ERROR, OK


@dataclass
class WatchedTopic:
    topic: str
    """The fully qualified topic."""
    expected: int
    """Publishers expected (the node's own included)."""
    count: Callable[[], int]
    what: str
    """What a publisher of it is, for the message (e.g. 'motor command writer')."""


class GraphWatch:
    """The publishers of a node's critical topics, counted against what the node expects."""

    def __init__(self, node):
        self.node = node
        self.topics: list[WatchedTopic] = []
        self.last: dict[str, int] = {}
        self.alerts = 0
        """Checks that found a topic with too many publishers."""

    def watch_subscription(self, topic: str, subscription: Any, expected: int, what: str) -> None:
        """A topic the node reads: its subscription's matched publishers."""
        counter = getattr(subscription, "get_publisher_count", None)
        if counter is None:
            return self.watch_topic(topic, expected, what)
        self.topics.append(WatchedTopic(self._resolve(topic), expected, counter, what))

    def watch_topic(self, topic: str, expected: int, what: str) -> None:
        """A topic the node writes (or does not read): the publishers the discovery data lists."""
        info = getattr(self.node, "get_publishers_info_by_topic", None)
        if info is None:
            return
        full = self._resolve(topic)
        self.topics.append(WatchedTopic(full, expected, lambda: len(info(full)), what))

    def _resolve(self, topic: str) -> str:
        resolve = getattr(self.node, "resolve_topic", None)
        return resolve(topic) if resolve is not None else topic

    def check(self) -> list[str]:
        """Every watched topic with more publishers than expected, as messages (empty: none)."""
        problems = []
        for w in self.topics:
            try:
                n = int(w.count())
            except Exception as exc:  # noqa: BLE001 - introspection must not take a node down
                problems.append(f"{w.topic}: publishers could not be counted ({type(exc).__name__}: {exc})")
                continue
            self.last[w.topic] = n
            if n > w.expected:
                problems.append(f"{w.topic}: {n} publishers, expected {w.expected}: another {w.what} is on the graph")
        if any("expected" in p for p in problems):
            self.alerts += 1
        return problems

    def diagnostic(self) -> tuple[int, str, dict]:
        """(level, message, values) of a check now."""
        problems = self.check()
        values = {f"publishers.{t}": n for t, n in self.last.items()}
        values["alerts"] = self.alerts
        if problems:
            return ERROR, "; ".join(problems) + " (lock the graph down: DDS Security, docs/nodes_launch.md)", values
        return OK, "no second writer on " + ", ".join(w.topic for w in self.topics), values
