"""The run configuration's sections: one dataclass per section (`model`, `data`, `rollout`, `reward`, `algo`,
`train`, `critic`, `monitor`, `agent`) and `Config`, the whole run.

Defaults live here; `grpokit.config.build` layers recipe, file and overrides on them and `grpokit.config.resolve`
fills derived values and validates.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, ClassVar

from ..algos.algo_config import AlgoConfig


@dataclass
class ModelConfig:
    """Which model to train and how."""

    name: str = "smollm2-135m-instruct"  # embedded default | tiny | any from_pretrained name or directory
    precision: str = "auto"  # auto | fp32 | bf16-autocast | bf16
    device: str = "auto"  # auto | cpu | cuda
    lora_r: int = 0  # > 0 enables LoRA through peft
    lora_alpha: int = 16
    lora_dropout: float = 0.0
    lora_target_modules: list[str] = field(default_factory=lambda: ["q_proj", "k_proj", "v_proj", "o_proj"])
    gradient_checkpointing: bool = False
    dtype: str = "auto"  # from_pretrained's dtype: auto (model.precision decides) | float32 | bfloat16
    trust_remote_code: bool = False  # run the model repository's own code (from_pretrained's option)
    attn_implementation: str | None = None  # eager | sdpa | sdpa_gqa | flash_attention_2 | ... (None: transformers
    # picks; on CPU a grouped-query model then runs sdpa_gqa, models/attention.py)


@dataclass
class DataConfig:
    """Prompts: a built-in task, a local file or directory, or a `datasets.load_dataset` name (see grpokit.data)."""

    task: str = "add1"
    train_size: int | None = None
    eval_size: int | None = None  # None: every held-out example, at most 200
    prompt_key: str = "prompt"  # dotted keys reach nested fields; a list of chat messages is a conversation
    answer_key: str | None = "answer"  # e.g. reward_model.ground_truth; null: no reference answers
    eval_data: str | None = None
    # more files read like data.task / data.eval_data and added to them (verl's data.train_files / val_files lists,
    # e.g. GSM8K + MATH parquet: each row keeps its own data_source)
    extra_files: list[str] = field(default_factory=list)
    extra_eval_files: list[str] = field(default_factory=list)
    system_prompt: str | None = None
    subset: str | None = None  # the configuration of a datasets name (load_dataset's `name`, e.g. main)
    split: str = "train"
    chat_template_kwargs: dict[str, Any] = field(default_factory=dict)  # e.g. {enable_thinking: false}
    max_prompt_tokens: int | None = None  # cap on a rendered prompt's tokens (always: model context - max_new_tokens)
    on_long_prompt: str = "skip"  # skip (dropped, counted and logged) | error (stop, naming the example)


# rollout.decode: how the `hf` engine runs its decode steps (grpokit/rollout/hf.py, rollout/static_decode.py)
DECODE_MODES = {
    "auto": "graphs on CUDA, eager elsewhere",
    "eager": "a dynamic cache, one step at a time from Python (CPU, and debugging)",
    "static": "a static cache with fixed shapes per row bucket, no graph capture (what the CPU tests check)",
    "graphs": "the static cache, one shape per run (its rows and cache length fixed, finished rows masked, the "
    "temperature a device tensor), the step recorded once with torch.cuda.CUDAGraph, no compiler (CUDA only)",
    "graphs-inductor": "graphs, the step compiled by inductor (mode=reduce-overhead): fused kernels for long runs, "
    "after minutes of compilation (CUDA only)",
}


@dataclass
class RolloutConfig:
    """Group sampling."""

    engine: str = "hf"
    decode: str = "auto"  # one of DECODE_MODES
    prompts_per_step: int = 4
    group_size: int = 8
    max_new_tokens: int = 48
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    eval_temperature: float = 1.0
    min_new_tokens: int = 0  # force at least this many new tokens (EOS suppressed before), like TRL's min_new_tokens
    # 1: the next step's rollouts are sampled during this step's update by a copy of the policy one update behind
    # (one-step off-policy, verl one_step_off_policy; training/phases/batch_source.py); 0: synchronous
    max_staleness: int = 0
    # engine=vllm (see rollout/vllm.py): KV-cache GiB on CPU, GPU memory share, GPU sleep mode, context length
    vllm_kv_cache_gib: float = 2.0
    vllm_gpu_memory_utilization: float = 0.3
    vllm_sleep: bool = False
    vllm_max_model_len: int = 0  # 0: the longest training prompt + max_new_tokens, rounded up


@dataclass
class RewardConfig:
    """Reward functions (`name` or `module:function`) and weights; isolation limits.

    The sandbox a reward runs in (grpokit/rewards/sandbox.py) reads, with `sandbox_read=limited`, only the
    interpreter, its packages, the system's libraries, the reward's own module, the data, the run directory and
    `sandbox_readable` (where Landlock is available; grpokit/rewards/readable.py); `sandbox_read=all` lets it
    read every file the user can (`~/.ssh` included). It gets only the environment variables of an allow-list
    (grpokit/rewards/env_vars.py) and those `sandbox_env` names (exact names or patterns like `WANDB_*`).
    Without Landlock, user reward and tool code is refused unless `sandbox_python_only=true` accepts Python-level
    checks alone.
    """

    functions: list[str] = field(default_factory=list)  # empty: the task's default reward
    weights: list[float] = field(default_factory=list)
    timeout_s: float = 10.0
    max_fail_frac: float = 0.5
    # a sample every reward returned None for: zero (reward 0, as TRL) | exclude (left out of training); never a
    # failure, counted in reward/na_frac (grpokit/rewards/applicability.py)
    not_applicable: str = "zero"
    # what a verl compute_score gets as solution_str: response (verl today) | prompt+response (the decoded prompt, then
    # the response: TinyZero, and verl before its reward-manager change; grpokit/rewards/callers.py)
    verl_solution_str: str = "response"
    # the calling convention of the user's reward functions: auto (what each declares: parameter names, annotations,
    # a class) | grpokit | trl | verl | skyrl | openrlhf | easyr1 | oat | swift (grpokit/rewards/conventions.py)
    convention: str = "auto"
    # where a reward model (a sequence-classification model directory in `functions`) runs: auto (the GPU when there
    # is one, else the CPU) | cpu | cuda | cuda:N | mps (grpokit/rewards/reward_model.py)
    model_device: str = "auto"
    sandbox_read: str = "limited"  # limited | all
    sandbox_readable: list[str] = field(default_factory=list)  # more paths rewards may read (sandbox_read=limited)
    sandbox_env: list[str] = field(default_factory=list)  # environment variables passed on, e.g. [OPENAI_API_KEY]
    # where the kernel has no Landlock, only a Python audit hook would confine reward and tool code (a program it
    # runs, or ctypes, walks past it): refused unless this is true (grpokit/rewards/sandbox.py)
    sandbox_python_only: bool = False


@dataclass
class TrainConfig:
    """Optimisation and logging."""

    steps: int = 50
    lr: float = 2e-5
    lr_schedule: str = "constant"  # constant | linear | cosine
    warmup_steps: int = 0
    weight_decay: float = 0.0
    adam_beta1: float = 0.9
    adam_beta2: float = 0.99
    max_grad_norm: float = 1.0
    # passes over each step's batch (verl ppo_epochs, TRL num_iterations)
    ppo_epochs: int = 1
    mini_batches: int = 1
    micro_batch_size: int = 32
    sort_by_length: bool = True  # micro-batches of length-sorted rows: less padding, the same loss
    sharding: str = (
        "ddp"  # torchrun (world > 1): ddp | fsdp2 (grpokit/parallel/sharding.py); one process trains in place
    )
    eval_every: int = 10
    save_every: int = 25
    # checkpoints kept, the newest (TRL's save_total_limit; 0 keeps all)
    save_total_limit: int = 2
    # TRL's name and default. false: every checkpoint holds the optimizer state, a finished run's last one too (so
    # `--resume RUN --steps M` extends it); true: none does (a third the size; no resume). None (the config.yaml of
    # an older grpokit, where unset meant model only at a finished run's last step) reads as false
    save_only_model: bool | None = False
    log_completions: int = 4
    seed: int = 0
    out: str = "runs"  # parent folder of run directories (--out)
    output_dir: str | None = None  # exactly this run directory, as TRL's output_dir (--output-dir)
    report_to: list[str] = field(default_factory=lambda: ["tensorboard"])  # tensorboard | wandb | mlflow | trackio
    save_merged: bool = False  # LoRA runs: also save a merged full model in checkpoints/step_N/merged
    autopilot: bool = False  # apply detectors' recommended fixes within the bounds below
    autopilot_max_eps_high: float = 0.4
    autopilot_max_entropy_coef: float = 0.01
    autopilot_min_lr: float = 1e-7
    autopilot_max_interventions: int = 5
    on_divergence: str = "stop"  # stop (no checkpoint of a diverged model) | continue


@dataclass
class MonitorConfig:
    """Detector thresholds, e.g. {entropy_collapse: {h_star: 0.5, patience: 50}} (see grpokit/monitor/detectors/)."""

    thresholds: dict[str, Any] = field(default_factory=dict)
    # stop the run (final checkpoint, eval and model written as at the last step) once a detector reads the task
    # as learned: zero-variance groups that are all-correct, or accuracy at its ceiling (modes in LEARNED_MODES)
    stop_when_learned: bool = False


@dataclass
class CriticConfig:
    """The value model of the PPO family (`grpokit.training.critic`): its kind, optimizer and value pretraining.

    Its own AdamW (`lr`, `max_grad_norm`, linear warm-up over `warmup_steps`), so the regression learns at its
    own rate (a value head at the policy's lr of 1e-6..1e-5 barely moves). Value pretraining (VC-PPO, VAPO: about
    50 steps) runs before the first policy step and stops at the first of: explained variance >= `pretrain_ev` on
    `pretrain_patience` consecutive fresh batches (measured before each is trained on, so held out), or
    `pretrain_max_steps` batches; each batch is trained on `pretrain_epochs` times.
    """

    kind: str = "head"  # head (linear, detached policy features) | mlp | model (separate value model)
    model: str | None = None  # kind=model: a local causal-LM directory to start from (default: the policy)
    lr: float = 1e-3
    max_grad_norm: float = 1.0
    warmup_steps: int = 0
    weight_decay: float = 0.0
    mlp_hidden: int = 256
    pretrain_max_steps: int = 0
    pretrain_ev: float = 0.5
    pretrain_patience: int = 2
    pretrain_epochs: int = 4


@dataclass
class AgentConfig:
    """Multi-turn episodes with tools or an environment (grpokit/agents, docs/agents.md). Off while `tools` and
    `environment` are empty, unless the built-in task brings tools (add2-tool)."""

    tools: list[str] = field(default_factory=list)  # built-in names (calculator) or module:function, TRL's tools
    environment: str | None = None  # module:Class: reset/step (grpokit) or TRL's environment_factory convention
    max_turns: int = 4  # policy turns per episode
    max_episode_tokens: int = 0  # prompt + every turn; 0: the model's context length
    tool_format: str = "auto"  # auto (the template's own when it has a parser, else hermes) | hermes | template
    tool_timeout_s: float = 5.0  # per tool call, in the sandbox
    tool_result_max_chars: int = 1000  # a longer tool result is cut (and says so)


@dataclass
class Config:
    """A whole run."""

    recipe: str = "grpo"
    model: ModelConfig = field(default_factory=ModelConfig)
    data: DataConfig = field(default_factory=DataConfig)
    rollout: RolloutConfig = field(default_factory=RolloutConfig)
    reward: RewardConfig = field(default_factory=RewardConfig)
    algo: AlgoConfig = field(default_factory=AlgoConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    critic: CriticConfig = field(default_factory=CriticConfig)
    monitor: MonitorConfig = field(default_factory=MonitorConfig)
    agent: AgentConfig = field(default_factory=AgentConfig)
    warnings: ClassVar[list[str]] = []  # settings that do nothing here (grpokit.config.checks), set by resolve_config()

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)
