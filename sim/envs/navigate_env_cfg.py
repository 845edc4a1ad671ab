"""Configuration of the ``navigate`` environment: a learned high level over the frozen goto skill."""

from __future__ import annotations

from dataclasses import dataclass, field, fields

from robot_hrl.errors import ConfigError


@dataclass
class NavigateRewardsCfg:
    progress_weight: float = 1.0
    """Per metre of geodesic distance to the goal gained in a decision (potential-based shaping)."""
    success_reward: float = 10.0
    collision_penalty: float = -10.0
    time_penalty: float = -0.02
    """Per decision."""
    proximity_weight: float = -1.0
    """Times how far the nearest horizontal obstacle (true distance) is inside ``proximity_m``."""
    proximity_m: float = 0.5
    shield_stop_weight: float = 0.0
    """Times the share of a decision's control ticks on which the shield's range source acted (its stop and approach
    zones; only with a shield in the loop, ``sim/train_navigate.py --range-shield-envs``): the level learns to pass the
    stop zone instead of waiting at it. 0: off."""
    proximity_source: str = "rangers"
    """Where that distance comes from: ``rangers`` the four horizontal rangers' true ranges (blind between their
    cones), ``all_directions`` the true distance from the robot's centre to the nearest box or fence in any
    direction (privileged, training only: the diagonals where most batched collisions happen,
    ``sim/diagnose_navigate.py``)."""


@dataclass
class NavigateCurriculumCfg:
    enabled: bool = True
    """Obstacle density in levels (sparse, then medium, then dense); False: every density from the start."""
    promote_success_rate: float = 0.8
    """Rolling success of the episodes at the highest unlocked density that unlocks the next one."""
    window_episodes: int = 400
    """Episodes in the rolling success window."""
    top_level_share: float = 0.6
    """Share of resets at the highest unlocked density (the rest uniform over the lower ones)."""


@dataclass
class NavigateMemoryCfg:
    """The range memory (robot_hrl.sensing.memory): the observation's ``range_memory_yaw`` sectors."""

    enabled: bool = True
    sensors: tuple[str, ...] = ("front", "back", "left", "right")
    """The rangers whose hits are remembered (the horizontal ones)."""
    capacity: int = 128
    """Points kept (a ring)."""
    min_spacing_m: float = 0.15
    """A hit this close to a remembered point is not added."""
    sectors: int = 16
    range_m: float = 4.0
    """A sector with no nearer point reads this (the rangers' range)."""
    update_rate_hz: float | None = None
    """How often readings are added; None: at every decision (the level's rate: one ray cast per decision;
    the rangers' own 10 Hz costs five)."""


@dataclass
class NavigateTrailCfg:
    """The trail (the observation's ``trail_yaw`` sectors): the robot's own earlier positions, one added after each
    decision, read as the nearest per sector around it (where the level has already been)."""

    enabled: bool = False
    capacity: int = 64
    """Positions kept (a ring): 64 at 0.3 m spacing is 19 m of path, more than a 30 s flight leaves."""
    min_spacing_m: float = 0.3
    """A position this close to a kept one is not added (hovering in place adds nothing)."""
    sectors: int = 8
    range_m: float = 3.0
    """A sector with no nearer earlier position reads this."""

    @classmethod
    def of(cls, spec) -> "NavigateTrailCfg":
        """The trail a level's contract names (its ``trail``, a TrailSpec; None: off): an evaluation builds it."""
        if spec is None:
            return cls(enabled=False)
        return cls(enabled=True, capacity=spec.capacity, min_spacing_m=spec.min_spacing_m, sectors=spec.sectors,
                   range_m=spec.range_m)


@dataclass
class NavigateHeadingCfg:
    """The heading loop under the skill (robot_hrl.runtime.heading; the contract's ``heading`` section): the robot
    turns to face its horizontal velocity, so the front ranger looks along its path, and the skill observes in its own
    frame. Off: the goto skill's own yaw (it has no yaw command; docs/navigation_learned.md, "Facing the motion")."""

    enabled: bool = False
    max_rate_radps: float = 2.0
    """The setpoint turns at most this fast: a quarter turn in 0.8 s, so the front cone is back on the path soon after
    a turn (0.8 rad/s left it off for seconds: 3 contacts in 300 flights against 0; benchmarks/README.md, "Issue #19:
    facing the motion")."""
    natural_frequency_radps: float = 5.0
    """The yaw loop's natural frequency: below the slowest motor's corner (1 / 0.15 s, the randomization's)."""
    damping_ratio: float = 0.9
    min_speed_mps: float = 0.2
    """Below this horizontal speed the direction of motion is noise: the setpoint keeps its last target."""
    max_error_rad: float = 0.5
    """The setpoint stays this close to the yaw (nothing winds up while the shield's backup holds the yaw)."""
    lead_s: float = 0.0
    """The target leads the direction of motion into a turn by this much of the velocity's turn (robot_hrl.runtime.heading;
    0: the velocity's own direction)."""
    lead_filter_s: float = 0.1
    """Time constant of the low-pass on the velocity's rate of change that the lead uses, s."""
    max_yaw_rate_radps: float = 0.0
    """The loop's yaw rate command is clipped to this, rad/s (robot_hrl.runtime.heading; 0: no limit, the plain PD)."""
    skill_yaw_rad: float | None = None
    """The yaw the goto skill is shown (its own equilibrium: robot_hrl.runtime.heading, "the skill's frame"). None:
    ``sim/train_navigate.py`` measures it for the skill (``sim/skill_yaw.py``) before training."""

    def spec(self):
        """The contract's HeadingSpec, or None when off."""
        from robot_hrl.contract.navigate import HeadingSpec

        if not self.enabled:
            return None
        if self.skill_yaw_rad is None:
            raise ConfigError("heading.skill_yaw_rad is not set: measure the goto skill's own yaw with "
                              "`python -m sim.skill_yaw <skill.onnx>` (sim/train_navigate.py does it) and set it")
        return HeadingSpec(**{name: getattr(self, name) for name in self._spec_fields()})

    @classmethod
    def of(cls, spec) -> "NavigateHeadingCfg":
        """The heading a level's contract names (its ``heading``, a HeadingSpec; None: off)."""
        if spec is None:
            return cls(enabled=False)
        return cls(enabled=True, **{name: getattr(spec, name) for name in cls._spec_fields()})

    @classmethod
    def _spec_fields(cls) -> tuple[str, ...]:
        """The fields this config shares with HeadingSpec (all but ``enabled``; the spec's ``mode`` is its only one)."""
        return tuple(f.name for f in fields(cls) if f.name != "enabled")

@dataclass
class NavigateEnvCfg:
    skill_path: str = "models/crazyflie_goto.onnx"
    """The frozen goto skill (exported ONNX with its contract)."""
    decision_rate_hz: float = 2.0
    """High-level decisions per second; the skill flies each subgoal for control_rate / this steps."""
    episode_length_s: float = 30.0
    """Time limit of an episode."""
    goal_tolerance_m: float = 0.3
    """Success: within this of the goal (3-D)."""
    max_offset_fraction: float = 1.0
    """Subgoal offset radius as a fraction of the skill's subgoal radius (<= 1: the adjacency constraint)."""
    flight_height_m: float = 1.0
    check_every_steps: int = 4
    """Collisions and the goal are checked every this many control steps."""
    rays_per_sensor: int = 5
    """Rays that sample each ranger's cone."""
    range_noise: bool = True
    randomize: bool = True
    """The goto environment's domain randomization (mass, motors, latency, disturbances, observation noise)."""
    randomization: dict = field(default_factory=dict)
    """Overrides of the goto environment's randomization ranges (``GotoEnvCfg.randomization`` field -> value), e.g. the
    shielded evaluation's ``{"battery_open_circuit_range_v": (3.7, 4.2)}``; empty: the goto environment's own."""
    random_yaw: bool = True
    """Start yaw uniform in [-pi, pi] (the rangers turn with the body); False: yaw 0."""
    rooms_per_density: int = 300
    """Training rooms per density (seeds 0..n-1 of the training split)."""
    room_split: str = "train"
    room_seed_offset: int = 0
    densities: tuple[str, ...] = ("sparse", "medium", "dense")
    native: bool | None = None
    """The goto environment's native C step (None: when a C compiler is there)."""
    memory: NavigateMemoryCfg = field(default_factory=NavigateMemoryCfg)
    trail: NavigateTrailCfg = field(default_factory=NavigateTrailCfg)
    heading: NavigateHeadingCfg = field(default_factory=NavigateHeadingCfg)
    rewards: NavigateRewardsCfg = field(default_factory=NavigateRewardsCfg)
    curriculum: NavigateCurriculumCfg = field(default_factory=NavigateCurriculumCfg)
