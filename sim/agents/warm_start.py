#!/usr/bin/env python
"""A training checkpoint whose actor is an exported go-to policy (ONNX), to fine-tune it on a changed robot model.

When the robot model changes under a shipped policy (issue 17: the firmware's actuator chain), the observation and
action layouts stay, so the exported actor is a good start: this writes an rsl_rl checkpoint with the ONNX model's
MLP weights and observation normalization in the actor, its actions mapped onto the current contract's bounds
(the model's own bounds -> the current ones, folded into the last layer), a chosen exploration std, and the
critic and optimizer of a fresh checkpoint of the current env (``--template``: e.g. ``model_0.pt`` of a run
started with the current code). Then ``python sim/train.py --resume <out>``.

    python -m sim.agents.warm_start --onnx models/crazyflie_goto.onnx --template runs/x/model_0.pt --out runs/warm/model_0.pt
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np


NORMALIZER_EPS = 0.01
"""rsl_rl's EmpiricalNormalization eps (its default, which the actor uses): the exported graph's obs_std_plus_eps is std + this."""


def exported_actor(onnx_path: Path) -> tuple[dict, dict]:
    """An exported actor's weights (the graph's initializers by name, numpy) and its metadata (key -> value)."""
    import onnx
    from onnx import numpy_helper

    model = onnx.load(str(onnx_path))
    return ({i.name: numpy_helper.to_array(i) for i in model.graph.initializer},
            {p.key: p.value for p in model.metadata_props})


def fill_actor(actor: dict, weights: dict, std: float, normalizer_count: float) -> None:
    """Write an exported actor (``deploy/onnx_export/actor.py``'s graph: normalization, then the MLP) into an rsl_rl
    ``MLPModel`` actor's state dict, in place: the MLP's weights, the observation normalizer (its ``count`` set to
    ``normalizer_count``: how slowly a fine-tune moves it) and the exploration ``std``."""
    import torch

    for name in ("mlp.0.weight", "mlp.0.bias", "mlp.2.weight", "mlp.2.bias", "mlp.4.weight", "mlp.4.bias"):
        value = torch.as_tensor(np.array(weights[f"policy.{name}"]), dtype=torch.float32)
        if actor[name].shape != value.shape:
            raise SystemExit(f"{name}: the ONNX model's {tuple(value.shape)} does not fit the current actor's {tuple(actor[name].shape)}")
        actor[name] = value.clone()
    mean = torch.as_tensor(np.array(weights["obs_mean"]), dtype=torch.float32)
    # the graph divides by std + eps (rsl_rl's EmpiricalNormalization, eps 0.01): the normalizer keeps std alone
    std_obs = torch.as_tensor(np.array(weights["obs_std_plus_eps"]), dtype=torch.float32) - NORMALIZER_EPS
    shape = actor["obs_normalizer._mean"].shape
    mean, std_obs = mean.reshape(shape), std_obs.reshape(shape)
    actor["obs_normalizer._mean"], actor["obs_normalizer._std"], actor["obs_normalizer._var"] = mean, std_obs, std_obs * std_obs
    actor["obs_normalizer.count"] = torch.tensor(normalizer_count, dtype=actor["obs_normalizer.count"].dtype)
    actor["distribution.std_param"] = torch.full_like(actor["distribution.std_param"], std)


def navigate_contract_of(onnx_path: Path, meta: dict | None = None):
    """The ``NavigateContract`` an exported level carries (``meta``: its metadata, when already read); SystemExit
    naming the fix when the file carries none (a skill, not a level)."""
    from robot_hrl.contract.navigate import NAVIGATE_METADATA_KEY, NavigateContract

    if meta is None:
        meta = exported_actor(onnx_path)[1]
    if NAVIGATE_METADATA_KEY not in meta:
        raise SystemExit(f"{onnx_path} carries no navigate contract ({NAVIGATE_METADATA_KEY!r}): give an exported "
                         "navigate level (deploy/onnx_export/navigate.py), not a skill")
    return NavigateContract.from_json(meta[NAVIGATE_METADATA_KEY])


def refuse_recurrent_init(onnx_path: Path, own) -> None:
    """SystemExit naming the fix when ``onnx_path`` (its contract ``own``) is a recurrent level: ``--init-onnx`` warm-
    starts from a feed-forward level's MLP (a memory run's GRU columns start at zero weight beside it); a recurrent
    level's GRU is not read back from its ONNX graph."""
    if own.recurrent is not None:
        raise SystemExit(f"{onnx_path}: a recurrent level (a GRU of {own.recurrent.hidden_size}); --init-onnx warm-starts "
                         "from a feed-forward level only. Fine-tune it from its run's checkpoint (--resume "
                         "<run>/model_<N>.pt; docs/navigation_learned.md has the shipped level's recipe), or warm-start "
                         "from a feed-forward level (models/crazyflie_navigate_mlp.onnx)")


def warm_start_navigate(onnx_path: Path, actor, contract, std: float = 0.2, normalizer_count: float = 1e12) -> None:
    """Load an exported ``navigate`` level into a training run's actor (``runner.alg.actor``), in place: the level's
    fine-tune starts from the shipped file when its checkpoints are gone. ``contract``: the run's own
    ``NavigateContract``; the file's must be the same (observation, action, lower skill, sensors, memory, rates), or
    it is refused."""
    weights, meta = exported_actor(onnx_path)
    own = navigate_contract_of(onnx_path, meta)
    refuse_recurrent_init(onnx_path, own)
    differ = [name for name in type(own).model_fields if getattr(own, name) != getattr(contract, name)]
    old_n = len(own.observations)
    appended = contract.observations[old_n:]
    if (set(differ) <= {"observations", "trail"} and contract.observations[:old_n] == own.observations
            and all(t.name == "trail_yaw" for t in appended) and own.trail is None):
        differ = []  # the run observes the file's terms and then its trail: those inputs start at zero weight
    else:
        appended = ()
    if differ:
        raise SystemExit(f"{onnx_path}: its contract's {', '.join(differ)} differs from this run's "
                         f"({', '.join(f'{getattr(own, n)!r} vs {getattr(contract, n)!r}' for n in differ)}): fine-tune "
                         "it over the skill and sensors it was trained with (--skill), or train a new level")
    if appended:
        extra = sum(t.size for t in appended)
        w0 = np.asarray(weights["policy.mlp.0.weight"])
        weights["policy.mlp.0.weight"] = np.concatenate((w0, np.zeros((w0.shape[0], extra), np.float32)), axis=1)
        # each appended term normalized to about [-1, 1] over its clip range
        mid = np.concatenate([np.full(t.size, 0.5 * (t.clip[0] + t.clip[1]), np.float32) for t in appended])
        half = np.concatenate([np.full(t.size, 0.5 * (t.clip[1] - t.clip[0]), np.float32) for t in appended])
        weights["obs_mean"] = np.concatenate((np.asarray(weights["obs_mean"]).reshape(-1), mid))
        weights["obs_std_plus_eps"] = np.concatenate((np.asarray(weights["obs_std_plus_eps"]).reshape(-1), half + NORMALIZER_EPS))
        print(f"warm start: {[t.name for t in appended]} ({extra} inputs) appended after the file's observation, at zero weight")
    state = actor.state_dict()
    memory = state["mlp.0.weight"].shape[1] - int(np.asarray(weights["policy.mlp.0.weight"]).shape[1])
    if memory > 0 and "rnn.rnn.weight_hh_l0" in state:
        w0 = np.asarray(weights["policy.mlp.0.weight"])
        weights["policy.mlp.0.weight"] = np.concatenate((w0, np.zeros((w0.shape[0], memory), np.float32)), axis=1)
        print(f"warm start: the actor's memory ({memory} units) beside the file's MLP, at zero weight")
    fill_actor(state, weights, std, normalizer_count)
    actor.load_state_dict(state)


def warm_start(onnx_path: Path, template: Path, out: Path, std: float = 0.1, normalizer_count: float = 1e7,
               new_input_std: float = 0.03, integral_gain_per_s: float = 0.0,
               integral_gain_xy_per_s: float = 0.0) -> Path:
    import torch

    from robot_hrl.contract import CONTRACT_METADATA_KEY, PolicyContract
    from robot_hrl.robots import get_robot

    weights, meta = exported_actor(onnx_path)
    contract = PolicyContract.from_json(meta[CONTRACT_METADATA_KEY])
    current = get_robot(contract.robot.name).action_spec(contract.action.mode)
    own = np.array([[t.low, t.high] for t in contract.action.terms])
    cur = np.array([[t.low, t.high] for t in current.terms])
    scale = (own[:, 1] - own[:, 0]) / (cur[:, 1] - cur[:, 0])
    offset = (own[:, 0] - cur[:, 0]) / (cur[:, 1] - cur[:, 0]) * 2.0 + scale - 1.0
    ckpt = torch.load(template, weights_only=False)
    actor = ckpt["actor_state_dict"]
    first = torch.as_tensor(np.array(weights["policy.mlp.0.weight"]), dtype=torch.float32)
    old_inputs, new_inputs = first.shape[1], actor["mlp.0.weight"].shape[1]
    if new_inputs > old_inputs:
        # observation terms the exported policy did not have (appended last, e.g. the position error's integral):
        # their input weights start at zero, so the warm-started policy acts exactly as the exported one
        print(f"warm start: the template's actor has {new_inputs - old_inputs} inputs after the exported policy's "
              f"{old_inputs}; their weights start at zero")
        weights["policy.mlp.0.weight"] = np.concatenate((weights["policy.mlp.0.weight"], np.zeros((first.shape[0], new_inputs - old_inputs), np.float32)), axis=1)
        gains = (integral_gain_xy_per_s, integral_gain_xy_per_s, integral_gain_per_s)
        if any(gains):
            # the integral's columns start as the error's columns times a gain: the policy sees e + c I as its error,
            # proportional plus integral action (the integral in the error's frame, world ENU: GOTO_ERROR_INTEGRAL)
            std_e = np.asarray(weights["obs_std_plus_eps"]).reshape(-1)[:3]
            w0 = np.asarray(weights["policy.mlp.0.weight"])
            for axis, gain in enumerate(gains):
                w0[:, old_inputs + axis] = w0[:, axis] * gain * (new_input_std + NORMALIZER_EPS) / float(std_e[axis])
            print(f"warm start: the integral's inputs start at {gains} /s (x, y, z) times the error's weights")
        weights["obs_mean"] = np.concatenate((weights["obs_mean"].reshape(-1), np.zeros(new_inputs - old_inputs, np.float32)))
        weights["obs_std_plus_eps"] = np.concatenate((weights["obs_std_plus_eps"].reshape(-1), np.full(new_inputs - old_inputs, new_input_std + NORMALIZER_EPS, np.float32)))
    fill_actor(actor, weights, std, normalizer_count)
    actor["mlp.4.weight"] = actor["mlp.4.weight"] * torch.as_tensor(scale, dtype=torch.float32)[:, None]
    actor["mlp.4.bias"] = actor["mlp.4.bias"] * torch.as_tensor(scale, dtype=torch.float32) + torch.as_tensor(offset, dtype=torch.float32)
    ckpt["iter"] = 0
    out.parent.mkdir(parents=True, exist_ok=True)
    torch.save(ckpt, out)
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--onnx", type=Path, required=True, help="the exported policy whose actor to start from")
    p.add_argument("--template", type=Path, required=True, help="a checkpoint of the current env (its critic and optimizer are kept)")
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--std", type=float, default=0.1, help="the actor's exploration std to start with")
    p.add_argument("--new-input-std", type=float, default=0.03,
                   help="the observation normalizer's std of inputs the exported policy lacks (their weights start at zero)")
    p.add_argument("--normalizer-count", type=float, default=1e7,
                   help="samples the observation normalizer counts as seen: its mean and std move by batch / (count + batch) "
                   "per update (1e12 keeps the exported policy's normalization through a fine-tune: at 1e7 a 3.3 M-sample "
                   "critic warm-up moved it by a quarter and the frozen actor's training success fell from 0.96 to 0.57)")
    p.add_argument("--integral-gain-per-s", type=float, default=0.0,
                   help="start the position error integral's z input at this gain (1/s) times the z error's input weights "
                   "(0: zero weights, the exported policy exactly)")
    p.add_argument("--integral-gain-xy-per-s", type=float, default=0.0,
                   help="the same for the integral's x and y inputs (the integral must be in the error's frame, world ENU)")
    args = p.parse_args(argv)
    print(warm_start(args.onnx, args.template, args.out, args.std, args.normalizer_count, new_input_std=args.new_input_std,
                     integral_gain_per_s=args.integral_gain_per_s, integral_gain_xy_per_s=args.integral_gain_xy_per_s))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
