"""One ament_python package, also pip-installable.

    pip install -e .                    # the robot runtime: no torch
    pip install -e '.[train]'           # + torch, rsl-rl-lib, ONNX export: training (no PyBullet)
    pip install -e '.[train,pybullet]'  # + PyBullet: the PyBullet world and its evaluations
    pip install -e '.[dev]'             # everything, plus the test tools

The Isaac Lab environment (Python 3.12, `.ci/isaaclab`) installs '.[train,test]' next to
isaaclab==3.0.0: pybullet has no cp312 wheel, and nothing Isaac Lab runs needs it.

Install torch first with `pip install torch==2.13.0` (or your CUDA build) so that no other
requirement pulls a different build.
"""

from glob import glob

from setuptools import find_packages, setup

PACKAGE = "robot_hrl"

RUNTIME = [
    "numpy>=1.24,<3",
    "onnxruntime>=1.17,<2",
    "opencv-python-headless>=4.8",
    "pyyaml>=6",
    "pydantic>=2.5,<3",
    "jsonschema>=4.18",
    "cyclonedds>=0.10.5",
    "rosbags>=0.10",
    "mcap>=1.1",
    "matplotlib>=3.7",
    "tqdm>=4.65",
    "rich>=13",
]
TRAIN = [
    "torch>=2.4,<3",
    "rsl-rl-lib>=5.0,<6",
    "tensordict>=0.8",
    "tensorboard>=2.14",
    "onnx>=1.16",
    "onnxscript>=0.2",
    "array-api-compat>=1.9",  # robot_hrl.contract's action mapping on torch tensors (the same function as numpy)
]
PYBULLET = ["pybullet>=3.2.5"]
DEPLOY = ["onnx>=1.16", "cflib>=0.1.25"]
TEST = ["pytest>=7.4", "pytest-xdist>=3.3", "hypothesis>=6.90"]
DEV = TRAIN + PYBULLET + DEPLOY + TEST

setup(
    name=PACKAGE,
    version="0.1.0",
    description="Hierarchical robot control: PPO skills, ONNX contracts, shields, planners, ROS 2 nodes",
    license="Apache-2.0",
    python_requires=">=3.10",
    packages=find_packages(include=["robot_hrl", "robot_hrl.*", "sim", "sim.*", "deploy", "deploy.*"]),
    include_package_data=True,
    package_data={"sim.envs.native": ["*.c", "*.h"], "sim.agents": ["*.c"],  # built at run time (physics.native, the CPU ELU)
                  "robot_hrl.robots": ["*/shield.yaml", "*/shield_ranges.yaml"]},  # each robot's shield configuration (and range source)
    install_requires=RUNTIME,
    extras_require={"train": TRAIN, "pybullet": PYBULLET, "deploy": DEPLOY, "test": TEST, "dev": DEV},
    data_files=[
        ("share/ament_index/resource_index/packages", [f"resource/{PACKAGE}"]),
        (f"share/{PACKAGE}", ["package.xml"]),
        (f"share/{PACKAGE}/launch", glob("launch/*.launch.py")),
        (f"share/{PACKAGE}/params", glob("launch/params/*.yaml")),
        (f"share/{PACKAGE}/models", glob("models/*.onnx") + glob("models/*.sha256")),
        (f"share/{PACKAGE}/models/worlds", glob("models/worlds/*")),
        (f"share/{PACKAGE}/models/maps", glob("models/maps/*")),
    ],
    entry_points={
        "console_scripts": [
            "robot-hrl = robot_hrl.cli:main",
            # ROS 2 executables (`ros2 run robot_hrl <name>`); they also run without ROS.
            "planner_node = robot_hrl.nodes.planner_node:main",
            "skill_node = robot_hrl.nodes.skill_node:main",
            "estop = robot_hrl.nodes.estop:main",
            "teleop = robot_hrl.nodes.teleop:main",
            "sim_node = sim.nodes.sim_node:main",
        ],
        "robot_hrl.commands": [
            "plan = robot_hrl.planning.cli:COMMAND",
            "launch = robot_hrl.launch.cli:COMMAND",
            "export-c = deploy.crazyflie.cli:EXPORT_C",
            "flash = deploy.crazyflie.cli:FLASH",
            "jetson = deploy.jetson.cli:COMMAND",
        ],
    },
)
