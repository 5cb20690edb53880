"""Mapping tables of the trainers read from their printed output only: SkyRL, NeMo-RL, prime-rl and slime.

Like `names`, each table maps a source metric only to the canonical name whose definition it matches, and says
where the match is approximate; a name left out is left out on purpose (the comment says why when it is one a
reader might expect). Sources: `tests/fixtures/logs/real/FRAMEWORKS.md` and each trainer's code at the commits
named below.
"""

from __future__ import annotations

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
    # the `Timer("step")` / `Timer("generate")` wall times (`timing/step`, `timing/generate` in the trackers), read
    # from the console's "Finished: 'step', time cost: Ts" lines
    "timing/step": (mn.TIME_STEP,),
    "timing/generate": (mn.TIME_GENERATE,),
}
# Left out: the fork's "[Eval Step N] Eval rewards - Avg: x, Success: y" (N counts samples, not steps, and each
# evaluation averages several validation sets) and upstream's `avg_final_rewards` (rewards after shaping).

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
}
# Left out: the trainer's `Loss` (`loss/mean`, the mean of the micro-batch losses, each already divided by the
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

#: Every table of this module (for the mapping tests).
TABLES: dict[str, dict[str, tuple[str, ...]]] = {
    "skyrl": SKYRL_NAMES,
    "nemo-rl": NEMO_RL_NAMES,
    "prime-rl": PRIME_RL_NAMES,
    "slime": SLIME_NAMES,
    "slime --calculate-per-token-loss": SLIME_PER_TOKEN_NAMES,
}
