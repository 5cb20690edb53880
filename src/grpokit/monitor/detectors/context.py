"""What a run's configuration (the detectors' `context`) says about which fixes can act."""

from __future__ import annotations

from typing import Any


def unknown_config_note(ctx: dict[str, Any]) -> str:
    return "" if ctx else " (this log carries no config: skip whichever of these the run already uses)"


def on_policy_run(ctx: dict[str, Any]) -> bool | None:
    """True when each batch is used for exactly one optimizer step (the PPO ratio is 1: nothing can clip);
    None when the log does not say."""
    if not ctx or ("epochs" not in ctx and "mini_batches" not in ctx):
        return None
    try:
        return int(ctx.get("epochs") or 1) * int(ctx.get("mini_batches") or 1) == 1 and not ctx.get("off_policy")
    except (TypeError, ValueError):
        return None
