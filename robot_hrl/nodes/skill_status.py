"""The skill node's ``/skill/status`` as the planner reads it: parsed strictly, validated, or refused.

``/skill/status`` is a std_msgs/String anyone on the graph can publish. The planner advances its
plan on it (``reached``), replans on it (``blocked``) and ends a landing on it (``landed``), so a
malformed status must be refused with a reason, never crash the planner or move the plan:

- the text: strict JSON (:func:`robot_hrl.planning.untrusted.loads_strict`: no NaN/Infinity,
  overflowing or 400-digit numbers, deep nesting, duplicate keys), at most :data:`MAX_STATUS_CHARS`;
- an object whose ``state`` is one of :data:`SKILL_STATES`;
- ``requested``: null or three numbers (null where the skill node dropped a non-finite one);
- ``distance`` and ``speed``: null or a finite number >= 0.

Other keys are the skill node's business and pass through unread.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from robot_hrl.errors import PlanningError
from robot_hrl.planning.untrusted import loads_strict, plain

SKILL_STATES = ("waiting", "idle", "tracking", "reached", "blocked", "holding", "landing", "landed", "estop")
"""What ``state`` may say (robot_hrl.nodes.skill_node)."""
MAX_STATUS_CHARS = 16384
"""A skill status is a few hundred characters; longer is refused unread."""
MAX_STATUS_DEPTH = 4


class SkillStatusError(PlanningError):
    """A ``/skill/status`` that is not the skill node's status."""


@dataclass(frozen=True)
class SkillStatus:
    state: str
    requested: np.ndarray | None = None
    """The subgoal the skill flies to (world ENU, m); None when not given or not all finite."""
    distance: float | None = None
    """Distance to ``requested``, m."""
    raw: dict[str, Any] | None = None

    def as_dict(self) -> dict[str, Any]:
        """The form :meth:`PlannerCore.on_skill_status` reads."""
        return {"state": self.state, "requested": None if self.requested is None else self.requested.tolist(),
                "distance": self.distance}


def _number(value, what: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise SkillStatusError(f"{what} must be a number or null, got {type(value).__name__} {plain(repr(value), 40)}")
    value = float(value)
    if not math.isfinite(value) or value < 0:
        raise SkillStatusError(f"{what} must be a finite number >= 0, got {value!r}")
    return value


def parse_skill_status(text: str) -> SkillStatus:
    """Parse and validate a ``/skill/status`` text; :class:`SkillStatusError` says what is wrong."""
    try:
        data = loads_strict(text, "the skill status", MAX_STATUS_CHARS, MAX_STATUS_DEPTH)
    except PlanningError as exc:
        raise SkillStatusError(str(exc)) from None
    if not isinstance(data, dict):
        raise SkillStatusError(f"the skill status must be a JSON object, got {type(data).__name__}")
    state = data.get("state")
    if not isinstance(state, str) or state not in SKILL_STATES:
        raise SkillStatusError(f"the skill status has state {plain(repr(state), 40)}; expected one of {list(SKILL_STATES)}")
    requested = data.get("requested")
    point = None
    if requested is not None:
        if not isinstance(requested, list) or len(requested) != 3:
            raise SkillStatusError(f"the skill status's requested must be [x, y, z] or null, got {plain(repr(requested), 60)}")
        if any(v is not None and (isinstance(v, bool) or not isinstance(v, (int, float))) for v in requested):
            raise SkillStatusError(f"the skill status's requested must hold numbers, got {plain(repr(requested), 60)}")
        if all(v is not None for v in requested):
            point = np.asarray(requested, dtype=np.float64)
            if not np.all(np.isfinite(point)):
                point = None
    distance = _number(data.get("distance"), "the skill status's distance")
    _number(data.get("speed"), "the skill status's speed")
    return SkillStatus(state=state, requested=point, distance=distance, raw=data)
