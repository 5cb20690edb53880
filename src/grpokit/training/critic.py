"""The value model of the PPO family (docs/math.md §2, §11): its own module, optimizer, learning rate, gradient clip and
schedule, so it learns at the rate a regression needs rather than the policy's. Its kinds (`critic.kind`: head, mlp,
model) are the registered value heads of `grpokit.models.value_heads`.

V(s_t) is read at the position that predicts token t.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from ..config import CriticConfig
from ..models.forward import used_width
from ..models.prefix import shared_prefix_hidden
from ..models.value_heads import CRITIC_KINDS


class Critic(nn.Module):
    """V(s_t) for every completion position; `uses_policy_features` tells whether it reads the policy's hidden
    states (head, mlp) or runs its own transformer (model)."""

    def __init__(self, kind: str, hidden_size: int, *, mlp_hidden: int = 256, trunk: nn.Module | None = None):
        super().__init__()
        self.kind = kind
        try:
            spec = CRITIC_KINDS[kind]
        except KeyError as e:
            raise ValueError(f"critic.kind: {e.args[0]}") from None
        if spec.own_trunk:
            if trunk is None:
                raise ValueError(f"critic.kind={kind} needs a transformer to start from")
            self.trunk = trunk
        self.head = spec.build(hidden_size, mlp_hidden)
        self.own_trunk = spec.own_trunk

    @property
    def uses_policy_features(self) -> bool:
        return not self.own_trunk

    def from_features(self, hidden: torch.Tensor) -> torch.Tensor:
        """Values [n,T] from the policy's last hidden states [n,T,H] (detached: no gradient reaches the policy)."""
        return self.head(hidden.detach().float()).squeeze(-1)

    def values(
        self,
        prompt_ids: torch.Tensor,
        prompt_mask: torch.Tensor,
        completion_ids: torch.Tensor,
        completion_mask: torch.Tensor,
        policy_hidden: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Values [n,T] of a micro-batch; head kinds need `policy_hidden` from the policy's forward."""
        if self.uses_policy_features:
            if policy_hidden is None:
                raise ValueError(f"critic.kind={self.kind} reads the policy's hidden states: pass policy_hidden")
            return self.from_features(policy_hidden)
        device = next(self.head.parameters()).device
        n, t_full = completion_ids.shape
        lead = int((prompt_mask.sum(0) == 0).long().cumprod(0).sum())
        t_used = max(used_width(completion_mask), 1)
        h = shared_prefix_hidden(
            self.trunk,
            prompt_ids[:, lead:].to(device),
            prompt_mask[:, lead:].to(device),
            completion_ids[:, :t_used].to(device),
        )
        v = self.head(h.float()).squeeze(-1)
        if t_used < t_full:
            v = torch.cat([v, v.new_zeros(n, t_full - t_used)], 1)
        return v


def build_critic(policy: nn.Module, cfg: CriticConfig, device: str | torch.device, load: Callable[..., Any]) -> Critic:
    """The critic of `cfg.kind`; `load(path)` loads a causal LM for `kind=model` with `critic.model`."""
    hidden = int(policy.config.hidden_size)
    trunk = None
    if CRITIC_KINDS[cfg.kind].own_trunk:
        base = policy.get_base_model() if hasattr(policy, "get_base_model") else policy
        trunk = load(cfg.model) if cfg.model else copy.deepcopy(base)
        trunk.requires_grad_(True).train()
        hidden = int(trunk.config.hidden_size)
    return Critic(cfg.kind, hidden, mlp_hidden=cfg.mlp_hidden, trunk=trunk).to(device)


class CriticOptimizer:
    """AdamW over the critic's parameters with its own learning rate, gradient clip and linear warm-up."""

    def __init__(self, critic: Critic, cfg: CriticConfig, betas: tuple[float, float] = (0.9, 0.999)) -> None:
        self.cfg = cfg
        self.params = [p for p in critic.parameters() if p.requires_grad]
        self.optimizer = torch.optim.AdamW(self.params, lr=cfg.lr, betas=betas, weight_decay=cfg.weight_decay)
        warm = max(cfg.warmup_steps, 0)
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(
            self.optimizer, lambda s: min(1.0, (s + 1) / warm) if warm else 1.0
        )

    def zero_grad(self) -> None:
        self.optimizer.zero_grad(set_to_none=True)

    def step(self) -> float:
        """Clip, step (skipped on a non-finite gradient) and advance the schedule; returns the gradient norm."""
        norm = torch.nn.utils.clip_grad_norm_(self.params, self.cfg.max_grad_norm or math.inf)  # 0: no clipping
        if torch.isfinite(norm):
            self.optimizer.step()
        self.scheduler.step()
        return float(norm)

    def state_dict(self) -> dict[str, Any]:
        return {"optimizer": self.optimizer.state_dict(), "scheduler": self.scheduler.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.optimizer.load_state_dict(state["optimizer"])
        self.scheduler.load_state_dict(state["scheduler"])


def pretraining_done(history: list[float], cfg: CriticConfig) -> bool:
    """Whether value pretraining stops: EV >= pretrain_ev on the last `pretrain_patience` batches, or the cap."""
    if len(history) >= cfg.pretrain_max_steps:
        return True
    tail = history[-cfg.pretrain_patience :]
    return len(tail) == cfg.pretrain_patience and all(math.isfinite(x) and x >= cfg.pretrain_ev for x in tail)
