"""Typed run configuration: defaults <- recipe YAML <- config file <- `--set key=value` overrides.

Every key is validated: an unknown key or a value of the wrong type is one error that names the key, the value
and the closest valid key.
"""

from __future__ import annotations

import dataclasses
import difflib
import sys
import types
import typing
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, ClassVar

import yaml

from .algos.compose import AlgoConfig

VAPO_ALPHA_TIMES_LMAX = 50.0


class ConfigError(ValueError):
    """A bad configuration key or value."""


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
    attn_implementation: str | None = None  # e.g. eager | sdpa | flash_attention_2 (None: transformers picks)


@dataclass
class DataConfig:
    """Prompts: a built-in task, a local file or directory, or a `datasets.load_dataset` name (see grpokit.data)."""

    task: str = "add1"
    train_size: int | None = None
    eval_size: int | None = None  # None: every held-out example, at most 200
    prompt_key: str = "prompt"  # dotted keys reach nested fields; a list of chat messages is a conversation
    answer_key: str | None = "answer"  # e.g. reward_model.ground_truth; null: no reference answers
    eval_data: str | None = None
    system_prompt: str | None = None
    subset: str | None = None  # the configuration of a datasets name (load_dataset's `name`, e.g. main)
    split: str = "train"
    chat_template_kwargs: dict[str, Any] = field(default_factory=dict)  # e.g. {enable_thinking: false}
    max_prompt_tokens: int | None = None  # cap on a rendered prompt's tokens (always: model context - max_new_tokens)
    on_long_prompt: str = "skip"  # skip (dropped, counted and logged) | error (stop, naming the example)


@dataclass
class RolloutConfig:
    """Group sampling."""

    engine: str = "hf"
    prompts_per_step: int = 4
    group_size: int = 8
    max_new_tokens: int = 48
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    eval_temperature: float = 1.0
    min_new_tokens: int = 0  # force at least this many new tokens (EOS suppressed before), like TRL's min_new_tokens
    # engine=vllm (see rollout/vllm.py): KV-cache GiB on CPU, GPU memory share, GPU sleep mode, context length
    vllm_kv_cache_gib: float = 2.0
    vllm_gpu_memory_utilization: float = 0.3
    vllm_sleep: bool = False
    vllm_max_model_len: int = 0  # 0: the longest training prompt + max_new_tokens, rounded up


@dataclass
class RewardConfig:
    """Reward functions (`name` or `module:function`) and weights; isolation limits."""

    functions: list[str] = field(default_factory=list)  # empty: the task's default reward
    weights: list[float] = field(default_factory=list)
    timeout_s: float = 10.0
    max_fail_frac: float = 0.5


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
    epochs: int = 1
    mini_batches: int = 1
    micro_batch_size: int = 32
    eval_every: int = 10
    save_every: int = 25
    keep_checkpoints: int = 2
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
    """Detector thresholds, e.g. {entropy_collapse: {h_star: 0.5, patience: 50}} (see grpokit/monitor/detectors.py)."""

    thresholds: dict[str, Any] = field(default_factory=dict)


@dataclass
class CriticConfig:
    """The value model of the PPO family (`grpokit.critic`): its kind, optimizer and value pretraining.

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
    warnings: ClassVar[list[str]] = []  # settings that do nothing here (grpokit.config_checks), set by resolve()

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def resolve(self) -> Config:
        """Fill derived values and validate everything."""
        if self.algo.gae_alpha is None and self.algo.takes("gae_alpha"):
            # VAPO length-adaptive lambda = 1 - 1/(alpha L) (spec §11): alpha L_max = 50 keeps lambda in the range
            # the paper's alpha 0.05 gives over 100..1000 tokens (0.8 .. 0.98) over L_max/10 .. L_max here
            self.algo.gae_alpha = VAPO_ALPHA_TIMES_LMAX / self.rollout.max_new_tokens
        if self.algo.loss_agg == "constant-norm" and not self.algo.l_norm:
            self.algo.l_norm = float(self.rollout.max_new_tokens)
        if 0 < self.algo.overlong_cache < 1:
            self.algo.overlong_cache = float(max(1, round(self.algo.overlong_cache * self.rollout.max_new_tokens)))
        try:
            self.algo.bind()  # each chosen component's parameters, bound once (unset -> its paper default)
        except ValueError as e:
            raise ConfigError(str(e)) from None
        from .models.precision import precision_for_dtype
        from .monitor.detectors import DETECTORS

        try:
            self.model.precision = precision_for_dtype(self.model.dtype, self.model.precision)
        except ValueError as e:
            raise ConfigError(str(e)) from None

        for name, params in self.monitor.thresholds.items():
            if name not in DETECTORS:
                raise ConfigError(f"monitor.thresholds: unknown detector {name!r}.{_suggest(name, list(DETECTORS))}")
            try:
                DETECTORS[name](None, **(params or {}))
            except ValueError as e:
                raise ConfigError(f"monitor.thresholds.{name}: {e}") from None
        checks = [
            ("rollout.group_size", self.rollout.group_size >= 1, "use 2 or more samples per prompt"),
            ("rollout.prompts_per_step", self.rollout.prompts_per_step >= 1, "use 1 or more"),
            ("rollout.max_new_tokens", self.rollout.max_new_tokens >= 1, "use 1 or more"),
            ("rollout.temperature", self.rollout.temperature > 0, "use a positive temperature"),
            ("train.steps", self.train.steps >= 0, "use 0 or more"),
            ("train.lr", self.train.lr > 0, "use a positive learning rate"),
            ("train.epochs", self.train.epochs >= 1, "use 1 or more"),
            ("train.mini_batches", self.train.mini_batches >= 1, "use 1 or more"),
            ("train.micro_batch_size", self.train.micro_batch_size >= 1, "use 1 or more"),
            (
                "train.lr_schedule",
                self.train.lr_schedule in ("constant", "linear", "cosine"),
                "use constant, linear or cosine",
            ),
            (
                "model.precision",
                self.model.precision in ("auto", "fp32", "bf16-autocast", "bf16"),
                "use auto, fp32, bf16-autocast or bf16",
            ),
            ("reward.max_fail_frac", 0 <= self.reward.max_fail_frac <= 1, "use a fraction in [0, 1]"),
            (
                "train.report_to",
                set(self.train.report_to) <= {"tensorboard", "wandb", "mlflow", "trackio"},
                "use a list of tensorboard, wandb, mlflow, trackio (or [] for none)",
            ),
            ("critic.kind", self.critic.kind in ("head", "mlp", "model"), "use head, mlp or model"),
            ("critic.lr", self.critic.lr > 0, "use a positive learning rate"),
            ("critic.max_grad_norm", self.critic.max_grad_norm > 0, "use a positive norm"),
            ("critic.pretrain_max_steps", self.critic.pretrain_max_steps >= 0, "use 0 (off) or more"),
            ("critic.pretrain_patience", self.critic.pretrain_patience >= 1, "use 1 or more"),
            ("critic.pretrain_epochs", self.critic.pretrain_epochs >= 1, "use 1 or more"),
            (
                "critic.model",
                self.critic.model is None or self.critic.kind == "model",
                "critic.model is read only with critic.kind=model: set that too, or drop critic.model",
            ),
            (
                "algo.overlong_cache",
                not self.algo.soft_overlong or 0 < self.algo.overlong_cache <= self.rollout.max_new_tokens,
                f"use a value in (0, rollout.max_new_tokens={self.rollout.max_new_tokens}]",
            ),
        ]
        for key, ok, fix in checks:
            if not ok:
                section, name = key.split(".")
                raise ConfigError(f"{key}={getattr(getattr(self, section), name)!r} is invalid: {fix}")
        if self.reward.weights and len(self.reward.weights) != len(self.reward.functions):
            raise ConfigError(
                f"reward.weights has {len(self.reward.weights)} values but reward.functions has "
                f"{len(self.reward.functions)}: give one weight per function"
            )
        from .config_checks import run_checks

        findings = run_checks(self)
        for f in findings:
            if f.level == "error":
                raise ConfigError(f.message)
        self.warnings = [f.message for f in findings]
        return self


# ---------------------------------------------------------------------------------------------- recipes


def recipe_dir() -> Path:
    return Path(str(resources.files("grpokit") / "recipes"))


def list_recipes() -> dict[str, dict[str, Any]]:
    """name -> the recipe YAML as a dict."""
    out = {}
    for p in sorted(recipe_dir().glob("*.yaml")):
        out[p.stem] = yaml.safe_load(p.read_text())
    return out


def read_yaml(path: Path) -> Any:
    """A YAML file's content; a syntax error is one ConfigError naming the file, line and column."""
    try:
        return yaml.safe_load(path.read_text())
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f", line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        raise ConfigError(f"{path}{where}: YAML syntax error ({problem}); fix the file") from None
    except UnicodeDecodeError as e:
        raise ConfigError(f"{path}: not UTF-8 text (byte {e.start}); save it as UTF-8") from None


def load_recipe(name: str) -> dict[str, Any]:
    path = Path(name)
    if path.suffix in (".yaml", ".yml") and path.exists():
        return read_yaml(path) or {}
    recipes = list_recipes()
    if name not in recipes:
        close = difflib.get_close_matches(name, list(recipes), n=1)
        hint = f" Did you mean {close[0]!r}?" if close else ""
        raise ConfigError(f"unknown recipe {name!r}.{hint} Known: {', '.join(recipes)} (or a path to a .yaml file)")
    return recipes[name]


RECIPE_META_KEYS = ("description", "paper", "spec")


# ------------------------------------------------------------------------------------------- coercion


def _type_hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _coerce(value: Any, tp: Any, key: str) -> Any:
    """Coerce a YAML/CLI value to a dataclass field type, or raise ConfigError naming the key."""
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        if isinstance(value, str) and value.lower() in ("null", "none") and type(None) in args:
            return None
        errors = []
        for a in args:
            if a is type(None):
                continue
            try:
                return _coerce(value, a, key)
            except ConfigError as e:
                errors.append(str(e))
        raise ConfigError(errors[0] if errors else f"{key}: bad value {value!r}")
    if tp is Any:
        return value
    if origin is list:
        if isinstance(value, str):
            value = [v for v in value.split(",") if v]
        if not isinstance(value, list):
            raise ConfigError(f"{key}={value!r} must be a list (e.g. a,b or [a, b])")
        return [_coerce(v, args[0], key) if args else v for v in value]
    if origin is dict or tp is dict:
        if not isinstance(value, dict):
            raise ConfigError(f"{key}={value!r} must be a mapping")
        return value
    if tp is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in ("true", "false", "yes", "no", "1", "0"):
            return value.lower() in ("true", "yes", "1")
        raise ConfigError(f"{key}={value!r} must be true or false")
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, (int, float, str)):
            raise ConfigError(f"{key}={value!r} must be an integer")
        try:
            f = float(value)
        except ValueError:
            raise ConfigError(f"{key}={value!r} must be an integer") from None
        if f != int(f):
            raise ConfigError(f"{key}={value!r} must be an integer")
        return int(f)
    if tp is float:
        if isinstance(value, bool):
            raise ConfigError(f"{key}={value!r} must be a number")
        try:
            return float(value)
        except (TypeError, ValueError):
            raise ConfigError(f"{key}={value!r} must be a number") from None
    if tp is str:
        if callable(value):
            raise ConfigError(
                f"{key}={value!r}: a function is not a config value; pass reward functions to "
                "grpokit.train(reward_funcs=[...]) (recorded by qualified name) or name them as 'module:function'"
            )
        if isinstance(value, (dict, list)) or value is None:
            raise ConfigError(f"{key}={value!r} must be a string")
        return str(value)
    return value


def _suggest(key: str, valid: list[str]) -> str:
    close = difflib.get_close_matches(key, valid, n=1, cutoff=0.5)
    return f" Did you mean {close[0]!r}?" if close else ""


def _all_keys(cfg: Config) -> list[str]:
    keys = []
    for f in dataclasses.fields(cfg):
        sub = getattr(cfg, f.name)
        if dataclasses.is_dataclass(sub):
            keys += [f"{f.name}.{g.name}" for g in dataclasses.fields(sub)]
        else:
            keys.append(f.name)
    return keys


def _hint(key: str, valid: list[str]) -> str:
    """Did-you-mean: TRL's and verl's names first (`learning_rate` -> train.lr), else the closest grpokit key."""
    from .config_compat import foreign_hint

    return foreign_hint(key) or _suggest(key, valid)


def set_key(cfg: Config, dotted: str, value: Any) -> None:
    """Set `section.key` (e.g. `algo.eps_high`) with type checking; unknown keys suggest the closest one."""
    parts = dotted.split(".")
    valid = _all_keys(cfg)
    if len(parts) == 1 and parts[0] == "recipe":
        cfg.recipe = str(value)
        return
    if len(parts) != 2 or not hasattr(cfg, parts[0]) or not dataclasses.is_dataclass(getattr(cfg, parts[0])):
        raise ConfigError(f"unknown config key {dotted!r}.{_hint(dotted, valid)} Keys look like algo.eps_high")
    section = getattr(cfg, parts[0])
    hints = _type_hints(type(section))
    if parts[1] not in hints or parts[1] not in {f.name for f in dataclasses.fields(section)}:
        raise ConfigError(f"unknown config key {dotted!r}.{_hint(dotted, valid)}")
    setattr(section, parts[1], _coerce(value, hints[parts[1]], dotted))


def apply_mapping(cfg: Config, data: dict[str, Any], source: str) -> None:
    """Apply a nested mapping (a recipe or config file) onto cfg."""
    for sec, body in data.items():
        if sec in RECIPE_META_KEYS:
            continue
        if sec == "recipe":
            cfg.recipe = str(body)
            continue
        if not isinstance(body, dict):
            raise ConfigError(
                f"{source}: top-level key {sec!r} must be a section mapping.{_suggest(sec, _all_keys(cfg))}"
            )
        for k, v in body.items():
            try:
                set_key(cfg, f"{sec}.{k}", v)
            except ConfigError as e:
                raise ConfigError(f"{source}: {e}") from None


def parse_override(text: str) -> tuple[str, Any]:
    """`algo.eps_high=0.28` -> ("algo.eps_high", 0.28); the value is parsed as YAML."""
    if "=" not in text:
        raise ConfigError(f"override {text!r} must look like section.key=value (e.g. algo.eps_high=0.28)")
    key, raw = text.split("=", 1)
    try:
        value = yaml.safe_load(raw) if raw != "" else ""
    except yaml.YAMLError:
        value = raw
    return key.strip(), value


def _foreign_to_grpokit(data: dict[str, Any], source: str, cfg: Config) -> dict[str, Any]:
    """A TRL GRPOConfig or verl config file, translated (grpokit.config_compat); one message on stderr names
    every key that was not mapped. A grpokit config is returned as is."""
    from .config_compat import translate

    try:
        found = translate(data, source, set(_all_keys(cfg)))
    except ValueError as e:
        raise ConfigError(str(e)) from None
    if found is None:
        return data
    print(f"grpokit: {found.message()}", file=sys.stderr)
    return found.to_mapping()


def build_config(
    recipe: str = "grpo",
    overrides: list[str] | None = None,
    config_file: str | None = None,
    **direct: Any,
) -> Config:
    """defaults <- recipe <- config file <- direct values (dotted keys) <- `--set` overrides; validated and bound.

    Component parameters the recipe set belong to the component it chose: when a later layer switches that
    component (`--set algo.policy_loss=gspo` on grpo), the recipe's values for it are dropped and the new
    component's own defaults apply, unless the later layer sets them too."""
    cfg = Config(recipe=recipe)
    apply_mapping(cfg, load_recipe(recipe), f"recipe {recipe}")
    cfg.recipe = Path(recipe).stem if recipe.endswith((".yaml", ".yml")) else recipe
    recipe_choices = cfg.algo.choices()
    later: set[str] = set()  # algo keys set after the recipe
    if config_file:
        p = Path(config_file)
        if not p.exists():
            raise ConfigError(f"--config {config_file!r} does not exist")
        data = read_yaml(p) or {}
        if not isinstance(data, dict):
            raise ConfigError(f"{config_file}: expected config sections (e.g. train: {{steps: 10}}), got {data!r}")
        data = _foreign_to_grpokit(data, config_file, cfg)
        apply_mapping(cfg, data, config_file)
        later |= set((data.get("algo") or {}) if isinstance(data.get("algo"), dict) else ())
    for k, v in direct.items():
        if v is not None:
            set_key(cfg, k, v)
            later.add(k.removeprefix("algo."))
    for o in overrides or []:
        k, v = parse_override(o)
        set_key(cfg, k, v)
        later.add(k.removeprefix("algo."))
    cfg.algo.forget_switched(recipe_choices, keep=later)
    return cfg.resolve()


def config_from_dict(data: dict[str, Any]) -> Config:
    """Rebuild a Config from `to_dict()` output (resume)."""
    cfg = Config(recipe=data.get("recipe", "grpo"))
    apply_mapping(cfg, {k: v for k, v in data.items() if k != "recipe"}, "saved config")
    cfg.algo.drop_unused()  # a config saved before components declared their parameters held every key
    return cfg.resolve()
