"""World files: the geofence, 3-D box obstacles and named coloured landmarks.

One YAML file describes a flying arena. The planners derive their grid from it, PyBullet
builds its scene from it, the shields take their fence and obstacle zones from it.

```yaml
name: demo
frame_id: map
bounds: {min: [-0.5, -0.5, 0.0], max: [4.5, 4.5, 2.0]}   # the geofence, m (ENU)
start: [0.5, 0.5, 0.0]
obstacles:
  - {name: pillar, center: [2.0, 1.0, 1.0], size: [0.4, 0.4, 2.0], color: [0.6, 0.6, 0.6]}
landmarks:
  - {id: red_box, color: red, rgb: [1.0, 0.0, 0.0], center: [3.5, 3.5, 0.15], size: [0.3, 0.3, 0.3]}
```
A landmark is a solid coloured box; ``goto red_box`` flies to its approach point,
``position + approach_offset`` (by default 0.6 m above its centre).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from robot_hrl.errors import WorldError

_STRICT = ConfigDict(frozen=True, extra="forbid")
Vec3 = tuple[float, float, float]


class Bounds(BaseModel):
    model_config = _STRICT
    min: Vec3
    max: Vec3

    @model_validator(mode="after")
    def _ordered(self) -> "Bounds":
        if not all(lo < hi for lo, hi in zip(self.min, self.max)):
            raise ValueError(f"bounds.min {self.min} must be below bounds.max {self.max} on every axis")
        return self

    def contains(self, point, margin: float = 0.0) -> bool:
        p = np.asarray(point, dtype=np.float64)
        return bool(np.all(p >= np.asarray(self.min) + margin) and np.all(p <= np.asarray(self.max) - margin))


class Box(BaseModel):
    """An axis-aligned box."""

    model_config = _STRICT
    center: Vec3
    size: Vec3 = Field(description="full extents along x, y, z, m")

    @model_validator(mode="after")
    def _positive(self) -> "Box":
        if not all(s > 0 for s in self.size):
            raise ValueError(f"box size {self.size} must be positive on every axis")
        return self

    @property
    def half_extents(self) -> np.ndarray:
        return np.asarray(self.size) / 2.0

    @property
    def lower(self) -> np.ndarray:
        return np.asarray(self.center) - self.half_extents

    @property
    def upper(self) -> np.ndarray:
        return np.asarray(self.center) + self.half_extents

    def contains(self, point, margin: float = 0.0) -> bool:
        p = np.asarray(point, dtype=np.float64)
        return bool(np.all(p >= self.lower - margin) and np.all(p <= self.upper + margin))

    def distance(self, point) -> float:
        """Euclidean distance from a point to the box surface (0 inside)."""
        p = np.asarray(point, dtype=np.float64)
        d = np.maximum(np.maximum(self.lower - p, p - self.upper), 0.0)
        return float(np.linalg.norm(d))


class Obstacle(Box):
    name: str
    color: Vec3 = (0.6, 0.6, 0.6)


class Landmark(Box):
    id: str
    color: str = Field(description="colour name used in tasks and by perception, e.g. 'red'")
    rgb: Vec3 = Field(description="render colour, components in [0, 1]")
    approach_offset: Vec3 = (0.0, 0.0, 0.6)

    @property
    def position(self) -> np.ndarray:
        return np.asarray(self.center)

    @property
    def approach_point(self) -> np.ndarray:
        return np.asarray(self.center) + np.asarray(self.approach_offset)


class World(BaseModel):
    model_config = _STRICT
    name: str
    frame_id: str = "map"
    bounds: Bounds
    start: Vec3 = (0.0, 0.0, 0.0)
    obstacles: tuple[Obstacle, ...] = ()
    landmarks: tuple[Landmark, ...] = ()
    map: str | None = Field(default=None, description="optional ROS map_server YAML, relative to this file")

    @model_validator(mode="after")
    def _consistent(self) -> "World":
        names = [o.name for o in self.obstacles]
        ids = [lm.id for lm in self.landmarks]
        for label, items in (("obstacle name", names), ("landmark id", ids)):
            dupes = sorted({n for n in items if items.count(n) > 1})
            if dupes:
                raise ValueError(f"duplicate {label}s: {dupes}")
        for box in (*self.obstacles, *self.landmarks):
            label = getattr(box, "name", None) or getattr(box, "id")
            if not (np.all(box.upper > self.bounds.min) and np.all(box.lower < self.bounds.max)):
                raise ValueError(f"{label!r} lies entirely outside the bounds {self.bounds.min}..{self.bounds.max}")
        if not self.bounds.contains(self.start):
            raise ValueError(f"start {self.start} is outside the bounds {self.bounds.min}..{self.bounds.max}")
        for box in self.solid_boxes():
            if box.contains(self.start):
                raise ValueError(f"start {self.start} is inside {getattr(box, 'name', None) or box.id!r}")
        for lm in self.landmarks:
            if not self.bounds.contains(lm.approach_point):
                raise ValueError(f"landmark {lm.id!r}: approach point {lm.approach_point.tolist()} is outside the bounds")
        return self

    def solid_boxes(self) -> tuple[Box, ...]:
        """Everything the robot can collide with: obstacles and landmarks."""
        return (*self.obstacles, *self.landmarks)

    def landmark(self, landmark_id: str) -> Landmark:
        for lm in self.landmarks:
            if lm.id == landmark_id:
                return lm
        raise WorldError(f"unknown landmark {landmark_id!r}; this world has: {[lm.id for lm in self.landmarks]}")

    def collides(self, point, margin: float = 0.0) -> bool:
        return any(box.contains(point, margin) for box in self.solid_boxes())


def load_world(path: str | Path) -> World:
    """Load and validate a world file; errors name the file and the problem."""
    path = Path(path)
    if not path.is_file():
        raise WorldError(f"world file {str(path)!r} does not exist; see models/worlds/ for examples")
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        raise WorldError(f"world file {str(path)!r} is not valid YAML: {exc}") from exc
    if not isinstance(data, dict):
        raise WorldError(f"world file {str(path)!r} must hold a mapping with name, bounds, obstacles, landmarks")
    try:
        world = World.model_validate(data)
    except ValidationError as exc:
        raise WorldError(f"world file {str(path)!r} is invalid: {exc}") from exc
    if world.map is not None and not (path.parent / world.map).is_file():
        raise WorldError(f"world file {str(path)!r} names map {world.map!r}, which does not exist next to it")
    return world
