"""The crazyflie-goto control step as C (``physics.native``): the fastest CPU path.

``control_step.c`` is the C twin of ``step_core.fused_control_step``; ``build.py`` compiles it for
one configuration with the system C compiler (cached); ``control_step.NativeControlStep`` calls it
on torch tensors. Needs a C compiler (gcc or clang) at run time; nothing else.
"""

from sim.envs.native.build import NativeBuildError, build_library, load_library
from sim.envs.native.control_step import NativeControlStep

__all__ = ["NativeBuildError", "NativeControlStep", "build_library", "load_library"]
