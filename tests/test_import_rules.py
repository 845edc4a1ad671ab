"""The house rule: robot_hrl never imports torch, sim, deploy or rsl_rl."""

import pkgutil
import subprocess
import sys

import robot_hrl

FORBIDDEN = ("torch", "sim", "deploy", "rsl_rl", "tensordict", "pybullet")


def test_robot_hrl_imports_no_training_or_deploy_code(repo_root):
    modules = [m.name for m in pkgutil.walk_packages(robot_hrl.__path__, prefix="robot_hrl.")]
    assert len(modules) > 5
    code = (
        "import importlib, sys\n"
        f"mods = {modules!r}\n"
        "failed = []\n"
        "for m in mods:\n"
        "    try: importlib.import_module(m)\n"
        "    except ImportError as e:\n"
        "        if 'rclpy' in str(e) or 'launch' in str(e): continue\n"
        "        raise\n"
        f"bad = sorted(m for m in sys.modules if m.split('.')[0] in {FORBIDDEN!r})\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=repo_root, check=True)
    assert out.stdout.strip() == "", f"robot_hrl pulled in: {out.stdout.strip()}"
