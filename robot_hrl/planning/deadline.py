"""A planning deadline: how long a plan may take, and a way to cancel it from another thread.

The planner node plans off its executor thread (the subgoal heartbeat keeps flowing) and gives
each plan a :class:`PlanningDeadline`. Planners check it between legs (the symbolic planner, also
inside a ``visit``'s ordering) and bound every LLM request by it; when it has passed, or the plan
was cancelled (a newer task arrived), :meth:`PlanningDeadline.check` raises
:class:`PlanningTimeout`, and the planner stops within one leg.
"""

from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass, field

from robot_hrl.errors import PlanningError


class PlanningTimeout(PlanningError):
    """Planning ran past its deadline, or was cancelled."""


@dataclass
class PlanningDeadline:
    budget_s: float
    """Seconds the plan may take."""
    start_s: float = field(default_factory=time.monotonic)
    """``time.monotonic()`` when planning began."""
    cancelled: threading.Event = field(default_factory=threading.Event)
    reason: str = ""
    """Why it was cancelled."""

    def __post_init__(self):
        if isinstance(self.budget_s, bool) or not isinstance(self.budget_s, (int, float)) \
                or math.isnan(self.budget_s) or self.budget_s <= 0:
            raise PlanningError(f"a planning deadline must be a positive number of seconds, got {self.budget_s!r}")

    @property
    def at_s(self) -> float:
        return self.start_s + self.budget_s

    def remaining_s(self) -> float:
        return self.at_s - time.monotonic()

    def expired(self) -> bool:
        return self.cancelled.is_set() or self.remaining_s() <= 0.0

    def cancel(self, reason: str) -> None:
        self.reason = reason
        self.cancelled.set()

    def check(self, what: str = "planning") -> None:
        """Raise :class:`PlanningTimeout` when cancelled or past the deadline."""
        if self.cancelled.is_set():
            raise PlanningTimeout(f"{what} was cancelled: {self.reason or 'cancelled'}")
        if self.remaining_s() <= 0.0:
            raise PlanningTimeout(f"{what} took longer than its deadline of {self.budget_s:g} s; send a shorter "
                                  "task (fewer goals or visits), or raise the planner node's planning_timeout_s")


def check(deadline: PlanningDeadline | None, what: str = "planning") -> None:
    """:meth:`PlanningDeadline.check`, and nothing without a deadline."""
    if deadline is not None:
        deadline.check(what)
