"""The policy contract of any Isaac Lab task, generated from the live environment.

``contract_from_env(env)`` (an :class:`~sim.isaaclab_adapter.env.IsaacLabVecEnv`; the wrapper's
``env.contract`` calls it) describes, from the env itself:

- the control rate: ``1 / (sim.dt * decimation)`` (``env.unwrapped.step_dt``);
- the observation terms of the ``policy`` group, in order. Manager-based tasks: from the observation
  manager (``active_terms``, ``group_obs_term_dim``, each term's cfg: ``clip``, ``scale``,
  ``history_length``; the joints of a term's ``asset_cfg``; the term function as ``source``). Isaac Lab
  processes a term as func -> modifiers -> noise -> clip -> scale -> delay -> history
  (``ObservationManager.compute_group``, Isaac Lab 3.0.0): the contract's ``clip`` then ``scale`` then
  ``history_length`` reproduce it; a term with modifiers or a delay, an unconcatenated or time-major group
  are refused (the runtime cannot rebuild them). Noise is training-time only and left out;
- the action terms: every joint of every ``JointAction`` term (``_joint_names`` in the term's order,
  ``_scale``, ``_offset``: command = offset + scale * a, i.e. the bounds offset -+ scale), its default
  position, and the mode (``joint_position``, ``joint_velocity``, ``joint_effort``) from the term's class;
  the wrapper's ``clip_actions`` as ``output_clip``;
- the robot: the articulation ``scene["robot"]``: its name (the USD file's stem), its joints in order and
  their default positions (``robot_hrl.robots.articulation``).

Direct-workflow tasks (``DirectRLEnv``) have no managers to read: a task declares its contract with a
``policy_contract()`` method on the env (this project's Crazyflie task does), or is listed in
:data:`DIRECT_TASKS` with its terms read off its ``_get_observations`` / ``_pre_physics_step`` source.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Callable

from robot_hrl.contract.schema import ActionSpec, ActionTerm, ObservationTerm, PolicyContract, RobotRef
from robot_hrl.errors import ContractError
from robot_hrl.robots.articulation import ARTICULATION_KIND, articulation_params_sha256

FLOAT32_MAX = 3.4028234663852886e38
"""An unclipped Isaac Lab term's contract clip: [-max, max] leaves every finite float32 as it is."""
POLICY_GROUP = "policy"

_JOINT_ACTION_MODES = (("JointPositionAction", "joint_position", "rad or m"), ("JointVelocityAction", "joint_velocity", "rad/s or m/s"),
                       ("JointEffortAction", "joint_effort", "N m or N"))
"""Isaac Lab 3.0's JointAction subclasses (isaaclab/envs/mdp/actions/joint_actions.py) -> action mode, units."""


def _floats(value, n: int) -> tuple[float, ...]:
    """A float, a tensor of n values or an (num_envs, n) tensor (its first row) as n floats."""
    if hasattr(value, "detach"):
        flat = value.detach().cpu().reshape(-1, value.shape[-1])[0] if value.dim() > 0 else value.detach().cpu().reshape(1)
        values = [float(v) for v in flat]
        return tuple(values) if len(values) == n else tuple(values[:1] * n)
    if isinstance(value, (tuple, list)):
        return tuple(float(v) for v in value)
    return (float(value),) * n


def _source(func) -> str:
    target = func if callable(func) and hasattr(func, "__name__") else type(func)
    return f"{target.__module__}:{target.__qualname__}"


def _robot(unwrapped, task: str) -> tuple[RobotRef, object]:
    articulations = dict(getattr(unwrapped.scene, "articulations", {}))
    if "robot" in articulations:  # Isaac Lab's convention; else the scene's only articulation (Cartpole-Direct's 'cartpole')
        articulation = articulations["robot"]
    elif len(articulations) == 1:
        articulation = next(iter(articulations.values()))
    else:
        raise ContractError(f"{task}'s scene has articulations {sorted(articulations)}: the contract describes one robot, "
                            "named 'robot' (Isaac Lab's convention) or the scene's only articulation")
    joints = tuple(articulation.joint_names)
    defaults = _floats(articulation.data.default_joint_pos.torch, len(joints))
    usd = getattr(getattr(articulation.cfg, "spawn", None), "usd_path", None)
    name = Path(usd).stem if usd else type(articulation).__name__.lower()
    ref = RobotRef(name=name, params_sha256=articulation_params_sha256(name, joints, defaults), kind=ARTICULATION_KIND,
                   joints=joints, default_joint_positions=defaults, source=f"{task}: {usd}" if usd else task)
    return ref, articulation


def _joint_names_of(params: dict, articulation, size: int) -> tuple[str, ...] | None:
    asset_cfg = params.get("asset_cfg")
    if asset_cfg is None or getattr(asset_cfg, "name", None) != "robot":
        return None
    ids = getattr(asset_cfg, "joint_ids", slice(None))
    names = list(articulation.joint_names)
    chosen = names[ids] if isinstance(ids, slice) else [names[int(i)] for i in ids]
    return tuple(chosen) if len(chosen) == size else None


def _manager_terms(unwrapped, task: str, articulation) -> tuple[ObservationTerm, ...]:
    om = unwrapped.observation_manager
    if POLICY_GROUP not in om.active_terms:
        raise ContractError(f"{task} has no observation group {POLICY_GROUP!r} (groups: {list(om.active_terms)})")
    if not om.group_obs_concatenate[POLICY_GROUP]:
        raise ContractError(f"{task}'s {POLICY_GROUP!r} group is not concatenated: a contract describes one flat vector")
    if getattr(om, "_group_obs_time_major", {}).get(POLICY_GROUP):
        raise ContractError(f"{task}'s {POLICY_GROUP!r} group stacks its history time-major; the contract describes "
                            "per-term history (set the group's history_order to 'term' or per-term history_length)")
    terms = []
    for name, dims, cfg in zip(om.active_terms[POLICY_GROUP], om.group_obs_term_dim[POLICY_GROUP],
                               om._group_obs_term_cfgs[POLICY_GROUP]):
        where = f"{task} observation term {name!r}"
        if cfg.modifiers:
            raise ContractError(f"{where} has modifiers, which the contract cannot describe; drop them or fold them into the term")
        if getattr(cfg, "delay_max_lag", 0):
            raise ContractError(f"{where} is delayed (delay_max_lag {cfg.delay_max_lag}); a deployed policy sees the latest value")
        size = math.prod(dims)
        history = int(cfg.history_length or 0)
        if history and not cfg.flatten_history_dim:
            raise ContractError(f"{where} keeps an unflattened history; set flatten_history_dim=True")
        frame_size = size // history if history else size
        clip = (float(cfg.clip[0]), float(cfg.clip[1])) if cfg.clip else (-FLOAT32_MAX, FLOAT32_MAX)
        scale = None
        if cfg.scale is not None:
            values = _floats(cfg.scale, frame_size)
            scale = values[0] if len(set(values)) == 1 else values
        noise = f"; noise during training: {type(cfg.noise).__name__}" if cfg.noise is not None else ""
        terms.append(ObservationTerm(
            name=name, size=size, frame="none", units="as its source computes it", clip=clip, scale=scale,
            history_length=history or None, source=_source(cfg.func), joints=_joint_names_of(cfg.params, articulation, frame_size),
            description=f"Isaac Lab observation term{noise}",
        ))
    return tuple(terms)


def _manager_actions(unwrapped, task: str, articulation) -> tuple[str, tuple[ActionTerm, ...]]:
    from isaaclab.envs.mdp.actions import joint_actions

    am = unwrapped.action_manager
    defaults = dict(zip(articulation.joint_names, _floats(articulation.data.default_joint_pos.torch, len(articulation.joint_names))))
    modes, terms = set(), []
    for name in am.active_terms:
        term = am.get_term(name)
        found = [(mode, units) for cls, mode, units in _JOINT_ACTION_MODES if isinstance(term, getattr(joint_actions, cls))]
        if not found:
            raise ContractError(f"{task} action term {name!r} is a {type(term).__name__}; the contract describes joint "
                                "position, velocity and effort actions (Isaac Lab's JointAction terms)")
        mode, units = found[0]
        modes.add(mode)
        if getattr(term, "_clip", None) is not None:
            raise ContractError(f"{task} action term {name!r} clips its processed actions; the contract's mapping does not")
        joints = list(term._joint_names)
        scales, offsets = _floats(term._scale, len(joints)), _floats(term._offset, len(joints))
        for joint, scale, offset in zip(joints, scales, offsets):
            if not scale > 0:
                raise ContractError(f"{task} action term {name!r} scales joint {joint!r} by {scale}; the contract needs a positive scale")
            terms.append(ActionTerm(name=joint, units=units, low=offset - scale, high=offset + scale, joint=joint,
                                    default_position=defaults.get(joint)))
    if len(modes) != 1:
        raise ContractError(f"{task} mixes action modes {sorted(modes)}; a contract has one")
    return modes.pop(), tuple(terms)


# ---- direct-workflow tasks ------------------------------------------------------------------------------
def _cartpole_direct(unwrapped, task: str, articulation) -> tuple[tuple[ObservationTerm, ...], str, tuple[ActionTerm, ...]]:
    """Isaac-Cartpole-Direct (isaaclab_tasks/core/cartpole/cartpole_direct_env.py, Isaac Lab 3.0.0): the observation
    is joint_pos_rel[cart], joint_pos_rel[pole], joint_vel_rel[cart], joint_vel_rel[pole] (each minus the default);
    the action ``action_scale * a`` is the cart joint's effort target."""
    names = list(articulation.joint_names)
    cart, pole = (names[int(unwrapped._cart_dof_idx[0])], names[int(unwrapped._pole_dof_idx[0])])
    joints = (cart, pole)
    terms = (
        ObservationTerm(name="joint_pos_rel", size=2, frame="none", units="m, rad", clip=(-FLOAT32_MAX, FLOAT32_MAX), joints=joints,
                        source="isaaclab.envs.mdp.observations:joint_pos_rel", description="joint positions minus their defaults"),
        ObservationTerm(name="joint_vel_rel", size=2, frame="none", units="m/s, rad/s", clip=(-FLOAT32_MAX, FLOAT32_MAX), joints=joints,
                        source="isaaclab.envs.mdp.observations:joint_vel_rel", description="joint velocities minus their defaults"),
    )
    scale = float(unwrapped.cfg.action_scale)
    default = dict(zip(names, _floats(articulation.data.default_joint_pos.torch, len(names))))[cart]
    return terms, "joint_effort", (ActionTerm(name=cart, units="N", low=-scale, high=scale, joint=cart, default_position=default),)


DIRECT_TASKS: dict[str, Callable] = {"Isaac-Cartpole-Direct": _cartpole_direct}
"""Direct-workflow tasks whose terms were read off their source: task id -> (unwrapped, task, articulation) ->
(observation terms, action mode, action terms)."""


def contract_from_env(env) -> PolicyContract:
    """The contract of the Isaac Lab task ``env`` (an IsaacLabVecEnv) as it is configured (see the module docstring)."""
    unwrapped = env.unwrapped
    task = getattr(env, "task", type(unwrapped).__name__)
    declared = getattr(unwrapped, "policy_contract", None)
    if callable(declared):
        return declared()
    rate_hz = 1.0 / float(unwrapped.step_dt)
    robot, articulation = _robot(unwrapped, task)
    if hasattr(unwrapped, "observation_manager") and hasattr(unwrapped, "action_manager"):
        observations = _manager_terms(unwrapped, task, articulation)
        mode, actions = _manager_actions(unwrapped, task, articulation)
    elif task in DIRECT_TASKS:
        observations, mode, actions = DIRECT_TASKS[task](unwrapped, task, articulation)
    else:
        raise ContractError(
            f"{task} is a direct-workflow task: it has no observation or action manager to read its contract from. "
            "Give its env a policy_contract() method (robot_hrl.contract.PolicyContract), list it in "
            "sim.isaaclab_adapter.contract.DIRECT_TASKS, or write it manager-based"
        )
    clip = getattr(env, "clip_actions", None)
    return PolicyContract(
        skill=task, robot=robot, control_rate_hz=rate_hz, observations=observations,
        action=ActionSpec(mode=mode, terms=actions, output_clip=float(clip) if clip else None),
    )
