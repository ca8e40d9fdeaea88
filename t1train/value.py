"""The critic: a transformer backbone with a scalar head, one value per token.

``ValueModel.from_policy(policy)`` copies the policy's decoder (the causal LM without its LM head) and adds a
zero-initialized linear head, so the critic starts from the policy's features and predicts 0 everywhere.
``ValueModel.from_pretrained(path)`` loads a critic saved with ``save_pretrained`` (for example from a
checkpoint's ``value_model/`` folder).

Alignment: ``values(...)[:, i]`` is the value of the state *before* completion token ``i`` is sampled, i.e. the
head applied to the hidden state one position earlier, the same shift as the policy's logits.

Example:
    >>> import torch
    >>> from t1train.models import tiny_moe
    >>> model, _ = tiny_moe()
    >>> critic = ValueModel.from_policy(model)
    >>> ids = torch.tensor([[5, 6, 7, 8]]); mask = torch.ones_like(ids)
    >>> critic.values(ids, mask, logits_to_keep=2).shape
    torch.Size([1, 2])
"""

from __future__ import annotations

import copy
from pathlib import Path

import torch
from torch import nn

HEAD_FILE = "value_head.pt"


class ValueModel(nn.Module):
    def __init__(self, backbone: nn.Module, hidden_size: int):
        super().__init__()
        self.backbone = backbone
        self.head = nn.Linear(hidden_size, 1)
        nn.init.zeros_(self.head.weight)
        nn.init.zeros_(self.head.bias)

    @classmethod
    def from_policy(cls, policy: nn.Module) -> ValueModel:
        """A critic whose backbone is a copy of ``policy``'s decoder (call before wrapping the policy with PEFT)."""
        decoder = policy.get_decoder() if hasattr(policy, "get_decoder") else getattr(policy, policy.base_model_prefix)
        backbone = copy.deepcopy(decoder)
        backbone.train()
        return cls(backbone, policy.config.hidden_size)

    @classmethod
    def from_pretrained(cls, path: str | Path) -> ValueModel:
        """Load a critic saved with :meth:`save_pretrained`, or start one from any causal-LM folder (its decoder)."""
        from transformers import AutoConfig, AutoModel  # the train extra: only when a critic is loaded

        path = Path(path)
        config = AutoConfig.from_pretrained(path)
        backbone = AutoModel.from_pretrained(path)
        critic = cls(backbone, config.hidden_size)
        if (path / HEAD_FILE).exists():
            critic.head.load_state_dict(torch.load(path / HEAD_FILE, map_location="cpu"))
        return critic

    def save_pretrained(self, path: str | Path) -> None:
        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        self.backbone.save_pretrained(path)
        torch.save(self.head.state_dict(), path / HEAD_FILE)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """Values ``[B, L]`` at every position (float32)."""
        hidden = self.backbone(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        return self.head(hidden.to(self.head.weight.dtype)).squeeze(-1).float()

    def values(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, logits_to_keep: int) -> torch.Tensor:
        """Values ``[B, logits_to_keep]`` aligned with the last ``logits_to_keep`` tokens (see the module docstring)."""
        return self(input_ids, attention_mask)[:, -logits_to_keep - 1 : -1]
