"""No-op updates: the policy does not move while its advantages are not zero. The gradient norm is exactly 0
(the loss too, where no gradient norm is logged) on rows whose groups still differ in reward (reward std > 0, a
zero-variance fraction below 1, or advantages whose max differs from their min): the optimizer step changes
nothing though there is something to learn (docs/math.md §17.1: a non-zero advantage gives a non-zero policy
gradient unless no parameter is trainable or the gradient is lost).

A row grpokit itself marks as skipped (`train/skipped_update`) is a deliberate skip, not a no-op. The loss alone
is weak evidence (a GRPO loss of ~0 is normal at the first iteration), so it needs `loss_patience` rows and gives a
warning; a zero gradient norm for `patience` rows is critical."""

from __future__ import annotations

import math
from typing import Any

from ... import metric_names as mn
from .base import Alert, Detector, register
from .rows import finite_at

FIX = (
    "nothing is being trained: check the trainable parameters (a LoRA adapter whose B stays 0 or was never "
    "attached: peft_config passed, model.print_trainable_parameters() > 0; verl actor_rollout_ref.model.lora_rank "
    "> 0 with target_modules that exist), a learning rate that is not 0 (TRL learning_rate, verl actor.optim.lr, "
    "grpokit train.lr), and that the loss is not detached from the model (a custom loss or a frozen wrapper)"
)


def advantages_nonzero(m: dict[str, Any]) -> dict[str, float] | None:
    """The row's evidence that its advantages are not all zero, or None when it shows none."""
    std, zv = finite_at(m, mn.REWARD_STD), finite_at(m, mn.ZV_FRAC)
    hi, lo = finite_at(m, mn.ADV_MAX), finite_at(m, mn.ADV_MIN)
    ev = {}
    if math.isfinite(std) and std > 0:
        ev["reward_std"] = std
    if math.isfinite(zv) and zv < 1:
        ev["zero_variance_frac"] = zv
    if math.isfinite(hi) and math.isfinite(lo) and hi > lo:
        ev["advantage_range"] = hi - lo
    return ev or None


@register
class NoOpUpdate(Detector):
    """Exactly-zero gradient norm (or loss) on rows with non-zero advantages (module docstring)."""

    name, mode = "noop_update", "no-op update"
    patience, loss_patience = 2, 3
    requires = ((mn.TRAIN_GRAD_NORM, mn.ACTOR_LOSS), (mn.REWARD_STD, mn.ZV_FRAC, mn.ADV_MAX))

    def __init__(self, context: dict[str, Any] | None = None, **params: Any) -> None:
        super().__init__(context, **params)
        self.run: list[int] = []
        self.first: int | None = None

    @property
    def min_steps(self) -> int:
        return self.patience

    def check(self, step: int, m: dict[str, Any]) -> tuple[bool, Alert | None]:
        if finite_at(m, mn.TRAIN_SKIPPED_UPDATE) == 1.0:
            return self.active, None
        grad, loss = finite_at(m, mn.TRAIN_GRAD_NORM), finite_at(m, mn.ACTOR_LOSS)
        signal = mn.TRAIN_GRAD_NORM if math.isfinite(grad) else mn.ACTOR_LOSS if math.isfinite(loss) else None
        adv = advantages_nonzero(m)
        if signal is None or adv is None:
            self.run = [] if adv is None else self.run
            return self.active, None
        if (grad if signal == mn.TRAIN_GRAD_NORM else loss) != 0.0:
            self.run = []
            return False, None
        self.run.append(step)
        need = self.patience if signal == mn.TRAIN_GRAD_NORM else self.loss_patience
        if len(self.run) < need:
            return self.active, None
        lr = finite_at(m, mn.TRAIN_LR)
        ev: dict[str, Any] = {signal: 0.0, **{k: round(v, 6) for k, v in adv.items()}, "rows": len(self.run)}
        if math.isfinite(lr):
            ev["lr"] = lr
        what = "gradient norm" if signal == mn.TRAIN_GRAD_NORM else "loss"
        msg = f"no-op update: the {what} is exactly 0 for {len(self.run)} rows while the advantages are not"
        severity = "critical" if signal == mn.TRAIN_GRAD_NORM else "warning"
        return True, self.new_alert(step, severity, msg, ev, FIX, onset=self.run[0])
