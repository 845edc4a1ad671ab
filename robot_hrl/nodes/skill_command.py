"""The skill node's command output: the robot's command topic, the message of the contract's action mode.

Robot-neutral: the topic and frame come from the robot (``robot.command_output(mode)``: a quadrotor's
``/cmd_wrench``, a differential drive's ``/cmd_vel``), the message type and the field each command
term fills from the action mode (robot_hrl.contract.action_modes: WrenchStamped ``wrench.force.z``,
``wrench.torque.*``; TwistStamped ``twist.linear.x``, ``twist.angular.z``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from robot_hrl.contract.action_modes import get_action_mode
from robot_hrl.errors import ConfigError
from robot_hrl.msgs import message_class
from robot_hrl.nodes.skill_codecs import StampedCommandEncoder, command_message, float64_body


@dataclass(frozen=True)
class CommandChannel:
    """Where and how one robot's command goes."""

    topic: str
    """E.g. ``/cmd_wrench``."""
    message_type: str
    """ROS 2 type, e.g. ``geometry_msgs/msg/WrenchStamped``."""
    fields: tuple[str, ...]
    """The message field each command term fills, in term order."""
    frame_id: str = "base_link"

    @property
    def message_class(self) -> type:
        return message_class(self.message_type)

    def message(self, command, stamp_s: float):
        """The command as a message (the generic path)."""
        return command_message(self.message_type, self.fields, command, stamp_s, self.frame_id)

    @classmethod
    def of(cls, robot, mode: str) -> "CommandChannel":
        """The channel of ``robot`` commanded in action ``mode``; a ConfigError naming what is missing."""
        action_mode = get_action_mode(mode)
        if action_mode.message_type is None or action_mode.message_fields is None:
            raise ConfigError(f"action mode {mode!r} has no command output in this runtime yet "
                              "(robot_hrl.contract.action_modes); the skill node cannot send its commands")
        out = robot.command_output(mode)
        try:
            message_class(action_mode.message_type)
        except Exception as exc:  # noqa: BLE001 - a MessageTypeError naming the known types
            raise ConfigError(f"action mode {mode!r} sends {action_mode.message_type}: {exc}") from None
        return cls(out.topic, action_mode.message_type, action_mode.message_fields, out.frame_id)


class CommandPublisher:
    """Publishes a channel's commands: the pre-encoded CDR bytes through ``Publisher.publish_raw`` when the
    message is a header plus float64 fields (WrenchStamped, TwistStamped), the message through ``publish``
    otherwise."""

    def __init__(self, publisher, channel: CommandChannel):
        self.publisher = publisher
        self.channel = channel
        self._raw = publisher.publish_raw
        self._encoder = None
        if float64_body(self.channel.message_type) is not None:
            self._encoder = StampedCommandEncoder(self.channel.message_type, self.channel.fields, self.channel.frame_id)

    def publish(self, command: np.ndarray, stamp_s: float) -> None:
        if self._encoder is not None:
            self._raw(self._encoder.encode(command, stamp_s))
        else:
            self.publisher.publish(self.channel.message(command, stamp_s))
