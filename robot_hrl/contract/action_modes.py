"""Action modes: how a policy's normalized outputs become a robot command, and which message carries it.

Every consumer (the runtime, the shield, the skill node, the simulators, the C code generator)
maps actions through the functions here, with the bounds of ``contract.action``: the one action
mapping of the stack. An action mode names

* the mapping: each normalized output ``a`` becomes ``low + (a + 1) / 2 * (high - low)`` with the
  contract term's bounds, after ``a`` is clipped to [-1, 1] when the mode clips;
* the ROS 2 message the command is sent as, and the message field each command term fills;
* what executes the command on the robot (``firmware_control_mode`` in the contract: the
  crazyflie-firmware control mode, the ros2_controllers controller).

Add a mode by registering an :class:`ActionMode` (:func:`register_action_mode`); the contract
refuses a mode it does not know, naming the known ones.

The mapping functions take numpy arrays (or sequences) and, through the array API
(``array_api_compat``, installed with the training extras), torch tensors, so the simulators call
the same function on their batched tensors. The single-sample float path of the shield
(:meth:`ActionMap.command`) does the same arithmetic in the same order, so both give the same bits.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from robot_hrl.errors import ContractError

if TYPE_CHECKING:
    from robot_hrl.contract.schema import ActionSpec


@dataclass(frozen=True)
class ActionMode:
    """One way of commanding a robot."""

    name: str
    """The contract's ``action.mode``, e.g. ``collective_thrust_body_torque``."""
    message_type: str | None
    """ROS 2 type of the command message (``pkg/msg/T``); None: no command output in this runtime yet."""
    message_fields: tuple[str, ...] | None
    """The message field each command term fills, in term order (dotted paths, e.g. ``wrench.force.z``);
    None: the mode takes any number of terms (each its own joint)."""
    target_modes: tuple[str, ...]
    """What executes the command (the contract's ``firmware_control_mode``); the first is the default."""
    term_units: tuple[str, ...] | None = None
    """The units of each command term, when the mode fixes them (a robot's spec for the mode uses them;
    a contract's units are checked against the robot's, ``action_mismatches``)."""
    clip: bool = True
    """Normalized outputs are clipped to [-1, 1] before the mapping."""
    description: str = ""
    subgoal: bool = False
    """The command is a subgoal for a lower skill (a level above a skill: robot_hrl.contract.navigate), not
    an actuator command: the planner node sends it on ``/subgoal`` and the lower skill's shield checks it.
    A robot never executes such a mode directly; the contract reader dispatches on this flag."""

    @property
    def size(self) -> int | None:
        """Number of command terms, or None when the mode takes any number."""
        return None if self.message_fields is None else len(self.message_fields)


ACTION_MODES: dict[str, ActionMode] = {}
"""Every known action mode, by name."""


def register_action_mode(mode: ActionMode) -> ActionMode:
    """Make ``mode`` known to contracts, runtimes and command outputs; returns it."""
    if mode.name in ACTION_MODES and ACTION_MODES[mode.name] != mode:
        raise ValueError(f"action mode {mode.name!r} is already registered with a different definition")
    ACTION_MODES[mode.name] = mode
    return mode


def get_action_mode(name: str) -> ActionMode:
    """The registered mode ``name``; a :class:`ContractError` naming the known modes otherwise."""
    mode = ACTION_MODES.get(name)
    if mode is None:
        raise ContractError(
            f"unknown action mode {name!r}; this runtime knows {sorted(ACTION_MODES)}. Update robot_hrl, or "
            "register the mode with robot_hrl.contract.register_action_mode"
        )
    return mode


COLLECTIVE_THRUST_BODY_TORQUE = register_action_mode(ActionMode(
    name="collective_thrust_body_torque",
    message_type="geometry_msgs/msg/WrenchStamped",
    message_fields=("wrench.force.z", "wrench.torque.x", "wrench.torque.y", "wrench.torque.z"),
    target_modes=("controlModeForceTorque",),
    term_units=("N", "N m", "N m", "N m"),
    description="collective thrust (N) and body torques (N m), mixed onboard: crazyflie-firmware "
                "controlModeForceTorque (control_t thrustSi, torqueX/Y/Z)",
))
BODY_VELOCITY = register_action_mode(ActionMode(
    name="body_velocity",
    message_type="geometry_msgs/msg/TwistStamped",
    message_fields=("twist.linear.x", "twist.angular.z"),
    target_modes=("diff_drive_controller",),
    term_units=("m/s", "rad/s"),
    description="forward speed (m/s) and yaw rate (rad/s) in the body frame: ros2_controllers "
                "diff_drive_controller, which takes geometry_msgs/msg/TwistStamped on ~/cmd_vel and uses "
                "linear.x and angular.z",
))
JOINT_POSITION = register_action_mode(ActionMode(
    name="joint_position",
    message_type=None,
    message_fields=None,
    target_modes=("joint_group_position_controller",),
    clip=False,
    description="joint position targets (rad), one term per joint, offset + scale * a as Isaac Lab's "
                "JointPositionAction (no clipping); no command output in this runtime yet",
))
JOINT_EFFORT = register_action_mode(ActionMode(
    name="joint_effort",
    message_type=None,
    message_fields=None,
    target_modes=("joint_group_effort_controller",),
    clip=False,
    description="joint efforts (N or N m), one term per joint, offset + scale * a as Isaac Lab's JointEffortAction "
                "(no clipping); no command output in this runtime yet",
))
JOINT_VELOCITY = register_action_mode(ActionMode(
    name="joint_velocity",
    message_type=None,
    message_fields=None,
    target_modes=("joint_group_velocity_controller",),
    clip=False,
    description="joint velocity targets (rad/s or m/s), one term per joint, offset + scale * a as Isaac Lab's "
                "JointVelocityAction (no clipping); no command output in this runtime yet",
))


SUBGOAL_OFFSET = register_action_mode(ActionMode(
    name="subgoal_offset",
    message_type="geometry_msgs/msg/PoseStamped",
    message_fields=("pose.position.x", "pose.position.y"),
    target_modes=("lower_skill",),
    term_units=("m", "m"),
    subgoal=True,
    description="the next subgoal of a level above a skill, as a horizontal offset (m) from the robot in its yaw "
                "frame: each term maps onto [-R, R] with R the level's offset radius (at most the lower skill's "
                "subgoal radius: the HRAC adjacency constraint), then the offset is projected onto the disc of "
                "radius R, rotated into the world and added to the position (robot_hrl.contract.navigate."
                "subgoal_from_action); the planner node sends it as geometry_msgs/msg/PoseStamped on /subgoal, at "
                "the level's flight height, and the lower skill named by the contract flies it",
))


# ---- the mapping ------------------------------------------------------------------------------------
class ActionMap:
    """The bounds of one :class:`ActionSpec` resolved once, as floats and as read-only arrays."""

    __slots__ = ("spec", "mode", "size", "low", "high", "half_span", "clip", "low_array", "high_array",
                 "half_span_array", "_like", "command")

    def __init__(self, spec: "ActionSpec"):
        self.spec = spec
        self.mode = get_action_mode(spec.mode)
        self.size = len(spec.terms)
        self.low = tuple(float(t.low) for t in spec.terms)
        self.high = tuple(float(t.high) for t in spec.terms)
        self.half_span = tuple((h - lo) * 0.5 for lo, h in zip(self.low, self.high))
        """(high - low) / 2 per term: the command per unit of normalized action."""
        self.clip = self.mode.clip
        self.low_array = np.array(self.low)
        self.high_array = np.array(self.high)
        self.half_span_array = np.array(self.half_span)
        for a in (self.low_array, self.high_array, self.half_span_array):
            a.flags.writeable = False
        self._like: dict[tuple, tuple[Any, Any]] = {}
        self.command = _unrolled_command(self.size, self.low, self.half_span, self.clip)
        """Normalized actions (a sequence of floats) -> command (a list of floats): the shield's per-tick path."""

    # ---- floats: the shield's per-tick path -----------------------------------------------------

    def normalized_value(self, i: int, command: float) -> float:
        """Command term ``i`` -> its normalized action (not clipped)."""
        return (command - self.low[i]) / self.half_span[i] - 1.0

    def normalized(self, command: Sequence[float]) -> list[float]:
        """Command (floats) -> normalized actions, clipped to [-1, 1]."""
        lo, hs = self.low, self.half_span
        out = []
        for i in range(self.size):
            n = (command[i] - lo[i]) / hs[i] - 1.0
            out.append(-1.0 if n < -1.0 else 1.0 if n > 1.0 else n)
        return out

    # ---- arrays: numpy, or any array-API namespace (torch) ----------------------------------------
    def bounds_like(self, x) -> tuple[Any, Any]:
        """(low, half_span) in ``x``'s namespace, dtype and device (cached)."""
        import array_api_compat as aac  # the training extras install it; numpy never gets here

        key = (type(x), str(getattr(x, "dtype", "")), str(aac.device(x)))
        cached = self._like.get(key)
        if cached is None:
            xp = aac.array_namespace(x)
            dev = aac.device(x)
            cached = (xp.asarray(self.low, dtype=x.dtype, device=dev), xp.asarray(self.half_span, dtype=x.dtype, device=dev))
            self._like[key] = cached
        return cached


def _unrolled_command(size: int, low: tuple, half_span: tuple, clip: bool):
    """``command(actions)`` for ``size`` terms with the bounds as constants, one expression per term (the
    same arithmetic as the array path, unrolled as dataclasses writes its methods: a few microseconds a tick)."""
    terms = []
    for i in range(size):
        a = f"a[{i}]"
        if clip:  # NaN stays NaN
            a = f"(a[{i}] if -1.0 <= a[{i}] <= 1.0 else -1.0 if a[{i}] < -1.0 else 1.0 if a[{i}] > 1.0 else a[{i}])"
        terms.append(f"{low[i]!r} + ({a} + 1.0) * {half_span[i]!r}")
    namespace: dict = {}
    exec(f"def command(a):\n    return [{', '.join(terms)}]\n", namespace)  # noqa: S102 - generated from floats only
    return namespace["command"]


_MAPS: dict[int, ActionMap] = {}


def action_map(spec: "ActionSpec") -> ActionMap:
    """The resolved :class:`ActionMap` of ``spec`` (once per spec object: this runs every tick)."""
    m = _MAPS.get(id(spec))
    if m is None or m.spec is not spec:
        m = _MAPS[id(spec)] = ActionMap(spec)
    return m


def _is_numpy(x) -> bool:
    return isinstance(x, (np.ndarray, list, tuple, float, int, np.floating))


def normalized_to_command(spec: "ActionSpec", actions):
    """Normalized actions ``(..., n)`` -> commands ``(..., n)`` with the contract's bounds.

    numpy (or a sequence): float64 out. A torch tensor (any array-API array): the same
    namespace, dtype and device out."""
    m = action_map(spec)
    if _is_numpy(actions):
        a = np.asarray(actions, dtype=np.float64)
        if m.clip:
            a = np.minimum(np.maximum(a, -1.0), 1.0)
        return m.low_array + (a + 1.0) * m.half_span_array
    low, half_span = m.bounds_like(actions)
    a = actions.clip(-1.0, 1.0) if m.clip else actions
    return low + (a + 1.0) * half_span


def command_to_normalized(spec: "ActionSpec", command):
    """Inverse of :func:`normalized_to_command`, clipped to [-1, 1]."""
    m = action_map(spec)
    if _is_numpy(command):
        n = (np.asarray(command, dtype=np.float64) - m.low_array) / m.half_span_array - 1.0
        return np.minimum(np.maximum(n, -1.0), 1.0)
    low, half_span = m.bounds_like(command)
    return ((command - low) / half_span - 1.0).clip(-1.0, 1.0)


def action_bounds(spec: "ActionSpec") -> tuple[np.ndarray, np.ndarray]:
    """Commands at a = -1 and a = +1 (read-only float64 arrays)."""
    m = action_map(spec)
    return m.low_array, m.high_array
