"""World description shared by the planners, the simulators and the shields."""

from robot_hrl.world.world import Bounds, Box, Landmark, Obstacle, World, load_world

__all__ = ["Bounds", "Box", "Landmark", "Obstacle", "World", "load_world"]
