"""`colcon build --packages-select robot_hrl` (Debian's colcon, ament_python) gives the layout
`ros2 launch` and `ros2 run` look for; skipped where colcon is not installed (`.ci/ros` installs it).

Checked in the install: the launch file, the parameters file, the shipped model and worlds, the
ament resource marker, package.xml, and every node executable in lib/robot_hrl, run from the
install (not the checkout) with `--help`. The node executables' shebang is the interpreter colcon
ran with (Debian's python3, without this project's dependencies), so they are run here with the
interpreter of the tests, the way a ROS 2 user's sourced environment runs them with its own.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from robot_hrl.launch import graph

pytestmark = [pytest.mark.ros, pytest.mark.slow]

COLCON = shutil.which("colcon")
EXECUTABLES = ("planner_node", "skill_node", "sim_node", "estop", "teleop")


@pytest.fixture(scope="module")
def install(tmp_path_factory, repo_root) -> Path:
    if COLCON is None:
        pytest.skip("colcon is not installed (apt-get install colcon python3-colcon-ros ...; see .ci/ros)")
    base = tmp_path_factory.mktemp("colcon")
    proc = subprocess.run([COLCON, "--log-base", str(base / "log"), "build", "--paths", str(repo_root),
                           "--packages-select", "robot_hrl", "--build-base", str(base / "build"),
                           "--install-base", str(base / "install")],
                          cwd=base, capture_output=True, text=True, timeout=600,
                          env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return base / "install" / "robot_hrl"


def _site_packages(prefix: Path) -> Path:
    found = sorted(prefix.glob("lib/python3*/site-packages"))
    assert found, f"no site-packages under {prefix}"
    return found[0]


def test_colcon_installs_the_ament_layout(install):
    share = install / "share" / "robot_hrl"
    assert (install / "share" / "ament_index" / "resource_index" / "packages" / "robot_hrl").is_file()
    assert (share / "package.xml").is_file()
    launch_file = share / "launch" / "navigation.launch.py"
    assert launch_file.is_file()
    compile(launch_file.read_text(), str(launch_file), "exec")
    assert (share / "params" / "navigation.yaml").is_file()
    assert (share / "models" / "crazyflie_goto.onnx").is_file() and (share / "models" / "crazyflie_goto.onnx.sha256").is_file()
    assert (share / "models" / "worlds" / "demo.yaml").is_file()
    for spec in graph.NAVIGATION_NODES:
        assert spec.executable in EXECUTABLES


@pytest.mark.parametrize("executable", EXECUTABLES)
def test_each_node_executable_runs_from_the_install(install, executable, tmp_path):
    exe = install / "lib" / "robot_hrl" / executable
    assert exe.is_file() and os.access(exe, os.X_OK), exe
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = str(_site_packages(install))  # what `source install/setup.bash` puts first
    env["AMENT_PREFIX_PATH"] = str(install)
    where = subprocess.run([sys.executable, "-c", "import robot_hrl; print(robot_hrl.__file__)"], env=env,
                           cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert where.stdout.strip().startswith(str(install)), where.stdout + where.stderr
    proc = subprocess.run([sys.executable, str(exe), "--help"], env=env, cwd=tmp_path, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "usage" in (proc.stdout + proc.stderr).lower()


def test_installed_package_finds_its_shared_files_outside_the_checkout(install, tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = str(_site_packages(install))
    env["AMENT_PREFIX_PATH"] = str(install)
    code = ("from robot_hrl.nodes.resources import resolve_resource\n"
            "for rel in ('launch/params/navigation.yaml', 'models/crazyflie_goto.onnx', 'models/worlds/demo.yaml'):\n"
            "    print(resolve_resource(rel))\n")
    proc = subprocess.run([sys.executable, "-c", code], env=env, cwd=tmp_path, capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    paths = proc.stdout.split()
    assert len(paths) == 3 and all(p.startswith(str(install / "share" / "robot_hrl")) for p in paths), paths


def test_installed_package_carries_every_robots_shield_config(install, tmp_path):
    """Each robot package's shield.yaml is package data: the installed robots build their shields."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = str(_site_packages(install))
    code = ("from robot_hrl.robots import ROBOTS\n"
            "from robot_hrl.safety import load_shield_config\n"
            "for name, robot in sorted(ROBOTS.items()):\n"
            "    print(name, robot.shield_config_path, load_shield_config(robot.shield_config_path).units)\n")
    proc = subprocess.run([sys.executable, "-c", code], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    assert [line.split()[0] for line in lines] == ["crazyflie_2x", "diff_drive"]
    assert all(line.split()[1].startswith(str(install)) for line in lines), lines
