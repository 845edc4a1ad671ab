"""The onboard policy: an exported ONNX model, its contract, and one control tick.

    policy = OnnxPolicy("models/crazyflie_goto.onnx", robot=get_robot("crazyflie_2x"))
    actions = policy.step(state, subgoal_w)      # observation -> inference, remembers the action
    command = policy.to_command(actions)         # the contract's action mapping, e.g. [thrust N, tau_x, tau_y, tau_z N m]

The model file is self-describing: the exporter writes the policy contract into its metadata.
Loading checks the file's SHA-256 sidecar, reads the contract back and refuses a model that
does not match the robot (name, parameter hash, action mode and bounds), control rate or graph
sizes it is started for. The observation terms are resolved in the robot's registry
(``robot.observation_terms()``).

Not thread-safe: one instance per control loop (the single-sample path reuses its buffers).
"""

from __future__ import annotations

import logging
import math
from pathlib import Path
from typing import Any, Mapping

import numpy as np
import onnxruntime as ort

from robot_hrl.contract import CONTRACT_METADATA_KEY, PolicyContract, compute_observation, normalized_to_command
from robot_hrl.contract.error_integral import ErrorIntegrator, integral_terms
from robot_hrl.errors import ContractError, ModelLoadError, ObservationError
from robot_hrl.robots import Robot, default_robot, get_robot
from robot_hrl.robots.articulation import ARTICULATION_KIND, ArticulationRobot
from robot_hrl.runtime.heading import TurnedTerms, turn_observation
from robot_hrl.runtime.integrity import verify_sha256_sidecar
from robot_hrl.runtime.metadata import decode_provenance
from robot_hrl.runtime.providers import SHORT_NAMES, ProviderUnavailableError, log_plan, plan_providers
from robot_hrl.state import RobotState

LOG = logging.getLogger("robot_hrl.runtime")

_STATE_FIELDS = ("position_w", "quat_wxyz", "linear_velocity_w", "angular_velocity_b")
_STATE_SIZES = {"position_w": 3, "quat_wxyz": 4, "linear_velocity_w": 3, "angular_velocity_b": 3}


def session_options(intra_op_threads: int = 1) -> ort.SessionOptions:
    """Latency-first options: one intra-op thread, sequential execution, all graph optimizations."""
    options = ort.SessionOptions()
    options.intra_op_num_threads = intra_op_threads
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.log_severity_level = 3  # errors only; the runtime logs its own provider line
    return options


def _open_session(path: Path, providers: list[Any], options: ort.SessionOptions) -> ort.InferenceSession:
    try:
        return ort.InferenceSession(str(path), options, providers=providers)
    except Exception as exc:  # onnxruntime raises its own C++-bound exception types
        detail = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ModelLoadError(
            f"cannot load {path} as an ONNX model ({type(exc).__name__}: {detail[:300]}). The file is "
            "corrupted, truncated or not an ONNX model: copy it again, or re-export it with "
            "`python deploy/export.py <run-dir> --out <model>.onnx`"
        ) from exc


def read_model_metadata(path: str | Path) -> dict[str, str]:
    """The metadata map of an ONNX model (contract and provenance), read with onnxruntime on the CPU."""
    path = Path(path)
    if not path.is_file():
        raise ModelLoadError(f"model file {path} does not exist; check the path or export the model first")
    session = _open_session(path, ["CPUExecutionProvider"], session_options())
    return dict(session.get_modelmeta().custom_metadata_map)


class OnnxPolicy:
    """An exported policy bound to the robot it is started for.

    Args:
        path: the ``.onnx`` file written by ``deploy/export.py``.
        robot: the robot the policy will run on (a registered :class:`robot_hrl.robots.Robot`, or its name);
            None: the stack's default robot (``robot_hrl.robots.DEFAULT_ROBOT``). The contract must name it,
            its parameter hash, one of its action modes and bounds within its own.
        provider: ``"auto"`` (TensorRT, then CUDA, then CPU), ``"tensorrt"``, ``"cuda"`` or ``"cpu"``.
            A named provider that is unavailable is an error; ``auto`` falls back and logs a line.
        control_rate_hz: the rate the node will tick at; ``None`` accepts the contract's rate.
        verify_sha256: check ``<path>.sha256`` when it exists (a mismatch is refused); a missing one is a loud warning.
        require_sha256: refuse a model without its ``<path>.sha256`` (the launch's parameters turn it on).
        trt_cache_dir: TensorRT engine and timing cache directory (created if missing).
        trt_fp16: let TensorRT build an FP16 engine.
    """

    def __init__(
        self,
        path: str | Path,
        robot: Robot | str | None = None,
        provider: str = "auto",
        control_rate_hz: float | None = None,
        verify_sha256: bool = True,
        require_sha256: bool = False,
        trt_cache_dir: str | Path | None = None,
        trt_fp16: bool = False,
    ) -> None:
        self.path = Path(path)
        if isinstance(robot, str):
            try:
                robot = get_robot(robot)
            except KeyError as exc:
                raise ContractError(str(exc.args[0])) from None
        plan = plan_providers(provider, trt_cache_dir=trt_cache_dir, trt_fp16=trt_fp16)
        if not self.path.is_file():
            raise ModelLoadError(
                f"model file {self.path} does not exist; check the path (the shipped model is "
                "models/crazyflie_goto.onnx) or export one with `python deploy/export.py <run-dir> --out <model>.onnx`"
            )
        self.sha256: str | None = verify_sha256_sidecar(self.path) if verify_sha256 or require_sha256 else None
        if self.sha256 is None and (verify_sha256 or require_sha256):
            sidecar = self.path.name + ".sha256"
            if require_sha256:
                raise ModelLoadError(
                    f"model {self.path} has no checksum file {sidecar} and require_sha256 is on: its integrity cannot "
                    f"be checked. Copy the sidecar with the model, or write it from a trusted copy "
                    f"(`sha256sum {self.path.name} > {sidecar}`), or re-export (deploy/export.py writes both)")
            LOG.warning("MODEL INTEGRITY NOT CHECKED: %s has no checksum file %s; a modified or corrupted model would "
                        "load unnoticed. Copy the sidecar with the model (deploy/export.py writes it); the launch's "
                        "require_sha256 refuses such a model", self.path, sidecar)

        self._session = _open_session(self.path, plan.providers, session_options())
        in_use = self._session.get_providers()[0]
        self.provider: str = SHORT_NAMES.get(in_use, in_use)
        """Short name of the provider that runs the graph: tensorrt, cuda or cpu."""
        if self.provider != plan.primary:
            if plan.requested != "auto":
                raise ProviderUnavailableError(
                    f"execution provider {plan.requested!r} is in this onnxruntime build but failed to start "
                    f"(onnxruntime fell back to {in_use}); check the CUDA/TensorRT libraries, or ask for "
                    "provider='auto' or 'cpu'"
                )
            LOG.warning("execution provider %s failed to start; running on %s", plan.primary, self.provider)
        else:
            log_plan(plan)

        self.metadata: dict[str, str] = dict(self._session.get_modelmeta().custom_metadata_map)
        """Every metadata entry of the model (contract, provenance)."""
        self.contract: PolicyContract = PolicyContract.from_json(self.metadata.get(CONTRACT_METADATA_KEY))
        if robot is None:  # the robot the contract describes (an Isaac Lab articulation), else the stack's default
            robot = ArticulationRobot.from_contract(self.contract) if self.contract.robot.kind == ARTICULATION_KIND else default_robot()
        self.robot: Robot = robot
        self._check_graph_and_contract(control_rate_hz)

        # ---- the hot path: pre-bound single-sample buffers -------------------------------------
        self._in_name = self._session.get_inputs()[0].name
        self._out_name = self._session.get_outputs()[0].name
        self._obs1 = np.zeros((1, self.observation_size), dtype=np.float32)
        self._act1 = np.zeros((1, self.action_size), dtype=np.float32)
        self._binding = self._session.io_binding()
        # OrtValues over the numpy buffers (shared memory on the CPU; copied for GPU providers).
        self._obs1_value = ort.OrtValue.ortvalue_from_numpy(self._obs1)
        self._act1_value = ort.OrtValue.ortvalue_from_numpy(self._act1)
        self._binding.bind_ortvalue_input(self._in_name, self._obs1_value)
        self._binding.bind_ortvalue_output(self._out_name, self._act1_value)
        self._terms = tuple(self.contract.observations)
        self._term_registry = dict(self.robot.observation_terms())
        self._action_spec = self.contract.action
        self._last_action = np.zeros(self.action_size, dtype=np.float64)
        self._inputs: dict[str, np.ndarray] = {"last_action": self._last_action}
        self.last_observation: np.ndarray | None = None
        """The observation of the latest :meth:`step` (for logging and diagnostics)."""
        self.raw_terms: bool = isinstance(self.robot, ArticulationRobot)
        """The deployment computes the observation terms and passes their raw values (:meth:`act_terms`)."""
        self._history: dict[str, list[np.ndarray]] = {}
        self._turned = None  # the observation's world-frame columns, built on the first turned tick (heading loop)
        self._integrators = {t.name: ErrorIntegrator(t.integral, self.contract.control_rate_hz) for t in integral_terms(self._terms)}
        """The contract's stateful terms (the position error's integral): updated by :meth:`observe`, cleared by :meth:`reset`."""

    # ---- loading checks ---------------------------------------------------------------------
    def _check_graph_and_contract(self, control_rate_hz: float | None) -> None:
        inputs, outputs = self._session.get_inputs(), self._session.get_outputs()
        where = f"model {self.path.name}"
        if len(inputs) != 1 or len(outputs) != 1:
            raise ContractError(
                f"{where} has {len(inputs)} inputs and {len(outputs)} outputs; a policy graph takes one "
                "'obs' [batch, n_obs] and gives one 'actions' [batch, n_actions]: re-export it with deploy/export.py"
            )
        in_shape, out_shape = inputs[0].shape, outputs[0].shape
        if inputs[0].type != "tensor(float)" or len(in_shape) != 2 or not isinstance(in_shape[1], int):
            raise ContractError(
                f"{where}: input {inputs[0].name!r} is {inputs[0].type} {in_shape}, expected float32 "
                "[batch, n_obs]; re-export it with deploy/export.py"
            )
        if len(out_shape) != 2 or not isinstance(out_shape[1], int):
            raise ContractError(f"{where}: output {outputs[0].name!r} has shape {out_shape}, expected [batch, n_actions]")
        self._fixed_batch = in_shape[0] if isinstance(in_shape[0], int) else None

        contract = self.contract
        problems = contract.mismatches(
            self.robot,
            control_rate_hz=control_rate_hz,
            observation_size=in_shape[1],
            action_size=out_shape[1],
        )
        from robot_hrl.contract.plausibility import plausibility_problems

        problems.extend(plausibility_problems(contract, self.robot))
        known = self.robot.observation_terms()
        unknown = [t.name for t in contract.observations if t.name not in known]
        if unknown:
            problems.append(
                f"observation terms {unknown} are not implemented by this runtime for robot {self.robot.name!r} "
                f"(known: {sorted(known)}); update robot_hrl"
            )
        if problems:
            raise ContractError(f"{where} does not match this robot: " + "; ".join(problems))

    # ---- description --------------------------------------------------------------------------
    @property
    def observation_size(self) -> int:
        return self.contract.observation_size

    @property
    def action_size(self) -> int:
        return self.contract.action_size

    @property
    def control_rate_hz(self) -> float:
        return self.contract.control_rate_hz

    @property
    def provenance(self) -> dict[str, Any]:
        """How the model was made: command, git_commit, seed, config, eval, checkpoint, export."""
        return decode_provenance(self.metadata)

    @property
    def last_action(self) -> np.ndarray:
        """The normalized action of the latest :meth:`step` (zeros after :meth:`reset`)."""
        return self._last_action.copy()

    def __repr__(self) -> str:
        return (
            f"OnnxPolicy({str(self.path)!r}, skill={self.contract.skill!r}, robot={self.contract.robot.name!r}, "
            f"rate={self.contract.control_rate_hz} Hz, obs={self.observation_size}, actions={self.action_size}, "
            f"provider={self.provider!r})"
        )

    # ---- inference ----------------------------------------------------------------------------
    def _bad_shape(self, x: np.ndarray) -> ObservationError:
        names = ", ".join(f"{t.name}[{t.size}]" for t in self._terms)
        return ObservationError(
            f"observation has shape {x.shape}; this model takes [..., {self.observation_size}] ({names}). "
            "Build observations with robot_hrl.contract.compute_observation or use OnnxPolicy.step"
        )

    def infer(self, obs: np.ndarray) -> np.ndarray:
        """Raw normalized actions in [-1, 1] for observations ``[..., n_obs]`` (float32, same leading shape)."""
        x = obs if type(obs) is np.ndarray and obs.dtype == np.float32 else np.asarray(obs, dtype=np.float32)
        shape = x.shape
        if not shape or shape[-1] != self.observation_size:
            raise self._bad_shape(x)
        if not math.isfinite(x.sum(dtype=np.float64)):
            bad = np.argwhere(~np.isfinite(x))[:3].tolist()
            raise ObservationError(
                f"observation contains NaN or inf (first at index {bad}); the command is withheld. "
                "Check the state estimate and subgoal"
            )
        if len(shape) == 1:
            self._obs1[0] = x
            self._session.run_with_iobinding(self._binding)
            return self._act1[0].copy()
        batch = x.reshape(-1, self.observation_size)
        if self._fixed_batch is not None and batch.shape[0] != self._fixed_batch:
            raise ObservationError(f"this graph has a fixed batch of {self._fixed_batch}; got {batch.shape[0]} observations")
        out = self._session.run([self._out_name], {self._in_name: batch})[0]
        return out.reshape(shape[:-1] + (self.action_size,))

    def observe_terms(self, values: Mapping[str, Any]) -> np.ndarray:
        """The contract's observation from the raw value of each term (one control tick; a term with history
        remembers this value): each clipped to the term's range, then scaled, then stacked with its history
        (oldest first; the first tick after :meth:`reset` fills it), in the contract's order. For a contract whose
        terms the deployment computes (an Isaac Lab task's: ``joint_pos_rel``, ...); an :class:`ObservationError`
        names a missing, unknown, mis-sized or non-finite term."""
        names = [t.name for t in self._terms]
        missing = [n for n in names if n not in values]
        unknown = sorted(str(k) for k in values if k not in names)
        if missing or unknown:
            raise ObservationError(
                f"this model observes the terms {names} (in that order); missing: {missing}, not in its contract: {unknown}. "
                "Pass one raw value per contract term"
            )
        parts, frames = [], {}
        for term in self._terms:
            value = np.asarray(values[term.name], dtype=np.float64)
            if value.shape != (term.frame_size,):
                joints = f" (joints {list(term.joints)})" if term.joints else ""
                raise ObservationError(
                    f"observation term {term.name!r} has shape {value.shape}; the contract says ({term.frame_size},){joints}"
                    + (f", {term.history_length} of which make its {term.size} values with history" if term.history_length else "")
                )
            if not np.all(np.isfinite(value)):
                raise ObservationError(f"observation term {term.name!r} is not finite ({value}); the command is withheld")
            value = np.clip(value, term.clip[0], term.clip[1])
            if term.scale is not None:
                value = value * np.asarray(term.scale, dtype=np.float64)
            frames[term.name] = value
        for term in self._terms:  # every term checked before any history moves
            value = frames[term.name]
            if term.history_length:
                past = self._history.get(term.name)
                past = [value] * term.history_length if past is None else past[1:] + [value]
                self._history[term.name] = past
                value = np.concatenate(past)
            parts.append(value)
        obs = np.concatenate(parts).astype(np.float32)
        if not math.isfinite(obs.sum(dtype=np.float64)):
            raise ObservationError("the observation is not finite after scaling (a term's scale overflows float32); the command is withheld")
        return obs

    def act_terms(self, values: Mapping[str, Any]) -> np.ndarray:
        """One control tick from raw term values (:meth:`observe_terms`): the normalized action (n_actions,);
        map it with :meth:`to_command`."""
        return self._act_on(self.observe_terms(values))

    def observe(self, state: RobotState, subgoal_w: np.ndarray, yaw_offset_rad: float = 0.0) -> np.ndarray:
        """The contract's observation for ``state`` and ``subgoal_w`` (world ENU, m) and the stored last action.

        One call is one control tick: a contract with the position error's integral advances it here (in the world
        frame). ``yaw_offset_rad``: build the observation in a world frame turned by this about z (the heading loop's
        skill frame, robot_hrl.runtime.heading.turn_inputs; 0: the world frame)."""
        if self.raw_terms:
            raise ObservationError(
                f"this model's observation terms {[t.name for t in self._terms]} are computed by its deployment, not from "
                "a RobotState and a subgoal: pass their raw values to OnnxPolicy.act_terms"
            )
        inputs = self._inputs
        total = 0.0
        for name in _STATE_FIELDS:
            value = getattr(state, name)
            if type(value) is not np.ndarray or value.dtype != np.float64:
                value = np.asarray(value, dtype=np.float64)
            if value.shape != (_STATE_SIZES[name],):
                raise ObservationError(
                    f"RobotState.{name} has shape {np.shape(value)}, expected ({_STATE_SIZES[name]},)"
                )
            total += value.sum()
            inputs[name] = value
        if not math.isfinite(total):
            bad = [n for n in _STATE_FIELDS if not np.all(np.isfinite(inputs[n]))]
            raise ObservationError(
                f"RobotState.{', '.join(bad)} is not finite; the command is withheld. Check the state estimate"
            )
        subgoal = subgoal_w if type(subgoal_w) is np.ndarray and subgoal_w.dtype == np.float64 else np.asarray(subgoal_w, dtype=np.float64)
        if subgoal.shape != (3,):
            raise ObservationError(f"subgoal_w has shape {subgoal.shape}, expected (3,): x, y, z in the world frame (m)")
        if not math.isfinite(subgoal.sum()):
            raise ObservationError(f"subgoal_w is not finite ({subgoal}); the command is withheld. Check the planner output")
        inputs["subgoal_w"] = subgoal
        for name, integrator in self._integrators.items():
            inputs[name] = integrator.update(inputs["position_w"], inputs["quat_wxyz"], subgoal)
        # Explicit checks above: the terms clip, which would turn an infinite input into a finite observation.
        obs = compute_observation(self._terms, inputs, self._term_registry)
        if yaw_offset_rad:
            if not math.isfinite(yaw_offset_rad):
                raise ObservationError(f"yaw_offset_rad is not finite ({yaw_offset_rad}); the command is withheld")
            if self._turned is None:
                self._turned = TurnedTerms(self._terms)
            obs = turn_observation(obs, self._turned, float(yaw_offset_rad))
        return obs

    def step(self, state: RobotState, subgoal_w: np.ndarray, yaw_offset_rad: float = 0.0) -> np.ndarray:
        """One control tick: observation, inference; remembers the action for the next observation.

        Returns the normalized action (n_actions,) in [-1, 1]; map it with :meth:`to_command`.
        Raises :class:`ObservationError` for a non-finite or malformed state or subgoal. ``yaw_offset_rad``: see
        :meth:`observe` (the heading loop's).
        """
        return self._act_on(self.observe(state, subgoal_w, yaw_offset_rad))

    def _act_on(self, obs: np.ndarray) -> np.ndarray:
        """Inference on one tick's observation through the bound buffers; a finite action is remembered for the
        next observation. A non-finite output is returned as is (the watchdog shield withholds it) but is not fed back."""
        self.last_observation = obs
        self._obs1[0] = obs
        self._session.run_with_iobinding(self._binding)
        action = self._act1[0].copy()
        if math.isfinite(action.sum(dtype=np.float64)):
            self._last_action[:] = action
        return action

    def to_command(self, actions: np.ndarray) -> np.ndarray:
        """Normalized actions (..., n) -> the robot's command through the contract's action mapping
        (:func:`robot_hrl.contract.normalized_to_command` with ``contract.action``)."""
        return normalized_to_command(self._action_spec, actions)

    def to_wrench(self, actions: np.ndarray) -> np.ndarray:
        """A quadrotor's :meth:`to_command`: [thrust N, tau_x, tau_y, tau_z N m]."""
        return normalized_to_command(self._action_spec, actions)

    def reset(self) -> None:
        """Forget the previous action (start of an episode, after a takeover by the backup controller)."""
        self._last_action[:] = 0.0
        self.last_observation = None
        self._history.clear()
        for integrator in self._integrators.values():
            integrator.reset()
