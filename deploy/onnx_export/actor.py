"""The exported graph: the actor's deterministic path in one module.

``obs [batch, n_obs]`` -> observation normalization -> MLP -> deterministic output
(distribution mean) -> clip to the normalized action range [-1, 1] -> ``actions [batch, n_act]``.

rsl-rl-lib's own export wrapper (``MLPModel.as_onnx``) supplies the first three steps, so the
graph is exactly what the runner's inference policy computes; the clip is what the
environment applies before actions reach the mixer.
"""

from __future__ import annotations

import torch
from torch import nn

from deploy.onnx_export.errors import ExportError

ACTION_LOW, ACTION_HIGH = -1.0, 1.0
"""The normalized action range of the contract (robot_hrl.contract.actions_to_wrench)."""


def actor_dims(actor: nn.Module) -> tuple[int, int]:
    """(n_obs, n_actions) of an rsl_rl MLP actor."""
    n_obs = getattr(actor, "obs_dim", None)
    mlp = getattr(actor, "mlp", None)
    if n_obs is None or mlp is None or not hasattr(actor, "as_onnx"):
        raise ExportError(
            f"the actor is a {type(actor).__name__}, not an rsl_rl MLPModel; only MLP actors "
            "(rsl_rl.models.MLPModel) can be exported"
        )
    distribution = getattr(actor, "distribution", None)
    n_act = distribution.output_dim if distribution is not None else list(mlp.parameters())[-1].shape[0]
    return int(n_obs), int(n_act)


class ExportableActor(nn.Module):
    """Deterministic, normalized, clipped actor: what the ONNX graph computes."""

    def __init__(self, actor: nn.Module, clip: float | None = 1.0) -> None:
        super().__init__()
        self.clip = None if clip is None else float(clip)
        """Clip the output to [-clip, clip]: 1 for the action modes that clip (``robot_hrl.contract.action_modes``),
        the contract's ``output_clip`` where the trainer clipped (Isaac Lab's ``clip_actions``); None: the raw
        output (Isaac Lab's JointAction: offset + scale * a, no clip)."""
        if getattr(actor, "is_recurrent", False):
            raise ExportError(
                f"the actor ({type(actor).__name__}) is recurrent; the onboard runtime and the C code take "
                "feed-forward policies only: train with an MLP actor"
            )
        self.n_obs, self.n_actions = actor_dims(actor)
        self.policy = actor.as_onnx(verbose=False)
        self.policy.eval()

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        out = self.policy(obs)
        return out if self.clip is None else torch.clamp(out, -self.clip, self.clip)
