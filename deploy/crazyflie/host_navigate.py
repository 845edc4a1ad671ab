"""The generated navigate level (``nav_io.c``, ``nav_model.c``) called through ctypes from the host build.

:meth:`HostController.build` compiles every source of a project, the level's included when it was generated
with ``--navigate``; :class:`HostNavigator` binds the level's functions in that library:

    lib = HostController.build(project, tmp_dir)
    nav = HostNavigator(lib)
    nav.reset(); nav.sense(p, q, ranges); subgoal, ok = nav.decide(p, q, v, goal)

A recurrent level's ``nav_forward(in, state, out)`` is called by :meth:`HostNavigator.forward` with the state given
(``[1, batch, H]`` as onnxruntime takes it) and returns the next one; ``navDecide`` keeps its own (``navState``).
"""

from __future__ import annotations

import ctypes

import numpy as np

from deploy.crazyflie.errors import CodegenError
from deploy.crazyflie.host import HostController

_F32P = np.ctypeslib.ndpointer(dtype=np.float32, flags="C_CONTIGUOUS")


def _f32(x, n: int) -> np.ndarray:
    return np.ascontiguousarray(np.asarray(x, dtype=np.float32).reshape(n))


class HostNavigator:
    """The level's C functions in a host build of the project."""

    def __init__(self, host: HostController):
        level = host.project.navigate
        if level is None:
            raise CodegenError("the project has no navigate level: generate it with navigate=<level .onnx> (--navigate)")
        self.n_obs, self.n_rangers = level.contract.observation_size, len(level.sensors)
        self.state_size = level.model.state_size
        """H of a recurrent level's state (0: feed-forward)."""
        lib = host.lib
        lib.navReset.restype = None
        lib.navSense.argtypes = [_F32P, _F32P, _F32P]
        lib.navSense.restype = ctypes.c_bool
        lib.navBuildObservation.argtypes = [_F32P, _F32P, _F32P, _F32P, _F32P]
        lib.navBuildObservation.restype = ctypes.c_bool
        lib.navActionToSubgoal.argtypes = [_F32P, _F32P, _F32P, _F32P]
        lib.navDecide.argtypes = [_F32P, _F32P, _F32P, _F32P, _F32P]
        lib.navDecide.restype = ctypes.c_bool
        lib.navDecisions.restype = ctypes.c_uint32
        lib.nav_forward.argtypes = [_F32P, _F32P, _F32P] if self.state_size else [_F32P, _F32P]
        self.lib = lib

    def reset(self) -> None:
        self.lib.navReset()

    def sense(self, position_w, quat_wxyz, ranges_m) -> bool:
        return bool(self.lib.navSense(_f32(position_w, 3), _f32(quat_wxyz, 4), _f32(ranges_m, self.n_rangers)))

    def observation(self, position_w, quat_wxyz, velocity_w, goal_w) -> tuple[np.ndarray, bool]:
        obs = np.zeros(self.n_obs, dtype=np.float32)
        ok = self.lib.navBuildObservation(_f32(position_w, 3), _f32(quat_wxyz, 4), _f32(velocity_w, 3), _f32(goal_w, 3), obs)
        return obs, bool(ok)

    def action_to_subgoal(self, action, position_w, quat_wxyz) -> np.ndarray:
        out = np.zeros(3, dtype=np.float32)
        self.lib.navActionToSubgoal(_f32(action, 2), _f32(position_w, 3), _f32(quat_wxyz, 4), out)
        return out

    def decide(self, position_w, quat_wxyz, velocity_w, goal_w) -> tuple[np.ndarray, bool]:
        out = np.full(3, np.nan, dtype=np.float32)
        ok = self.lib.navDecide(_f32(position_w, 3), _f32(quat_wxyz, 4), _f32(velocity_w, 3), _f32(goal_w, 3), out)
        return out, bool(ok)

    def forward(self, obs: np.ndarray, state: np.ndarray | None = None):
        """``nav_forward`` on each row of ``obs`` (batch, n_obs) -> the actions (batch, 2). A recurrent level: from
        ``state`` ([1, batch, H]; None: zeros) -> ``(actions, next state [1, batch, H])``, as onnxruntime's session."""
        x = np.ascontiguousarray(obs, dtype=np.float32).reshape(-1, self.n_obs)
        out = np.zeros((len(x), 2), dtype=np.float32)
        if not self.state_size:
            if state is not None:
                raise CodegenError("the level is feed-forward: nav_forward takes no state")
            for k in range(len(x)):
                row = np.zeros(2, dtype=np.float32)
                self.lib.nav_forward(np.ascontiguousarray(x[k]), row)
                out[k] = row
            return out
        h = np.zeros((len(x), self.state_size), np.float32) if state is None else np.asarray(state, np.float32)
        h = np.array(h.reshape(len(x), self.state_size), dtype=np.float32)  # a copy: the C updates it in place
        for k in range(len(x)):
            row, hk = np.zeros(2, dtype=np.float32), np.ascontiguousarray(h[k])
            self.lib.nav_forward(np.ascontiguousarray(x[k]), hk, row)
            out[k], h[k] = row, hk
        return out, h[None]

    @property
    def decisions(self) -> int:
        return int(self.lib.navDecisions())


class HostNavigatorTask:
    """The level's app task (``nav_task.c``) in a host build, with the firmware stand-ins of
    ``firmware_stubs/nav_task_stub.c``: the state estimate and the ranges go in, the commander's setpoints come out;
    parameters are written through their addresses, as the parameter service does."""

    STATE_NAMES = ("x", "y", "z", "vx", "vy", "vz", "qw", "qx", "qy", "qz")

    def __init__(self, host: HostController):
        lib = host.lib
        lib.navTaskStep.restype = None
        lib.stubNavSetRanges.argtypes = [_F32P]
        lib.stubNavSetState.argtypes = [_F32P]
        lib.stubNavSetpoint.argtypes = [_F32P]
        lib.stubNavSetpoint.restype = ctypes.c_int
        self.lib = lib

    def set_param(self, name: str, value) -> None:
        address = ctypes.c_void_p.in_dll(self.lib, f"stubParam_{name}").value
        ctype = ctypes.c_uint8 if name == "navEnable" else ctypes.c_float
        ctype.from_address(address).value = value

    def log(self, name: str):
        address = ctypes.c_void_p.in_dll(self.lib, f"stubLog_{name}").value
        ctype = {"navState": ctypes.c_uint8, "decisions": ctypes.c_uint32, "refused": ctypes.c_uint32}.get(name, ctypes.c_float)
        return ctype.from_address(address).value

    def step(self, position_w, quat_wxyz, velocity_w, ranges_m) -> None:
        """One 100 ms step of the task with this state estimate and these ``rangeGet`` values (range.h order)."""
        state = np.r_[np.asarray(position_w, dtype=np.float64), np.asarray(velocity_w, dtype=np.float64),
                      np.asarray(quat_wxyz, dtype=np.float64)]
        self.lib.stubNavSetState(np.ascontiguousarray(state, dtype=np.float32))
        self.lib.stubNavSetRanges(np.ascontiguousarray(np.asarray(ranges_m, dtype=np.float32).reshape(6)))
        self.lib.navTaskStep()

    def setpoint(self) -> tuple[np.ndarray, tuple[int, int, int], int, int]:
        """(position, modes x y z, priority, setpoints sent so far) of the commander's last setpoint."""
        out = np.zeros(7, dtype=np.float32)
        n = self.lib.stubNavSetpoint(out)
        return out[:3].astype(np.float64), (int(out[3]), int(out[4]), int(out[5])), int(out[6]), int(n)
