"""prime-rl (PrimeIntellect-ai/prime-rl) `rl.toml` keys -> grpokit keys, by meaning.

A TOML file (read with `tomllib`; as YAML it was "a syntax error"), recognised by its `orchestrator` section. What
differs in meaning (`packages/prime-rl-configs/src/prime_rl/configs/orchestrator.py`):

* `orchestrator.batch_size` counts samples (completions) per step, `group_size` the samples per example:
  prompts_per_step = batch_size / group_size.
* `orchestrator.train.sampling.max_completion_tokens` is the response length, `seq_len` the whole sequence.
* the data and the reward are a verifiers environment's (`[[orchestrator.train.source]]`, `[[orchestrator.env]]`):
  an environment id names `agent.environment=verifiers:ID`; verifiers 0.4's taskset + harness (`env.taskset`) has
  no step-level API grpokit's adapter can drive (docs/agents.md) and is named as not supported.
"""

from __future__ import annotations

from typing import Any

from .table import Spec
from .translation import Translation

O = "orchestrator."
RENAMES = {
    "max_steps": ("train.steps", int),
    "model.name": ("model.name", str),
    O + "group_size": ("rollout.group_size", int),
    O + "train.sampling.max_completion_tokens": ("rollout.max_new_tokens", int),
    O + "train.sampling.temperature": ("rollout.temperature", float),
    O + "sampling.max_tokens": ("rollout.max_new_tokens", int),
    O + "sampling.temperature": ("rollout.temperature", float),
    O + "seed": ("train.seed", int),
    "trainer.optim.lr": ("train.lr", float),
    "trainer.optim.weight_decay": ("train.weight_decay", float),
    "trainer.optim.max_norm": ("train.max_grad_norm", float),
}
IGNORED = ("deployment.*", "monitors.*", "wandb.*", "ckpt.*", "inference.*", "orchestrator.renderer.*", "seq_len",
           "log.*", "output_dir")  # fmt: skip


def is_prime_rl(data: dict[str, Any]) -> bool:
    return isinstance(data.get("orchestrator"), dict) or any(str(k).startswith(O) for k in data)


def _special(cfg: dict[str, Any], flat: dict[str, Any], t: Translation) -> None:
    batch, n = flat.get(O + "batch_size"), flat.get(O + "group_size")
    if batch and n and int(batch) % int(n) == 0:
        t.set((O + "batch_size", O + "group_size"), rollout__prompts_per_step=int(batch) // int(n))
    elif batch:
        t.unsupported[O + "batch_size"] = batch
    for key in (O + "train.source", O + "env", O + "train.env"):
        for env in flat.get(key) or []:
            _environment(key, env, t)


def _environment(key: str, env: Any, t: Translation) -> None:
    """One `[[orchestrator...]]` environment: a verifiers id grpokit's adapter runs, or named as not supported."""
    env = env if isinstance(env, dict) else {"id": env}
    inner = env.get("env") if isinstance(env.get("env"), dict) else env
    if "taskset" in inner or "harness" in inner or "agent" in inner:
        t.unsupported[key] = env
        t.notes.append(
            f"{key} {str(env.get('name') or env.get('id'))[:60]!r} is a verifiers taskset + harness (verifiers 0.4's "
            "v1 stack), which grpokit's verifiers adapter does not run; give a classic verifiers environment "
            "(agent.environment=verifiers:ID) or --task and --set reward.functions=[...]"
        )
    elif inner.get("id") and "agent.environment" not in t.keys:
        t.set(key, agent__environment=f"verifiers:{inner['id']}")
    else:
        t.unsupported[key] = env


SPEC = Spec("prime-rl", RENAMES, {}, IGNORED, _special)
