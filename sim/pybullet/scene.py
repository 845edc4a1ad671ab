"""Build the static scene of a world file: ground plane, obstacle and landmark boxes.

Every box is a static (mass 0) body with a box collision shape and a visual box in its colour.
The returned map from body id to name lets the simulator name what the robot touched.
"""

from __future__ import annotations

from robot_hrl.world.world import World

GROUND_NAME = "ground"
GROUND_RGBA = (0.82, 0.82, 0.78, 1.0)
GROUND_HALF_EXTENT_M = 50.0
GROUND_THICKNESS_M = 0.1


def _box(bullet, center, size, rgba) -> int:
    half = [s / 2.0 for s in size]
    col = bullet.createCollisionShape(bullet.GEOM_BOX, halfExtents=half)
    vis = bullet.createVisualShape(bullet.GEOM_BOX, halfExtents=half, rgbaColor=list(rgba))
    return bullet.createMultiBody(baseMass=0.0, baseCollisionShapeIndex=col, baseVisualShapeIndex=vis,
                                  basePosition=list(center))


def build_ground(bullet) -> int:
    """A flat ground whose top face is the plane z = 0 (a thin box, so TinyRenderer shades it)."""
    return _box(bullet, (0.0, 0.0, -GROUND_THICKNESS_M / 2.0),
                (2 * GROUND_HALF_EXTENT_M, 2 * GROUND_HALF_EXTENT_M, GROUND_THICKNESS_M), GROUND_RGBA)


def build_world(bullet, world: World | None) -> dict[int, str]:
    """Create the ground and the world's boxes; returns {body id: name}."""
    names = {build_ground(bullet): GROUND_NAME}
    if world is None:
        return names
    for obstacle in world.obstacles:
        names[_box(bullet, obstacle.center, obstacle.size, (*obstacle.color, 1.0))] = obstacle.name
    for landmark in world.landmarks:
        names[_box(bullet, landmark.center, landmark.size, (*landmark.rgb, 1.0))] = landmark.id
    return names
