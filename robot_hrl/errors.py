"""Exceptions with messages that say what was wrong and what to do about it."""


class RobotHrlError(Exception):
    """Base class of the stack's own errors."""


class ContractError(RobotHrlError):
    """A policy contract is missing, malformed, or does not match the robot."""


class ModelLoadError(RobotHrlError):
    """A model file is missing, corrupted, or fails its integrity check."""


class ObservationError(RobotHrlError):
    """A state or observation is non-finite or has the wrong size."""


class WorldError(RobotHrlError):
    """A world or map file is malformed or inconsistent."""


class PlanningError(RobotHrlError):
    """A task cannot be planned (unreachable goal, unknown landmark, outside the map)."""


class ConfigError(RobotHrlError):
    """A configuration file is invalid."""
