"""Errors of the Crazyflie deployment tools; each says what was wrong and what to do."""

from __future__ import annotations

from robot_hrl.errors import RobotHrlError


class CodegenError(RobotHrlError):
    """The ONNX model cannot be turned into C code for the Crazyflie."""


class UnsupportedOperatorError(CodegenError):
    """The ONNX graph uses an operator the C code generator does not implement."""


class BudgetError(CodegenError):
    """The generated controller does not fit the flash or RAM budget."""


class ToolchainError(CodegenError):
    """A compiler (gcc, arm-none-eabi-gcc) is missing or failed."""


class FlashError(RobotHrlError):
    """The firmware image is missing or invalid, or no Crazyradio / Crazyflie is reachable."""
