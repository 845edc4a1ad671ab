"""`robot-hrl plan`: plan a task without flying; print, save and draw the goals and subgoals."""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import cv2
import numpy as np

from robot_hrl.contract.goto import DEFAULT_SUBGOAL_RADIUS_M
from robot_hrl.errors import PlanningError, RobotHrlError
from robot_hrl.planning.llm import PLANNER_KINDS, make_planner
from robot_hrl.planning.maps import load_map
from robot_hrl.planning.symbolic import PlannerConfig
from robot_hrl.world import load_world


class PlanCommand:
    name = "plan"
    help = ("Plan a task on a world without flying: print the goals and the subgoal sequence, with the planner "
            "that produced them and any fallback. Exits 1 with a message when the task cannot be planned.")

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--world", required=True, help="world YAML file (see models/worlds/)")
        parser.add_argument("--task", required=True,
                            help="task text, e.g. 'takeoff 1.0; goto red_box; land', or its JSON form "
                                 "(see docs/planning.md); @FILE reads it from a file")
        parser.add_argument("--planner", choices=PLANNER_KINDS, default="symbolic", help="which planner")
        parser.add_argument("--llm-url", default=None,
                            help="OpenAI-compatible endpoint (default http://127.0.0.1:11434/v1, Ollama); "
                                 "the API key is read from ROBOT_HRL_LLM_API_KEY or OPENAI_API_KEY")
        parser.add_argument("--llm-model", default=None, help="model name at the endpoint")
        parser.add_argument("--llm-timeout", type=float, default=None, help="seconds per request")
        parser.add_argument("--max-attempts", type=int, default=3, help="LLM answers tried before the fallback")
        parser.add_argument("--start", type=float, nargs=3, metavar=("X", "Y", "Z"), default=None,
                            help="robot position (default: the world's start)")
        parser.add_argument("--subgoal-radius", type=float, default=DEFAULT_SUBGOAL_RADIUS_M,
                            help="the skill's subgoal radius, m (from the model contract)")
        parser.add_argument("--robot", default="crazyflie_2x",
                            help="robot model (robot_hrl.robots): obstacles are inflated by its collision radius")
        parser.add_argument("--robot-radius", type=float, default=None,
                            help="the robot's collision radius, m (default: the --robot model's)")
        parser.add_argument("--resolution", type=float, default=PlannerConfig.resolution_m, help="grid cell, m")
        parser.add_argument("--margin", type=float, default=PlannerConfig.safety_margin_m,
                            help="safety margin added to the robot radius, m")
        parser.add_argument("--map", default=None, help="map_server YAML to use with the world (default: the "
                                                        "map the world file names, if any)")
        parser.add_argument("--image", default=None, help="camera image (PNG/JPEG) for --planner vlm")
        parser.add_argument("--yaw-deg", type=float, default=0.0, help="robot heading for --image, degrees")
        parser.add_argument("--json", default=None, metavar="PATH", help="write the plan as JSON")
        parser.add_argument("--plot", default=None, metavar="PNG", help="draw the plan over the map")

    def run(self, args: argparse.Namespace) -> int:
        try:
            return self._run(args)
        except RobotHrlError as exc:
            print(f"robot-hrl plan: error: {exc}", file=sys.stderr)
            return 1

    def _run(self, args) -> int:
        world_path = Path(args.world)
        world = load_world(world_path)
        if args.map:
            grid_map = load_map(args.map)
        elif world.map:
            grid_map = load_map(world_path.parent / world.map)
        else:
            grid_map = None
        task = args.task
        if task.startswith("@"):
            path = Path(task[1:])
            if not path.is_file():
                raise PlanningError(f"task file {str(path)!r} does not exist")
            task = path.read_text()
        if not (math.isfinite(args.subgoal_radius) and args.subgoal_radius > 0):
            raise PlanningError(f"--subgoal-radius must be positive, got {args.subgoal_radius}")
        if not (math.isfinite(args.resolution) and args.resolution > 0):
            raise PlanningError(f"--resolution must be positive, got {args.resolution}")
        if not (math.isfinite(args.margin) and args.margin >= 0):
            raise PlanningError(f"--margin must be >= 0, got {args.margin}")
        if args.robot_radius is None:
            from robot_hrl.robots import get_robot

            try:
                radius = get_robot(args.robot).collision_radius_m
            except KeyError as exc:
                raise PlanningError(str(exc).strip('"')) from None
        else:
            radius = args.robot_radius
        config = PlannerConfig(robot_radius_m=radius, resolution_m=args.resolution, safety_margin_m=args.margin)
        planner = make_planner(args.planner, world, args.subgoal_radius, llm_url=args.llm_url, model=args.llm_model,
                               timeout_s=args.llm_timeout, max_attempts=args.max_attempts,
                               occupancy_map=grid_map, config=config)
        start = np.asarray(args.start if args.start is not None else world.start, dtype=np.float64)
        kwargs = {}
        if args.image:
            if args.planner != "vlm":
                raise PlanningError("--image is only used by --planner vlm")
            bgr = cv2.imread(args.image, cv2.IMREAD_COLOR)
            if bgr is None:
                raise PlanningError(f"cannot read the image {args.image!r}")
            from robot_hrl.geometry import quat_from_euler_rpy

            kwargs = {"image_rgb": cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB),
                      "quat_wxyz": quat_from_euler_rpy(0.0, 0.0, math.radians(args.yaw_deg))}
        plan = planner.plan(task, start, **kwargs)
        self._print(plan)
        if args.json:
            Path(args.json).parent.mkdir(parents=True, exist_ok=True)
            Path(args.json).write_text(json.dumps(plan.to_dict(), indent=2))
            print(f"wrote {args.json}")
        if args.plot:
            from robot_hrl.planning.plot import plot_plan

            symbolic = getattr(planner, "symbolic", planner)
            print(f"wrote {plot_plan(symbolic, plan, args.plot)}")
        return 0

    @staticmethod
    def _print(plan) -> None:
        fmt = lambda p: "(" + ", ".join(f"{float(v):6.2f}" for v in p) + ")"  # noqa: E731
        print(f"planner: {plan.planner}")
        if plan.fallback_reason:
            print(f"fallback: {plan.fallback_reason}")
        for i, reason in enumerate(plan.rejected_answers, 1):
            print(f"rejected answer {i}: {reason}")
        print(f"task: {plan.task}")
        print(f"start: {fmt(plan.start)}")
        print("goals:")
        for i, (label, g) in enumerate(zip(plan.goal_labels, plan.goals), 1):
            print(f"  {i}. {label:<14} {fmt(g)}")
        print(f"subgoals ({len(plan.subgoals)}, path {plan.path_length_m:.2f} m):")
        n = 0
        for s in plan.steps:
            print(f"  {'goto ' if s.action == 'goto' else ''}{s.label}:")
            for g in s.subgoals:
                print(f"    {n:3d} {fmt(g)}")
                n += 1


COMMAND = PlanCommand()
