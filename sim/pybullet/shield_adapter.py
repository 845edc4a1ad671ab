"""The safety shield (robot_hrl.safety.Shield) between the policy and the PyBullet motors.

Per episode: the goal goes through ``Shield.filter_subgoal`` once (the policy flies to the
filtered subgoal; success is still judged on the task's goal), the shield's latches are
cleared, and every control tick the policy's normalized actions go through ``Shield.step``;
the shield's wrench is what the simulator flies. Interventions are counted per unit.

The inference time handed to the watchdog is 0: in simulation a wall-clock deadline says
nothing about the robot (the skill node measures it on the target). Without a world file the
shield's fence is the training arena: the box that holds every start, goal and the
out-of-bounds distance, from the floor to the ceiling of ``TerminationCfg``.
"""

from __future__ import annotations

import numpy as np

from robot_hrl.safety import Shield, ShieldInput
from robot_hrl.world.world import World
from sim.envs.goto_env_cfg import GotoEnvCfg


def training_arena(cfg: GotoEnvCfg) -> World:
    """The training env's flying volume as a world file (no obstacles)."""
    cmd, term = cfg.command, cfg.terminations
    half = cmd.spawn_xy_half_extent_m + cmd.subgoal_radius_m + term.out_of_bounds_distance_m
    floor = cfg.physics.ground_height_m
    return World(name="training_arena", bounds={"min": (-half, -half, floor), "max": (half, half, term.ceiling_m)},
                 start=(0.0, 0.0, floor))


class ShieldAdapter:
    """One shield for one PyBullet simulator; :meth:`reset` at every episode."""

    def __init__(self, policy, sim, cfg: GotoEnvCfg, config_path=None):
        self.sim = sim
        """The simulator: its actuator chain's measured battery voltage goes to the shield every tick."""
        self.world = sim.world if sim.world is not None else training_arena(cfg)
        self.shield = Shield.from_yaml(config_path, policy.robot, self.world, policy.contract.subgoal_radius_m,
                                       action=policy.contract.action)
        self._units: dict[str, int] = {}
        self._count = 0
        self._goal: np.ndarray | None = None

    def reset(self) -> None:
        self.shield.reset_faults()
        self._units = {}
        self._count = 0
        self._goal = None

    def _record(self, interventions) -> None:
        for item in interventions:
            key = f"{item.unit}.{item.constraint}"
            self._units[key] = self._units.get(key, 0) + 1
        if interventions:
            self._count += 1

    def subgoal(self, goal_w: np.ndarray, position_w: np.ndarray, now_s: float) -> np.ndarray:
        """The subgoal the policy flies to (filtered once per episode)."""
        if self._goal is None:
            safe, records = self.shield.filter_subgoal(goal_w, position_w, now_s)
            self._record(records)
            self._goal = np.asarray(safe, dtype=np.float64)
        return self._goal

    def command(self, state, actions: np.ndarray, now_s: float) -> np.ndarray:
        """The wrench the motors get."""
        battery_v = self.sim.chain_state.get("battery_voltage_v")  # the measured battery, as the skill node gets /battery
        out = self.shield.step(ShieldInput(now_s=now_s, state=state, actions=actions, subgoal_w=self._goal,
                                           battery_v=None if battery_v is None else float(battery_v)))
        self._record(out.interventions)
        return out.wrench

    def episode_counts(self) -> tuple[int, dict[str, int]]:
        """(ticks or subgoals with an intervention, interventions per unit.constraint)."""
        return self._count, dict(self._units)
