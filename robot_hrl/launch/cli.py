"""`robot-hrl launch navigation`: the navigation graph without ROS 2 (Cyclone DDS, separate processes)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from robot_hrl.errors import ConfigError
from robot_hrl.launch import graph
from robot_hrl.launch.graph import DEFAULT_BACKEND, LAUNCH_BACKENDS

GRAPHS = ("navigation",)


class LaunchCommand:
    name = "launch"
    help = ("Start a node graph as separate processes on one transport (Cyclone DDS by default: no ROS 2 needed; "
            "or rclpy): sim, skill and planner "
            "nodes; live summary; MCAP recording of every topic; result JSON and a plot of the flight. It ends by "
            "itself when the task is done and the robot has landed, or at --timeout. The same graph and "
            "parameters as `ros2 launch robot_hrl navigation.launch.py`.")

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("graph", choices=GRAPHS, help="node graph to launch")
        for arg in graph.LAUNCH_ARGUMENTS:
            flag = "--" + arg.name.replace("_", "-")
            kwargs = {"default": arg.default, "help": arg.description}
            if arg.choices:
                kwargs["choices"] = list(arg.choices)
            parser.add_argument(flag, dest=arg.name, **kwargs)
        parser.add_argument("--out", type=Path, default=Path("runs/latest"),
                            help="run folder: logs/, recording/ (MCAP), flight.png, result.json")
        parser.add_argument("--result", type=Path, default=None,
                            help="also write the result JSON here (goals_reached, goals_total, wall_time_s, "
                                 "interventions, violations, ...)")
        parser.add_argument("--timeout", type=float, default=300.0, help="wall-clock limit, seconds")
        parser.add_argument("--domain-id", type=int, default=None, help="DDS domain id (default: $ROS_DOMAIN_ID or 0)")
        parser.add_argument("--backend", choices=LAUNCH_BACKENDS, default=DEFAULT_BACKEND,
                            help="transport of every node, the monitor and the /task sender: cyclonedds (no ROS 2 "
                                 "needed) or rclpy (a ROS 2 install or the Jazzy wheels; Fast DDS). The default is "
                                 "the same whether rclpy is importable or not")
        parser.add_argument("--network", action="store_true",
                            help="use every network interface (default: this machine only: Cyclone's loopback "
                                 "profile unless CYCLONEDDS_URI is set; with rclpy ROS_AUTOMATIC_DISCOVERY_RANGE="
                                 "LOCALHOST unless it is set)")
        parser.add_argument("--no-record", action="store_true", help="do not record the topics to MCAP")
        parser.add_argument("--no-live", action="store_true", help="no live summary (logs and CI)")
        parser.add_argument("--params-file", default=None,
                            help=f"parameters file in the ROS 2 format (default: {graph.PARAMS_FILE})")
        parser.add_argument("-p", "--param", action="append", default=[], metavar="NODE.NAME=VALUE",
                            help="override one node parameter, e.g. -p skill_node.control_rate_hz=100 (repeatable)")

    def run(self, args: argparse.Namespace) -> int:
        from robot_hrl.launch.launcher import Launcher, LaunchOptions
        from robot_hrl.nodes.args import parse_value

        if not args.timeout > 0:
            raise ConfigError(f"--timeout {args.timeout}: give a positive number of seconds")
        params: dict[str, dict] = {}
        known = {n.name for n in graph.NAVIGATION_NODES}
        for item in args.param:
            key, sep, value = item.partition("=")
            node, dot, name = key.partition(".")
            if not sep or not dot or not name:
                raise ConfigError(f"-p {item!r}: write NODE.NAME=VALUE, e.g. skill_node.control_rate_hz=100")
            if node not in known:
                raise ConfigError(f"-p {item!r}: unknown node {node!r}; nodes: {sorted(known)}")
            params.setdefault(node, {})[name] = parse_value(value)
        arguments = {a.name: getattr(args, a.name) for a in graph.LAUNCH_ARGUMENTS}
        options = LaunchOptions(arguments=arguments, out=args.out, result=args.result, timeout_s=args.timeout,
                                domain_id=args.domain_id, loopback=not args.network, record=not args.no_record,
                                live=not args.no_live and sys.stdout.isatty(), params=params,
                                params_file=args.params_file, backend=args.backend)
        result = Launcher(options).run()
        print(summary_text(result))
        return 0 if result.success else 1


def summary_text(result) -> str:
    lines = [
        f"result: {'SUCCESS' if result.success else 'FAILED'} ({result.reason})",
        f"  goals reached   {result.goals_reached}/{result.goals_total}",
        f"  time            {result.wall_time_s:.1f} s wall, {result.sim_time_s:.1f} s simulated",
        "  interventions   " + (", ".join(f"{u}: {n}" for u, n in sorted(result.interventions.items()) if n) or "none"),
        f"  violations      {result.violations} (collisions {result.collisions})",
        f"  planner         {result.planner}" + (f" (fallback: {result.fallback_reason})" if result.fallback_reason else ""),
    ]
    if result.deadline:
        lines.append(f"  skill deadline  {json.dumps(result.deadline)}")
    if result.recording:
        lines.append(f"  recording       {result.recording}")
    if result.plot:
        lines.append(f"  plot            {result.plot}")
    for err in result.errors:
        lines.append(f"  error: {err}")
    return "\n".join(lines)


COMMAND = LaunchCommand()
