"""Length-sorted micro-batches (`train.sort_by_length`, `grpokit.training.phases.update.split_micro_batches`).

Sorting a mini-batch's rows by generated length before splitting it into micro-batches only regroups rows: every
per-sample field is read through the same row indices and the loss divides by the mini-batch's global denominators
(docs/math.md §1.5 rule 2), so one update with sorting on equals the update with it off up to float rounding. The
tiny model is fp32; the two updates differ in the order the micro-batch losses and gradients are summed, in which
rows share a GEMM (other matrix sizes, other MKL blocking) and in each micro-batch's trimmed width, each a rounding
of ~1e-7 relative per operation, so the gradients are compared at rtol 1e-4 with an absolute floor of 1e-5 x the
largest gradient entry. Measured: the largest difference is 6e-8 at a largest entry of 0.13 (dapo; 9e-8 at 0.36
for grpo), 20x inside the tolerance; swapping two rows' advantages moves the update by 0.027, 2e4x outside it.
"""

from __future__ import annotations

import copy

import pytest
import torch
from tiny_config import tiny_overrides

from grpokit.config import build_config
from grpokit.training.phases.update import run_update, split_micro_batches
from grpokit.training.trainer import Trainer

# 4 prompts x 4 samples; generated lengths from 1 to 12 tokens, the long and short ones spread over the groups
LENGTHS = [12, 1, 2, 11, 3, 12, 1, 4, 2, 10, 1, 12, 5, 1, 9, 2]
MICRO = 4


def _split(lengths: list[int], sort: bool) -> list[list[int]]:
    cfg = build_config("dapo", overrides=tiny_overrides(f"train.micro_batch_size={MICRO}"))
    cfg.train.sort_by_length = sort
    t = len(lengths) and max(lengths)
    mask = (torch.arange(t)[None] < torch.tensor(lengths)[:, None]).float()
    batch = type("Rows", (), {"lengths": mask.sum(1), "__len__": lambda self: len(lengths)})()
    return [idx.tolist() for idx in split_micro_batches(batch, cfg.train)]


def test_the_split_sorts_rows_longest_first_keeps_ties_in_batch_order_and_pads_less():
    on, off = _split(LENGTHS, True), _split(LENGTHS, False)
    assert off == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11], [12, 13, 14, 15]]
    assert on == [[0, 5, 11, 3], [9, 14, 12, 7], [4, 2, 8, 15], [1, 6, 10, 13]]
    assert sorted(i for part in on for i in part) == list(range(len(LENGTHS)))

    def padded(parts: list[list[int]]) -> int:  # tokens the learner runs: each micro-batch at its longest row
        return sum(len(p) * max(LENGTHS[i] for i in p) for p in parts)

    assert (padded(off), padded(on)) == (180, 104)  # of 88 real tokens
    assert _split([3, 1, 2], True) == [[0, 1, 2]]  # one micro-batch: nothing to sort


def _update(trainer: Trainer, b, sort: bool, state0: dict) -> tuple[list[torch.Tensor], torch.Tensor | None, dict]:
    """One update from `state0` with plain SGD at lr 1 (parameter change = -gradient, no Adam normalisation that
    would turn rounding-level gradients into +-lr steps); (parameter change, on-policy log-probs, metrics)."""
    trainer.model.load_state_dict(state0)
    trainer.cfg.train.sort_by_length = sort
    state = trainer.train_state()
    state.optimizer = torch.optim.SGD(trainer.model.parameters(), lr=1.0)
    state.scheduler = torch.optim.lr_scheduler.LambdaLR(state.optimizer, lambda _: 1.0)
    before = [p.detach().clone() for p in trainer.model.parameters()]
    metrics, outputs = run_update(state, b, step=1, kl_coef=trainer.kl_ctl.value, entropy_coef=0.0)
    delta = [p.detach() - p0 for p, p0 in zip(trainer.model.parameters(), before)]
    on_policy = outputs.assemble(len(b), b.completion_ids.shape[1])
    return delta, None if on_policy is None else on_policy[0], metrics


@pytest.mark.parametrize(
    "recipe,agg",
    [("dapo", "token-mean"), ("grpo", "seq-mean-token-mean"), ("dr_grpo", "constant-norm")],
)
def test_sorted_micro_batches_give_the_same_update(tmp_path, recipe, agg):
    cfg = build_config(
        recipe,
        overrides=tiny_overrides(
            "rollout.prompts_per_step=4",
            "rollout.group_size=4",
            "rollout.max_new_tokens=12",
            "rollout.min_new_tokens=12",
            f"train.micro_batch_size={MICRO}",
            "train.max_grad_norm=1e9",
            "algo.group_filter=all",
            "model.precision=fp32",
        ),
    )
    assert cfg.algo.loss_agg == agg
    trainer = Trainer(cfg, tmp_path)
    b = trainer.draw()
    # very different lengths: the generated tokens past each row's length are dropped from both masks
    keep = (torch.arange(b.raw_mask.shape[1])[None] < torch.tensor(LENGTHS)[:, None]).float()
    b.raw_mask, b.mask = b.raw_mask * keep, b.mask * keep
    assert b.lengths.tolist() == LENGTHS
    trainer.advantages(b)
    # distinct advantages per row, so a row read with another row's advantage changes the gradient
    b.advantages = torch.linspace(-1.5, 1.7, len(b))[torch.randperm(len(b), generator=torch.Generator().manual_seed(0))]
    state0 = copy.deepcopy(trainer.model.state_dict())
    d_off, lp_off, m_off = _update(trainer, b, False, state0)
    d_on, lp_on, m_on = _update(trainer, b, True, state0)
    scale = max(float(d.abs().max()) for d in d_off)
    assert scale > 1e-3  # the update moved the parameters
    for a, c in zip(d_on, d_off):
        torch.testing.assert_close(a, c, rtol=1e-4, atol=1e-5 * scale)
    assert m_on["train/grad_norm"] == pytest.approx(m_off["train/grad_norm"], rel=1e-5)
    if lp_off is not None:  # on-policy: the training forward's log-probs come back in batch row order
        assert (b.old_logp is None) and lp_on is not None
        torch.testing.assert_close(lp_on * b.raw_mask, lp_off * b.raw_mask, rtol=1e-5, atol=1e-5)
        assert bool((lp_off[b.raw_mask > 0] < 0).all())
