"""The task language: what a user (or an LLM) may ask the planner to do.

Two equivalent forms. Text, statements separated by ``;`` or new lines::

    takeoff 1.0; goto 2.0 3.0 1.0; goto red_box; hover 2; visit green_box blue_box; land

and JSON, validated against :data:`TASK_SCHEMA` (``additionalProperties: false`` everywhere)::

    {"steps": [{"action": "takeoff", "altitude_m": 1.0},
               {"action": "goto", "position": [2.0, 3.0, 1.0]},
               {"action": "goto", "landmark": "red_box"},
               {"action": "hover", "duration_s": 2.0},
               {"action": "visit", "targets": [{"landmark": "green_box"}, {"landmark": "blue_box"}]},
               {"action": "land"}]}

Statements:

- ``takeoff [ALT]``: climb vertically to ALT metres (default 1.0).
- ``goto X Y Z`` | ``goto X Y`` (keep the altitude) | ``goto LANDMARK``: fly there around obstacles.
  A landmark is named by its id (``red_box``), its colour (``red``) or a phrase
  (``the red box``); the robot flies to its approach point.
- ``hover SECONDS``: hold the position.
- ``visit T1 T2 ...``: visit every target once, in the order that makes the flight shortest.
  A target is a landmark name or a point written ``X,Y,Z``.
- ``land``: descend vertically to the floor.

Both forms have the same limits (:data:`TASK_LIMITS`, the JSON schema's own numbers): at most
64 steps (statements), 32 targets per ``visit``, 64 characters per landmark name, hovers of at most
3600 s, every number finite, and at most :data:`MAX_TASK_CHARS` characters in all. Untrusted text
is quoted in errors with ``ascii()`` and cut short (:func:`robot_hrl.planning.untrusted.show`).

Parsing only checks the form. Whether a landmark exists, or a point is inside the fence and
outside obstacles, is checked by the planner against the world.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

import jsonschema

from robot_hrl.errors import PlanningError
from robot_hrl.planning.untrusted import check_finite_numbers, loads_strict, plain, show

ACTIONS = ("takeoff", "goto", "hover", "visit", "land")
DEFAULT_TAKEOFF_ALTITUDE_M = 1.0
MAX_STEPS = 64
"""Steps (statements) in one task."""
MAX_VISIT_TARGETS = 32
"""Targets in one ``visit``."""
MAX_LANDMARK_CHARS = 64
"""Characters in a landmark name."""
MAX_HOVER_S = 3600.0
"""The longest ``hover``, seconds."""
MAX_TASK_CHARS = 65536
"""Characters in a task, text or JSON (a task of 64 visits of 32 named landmarks fits)."""
MAX_TASK_DEPTH = 8
"""JSON nesting of a task (the schema nests 6 deep: steps, a step, targets, a target, a position)."""
TASK_LIMITS = {"max_steps": MAX_STEPS, "max_visit_targets": MAX_VISIT_TARGETS,
               "max_landmark_chars": MAX_LANDMARK_CHARS, "max_hover_s": MAX_HOVER_S, "max_task_chars": MAX_TASK_CHARS}
"""The limits both forms share (the JSON schema below is written from the same numbers)."""

_POSITION = {"type": "array", "items": {"type": "number"}, "minItems": 3, "maxItems": 3,
             "description": "x, y, z in the world frame (ENU), metres"}
_LANDMARK = {"type": "string", "minLength": 1, "maxLength": MAX_LANDMARK_CHARS, "description": "landmark id or colour name"}
_TARGET = {
    "type": "object",
    "additionalProperties": False,
    "properties": {"position": _POSITION, "landmark": _LANDMARK},
    "oneOf": [{"required": ["position"]}, {"required": ["landmark"]}],
}

TASK_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "robot_hrl task",
    "description": "An ordered list of actions. Goals are positions in metres (world ENU) or landmark names.",
    "type": "object",
    "additionalProperties": False,
    "required": ["steps"],
    "properties": {
        "steps": {
            "type": "array",
            "minItems": 1,
            "maxItems": MAX_STEPS,
            "items": {
                "oneOf": [
                    {"type": "object", "additionalProperties": False, "required": ["action"],
                     "properties": {"action": {"const": "takeoff"},
                                    "altitude_m": {"type": "number", "exclusiveMinimum": 0}}},
                    {"type": "object", "additionalProperties": False, "required": ["action", "position"],
                     "properties": {"action": {"const": "goto"}, "position": _POSITION}},
                    {"type": "object", "additionalProperties": False, "required": ["action", "landmark"],
                     "properties": {"action": {"const": "goto"}, "landmark": _LANDMARK}},
                    {"type": "object", "additionalProperties": False, "required": ["action", "duration_s"],
                     "properties": {"action": {"const": "hover"},
                                    "duration_s": {"type": "number", "minimum": 0, "maximum": MAX_HOVER_S}}},
                    {"type": "object", "additionalProperties": False, "required": ["action", "targets"],
                     "properties": {"action": {"const": "visit"},
                                    "targets": {"type": "array", "minItems": 1, "maxItems": MAX_VISIT_TARGETS,
                                                "items": _TARGET}}},
                    {"type": "object", "additionalProperties": False, "required": ["action"],
                     "properties": {"action": {"const": "land"}}},
                ]
            },
        }
    },
}
_VALIDATOR = jsonschema.Draft202012Validator(TASK_SCHEMA)


@dataclass(frozen=True)
class Target:
    """A goal: a point in the world (ENU, m) or a landmark name (resolved by the planner)."""

    position: tuple[float, float, float] | None = None
    landmark: str | None = None
    xy_only: bool = False
    """``goto X Y``: z is the current altitude."""

    def to_json(self) -> dict:
        if self.landmark is not None:
            return {"landmark": self.landmark}
        return {"position": list(self.position)}

    def __str__(self) -> str:
        if self.landmark is not None:
            return self.landmark
        if self.xy_only:
            return f"{self.position[0]:g} {self.position[1]:g}"
        return " ".join(f"{v:g}" for v in self.position)


@dataclass(frozen=True)
class TaskStep:
    action: str
    targets: tuple[Target, ...] = ()
    altitude_m: float | None = None
    duration_s: float | None = None

    def to_json(self) -> dict:
        out: dict[str, Any] = {"action": self.action}
        if self.action == "takeoff" and self.altitude_m is not None:
            out["altitude_m"] = self.altitude_m
        elif self.action == "goto":
            if self.targets[0].xy_only:
                raise PlanningError("`goto X Y` (keep altitude) has no JSON form; give x, y and z")
            out.update(self.targets[0].to_json())
        elif self.action == "hover":
            out["duration_s"] = self.duration_s
        elif self.action == "visit":
            out["targets"] = [t.to_json() for t in self.targets]
        return out

    def __str__(self) -> str:
        if self.action == "takeoff":
            return f"takeoff {self.altitude_m:g}" if self.altitude_m is not None else "takeoff"
        if self.action == "hover":
            return f"hover {self.duration_s:g}"
        if self.action == "goto":
            return f"goto {self.targets[0]}"
        if self.action == "visit":
            return "visit " + " ".join(str(t) if t.landmark else ",".join(f"{v:g}" for v in t.position)
                                       for t in self.targets)
        return self.action


@dataclass(frozen=True)
class Task:
    steps: tuple[TaskStep, ...] = field(default_factory=tuple)

    def to_json(self) -> dict:
        return {"steps": [s.to_json() for s in self.steps]}

    def __str__(self) -> str:
        return "; ".join(str(s) for s in self.steps)


def _number(token: str, what: str, statement: str) -> float:
    try:
        value = float(token)
    except ValueError:
        raise PlanningError(f"in {show(statement)}: {what} {show(token, 24)} is not a number") from None
    if not math.isfinite(value):
        raise PlanningError(f"in {show(statement)}: {what} {show(token, 24)} is not finite")
    return value


def _looks_numeric(token: str) -> bool:
    if re.fullmatch(r"[-+]?[\d.].*", token):
        return True
    try:
        float(token)
    except ValueError:
        return False
    return True


def _ascii_lower(word: str) -> str:
    """Lower case for ASCII letters only: ``str.lower`` maps the Kelvin sign U+212A to an ASCII ``k``,
    which would turn a homoglyph into a real landmark name."""
    return word.lower() if word.isascii() else "".join(c.lower() if c.isascii() else c for c in word)


def _landmark_name(words: list[str], statement: str | None = None) -> str:
    words = [w for w in words if _ascii_lower(w) not in ("the", "a", "an")]
    name = "_".join(_ascii_lower(w) for w in words)
    if len(name) > MAX_LANDMARK_CHARS:
        where = f"in {show(statement)}: " if statement is not None else ""
        raise PlanningError(f"{where}the landmark name {show(name, 24)} is {len(name)} characters; "
                            f"at most {MAX_LANDMARK_CHARS}")
    return name


def _parse_statement(statement: str) -> TaskStep:
    tokens = statement.split()
    verb, args = _ascii_lower(tokens[0]), tokens[1:]
    where = f"in {show(statement)}"
    if verb == "takeoff":
        if len(args) > 1:
            raise PlanningError(f"{where}: takeoff takes one altitude in metres, e.g. `takeoff 1.0`")
        if not args:
            return TaskStep("takeoff", altitude_m=DEFAULT_TAKEOFF_ALTITUDE_M)
        alt = _number(args[0], "altitude", statement)
        if alt <= 0:
            raise PlanningError(f"{where}: the takeoff altitude must be above 0 m")
        return TaskStep("takeoff", altitude_m=alt)
    if verb == "land":
        if args:
            raise PlanningError(f"{where}: land takes no arguments")
        return TaskStep("land")
    if verb == "hover":
        if len(args) != 1:
            raise PlanningError(f"{where}: hover takes a duration in seconds, e.g. `hover 2`")
        duration = _number(args[0], "duration", statement)
        if duration < 0:
            raise PlanningError(f"{where}: the hover duration must not be negative")
        if duration > MAX_HOVER_S:
            raise PlanningError(f"{where}: the hover duration {duration:g} s is longer than {MAX_HOVER_S:g} s; "
                                "split it into several hovers")
        return TaskStep("hover", duration_s=duration)
    if verb == "goto":
        if not args:
            raise PlanningError(f"{where}: goto needs a target: `goto X Y Z`, `goto X Y` or `goto red_box`")
        if _looks_numeric(args[0]):
            if len(args) not in (2, 3):
                raise PlanningError(f"{where}: goto takes 2 or 3 coordinates (X Y [Z]), got {len(args)}")
            xyz = [_number(a, "coordinate", statement) for a in args]
            if len(xyz) == 2:
                return TaskStep("goto", targets=(Target(position=(xyz[0], xyz[1], math.nan), xy_only=True),))
            return TaskStep("goto", targets=(Target(position=tuple(xyz)),))
        return TaskStep("goto", targets=(Target(landmark=_landmark_name(args, statement)),))
    if verb == "visit":
        if not args:
            raise PlanningError(f"{where}: visit needs targets, e.g. `visit red_box green_box 1,2,1`")
        targets = []
        for arg in args:
            if "," in arg:
                parts = [p for p in arg.split(",")]
                if len(parts) != 3:
                    raise PlanningError(f"{where}: the point {show(arg, 40)} must be written X,Y,Z")
                targets.append(Target(position=tuple(_number(p, "coordinate", statement) for p in parts)))
            elif _ascii_lower(arg) in ("the", "a", "an"):
                continue
            else:
                targets.append(Target(landmark=_landmark_name([arg], statement)))
            if len(targets) > MAX_VISIT_TARGETS:
                raise PlanningError(f"{where}: visit takes at most {MAX_VISIT_TARGETS} targets; "
                                    "split the visit into several")
        return TaskStep("visit", targets=tuple(targets))
    raise PlanningError(
        f"unknown action {show(tokens[0], 24)} in {show(statement)}; the task language knows: {', '.join(ACTIONS)} "
        "(e.g. `takeoff 1.0; goto 2 3 1; goto red_box; land`)"
    )


def _check_size(text: str) -> None:
    if len(text) > MAX_TASK_CHARS:
        raise PlanningError(f"the task is {len(text)} characters; at most {MAX_TASK_CHARS} are accepted "
                            f"(at most {MAX_STEPS} steps); send a shorter task")


def parse_task_text(text: str) -> Task:
    """Parse the text form (statements separated by ``;`` or new lines)."""
    if not isinstance(text, str):
        raise PlanningError(f"a task must be text or JSON, got {type(text).__name__}")
    _check_size(text)
    statements = [s.strip() for s in re.split(r"[;\n]", text)]
    statements = [s for s in statements if s and not s.startswith("#")]
    if not statements:
        raise PlanningError("the task is empty; e.g. `takeoff 1.0; goto red_box; land`")
    if len(statements) > MAX_STEPS:
        raise PlanningError(f"the task has {len(statements)} statements; at most {MAX_STEPS} are accepted; "
                            "send a shorter task (a `visit` takes up to 32 targets)")
    return Task(tuple(_parse_statement(s) for s in statements))


def validate_task_json(data: Any) -> None:
    """Raise PlanningError naming the first schema violation (every number must also be finite)."""
    check_finite_numbers(data, "the task JSON")
    err = jsonschema.exceptions.best_match(_VALIDATOR.iter_errors(data))
    if (err is not None and err.validator == "oneOf" and isinstance(err.instance, dict)
            and all("action" in sub.get("properties", {}) for sub in err.validator_value)):
        # A step matched no action's schema: explain against the schema of its own action.
        where = "/".join(str(p) for p in err.absolute_path)
        action = err.instance.get("action")
        candidates = [sub for sub in err.validator_value if sub["properties"]["action"]["const"] == action]
        if not candidates:
            raise PlanningError(f"the task JSON does not match the task schema at {where}: unknown action "
                                f"{show(action, 24)}; expected one of {list(ACTIONS)}")
        best = None
        for sub in candidates:
            errs = list(jsonschema.Draft202012Validator(sub).iter_errors(err.instance))
            if best is None or len(errs) < len(best):
                best = errs
        detail = "; ".join(e.message for e in best) if best else err.message
        raise PlanningError(f"the task JSON does not match the task schema at {where} ({action}): {plain(detail)}")
    if err is not None:
        where = "/".join(str(p) for p in err.absolute_path) or "(top level)"
        message = err.message
        if err.validator == "oneOf":
            message = f"{plain(repr(err.instance), 120)} must have exactly one of {list(err.schema.get('properties', {}))}"
        raise PlanningError(f"the task JSON does not match the task schema at {plain(where, 80)}: {plain(message)}")


def parse_task_json(data: Any) -> Task:
    """Parse the JSON form (a dict, or a JSON string) after strict schema validation."""
    if isinstance(data, (str, bytes)):
        data = loads_strict(data, "the task", MAX_TASK_CHARS, MAX_TASK_DEPTH)
    validate_task_json(data)
    steps = []
    for raw in data["steps"]:
        action = raw["action"]
        if action == "takeoff":
            steps.append(TaskStep("takeoff", altitude_m=float(raw.get("altitude_m", DEFAULT_TAKEOFF_ALTITUDE_M))))
        elif action == "goto":
            target = (Target(position=tuple(float(v) for v in raw["position"])) if "position" in raw
                      else Target(landmark=_landmark_name(raw["landmark"].split())))
            steps.append(TaskStep("goto", targets=(target,)))
        elif action == "hover":
            steps.append(TaskStep("hover", duration_s=float(raw["duration_s"])))
        elif action == "visit":
            steps.append(TaskStep("visit", targets=tuple(
                Target(position=tuple(float(v) for v in t["position"])) if "position" in t
                else Target(landmark=_landmark_name(t["landmark"].split())) for t in raw["targets"])))
        else:
            steps.append(TaskStep("land"))
    check_task_finite(Task(tuple(steps)))
    return Task(tuple(steps))


def check_task_finite(task: Task) -> None:
    """Every number of a parsed task is finite (``goto X Y`` leaves z to the planner: NaN there is allowed)."""
    for number, step in enumerate(task.steps, 1):
        for name in ("altitude_m", "duration_s"):
            value = getattr(step, name)
            if value is not None and not math.isfinite(value):
                raise PlanningError(f"step {number} ({step.action}): {name} {value!r} is not finite")
        for t in step.targets:
            if t.position is None:
                continue
            coords = t.position[:2] if t.xy_only else t.position
            if not all(math.isfinite(v) for v in coords):
                raise PlanningError(f"step {number} ({step.action}): the position {list(t.position)} is not finite")


def parse_task(task: str | dict | Task) -> Task:
    """Parse a task given as text, as JSON text, as a JSON dict, or pass a Task through."""
    if isinstance(task, Task):
        check_task_finite(task)
        return task
    if isinstance(task, dict):
        return parse_task_json(task)
    if isinstance(task, str) and task.lstrip().startswith("{"):
        return parse_task_json(task)
    return parse_task_text(task)
