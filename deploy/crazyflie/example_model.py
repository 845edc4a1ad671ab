"""Stand-in policies with the shape of the shipped one, for tests and benchmarks.

An rsl_rl actor as exported: observation normalization (Sub, Div), an MLP (Gemm + activation)
and a final Clip to [-1, 1], with the goto contract in the metadata. Random weights; the
normalization statistics are random but plausible so that activations are not all saturated.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from robot_hrl.contract import CONTRACT_METADATA_KEY, PolicyContract, goto_contract
from robot_hrl.robots import CRAZYFLIE_2X


def build_mlp_onnx(
    path: str | Path,
    hidden: tuple[int, ...] = (64, 64),
    activation: str = "elu",
    seed: int = 0,
    contract: PolicyContract | None = None,
    normalize: bool = True,
    dynamo: bool = False,
) -> Path:
    """Write an ONNX policy MLP to ``path`` and return the path (needs torch)."""
    import onnx
    import torch

    contract = contract or goto_contract(CRAZYFLIE_2X)
    n_in, n_out = contract.observation_size, contract.action_size
    torch.manual_seed(seed)
    acts = {"elu": torch.nn.ELU, "tanh": torch.nn.Tanh, "relu": torch.nn.ReLU, "sigmoid": torch.nn.Sigmoid,
            "leaky_relu": torch.nn.LeakyReLU}
    layers: list[torch.nn.Module] = []
    width = n_in
    for h in hidden:
        layers += [torch.nn.Linear(width, h), acts[activation]()]
        width = h
    layers.append(torch.nn.Linear(width, n_out))

    class Actor(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            g = torch.Generator().manual_seed(seed + 1)
            self.register_buffer("mean", 0.1 * torch.randn(n_in, generator=g))
            self.register_buffer("std", 0.5 + torch.rand(n_in, generator=g))
            self.net = torch.nn.Sequential(*layers)

        def forward(self, obs: torch.Tensor) -> torch.Tensor:
            x = (obs - self.mean) / (self.std + 1e-2) if normalize else obs
            return torch.clamp(self.net(x), -1.0, 1.0)

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    actor = Actor().eval()
    with torch.no_grad():
        torch.onnx.export(actor, torch.zeros(1, n_in), str(path), input_names=["obs"], output_names=["actions"],
                          dynamic_axes={"obs": {0: "batch"}, "actions": {0: "batch"}} if not dynamo else None,
                          opset_version=18, dynamo=dynamo)
    model = onnx.load(str(path))
    entry = model.metadata_props.add()
    entry.key, entry.value = CONTRACT_METADATA_KEY, contract.to_json()
    onnx.save(model, str(path))
    return path


def random_observations(n: int, size: int, seed: int = 0) -> np.ndarray:
    """Observations spread over (and a little beyond) the contract's clip ranges, float32."""
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((n, size)) * 2.0).astype(np.float32)
