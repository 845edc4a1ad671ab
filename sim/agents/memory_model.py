"""A feed-forward actor with a recurrent memory beside it: rsl_rl's ``RNNModel`` whose MLP sees the normalized
observation and the GRU's output side by side.

rsl_rl's ``RNNModel`` feeds the MLP the GRU's output alone, so a trained feed-forward level cannot be its start. Here the
MLP's first layer takes ``[observation, memory]``: with the memory's columns at zero it computes exactly the
feed-forward level (``sim/agents/warm_start.py`` fills it from an exported file), and PPO then learns what to keep.
The GRU is rsl_rl's (``rsl_rl.modules.RNN``: its hidden state is reset on done environments, stored with the rollout
and replayed over padded trajectories in the update), so training is rsl_rl's recurrent PPO unchanged.

The exported graph (``as_onnx``): ``obs [1, n_obs], h_in [1, 1, H] -> actions [1, n_act], h_out [1, 1, H]``
(``robot_hrl.contract.navigate.RecurrentSpec`` names them; a runtime starts every flight from zeros).
"""

from __future__ import annotations

import copy

import torch
from torch import nn

from rsl_rl.models import MLPModel, RNNModel
from rsl_rl.utils import unpad_trajectories

class MemoryMLPModel(RNNModel):
    """``RNNModel`` (GRU or LSTM) whose MLP reads ``[normalized observation, RNN output]``."""

    def get_latent(self, obs, masks: torch.Tensor | None = None, hidden_state=None) -> torch.Tensor:
        x = MLPModel.get_latent(self, obs)  # the normalized observation ([N, D]; in the update [T, B, D], padded)
        memory = self.rnn(x, masks, hidden_state).squeeze(0)
        if masks is not None:  # (the RNN unpads its output; the observation beside it is unpadded the same way)
            x = unpad_trajectories(x, masks)
        return torch.cat((x, memory), dim=-1)

    def _get_latent_dim(self) -> int:
        return self.obs_dim + self.latent_dim

    def as_onnx(self, verbose: bool = False) -> nn.Module:
        return _OnnxMemoryModel(self)

    def sequence_output(self, obs: torch.Tensor, h0: torch.Tensor, dones: torch.Tensor) -> torch.Tensor:
        """Deterministic outputs over stored decisions, for a supervised fit through time (DAgger): ``obs`` [T, B, D]
        raw observations, ``h0`` [layers, B, H] the state before the first (as stored while acting), ``dones`` [T, B]
        (the state is zeroed after a done step, as rsl_rl's ``reset(dones)`` does while acting) -> [T, B, outputs]."""
        x = self.obs_normalizer(obs)
        h, outs = h0, []
        for t in range(obs.shape[0]):
            memory, h = self.rnn.rnn(x[t].unsqueeze(0), h)
            outs.append(self.mlp(torch.cat((x[t], memory.squeeze(0)), dim=-1)))
            h = h * (1.0 - dones[t].float()).view(1, -1, 1)
        out = torch.stack(outs)
        return self.distribution.deterministic_output(out) if self.distribution is not None else out


class _OnnxMemoryModel(nn.Module):
    """The deterministic step of a GRU ``MemoryMLPModel`` for export: (obs, h_in) -> (actions, h_out)."""

    is_recurrent: bool = True

    def __init__(self, model: MemoryMLPModel) -> None:
        super().__init__()
        if not isinstance(model.rnn.rnn, nn.GRU):
            raise ValueError(f"only a GRU memory exports (got {type(model.rnn.rnn).__name__}): train with rnn_type 'gru'")
        self.obs_normalizer = copy.deepcopy(model.obs_normalizer)
        self.rnn = copy.deepcopy(model.rnn.rnn)
        self.mlp = copy.deepcopy(model.mlp)
        self.deterministic_output = model.distribution.as_deterministic_output_module()
        self.input_size = model.obs_dim
        self.hidden_size = self.rnn.hidden_size

    def forward(self, obs: torch.Tensor, h_in: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        x = self.obs_normalizer(obs)
        memory, h_out = self.rnn(x.unsqueeze(0), h_in)
        out = self.mlp(torch.cat((x, memory.squeeze(0)), dim=-1))
        return self.deterministic_output(out), h_out
