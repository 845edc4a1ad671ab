"""What the shield records: interventions, per-unit counters, diagnostic levels.

An :class:`Intervention` is created only when a unit changes something, so a tick on which
every command passes allocates nothing here. Levels are the bytes of
diagnostic_msgs/DiagnosticStatus.
"""

from __future__ import annotations

OK = 0
"""diagnostic_msgs/DiagnosticStatus.OK"""
WARN = 1
"""diagnostic_msgs/DiagnosticStatus.WARN"""
ERROR = 2
"""diagnostic_msgs/DiagnosticStatus.ERROR"""
STALE = 3
"""diagnostic_msgs/DiagnosticStatus.STALE"""

LEVEL_NAMES = {OK: "OK", WARN: "WARN", ERROR: "ERROR", STALE: "STALE"}


class Intervention:
    """One change a unit made: which unit, which constraint, the value before and after, when.

    ``before`` and ``after`` are plain floats or tuples of floats (a subgoal, a command), or a
    short string (a mode). ``action`` says what was done: ``"clamp"`` (the command or subgoal
    was changed to satisfy the constraint), ``"backup"`` (the backup controller took over),
    ``"land"``, ``"motors_off"`` or ``"replace"``.
    """

    __slots__ = ("time_s", "unit", "constraint", "before", "after", "action", "detail")

    def __init__(self, time_s: float, unit: str, constraint: str, before, after, action: str = "clamp", detail: str = ""):
        self.time_s = time_s
        self.unit = unit
        self.constraint = constraint
        self.before = before
        self.after = after
        self.action = action
        self.detail = detail

    def as_dict(self) -> dict:
        return {
            "time_s": self.time_s, "unit": self.unit, "constraint": self.constraint,
            "before": self.before, "after": self.after, "action": self.action, "detail": self.detail,
        }

    def __repr__(self) -> str:
        return (
            f"Intervention(t={self.time_s:.3f}s, {self.unit}.{self.constraint}: {self.action} "
            f"{self.before!r} -> {self.after!r}{' (' + self.detail + ')' if self.detail else ''})"
        )


class UnitCounters:
    """Per-unit counts: ticks checked, ticks with an intervention, and per constraint."""

    __slots__ = ("checks", "interventions", "by_constraint", "last_intervention")

    def __init__(self, constraints: tuple[str, ...]):
        self.checks = 0
        self.interventions = 0
        self.by_constraint: dict[str, int] = {c: 0 for c in constraints}
        self.last_intervention: Intervention | None = None

    def record(self, intervention: Intervention) -> None:
        self.interventions += 1
        self.by_constraint[intervention.constraint] = self.by_constraint.get(intervention.constraint, 0) + 1
        self.last_intervention = intervention

    def as_dict(self) -> dict:
        return {"checks": self.checks, "interventions": self.interventions, **{f"count.{k}": v for k, v in self.by_constraint.items()}}
