"""The heading loop: the robot turns to face where it flies, so its front ranger looks along its path.

A Crazyflie's Multi-ranger deck sees four 27-degree cones (robot_hrl/robots/crazyflie_2x/rangers.py); between them
lie 63-degree blind sectors, and a pillar met inside one is seen only at arm's length (benchmarks/README.md, "Issue
#19: facing the motion"). This loop owns the yaw torque of a ``collective_thrust_body_torque`` command: it replaces
the skill's ``torque_z`` by a PD law on the yaw toward a setpoint that turns toward the horizontal velocity at
``max_rate_radps``. The skill keeps its thrust and roll/pitch torques (a quadrotor's yaw is decoupled from them in
the mixer, crazyflie-firmware ``power_distribution_quadrotor.c``), and still observes its own last action, as the
runtime's ``OnnxPolicy`` keeps it.

**The skill's frame.** The goto skill has no yaw command: its reward has no yaw term, it is trained from random
yaws, and it observes world-frame terms (``sim/envs/goto_env_cfg.py``). Its weights are not yaw-neutral: left
alone it turns to a yaw of its own (the shipped one to about -1.35 rad), and held elsewhere its own ``torque_z``
runs out of range, it observes that as its last action, and it hovers 0.19 m low (docs/navigation_learned.md,
"Facing the motion"). The physics is yaw-equivariant, though (gravity is along z; the randomization's disturbances
have random directions). So under the loop the skill observes the world turned about z by ``skill_yaw_rad - yaw``
(:func:`turn_observation`): it always sees itself at its own equilibrium yaw, where its ``torque_z`` only damps the yaw
rate, and its body-frame thrust and torques are right in the real world too. The contract's ``skill_yaw_rad`` is
that equilibrium, measured for the skill the level was trained over (``sim/skill_yaw.py``).

The law, per control period ``dt`` (yaw ``psi``, body yaw rate ``r``, both from the state):

- target: the direction of ``v + lead_s a_turn`` while the horizontal speed is at least ``min_speed_mps``, else the
  last one. ``a_turn`` is the part of the velocity's rate of change across ``v`` (a backward difference per control
  period, low-passed with time constant ``lead_filter_s``; zero on the first tick): on a path that curves, the target
  leads the velocity by ``atan(lead_s w)`` (``w`` the velocity's turn rate), into the turn, where the path goes next.
  Braking (the along-track part) turns nothing. With ``lead_s`` 0 the target is ``atan2(v_y, v_x)``;
- setpoint: moves toward the target by at most ``max_rate_radps * dt`` (the setpoint's rate ``r_sp``), and is
  kept within ``max_error_rad`` of the yaw (a backup controller that held the yaw meanwhile winds nothing up);
- torque: ``I_zz (w_n^2 wrap(psi_sp - psi) + 2 zeta w_n (r_sp - r))``, clipped to the contract's torque_z range. With
  ``max_yaw_rate_radps`` > 0 the same law is written as a rate command, ``r_cmd = r_sp + w_n / (2 zeta) wrap(psi_sp -
  psi)``, clipped to +-``max_yaw_rate_radps``, and the torque ``I_zz 2 zeta w_n (r_cmd - r)``: unclipped it is the PD
  above; clipped, the loop stops asking for more yaw rate (the PD alone asks for up to ``max_rate_radps + w_n
  max_error_rad / (2 zeta)``, 3.4 rad/s with the shipped gains, and slow motors overshoot that).

One implementation for numpy (the runtime, PyBullet, the skill node) and torch (the batched
simulator): :class:`HeadingLoop` picks its array functions from its inputs; tests/test_heading.py
checks the two agree, that the yaw follows the velocity in the simulators, and that the skill holds its height
at any yaw under the loop. The navigate contract's ``heading`` section (robot_hrl.contract.navigate.HeadingSpec)
says a level was trained with it; whoever flies that level runs the loop under the goto skill.
"""

from __future__ import annotations

import math

import numpy as np

from robot_hrl.errors import ConfigError

TORQUE_MODE = "collective_thrust_body_torque"
"""The action mode whose yaw torque the loop owns (its term ``torque_z``)."""


def _wrap(a):
    """Into [-pi, pi): Python's %, numpy's and torch's alike take the divisor's sign."""
    return (a + math.pi) % (2.0 * math.pi) - math.pi


def _xp(x):
    """numpy for numpy arrays and Python floats, else the array's namespace through array_api_compat (as
    robot_hrl.contract's action mapping does: robot_hrl never imports torch)."""
    if isinstance(x, (np.ndarray, float, int, np.floating)):
        return np
    import array_api_compat as aac  # the training extras install it; numpy never gets here

    return aac.array_namespace(x)


TURNED_FRAMES = {"world_enu": ((0, 1),), "body_to_world": ((0, 3), (1, 4), (2, 5))}
"""The observation frames that turn with the world about z, and the (x, y) index pairs of a term in that frame: a world
vector's first two components, a row-major body-to-world matrix's first two rows (R_z R). Other frames (body rates, the
last action) are kept."""


class TurnedTerms:
    """Where the skill's observation turns with the world (:func:`turn_observation`): the (x, y) column pairs of its
    world-frame terms and each pair's clip range."""

    def __init__(self, terms):
        x, y, lo, hi, offset = [], [], [], [], 0
        for t in terms:
            pairs = TURNED_FRAMES.get(t.frame)
            if pairs is not None:
                if getattr(t, "history_length", 0) or (t.frame == "world_enu" and t.size != 3) or (
                        t.frame == "body_to_world" and t.size != 9):
                    raise ConfigError(f"heading: the skill's observation term {t.name!r} ({t.size} values, frame {t.frame}"
                                      f"{', with history' if getattr(t, 'history_length', 0) else ''}) cannot be turned "
                                      "with the world; the heading loop needs world vectors of 3 and a body-to-world "
                                      "matrix of 9 without history")
                for i, j in pairs:
                    x.append(offset + i)
                    y.append(offset + j)
                    lo.append(float(t.clip[0]))
                    hi.append(float(t.clip[1]))
            offset += t.size * (1 + int(getattr(t, "history_length", 0) or 0))
        self.x_index, self.y_index = x, y
        """Observation columns of each pair's x and y."""
        self.low, self.high = lo, hi
        """Each pair's clip range (the term's)."""
        self._columns = {}  # (array kind, dtype, device) -> columns(like): built once, not on every tick or step

    def columns(self, like):
        """(x index, y index, low, high) as arrays of ``like``'s kind, dtype and device (kept per kind)."""
        if isinstance(like, np.ndarray):
            key = (np.ndarray, like.dtype, None)
        else:
            import array_api_compat as aac

            key = (type(like), like.dtype, str(aac.device(like)))
        cols = self._columns.get(key)
        if cols is None:
            if key[0] is np.ndarray:
                cols = (np.asarray(self.x_index, dtype=np.intp), np.asarray(self.y_index, dtype=np.intp),
                        np.asarray(self.low, dtype=like.dtype), np.asarray(self.high, dtype=like.dtype))
            else:
                xp = aac.array_namespace(like)
                dev = aac.device(like)
                cols = (self.x_index, self.y_index, xp.asarray(self.low, dtype=like.dtype, device=dev),
                        xp.asarray(self.high, dtype=like.dtype, device=dev))
            self._columns[key] = cols
        return cols


def turn_observation(obs, turned: TurnedTerms, offset_rad):
    """The skill's observation seen from a world frame turned by ``offset_rad`` about z (a new array).

    ``obs`` (D,) with a scalar offset, or (N, D) with (N,) offsets; every pair of :class:`TurnedTerms` turns and is
    clipped again to its term's range (a turned corner of the clip box leaves it, as a turned raw value would be
    clipped). The turn is applied to the built observation, so the error integral stays in the world frame and
    turns with the rest: the numpy runtime, the batched simulator and the C twin turn the same numbers."""
    xp = _xp(obs)
    c, s = xp.cos(offset_rad), xp.sin(offset_rad)
    if getattr(c, "ndim", 0):
        c, s = c[..., None], s[..., None]
    xi, yi, lo, hi = turned.columns(obs)
    out = obs.copy() if xp is np else obs.clone()
    x, y = obs[..., xi], obs[..., yi]
    out[..., xi] = xp.minimum(xp.maximum(c * x - s * y, lo), hi)
    out[..., yi] = xp.minimum(xp.maximum(s * x + c * y, lo), hi)
    return out


def _ops(x):
    """(atan2, clip, where) for ``x``'s array kind (:func:`_xp`)."""
    xp = _xp(x)
    return (np.arctan2, _np_clip, np.where) if xp is np else (xp.atan2, xp.clip, xp.where)


def _np_clip(x, lo, hi):
    """np.clip for the loop's few values (np.clip's dispatch costs several microseconds a call; NaN passes either way)."""
    return np.minimum(np.maximum(x, lo), hi)


class HeadingLoop:
    """Face-the-velocity yaw control for ``num_envs`` robots (one in the runtime).

    ``spec``: the contract's :class:`~robot_hrl.contract.navigate.HeadingSpec`; ``action``: the goto skill's
    ActionSpec (mode ``collective_thrust_body_torque``); ``inertia_zz_kgm2``: the robot's yaw inertia
    (``robot.inertia_kgm2[2]``); ``dt_s``: the control period; ``observations``: the skill's observation terms
    (those in a world frame turn with it, :func:`turn_observation`)."""

    def __init__(self, spec, action, inertia_zz_kgm2: float, dt_s: float, num_envs: int = 1, observations=()):
        if action.mode != TORQUE_MODE:
            raise ConfigError(f"heading {spec.mode!r}: the skill's action mode is {action.mode!r}; the heading loop "
                              f"commands the yaw torque of mode {TORQUE_MODE!r}. Fly this level over a goto skill "
                              "with that mode, or export the level without a heading section")
        names = [t.name for t in action.terms]
        if "torque_z" not in names:
            raise ConfigError(f"heading: the skill's action terms {names} have no torque_z")
        if not (math.isfinite(inertia_zz_kgm2) and inertia_zz_kgm2 > 0 and math.isfinite(dt_s) and dt_s > 0):
            raise ConfigError(f"heading: inertia_zz_kgm2={inertia_zz_kgm2!r} and dt_s={dt_s!r} must be > 0")
        self.spec = spec
        self.action = action
        """The skill's ActionSpec (its one mapping turns the loop's torque into the normalized action)."""
        self.index = names.index("torque_z")
        """The command's column the loop writes."""
        term = action.terms[self.index]
        self.low_nm, self.high_nm = float(term.low), float(term.high)
        self.inertia_zz_kgm2 = float(inertia_zz_kgm2)
        self.dt_s = float(dt_s)
        self.kp_per_s2 = spec.natural_frequency_radps ** 2
        self.kd_per_s = 2.0 * spec.damping_ratio * spec.natural_frequency_radps
        self.skill_yaw_rad = float(spec.skill_yaw_rad)
        """The yaw the skill is shown (its own equilibrium; :func:`turn_observation`), rad."""
        self.turned = TurnedTerms(observations)
        """The skill observation's columns that turn with the world (its contract's ``observations``)."""
        self.num_envs = int(num_envs)
        self.setpoint_rad = np.full(self.num_envs, np.nan)
        """The yaw the loop steers to, rad (NaN: not started; the first call takes the robot's yaw)."""
        self.target_rad = np.full(self.num_envs, np.nan)
        """Where the setpoint turns to: the last direction of motion (with the lead), rad."""
        self.velocity_prev_w = np.zeros((self.num_envs, 2))
        """The horizontal velocity of the last control period, m/s (the lead's backward difference)."""
        self.turn_accel_w = np.zeros((self.num_envs, 2))
        """The velocity's rate of change, low-passed, m/s^2 (the lead's; its part across the velocity turns the target)."""
        self.lead_alpha = self.dt_s / (float(spec.lead_filter_s) + self.dt_s)
        """The low-pass's weight of a new difference (a first-order filter, time constant ``lead_filter_s``)."""

    def to(self, like) -> "HeadingLoop":
        """Keep the state as ``like``'s array type (a torch tensor on its device, or numpy)."""
        if not isinstance(like, np.ndarray):
            import array_api_compat as aac

            xp = aac.array_namespace(like)
            self.setpoint_rad = xp.full((self.num_envs,), math.nan, dtype=like.dtype, device=aac.device(like))
            self.target_rad = xp.full((self.num_envs,), math.nan, dtype=like.dtype, device=aac.device(like))
            self.velocity_prev_w = xp.zeros((self.num_envs, 2), dtype=like.dtype, device=aac.device(like))
            self.turn_accel_w = xp.zeros((self.num_envs, 2), dtype=like.dtype, device=aac.device(like))
        return self

    def reset(self, ids=None) -> None:
        """Forget the setpoint (of robots ``ids``; None: all): the next call starts from their yaw."""
        sel = slice(None) if ids is None else ids
        self.setpoint_rad[sel] = math.nan
        self.target_rad[sel] = math.nan  # (the lead's filter restarts with the setpoint: see _lead)

    def torque_nm(self, yaw_rad, yaw_rate_radps, velocity_w):
        """Advance one control period; returns the yaw torque (N,), N m. ``yaw_rad`` (N,), ``yaw_rate_radps`` (N,): the
        body z rate, ``velocity_w`` (N, >=2) world frame."""
        atan2, clip, where = _ops(yaw_rad)
        s = self.spec

        wrap = _wrap
        fresh = self.setpoint_rad != self.setpoint_rad  # NaN: a robot that just started (reset clears both)
        self.setpoint_rad = where(fresh, yaw_rad, self.setpoint_rad)
        self.target_rad = where(fresh, yaw_rad, self.target_rad)
        vx, vy = velocity_w[..., 0], velocity_w[..., 1]
        speed2 = vx * vx + vy * vy
        moving = speed2 >= s.min_speed_mps ** 2
        if s.lead_s > 0.0:
            vx, vy = self._lead(vx, vy, speed2, fresh, where)
        self.target_rad = where(moving, atan2(vy, vx), self.target_rad)
        step = clip(wrap(self.target_rad - self.setpoint_rad), -s.max_rate_radps * self.dt_s, s.max_rate_radps * self.dt_s)
        setpoint = yaw_rad + clip(wrap(self.setpoint_rad + step - yaw_rad), -s.max_error_rad, s.max_error_rad)
        self.setpoint_rad = wrap(setpoint)
        rate_sp = step / self.dt_s
        error = wrap(self.setpoint_rad - yaw_rad)
        if s.max_yaw_rate_radps > 0.0:  # the same PD as a rate command, the command clipped
            limit = s.max_yaw_rate_radps
            rate_cmd = clip(rate_sp + (self.kp_per_s2 / self.kd_per_s) * error, -limit, limit)
            torque = self.inertia_zz_kgm2 * self.kd_per_s * (rate_cmd - yaw_rate_radps)
        else:
            torque = self.inertia_zz_kgm2 * (self.kp_per_s2 * error + self.kd_per_s * (rate_sp - yaw_rate_radps))
        return clip(torque, self.low_nm, self.high_nm)

    def _lead(self, vx, vy, speed2, fresh, where):
        """The direction the target faces: ``v + lead_s a_turn`` (the module's law), and the filter advanced."""
        a = self.lead_alpha
        ax = (vx - self.velocity_prev_w[..., 0]) / self.dt_s
        ay = (vy - self.velocity_prev_w[..., 1]) / self.dt_s
        fx = where(fresh, 0.0 * ax, self.turn_accel_w[..., 0] + a * (ax - self.turn_accel_w[..., 0]))
        fy = where(fresh, 0.0 * ay, self.turn_accel_w[..., 1] + a * (ay - self.turn_accel_w[..., 1]))
        self.turn_accel_w[..., 0], self.turn_accel_w[..., 1] = fx, fy
        self.velocity_prev_w[..., 0], self.velocity_prev_w[..., 1] = vx, vy
        along = (fx * vx + fy * vy) / (speed2 + 1e-12)
        lead = self.spec.lead_s
        return vx + lead * (fx - along * vx), vy + lead * (fy - along * vy)

    def apply(self, actions, yaw_rad, yaw_rate_radps, velocity_w):
        """The skill's normalized actions (N, A) with the ``torque_z`` column replaced by the loop's (a new array)."""
        from robot_hrl.contract.action_modes import command_to_normalized

        torque = self.torque_nm(yaw_rad, yaw_rate_radps, velocity_w)
        command = actions.copy() if isinstance(actions, np.ndarray) else actions.clone()
        command[..., self.index] = torque  # (only this column is read back: the contract's one mapping, inverted)
        out = actions.copy() if isinstance(actions, np.ndarray) else actions.clone()
        out[..., self.index] = command_to_normalized(self.action, command)[..., self.index]
        return out

    def frame_offset_rad(self, yaw_rad):
        """The turn of the world frame the skill observes in (scalar or (N,)): the robot's yaw reads as ``skill_yaw_rad``."""
        return _wrap(self.skill_yaw_rad - yaw_rad)

    def step(self, policy, state, subgoal_w):
        """One tick of the skill under the loop for one robot (the runtime's): ``policy`` (an OnnxPolicy) observes
        ``state`` and ``subgoal_w`` in the skill's frame; returns its normalized action with the loop's ``torque_z``."""
        from robot_hrl.contract.navigate import yaw_from_quat

        yaw = float(yaw_from_quat(np.asarray(state.quat_wxyz, dtype=np.float64)))
        actions = policy.step(state, subgoal_w, yaw_offset_rad=self.frame_offset_rad(yaw))
        return self.apply_state(actions, state, yaw)

    def apply_state(self, actions, state, yaw_rad: float | None = None):
        """:meth:`apply` for one robot from a :class:`robot_hrl.state.RobotState` (the runtime's loop); ``yaw_rad``: the
        state's yaw when the caller has it."""
        from robot_hrl.contract.navigate import yaw_from_quat

        if yaw_rad is None:
            yaw_rad = yaw_from_quat(np.asarray(state.quat_wxyz, dtype=np.float64))
        yaw = np.atleast_1d(yaw_rad)
        rate = np.atleast_1d(float(np.asarray(state.angular_velocity_b, dtype=np.float64)[2]))
        v = np.asarray(state.linear_velocity_w, dtype=np.float64)[None]
        return self.apply(np.asarray(actions, dtype=np.float64)[None], yaw, rate, v)[0]


def heading_loop(spec, policy, num_envs: int = 1) -> HeadingLoop | None:
    """The loop a level's ``heading`` section asks for under ``policy`` (the goto skill: its ``contract`` and ``robot``),
    or None when the level has no heading section."""
    if spec is None:
        return None
    inertia = getattr(policy.robot, "inertia_kgm2", None)
    if inertia is None:
        raise ConfigError(f"heading {spec.mode!r}: robot {policy.robot.name!r} has no yaw inertia (inertia_kgm2); the heading "
                          "loop is for quadrotors")
    inertia = float(inertia[2])
    return HeadingLoop(spec, policy.contract.action, inertia, 1.0 / float(policy.contract.control_rate_hz), num_envs,
                       policy.contract.observations)


def heading_of_level(level_path, policy, required: bool = False):
    """The heading loop (robot_hrl.runtime.heading) a navigate level's contract asks of the skill below it, or None when
    it names none (``required``: ConfigError with the fix instead, for a tool told to fly a level's loop). ContractError
    (the node does not start) when the level was not trained over this skill."""
    from robot_hrl.contract.navigate import NAVIGATE_METADATA_KEY, NavigateContract
    from robot_hrl.runtime import read_model_metadata, sha256_file

    contract = NavigateContract.from_json(read_model_metadata(level_path).get(NAVIGATE_METADATA_KEY))
    path = getattr(policy, "path", None)
    contract.check_lower_skill(policy.contract, sha256_file(path) if path is not None else None)
    if required and contract.heading is None:
        raise ConfigError(f"{level_path} names no heading loop (its contract has no heading section: it was trained "
                          "without one); give a level trained with --heading, e.g. models/crazyflie_navigate.onnx, or "
                          "leave the option out")
    return heading_loop(contract.heading, policy)
