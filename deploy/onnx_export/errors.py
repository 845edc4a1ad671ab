"""The exporter's error."""

from robot_hrl.errors import RobotHrlError


class ExportError(RobotHrlError):
    """A run cannot be exported, or the exported graph fails its self-check."""
