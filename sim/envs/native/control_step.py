"""``NativeControlStep``: ``step_core.fused_control_step`` run by the C kernel (control_step.c).

A drop-in for the compiled graph on the CPU: the same call, the same structure-of-arrays state,
the same counter-based random streams, the same results to float rounding
(tests/test_sim_native.py). The outputs live in two sets of buffers owned by the step, used in
turn: a step's outputs (observations, rewards, flags, the new state) stay valid until the step
after the next one overwrites them, as Isaac Lab's environments reuse their reward and reset
buffers. Consumers that keep them longer must clone them (rsl_rl's rollout storage copies).
"""

from __future__ import annotations

import ctypes
from typing import NamedTuple

import torch

from robot_hrl.errors import ConfigError
from sim.envs.native.build import load_library
from sim.envs.step_constants import FusedConstants

_STATS = 5
_STATE_OUTPUTS = ("state_out", "params_out", "latency_out", "length_out")


class _Outputs(ctypes.Structure):
    """control_step.c's ``StepOutputs``: the output pointers, in the C struct's order."""

    _fields_ = [(name, ctypes.c_void_p) for name in (
        "state_out", "params_out", "latency_out", "length_out", "reward", "dones", "dones_long", "time_out", "crashed",
        "out_of_bounds", "distance", "speed", "success", "rms", "length_end", "obs_rows", "action_rows", "stats", "block_stats",
    )]


class _BufferSet(NamedTuple):
    """One set of output tensors, the C struct pointing at them, and the step's result tuple (the same
    tensor objects every time, so that callers can cache what they build on them)."""

    tensors: dict
    struct: _Outputs
    state_pointers: frozenset
    result: tuple


class NativeControlStep:
    """``fused_control_step`` for ``num_envs`` environments of one configuration, as compiled C.

    Args:
        f: the environment's ``FusedConstants`` (every value becomes a compile-time constant).
        num_envs: the batch size the buffers are made for.
        device: must be the CPU.
    """

    def __init__(self, f: FusedConstants, num_envs: int, device: torch.device | str = "cpu"):
        if torch.device(device).type != "cpu":
            raise ConfigError(f"physics.native runs on the CPU, not {device}; on a GPU use physics.compile")
        self.constants = f
        self.num_envs = int(num_envs)
        lib, self.library_path = load_library(f)
        self._step = lib.robot_hrl_control_step
        self._step.restype = ctypes.c_int
        self._step.argtypes = ([ctypes.c_int64, ctypes.c_int] + [ctypes.c_void_p] * 5
                               + [ctypes.POINTER(ctypes.c_float), ctypes.POINTER(ctypes.c_int32), ctypes.POINTER(_Outputs)])
        self._lib = lib  # keeps the library loaded
        self._buffers = (self._allocate(), self._allocate())
        self._scalars = (ctypes.c_float * 4)()
        self._keys = (ctypes.c_int32 * 2)()

    def _allocate(self) -> _BufferSet:
        n, f = self.num_envs, self.constants
        rows, na = f.layout.num_rows, f.layout.num_actions
        obs = len(f.obs_low)
        blocks = (n + 255) // 256
        f32, u8, i64 = torch.float32, torch.uint8, torch.int64
        shapes = {
            "state_out": ((rows, n), f32), "params_out": ((f.layout.num_params, n), f32), "latency_out": ((n,), i64),
            "length_out": ((n,), i64), "reward": ((n,), f32), "dones": ((n,), u8), "dones_long": ((n,), i64),
            "time_out": ((n,), u8), "crashed": ((n,), u8), "out_of_bounds": ((n,), u8), "distance": ((n,), f32),
            "speed": ((n,), f32), "success": ((n,), u8), "rms": ((n,), f32), "length_end": ((n,), i64),
            "obs_rows": ((2 * obs + f.layout.privileged_size, n), f32), "action_rows": ((na, n), f32), "stats": ((_STATS,), f32),
            "block_stats": ((blocks * _STATS,), torch.float64),
        }
        t = {name: torch.zeros(shape, dtype=dtype) for name, (shape, dtype) in shapes.items()}
        struct = _Outputs(**{name: v.data_ptr() for name, v in t.items()})
        rows = t["obs_rows"]
        result = (t["state_out"], t["params_out"], t["latency_out"], t["length_out"], t["reward"], t["dones"], t["dones_long"],
                  t["time_out"], t["crashed"], t["out_of_bounds"], t["distance"], t["speed"], t["success"], t["rms"],
                  t["length_end"], rows[:obs].t(), rows[obs:].t(), t["stats"], rows, t["action_rows"])
        return _BufferSet(t, struct, frozenset(t[k].data_ptr() for k in _STATE_OUTPUTS), result)

    def __call__(
        self, f: FusedConstants, actions: torch.Tensor, state: torch.Tensor, params: torch.Tensor,
        latency_steps: torch.Tensor, episode_length: torch.Tensor, scalars: torch.Tensor, keys: torch.Tensor,
    ) -> tuple:
        """``fused_control_step(f, actions, state, params, latency_steps, episode_length, scalars, keys)``."""
        if f is not self.constants and f != self.constants:
            raise ConfigError("this NativeControlStep was built for other FusedConstants; build one per configuration")
        return self.step_numbers(actions, state, params, latency_steps, episode_length, tuple(scalars.tolist()), tuple(keys.tolist()))[1]

    def step_numbers(
        self, actions: torch.Tensor, state: torch.Tensor, params: torch.Tensor, latency_steps: torch.Tensor,
        episode_length: torch.Tensor, scalars: tuple, keys: tuple,
    ) -> tuple[int, tuple]:
        """The step with the scalars and keys as numbers; returns (the buffer set written, 0 or 1; the outputs).

        The outputs of a buffer set are the same tensor objects every time, so a caller can build its views
        of them once per set (``GotoEnv`` does)."""
        n, na = self.num_envs, self.constants.layout.num_actions
        if actions.shape != (n, na):
            raise ValueError(f"actions must have shape ({n}, {na}), got {tuple(actions.shape)}")
        actions, state, params = _as(actions, torch.float32), _as(state, torch.float32), _as(params, torch.float32)
        latency_steps, episode_length = _as(latency_steps, torch.int64), _as(episode_length, torch.int64)
        # the inputs are normally the last step's outputs: write the other set
        inputs = {state.data_ptr(), params.data_ptr(), latency_steps.data_ptr(), episode_length.data_ptr()}
        slot = 0 if inputs.isdisjoint(self._buffers[0].state_pointers) else 1
        out = self._buffers[slot]
        if not inputs.isdisjoint(out.state_pointers):
            raise ValueError("the state, parameter, latency and episode-length inputs mix the outputs of two different steps; "
                             "pass those of one step (or clones)")
        self._scalars[:] = scalars
        self._keys[:] = keys
        self._step(
            n, torch.get_num_threads(), actions.data_ptr(), state.data_ptr(), params.data_ptr(), latency_steps.data_ptr(),
            episode_length.data_ptr(), self._scalars, self._keys, ctypes.byref(out.struct),
        )
        return slot, out.result


def _as(t: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """``t`` as a contiguous CPU tensor of ``dtype`` (itself when it already is one)."""
    if t.dtype != dtype or t.device.type != "cpu":
        t = t.to("cpu", dtype)
    return t if t.is_contiguous() else t.contiguous()
