"""The PyBullet world: a Crazyflie URDF generated from robot_hrl.robots, rotor-level physics,
the scene of a world file, and an onboard camera. Headless (DIRECT) unless ``gui=True``."""

from sim.pybullet.quadrotor_sim import Contact, PyBulletQuadrotorSim
from sim.pybullet.randomization import Dynamics, RandomizationCfg
from sim.pybullet.urdf import urdf_text, write_urdf

__all__ = ["Contact", "Dynamics", "PyBulletQuadrotorSim", "RandomizationCfg", "urdf_text", "write_urdf"]
