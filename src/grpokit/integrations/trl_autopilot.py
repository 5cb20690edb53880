"""The autopilot inside a TRL `GRPOTrainer` (`HealthCallback(autopilot=True)`): an alert's actions, in grpokit's
grammar (`train.lr*=0.1`, `algo.kl_coef*=2`, `rollout.temperature+=0.2`; `grpokit.training.autopilot`), applied
to TRL's live objects where TRL reads them on every step, and refused in one line each where it does not.

What TRL 1.16's `GRPOTrainer` can take mid-run (read in its source: each attribute is read again at every step):

* `train.lr`: every param group's `lr` of the optimizer and the scheduler's `base_lrs` (transformers' schedules
  are `LambdaLR`: lr = base_lr x lambda(step), so changing only the groups would be undone at the next step);
* `algo.kl_coef`: `trainer.beta`, unless it is 0 (then TRL loaded no reference model and computes no KL);
* `rollout.temperature`: the sampling temperature (`trainer.temperature`, its `generation_config` and
  `generation_kwargs`, vLLM's sampling temperature); TRL's learner keeps scoring log-probabilities at the
  temperature the trainer was built with (its fused LM head holds it);
* `algo.eps_high`: `trainer.epsilon_high`, for the loss types that clip with it;
* `algo.entropy_coef`: `trainer.entropy_coef`, when the run started with an entropy bonus and no adaptive control.

A change is computed as grpokit's autopilot computes it (`Autopilot.change` on a config holding TRL's current
value: the same grammar, type checks and `Bounds`), and `Bounds.max_interventions` caps the changes applied.
"""

from __future__ import annotations

import inspect
from typing import Any

from ..config import Config, ConfigError, set_key
from ..monitor.doctor.knobs import TRAINER_KNOBS
from ..training.autopilot import ACTION_RE, Autopilot, Bounds, Change

#: grpokit keys TRL can take mid-run -> the name a TRL user knows them by
LIVE_KEYS = {
    "train.lr": "learning_rate",
    "algo.kl_coef": "beta",
    "rollout.temperature": "temperature",
    "algo.eps_high": "epsilon_high",
    "algo.entropy_coef": "entropy_coef",
}
#: TRL 1.16's loss types whose ratio clip is [1 - epsilon, 1 + epsilon_high] (cispo reads epsilon_high as a cap)
CLIP_LOSSES = ("grpo", "bnpo", "dr_grpo", "dapo", "luspo")
#: why TRL cannot take a key mid-run, and what to set in GRPOConfig for the next run
NOT_LIVE = {
    "algo.group_filter": (
        "GRPOTrainer has no dynamic sampling",
        "a larger num_generations, or prompts the model solves sometimes (grpokit preflight filters them)",
    ),
    "algo.kl_controller": ("GRPOTrainer keeps beta fixed (no adaptive KL controller)", "a larger beta"),
    "algo.soft_overlong": (
        "GRPOTrainer has no soft overlong punishment in its loss",
        "reward_funcs + trl.rewards.get_soft_overlong_punishment(...), or mask_truncated_completions=True",
    ),
    "algo.is_correction": (
        "TRL sets its vLLM importance-sampling correction up when the trainer is built",
        "vllm_importance_sampling_correction=True",
    ),
}


def find_trainer(callback: Any) -> Any | None:
    """The transformers `Trainer` whose callback handler holds `callback`, found among the frames that called it
    (transformers hands its callbacks the model, optimizer and scheduler, never the trainer); None outside one."""
    from transformers import Trainer

    frame = inspect.currentframe()
    try:
        while frame is not None:
            obj = frame.f_locals.get("self")
            if isinstance(obj, Trainer) and any(cb is callback for cb in obj.callback_handler.callbacks):
                return obj
            frame = frame.f_back
        return None
    finally:
        del frame


def check_actions(actions: dict[str, list[str]], detectors: Any) -> None:
    """`HealthCallback(actions=...)`: each detector registered, each action in grpokit's grammar on a key TRL
    can take mid-run; else one line naming the field, the value and the fix."""
    for name, acts in actions.items():
        if name not in detectors:
            raise ValueError(
                f"HealthCallback(actions={{{name!r}: ...}}): no detector {name!r}; use one of {sorted(detectors)}"
            )
        for action in acts:
            m = ACTION_RE.match(str(action).replace(" ", ""))
            if m is None or m["key"] not in LIVE_KEYS:
                raise ValueError(
                    f"HealthCallback(actions={{{name!r}: [{action!r}]}}): TRL takes only key=v, "
                    f"key+=d or key*=f on {sorted(LIVE_KEYS)} mid-run"
                )


def scheduler_of(lr_scheduler: Any) -> Any:
    """The schedule under accelerate's wrapper (`AcceleratedScheduler.scheduler`), or the one given."""
    return lr_scheduler if hasattr(lr_scheduler, "base_lrs") else getattr(lr_scheduler, "scheduler", lr_scheduler)


class TrlAutopilot:
    """Applies alert actions to a TRL run's live objects: the trainer (bound by `bind`), and the optimizer and
    schedule transformers passes to every callback event (`see`)."""

    def __init__(self, args: Any, bounds: Bounds | None = None, overrides: dict[str, list[str]] | None = None):
        self.args = args
        self.bounds = bounds or Bounds()
        self.overrides = overrides or {}
        self.trainer: Any = None
        self.optimizer: Any = None
        self.lr_scheduler: Any = None
        self.applied = 0

    def see(self, optimizer: Any = None, lr_scheduler: Any = None) -> None:
        self.optimizer = optimizer if optimizer is not None else self.optimizer
        self.lr_scheduler = lr_scheduler if lr_scheduler is not None else self.lr_scheduler

    # ------------------------------------------------------------------------------------------ reading

    def current(self, key: str) -> Any:
        """The value TRL runs with now for `key` (one of LIVE_KEYS)."""
        t = self.trainer
        if key == "train.lr":
            sched = scheduler_of(self.lr_scheduler)
            if sched is not None and getattr(sched, "base_lrs", None):
                return float(sched.base_lrs[0])
            return float(self.optimizer.param_groups[0]["lr"])
        attr = {
            "algo.kl_coef": "beta",
            "rollout.temperature": "temperature",
            "algo.eps_high": "epsilon_high",
            "algo.entropy_coef": "entropy_coef",
        }[key]
        return float(getattr(t, attr))

    def refusal(self, key: str) -> str | None:
        """Why TRL cannot take a change of `key` now; None when it can."""
        if key in NOT_LIVE:
            return NOT_LIVE[key][0]
        if key not in LIVE_KEYS:
            return f"TRL cannot change {key} mid-run"
        if key == "train.lr":
            return None if self.optimizer is not None else "no optimizer yet (training has not started)"
        if self.trainer is None:
            return "no GRPOTrainer bound to the callback (call health.bind(trainer))"
        a, t = self.args, self.trainer
        if key == "algo.kl_coef" and float(t.beta) == 0.0:
            return "beta=0: TRL loaded no reference model and computes no KL in this run"
        if key == "algo.entropy_coef" and getattr(a, "use_adaptive_entropy", False):
            return "TRL's adaptive entropy control (use_adaptive_entropy=True) sets entropy_coef every step"
        if key == "algo.entropy_coef" and not float(getattr(a, "entropy_coef", 0.0) or 0.0):
            return "TRL computes the entropy bonus only when entropy_coef is non-zero when the trainer is built"
        if key == "algo.eps_high" and getattr(t, "loss_type", "grpo") not in CLIP_LOSSES:
            return f"loss_type={t.loss_type!r} does not clip with epsilon_high as clip-higher"
        if (
            key == "rollout.temperature"
            and getattr(t, "use_vllm", False)
            and getattr(a, "vllm_importance_sampling_correction", False)
        ):
            return (
                "vLLM's importance-sampling correction would compare samples at the new temperature with "
                "log-probabilities scored at the old one"
            )
        return None

    @staticmethod
    def next_run(key: str) -> str:
        """What to set in GRPOConfig for the next run."""
        if key in NOT_LIVE:
            return NOT_LIVE[key][1]
        knob = TRAINER_KNOBS["trl"].get(key)
        return f"set {knob}" if knob else "no GRPOConfig equivalent"

    # ------------------------------------------------------------------------------------------ acting

    def react(self, step: int, alert: dict[str, Any]) -> list[dict[str, Any]]:
        """The actions of an alert that just started, each applied or refused; one log row each."""
        rows = []
        for action in self.overrides.get(alert["detector"], alert.get("actions") or []):
            rows.append(self.act(step, alert, action))
        return rows

    def act(self, step: int, alert: dict[str, Any], action: str) -> dict[str, Any]:
        m = ACTION_RE.match(action.replace(" ", ""))
        key = m["key"] if m else action
        row: dict[str, Any] = {
            "step": step,
            "detector": alert["detector"],
            "alert": alert["mode"],
            "reason": f"{alert['mode']}: {alert['message']}",
            "action": action,
            "key": key,
            "trl": LIVE_KEYS.get(key),
        }
        why = self.refusal(key) if m else "not an action in grpokit's grammar (key=v, key+=d, key*=f)"
        if why is None and self.applied >= self.bounds.max_interventions:
            why = f"the autopilot's budget of {self.bounds.max_interventions} interventions is spent"
        if why is None:
            change, why = self.change(key, action)
            if change is not None:
                row.update(kind="intervention", before=change.before, after=change.value, note=self.apply(change))
                self.applied += 1
                return row
        return dict(row, kind="refused", why=why, next_run=self.next_run(key))

    def restore(self, rows: list[dict[str, Any]]) -> list[str]:
        """After a resume, the interventions logged up to the checkpoint (`rows`): they count against the budget, and
        each is made again where the checkpoint does not hold it (TRL saves the optimizer and schedule, so the
        learning rate holds; `beta`, the temperature and `epsilon_high` start again from GRPOConfig). Returns what
        was set, in words."""
        done = []
        for r in rows:
            self.applied += 1
            if r.get("key") in LIVE_KEYS and r["key"] != "train.lr" and self.trainer is not None:
                self.apply(Change(r["key"], r["after"], r.get("before")))
                done.append(f"{r['trl']} {r['after']:g}")
        return done

    def change(self, key: str, action: str) -> tuple[Any, str | None]:
        """(grpokit's bounded change of TRL's current value, None), or (None, why not)."""
        cfg = Config()
        try:
            if key == "algo.eps_high":
                set_key(cfg, "algo.eps_low", float(self.trainer.epsilon_low))
            set_key(cfg, key, self.current(key))
        except ConfigError as e:
            return None, f"TRL's value is outside grpokit's range ({e})"
        change = Autopilot(cfg, self.bounds).change(action)
        if change is not None:
            return change, None
        b = self.bounds
        bound = {
            "train.lr": f"min_lr={b.min_lr:g}",
            "algo.eps_high": f"max_eps_high={b.max_eps_high:g}",
            "algo.entropy_coef": f"max_entropy_coef={b.max_entropy_coef:g}",
        }.get(key)
        within = f" within the autopilot's bound {bound}" if bound else ""
        return None, f"{key} is {self.current(key):g}: the action changes nothing{within} or leaves grpokit's range"

    def apply(self, change: Any) -> str:
        """Put `change` into TRL's live objects; returns what was changed, in words."""
        t, v = self.trainer, change.value
        if change.key == "train.lr":
            return self.apply_lr(float(change.before), float(v))
        if change.key == "algo.kl_coef":
            t.beta = float(v)
            return "trainer.beta"
        if change.key == "algo.eps_high":
            t.epsilon_high = float(v)
            return "trainer.epsilon_high"
        if change.key == "algo.entropy_coef":
            t.entropy_coef = float(v)
            return "trainer.entropy_coef"
        return self.apply_temperature(float(v))

    def apply_lr(self, before: float, after: float) -> str:
        ratio = after / before
        for group in self.optimizer.param_groups:
            group["lr"] *= ratio
            if "initial_lr" in group:
                group["initial_lr"] *= ratio
        sched = scheduler_of(self.lr_scheduler)
        if sched is not None and getattr(sched, "base_lrs", None):
            sched.base_lrs = [b * ratio for b in sched.base_lrs]
            if hasattr(sched, "_last_lr"):  # what torch's `get_last_lr()` returns, and transformers logs
                sched._last_lr = [g["lr"] for g in self.optimizer.param_groups]
            return f"{len(self.optimizer.param_groups)} param group(s) and the scheduler's base_lrs"
        return f"{len(self.optimizer.param_groups)} param group(s) (no scheduler base_lrs to change)"

    def apply_temperature(self, value: float) -> str:
        t = self.trainer
        before = t.temperature
        t.temperature = value
        where = ["trainer.temperature"]
        if getattr(t, "generation_config", None) is not None:
            t.generation_config.temperature = value
            where.append("generation_config")
        if isinstance(getattr(t, "generation_kwargs", None), dict):
            t.generation_kwargs["temperature"] = value
            where.append("generation_kwargs")
        if getattr(t, "vllm_generation", None) is not None and hasattr(t.vllm_generation, "temperature"):
            t.vllm_generation.temperature = value
            where.append("vLLM sampling")
        built = float(getattr(self.args, "temperature", before))
        return f"{', '.join(where)}; sampling only: the learner scores at the build temperature {built:g}"
