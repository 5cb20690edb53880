"""`AlgoConfig`: every algorithmic switch of a recipe in one flat dataclass (flat so that
`--set algo.eps_high=0.28` reaches any of them), and binding the chosen components' parameters once.

`AlgoConfig.bind` binds them when a run's config is resolved: a parameter the recipe or user left unset (None)
takes the chosen component's own default, and an unknown key, a key the chosen components do not take, or a
missing required key is an error naming the key, the component and its valid keys."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, ClassVar

from .components import SLOTS, Component, component_keys, unused_message
from .kl import KL_CONTROLLERS
from .registry import ADVANTAGES, GROUP_FILTERS, KL_PLACEMENTS, REFERENCES


@dataclass
class AlgoConfig:
    """Every algorithmic switch of a recipe (flat, so `--set algo.eps_high=0.28` reaches any of them).

    Fields marked *component* are declared parameters of some component; they default to None = unset and take
    the chosen component's own default when the config is bound (`bind`). The others are run-level switches.
    """

    # advantages (§3, §4, §6, §11, §15) -- component: advantage
    advantage: str = "grpo"
    adv_scale: str | None = None
    adv_eps: float | None = None
    gamma: float | None = None  # also the critic's (value_targets)
    lam: float | None = None
    gae_alpha: float | None = None
    adv_whiten: bool | None = None
    gpg_std_norm: bool | None = None
    gpg_alpha_correction: bool | None = None
    pass_k: int | None = None
    passk_std_norm: bool | None = None
    gpg_threshold: float | None = None  # the gpg group filter's valid-group fraction (docs/math.md §6)
    # critic targets (§2, §11) -- component: critic
    lam_critic: float | None = None
    # policy loss (§2, §5, §7, §8, §9, §14) -- component: policy_loss
    policy_loss: str = "ppo_clip"
    eps_low: float | None = None
    eps_high: float | None = None
    dual_clip_c: float | None = None
    delta: float | None = None
    clip_c: float | None = None
    clip_c_low: float | None = None
    clip_c_high: float | None = None
    cispo_cap_mode: str | None = None
    cispo_eps_low: float | None = None
    cispo_eps_high: float | None = None
    cispo_cap: float | None = None
    clip_cov_ratio: float | None = None
    clip_cov_lb: float | None = None
    clip_cov_ub: float | None = None
    kl_cov_ratio: float | None = None
    kl_cov_coef: float | None = None
    top_entropy_rho: float | None = None
    # aggregation (§1.5) -- component: loss_agg
    loss_agg: str = "token-mean"
    l_norm: float | None = None
    # KL (§16, §12)
    kl_coef: float = 0.0
    kl_estimator: str = "k3"
    kl_placement: str = "loss"  # loss | reward | reward_centered (T1)
    kl_controller: str = "fixed"  # fixed | adaptive
    kl_target: float = 0.1
    kl_horizon: float = 10000.0
    kl_center: str | None = None  # component: kl_placement reward_centered
    kl_scale: str | None = None  # component: kl_placement reward_centered
    reference: str = "frozen"  # none | frozen | ema | sync
    ref_ema_eta: float = 0.99
    ref_sync_every: int = 0
    # entropy (§12)
    entropy_coef: float = 0.0
    entropy_target: float | None = None
    entropy_coef_lr: float = 1e-3
    # sampler/learner correction (§10) -- component: is_correction
    is_correction: str | None = None
    is_c_max: float | None = None
    is_c_min: float | None = None
    # which sampled groups a step trains on (§5, §6), one of `GROUP_FILTERS` (group_filter.py):
    # all | dynamic_sampling (DAPO) | gpg (GPG resampling)
    group_filter: str = "all"
    # DAPO shaping and filtering (§5)
    filter_metric: str = "accuracy"
    max_gen_rounds: int = 10  # DAPO / verl max_num_gen_batches
    ds_oversample: float = 1.0  # prompts drawn per round = ceil(ds_oversample * prompts_per_step) (verl: 3)
    # batch not full after max_gen_rounds: "error" (docs/math.md §5, verl) | "partial" (opt-in)
    ds_shortfall: str = "error"
    overlong_filter: bool = False
    soft_overlong: bool = False
    overlong_cache: float = 0.2  # tokens, or a fraction of max_new_tokens when < 1 (paper: 4096/20480 = 0.2)
    overlong_factor: float = 1.0
    # critic (§2, §11, §13): the value loss's clip (its weight is compute_loss's vf_coef argument, for a loop that
    # shares one optimizer; grpokit's critic has an optimizer of its own)
    value_clip: float | None = 0.5
    nll_coef: float = 0.0
    # reward given to truncated responses instead of their score (ORZ: 0, T1: -1); None keeps the score
    truncated_reward: float | None = None
    # extra free-form notes (paper, defaults) shown by `grpokit recipes show`
    notes: dict[str, Any] = field(default_factory=dict)

    # field -> its valid values (None: unset). A string listed here is kept as that string when set, so
    # `algo.adv_scale=none` is the choice "none" (mean-only advantage), not unset (grpokit.config.coerce)
    CHOICES: ClassVar[dict[str, tuple[str | None, ...]]] = {
        "adv_scale": (None, "group", "batch", "none"),
        "filter_metric": ("accuracy", "reward"),
        "cispo_cap_mode": (None, "relative", "absolute"),
        "ds_shortfall": ("partial", "error"),
        "kl_center": (None, "batch", "group"),
        "kl_scale": (None, "std"),
    }

    @property
    def dynamic_sampling(self) -> bool:
        """DAPO dynamic sampling is the group filter (read-only: set algo.group_filter)."""
        return self.group_filter == "dynamic_sampling"

    @property
    def uses_critic(self) -> bool:
        """The advantage estimator declares a critic by taking `values` (GAE and its variants, docs/math.md §2, §11)."""
        return self.advantage in ADVANTAGES and "values" in ADVANTAGES.takes(self.advantage)

    @property
    def needs_reference(self) -> bool:
        return self.reference != "none" and self.kl_coef > 0

    # ------------------------------------------------------------------------------- components and binding

    def choices(self) -> dict[str, str | None]:
        """slot -> the name of the component this config chooses there (None: the slot is off)."""
        return {slot: choose(self) for slot, _, choose in SLOTS}

    def components(self, *, skip_unknown: bool = False) -> list[Component]:
        """The chosen components, each with its declared parameters. An unregistered name raises KeyError
        (`validate` turns it into a message with a did-you-mean), or is skipped with `skip_unknown`."""
        out = []
        for slot, reg, choose in SLOTS:
            name = choose(self)
            if name is not None and (name in reg or not skip_unknown):
                out.append(Component(slot, name, reg.params(name)))
        return out

    def kwargs(self, slot: str) -> dict[str, Any]:
        """The chosen `slot` component's declared parameters that are set; unset ones (None) are left to the
        component's own default. On a bound config every declared parameter is set."""
        name = self.choices()[slot]
        if name is None:
            return {}
        reg = next(r for s, r, _ in SLOTS if s == slot)
        return {k: v for k in reg.params(name) if (v := getattr(self, k)) is not None}

    def bound(self) -> dict[str, tuple[str, dict[str, Any]]]:
        """slot -> (component name, {parameter: value}) with unset parameters shown at their defaults."""
        out = {}
        for c in self.components():
            vals = {k: (getattr(self, k) if getattr(self, k) is not None else p.default) for k, p in c.params.items()}
            out[c.slot] = (c.name, vals)
        return out

    def takes(self, key: str) -> bool:
        """Whether `key` acts in this config: a run-level field, or a parameter of a chosen component (an
        autopilot or a detector can ask before recommending `algo.<key>`)."""
        if key not in {f.name for f in dataclasses.fields(self)}:
            return False
        return key not in component_keys() or any(key in c.params for c in self.components(skip_unknown=True))

    def check_params(self) -> None:
        """Raise ValueError for a set component parameter that no chosen component takes, or a required one
        that is missing; the message names the key, the component and the valid keys."""
        comps = self.components()
        used = {k for c in comps for k in c.params}
        for key, slots in component_keys().items():
            value = getattr(self, key)
            if value is not None and key not in used:
                raise ValueError(unused_message(key, value, slots, comps))
        for c in comps:
            for key, p in c.params.items():
                if p.required and getattr(self, key) is None:
                    raise ValueError(
                        f"algo.{key} is required by {c} and has no default: set algo.{key} "
                        f"({c} takes: {', '.join(c.params)})"
                    )

    def bind(self) -> AlgoConfig:
        """Validate, then bind each chosen component's parameters once: unset ones take the component's default
        (e.g. policy_loss=gspo gives eps_low 3e-4, eps_high 4e-4, docs/math.md §7). Returns self."""
        self.validate()
        for c in self.components():
            for key, p in c.params.items():
                if getattr(self, key) is None and not p.required:
                    setattr(self, key, p.default)
        self._check_ranges()
        return self

    def forget_switched(self, before: dict[str, str | None], keep: set[str]) -> None:
        """Unset the parameters an earlier layer (the recipe) set for a component that a later layer switched
        away from, except keys in `keep` (set by the later layer) and keys another chosen component takes.
        A recipe's eps_high=0.28 belongs to its ppo_clip, not to the gspo a user switches to."""
        now = self.choices()
        for slot, old in before.items():
            if old is None or now.get(slot) == old:
                continue
            reg = next(r for s, r, _ in SLOTS if s == slot)
            if old not in reg:
                continue
            others = {k for c in self.components(skip_unknown=True) if c.slot != slot for k in c.params}
            for key in reg.params(old):
                if key not in keep and key not in others:
                    setattr(self, key, None)

    def drop_unused(self) -> None:
        """Unset the component parameters no chosen component takes (lenient loading of an older saved config)."""
        used = {k for c in self.components(skip_unknown=True) for k in c.params}
        for key in component_keys():
            if key not in used:
                setattr(self, key, None)

    def validate(self) -> None:
        """Check every registry name, choice, component parameter and range; raise one ValueError naming the
        field, value and fix."""
        for slot, reg, _ in SLOTS:
            if slot in ("critic", "kl_placement"):  # switched on by other keys, not chosen by name
                continue
            value = getattr(self, slot)
            if value is None and slot == "is_correction":
                continue
            if value not in reg:
                try:
                    reg.get(value)
                except KeyError as e:
                    raise ValueError(f"algo.{slot}: {e.args[0]}") from None
        for name, registry in (
            ("reference", REFERENCES),
            ("kl_placement", KL_PLACEMENTS),
            ("kl_controller", KL_CONTROLLERS),
            ("group_filter", GROUP_FILTERS),
        ):
            if getattr(self, name) not in registry:
                raise ValueError(f"algo.{name}={getattr(self, name)!r} is not one of {tuple(registry.names())}")
        for name, allowed in self.CHOICES.items():
            if getattr(self, name) not in allowed:
                shown = tuple(a for a in allowed if a is not None)
                raise ValueError(f"algo.{name}={getattr(self, name)!r} is not one of {shown}")
        self.check_params()
        self._check_ranges()

    def _check_ranges(self) -> None:
        if self.loss_agg == "constant-norm" and self.l_norm is not None and self.l_norm <= 0:
            raise ValueError(f"algo.l_norm={self.l_norm} must be > 0 (e.g. max_new_tokens) for constant-norm (§4)")
        if self.dual_clip_c is not None and self.dual_clip_c <= 1:
            raise ValueError(f"algo.dual_clip_c={self.dual_clip_c} must be > 1 (docs/math.md §2), or null to disable")
        if self.top_entropy_rho is not None and not 0 <= self.top_entropy_rho <= 1:
            raise ValueError(f"algo.top_entropy_rho={self.top_entropy_rho} must lie in [0, 1]")
        if not 0 <= self.ref_ema_eta <= 1:
            raise ValueError(f"algo.ref_ema_eta={self.ref_ema_eta} must lie in [0, 1]")
        if self.max_gen_rounds < 1:
            raise ValueError(f"algo.max_gen_rounds={self.max_gen_rounds} must be >= 1")
        if self.ds_oversample < 1:
            raise ValueError(f"algo.ds_oversample={self.ds_oversample} must be >= 1 (a factor on prompts_per_step)")
        if (self.eps_low is not None and self.eps_low < 0) or (self.eps_high is not None and self.eps_high < 0):
            raise ValueError("algo.eps_low / algo.eps_high must be >= 0")
        if self.is_c_max is not None and self.is_c_max <= 0:
            raise ValueError(f"algo.is_c_max={self.is_c_max} must be > 0 (docs/math.md §10)")

    def params(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
