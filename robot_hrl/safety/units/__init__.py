"""The robot-neutral shield units, by the name a shield YAML lists them under.

A robot family adds its own units (a quadrotor: ``limits``; a differential drive:
``velocity_limits``) in its shield family (robot_hrl.safety.families).
"""

from robot_hrl.safety.units.base import STAGES, ShieldContext, ShieldUnit, Tick
from robot_hrl.safety.units.battery import BatteryUnit
from robot_hrl.safety.units.command import LandRequestUnit
from robot_hrl.safety.units.envelope import AltitudeUnit, GeofenceUnit
from robot_hrl.safety.units.estop import EmergencyStopUnit
from robot_hrl.safety.units.obstacles import ObstacleUnit
from robot_hrl.safety.units.odometry import OdometryUnit
from robot_hrl.safety.units.range_obstacles import RangeObstacleUnit
from robot_hrl.safety.units.subgoal import SubgoalUnit
from robot_hrl.safety.units.watchdog import WatchdogUnit

NEUTRAL_UNITS: dict[str, type[ShieldUnit]] = {
    cls.name: cls
    for cls in (EmergencyStopUnit, OdometryUnit, WatchdogUnit, BatteryUnit, LandRequestUnit, GeofenceUnit, AltitudeUnit, ObstacleUnit,
                RangeObstacleUnit, SubgoalUnit)
}
"""Units every robot may list: estop, odometry (sample validation), watchdog, battery, command (land request), geofence, altitude,
obstacles (over the robot's stopping model; from the world file), range_obstacles (from the live range sensors) and subgoal."""

REQUIRED_UNITS = ("estop", "watchdog", "subgoal")
"""Units every shield must list: the emergency stop, the watchdog (its state timeout decides what a
fresh state is) and the subgoal filter (the contract's subgoal radius)."""

__all__ = [
    "AltitudeUnit", "BatteryUnit", "EmergencyStopUnit", "GeofenceUnit", "LandRequestUnit", "NEUTRAL_UNITS", "ObstacleUnit", "OdometryUnit",
    "REQUIRED_UNITS", "RangeObstacleUnit", "STAGES", "ShieldContext", "ShieldUnit", "SubgoalUnit", "Tick", "WatchdogUnit",
]
