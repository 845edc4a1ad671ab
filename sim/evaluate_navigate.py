"""Evaluate map-free navigation on held-out rooms: the learned level, a reactive baseline, the symbolic upper bound.

    python sim/evaluate_navigate.py --model runs/navigate/crazyflie_navigate.onnx --rooms 50 --json eval.json --plots plots/
    python sim/evaluate_navigate.py --model ... --sim pybullet --rooms 10

Rooms are the evaluation split (seeds from robot_hrl.world.rooms.EVAL_SEED_START, never used in
training), ``--rooms`` per density. Each planner flies each room once, from the same start, with the
frozen goto skill under every subgoal. Reported per density: success (within 0.3 m of the goal
before the time limit: 30 s, ``--time-limit-s`` to fly longer), collisions, time to goal (successful runs), path length ratio against the
symbolic planner's plan on the full map, and the learned level's inference time per decision.
The learned level runs through onnxruntime from its exported file (not the training code).
Every flight's horizontal path is kept at the decision rate (``path_xy_w`` in ``--json``); ``--plots`` draws
them over their rooms, one grid per planner and density, beside the success bars.
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
# run as a file, Python puts sim/ first on the path, where sim/pybullet would shadow the pybullet package
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from sim.navigate_shield import (RANGE_SHIELD_SECTION, SHIELDED_BATTERY_RANGE_V, number_or_off,  # noqa: E402,F401
                                 range_shield, shielded_randomization)  # (their one home; re-exported for the evaluation's users)

DENSITY_NAMES = ("sparse", "medium", "dense")
FAILURE_CLASSES = ("collision", "dead_end", "time_out")
TIME_LIMIT_S = 30.0
"""The evaluation's time limit: a goal 4-8 m away (robot_hrl.world.rooms.RoomCfg) reached within it, 0.27 m/s on
average for the farthest. ``--time-limit-s`` flies longer; success within this limit is still reported then."""
STUCK_WINDOW_S = 10.0
"""A time-out is a dead end when the robot's last ``STUCK_WINDOW_S`` of flight stayed within ``STUCK_RADIUS_M``."""
STUCK_RADIUS_M = 0.75


def path_xy_list(path_xy: np.ndarray) -> list[list[float]]:
    """A flight's horizontal path (T, 2), world frame, as JSON-ready lists rounded to the millimetre: its ``path_xy_w``,
    one point per decision and the last (the trajectory plots)."""
    return np.round(np.asarray(path_xy, dtype=np.float64), 3).tolist()


WILSON_Z_95 = 1.959963984540054
"""The standard normal's 97.5 % quantile: a two-sided 95 % interval."""


def success_interval(successes: int, flights: int, z: float = WILSON_Z_95) -> tuple[float, float]:
    """The 95 % Wilson score interval of a success rate (E. B. Wilson, "Probable inference, the law of succession, and
    statistical inference", JASA 22, 1927): what 50 flights per density can tell apart. ``scipy.stats.binomtest(k,
    n).proportion_ci(method="wilson")`` computes the same (tests/test_navigate_pipeline.py checks it); scipy is not a
    dependency of the evaluation, hence these lines. No flights: (0, 1)."""
    if flights <= 0:
        return 0.0, 1.0
    p = successes / flights
    z2 = z * z
    denominator = 1.0 + z2 / flights
    centre = (p + z2 / (2.0 * flights)) / denominator
    half = z * math.sqrt(p * (1.0 - p) / flights + z2 / (4.0 * flights * flights)) / denominator
    return max(0.0, centre - half), min(1.0, centre + half)


def failure_class(record: dict) -> str | None:
    """None (success), ``collision``, ``dead_end`` (a time-out held or circling in one spot: its last
    STUCK_WINDOW_S within STUCK_RADIUS_M) or ``time_out`` (still travelling at the limit)."""
    if record["success"]:
        return None
    if record["collided"]:
        return "collision"
    return "dead_end" if record.get("stuck") else "time_out"


def stuck(positions_xy: np.ndarray, dt_s: float) -> bool:
    """Whether the last STUCK_WINDOW_S of a trajectory (T, 2), sampled every ``dt_s``, stays within STUCK_RADIUS_M."""
    n = max(int(round(STUCK_WINDOW_S / dt_s)), 1)
    tail = np.asarray(positions_xy, dtype=float)[-n:]
    if len(tail) < n:
        return False
    return bool(np.linalg.norm(tail - tail.mean(axis=0), axis=-1).max() < STUCK_RADIUS_M)


def load_learned(path: str | Path, skill_path: str | Path):
    """The exported level's contract and onnxruntime session, after checking it fits the goto skill and its graph's
    inputs are what its contract says (a recurrent level's state too)."""
    import onnxruntime as ort

    from robot_hrl.contract.navigate import NAVIGATE_METADATA_KEY, NavigateContract
    from robot_hrl.runtime import read_model_metadata
    from sim.envs.frozen_skill import FrozenSkill

    meta = read_model_metadata(path)
    contract = NavigateContract.from_json(meta.get(NAVIGATE_METADATA_KEY))
    skill = FrozenSkill(skill_path)
    contract.check_lower_skill(skill.contract, skill.sha256)
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    from robot_hrl.planning.learned import session_act

    session_act(session, contract, path)  # (the graph's inputs are what the contract says, or ContractError)
    return contract, session


def _summaries(records: list[dict]) -> dict:
    out = {}
    for d in DENSITY_NAMES:
        rs = [r for r in records if r["density"] == d]
        if not rs:
            continue
        ok = [r for r in rs if r["success"]]
        out[d] = {
            "episodes": len(rs), "success_rate": float(np.mean([r["success"] for r in rs])),
            "success_ci95": list(success_interval(sum(bool(r["success"]) for r in rs), len(rs))),
            "success_rate_within_evaluation_limit": float(np.mean([r["success"] and r["time_s"] <= TIME_LIMIT_S + 1e-9
                                                                   for r in rs])),
            "collision_rate": float(np.mean([r["collided"] for r in rs])),
            "time_out_rate": float(np.mean([r["time_out"] for r in rs])),
            "failures": {c: int(sum(failure_class(r) == c for r in rs)) for c in FAILURE_CLASSES},
            "mean_time_to_goal_s": float(np.mean([r["time_s"] for r in ok])) if ok else None,
            "mean_path_length_ratio": float(np.mean([r["path_length_m"] / r["symbolic_length_m"] for r in ok])) if ok else None,
        }
    return out


def evaluate_batched(planners: dict, rooms, skill_path, seed: int = 0, randomize: bool = True,
                     episode_length_s: float = TIME_LIMIT_S, shielded: bool = False, randomization: dict | None = None,
                     trail=None, heading=None, range_section: dict | None = None) -> dict:
    """Every planner flies every room once in the batched simulator. ``planners``: name -> fn(env, obs) -> actions.

    ``shielded``: the skill's commands go through the runtime's shield with the range source only, one per flight
    (``sim/navigate_shield.py``: the room unmapped for it, as in PyBullet's ``--range-shield``); collisions are still
    the simulator's own (its boxes, fence, floor and ceiling). ``randomization``: overrides of the airframes' ranges
    (None: the goto environment's own, or with ``shielded`` its batteries from :data:`SHIELDED_BATTERY_RANGE_V`).
    ``trail``: the level's contract's ``trail`` (a TrailSpec), when it observes one: the environment keeps it.
    ``heading``: the level's contract's ``heading`` (a HeadingSpec), when it was trained with one: every planner's robot
    flies with that yaw loop (robot_hrl.runtime.heading), so all fly the same robot. ``range_section``: the range
    source's zones (default :data:`RANGE_SHIELD_SECTION`; :func:`range_section_with` makes one with keys changed)."""
    import torch

    from sim.envs.nav_rooms import RoomPool
    from sim.envs.navigate_env import NavigateEnv
    from sim.envs.navigate_env_cfg import NavigateEnvCfg, NavigateHeadingCfg, NavigateTrailCfg
    from sim.navigate_baselines import SymbolicCarrot

    pool = RoomPool.from_rooms(rooms)
    carrot = SymbolicCarrot(rooms, 1.0)
    results = {}
    if randomization is None:
        randomization = shielded_randomization() if shielded else {}
    for name, planner in planners.items():
        cfg = NavigateEnvCfg(skill_path=str(skill_path), randomize=randomize, episode_length_s=episode_length_s,
                             randomization=dict(randomization))
        cfg.curriculum.enabled = False
        cfg.trail = NavigateTrailCfg.of(trail)
        cfg.heading = NavigateHeadingCfg.of(heading)
        env = NavigateEnv(cfg, num_envs=len(rooms), seed=seed, pool=pool)
        env.forced_rooms = torch.arange(len(rooms))
        finished = torch.zeros(len(rooms), dtype=torch.bool)
        if shielded:
            from robot_hrl.runtime import OnnxPolicy
            from sim.navigate_shield import BatchedShield

            env.shield = BatchedShield(env, rooms, OnnxPolicy(skill_path, provider="cpu"), section=range_section, seed=seed,
                                       active=~finished)
        obs = env.reset()
        if hasattr(planner, "reset"):  # (a recurrent level's state: zeros at the batch's first decision)
            planner.reset()
        records: list[dict | None] = [None] * len(rooms)
        infer_s, decisions = 0.0, 0
        visited_xy: list[torch.Tensor] = []  # (N, 2) at every decision: a time-out's last seconds say dead end or not
        while not finished.all():
            visited_xy.append(env.low.position_w[:, :2].clone())
            t = time.perf_counter()
            actions = planner(env, obs["policy"])
            infer_s += time.perf_counter() - t
            decisions += 1
            obs, _, dones, extras = env.step(actions)
            e = extras["episode_end"]
            ended = torch.nonzero(dones.bool() & ~finished).squeeze(-1).tolist()
            flown = torch.stack(visited_xy).numpy() if ended else None
            for i in ended:
                path_xy = np.vstack((flown[:, i], np.asarray(e["end_position_w"][i][:2], dtype=np.float64)[None]))
                records[i] = {"room": rooms[i].name, "density": rooms[i].density, "success": bool(e["success"][i]),
                              "collided": bool(e["collided"][i]), "time_out": bool(e["time_out"][i]),
                              "time_s": float(e["time_to_goal_s"][i]), "path_length_m": float(e["path_length_m"][i]),
                              "symbolic_length_m": carrot.lengths[i],
                              "final_distance_m": float(e["final_distance_m"][i]),
                              "end_position_w": [float(x) for x in e["end_position_w"][i]],
                              "ground_contact": bool(e["ground_contact"][i]),
                              "stuck": bool(e["time_out"][i]) and stuck(flown[:, i], env.decision_dt_s),
                              "path_xy_w": path_xy_list(path_xy), "shielded": shielded}
                if shielded:
                    records[i].update(env.shield.ended[i])
            finished |= dones.bool()
            if shielded:
                env.shield.active = ~finished
        results[name] = {"by_density": _summaries(records), "episodes": records,
                         "inference_s_per_decision_batch": infer_s / max(decisions, 1), "batch": len(rooms)}
    return results


class BatchedLevel:
    """An exported level flying a batch, one decision per call (``fn(env, obs) -> actions``). A recurrent level's graph
    takes its state beside the observation (the contract's ``recurrent``: ``h_in`` -> ``h_out``); this carries it
    from call to call, zeros after ``reset`` (evaluate_batched resets it before a batch's first decision; a flight
    ended in the batch is not flown again)."""

    def __init__(self, session) -> None:
        from robot_hrl.contract.navigate import NAVIGATE_METADATA_KEY, NavigateContract
        from robot_hrl.planning.learned import session_act

        contract = NavigateContract.from_json(session.get_modelmeta().custom_metadata_map.get(NAVIGATE_METADATA_KEY))
        self.act = session_act(session, contract)
        """The graph as the runtime runs it (robot_hrl.planning.learned: ``act(obs)``, or ``act(obs, state)``)."""
        self.hidden_size = contract.recurrent.hidden_size if contract.recurrent is not None else 0
        """The recurrent state's size (0: a feed-forward level)."""
        self.state: np.ndarray | None = None

    def reset(self) -> None:
        self.state = None

    def __call__(self, env, obs):
        import torch

        x = obs.numpy()
        if self.hidden_size == 0:
            return torch.from_numpy(self.act(x))
        if self.state is None or self.state.shape[1] != x.shape[0]:
            self.state = np.zeros((1, x.shape[0], self.hidden_size), np.float32)
        actions, self.state = self.act(x, self.state)
        return torch.from_numpy(actions)


def range_section_with(overrides: list[str] | None) -> dict | None:
    """The range source's zones with ``KEY=VALUE`` overrides (``--range-key``; ``off``: None, a key's "rule off"), or
    None without any. ValueError naming the override for a value that is not a number or ``off``; a key the section
    does not have is refused when the shield is built (robot_hrl.safety.units.range_obstacles.RangeObstaclesCfg)."""
    if not overrides:
        return None
    section = copy.deepcopy(RANGE_SHIELD_SECTION)
    for item in overrides:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ValueError(f"--range-key {item!r}: write KEY=VALUE, e.g. unknown_blind_creep_m=0.06")
        try:
            section[key.strip()] = number_or_off(value)
        except ValueError:
            raise ValueError(f"--range-key {item!r}: {value!r} is not a number or 'off'") from None
    return section


def batched_planners(learned_session=None, rooms=None, max_offset_m: float = 1.0) -> dict:
    import torch

    from sim.navigate_baselines import SymbolicCarrot, reactive_potential_field

    planners = {}
    if learned_session is not None:
        planners["learned"] = BatchedLevel(learned_session)
    planners["reactive"] = lambda env, obs: reactive_potential_field(obs)
    carrot = SymbolicCarrot(rooms, max_offset_m)
    planners["symbolic_full_map"] = lambda env, obs: carrot(env.room, env.low.position_w, env.low.quat_wxyz)
    return planners


def fly_pybullet(room, planner, skill_path, seed: int = 0, decision_rate_hz: float = 2.0, time_limit_s: float = TIME_LIMIT_S,
                 goal_tolerance_m: float = 0.3, max_offset_m: float = 1.0, contract=None, shielded: bool = False,
                 heading=None, range_section: dict | None = None) -> dict:
    """One room in PyBullet: the goto skill through the runtime (OnnxPolicy), the rangers by rayTestBatch.

    ``shielded``: the skill's commands go through the shield with the range source only (:func:`range_shield`:
    the room is unmapped for it), fed with every ranger reading, every subgoal filtered on arrival; ``range_section``:
    its zones (default :data:`RANGE_SHIELD_SECTION`).

    ``contract``: the learned level's NavigateContract (its observation, range memory, action mapping and
    decision rate); None (a baseline): the memory-free observation and a ``max_offset_m`` offset radius.
    ``heading``: a HeadingSpec the robot flies with (robot_hrl.runtime.heading; default: the contract's, if any)."""
    from robot_hrl.contract.navigate import (
        compute_navigate_observation, navigate_observation_terms, offset_from_action, subgoal_from_offset,
        subgoal_offset_action_spec,
    )
    from robot_hrl.geometry import quat_from_euler_rpy
    from robot_hrl.planning.learned import LearnedNavigator
    from robot_hrl.runtime import OnnxPolicy
    from robot_hrl.runtime.heading import heading_loop
    from robot_hrl.safety import ShieldInput
    from robot_hrl.sensing import robot_range_sensors
    from sim.pybullet import PyBulletQuadrotorSim
    from sim.pybullet.ranging import PyBulletRangers, build_enclosure
    from sim.pybullet.scene import GROUND_NAME

    policy = OnnxPolicy(skill_path, provider="cpu")
    sensors = robot_range_sensors(policy.robot)
    navigator = None
    if contract is None:  # a baseline on the memory-free observation
        terms = navigate_observation_terms(max(s.max_range_m for s in sensors), len(sensors), max_offset_m)
        action_spec = subgoal_offset_action_spec(max_offset_m)
        sense_hz = decision_rate_hz
    else:  # the learned level: the runtime's navigator (robot_hrl.planning.learned), as the planner node runs it
        navigator = LearnedNavigator(contract, sensors, planner)
        decision_rate_hz = contract.decision_rate_hz
        sense_hz = contract.memory.update_rate_hz if contract.memory is not None else decision_rate_hz
    sense_every = int(round(policy.control_rate_hz / sense_hz))
    rng = np.random.default_rng(seed)
    with PyBulletQuadrotorSim(robot=policy.robot, world=room.world, control_hz=policy.control_rate_hz, seed=seed) as sim:
        build_enclosure(sim.bullet, room.world)
        rangers = PyBulletRangers(sim.bullet, sensors, seed=seed)
        yaw = rng.uniform(-np.pi, np.pi)
        state = sim.reset(room.start_w, quat_from_euler_rpy(0.0, 0.0, yaw))
        policy.reset()
        yaw_loop = heading_loop(heading if heading is not None else getattr(contract, "heading", None), policy)
        goal = np.array(room.goal_w)
        subgoal = np.array(room.start_w)
        per_decision = int(round(policy.control_rate_hz / decision_rate_hz))
        steps, path, collided, success, infer_s, decisions = 0, 0.0, False, False, 0.0, 0
        positions = [state.position_w.copy()]

        shield = range_shield(policy, room, range_section) if shielded else None
        unit = shield.unit("range_obstacles") if shield is not None else None
        interventions: dict[str, int] = {}

        shield_every = int(round(policy.control_rate_hz / max(s.update_rate_hz for s in sensors)))

        def sense(for_level: bool = True, for_shield: bool = True):
            """Read the rangers: the level's memory at its rate, the shield's range source at the rangers' rate."""
            r = rangers.readings(state.position_w, state.quat_wxyz)
            if navigator is not None and for_level:
                navigator.sense(state.position_w, state.quat_wxyz, r)
            if unit is not None and for_shield:
                for spec, value in zip(sensors, r):
                    unit.update(spec.name, float(value), sim.time_s)
            return r

        ranges = sense()
        while steps < time_limit_s * policy.control_rate_hz and not (collided or success):
            if steps % per_decision == 0:
                t = time.perf_counter()
                if navigator is not None:
                    subgoal = navigator.decide(state.position_w, state.quat_wxyz, state.linear_velocity_w, goal)
                else:
                    obs = compute_navigate_observation(terms, {
                        "position_w": state.position_w, "quat_wxyz": state.quat_wxyz, "linear_velocity_w": state.linear_velocity_w,
                        "goal_w": goal, "ranges_m": ranges, "last_subgoal_w": subgoal})
                    subgoal = subgoal_from_offset(offset_from_action(planner(obs[None])[0], action_spec), state.position_w,
                                                  state.quat_wxyz, room.start_w[2])
                infer_s += time.perf_counter() - t
                decisions += 1
            prev = state.position_w.copy()
            # under a heading loop the skill observes in its frame and the loop owns the yaw torque (as under the skill node)
            actions = policy.step(state, subgoal) if yaw_loop is None else yaw_loop.step(policy, state, subgoal)
            if shield is None:
                wrench = policy.to_wrench(actions)
            else:
                if steps % per_decision == 0:
                    subgoal, _ = shield.filter_subgoal(subgoal, state.position_w, sim.time_s)
                battery_v = sim.chain_state.get("battery_voltage_v")  # the measured battery, as the skill node gets /battery
                out = shield.step(ShieldInput(now_s=sim.time_s, state=state, actions=actions, subgoal_w=subgoal,
                                              battery_v=None if battery_v is None else float(battery_v)))
                for item in out.interventions:
                    key = f"{item.unit}.{item.constraint}"
                    interventions[key] = interventions.get(key, 0) + 1
                wrench = out.wrench
            state = sim.step(wrench)
            steps += 1
            path += float(np.linalg.norm(state.position_w - prev))
            positions.append(state.position_w.copy())
            if steps % sense_every == 0:  # the rangers at the rate the level was trained with (the batched env's)
                ranges = sense(for_shield=unit is not None and steps % shield_every == 0)
            elif unit is not None and steps % shield_every == 0:
                sense(for_level=False)
            collided = sim.collided() or any(c.body == GROUND_NAME for c in sim.collisions()) or not state.is_finite()
            success = (not collided) and float(np.linalg.norm(state.position_w - goal)) < goal_tolerance_m
    timed_out = not (success or collided)
    flown = np.asarray(positions)
    return {"room": room.name, "density": room.density, "success": bool(success), "collided": bool(collided),
            "time_out": timed_out, "stuck": timed_out and stuck(flown[:, :2], 1.0 / policy.control_rate_hz),
            "final_distance_m": float(np.linalg.norm(state.position_w - goal)),
            "time_s": steps / policy.control_rate_hz, "path_length_m": path,
            "inference_s": infer_s / max(decisions, 1), "positions_w": flown,
            "path_xy_w": path_xy_list(np.vstack((flown[::per_decision, :2], flown[-1:, :2]))), "shielded": shielded,
            "interventions": interventions}


def evaluate_pybullet(planners: dict, rooms, skill_path, seed: int = 0, contracts: dict | None = None,
                      shielded: bool = False, time_limit_s: float = TIME_LIMIT_S, range_section: dict | None = None) -> dict:
    """Every planner flies every room in PyBullet; ``contracts``: planner name -> its NavigateContract (learned ones).
    A level trained with a heading loop (its contract's ``heading``): every planner's robot flies with it, as in
    :func:`evaluate_batched`."""
    from tqdm import tqdm

    from sim.navigate_baselines import SymbolicCarrot

    lengths = SymbolicCarrot(rooms, 1.0).lengths
    heading = next((c.heading for c in (contracts or {}).values() if c is not None and c.heading is not None), None)
    results = {}
    for name, planner in planners.items():
        records = []
        for i, room in enumerate(tqdm(rooms, desc=f"pybullet {name}", unit="room", leave=False)):
            r = fly_pybullet(room, planner, skill_path, seed + i, time_limit_s=time_limit_s,
                             contract=(contracts or {}).get(name), shielded=shielded, heading=heading,
                             range_section=range_section)
            r["symbolic_length_m"] = lengths[i]
            r.pop("positions_w")
            records.append(r)
        results[name] = {"by_density": _summaries(records), "episodes": records,
                         "inference_s_per_decision": float(np.mean([r["inference_s"] for r in records]))}
    return results


def plot_results(results: dict, out_dir: Path, title: str) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out_dir.mkdir(parents=True, exist_ok=True)
    fig, ax = plt.subplots(figsize=(6.5, 4))
    names = list(results)
    width = 0.8 / max(len(names), 1)
    for k, name in enumerate(names):
        by = results[name]["by_density"]
        vals = [by.get(d, {}).get("success_rate", 0.0) for d in DENSITY_NAMES]
        ax.bar(np.arange(3) + k * width, vals, width, label=name)
    ax.set_xticks(np.arange(3) + width * (len(names) - 1) / 2, DENSITY_NAMES)
    ax.set_ylim(0, 1.25)
    ax.axhline(0.9, color="k", lw=0.8, ls="--")
    ax.set_ylabel("success rate")
    ax.set_title(title)
    ax.legend(loc="upper center", fontsize=8, ncol=len(names))
    path = out_dir / (title.replace(" ", "_").replace(":", "") + ".png")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


OUTCOME_LABELS = {None: "reached", "collision": "collision", "dead_end": "dead end", "time_out": "time-out"}


def plot_trajectories(results: dict, rooms, out_dir: Path, prefix: str, columns: int = 10) -> list[Path]:
    """One PNG per planner and density: every flight's path over its room, seen from above. Boxes grey, the fence a
    black frame, the start a green dot, the goal a red star; the path green when the flight reached the goal, red
    otherwise, with its outcome (collision, dead end, time-out) in the panel's title. Returns the files written."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle

    by_name = {room.name: room for room in rooms}
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for name, r in results.items():
        for density in DENSITY_NAMES:
            flights = [e for e in r["episodes"] if e is not None and e["density"] == density]
            if not flights:
                continue
            cols = min(columns, len(flights))
            rows = -(-len(flights) // cols)
            fig, axes = plt.subplots(rows, cols, figsize=(max(1.9 * cols, 6.0), 2.0 * rows + 0.4), squeeze=False)
            for ax in axes.ravel()[len(flights):]:
                ax.axis("off")
            for ax, e in zip(axes.ravel(), flights):
                room = by_name[e["room"]]
                (x0, y0, _), (x1, y1, _) = room.world.bounds.min, room.world.bounds.max
                ax.add_patch(Rectangle((x0, y0), x1 - x0, y1 - y0, fill=False, color="k", lw=0.8))
                for box in room.world.obstacles:
                    (cx, cy, _), (sx, sy, _) = box.center, box.size
                    ax.add_patch(Rectangle((cx - sx / 2, cy - sy / 2), sx, sy, color="0.65", lw=0))
                path = np.asarray(e["path_xy_w"])
                outcome = failure_class(e)
                ax.plot(path[:, 0], path[:, 1], "-", color="tab:green" if outcome is None else "tab:red", lw=1.0)
                if outcome == "collision":
                    ax.plot(path[-1, 0], path[-1, 1], "x", color="tab:red", ms=7, mew=2)
                ax.plot(room.start_w[0], room.start_w[1], "o", color="tab:green", ms=4)
                ax.plot(room.goal_w[0], room.goal_w[1], "*", color="tab:red", ms=8)
                ax.set_xlim(x0 - 0.2, x1 + 0.2)
                ax.set_ylim(y0 - 0.2, y1 + 0.2)
                ax.set_aspect("equal")
                ax.axis("off")
                ax.set_title(f"{room.seed} {OUTCOME_LABELS[outcome]} {e['time_s']:.1f} s", fontsize=6)
            fig.suptitle(f"{prefix}: {name}, {density} rooms ({sum(failure_class(e) is None for e in flights)} of "
                         f"{len(flights)} reached)", fontsize=9)
            fig.tight_layout()
            path = out_dir / f"{prefix.replace(' ', '_').replace(',', '')}_{name}_{density}_paths.png"
            fig.savefig(path, dpi=80)
            plt.close(fig)
            written.append(path)
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python sim/evaluate_navigate.py", description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__.split("\n\n", 1)[1])
    parser.add_argument("--model", default=None, help="the exported navigate level (.onnx); without it only the baselines run")
    parser.add_argument("--skill", default="models/crazyflie_goto.onnx", help="the goto skill the level was trained over")
    parser.add_argument("--sim", choices=["batched", "pybullet"], default="batched")
    parser.add_argument("--rooms", type=int, default=50, help="held-out rooms per density")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--split", choices=["eval", "train"], default="eval",
                        help="eval: the held-out evaluation rooms (the figures); train: training-split rooms from "
                             "--seed-offset (choose between candidates there, e.g. seeds 150-199 of a run on 150 rooms)")
    parser.add_argument("--seed-offset", type=int, default=0, help="first room seed of the split (after its base)")
    parser.add_argument("--json", default=None, help="write the results here")
    parser.add_argument("--plots", default=None, help="write PNG plots into this directory: success by density, and "
                             "every flight's path over its room (one grid per planner and density)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--planners", default=None, metavar="NAMES",
                        help="comma-separated planners to fly (learned, reactive, symbolic_full_map; default: all there are), "
                             "e.g. learned to compare candidates of the level")
    parser.add_argument("--range-shield", action="store_true",
                        help="every planner's skill commands go through the runtime's shield with the range source "
                             "(range_obstacles, RANGE_SHIELD_SECTION's zones; the rooms unmapped for it), fed by the rangers at "
                             "their rate; collisions are still judged from the simulator (PyBullet's contacts, the batched "
                             "simulator's boxes)")
    parser.add_argument("--range-key", action="append", default=None, metavar="KEY=VALUE",
                        help="with --range-shield: change a key of the range source's zones (RANGE_SHIELD_SECTION, "
                             "shield_ranges.yaml's), e.g. unknown_blind_creep_m=0.06; 'off' for None (a rule off); "
                             "repeatable")
    parser.add_argument("--time-limit-s", type=float, default=TIME_LIMIT_S,
                        help=f"a flight that has not reached its goal by then is a time-out (default {TIME_LIMIT_S:g}, the "
                             "evaluation's figures); longer limits also print success within the default one, so slow "
                             "flights can be told from lost ones")
    args = parser.parse_args(argv)
    if not (math.isfinite(args.time_limit_s) and args.time_limit_s > 0.0):
        parser.error(f"--time-limit-s must be a number of seconds > 0 (got {args.time_limit_s}); the evaluation's "
                     f"figures use {TIME_LIMIT_S:g}")
    import torch

    from robot_hrl.errors import RobotHrlError
    from robot_hrl.world.rooms import generate_room, room_seeds

    try:
        range_section = range_section_with(args.range_key)
    except ValueError as exc:
        parser.error(str(exc))
    if range_section is not None and not args.range_shield:
        parser.error("--range-key changes the range shield's zones: fly with --range-shield")
    torch.set_num_threads(args.threads)
    torch.set_flush_denormal(True)
    rooms = [generate_room(d, s, args.split) for d in DENSITY_NAMES for s in room_seeds(args.split, args.rooms, args.seed_offset)]
    try:
        session = None
        if args.model:
            contract, session = load_learned(args.model, args.skill)
    except RobotHrlError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    wanted = None if args.planners is None else [n.strip() for n in args.planners.split(",") if n.strip()]

    def chosen(planners: dict) -> dict:
        if wanted is None:
            return planners
        unknown = [n for n in wanted if n not in planners]
        if unknown or not wanted:
            raise SystemExit(f"--planners {args.planners!r}: {unknown or 'none'} not among this run's planners "
                             f"{sorted(planners)} (learned needs --model)")
        return {n: planners[n] for n in wanted}

    if args.sim == "batched":
        results = evaluate_batched(chosen(batched_planners(session, rooms)), rooms, args.skill, args.seed,
                                   episode_length_s=args.time_limit_s, shielded=args.range_shield,
                                   trail=contract.trail if session is not None else None,
                                   heading=contract.heading if session is not None else None, range_section=range_section)
    else:
        from sim.navigate_baselines import reactive_potential_field
        planners = {}
        if session is not None:
            from robot_hrl.planning.learned import session_act

            planners["learned"] = session_act(session, contract, args.model)
        planners["reactive"] = lambda obs: reactive_potential_field(torch.from_numpy(obs)).numpy()
        results = evaluate_pybullet(chosen(planners), rooms, args.skill, args.seed,
                                    {"learned": contract} if session is not None else None, shielded=args.range_shield,
                                    time_limit_s=args.time_limit_s, range_section=range_section)
    for name, r in results.items():
        for d, s in r["by_density"].items():
            lo, hi = s["success_ci95"]
            print(f"{args.sim:8s} {name:18s} {d:7s} success {s['success_rate']:.3f} [95 % {lo:.2f}-{hi:.2f}] collisions {s['collision_rate']:.3f} "
                  f"time-outs {s['time_out_rate']:.3f} time {s['mean_time_to_goal_s']} path ratio {s['mean_path_length_ratio']} "
                  f"failures {s['failures']}" + (f" (time limit {args.time_limit_s:g} s; success within {TIME_LIMIT_S:g} s "
                                                 f"{s['success_rate_within_evaluation_limit']:.3f})"
                                                 if args.time_limit_s != TIME_LIMIT_S else ""))
    if args.plots:
        print("wrote", plot_results(results, Path(args.plots), f"navigate {args.sim}: success by density"))
        prefix = f"navigate {args.sim}{' range shield' if args.range_shield else ''}"
        print("wrote", *plot_trajectories(results, rooms, Path(args.plots), prefix))
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
