"""What a node dropped from its inputs, and why: guarded callbacks, counted drops, a report on /diagnostics.

No node may die from what arrives on a topic. An input can be dropped at three places, and each
is counted per topic with the last reason:

- by the transport: a sample that cannot be decoded (not UTF-8, wrong type, truncated), counted
  by the subscription itself (``Subscription.dropped``);
- by the node's own validation: :meth:`InputGuard.reject` (e.g. a ``/skill/status`` that is not
  the skill node's JSON);
- by a callback that raised: :meth:`InputGuard.wrap` catches the exception, counts it and logs it
  (with the traceback the first time: it is a bug to fix), and the node goes on.

:func:`robot_hrl.nodes.common.run_main` gives every node it starts a :class:`GuardedNode`: the node
itself, except that ``create_subscription`` and ``create_timer`` wrap their callbacks. A status
``<node>: inputs`` goes on ``/diagnostics`` (WARN when something was dropped), published when a
count changed, at most once per ``report_period_s``.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Callable

from robot_hrl.errors import RobotHrlError
from robot_hrl.msgs import DiagnosticArray
from robot_hrl.nodes.common import OK, WARN, diag_array, diag_status, safe_text

REPORT_PERIOD_S = 1.0
"""How often the report may be published (only when a count changed)."""


@dataclass
class TopicInputs:
    """What one topic brought, and what of it was dropped."""

    received: int = 0
    """Samples handed to the node's callback."""
    rejected: int = 0
    """Refused by the node's validation (:meth:`InputGuard.reject`)."""
    failed: int = 0
    """The callback raised on them."""
    last_reason: str = ""


class InputGuard:
    """Counts, per topic, what a node's inputs brought and what was dropped; reports it."""

    def __init__(self, node, node_name: str | None = None):
        self.node = node
        self.node_name = node_name or getattr(node, "name", "node")
        self.topics: dict[str, TopicInputs] = {}
        self.subscriptions: dict[str, Any] = {}
        self._pub = None
        self._timer = None
        self._reported: tuple | None = None
        self._logged_traceback: set[str] = set()

    @property
    def log(self) -> logging.Logger:
        return self.node.get_logger()

    def _topic(self, topic: str) -> TopicInputs:
        entry = self.topics.get(topic)
        if entry is None:
            entry = self.topics[topic] = TopicInputs()
        return entry

    # ---- guarding ---------------------------------------------------------------------------------
    def wrap(self, topic: str, callback: Callable[..., Any]) -> Callable[..., Any]:
        """``callback`` that never raises: an exception is counted under ``topic`` and logged."""
        entry = self._topic(topic)

        def guarded(*args):
            entry.received += 1
            try:
                return callback(*args)
            except Exception as exc:  # noqa: BLE001 - the point: no input ends the node
                entry.failed += 1
                entry.last_reason = safe_text(f"{type(exc).__name__}: {exc}", 300)
                if not isinstance(exc, RobotHrlError) and topic not in self._logged_traceback:
                    self._logged_traceback.add(topic)
                    self.log.exception("the callback of %s raised on an input; it was dropped and the node goes "
                                       "on (a bug to report)", topic)
                elif entry.failed <= 3 or entry.failed % 100 == 0:
                    self.log.warning("dropped an input on %s (%s); %d so far", topic, entry.last_reason, entry.failed)
                return None

        guarded.__wrapped__ = callback
        return guarded

    def subscribe(self, msg_type: type, topic: str, callback: Callable[[Any], None], qos, *, raw: bool = False):
        """``node.create_subscription`` with the callback guarded and the subscription's transport
        drops counted in the report."""
        node = self.node._node if isinstance(self.node, GuardedNode) else self.node
        sub = node.create_subscription(msg_type, topic, self.wrap(topic, callback), qos, raw=raw)
        self.subscriptions[topic] = sub
        return sub

    def timer(self, period_s: float, callback: Callable[[], None]):
        node = self.node._node if isinstance(self.node, GuardedNode) else self.node
        return node.create_timer(period_s, self.wrap(f"timer {period_s:g} s", callback))

    def reject(self, topic: str, reason: str) -> None:
        """The node refused an input on ``topic`` (its own validation): count it, say why."""
        entry = self._topic(topic)
        entry.rejected += 1
        entry.last_reason = safe_text(reason, 300)
        if entry.rejected <= 3 or entry.rejected % 100 == 0:
            self.log.warning("refused an input on %s: %s (%d so far)", topic, entry.last_reason, entry.rejected)

    # ---- reporting ----------------------------------------------------------------------------------
    def undecodable(self, topic: str) -> int:
        sub = self.subscriptions.get(topic)
        return int(getattr(sub, "dropped", 0) or 0)

    def dropped(self, topic: str) -> int:
        """Everything dropped on ``topic``: undecodable, refused, or failed in the callback."""
        entry = self.topics.get(topic, TopicInputs())
        return self.undecodable(topic) + entry.rejected + entry.failed

    def values(self) -> dict[str, Any]:
        values: dict[str, Any] = {}
        for topic in sorted(set(self.topics) | set(self.subscriptions)):
            entry = self.topics.get(topic, TopicInputs())
            values[f"{topic}.received"] = entry.received
            undecodable = self.undecodable(topic)
            if undecodable:
                values[f"{topic}.undecodable"] = undecodable
            if entry.rejected:
                values[f"{topic}.rejected"] = entry.rejected
            if entry.failed:
                values[f"{topic}.callback_errors"] = entry.failed
            if entry.last_reason:
                values[f"{topic}.last_reason"] = entry.last_reason
        return values

    def total_dropped(self) -> int:
        return sum(self.dropped(t) for t in set(self.topics) | set(self.subscriptions))

    def status(self):
        total = self.total_dropped()
        worst = [t for t in sorted(set(self.topics) | set(self.subscriptions)) if self.dropped(t)]
        message = (f"{total} input(s) dropped on {', '.join(worst)}" if total else "every input accepted")
        return diag_status(f"{self.node_name}: inputs", WARN if total else OK, message, self.values())

    def start_reporting(self, period_s: float = REPORT_PERIOD_S) -> None:
        """Publish :meth:`status` on /diagnostics when a drop count changed (idempotent)."""
        if self._timer is not None:
            return
        from robot_hrl.transport.interface import COMMAND_QOS

        node = self.node._node if isinstance(self.node, GuardedNode) else self.node
        self._pub = node.create_publisher(DiagnosticArray, "/diagnostics", COMMAND_QOS)
        self._timer = node.create_timer(period_s, self.report)

    def report(self, force: bool = False) -> bool:
        """Publish the status if a drop count changed since the last report; True when published."""
        if self._pub is None:
            return False
        key = tuple((t, self.dropped(t)) for t in sorted(set(self.topics) | set(self.subscriptions)))
        if not force and key == self._reported:
            return False
        if not force and self._reported is None and not any(n for _, n in key):
            self._reported = key
            return False  # nothing dropped yet: nothing to say
        self._reported = key
        try:
            self._pub.publish(diag_array(self.node.now(), [self.status()]))
        except Exception as exc:  # noqa: BLE001 - a report must not end the node either
            self.log.warning("could not publish the inputs report: %s", exc)
            return False
        return True


class GuardedNode:
    """A node whose subscriptions and timers have guarded callbacks (:class:`InputGuard`); everything
    else is the node's own."""

    def __init__(self, node, guard: InputGuard | None = None):
        self._node = node
        self.input_guard = guard or InputGuard(self, getattr(node, "name", None))
        self.input_guard.node = self

    def create_subscription(self, msg_type: type, topic: str, callback, qos=None, *, raw: bool = False):
        if qos is None:
            from robot_hrl.transport.interface import COMMAND_QOS

            qos = COMMAND_QOS
        return self.input_guard.subscribe(msg_type, topic, callback, qos, raw=raw)

    def create_timer(self, period_s: float, callback):
        return self.input_guard.timer(period_s, callback)

    def __getattr__(self, name: str):
        return getattr(self._node, name)


def input_guard_of(node, node_name: str | None = None) -> InputGuard:
    """The guard of a :class:`GuardedNode`, or a new one for a bare node."""
    guard = getattr(node, "input_guard", None)
    return guard if isinstance(guard, InputGuard) else InputGuard(node, node_name)
