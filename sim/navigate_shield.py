"""The shield in the loop of the batched navigation simulator: the runtime's own ``Shield``, one per environment.

The node graph flies the learned level with the skill node's shield on (``range_shield: true``); PyBullet's
evaluation does too (``sim/evaluate_navigate.py --sim pybullet --range-shield``). This module puts the same shield
between the frozen goto skill and the batched physics (``NavigateEnv.shield``), so the batched evaluation can judge a
level as it flies: every environment carries its own single-sample :class:`robot_hrl.safety.Shield` (the runtime
code, called in a Python loop, as ``sim/safety_eval.py`` does), built by :func:`range_shield` for an UNMAPPED room
(the fence and the range source; the boxes are unknown to it). It is no twin of the shield: there is one shield.

What it is fed, as in PyBullet's shielded flight (``fly_pybullet``): the true state every control tick (the skill
node's ``/odom`` in simulation), the measured battery voltage, every subgoal at each decision
(``Shield.filter_subgoal``), and the horizontal rangers at their own rate (10 Hz: ``max(update_rate_hz)``), read
from the batched ray casts with their own noise stream (the level's readings are left exactly as without the shield).
The skill observes its own last action, as the runtime's ``OnnxPolicy`` does.
"""

from __future__ import annotations

import copy

import numpy as np
import torch

from robot_hrl.safety import ShieldInput
from robot_hrl.state import RobotState

RANGE_SHIELD_SECTION = {"sensors": ["front", "back", "left", "right"], "stop_distance_m": 0.3, "min_clearance_m": 0.05,
                        "approach_keep_fraction": 0.5, "slowdown_distance_m": 1.0, "slowdown_ratio": 0.4,
                        "source_timeout_s": 0.35, "obstacles_angle_rad": 0.0873, "memory_range_m": 2.0,
                        "memory_capacity": 1024, "memory_spacing_m": 0.02, "memory_age_s": 2.0, "confirm_angle_rad": 0.1745,
                        "clear_margin_m": 0.1, "unseen_travel_m": 0.25, "unseen_within_m": 1.0,
                        "unknown_creep_m": 0.25, "unknown_cell_m": 0.05, "unknown_blind_creep_m": None}
"""The range source's zones for the evaluation (docs/safety.md, "The shield without a map"); the skill node's
``shield_ranges.yaml`` holds the same (tests/test_planner_learned.py checks it)."""

RANGE_SHIELD_BACKUP = {"recover_s": 0.0, "hold_turn_max_rate_dps": 120.0}
"""The keys of the robot's ``backup`` section the range source changes (``shield_ranges.yaml``'s ``backup``, the
same): no debounce (benchmarks/README.md, "Issue #19: the picture's resolution"), and a hold that keeps the heading
loop's yaw torque, so the front cone goes on turning to where the robot goes (benchmarks/README.md, "Issue #19: the
hold turns the cone"; on since the backup brakes a spin first, "Issue #19: a spin first")."""


def number_or_off(text: str) -> float | None:
    """A range-source or backup key's value as a command line gives it: ``off`` is None (the rule or option off), else
    the number (ValueError for anything else; the caller names the flag and its range)."""
    return None if text.strip() == "off" else float(text)


SHIELDED_BATTERY_RANGE_V = (3.7, 4.2)
"""The batteries of the airframes flown through this shield, open-circuit, V: a mission starts on a charged battery
(3.7 V at rest is a 1S LiPo's nominal voltage; 4.2 V full, motors.c). The goto randomization's own range reaches
3.3 V, where the shield's battery unit (3.3 V under load, debounced: shield.yaml ``battery``) holds and lands the
robot mid-mission, as it should: a failure of no planner. Flights the shield landed are counted
(``shield_landing``) either way."""


def shielded_randomization() -> dict:
    """The randomization overrides of environments flown through this shield (``NavigateEnvCfg.randomization``):
    charged batteries, :data:`SHIELDED_BATTERY_RANGE_V`."""
    return {"battery_open_circuit_range_v": SHIELDED_BATTERY_RANGE_V}


def range_shield_config(robot, section: dict | None = None, keep_map: bool = False):
    """The robot's shield config with the ``range_obstacles`` unit (``section``: its zones, default
    :data:`RANGE_SHIELD_SECTION`) listed before ``subgoal`` and the backup keys of :data:`RANGE_SHIELD_BACKUP`; without
    ``keep_map`` the map's ``obstacles`` unit is left out (an unmapped room)."""
    import yaml

    from robot_hrl.safety.config import parse_shield_config

    data = yaml.safe_load(robot.shield_config_path.read_text())
    units = [u for u in data["units"] if keep_map or u != "obstacles"]
    units.insert(units.index("subgoal"), "range_obstacles")
    data["units"] = units
    if not keep_map:
        data.pop("obstacles", None)
    data["range_obstacles"] = copy.deepcopy(section or RANGE_SHIELD_SECTION)
    data["backup"] = {**data["backup"], **RANGE_SHIELD_BACKUP}
    return parse_shield_config(data, "range shield")


def range_shield(policy, room, section: dict | None = None, keep_map: bool = False, config=None):
    """The robot's shield with the ``range_obstacles`` unit for an UNMAPPED room: its world file keeps the
    fence and drops the boxes (``keep_map``: keeps them and the ``obstacles`` unit too: both sources).
    ``policy``: anything with ``robot`` and ``contract`` (``subgoal_radius_m``, ``action``): the goto skill.
    ``config``: :func:`range_shield_config`'s result, when the caller builds many shields from one."""
    from robot_hrl.safety import Shield

    config = config if config is not None else range_shield_config(policy.robot, section, keep_map)
    world = room.world if keep_map else room.world.model_copy(update={"obstacles": ()})
    return Shield(config, policy.robot, world, policy.contract.subgoal_radius_m, action=policy.contract.action)


def _new_flight() -> dict:
    """What one flight's shield did (the keys the evaluation's records carry)."""
    return {"interventions": {}, "intervention_ticks": 0, "shield_ticks": 0, "shield_landing": False}


class BatchedShield:
    """One runtime shield per environment of a :class:`sim.envs.navigate_env.NavigateEnv` (the ``env.shield`` hook).

    ``rooms``: the room of each pool index (``env.pool``'s order); ``skill``: the goto skill's runtime policy (its
    robot, subgoal radius and action mapping); ``active``: (N,) bool, environments whose shield runs (the others pass
    the skill's actions through: an evaluation's finished flights); ``seed``: the shield's ranger noise stream."""

    def __init__(self, env, rooms, skill, section: dict | None = None, seed: int = 0, active: torch.Tensor | None = None):
        from robot_hrl.sensing import robot_range_sensors

        sensors = robot_range_sensors(skill.robot)
        names = [s.name for s in env.sensors]
        if names != [s.name for s in sensors]:
            raise ValueError(f"the simulator's rangers {names} are not the rangers of the skill's robot "
                             f"{skill.robot.name!r} {[s.name for s in sensors]}: the shield must guard the robot the "
                             "simulator flies; pass the goto skill the environment was built on")
        self.rooms = list(rooms)
        self.skill = skill
        self.config = range_shield_config(skill.robot, section)
        """Parsed once; each flight's shield is built from it."""
        n = env.num_envs
        self.shields: list = [None] * n
        self.active = torch.ones(n, dtype=torch.bool) if active is None else active
        self.listened = [(j, name) for j, name in enumerate(names) if name in self.config.range_obstacles.sensors]
        control_hz = float(skill.contract.control_rate_hz)
        self.sense_every = int(round(control_hz / max(s.update_rate_hz for s in sensors)))
        self.dt_s = 1.0 / control_hz
        self.generator = torch.Generator(device=env.device).manual_seed(seed + 7)
        self.flights: list[dict] = [_new_flight() for _ in range(n)]
        """Per environment: what its shield did since its episode started (:func:`_new_flight`'s keys)."""
        self.ended: list[dict | None] = [None] * n
        """Per environment: ``flights[i]`` of its last ended episode."""
        self.flown_w: torch.Tensor | None = None
        """The subgoals the skill flies since the last decision (after the subgoal filter)."""
        self.range_ticks = np.zeros(n)
        """Per environment: control ticks of the current decision on which the range source acted (its stop or
        approach zone; the training's ``rewards.shield_stop_weight`` charges their share)."""
        self._live: list[int] = []
        """The active environments of the current decision (``active`` is changed between decisions only)."""
        low = env.low.env
        self._battery_rows = (low.layout.rows("battery_voltage_v")
                              if any(name == "battery_voltage_v" for name, _, _ in low.layout.state) else None)

    # ---- the NavigateEnv hook --------------------------------------------------------------
    def reset(self, env, ids: torch.Tensor) -> None:
        """Environments ``ids`` start an episode: a fresh shield each (the active ones), fed its first ranger readings."""
        ids = ids[self.active[ids]]
        for i in ids.tolist():
            if self.shields[i] is not None:  # the episode that just ended
                self.ended[i] = self.flights[i]
            self.shields[i] = range_shield(self.skill, self.rooms[int(env.room[i])], config=self.config)
            self.flights[i] = _new_flight()
        self._feed(env, ids, 0)

    def subgoals(self, env, subgoal_w: torch.Tensor) -> torch.Tensor:
        """A decision's subgoals through each shield's subgoal filter (as the skill node takes ``/subgoal``)."""
        pos = env.low.position_w.double().numpy()
        out = subgoal_w.double().numpy()  # (a copy: rows are replaced by the filtered subgoals)
        now = self._now(env, 0)
        self._live = torch.nonzero(self.active).squeeze(-1).tolist()
        for i in self._live:
            out[i], records = self.shields[i].filter_subgoal(out[i].copy(), pos[i], float(now[i]))
            self._count(i, records)
        self.flown_w = torch.from_numpy(out).to(subgoal_w.dtype)
        self.range_ticks[:] = 0.0
        return self.flown_w

    def actions(self, env, k: int, actions: torch.Tensor) -> torch.Tensor:
        """Control step ``k`` of a decision: the skill's normalized actions through each shield."""
        from sim.safety_eval import measured_battery_v

        low = env.low.env
        pos, quat = low.position_w.double().numpy(), low.quat_wxyz.double().numpy()
        vel, omega = low.linear_velocity_w.double().numpy(), low.angular_velocity_b.double().numpy()
        act = actions.double().numpy()
        goal = self.flown_w.double().numpy()
        volts = measured_battery_v(low, self._battery_rows)
        now = self._now(env, k)
        out = act.copy()
        for i in self._live:
            t = float(now[i])
            o = self.shields[i].step(ShieldInput(now_s=t, state=RobotState(pos[i], quat[i], vel[i], omega[i], t),
                                                 actions=act[i], subgoal_w=goal[i],
                                                 battery_v=None if volts is None else volts[i]))
            flight = self.flights[i]
            flight["shield_ticks"] += 1
            if o.interventions:
                flight["intervention_ticks"] += 1
                self._count(i, o.interventions)
                if any(rec.unit == "range_obstacles" for rec in o.interventions):
                    self.range_ticks[i] += 1
            if o.mode in ("backup_land", "motors_off"):
                flight["shield_landing"] = True
            out[i] = o.actions
        return torch.from_numpy(out).to(actions.dtype)

    def after_step(self, env, k: int) -> None:
        """After control step ``k``: the rangers at their own rate."""
        if (k + 1) % self.sense_every == 0:
            self._feed(env, torch.tensor(self._live, dtype=torch.long), k + 1)

    # ---- internals -------------------------------------------------------------------------
    def _now(self, env, k: int) -> np.ndarray:
        """Each environment's time since its episode started, s (the shield's clock)."""
        return env.episode_length_buf.double().numpy() * env.decision_dt_s + k * self.dt_s

    def _feed(self, env, ids: torch.Tensor, k: int) -> None:
        if ids.numel() == 0:
            return
        _, reading = env.read_rangers(ids, self.generator)
        reading = reading.double().numpy()
        now = self._now(env, k)
        for row, i in enumerate(ids.tolist()):
            unit = self.shields[i].unit("range_obstacles")
            for j, name in self.listened:
                unit.update(name, float(reading[row, j]), float(now[i]))

    def _count(self, i: int, records) -> None:
        d = self.flights[i]["interventions"]
        for rec in records:
            key = f"{rec.unit}.{rec.constraint}"
            d[key] = d.get(key, 0) + 1

