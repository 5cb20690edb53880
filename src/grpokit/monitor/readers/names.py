"""The mapping tables: each source's own metric names -> grpokit's canonical names (`metric_names`).

Each table maps a source metric only to the canonical name whose definition it matches, and says where the match
is only approximate."""

from __future__ import annotations

import re

from ... import metric_names as mn
from .names_system import SYSTEM_CANONICAL, TRL_SYSTEM_NAMES, VERL_SYSTEM_NAMES

# The canonical names other sources are mapped onto (grpokit logs more; its own rows keep every key).
CANONICAL: frozenset[str] = frozenset(
    {
        mn.REWARD_MEAN,
        mn.REWARD_STD,
        mn.REWARD_ACCURACY,
        mn.REWARD_MIN,
        mn.REWARD_MAX,
        mn.ADV_MIN,
        mn.ADV_MAX,
        mn.ZV_FRAC,
        mn.ZV_SAMPLE_FRAC,
        mn.ZV_ALL_CORRECT,
        mn.ZV_ALL_WRONG,
        mn.ENTROPY_TOKEN_MEAN,
        mn.KL_REF_K1,
        mn.KL_REF_K3,
        mn.ACTOR_KL_LOSS,
        mn.ACTOR_CLIPFRAC,  # union of low- and high-side clipping (verl's pg_clipfrac, TRL's clip_ratio/region_mean)
        mn.ACTOR_CLIPFRAC_HIGH,
        mn.ACTOR_CLIPFRAC_LOW,
        mn.ACTOR_CLIPFRAC_DUAL,
        mn.ACTOR_PPO_KL,
        mn.ACTOR_PG_LOSS,
        mn.ACTOR_LOSS,
        mn.TRAIN_GRAD_NORM,
        mn.TRAIN_LR,
        mn.LENGTH_MEAN,
        mn.LENGTH_MIN,
        mn.LENGTH_MAX,
        mn.LENGTH_CORRECT_MEAN,
        mn.LENGTH_INCORRECT_MEAN,
        mn.LENGTH_TRUNCATION_RATE,
        mn.MISMATCH_ABS_DIFF_MEAN,
        mn.MISMATCH_ABS_DIFF_MAX,
        mn.MISMATCH_RHO_MEAN,
        mn.MISMATCH_RHO_MAX,
        mn.MISMATCH_RHO_MIN,
        mn.MISMATCH_KL_K1,
        mn.MISMATCH_KL_K3,
        mn.CRITIC_EXPLAINED_VARIANCE,
        mn.CRITIC_VALUE_LOSS,
        mn.TIME_STEP,
        mn.TIME_GENERATE,
        mn.PERF_TOKENS_PER_S,
        mn.EVAL_ACCURACY,
        mn.TRAIN_SKIPPED_UPDATE,
        mn.SAMPLING_ROUNDS,
        mn.EPISODE_TURNS_MEAN,
        mn.EPISODE_TOOL_CALLS_MEAN,
        mn.EPISODE_TOOL_ERROR_RATE,
    }
) | SYSTEM_CANONICAL

# --------------------------------------------------------------------------------------------- mapping tables
# Each table maps a source's own metric name to the canonical name(s) with the same definition. Order matters
# only when two source names map to the same canonical name in one row: the earlier entry wins.

#: TRL `GRPOTrainer` `log_history` keys (checked against TRL 1.16 `grpo_trainer.py`; older names kept at the end).
TRL_NAMES: dict[str, tuple[str, ...]] = {
    # mean / std over all completions of the step (nan-aware; std is the unbiased one, like grpokit's)
    "reward": (mn.REWARD_MEAN,),
    "reward_std": (mn.REWARD_STD,),
    # fraction of completions whose group has zero reward std (torch.isclose(std, 0), atol 1e-8 as grpokit's
    # tolerance). It is sample-weighted, i.e. grpokit's `zv/sample_frac`. TRL's groups all have exactly
    # `num_generations` completions, and with equal group sizes the sample-weighted fraction equals the group
    # fraction `zv/frac`, so it is mapped to both. Caveat: with `scale_rewards="batch"` or
    # `multi_objective_aggregation="normalize_then_sum"` TRL tests the *batch* std instead (0 or 1 for the step).
    "frac_reward_zero_std": (
        mn.ZV_SAMPLE_FRAC,
        mn.ZV_FRAC,
    ),
    # TRL's built-in `trl.rewards.accuracy_reward` returns 1/0 for a correct/incorrect answer: its mean is the
    # accuracy. (Any other reward function's mean is left unmapped: its meaning is unknown.)
    "rewards/accuracy_reward/mean": (mn.REWARD_ACCURACY,),
    # token-mean entropy over completion tokens
    "entropy": (mn.ENTROPY_TOKEN_MEAN,),
    # per-token exp(ref - logp) - (ref - logp) - 1 averaged over completion tokens: the k3 estimator vs the
    # reference model (logged only when beta != 0)
    "kl": (mn.KL_REF_K3,),
    # token fractions: ratio < 1 - eps_low with A < 0, ratio > 1 + eps_high with A > 0, and their union
    "clip_ratio/low_mean": (mn.ACTOR_CLIPFRAC_LOW,),
    "clip_ratio/high_mean": (mn.ACTOR_CLIPFRAC_HIGH,),
    "clip_ratio/region_mean": (mn.ACTOR_CLIPFRAC,),
    # the Trainer's loss: total loss (policy term + beta * KL - entropy bonus). `policy_loss` includes the
    # beta * KL term, unlike grpokit's `actor/pg_loss`, so it stays unmapped.
    "loss": (mn.ACTOR_LOSS,),
    "grad_norm": (mn.TRAIN_GRAD_NORM,),
    "learning_rate": (mn.TRAIN_LR,),
    # completion lengths in tokens; clipped_ratio = fraction of completions cut at max_completion_length
    "completions/mean_length": (mn.LENGTH_MEAN,),
    "completions/min_length": (mn.LENGTH_MIN,),
    "completions/max_length": (mn.LENGTH_MAX,),
    "completions/clipped_ratio": (mn.LENGTH_TRUNCATION_RATE,),
    # |old_logp - sampling_logp| over completion tokens (vLLM importance-sampling correction on): the same
    # quantity as grpokit's |lambda| statistics. TRL's `sampling/importance_sampling_ratio/*` are the ratios
    # *after* TRL's truncation/masking (and per sequence in sequence modes), not grpokit's raw rho: unmapped.
    "sampling/sampling_logp_difference/mean": (mn.MISMATCH_ABS_DIFF_MEAN,),
    "sampling/sampling_logp_difference/max": (mn.MISMATCH_ABS_DIFF_MAX,),
    # wall time of one optimizer step (generation included), seconds
    "step_time": (mn.TIME_STEP,),
    # with `tools=` (multi-turn tool calling; `_tool_call_loop` and the metrics block after it in
    # `trl/trainer/grpo_trainer.py`, checked at f2cd577, 2026-07): `tools/call_frequency` = tool calls executed /
    # completions of the step (only parsed calls reach the loop), i.e. grpokit's tool calls per episode;
    # `tools/failure_frequency` = calls that raised, named no known tool or had an unsupported type / calls executed
    # (0 when none ran), grpokit's tool error rate (TRL has no tool timeout; a call that fails to parse is never
    # counted, as in grpokit's). TRL logs no parse failures, no limits and no call count.
    "tools/call_frequency": (mn.EPISODE_TOOL_CALLS_MEAN,),
    "tools/failure_frequency": (mn.EPISODE_TOOL_ERROR_RATE,),
    # evaluation entries (`eval_` prefix in log_history)
    "eval_rewards/accuracy_reward/mean": (mn.EVAL_ACCURACY,),
    # TRL < 0.17 names
    "completion_length": (mn.LENGTH_MEAN,),
    "clip_ratio": (mn.ACTOR_CLIPFRAC,),
    # between TRL PR #3188 (2025-03-31) and PR #3212 (2025-04-02, the `completions/` prefix) lengths were logged as
    "mean_completion_length": (mn.LENGTH_MEAN,),
    "min_completion_length": (mn.LENGTH_MIN,),
    "max_completion_length": (mn.LENGTH_MAX,),
    # TRL < 0.16 logged each reward function's mean without the `/mean` suffix
    "rewards/accuracy_reward": (mn.REWARD_ACCURACY,),
    "eval_rewards/accuracy_reward": (mn.EVAL_ACCURACY,),
    **TRL_SYSTEM_NAMES,  # phase times (names_system)
}

#: verl PPO/GRPO trainer metric names (`ray_trainer.py`, `metric_utils.py`, `dp_actor.py`, rollout correction).
VERL_NAMES: dict[str, tuple[str, ...]] = {
    # sequence score before any in-reward KL penalty (`critic/rewards/mean` is after it; equal without
    # use_kl_in_reward, but only the score is the reward grpokit means). verl logs no reward std.
    "critic/score/mean": (mn.REWARD_MEAN,),
    # per-step extremes of the score: a score that stays within [0, 1] is a 0/1 verifier (its mean an accuracy)
    "critic/score/min": (mn.REWARD_MIN,),
    "critic/score/max": (mn.REWARD_MAX,),
    # the range of the step's advantages: max == min == 0 means every advantage is exactly 0 (every group has
    # zero reward variance under GRPO): the advantage collapse is in the log even without a zero-std fraction
    "critic/advantages/max": (mn.ADV_MAX,),
    "critic/advantages/min": (mn.ADV_MIN,),
    # `agg_loss(entropy, mask, loss_agg_mode)`: the token mean under verl's default loss_agg_mode="token-mean"
    "actor/entropy": (mn.ENTROPY_TOKEN_MEAN,),
    # verl <= 0.3 logged the token-mean entropy as `actor/entropy_loss` (a positive entropy, not a loss term)
    "actor/entropy_loss": (mn.ENTROPY_TOKEN_MEAN,),
    # `torch.gt(clipped_loss, unclipped_loss)` token fraction: clipping on either side, so the union
    "actor/pg_clipfrac": (mn.ACTOR_CLIPFRAC,),
    # dual-clip fraction (A < 0 and ratio > clip_ratio_c)
    "actor/pg_clipfrac_lower": (mn.ACTOR_CLIPFRAC_DUAL,),
    "actor/ppo_kl": (mn.ACTOR_PPO_KL,),
    "actor/pg_loss": (mn.ACTOR_PG_LOSS,),
    # KL-loss term vs the reference (its estimator is `kl_loss_type`, low_var_kl by default); not mapped to
    # kl_ref/k3 because the estimator is configurable and low_var_kl is clamped
    "actor/kl_loss": (mn.ACTOR_KL_LOSS,),
    "actor/loss": (mn.ACTOR_LOSS,),
    "actor/grad_norm": (mn.TRAIN_GRAD_NORM,),
    "actor/lr": (mn.TRAIN_LR,),
    # response lengths in tokens; clip_ratio = fraction of responses that hit max_response_length
    "response_length/mean": (mn.LENGTH_MEAN,),
    "response_length/min": (mn.LENGTH_MIN,),
    "response_length/max": (mn.LENGTH_MAX,),
    "response_length/clip_ratio": (mn.LENGTH_TRUNCATION_RATE,),
    "critic/vf_explained_var": (mn.CRITIC_EXPLAINED_VARIANCE,),
    "critic/vf_loss": (mn.CRITIC_VALUE_LOSS,),
    "timing_s/step": (mn.TIME_STEP,),
    "timing_s/gen": (mn.TIME_GENERATE,),
    "timing/step": (mn.TIME_STEP,),  # verl <= 0.2
    "timing/gen": (mn.TIME_GENERATE,),
    # verl <= 0.2 with the KL penalty in the reward: mean (old_logp - ref_logp) over response tokens with the
    # default kl_penalty="kl", i.e. the k1 estimator against the reference
    "critic/kl": (mn.KL_REF_K1,),
    # verl >= 0.3 with use_kl_in_reward: the same in-reward KL (`apply_kl_penalty` in `ray_trainer.py`: per-sequence
    # token means of `kl_penalty(old_log_probs, ref_log_prob)`, then the batch mean); k1 with the default
    # algorithm.kl_penalty="kl" (a run set to low_var_kl / abs / mse logs that estimator under the same name). Its
    # coefficient is `actor/reward_kl_penalty_coeff`.
    "actor/reward_kl_penalty": (mn.KL_REF_K1,),
    # total tokens / (step time * n_gpus): grpokit's tokens/s per GPU (identical on one GPU; a constant factor
    # otherwise, which leaves trends and ratios unchanged)
    "perf/throughput": (mn.PERF_TOKENS_PER_S,),
    # training vs rollout policy: mean(rollout_logp - old_logp) and mean(exp(d) - d - 1), d = old - rollout,
    # over response tokens: grpokit's mismatch kl_k1 / kl_k3. The `rollout_is_*` weights are after truncation
    # (and per sequence in sequence modes), not grpokit's raw rho: unmapped.
    "rollout_corr/kl": (mn.MISMATCH_KL_K1,),
    "rollout_corr/k3_kl": (mn.MISMATCH_KL_K3,),
    "mismatch/kl": (mn.MISMATCH_KL_K1,),  # verl's earlier `mismatch/` prefix for the same metrics
    "mismatch/k3_kl": (mn.MISMATCH_KL_K3,),
    **VERL_SYSTEM_NAMES,  # phase times, peak memory, sampler/learner probability gap (names_system)
}
# Left out, multi-turn (`verl/trainer/ppo/metric_utils.py`, `verl/experimental/agent_loop/tool_agent_loop.py` at
# b178a3c, 2026-01): `num_turns/{mean,max,min}` counts user (tool/interaction) turns + assistant turns + 1, not the
# policy's turns; `tool_call_counts/*` is a field only custom agent loops set, its meaning theirs.

#: OpenRLHF PPO/GRPO trainer metrics (checked against OpenRLHF's `ppo_trainer.py`, `ray/ppo_actor.py`,
#: `ppo_utils/experience_maker.py`, `utils/logging_utils.py` at commit 3c3be62, 2026-08). Its W&B and TensorBoard
#: loggers write them as `train/<name>` (and `eval/<name>`), like transformers, so the flavour is told apart by
#: the names themselves.
OPENRLHF_NAMES: dict[str, tuple[str, ...]] = {
    "reward": (mn.REWARD_MEAN,),  # per-sample reward (after any length penalty)
    "response_length": (mn.LENGTH_MEAN,),
    "response_clip_ratio": (mn.LENGTH_TRUNCATION_RATE,),  # samples that hit the generation limit
    # `compute_approx_kl(action_logp, base_logp, --algo.kl.estimator)` vs the reference; the estimator's default is
    # k1. Mapped to k1 (a run set to k2/k3 logs that estimator under the same name).
    "kl": (mn.KL_REF_K1,),
    "ppo_clip_ratio": (mn.ACTOR_CLIPFRAC,),  # torch.lt(surr2, surr1): clipping on either side
    "ppo_kl": (mn.ACTOR_PPO_KL,),
    "policy_loss": (mn.ACTOR_PG_LOSS,),
    "entropy_loss": (mn.ENTROPY_TOKEN_MEAN,),  # aggregate of the token entropy (logged when computed)
    "actor_grad_norm": (mn.TRAIN_GRAD_NORM,),
    "actor_lr": (mn.TRAIN_LR,),
    "critic_loss": (mn.CRITIC_VALUE_LOSS,),
}
# The console's short names (`act_loss`, `rm`, `glen`, ...) are expanded to these first
# (`readers_openrlhf.SHORT_NAMES`).

#: verl names with a variable part. `val-core/<data_source>/acc/mean@N` is held-out accuracy; when a run
#: validates on several data sources (several names match) it is left unmapped rather than averaged.
VERL_PATTERNS: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"^val-core/.+/acc/mean@\d+$"), mn.EVAL_ACCURACY),
    # verl <= 0.3: `val/test_score/<data_source>` (the verifier's score, an accuracy for 0/1 verifiers)
    (re.compile(r"^val/test_score/.+$"), mn.EVAL_ACCURACY),
]

# TensorBoard tags: grpokit and verl log their own names; TRL (transformers' TensorBoardCallback) writes
# `train/<key>` for training logs and `eval/<key>` for `eval_<key>` logs.
TRL_TB_PREFIXES = (("train/", ""), ("eval/", "eval_"))
