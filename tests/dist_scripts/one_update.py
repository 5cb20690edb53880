"""One training update on a fixed global batch, in 1 process or as one rank of a torchrun job.

Every process samples the same global batch (same weights, same seed, the plain prompt stream); rank r of W
keeps prompts [r*k/W, (r+1)*k/W) (whole groups; with `uneven`, rank 0 keeps all but the last prompt, so the ranks
run different numbers of micro-batches) and runs grpokit's advantage and update phases on them; the
updated parameters (of the policy: under FSDP2 the replica the sharded learner refreshes) are saved to
OUT/params_{sharding}_rank{r}_of{W}.pt. `tests/parallel/test_distributed.py` compares them with a
1-process run on the whole batch. With `episodes` the batch is multi-turn episodes (`toy_envs:Echo`, every third token
id ending a turn, as in tests/agents/test_agent_training.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import torch

from grpokit.config import build_config
from grpokit.rollout import build_engine
from grpokit.training.phases.rollout import PromptStream
from grpokit.training.session import episodes_of
from grpokit.training.trainer import Trainer


def main(out: str, recipe: str, prompts: int, sharding: str = "ddp", split: str = "even", mode: str = "") -> None:
    episodes = ["agent.environment=toy_envs:Echo", "agent.max_turns=3"] if mode == "episodes" else []
    cfg = build_config(
        recipe,
        overrides=[
            "model.name=tiny",
            "model.precision=fp32",
            f"rollout.prompts_per_step={prompts}",
            "rollout.group_size=4",
            "rollout.max_new_tokens=6",
            "data.eval_size=4",
            "train.eval_every=0",
            "train.save_every=0",
            "train.micro_batch_size=3",  # micro-batches that split groups: accumulation is exercised too
            "train.ppo_epochs=2",
            "train.lr=1e-3",
            "reward.functions=[toy_rewards:vowel_frac]",
            "algo.group_filter=all",
            f"train.sharding={sharding}",
            *episodes,
        ],
    )
    trainer = Trainer(cfg, Path(out) / f"run{trainer_rank()}")
    if episodes:  # the tiny random model rarely samples its EOS: every third token id ends a turn
        vocab = trainer.model.get_output_embeddings().weight.shape[0]
        trainer.model.generation_config.eos_token_id = list(range(2, vocab, 3))
        trainer.session.engine = episodes_of(trainer.session, build_engine(cfg.rollout.engine, trainer.session))
    info = trainer.info
    trainer.stream = PromptStream(len(trainer.train_examples), cfg.train.seed)  # the same global prompts everywhere
    torch.manual_seed(123)
    b = trainer.draw(prompts)
    if episodes:
        assert b.episodes is not None and max(e["env_tokens"] for e in b.episodes) > 0
    g = cfg.rollout.group_size
    k = prompts // info.world
    lo, hi = info.rank * k, (info.rank + 1) * k
    if split == "uneven" and info.world == 2:  # rank 0 all prompts but the last: fewer micro-batches on rank 1
        lo, hi = (0, prompts - 1) if info.rank == 0 else (prompts - 1, prompts)
    mine = torch.arange(lo * g, hi * g)
    shard = b.select(mine)
    trainer.advantages(shard)
    m = trainer.update(shard)
    assert m.get("train/skipped_update", 0.0) == 0.0, m
    params = {n: p.detach().clone() for n, p in trainer.model.named_parameters()}
    torch.save(params, Path(out) / f"params_{sharding}_rank{info.rank}_of{info.world}.pt")
    trainer.rewards.close()


def trainer_rank() -> int:
    import os

    return int(os.environ.get("RANK", "0"))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]), *sys.argv[4:7])
    import torch.distributed as dist

    if dist.is_initialized():
        dist.destroy_process_group()
