"""Mapping tables of SkyRL, NeMo-RL, prime-rl and slime (read from their printed output), and of ROLL and AReaL
(their printed output, W&B exports and TensorBoard events).

Like `names`, each table maps a source metric only to the canonical name whose definition it matches, and says
where the match is approximate; a name left out is left out on purpose (the comment says why when it is one a
reader might expect). Sources: `tests/fixtures/logs/real/FRAMEWORKS.md` and each trainer's code at the commits
named below.
"""

from __future__ import annotations

import re

from ... import metric_names as mn

#: SkyRL (NovaSky-AI/SkyRL, `skyrl-train`). The console prints the per-step status dict of the policy worker (no
#: prefix) and a rewards line; names checked against the mid-2025 copy that wrote the corpus logs
#: (mert-cemri/CTU-Agent-v0@cc8ab4d `SkyRL_mod/skyrl-train/skyrl_train/{trainer,workers/worker}.py`, the *fork*) and
#: upstream a956457 (`skyrl/train/trainer.py`, `skyrl/backends/skyrl_train/workers/worker.py`).
SKYRL_NAMES: dict[str, tuple[str, ...]] = {
    # fork `compute_advantages_and_returns`: mean over sequences of the summed token-level rewards, i.e. the task
    # reward (the in-reward KL penalty is added before it only with use_kl_in_reward, off in the corpus runs and by
    # default: they use the KL loss). Upstream names it `reward/avg_raw_reward`.
    "avg_raw_rewards": (mn.REWARD_MEAN,),
    "reward/avg_raw_reward": (mn.REWARD_MEAN,),
    # mean response length in tokens (multi-turn: every token after the prompt, tool output included)
    "avg_response_length": (mn.LENGTH_MEAN,),
    # the PPO surrogate term alone (the KL-loss term is added to it after logging)
    "policy_loss": (mn.ACTOR_PG_LOSS,),
    # upstream only: the total loss of the update (policy term + KL term - entropy bonus)
    "final_loss": (mn.ACTOR_LOSS,),
    # masked_mean((-surr2 > -surr1), loss_mask): clipping on either side, a token fraction (the union)
    "ppo_clip_ratio": (mn.ACTOR_CLIPFRAC,),
    "loss_metrics/clip_ratio": (mn.ACTOR_CLIPFRAC,),  # upstream's name for the same
    # token-mean entropy of the policy. Upstream: masked_mean over loss tokens (exact). Approximate in the fork:
    # `entropy.sum() / entropy.numel()` over every response position, tool-output tokens masked from the loss
    # included (and padding when a micro-batch holds several sequences; the corpus runs use 1 per GPU).
    "policy_entropy": (mn.ENTROPY_TOKEN_MEAN,),
    # the KL-loss term vs the reference (per-sequence token means, then the batch mean): k3 with
    # use_kl_estimator_k3 (the fork's default) or `kl_estimator_type` upstream, unclamped; logged only with
    # use_kl_loss. Like verl's `actor/kl_loss`, not mapped to kl_ref/k3: the estimator is configurable.
    "policy_kl": (mn.ACTOR_KL_LOSS,),
    # the norm returned by the optimizer step, before clipping (`grad_norm` upstream)
    "raw_grad_norm": (mn.TRAIN_GRAD_NORM,),
    "grad_norm": (mn.TRAIN_GRAD_NORM,),
    "policy_lr": (mn.TRAIN_LR,),
    # the console reader's key for the fork's "Skipping training step because the entire batch was invalid." warning
    # (`trainer.py:260`, then `continue`: no update at that step)
    "skipped_update": (mn.TRAIN_SKIPPED_UPDATE,),
    # the `Timer("step")` / `Timer("generate")` wall times (`timing/step`, `timing/generate` in the trackers), read
    # from the console's "Finished: 'step', time cost: Ts" lines
    "timing/step": (mn.TIME_STEP,),
    "timing/generate": (mn.TIME_GENERATE,),
}
# Left out: the fork's "[Eval Step N] Eval rewards - Avg: x, Success: y" (N counts samples, not steps, and each
# evaluation averages several validation sets) and upstream's `avg_final_rewards` (rewards after shaping).
# Multi-turn: skyrl-train's generator logs no turn or tool metric of its own (environments add theirs, named as they
# like); skyrl-agent's `rollout_metrics/context_exceed_ratio` and `rollout_metrics/iter_cap_ratio` (episodes ended by
# the context window and by the iteration cap, `skyrl-agent/skyrl_agent/agents/base.py` at a956457) would be
# grpokit's context- and turn-limit fractions, but skyrl-agent prints them with `print`, not in the trainer's
# loguru lines this console reader reads: left out until a log carrying them is read.

#: NeMo-RL (NVIDIA-NeMo/RL@7ea279a) tracker keys, logged as `train/<key>` (`nemo_rl/algorithms/grpo.py:3762`); the
#: console prints a few of them under labels (`NEMO_RL_CONSOLE`). NeMo-RL sums the loss function's metrics over
#: micro-batches, each normalised by the tokens of its global batch: within one optimizer step that sum is the
#: token mean; when a GRPO step makes k optimizer steps (num_prompts_per_step x num_generations_per_prompt >
#: policy.train_global_batch_size) `loss`, `gen_kl_error`, `approx_entropy` and `kl_penalty` are k times the mean.
#: Exact for NeMo-RL's recipes, which train one global batch per step.
NEMO_RL_NAMES: dict[str, tuple[str, ...]] = {
    # mean of `total_reward` over every sample of the step (after reward shaping, when enabled; with dynamic
    # sampling the console's "Avg Total Reward")
    "reward": (mn.REWARD_MEAN,),
    # actor loss + KL penalty (+ VAPO's NLL term when enabled): the total loss of the update
    "loss": (mn.ACTOR_LOSS,),
    # k3 (the default `reference_policy_kl_type`) of exp(d) - d - 1, d = prev_logprobs - generation_logprobs, over
    # the response tokens: KL(generator || trainer), grpokit's mismatch k3. A run set to k1/k2 logs that estimator
    # under the same name.
    "gen_kl_error": (mn.MISMATCH_KL_K3,),
    # mean generated tokens per sample (`nemo_rl/experience/rollouts.py`)
    "mean_gen_tokens_per_sample": (mn.LENGTH_MEAN,),
    # share of samples stopped by the generation limit
    "truncation_rate": (mn.LENGTH_TRUNCATION_RATE,),
    "grad_norm": (mn.TRAIN_GRAD_NORM,),
    "lr": (mn.TRAIN_LR,),
    # -mean over response tokens of (pi_curr / pi_gen) * log pi_curr at the sampled token: despite its variable
    # name (`seq_entropy_approx`), a token mean (normalised by the global token count), and an unbiased one-sample
    # estimate of each position's entropy (E_{y~pi_gen}[(pi/pi_gen)(-log pi(y))] = H(pi)). Close enough to
    # grpokit's exact token-mean entropy over thousands of tokens; biased low only under top-p/top-k sampling
    # (the generator then never draws the tail).
    "approx_entropy": (mn.ENTROPY_TOKEN_MEAN,),
    # the KL penalty divided by its coefficient: the KL to the reference (k3 by default, importance-weighted and
    # clamped), like verl's `actor/kl_loss`
    "kl_penalty": (mn.ACTOR_KL_LOSS,),
    # the validation set's mean reward, which NeMo-RL calls accuracy (its math and code environments score 0/1)
    "validation/accuracy": (mn.EVAL_ACCURACY,),
    # the console's "Total step time" and the `generation` timer, seconds
    "timing/total_step_time": (mn.TIME_STEP,),
    "timing/generation": (mn.TIME_GENERATE,),
}
# Left out: `baseline_reward/pct_0|pct_1|pct_mixed` (percent of *samples* whose group baseline is 0 / 1 / mixed:
# with a leave-one-out baseline not the share of all-wrong / all-correct groups) and `probs_ratio*` (the PPO ratio
# of the current to the previous policy, not the sampler ratio).

#: The NeMo-RL console's "📊 Training Results:" and "⏱️ Timing:" bullet labels (`grpo.py:3703-3734`) -> its tracker keys.
NEMO_RL_CONSOLE: dict[str, str] = {
    "Loss": "loss",
    "Draft Loss": "draft_loss",
    "Generation KL Error": "gen_kl_error",
    "Avg Reward": "reward",
    "Avg Total Reward": "reward",  # with dynamic sampling: the tracker's `reward` is `total_reward` then
    "Avg Filtered Reward": "filtered_reward",  # the groups dynamic sampling kept: not every sample, left unmapped
    "Mean Generation Length": "mean_gen_tokens_per_sample",
    "Total step time": "timing/total_step_time",
    "generation": "timing/generation",
}

#: prime-rl (PrimeIntellect-ai/prime-rl@559b447) console labels: the trainer's SUCCESS line
#: (`src/prime_rl/trainer/rl/train.py:638-648`) and the orchestrator's (`orchestrator/orchestrator.py:880`; before
#: June 2026 `Label: value`, with `Seq. Length`). Percentages are read as fractions.
PRIME_RL_NAMES: dict[str, tuple[str, ...]] = {
    # trainer `entropy/all/mean`: the full-vocabulary entropy of the (temperature-scaled) logits at every loss token
    "Entropy": (mn.ENTROPY_TOKEN_MEAN,),
    # trainer `mismatch_kl/all/mean`: exp(d) - d - 1, d = trainer_logprobs - inference_logprobs, over the loss
    # tokens: KL(sampler || trainer) k3. prime-rl takes one optimizer step per batch, so the trainer's logprobs are
    # the old policy's, as in grpokit; with async training the sampler may be a few policies behind, which this
    # measures too.
    "Mismatch KL": (mn.MISMATCH_KL_K3,),
    "Grad. Norm": (mn.TRAIN_GRAD_NORM,),  # clip_grad_norm_'s total norm, before clipping
    "LR": (mn.TRAIN_LR,),
    # orchestrator: mean reward of the traces shipped to the trainer (errored and cancelled rollouts excluded)
    "Reward": (mn.REWARD_MEAN,),
    # orchestrator: share of shipped traces cut by the generation limit
    "Truncation": (mn.LENGTH_TRUNCATION_RATE,),
    # orchestrator `Turns` (`orchestrator.py` step line, `metrics.py` `EpisodeMetrics.num_turns`, at 559b447,
    # 2026-08): each episode's model turns (the trace's `num_turns`, summed over its traces: one for a
    # single-agent environment), averaged over the step's episodes: grpokit's policy turns per episode
    "Turns": (mn.EPISODE_TURNS_MEAN,),
}
# Left out: the orchestrator's `Error` (episodes with any error: model, environment or tool, not a tool call rate)
# and `Branches`; the trainer's `Loss` (`loss/mean`, the mean of the micro-batch losses, each already divided by the
# global token count: the step's loss over the number of micro-batches, not the loss), `Throughput` (training
# tokens/s only, generation runs elsewhere), `Seq. Length` (prompt included) and the step time (rounded).

#: slime (THUDM/slime@624b824) keys of its console dicts (`step N: {...}`, `rollout N: {...}`, `perf N: {...}`;
#: `slime/backends/megatron_utils/{model,loss}.py`, `slime/observability/{train_metric_utils,rollout_metrics}.py`).
#: The loss metrics are reduced by `sum_of_sample_mean` and divided by the step's sample count: the mean over
#: samples of each sample's token mean (the samples of one multi-sample rollout share its token count), unless
#: --calculate-per-token-loss makes them token means (`SLIME_PER_TOKEN_NAMES`).
SLIME_NAMES: dict[str, tuple[str, ...]] = {
    "train/loss": (mn.ACTOR_LOSS,),  # pg_loss - entropy_coef * entropy + kl_loss_coef * kl_loss
    "train/pg_loss": (mn.ACTOR_PG_LOSS,),
    # each sequence's token-mean entropy averaged over sequences: grpokit's sequence-mean entropy, not the token mean
    "train/entropy_loss": (mn.ENTROPY_SEQ_MEAN,),
    # torch.gt(clipped, unclipped): clipping on either side (the union). Approximate: per-sequence token fractions
    # averaged over sequences, grpokit's is over all tokens
    "train/pg_clipfrac": (mn.ACTOR_CLIPFRAC,),
    "train/ppo_kl": (mn.ACTOR_PPO_KL,),  # old - new log-prob, k1; approximate in the same way
    # the KL-loss term vs the reference (--kl-loss-type picks the estimator), like verl's `actor/kl_loss`
    "train/kl_loss": (mn.ACTOR_KL_LOSS,),
    "train/grad_norm": (mn.TRAIN_GRAD_NORM,),
    "train/lr-pg_0": (mn.TRAIN_LR,),
    # |old - rollout log-prob| (current policy's with --use-rollout-logprobs); approximate as the others
    "train/train_rollout_logprob_abs_diff": (mn.MISMATCH_ABS_DIFF_MEAN,),
    # the train side's rollout summary: mean raw reward (before group normalisation) and response length
    "rollout/raw_reward": (mn.REWARD_MEAN,),
    "rollout/response_lengths": (mn.LENGTH_MEAN,),
    # the rollout side's summary: length without trailing masked tokens, and the share of TRUNCATED samples
    "rollout/response_len/mean": (mn.LENGTH_MEAN,),
    "rollout/truncated_ratio": (mn.LENGTH_TRUNCATION_RATE,),
    "perf/rollout_time": (mn.TIME_GENERATE,),
}
# Left out: `rollout/zero_std/count_<reward>` (a count of zero-variance groups per reward value, without the number
# of groups it is a share of) and `eval/<dataset>` (a mean reward, an accuracy only for 0/1 rewards).

#: slime run with --calculate-per-token-loss (its printed arguments say so): the loss metrics are token means.
SLIME_PER_TOKEN_NAMES: dict[str, tuple[str, ...]] = {**SLIME_NAMES, "train/entropy_loss": (mn.ENTROPY_TOKEN_MEAN,)}

#: ROLL (alibaba/ROLL@8eb27cc, RLVR pipeline `roll/pipeline/rlvr/rlvr_pipeline.py`). Every tracker gets the step's
#: metrics with their reduction tag stripped (`actor/pg_loss@sum` -> `actor/pg_loss`, `roll/utils/tracking.py:15-52`);
#: the `stdout` tracker prints them as `metrics_tag: {"step": N, "metrics": {...}}` (`tracking.py:161`). Batch
#: metrics come from `roll/utils/metrics/metrics_manager.py` (`add_token_metrics`, `add_values_metrics`,
#: `add_group_metrics`, each also repeated per data domain as `<domain>/<key>`), the actor's from
#: `roll/pipeline/rlvr/actor_worker.py:124-166` and `roll/pipeline/base_worker.py:110`. The actor's `@sum` metrics
#: are summed over the micro-batches of the step, each normalised by the tokens of the global batch: the token mean
#: when a step makes one optimizer step, k times it with k (ppo_epochs x mini-batches), as NeMo-RL's.
ROLL_NAMES: dict[str, tuple[str, ...]] = {
    # `scores`: each response's score from the reward worker, before the token-level KL penalty and reward shaping
    "critic/score/mean": (mn.REWARD_MEAN,),
    "critic/score/min": (mn.REWARD_MIN,),
    "critic/score/max": (mn.REWARD_MAX,),
    # share of responses whose score is exactly 1 (`max_score`): the accuracy of ROLL's rule-based verifiers
    "critic/correct/mean": (mn.REWARD_ACCURACY,),
    # agg_loss(old policy's token entropy, response mask, "token-mean") (`rlvr_pipeline.py:650-655`)
    "critic/entropy/mean": (mn.ENTROPY_TOKEN_MEAN,),
    "critic/advantages/max": (mn.ADV_MAX,),
    "critic/advantages/min": (mn.ADV_MIN,),
    # response tokens per sample
    "token/response_length/mean": (mn.LENGTH_MEAN,),
    "token/response_length/min": (mn.LENGTH_MIN,),
    "token/response_length/max": (mn.LENGTH_MAX,),
    # mean length of responses scored 1 / 0; approximate: responses cut at the length limit are left out of both
    "token/right_response_length/mean": (mn.LENGTH_CORRECT_MEAN,),
    "token/error_response_length/mean": (mn.LENGTH_INCORRECT_MEAN,),
    # groups (the n samples of one prompt) all scored 1 / all scored 0, over all groups
    "group/all_correct_groups_ratio": (mn.ZV_ALL_CORRECT,),
    "group/all_incorrect_groups_ratio": (mn.ZV_ALL_WRONG,),
    # -min(surr1, surr2) aggregated by loss_agg_mode (without the sample weights); the KL-loss term (vs the
    # reference, --kl_penalty estimator) and their weighted sum minus the entropy bonus
    "actor/pg_loss": (mn.ACTOR_PG_LOSS,),
    "actor/kl_loss": (mn.ACTOR_KL_LOSS,),
    "actor/total_loss": (mn.ACTOR_LOSS,),
    # torch.lt(surr2, surr1): the clipped surrogate taken, on either side (the union)
    "actor/clipfrac": (mn.ACTOR_CLIPFRAC,),
    "actor/lr": (mn.TRAIN_LR,),
    # `{worker name}/grad_norm` from the FSDP2 / Megatron strategies, before clipping; the actor is `actor_train`
    "actor_train/grad_norm": (mn.TRAIN_GRAD_NORM,),
    # validation: share of samples scored 1 over every validation domain
    "val_correct/all/mean": (mn.EVAL_ACCURACY,),
}
# Left out: `token/total_response_length/clip` (a count of responses at the length limit, not a share: the batch
# size is another metric), `actor/ppo_ratio_high_clipfrac` / `_low_clipfrac` (ratio outside the range whatever the
# advantage's sign, not grpokit's one-sided clip fractions), `actor/approxkl` (0.5 (new - old)^2) and
# `actor/policykl` (new - old: the opposite sign of grpokit's old - new), `critic/rewards/*` (after the KL penalty).

#: ROLL names with a variable part: the in-reward KL to the reference, `compute_token_reward`'s `critic/kl`, is only
#: logged per data domain (`<domain>/critic/kl`, `roll/utils/functionals.py:615-635`; `kl_penalty` "kl", i.e. k1,
#: by default); with several domains it is left unmapped rather than averaged.
ROLL_PATTERNS: list[tuple[re.Pattern[str], str]] = [(re.compile(r"^[^/]+/critic/kl$"), mn.KL_REF_K1)]

#: AReaL (inclusionAI/AReaL@4aef98d). `StatsLogger.commit` (`areal/utils/stats_logger.py:135-159`) sends the step's
#: `stats_tracker` export to W&B / SwanLab / TensorBoard under these keys and prints it on the console as a table
#: (`tabulate_stats`: `│ key │ value │` cells, 4 pairs a row, values `.4e`) after "Train step N/M done.". Token
#: statistics are means over the step's valid (loss) tokens, `/avg|/min|/max` of `stat()`; the actor's are recorded
#: under scopes `ppo_actor` and `ppo_actor/update` (`areal/trainer/ppo/actor.py:252-366`, `:515-575`).
AREAL_NAMES: dict[str, tuple[str, ...]] = {
    # the reward of each trained sequence (`data["rewards"]`), per sequence
    "ppo_actor/task_reward/avg": (mn.REWARD_MEAN,),
    "ppo_actor/task_reward/min": (mn.REWARD_MIN,),
    "ppo_actor/task_reward/max": (mn.REWARD_MAX,),
    # the rollout workflows' own mean reward (`areal/workflow/rlvr.py:135`), when the actor's is absent
    "rollout/reward": (mn.REWARD_MEAN,),
    "ppo_actor/advantages/min": (mn.ADV_MIN,),
    "ppo_actor/advantages/max": (mn.ADV_MAX,),
    # token entropy of the policy over the loss tokens
    "ppo_actor/update/entropy/avg": (mn.ENTROPY_TOKEN_MEAN,),
    # pg_loss1 < pg_loss2: the clipped surrogate taken, either side (the union); and the dual clip
    "ppo_actor/update/clip_ratio/avg": (mn.ACTOR_CLIPFRAC,),
    "ppo_actor/update/dual_clip_ratio/avg": (mn.ACTOR_CLIPFRAC_DUAL,),
    # the PPO loss per token (AReaL puts the KL to the reference in the reward, not in the loss)
    "ppo_actor/update/actor_loss/avg": (mn.ACTOR_PG_LOSS,),
    # the engine's optimizer step: norm before clipping, learning rate (averaged over the step's mini-batches)
    "ppo_actor/update/grad_norm": (mn.TRAIN_GRAD_NORM,),
    "ppo_actor/update/lr": (mn.TRAIN_LR,),
    # share of sequences as long as the padded batch (no EOS: cut at the limit); approximate, the longest sequence of
    # a batch padded to its own length counts even when it ended
    "ppo_actor/no_eos_ratios/avg": (mn.LENGTH_TRUNCATION_RATE,),
}
# Left out: `ppo_actor/seq_len/*`, `correct_seq_len`, `incorrect_seq_len` (prompt included), `ppo_actor/update/
# approx_kl` (new - old, the opposite sign of grpokit's), `behave_approx_kl` (proximal - behaviour: the opposite sign
# of grpokit's mismatch k1), `ppo_actor/kl_rewards` (-coefficient x KL per token), `eval-rollout/reward` (a mean
# reward, an accuracy only for 0/1 rewards), `update_successful` (1 when the step updated: its complement is a skip).

#: Every table of this module (for the mapping tests).
TABLES: dict[str, dict[str, tuple[str, ...]]] = {
    "skyrl": SKYRL_NAMES,
    "nemo-rl": NEMO_RL_NAMES,
    "prime-rl": PRIME_RL_NAMES,
    "slime": SLIME_NAMES,
    "slime --calculate-per-token-loss": SLIME_PER_TOKEN_NAMES,
    "roll": ROLL_NAMES,
    "areal": AREAL_NAMES,
}
