"""The verbs of a flying robot: takeoff, land, hover, and the flight band its goals must lie in.

Built on the robot-neutral :class:`~robot_hrl.planning.legs.LegSearch`: takeoff and landing are
vertical legs whose column is checked; a landing above an obstacle (a landmark box) first moves
level to the nearest spot within ``landing_search_m`` whose column is clear; goals lie in the
flight band (the floor plus the inflation up to the ceiling minus it), and the robot must be off
the ground before it flies anywhere.
"""

from __future__ import annotations

import numpy as np

from robot_hrl.errors import PlanningError
from robot_hrl.planning.legs import LegSearch, _fmt
from robot_hrl.planning.plan import PlanStep
from robot_hrl.planning.search import space_polyline
from robot_hrl.planning.task import DEFAULT_TAKEOFF_ALTITUDE_M, TaskStep

AERIAL_VERBS = ("takeoff", "land", "hover")


class AerialVerbs:
    """``takeoff``, ``land`` and ``hover`` steps, and the rules of flight for ``goto``/``visit``."""

    def __init__(self, legs: LegSearch, spacing_m: float):
        self.legs = legs
        self.config = legs.config
        self.spacing_m = spacing_m

    @property
    def ground_z(self) -> float:
        return float(self.legs.world.bounds.min[2])

    @property
    def min_flight_z(self) -> float:
        return self.ground_z + self.config.inflation_m

    @property
    def max_flight_z(self) -> float:
        return float(self.legs.world.bounds.max[2]) - self.config.inflation_m

    def airborne(self, pos: np.ndarray) -> bool:
        return bool(pos[2] > self.ground_z + self.config.ground_clearance_m)

    # -- the rules of flight for the robot-neutral verbs ------------------------------------------
    def before_move(self, pos: np.ndarray, where: str) -> None:
        """``goto``/``visit`` need the robot in the air."""
        if not self.airborne(pos):
            raise PlanningError(f"{where}: the robot is on the ground at {_fmt(pos)}; begin the task with `takeoff`")

    def check_goal(self, p: np.ndarray, what: str) -> None:
        """A goal is a free point in the flight band."""
        self.legs.check_point(p, what)
        if not (self.min_flight_z - 1e-9 <= p[2] <= self.max_flight_z + 1e-9):
            raise PlanningError(f"{what} {_fmt(p)}: altitude {p[2]:.2f} m is outside the flight band "
                                f"{self.min_flight_z:.2f}..{self.max_flight_z:.2f} m (use `land` to land)")
        self.legs.check_cell_clear(p, what)

    # -- the verbs -------------------------------------------------------------------------------
    def takeoff(self, ts: TaskStep, pos: np.ndarray, where: str) -> PlanStep:
        alt = float(ts.altitude_m if ts.altitude_m is not None else DEFAULT_TAKEOFF_ALTITUDE_M)
        target = np.array([pos[0], pos[1], alt])
        if not (self.min_flight_z - 1e-9 <= alt <= self.max_flight_z + 1e-9):
            raise PlanningError(f"{where}: takeoff altitude {alt:g} m is outside the flight band "
                                f"{self.min_flight_z:.2f}..{self.max_flight_z:.2f} m")
        path = self.legs.vertical(pos, target, "take off")
        return PlanStep("takeoff", target, f"takeoff {alt:g} m", space_polyline(path, self.spacing_m), path)

    def land(self, ts: TaskStep, pos: np.ndarray, where: str) -> PlanStep:  # noqa: ARG002 - one signature per verb
        path = self.landing_path(pos, where)
        return PlanStep("land", path[-1], "land", space_polyline(path, self.spacing_m), path)

    def hover(self, ts: TaskStep, pos: np.ndarray, where: str) -> PlanStep:
        if not self.airborne(pos):
            raise PlanningError(f"{where}: the robot is on the ground; `takeoff` before `hover`")
        return PlanStep("hover", pos.copy(), f"hover {ts.duration_s:g} s", [pos.copy()], np.stack([pos, pos]),
                        duration_s=ts.duration_s)

    def landing_path(self, pos: np.ndarray, where: str) -> np.ndarray:
        """Straight down; when the floor below is taken (e.g. by a landmark box), first move level
        to the nearest spot within ``landing_search_m`` whose column is clear."""
        legs = self.legs
        below = np.array([pos[0], pos[1], self.ground_z])
        try:
            return legs.vertical(pos, below, "land")
        except PlanningError as exc:
            first_error = exc
        if not self.airborne(pos):
            raise PlanningError(f"{where}: {first_error}") from None
        step = max(self.config.resolution_m * 2, 0.1)
        for radius in np.arange(step, self.config.landing_search_m + 1e-9, step):
            for angle in np.linspace(0.0, 2 * np.pi, 16, endpoint=False):
                spot = pos + np.array([radius * np.cos(angle), radius * np.sin(angle), 0.0])
                try:
                    legs.check_point(spot, "landing spot")
                    down = legs.vertical(spot, np.array([spot[0], spot[1], self.ground_z]), "land")
                except PlanningError:
                    continue
                leg = legs.leg(pos, spot)
                if leg is None:
                    continue
                return np.vstack([leg, down[1:]])
        raise PlanningError(f"{where}: {first_error}; no clear landing spot within "
                            f"{self.config.landing_search_m:g} m either")
