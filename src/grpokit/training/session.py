"""Setup shared by `train`, `eval` and `preflight`: device, precision, model and tokenizer, rollout engine, reward
manager and data, built once from a config. Nothing here trains: the trainer adds optimizer, reference and critic.
"""

from __future__ import annotations

import contextlib
import functools
import os
import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from ..agents.setup import Agent, build_agent
from ..common import faults
from ..config import Config
from ..data.limits import model_context, prompt_limit
from ..data.split import TaskData, load_task_data
from ..models import (
    Precision,
    autocast_ctx,
    enable_activation_checkpointing,
    load_model_and_tokenizer,
    resolve_precision,
)
from ..parallel.distributed import broadcast_object, device_for_rank, init_distributed
from ..rewards import RewardManager
from ..rewards.limits import SandboxLimits
from ..rollout import RolloutEngine, SamplingParams, build_engine, check_engine


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def pick_device(name: str) -> str:
    if name == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    return name


def lora_options(cfg: Config) -> dict[str, Any] | None:
    m = cfg.model
    if m.lora_r <= 0:
        return None
    return {
        "r": m.lora_r,
        "alpha": m.lora_alpha,
        "dropout": m.lora_dropout,
        "target_modules": list(m.lora_target_modules),
    }


def reward_sandbox(cfg: Config) -> SandboxLimits:
    """The reward sandbox of a run: what `reward.sandbox_*` asks, with the data files and the run directory
    (`train.output_dir`, else the `train.out` folder that holds the runs) readable under `sandbox_read=limited`."""
    r = cfg.reward
    places = [cfg.data.task, cfg.data.eval_data, cfg.train.output_dir or cfg.train.out]
    data_and_run = [os.path.abspath(p) for p in places if p and os.path.exists(p)]
    return SandboxLimits(
        read=r.sandbox_read,
        readable=(*data_and_run, *r.sandbox_readable),
        env=tuple(r.sandbox_env),
        python_only=bool(r.sandbox_python_only),
    )


@dataclass
class Session:
    """Everything a run samples and scores with."""

    cfg: Config
    device: str
    precision: Precision
    model: torch.nn.Module
    tokenizer: Any
    engine: RolloutEngine
    rewards: RewardManager
    data: TaskData
    agent: Agent | None = None  # multi-turn runs: tools, environment, episodes (grpokit/agents)

    def sandbox_report(self) -> dict[str, str] | None:
        """What confines this run's user code: the reward worker's sandbox report, else the tool worker's ({}
        for a worker without a sandbox); None when no code runs in a worker (`rewards/sandbox_report.py`)."""
        if self.rewards.isolated:
            return self.rewards.sandbox
        if self.agent is not None and self.agent.executor is not None:
            return self.agent.executor.runner.enforced()
        return None

    def autocast(self) -> contextlib.AbstractContextManager:
        return autocast_ctx(self.precision, self.device)

    def sampling_params(self, n: int | None = None, temperature: float | None = None) -> SamplingParams:
        r = self.cfg.rollout
        return SamplingParams(
            n=r.group_size if n is None else n,
            max_new_tokens=r.max_new_tokens,
            temperature=r.temperature if temperature is None else temperature,
            top_p=r.top_p,
            top_k=r.top_k,
            min_new_tokens=r.min_new_tokens,
        )

    def close(self) -> None:
        """Stop the reward worker process (and the tool worker of a multi-turn run)."""
        self.rewards.close()
        if self.agent is not None:
            self.agent.close()


def episodes_of(session: Session, engine: RolloutEngine) -> RolloutEngine:
    """`engine` as the session samples with it: running episodes in a multi-turn run, unchanged otherwise."""
    if session.agent is None:
        return engine
    return session.agent.wrap(engine, session.data, session.cfg.data)  # type: ignore[return-value]


def open_session(
    cfg: Config, *, precision: str | None = None, functions: dict[str, Callable[..., Any]] | None = None
) -> Session:
    """Seed, resolve device and precision (`precision` overrides `model.precision`, e.g. the one a resumed run
    recorded), load model and tokenizer, build the engine, the data and the reward manager.

    `functions` maps names in `reward.functions` to in-memory callables (the Python API's `reward_funcs`, recorded
    in the config by qualified name); other names are built-ins or `module:function` specs."""
    check_engine(cfg.rollout.engine)  # e.g. vLLM not installed: say so before the model loads
    seed_everything(cfg.train.seed)
    info = init_distributed(pick_device(cfg.model.device))  # torchrun: join the job (no-op otherwise)
    device = device_for_rank(pick_device(cfg.model.device), info)
    prec = resolve_precision(precision or cfg.model.precision, device)
    if info.world > 1:  # one decision for every rank: rank 0's (the `auto` probe is timing-based)
        prec = resolve_precision(broadcast_object(prec.name, info), device)
    m = cfg.model
    faults.point("setup")
    model, tokenizer = load_model_and_tokenizer(
        m.name,
        dtype=prec.name,
        device=device,
        lora=lora_options(cfg),
        seed=cfg.train.seed,
        trust_remote_code=m.trust_remote_code,
        attn_implementation=m.attn_implementation,
    )
    if cfg.model.gradient_checkpointing:
        enable_activation_checkpointing(model)
    model.train()
    if info.rank:  # same initial weights on every rank, but each rank samples its own completions
        seed_everything(cfg.train.seed + 1_000_003 * info.rank)
    agent = build_agent(cfg, tokenizer, reward_sandbox(cfg), model_context(model))
    data_cfg = cfg.data if agent is None else agent.data_config(cfg.data)  # the tools shown in the prompts
    limit = prompt_limit(data_cfg, model_context(model), cfg.rollout.max_new_tokens)
    data = load_task_data(data_cfg, tokenizer, cfg.train.seed, limit)
    if not cfg.reward.functions and data.default_reward is None:
        raise ValueError(
            "reward.functions is empty and data.answer_key is null (no reference answers for a default reward): "
            "name the reward functions, e.g. --set reward.functions=[rewards.py:my_reward]"
        )
    funcs: list[Any] = [(functions or {}).get(f, f) for f in cfg.reward.functions] or [data.default_reward]
    weights = list(cfg.reward.weights) or [1.0] * len(funcs)
    rewards = RewardManager(
        list(zip(funcs, weights)),
        timeout_s=cfg.reward.timeout_s,
        max_fail_frac=cfg.reward.max_fail_frac,
        sandbox=reward_sandbox(cfg),
        not_applicable=cfg.reward.not_applicable,
        verl_solution_str=cfg.reward.verl_solution_str,
        convention=cfg.reward.convention,
        decode=functools.partial(tokenizer.decode, skip_special_tokens=False),  # prompts as the model saw them
        # a reward model runs beside the learner unless told otherwise
        model_device=str(device) if cfg.reward.model_device == "auto" else cfg.reward.model_device,
    )
    session = Session(cfg, device, prec, model, tokenizer, None, rewards, data, agent)  # type: ignore[arg-type]
    session.engine = episodes_of(session, build_engine(cfg.rollout.engine, session))
    return session
