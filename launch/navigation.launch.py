"""ROS 2 launch file of the navigation stack: sim (optional), skill and planner nodes.

    ros2 launch robot_hrl navigation.launch.py [use_sim:=true] [planner:=symbolic|llm|vlm|learned]
        [model:=models/crazyflie_goto.onnx] [world:=models/worlds/demo.yaml] [task:="..."] [namespace:=cf1]

(``world:=room:<density>:<seed>`` is ``robot-hrl launch``'s only: write the room with
``python -m robot_hrl.world.rooms`` and pass its world file and task here.)

The node list comes from robot_hrl.launch.graph and the parameters from
share/robot_hrl/params/navigation.yaml: the same two sources `robot-hrl launch navigation`
reads on a machine without ROS.
"""

import os

from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument
from launch.conditions import IfCondition
from launch.substitutions import LaunchConfiguration, PythonExpression
from launch_ros.actions import Node
from launch_ros.parameter_descriptions import ParameterValue

from robot_hrl.launch.graph import LAUNCH_ARGUMENTS, NAVIGATION_NODES

PACKAGE = "robot_hrl"


def _params_file() -> str:
    try:
        from ament_index_python.packages import get_package_share_directory

        return os.path.join(get_package_share_directory(PACKAGE), "params", "navigation.yaml")
    except Exception:  # not installed through colcon: the checkout's copy
        return os.path.join(os.path.dirname(os.path.abspath(__file__)), "params", "navigation.yaml")


def generate_launch_description() -> LaunchDescription:
    params_file = _params_file()
    actions = [
        DeclareLaunchArgument(a.name, default_value=a.default, description=a.description,
                              **({"choices": list(a.choices)} if a.choices else {}))
        for a in LAUNCH_ARGUMENTS
    ]
    for spec in NAVIGATION_NODES:
        overrides = {"use_sim_time": LaunchConfiguration("use_sim")}
        for arg, param in spec.arguments.items():
            # typed as strings: an empty task or a path must not be YAML-parsed into None or a number
            overrides[param] = ParameterValue(LaunchConfiguration(arg), value_type=str)
        learned = PythonExpression(["'", LaunchConfiguration("planner"), "' == 'learned'"])
        if spec.name == "sim_node":  # the VLM planner looks through the robot's camera; the learned one reads the rangers
            overrides["camera"] = PythonExpression(["'", LaunchConfiguration("planner"), "' == 'vlm'"])
            overrides["rangers"] = learned
        if spec.name == "skill_node":  # the learned planner: the shield's range source next to the map's
            overrides["range_shield"] = learned
            # and the yaw loop its level was trained with (its contract's heading; none: nothing runs)
            overrides["heading_model"] = ParameterValue(PythonExpression([
                "'", LaunchConfiguration("navigate_model"), "' if '", LaunchConfiguration("planner"), "' == 'learned' else ''"]),
                value_type=str)
        actions.append(
            Node(
                package=PACKAGE,
                executable=spec.executable,
                name=spec.name,
                namespace=LaunchConfiguration("namespace"),
                parameters=[params_file, overrides],
                output="screen",
                emulate_tty=True,
                condition=IfCondition(LaunchConfiguration(spec.condition)) if spec.condition else None,
            )
        )
    return LaunchDescription(actions)
