"""The metric keys grpokit writes to `metrics.jsonl` (and TensorBoard), one constant each, grouped by family.

Signals, detectors, log readers, the report, the doctor and the console import these instead of repeating string
literals, so a renamed metric is renamed everywhere. Definitions follow docs/math.md §17 where a signal is defined
there.
Foreign logs (TRL, verl, OpenRLHF) are mapped onto these names by `monitor/readers`.
"""

from __future__ import annotations

# --- reward (docs/math.md §17.4): the verifier's scores over every generated sample of the step -----------------------
REWARD_PREFIX = "reward/"
REWARD_MEAN = "reward/mean"  # mean (shaped) reward over finite rewards
REWARD_STD = "reward/std"  # sample standard deviation of the finite rewards
REWARD_MIN = "reward/min"  # smallest reward (foreign logs; range checks)
REWARD_MAX = "reward/max"  # largest reward (foreign logs; range checks)
REWARD_ACCURACY = "reward/accuracy"  # mean correctness (accuracy score) over finite rewards
REWARD_VALID_FRAC = "reward/valid_frac"  # share of samples with a finite reward
REWARD_FAIL_FRAC = "reward/fail_frac"  # share of samples whose reward function failed
REWARD_NA_FRAC = "reward/na_frac"  # share of samples no reward applies to (every one returned None): not failures
REWARD_SECONDS = "reward/seconds"  # wall time of scoring the step
REWARD_BATCH_RETRIES = "reward/batch_retries"  # batches re-scored one by one after a worker failure
REWARD_SAMPLED_N = "reward/sampled_n"  # samples scored over every generation round
REWARD_DUP_INCONSISTENCY = "reward/dup_inconsistency"  # repeated (prompt, text) pairs whose rewards differ
REWARD_LENGTH_CORR = "reward/length_corr"  # Pearson correlation of reward with response length
REWARD_ACC_CORR = "reward/acc_corr"  # Pearson correlation of reward with correctness
REWARD_KEPT_PREFIX = "reward/kept_"  # reward/kept_mean, ...: the reward signals over the trained batch only
REWARD_CORR_PREFIX = "reward/corr/"  # reward/corr/<component>: total reward vs. each non-first component
REWARD_FAILURES_PREFIX = "reward/failures_"  # reward/failures_<kind>: failed samples by failure kind

# --- zero-variance groups (docs/math.md §17.1) -----------------------------------------------------------------------
ZV_PREFIX = "zv/"
ZV_FRAC = "zv/frac"  # groups whose rewards are all equal (zero advantage)
ZV_SAMPLE_FRAC = "zv/sample_frac"  # the sample-weighted zv/frac (TRL's frac_reward_zero_std)
ZV_ACC_FRAC = "zv/acc_frac"  # groups whose accuracy is all equal (what DAPO's filter drops)
ZV_ALL_CORRECT = "zv/all_correct"  # groups where every sample is correct
ZV_ALL_WRONG = "zv/all_wrong"  # groups where every sample is wrong
ZV_GROUPS = "zv/groups"  # groups with at least two finite rewards

# --- token entropy (docs/math.md §17.2) ------------------------------------------------------------------------------
ENTROPY_PREFIX = "entropy/"
ENTROPY_TOKEN_MEAN = "entropy/token_mean"  # mean policy entropy over response tokens
ENTROPY_SEQ_MEAN = "entropy/seq_mean"  # mean over non-empty sequences of each sequence's token-mean entropy
ENTROPY_COEF = "entropy/coef"  # the (possibly adaptive) entropy-bonus coefficient

# --- KL to the reference and to the initial policy (docs/math.md §17.3) ----------------------------------------------
KL_REF_FAMILY = "kl_ref"  # the `prefix` given to algos.kl_metrics for KL to the reference
KL_REF_PREFIX = "kl_ref/"
KL_REF_K1 = "kl_ref/k1"  # token-mean k1 estimate of KL(pi || pi_ref)
KL_REF_K3 = "kl_ref/k3"  # token-mean k3 estimate of KL(pi || pi_ref)
KL_REF_SEQ = "kl_ref/seq"  # sequence-summed k1 per sample
KL_INIT_FAMILY = "kl_init"  # the `prefix` given to algos.kl_metrics for KL to the initial policy
KL_INIT_PREFIX = "kl_init/"
KL_INIT_K1 = "kl_init/k1"  # token-mean k1 estimate of KL(pi || pi_init)
KL_INIT_K3 = "kl_init/k3"  # token-mean k3 estimate of KL(pi || pi_init)
KL_COEF = "kl/coef"  # the (possibly adaptive) KL coefficient beta

# --- sampler/learner mismatch (docs/math.md §17.6) -------------------------------------------------------------------
MISMATCH_PREFIX = "mismatch/"
MISMATCH_RHO_MEAN = "mismatch/rho_mean"  # token-mean importance ratio pi_learner / pi_sampler
MISMATCH_RHO_MAX = "mismatch/rho_max"  # largest token ratio
MISMATCH_RHO_MIN = "mismatch/rho_min"  # smallest token ratio
MISMATCH_FRAC_HIGH = "mismatch/frac_high"  # tokens whose ratio exceeds the IS cap
MISMATCH_FRAC_LOW = "mismatch/frac_low"  # tokens whose ratio is below 1 / the IS cap
MISMATCH_ABS_DIFF_MEAN = "mismatch/abs_diff_mean"  # token-mean |log pi_learner - log pi_sampler|
MISMATCH_ABS_DIFF_MAX = "mismatch/abs_diff_max"  # largest |log-prob difference|
MISMATCH_KL_K1 = "mismatch/kl_k1"  # k1 estimate of KL(sampler || learner)
MISMATCH_KL_K3 = "mismatch/kl_k3"  # k3 estimate of KL(sampler || learner)
MISMATCH_PROBS_DIFF_MEAN = "mismatch/probs_diff_mean"  # token-mean |p_learner - p_sampler| (probabilities)
MISMATCH_PROBS_DIFF_MAX = "mismatch/probs_diff_max"  # largest token |p_learner - p_sampler|

# --- response length (docs/math.md §17.5) ----------------------------------------------------------------------------
LENGTH_PREFIX = "length/"
LENGTH_MEAN = "length/mean"  # mean response length in tokens
LENGTH_MIN = "length/min"  # shortest response
LENGTH_MAX = "length/max"  # longest response
LENGTH_CORRECT_MEAN = "length/correct_mean"  # mean length of correct responses
LENGTH_INCORRECT_MEAN = "length/incorrect_mean"  # mean length of incorrect responses
LENGTH_TRUNCATION_RATE = "length/truncation_rate"  # share of responses that hit max_new_tokens
LENGTH_SOFT_ZONE_RATE = "length/soft_zone_rate"  # share inside the soft overlong punishment zone

# --- policy loss (the learner's `actor/*` outputs) -----------------------------------------------------------
ACTOR_PREFIX = "actor/"
ACTOR_LOSS = "actor/loss"  # total loss of the update
ACTOR_PG_LOSS = "actor/pg_loss"  # policy-gradient term
ACTOR_KL_LOSS = "actor/kl_loss"  # KL penalty term (KL in the loss)
ACTOR_ENTROPY_BONUS = "actor/entropy_bonus"  # entropy bonus term
ACTOR_NLL_LOSS = "actor/nll_loss"  # auxiliary NLL on positive samples (VAPO)
ACTOR_ENTROPY_KEEP_FRAC = "actor/entropy_keep_frac"  # tokens kept by the top-entropy mask
ACTOR_CLIPFRAC = "actor/clipfrac"  # tokens clipped on either side (foreign logs: verl pg_clipfrac, TRL region)
ACTOR_CLIPFRAC_HIGH = "actor/clipfrac_high"  # positive-advantage tokens clipped above 1 + eps_high
ACTOR_CLIPFRAC_LOW = "actor/clipfrac_low"  # negative-advantage tokens clipped below 1 - eps_low
ACTOR_CLIPFRAC_DUAL = "actor/clipfrac_dual"  # negative-advantage tokens capped by dual clip c
ACTOR_PPO_KL = "actor/ppo_kl"  # token-mean k1 of pi_old vs pi_theta during the update

# --- critic --------------------------------------------------------------------------------------------------
CRITIC_PREFIX = "critic/"
CRITIC_VALUE_LOSS = "critic/value_loss"  # value-function loss
CRITIC_EXPLAINED_VARIANCE = "critic/explained_variance"  # 1 - Var(returns - values) / Var(returns)
CRITIC_GRAD_NORM = "critic/grad_norm"  # critic gradient norm before clipping
CRITIC_LR = "critic/lr"  # critic learning rate
CRITIC_PRETRAIN_PREFIX = "critic_pretrain/"
CRITIC_PRETRAIN_STEP = "critic_pretrain/step"  # value-pretraining steps taken
CRITIC_PRETRAIN_EXPLAINED_VARIANCE = "critic_pretrain/explained_variance"  # explained variance after the step
CRITIC_PRETRAIN_VALUE_LOSS = "critic_pretrain/value_loss"  # value loss of the step
CRITIC_PRETRAIN_REWARD_MEAN = "critic_pretrain/reward_mean"  # mean reward of the pretraining batch

# --- the optimizer step ---------------------------------------------------------------------------------------
TRAIN_PREFIX = "train/"
TRAIN_GRAD_NORM = "train/grad_norm"  # policy gradient norm before clipping
TRAIN_LR = "train/lr"  # policy learning rate
TRAIN_BATCH_SIZE = "train/batch_size"  # samples in the trained batch
TRAIN_SKIPPED_UPDATE = "train/skipped_update"  # 1.0 when no update ran (all advantages zero)
TRAIN_NONFINITE_LOSS = "train/nonfinite_loss"  # 1.0 when a micro-batch loss was NaN/inf
TRAIN_NONFINITE_GRAD = "train/nonfinite_grad"  # 1.0 when the gradient norm was NaN/inf
TRAIN_WEIGHT_MAX_ABS = "train/weight_max_abs"  # largest |w| over the policy's trainable weights after the step

# --- advantages -----------------------------------------------------------------------------------------------
ADV_PREFIX = "adv/"
ADV_MEAN = "adv/mean"  # mean advantage over response tokens
ADV_ABS_MEAN = "adv/abs_mean"  # mean |advantage| (the policy-gradient scale)
ADV_NONZERO_FRAC = "adv/nonzero_frac"  # tokens with a non-zero advantage
ADV_MIN = "adv/min"  # smallest advantage of the step (foreign logs: verl critic/advantages/min)
ADV_MAX = "adv/max"  # largest advantage of the step (foreign logs: verl critic/advantages/max)
GPG_ALPHA = "gpg/alpha"  # GPG's batch correction alpha = B / B_valid
GPG_VALID_FRAC = "gpg/valid_frac"  # share of the batch with non-degenerate groups under GPG resampling

# --- group filter / dynamic sampling --------------------------------------------------------------------------
SAMPLING_PREFIX = "sampling/"
SAMPLING_ROUNDS = "sampling/rounds"  # generation rounds used by dynamic sampling
SAMPLING_SHORT_BATCH = "sampling/short_batch"  # 1.0 when dynamic sampling trained on a short batch (partial)
SAMPLING_GENERATED_GROUPS = "sampling/generated_groups"  # groups generated over every round
SAMPLING_NO_VALID_GROUP = "sampling/no_valid_group"  # 1.0 when no group survived the filter
ROLLOUT_STALENESS = "rollout/staleness"  # updates between the sampler's weights and the learner's

# --- multi-turn episodes (agent.*; grpokit/agents, docs/agents.md) -----------------------------------------------
EPISODE_PREFIX = "episode/"
EPISODE_N = "episode/n"  # episodes sampled in the step (every generation round)
EPISODE_TURNS_MEAN = "episode/turns_mean"  # policy turns per episode
EPISODE_TOOL_CALLS_MEAN = "episode/tool_calls_mean"  # tool calls (parsed) per episode
EPISODE_CALL_FRAC = "episode/call_frac"  # episodes with at least one parsed tool call
EPISODE_CALL_ATTEMPTS = "episode/call_attempts"  # turns that tried to call a tool (parsed or not), in the step
EPISODE_PARSE_FAIL_RATE = "episode/parse_fail_rate"  # tried tool calls that did not parse / tried
EPISODE_TOOL_CALLS = "episode/tool_calls"  # tool calls executed in the step
EPISODE_TOOL_ERROR_RATE = "episode/tool_error_rate"  # executed calls that raised, named no tool or had bad arguments
EPISODE_TOOL_TIMEOUT_RATE = "episode/tool_timeout_rate"  # executed calls stopped by agent.tool_timeout_s or a limit
EPISODE_TURN_LIMIT_FRAC = "episode/turn_limit_frac"  # episodes ended by agent.max_turns before an answer
EPISODE_CONTEXT_LIMIT_FRAC = "episode/context_limit_frac"  # episodes ended by the context limit
EPISODE_LENGTH_LIMIT_FRAC = "episode/length_limit_frac"  # episodes whose last turn hit rollout.max_new_tokens
EPISODE_POLICY_TOKENS_MEAN = "episode/policy_tokens_mean"  # tokens the policy sampled per episode (trained on)
EPISODE_ENV_TOKENS_MEAN = "episode/env_tokens_mean"  # tool/environment tokens per episode (masked from the loss)
EPISODE_ENV_TOKEN_FRAC = "episode/env_token_frac"  # environment tokens / all tokens after the prompt

# --- time and throughput --------------------------------------------------------------------------------------
TIME_PREFIX = "time/"
TIME_STEP = "time/step"  # wall seconds of the whole step
TIME_GENERATE = "time/generate"  # wall seconds of generation
TIME_ROLLOUT_WAIT = "time/rollout_wait"  # wall seconds the step waited for the overlapped rollout
TIME_EVAL = "time/eval"  # wall seconds of a held-out evaluation
PERF_PREFIX = "perf/"
PERF_TOKENS_PER_S = "perf/tokens_per_s"  # (prompt + response) tokens per second of the step
PERF_GEN_TOKENS = "perf/gen_tokens"  # tokens generated in the step
PERF_GEN_TOKENS_PER_S = "perf/gen_tokens_per_s"  # generated tokens per second of generation
TIME_UPDATE = "time/update"  # wall seconds of the learner's update (verl `update_actor`)
TIME_LOGPROBS = "time/logprobs"  # wall seconds of the log-prob passes before the update (old policy)
TIME_REF = "time/ref"  # wall seconds of the reference model's log-prob pass
PERF_MEM_ALLOCATED_GB = "perf/mem_allocated_gb"  # peak accelerator memory allocated in the step, GB
PERF_MEM_RESERVED_GB = "perf/mem_reserved_gb"  # peak accelerator memory reserved by the allocator, GB
PERF_MEM_CAPACITY_GB = "perf/mem_capacity_gb"  # the card's memory, GB, where the log states it

# --- held-out evaluation --------------------------------------------------------------------------------------
EVAL_PREFIX = "eval/"
EVAL_ACCURACY = "eval/accuracy"  # held-out accuracy
EVAL_LENGTH = "eval/length"  # held-out mean response length
EVAL_TRUNCATION_RATE = "eval/truncation_rate"  # held-out share of truncated responses
EVAL_N = "eval/n"  # held-out samples evaluated
EVAL_PASS_AT = "eval/pass@"  # + k: held-out pass@k (unbiased estimator), with several samples per prompt

# --- monitor ---------------------------------------------------------------------------------------------------
ALERTS_ACTIVE = "alerts/active"  # detectors currently alerting
ALERTS_PREFIX = "alerts/"  # + detector: an alert as text (TensorBoard) and a numeric point (1 warning, 2 critical)

# --- run files ---------------------------------------------------------------------------------------------------
CONFIG_TEXT_TAG = "grpokit/config"  # TensorBoard text tag holding the run's config.yaml


def kept(name: str) -> str:
    """The trained-batch variant of a `reward/*` name: `reward/mean` -> `reward/kept_mean`."""
    return name.replace(REWARD_PREFIX, REWARD_KEPT_PREFIX, 1)
