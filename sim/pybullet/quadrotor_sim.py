"""PyBulletQuadrotorSim: one quadrotor in a PyBullet world, commanded by a body wrench.

The command is what the policy (and the ROS graph's ``/cmd_wrench``) gives:
``[collective thrust N, tau_x, tau_y, tau_z N m]`` in the body FLU frame. Each control period
(``1 / control_hz``) the wrench goes through the robot's actuator chain
(``robot_hrl/robots/<robot>/actuators.py``, the functions the torch and C steps run: the firmware
mixer to rotor speed commands), then ``physics_hz / control_hz`` physics steps integrate the chain's
motor lag and rotor thrusts, applied at the rotor hubs (with ground effect), the rotor drag torque,
linear drag and gravity. See ``physics.py``.

Frames: world ENU, body FLU. ``state()`` returns the linear velocity in the world frame and the
body rates in the BODY frame (PyBullet reports the world-frame angular velocity; it is rotated).
"""

from __future__ import annotations

import contextlib
import math
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np


@contextlib.contextmanager
def _quiet_stdout():
    """PyBullet's C code prints banners ('pybullet build time', 'argv[0]=') on the process's
    stdout and stderr: silence fds 1 and 2 while it is imported and connected (Python exceptions
    still propagate)."""
    import sys

    saved = []
    try:
        for fd in (1, 2):
            saved.append((fd, os.dup(fd)))
    except OSError:  # no usable stdout/stderr
        for _, dup in saved:
            os.close(dup)
        yield
        return
    try:
        with open(os.devnull, "w") as devnull:
            sys.stdout.flush()
            sys.stderr.flush()
            for fd, _ in saved:
                os.dup2(devnull.fileno(), fd)
            yield
    finally:
        _flush_c_stdio()
        for fd, dup in saved:
            os.dup2(dup, fd)
            os.close(dup)


def _flush_c_stdio() -> None:
    try:
        import ctypes

        ctypes.CDLL(None).fflush(None)
    except (OSError, AttributeError):
        pass


with _quiet_stdout():
    import pybullet
    from pybullet_utils import bullet_client

from robot_hrl.contract.goto import DEFAULT_CONTROL_RATE_HZ
from robot_hrl.geometry import (
    quat_normalize,
    quat_wxyz_from_xyzw,
    quat_xyzw_from_wxyz,
    rotation_matrix_from_quat,
)
from robot_hrl.perception.camera import PinholeCamera
from robot_hrl.robots import CRAZYFLIE_2X
from robot_hrl.robots.actuator_chain import MATH, chain_of
from robot_hrl.robots.quadrotor import STANDARD_GRAVITY_MPS2, QuadrotorParams
from robot_hrl.state import RobotState
from robot_hrl.world.world import World, load_world
from sim.pybullet import camera as camera_render
from sim.pybullet import physics
from sim.pybullet.randomization import Dynamics, RandomizationCfg
from sim.pybullet.scene import GROUND_NAME, build_world
from sim.pybullet.urdf import write_urdf

MIN_PHYSICS_HZ = 240.0
"""Below this the motor lag (tau down to 0.02 s) and contacts are integrated too coarsely."""
_HIDDEN_DEPTH_M = -1.0e4
"""Where the robot is parked while its own camera renders (out of view, under the ground)."""


def check_rates(physics_hz: float, control_hz: float) -> int:
    """Validate the rates; returns the number of physics steps per control step."""
    for label, value in (("physics_hz", physics_hz), ("control_hz", control_hz)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
            raise ValueError(f"{label} must be a positive finite number, got {value!r}")
    if physics_hz < MIN_PHYSICS_HZ:
        raise ValueError(f"physics_hz={physics_hz} is below {MIN_PHYSICS_HZ:g} Hz; use 500 (the default) or more")
    ratio = physics_hz / control_hz
    if ratio < 1 or abs(ratio - round(ratio)) > 1e-9:
        raise ValueError(
            f"physics_hz={physics_hz} must be an integer multiple of control_hz={control_hz} "
            f"(e.g. physics_hz={control_hz * max(1, math.ceil(MIN_PHYSICS_HZ / control_hz)):g})"
        )
    return int(round(ratio))


@dataclass(frozen=True)
class Contact:
    """One contact point between the robot and something in the scene."""

    body: str
    """Name of what was touched: 'ground', an obstacle name or a landmark id."""
    position_w: tuple[float, float, float]
    """Contact point on the robot, world frame, m."""
    normal_w: tuple[float, float, float]
    """Contact normal (from the other body towards the robot), world frame."""
    distance_m: float
    """Penetration (negative) or separation."""
    normal_force_n: float
    time_s: float


class PyBulletQuadrotorSim:
    """A quadrotor in PyBullet, stepped one control period at a time.

    Args:
        robot: the airframe (``robot_hrl.robots``); its URDF is generated from it.
        world: a ``World``, a path to a world YAML, or None for an empty ground plane.
        physics_hz: physics rate; an integer multiple of ``control_hz``, at least 240 Hz.
        control_hz: rate of ``step`` (the policy rate of the contract).
        gui: open the PyBullet GUI instead of the headless DIRECT mode.
        camera: a ``PinholeCamera`` to enable ``camera_image()``; None disables it.
        seed: seeds the randomization.
        randomization: a ``RandomizationCfg``; None flies the nominal robot.
        ground_effect: model the ground effect (the robot's published coefficients); False
            switches it off, e.g. to attribute a sim-to-sim gap.
    """

    def __init__(
        self,
        robot: QuadrotorParams = CRAZYFLIE_2X,
        world: World | str | Path | None = None,
        physics_hz: float = 500.0,
        control_hz: float = DEFAULT_CONTROL_RATE_HZ,
        gui: bool = False,
        camera: PinholeCamera | None = None,
        seed: int | None = None,
        randomization: RandomizationCfg | None = None,
        ground_effect: bool = True,
    ) -> None:
        if not isinstance(robot, QuadrotorParams):
            raise TypeError(f"robot must be a robot_hrl.robots.QuadrotorParams, got {type(robot).__name__}")
        ratio = check_rates(physics_hz, control_hz)
        if camera is not None and not isinstance(camera, PinholeCamera):
            raise TypeError(f"camera must be a robot_hrl.perception.PinholeCamera or None, got {type(camera).__name__}")
        if randomization is not None and not isinstance(randomization, RandomizationCfg):
            raise TypeError(f"randomization must be a sim.pybullet.RandomizationCfg or None, got {type(randomization).__name__}")
        if isinstance(world, (str, Path)):
            world = load_world(world)
        elif world is not None and not isinstance(world, World):
            raise TypeError(f"world must be a robot_hrl.world.World, a path to a world YAML, or None; got {type(world).__name__}")

        self.robot = robot
        self.world = world
        self.physics_hz = float(physics_hz)
        self.control_hz = float(control_hz)
        self.substeps = int(round(ratio))
        self.dt_physics_s = 1.0 / self.physics_hz
        self.camera = camera
        self.randomization = randomization
        self.ground_effect = bool(ground_effect)
        self._rng = np.random.default_rng(seed)

        if gui:
            if os.name == "posix" and not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")):
                raise RuntimeError("gui=True needs a display (DISPLAY is not set); run headless (gui=False) "
                                   "or under a desktop session / X forwarding")
            self._bullet = bullet_client.BulletClient(connection_mode=pybullet.GUI)
        else:
            with _quiet_stdout():
                self._bullet = bullet_client.BulletClient(connection_mode=pybullet.DIRECT)
        b = self._bullet
        if gui:
            b.configureDebugVisualizer(b.COV_ENABLE_GUI, 0)
        b.setGravity(0.0, 0.0, -STANDARD_GRAVITY_MPS2)
        b.setTimeStep(self.dt_physics_s)
        self._names = build_world(b, world)
        self.urdf_path = write_urdf(robot)
        self.body_id = b.loadURDF(str(self.urdf_path), basePosition=[0, 0, 1], flags=b.URDF_USE_INERTIA_FROM_FILE)
        # PyBullet damps every body by default (0.04); the airframe's only drag is the model's own.
        b.changeDynamics(self.body_id, -1, linearDamping=0.0, angularDamping=0.0)

        self._cid = b._client
        self._chain = chain_of(robot.name)
        self._k = self._chain.constants(robot)
        self.dynamics = Dynamics.nominal(robot)
        self._rotor_positions_b = np.asarray(robot.rotor_positions_m, dtype=np.float64)
        self._rotor_positions_list = [tuple(map(float, r)) for r in robot.rotor_positions_m]
        self._num_rotors = robot.num_rotors
        self._apply_dynamics()
        self._chain_state = self._chain.initial_state(self.dynamics.mass_kg * STANDARD_GRAVITY_MPS2, self._derived, self._k, MATH)
        self._command = self._chain.hold_command(self._chain_state, self._derived, self._k, MATH)
        self._pending: list[np.ndarray] = []
        self._thrusts = np.zeros(robot.num_rotors)
        self._time_s = 0.0
        self._contacts: list[Contact] = []
        self._collided = False
        self._closed = False
        self.reset((0.0, 0.0, 1.0))

    # ---- lifecycle --------------------------------------------------------------------------
    def reset(
        self,
        position_w,
        quat_wxyz=(1.0, 0.0, 0.0, 0.0),
        linear_velocity_w=0.0,
        angular_velocity_b=0.0,
        motor_rpm=None,
    ) -> RobotState:
        """Place the robot; rotors start at ``motor_rpm`` (default: the hover speed of the airframe).

        With randomization, a new airframe is sampled here.
        """
        self._check_open()
        pos = _vector("position_w", position_w, 3)
        quat = _vector("quat_wxyz", quat_wxyz, 4)
        if np.linalg.norm(quat) < 1e-6:
            raise ValueError(f"quat_wxyz {quat.tolist()} has zero norm; give a unit quaternion (w, x, y, z)")
        quat = quat_normalize(quat)
        vel = _vector("linear_velocity_w", linear_velocity_w, 3)
        rates_b = _vector("angular_velocity_b", angular_velocity_b, 3)
        rpm = None if motor_rpm is None else _vector("motor_rpm", motor_rpm, self.robot.num_rotors)
        b = self._bullet
        if self.randomization is not None:
            self.dynamics = Dynamics.sample(self.robot, self.randomization, self._rng)
            b.changeDynamics(self.body_id, -1, mass=self.dynamics.mass_kg,
                             localInertiaDiagonal=list(self.dynamics.inertia_kgm2))
        self._apply_dynamics()
        b.resetBasePositionAndOrientation(self.body_id, pos.tolist(), quat_xyzw_from_wxyz(quat).tolist())
        rates_w = rotation_matrix_from_quat(quat) @ rates_b
        b.resetBaseVelocity(self.body_id, vel.tolist(), rates_w.tolist())
        # the chain's state: the airframe holding its weight, or the given rotor speeds
        state = dict(self._chain.initial_state(self.dynamics.mass_kg * STANDARD_GRAVITY_MPS2, self._derived, self._k, MATH))
        if rpm is not None:
            state["rotor_speed_rpm"] = tuple(float(v) for v in np.clip(rpm, self.robot.rpm_min, self.robot.rpm_max))
        self._chain_state = state
        self._command = self._chain.hold_command(state, self._derived, self._k, MATH)  # until the first wrench takes effect
        self._pending = []
        self._thrusts = np.zeros(self.robot.num_rotors)
        self._time_s = 0.0
        self._contacts = []
        self._collided = False
        return self.state()

    def close(self) -> None:
        """Disconnect from PyBullet; safe to call twice."""
        if not self._closed:
            self._closed = True
            try:
                self._bullet.disconnect()
            except pybullet.error:
                pass

    def __enter__(self) -> "PyBulletQuadrotorSim":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self) -> None:  # pragma: no cover - best effort
        try:
            if hasattr(self, "_bullet"):
                self.close()
        except Exception:
            pass

    # ---- stepping ---------------------------------------------------------------------------
    def step(self, wrench) -> RobotState:
        """Hold ``wrench`` = [thrust N, tau_x, tau_y, tau_z N m] (body) for one control period."""
        self._check_open()
        w = _vector("wrench", wrench, 4)
        self._pending.append(w)
        # Action latency (randomization): the wrench given `latency` steps ago takes effect now;
        # until then the rotors hold the speeds they had at reset.
        if len(self._pending) > self.dynamics.action_latency_steps:
            wrench = tuple(float(v) for v in self._pending.pop(0))
            self._command = self._chain.command(wrench, self._chain_state, self._derived, self._k, MATH)
        self._contacts = []
        for _ in range(self.substeps):
            self._physics_step()
        return self.state()

    def _physics_step(self) -> None:
        # The hot loop: raw pybullet calls with the client id (BulletClient's wrapper costs more
        # than the physics of one body).
        p, cid, body = pybullet, self._cid, self.body_id
        sub = self._chain.substep(self._chain_state, self._command, self._derived, self._k, MATH)
        self._chain_state = sub.state
        pos, orn = p.getBasePositionAndOrientation(body, physicsClientId=cid)
        r_wb = np.asarray(p.getMatrixFromQuaternion(orn, physicsClientId=cid)).reshape(3, 3)
        thrusts = np.asarray(sub.rotor_thrusts_n)
        hub_heights = pos[2] + self._rotor_positions_b @ r_wb[2]
        lifted = thrusts * physics.ground_effect_gain(self.robot, hub_heights, r_wb[2, 2]) if self.ground_effect else thrusts
        self._thrusts = lifted
        for i in range(self._num_rotors):
            p.applyExternalForce(body, -1, (0.0, 0.0, float(lifted[i])), self._rotor_positions_list[i],
                                 p.LINK_FRAME, physicsClientId=cid)
        # Rotor drag torque from the rotors' own thrust (ground effect changes lift, not rotor drag); the
        # thrust moments come from applying the thrusts at the hubs.
        torque_b = self._disturbance_torque_b.copy()
        torque_b[2] += float(sub.torque_b[2])
        p.applyExternalTorque(body, -1, (r_wb @ torque_b).tolist(), p.WORLD_FRAME, physicsClientId=cid)
        force_w = self._disturbance_force_w
        if self._has_drag:
            vel_w, _ = p.getBaseVelocity(body, physicsClientId=cid)
            force_w = force_w + r_wb @ physics.linear_drag_force_b(self._drag, r_wb.T @ np.asarray(vel_w))
        if self._has_force or self._has_drag:
            p.applyExternalForce(body, -1, force_w.tolist(), pos, p.WORLD_FRAME, physicsClientId=cid)
        p.stepSimulation(physicsClientId=cid)
        self._time_s += self.dt_physics_s
        self._record_contacts()

    def _apply_dynamics(self) -> None:
        """Cache what the hot loop needs from ``self.dynamics``: the chain's derived quantities and the disturbances."""
        dyn = self.dynamics
        self._derived = self._chain.derive(dyn.chain_parameters, self._k, self.dt_physics_s, MATH)
        self._disturbance_torque_b = np.asarray(dyn.disturbance_torque_b, dtype=np.float64)
        self._disturbance_force_w = np.asarray(dyn.disturbance_force_w, dtype=np.float64)
        self._has_force = bool(np.any(self._disturbance_force_w != 0.0))
        self._drag = np.asarray(dyn.linear_drag_coefficient_ns_per_m, dtype=np.float64)
        self._has_drag = bool(np.any(self._drag > 0.0))

    def _record_contacts(self) -> None:
        for c in pybullet.getContactPoints(bodyA=self.body_id, physicsClientId=self._cid):
            name = self._names.get(c[2], f"body{c[2]}")
            self._contacts.append(Contact(body=name, position_w=tuple(c[5]), normal_w=tuple(c[7]),
                                          distance_m=float(c[8]), normal_force_n=float(c[9]), time_s=self._time_s))
            if name != GROUND_NAME:
                self._collided = True

    # ---- queries ----------------------------------------------------------------------------
    @property
    def time_s(self) -> float:
        """Simulated time since the last reset, s."""
        return self._time_s

    def state(self) -> RobotState:
        """Pose and twist: position/velocity world ENU, body rates in the body FLU frame."""
        self._check_open()
        cid = self._cid
        pos, quat_xyzw = pybullet.getBasePositionAndOrientation(self.body_id, physicsClientId=cid)
        vel_w, rates_w = pybullet.getBaseVelocity(self.body_id, physicsClientId=cid)
        quat = quat_wxyz_from_xyzw(np.asarray(quat_xyzw, dtype=np.float64))
        r_wb = np.asarray(pybullet.getMatrixFromQuaternion(quat_xyzw, physicsClientId=cid)).reshape(3, 3)
        rates_b = r_wb.T @ np.asarray(rates_w, dtype=np.float64)
        return RobotState(position_w=np.asarray(pos, dtype=np.float64), quat_wxyz=quat,
                          linear_velocity_w=np.asarray(vel_w, dtype=np.float64), angular_velocity_b=rates_b,
                          stamp_s=self._time_s)

    @property
    def hover_rpm(self) -> float:
        """Rotor speed that carries the current (possibly randomized) airframe's weight, rpm."""
        state = self._chain.initial_state(self.dynamics.mass_kg * STANDARD_GRAVITY_MPS2, self._derived, self._k, MATH)
        return float(state["rotor_speed_rpm"][0])

    @property
    def motor_rpm(self) -> np.ndarray:
        """Actual rotor speeds (after motor lag), firmware order M1..M4, rpm."""
        return np.asarray(self._chain_state["rotor_speed_rpm"], dtype=np.float64)

    @property
    def motor_rpm_command(self) -> np.ndarray:
        """The actuator chain's motor commands of the last step: for the Crazyflie the firmware's PWM (0..65535, after
        the mixer, the battery compensation and the cap); rpm for a chain that commands rotor speeds."""
        return np.asarray(self._command, dtype=np.float64)

    @property
    def chain_state(self) -> dict:
        """The actuator chain's state (``robot_hrl.robots.<robot>.actuators.STATE``) by name."""
        return dict(self._chain_state)

    @property
    def rotor_thrusts_n(self) -> np.ndarray:
        """Rotor thrusts of the last physics step including ground effect, N (zeros before the first step)."""
        return self._thrusts.copy()

    def collisions(self) -> list[Contact]:
        """Contacts (ground included) during the last ``step`` (every physics substep)."""
        return list(self._contacts)

    def collided(self) -> bool:
        """True once the robot has touched an obstacle or landmark since the last reset (ground excluded)."""
        return self._collided

    def camera_image(self) -> tuple[np.ndarray, np.ndarray]:
        """Onboard camera: (rgb uint8 HxWx3, depth_m float32 HxW along the optical axis)."""
        self._check_open()
        if self.camera is None:
            raise RuntimeError("this simulator has no camera; pass camera=PinholeCamera(...) to PyBulletQuadrotorSim")
        b = self._bullet
        pos, orn = b.getBasePositionAndOrientation(self.body_id)
        vel, rates = b.getBaseVelocity(self.body_id)
        # The lens sits inside the airframe: take the robot out of its own view while rendering.
        b.resetBasePositionAndOrientation(self.body_id, [0.0, 0.0, _HIDDEN_DEPTH_M], orn)
        try:
            return camera_render.render(b, self.camera, np.asarray(pos), quat_wxyz_from_xyzw(np.asarray(orn)))
        finally:
            b.resetBasePositionAndOrientation(self.body_id, pos, orn)
            b.resetBaseVelocity(self.body_id, vel, rates)

    @property
    def bullet(self):
        """The PyBullet client (for debugging and extra bodies)."""
        return self._bullet

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError("the simulator was closed; create a new PyBulletQuadrotorSim")


def _vector(label: str, value, size: int) -> np.ndarray:
    arr = np.asarray(value, dtype=np.float64)
    if arr.ndim == 0:
        arr = np.full(size, float(arr))
    if arr.shape != (size,):
        raise ValueError(f"{label} must have {size} elements, got shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{label} must be finite, got {arr.tolist()}")
    return arr
