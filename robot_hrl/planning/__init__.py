"""Planners that issue subgoals: symbolic (offline default), LLM and VLM.

The node calls::

    planner = make_planner("symbolic" | "llm" | "vlm", world, subgoal_radius_m, llm_url=..., model=...)
    plan = planner.plan(task_text_or_json, start_position_w)        # -> Plan
    plan.subgoals                                                   # list of (3,) world ENU points
    plan = planner.replan(plan, position_w, blocked=points_or_boxes)

See docs/planning.md.
"""

from robot_hrl.planning.grid import FlightGrid
from robot_hrl.planning.llm import LLMPlanner, VLMPlanner, make_planner
from robot_hrl.planning.maps import OccupancyMap, load_map, rasterize_world, save_map
from robot_hrl.planning.plan import Plan, PlanStep
from robot_hrl.planning.config import PlannerConfig
from robot_hrl.planning.deadline import PlanningDeadline, PlanningTimeout
from robot_hrl.planning.symbolic import SymbolicPlanner
from robot_hrl.planning.task import TASK_SCHEMA, Task, TaskStep, parse_task, parse_task_json, parse_task_text

__all__ = [
    "FlightGrid", "LLMPlanner", "OccupancyMap", "Plan", "PlanStep", "PlannerConfig", "PlanningDeadline", "PlanningTimeout", "SymbolicPlanner", "TASK_SCHEMA", "Task",
    "TaskStep", "load_map", "parse_task", "parse_task_json", "parse_task_text", "rasterize_world", "save_map",
    "VLMPlanner", "make_planner",
]
