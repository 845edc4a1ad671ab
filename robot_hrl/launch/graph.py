"""The navigation node graph, described once for both launchers.

``launch/navigation.launch.py`` (ROS 2) and ``robot-hrl launch navigation`` (no ROS) both
read this module and ``launch/params/navigation.yaml``: which nodes run, by which executable,
which launch argument sets which parameter. Pure data and small functions; no ROS imports.
"""

from __future__ import annotations

from dataclasses import dataclass

from robot_hrl.nodes.resources import resolve_resource

LAUNCH_BACKENDS = ("cyclonedds", "rclpy")
"""Transports `robot-hrl launch` puts a whole graph on (nodes, monitor, recorder, /task sender)."""
DEFAULT_BACKEND = "cyclonedds"
"""The default whether rclpy is importable or not: `make demo` flies the same way on every machine."""

PARAMS_FILE = "launch/params/navigation.yaml"
"""The graph's parameters file, as addressed in the checkout (installed under share/robot_hrl/params)."""


@dataclass(frozen=True)
class LaunchArgument:
    name: str
    default: str
    description: str
    choices: tuple[str, ...] = ()


@dataclass(frozen=True)
class NodeSpec:
    name: str
    """Node name, and its key in the parameters file."""
    executable: str
    """Console script (``ros2 run robot_hrl <executable>``)."""
    module: str
    """The same program as ``python -m <module>`` (the ROS-free launcher uses this)."""
    arguments: dict[str, str]
    """Launch argument -> parameter name it sets on this node."""
    condition: str | None = None
    """A boolean launch argument that must be true for the node to start."""


def _default_rangers():
    """The default robot's rangers (``/range/<name>``: published by the sim node when the planner is learned)."""
    from robot_hrl.robots import DEFAULT_ROBOT, get_robot
    from robot_hrl.sensing import robot_range_sensors

    return robot_range_sensors(get_robot(DEFAULT_ROBOT))


LAUNCH_ARGUMENTS: tuple[LaunchArgument, ...] = (
    LaunchArgument("use_sim", "true", "start the PyBullet sim node; every node then runs on its /clock (use_sim_time)",
                   ("true", "false")),
    LaunchArgument("planner", "symbolic", "planner kind: symbolic (a map), llm, vlm, or learned (the map-free navigate "
                   "level over the goto skill, from the live rangers: the sim node publishes /range/<name>, the "
                   "skill node's shield adds its range source)", ("symbolic", "llm", "vlm", "learned")),
    LaunchArgument("model", "models/crazyflie_goto.onnx", "ONNX skill policy (contract embedded)"),
    LaunchArgument("world", "models/worlds/demo.yaml", "world file: geofence, obstacles, landmarks; or a generated "
                   "room, room:<density>:<seed> (sparse|medium|dense; seeds >= 1000000000 are held-out evaluation "
                   "rooms): written into the run folder, its task (takeoff; goto the goal; land) used when --task is "
                   "empty (robot_hrl.world.rooms)"),
    LaunchArgument("navigate_model", "models/crazyflie_navigate.onnx",
                   "the learned navigate level (planner learned); refused unless it was trained over --model"),
    LaunchArgument("task", "", "task for the planner at start-up (more can be sent on /task)"),
    LaunchArgument("namespace", "", "namespace of every node and topic (one per robot in a fleet)"),
)

NAVIGATION_NODES: tuple[NodeSpec, ...] = (
    NodeSpec("sim_node", "sim_node", "sim.nodes.sim_node", {"world": "world"}, condition="use_sim"),
    NodeSpec("skill_node", "skill_node", "robot_hrl.nodes.skill_node", {"model": "model", "world": "world"}),
    NodeSpec("planner_node", "planner_node", "robot_hrl.nodes.planner_node",
             {"planner": "planner", "world": "world", "task": "task", "model": "model",
              "navigate_model": "navigate_model"}),
)

TOPICS: dict[str, tuple[str, bool]] = {
    "/task": ("std_msgs/msg/String", False),
    "/plan": ("nav_msgs/msg/Path", True),
    "/subgoal": ("geometry_msgs/msg/PoseStamped", False),
    "/odom": ("nav_msgs/msg/Odometry", False),
    "/cmd_wrench": ("geometry_msgs/msg/WrenchStamped", False),
    "/clock": ("rosgraph_msgs/msg/Clock", False),
    "/camera/image_raw": ("sensor_msgs/msg/Image", False),
    "/diagnostics": ("diagnostic_msgs/msg/DiagnosticArray", False),
    "/skill/status": ("std_msgs/msg/String", False),
    "/planner/status": ("std_msgs/msg/String", True),
    "/estop": ("std_msgs/msg/Bool", False),
    "/battery": ("sensor_msgs/msg/BatteryState", False),
    **{s.topic: ("sensor_msgs/msg/Range", False) for s in _default_rangers()},
}
"""Every topic of the graph (namespaced at run time): ROS 2 type, latched. The recorder records these."""

SENSOR, COMMAND, LATCHED, INPUT = "sensor", "command", "latched", "input"
"""The QoS profiles of :mod:`robot_hrl.transport.interface` by name: ``sensor`` best effort, volatile,
keep last 5; ``command`` and ``input`` reliable, volatile, keep last 10 (ROS 2's default profile);
``latched`` reliable, transient local, keep last 1."""

TOPIC_QOS: dict[str, tuple[str, str]] = {
    "/task": (LATCHED, INPUT),
    "/plan": (LATCHED, LATCHED),
    "/subgoal": (COMMAND, INPUT),
    "/odom": (SENSOR, SENSOR),
    "/cmd_wrench": (COMMAND, COMMAND),
    "/clock": (SENSOR, SENSOR),
    "/camera/image_raw": (SENSOR, SENSOR),
    "/diagnostics": (COMMAND, COMMAND),
    "/skill/status": (COMMAND, COMMAND),
    "/planner/status": (LATCHED, LATCHED),
    "/estop": (INPUT, INPUT),
    "/battery": (SENSOR, SENSOR),
    **{s.topic: (SENSOR, SENSOR) for s in _default_rangers()},
}
"""Topic -> (QoS of the graph's publishers, QoS of its subscriptions): the table of
docs/nodes_launch.md, checked against the running graph by the tests. Every ``input`` subscription
accepts ROS 2's default publisher profile (``ros2 topic pub``); a ``latched`` publisher also serves
``ros2 topic echo --qos-durability transient_local`` joining late."""

TRUE_WORDS = ("true", "1", "yes", "on")


def as_bool(value) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in TRUE_WORDS:
        return True
    if text in ("false", "0", "no", "off", ""):
        return False
    raise ValueError(f"{value!r} is not a boolean; use true or false")


def default_arguments() -> dict[str, str]:
    return {a.name: a.default for a in LAUNCH_ARGUMENTS}


def check_arguments(values: dict[str, str]) -> dict[str, str]:
    """Complete ``values`` with defaults and validate choices; raises ValueError naming the argument."""
    known = {a.name: a for a in LAUNCH_ARGUMENTS}
    out = default_arguments()
    for key, value in values.items():
        if key not in known:
            raise ValueError(f"unknown launch argument {key!r}; known: {sorted(known)}")
        arg = known[key]
        value = "" if value is None else str(value)
        if arg.choices and value not in arg.choices:
            raise ValueError(f"launch argument {key}={value!r}: choose one of {list(arg.choices)}")
        out[key] = value
    return out


def node_parameters(spec: NodeSpec, arguments: dict[str, str]) -> dict[str, object]:
    """The parameters the launch arguments set on ``spec`` (on top of the parameters file)."""
    params: dict[str, object] = {"use_sim_time": as_bool(arguments["use_sim"])}
    if spec.name == "sim_node" and arguments.get("planner") == "vlm":
        params["camera"] = True  # the VLM planner looks through the robot's camera
    if arguments.get("planner") == "learned":
        if spec.name == "sim_node":
            params["rangers"] = True  # the level and the shield's range source read /range/<name>
        if spec.name == "skill_node":
            params["range_shield"] = True  # range_obstacles next to obstacles: both sources on
            params["heading_model"] = arguments["navigate_model"]  # the yaw loop the level was trained with, if any
    for arg, param in spec.arguments.items():
        value = arguments.get(arg, "")
        if arg == "task" and value == "":
            continue
        params[param] = value
    return params


def nodes_to_launch(arguments: dict[str, str]) -> list[NodeSpec]:
    return [n for n in NAVIGATION_NODES if n.condition is None or as_bool(arguments[n.condition])]


def params_file() -> str:
    """Path of the installed or checked-out navigation.yaml."""
    return str(resolve_resource(PARAMS_FILE, "parameters file"))
