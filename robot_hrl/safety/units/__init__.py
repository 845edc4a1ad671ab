"""The shield units, in the order the composed shield runs them."""

from robot_hrl.safety.units.base import ShieldUnit, Tick
from robot_hrl.safety.units.battery import BatteryUnit
from robot_hrl.safety.units.command import LandRequestUnit
from robot_hrl.safety.units.envelope import AltitudeUnit, GeofenceUnit
from robot_hrl.safety.units.estop import EmergencyStopUnit
from robot_hrl.safety.units.limits import LimitsUnit
from robot_hrl.safety.units.obstacles import ObstacleUnit
from robot_hrl.safety.units.subgoal import SubgoalUnit
from robot_hrl.safety.units.watchdog import WatchdogUnit

__all__ = [
    "AltitudeUnit", "BatteryUnit", "EmergencyStopUnit", "GeofenceUnit", "LandRequestUnit", "LimitsUnit", "ObstacleUnit", "ShieldUnit",
    "SubgoalUnit", "Tick", "WatchdogUnit",
]
