"""Each registered component declares its parameters (defaults from its paper); a recipe binds them once when
the config is resolved (issue 9, item 1). Spec sections: §2 (PPO dual-clip), §7 (GSPO clip 3e-4/4e-4), §8
(GMPO clip_c_low/high), §4 (constant-norm l_norm), §10 (IS bounds), §12 (T1 kl_scale), §15.3 (grpo_passk)."""

from __future__ import annotations

import argparse
import dataclasses

import pytest
import torch

from grpokit import algos
from grpokit.algos.algo_config import AlgoConfig
from grpokit.algos.components import component_keys
from grpokit.algos.registry import ADVANTAGES, AGGREGATIONS, IS_CORRECTIONS, POLICY_LOSSES, REQUIRED
from grpokit.config import ConfigError, build_config, config_from_dict, list_recipes

RECIPES = list(list_recipes())


def _loss_inputs(ratio: float = 1.01, n: int = 4, t: int = 3) -> algos.LossInputs:
    logp = torch.full((n, t), -1.0, dtype=torch.float64, requires_grad=True)
    old = logp.detach() - torch.log(torch.tensor(ratio, dtype=torch.float64))
    adv = torch.tensor([1.0, -1.0, 1.0, -1.0], dtype=torch.float64)
    return algos.LossInputs(logp=logp, mask=torch.ones(n, t, dtype=torch.float64), advantages=adv, old_logp=old)


# ------------------------------------------------------------------------------------------ declarations


def test_every_component_parameter_is_a_config_key_that_defaults_to_unset():
    """Every declared parameter of every registered component is reachable as `algo.<key>` (clip_c_low/high,
    passk_std_norm, kl_scale included) and defaults to None = unset, so the component's own default applies."""
    fields = {f.name: f for f in dataclasses.fields(AlgoConfig)}
    keys = component_keys()
    assert {"clip_c_low", "clip_c_high", "passk_std_norm", "kl_scale", "dual_clip_c", "l_norm"} <= set(keys)
    for key in keys:
        assert key in fields, key
        assert fields[key].default is None, key


def test_components_declare_paper_defaults():
    """§7 GSPO 3e-4/4e-4, §2 PPO 0.2, §8 GMPO 0.4, §14.1 Clip-Cov 1.0, §10 C = 2, §4 l_norm required."""
    assert {k: p.default for k, p in POLICY_LOSSES.params("gspo").items()} == {"eps_low": 3e-4, "eps_high": 4e-4}
    assert POLICY_LOSSES.params("ppo_clip")["eps_low"].default == 0.2
    assert POLICY_LOSSES.params("gmpo")["clip_c"].default == 0.4
    assert POLICY_LOSSES.params("clip_cov")["eps_low"].default == 1.0
    assert "generator" not in POLICY_LOSSES.params("clip_cov")  # a tensor input, not a parameter
    assert IS_CORRECTIONS.params("token_truncate")["is_c_max"].default == 2.0
    assert AGGREGATIONS.params("constant-norm")["l_norm"].default is REQUIRED
    assert AGGREGATIONS.params("token-mean") == {}
    assert set(ADVANTAGES.params("gae")) == {"gamma", "lam", "adv_whiten"}  # mask/values/token_rewards are inputs


@pytest.mark.parametrize("registry", [ADVANTAGES, POLICY_LOSSES, AGGREGATIONS, IS_CORRECTIONS])
def test_every_component_docstring_cites_its_spec_section(registry):
    for name in registry.names():
        assert "§" in (registry.get(name).__doc__ or ""), name


# ------------------------------------------------------------------------------------------ switching


@pytest.mark.parametrize("recipe", RECIPES)
def test_switching_to_gspo_on_any_recipe_gives_gspo_clip(recipe):
    """§7: `--set algo.policy_loss=gspo` gives GSPO's 3e-4 / 4e-4 whatever clip the recipe set for its own loss
    (grpo's 0.2, dapo's 0.28, clip_cov's 1.0, ppo's dual_clip_c 3 is dropped with its ppo_clip)."""
    a = build_config(recipe, overrides=["algo.policy_loss=gspo"]).algo
    assert (a.eps_low, a.eps_high) == (3e-4, 4e-4)
    assert a.bound()["policy_loss"] == ("gspo", {"eps_low": 3e-4, "eps_high": 4e-4})
    assert a.dual_clip_c is None


def test_gspo_switch_on_grpo_clips_at_gspo_width_in_the_loss():
    """A sequence ratio of 1.01 is inside GRPO's 0.2 clip but far outside GSPO's 4e-4: every positive-advantage
    sequence is clipped once the switch is made (it was 0 with the name-matched 0.2)."""
    grpo = build_config("grpo").algo
    gspo = build_config("grpo", overrides=["algo.policy_loss=gspo"]).algo
    _, m_grpo = algos.compute_loss(_loss_inputs(), grpo)
    _, m_gspo = algos.compute_loss(_loss_inputs(), gspo)
    assert m_grpo["actor/clipfrac_high"] == 0.0
    assert m_gspo["actor/clipfrac_high"] == 0.5  # the 2 of 4 sequences with A > 0


def test_user_values_win_over_component_defaults_and_recipe_values_stay():
    a = build_config("grpo", overrides=["algo.policy_loss=gspo", "algo.eps_high=1e-3"]).algo
    assert (a.eps_low, a.eps_high) == (3e-4, 1e-3)
    assert build_config("dapo").algo.eps_high == 0.28  # the recipe's value for its own component
    assert build_config("gmpo").algo.adv_eps == 1e-8
    assert build_config("ppo").algo.dual_clip_c == 3.0
    # a recipe's values for a component the user switched away from are dropped, not errors
    a = build_config("dapo_clip_cov", overrides=["algo.policy_loss=ppo_clip"]).algo
    assert (a.eps_low, a.eps_high, a.clip_cov_ratio) == (0.2, None, None)


def test_library_use_gets_the_component_defaults_without_bind():
    """`compute_loss(inputs, AlgoConfig(policy_loss="gspo"))` from a user's own loop clips at GSPO's width."""
    _, m = algos.compute_loss(_loss_inputs(), AlgoConfig(policy_loss="gspo"))
    assert m["actor/clipfrac_high"] == 0.5


# ------------------------------------------------------------------------------------------ errors


@pytest.mark.parametrize("loss", ["gspo", "cispo", "clip_cov"])
def test_dual_clip_c_with_a_loss_that_does_not_take_it_is_an_error(loss):
    """§2 dual-clip is ppo_clip's; with gspo/cispo/clip_cov it was silently ignored."""
    with pytest.raises(ConfigError) as e:
        build_config("grpo", overrides=[f"algo.policy_loss={loss}", "algo.dual_clip_c=3"])
    msg = str(e.value)
    assert "algo.dual_clip_c=3.0" in msg and f"policy_loss {loss!r}" in msg and "ppo_clip" in msg
    assert ", ".join(POLICY_LOSSES.params(loss)) in msg  # the valid keys of the chosen loss


def test_switching_ppo_to_gspo_drops_the_recipes_dual_clip_but_not_the_users():
    assert build_config("ppo", overrides=["algo.policy_loss=gspo"]).algo.dual_clip_c is None
    with pytest.raises(ConfigError, match="dual_clip_c"):
        build_config("ppo", overrides=["algo.policy_loss=gspo", "algo.dual_clip_c=3"])


@pytest.mark.parametrize(
    ("override", "needles"),
    [
        ("algo.is_c_max=3", ["algo.is_c_max=3.0", "no is_correction component is chosen", "token_truncate"]),
        ("algo.gamma=0.9", ["algo.gamma=0.9", "advantage 'grpo' takes adv_scale, adv_eps", "'gae'"]),
        ("algo.lam_critic=0.9", ["algo.lam_critic=0.9", "critic 'value_targets'"]),
        ("algo.clip_c_low=0.1", ["algo.clip_c_low=0.1", "policy_loss 'ppo_clip'", "'gmpo'"]),
        ("algo.kl_scale=std", ["algo.kl_scale='std'", "kl_placement 'reward_centered'"]),
        ("algo.passk_std_norm=false", ["passk_std_norm", "'grpo_passk'"]),
    ],
)
def test_a_key_the_chosen_components_do_not_use_is_an_error(override, needles):
    with pytest.raises(ConfigError) as e:
        build_config("grpo", overrides=[override])
    for needle in needles:
        assert needle in str(e.value), (needle, str(e.value))
    assert "Valid component keys here: adv_eps, adv_scale, delta, dual_clip_c, eps_high, eps_low" in str(e.value)


def test_unknown_key_suggests_the_closest():
    with pytest.raises(ConfigError, match="Did you mean 'algo.clip_c_low'"):
        build_config("gmpo", overrides=["algo.clip_c_lo=0.1"])
    with pytest.raises(ConfigError, match="Did you mean 'gspo'"):
        build_config("grpo", overrides=["algo.policy_loss=gspoo"])


def test_missing_required_parameter_is_an_error_naming_it():
    """§4: constant-norm's l_norm has no default; a recipe fills it from rollout.max_new_tokens."""
    with pytest.raises(ValueError, match=r"algo.l_norm is required by loss_agg 'constant-norm'"):
        AlgoConfig(loss_agg="constant-norm").bind()
    assert build_config("grpo", overrides=["algo.loss_agg=constant-norm"]).algo.l_norm == 48.0


# ------------------------------------------------------------------------------------------ reachability


def test_clip_c_low_and_high_reach_gmpo():
    """§8: c_low / c_high of the log-space clip, unreachable before, now bound and passed to the loss."""
    a = build_config("gmpo", overrides=["algo.clip_c_low=0.1", "algo.clip_c_high=0.2"]).algo
    assert a.bound()["policy_loss"] == ("gmpo", {"clip_c": 0.4, "clip_c_low": 0.1, "clip_c_high": 0.2})
    inputs = _loss_inputs(ratio=1.3)
    got, _ = algos.compute_loss(inputs, a)
    want_tok, _ = algos.get_policy_loss("gmpo")(
        inputs.logp, inputs.old_logp, inputs.advantages, inputs.mask, clip_c=0.4, clip_c_low=0.1, clip_c_high=0.2
    )
    default_tok, _ = algos.get_policy_loss("gmpo")(inputs.logp, inputs.old_logp, inputs.advantages, inputs.mask)
    want = algos.aggregate(want_tok, inputs.mask, "seq-mean-token-mean")
    default = algos.aggregate(default_tok, inputs.mask, "seq-mean-token-mean")
    assert float(got.detach()) == pytest.approx(float(want.detach()), abs=1e-12)
    assert float(got.detach()) != pytest.approx(float(default.detach()))


def test_passk_std_norm_and_kl_scale_are_reachable():
    a = build_config("grpo", overrides=["algo.advantage=grpo_passk", "algo.passk_std_norm=false"]).algo
    assert a.bound()["advantage"] == ("grpo_passk", {"passk_std_norm": False, "adv_eps": 1e-6})
    rewards, groups = torch.tensor([1.0, 0.0, 0.5, 0.0]), torch.tensor([0, 0, 0, 0])
    adv = algos.compute_advantages(a, rewards, groups, mask=torch.ones(4, 2), valid=torch.ones(4, dtype=torch.bool))
    assert adv.tolist() == pytest.approx([0.5, 0.0, 0.0, 0.0])  # R_(1) - R_(2), not divided by the std (§15.3)
    t1 = build_config("t1", overrides=["algo.kl_scale=std"]).algo
    assert t1.bound()["kl_placement"] == ("reward_centered", {"kl_center": "batch", "kl_scale": "std"})
    with pytest.raises(ConfigError, match="algo.kl_scale='var' is not one of"):
        build_config("t1", overrides=["algo.kl_scale=var"])


# ------------------------------------------------------------------------------------------ round trips


@pytest.mark.parametrize("recipe", RECIPES)
def test_saved_config_round_trips(recipe):
    cfg = build_config(recipe)
    assert config_from_dict(cfg.to_dict()).to_dict() == cfg.to_dict()


def test_a_config_saved_before_binding_still_loads():
    """Run directories written before this change hold every algo key (eps_low 0.2 for cispo, ...)."""
    data = build_config("cispo").to_dict()
    data["algo"].update(eps_low=0.2, adv_eps=1e-6, gamma=1.0, lam=1.0, is_c_max=2.0, kl_center="batch")
    a = config_from_dict(data).algo
    assert a.eps_low is None and a.is_c_max is None and a.cispo_eps_high == 0.2


def test_takes_tells_whether_a_key_acts():
    a = build_config("cispo").algo
    assert a.takes("cispo_eps_high") and a.takes("entropy_coef")
    assert not a.takes("eps_high") and not a.takes("no_such_key")


def test_readme_public_api_still_works():
    g = torch.Generator().manual_seed(0)
    rewards, group_ids = torch.tensor([1.0, 0.0, 1.0, 1.0]), torch.tensor([0, 0, 1, 1])
    logp = -torch.rand(4, 3, generator=g, dtype=torch.float64).requires_grad_(True)
    old_logp, mask = logp.detach() + 0.05, torch.ones(4, 3, dtype=torch.float64)
    adv = algos.get_advantage("grpo")(rewards, group_ids, adv_scale="group", adv_eps=1e-6)
    loss_tok, metrics = algos.get_policy_loss("ppo_clip")(logp, old_logp, adv, mask, eps_low=0.2, eps_high=0.28)
    loss = algos.aggregate(loss_tok, mask, "token-mean")
    assert algos.kl_estimate(logp, old_logp, "k3").shape == (4, 3) and loss.requires_grad and "clipfrac_high" in metrics
    assert set(algos.list_methods()) == {
        "advantage",
        "policy_loss",
        "aggregation",
        "kl_estimator",
        "is_correction",
        "group_filter",
    }


# ------------------------------------------------------------------------------------------ recipes show


def test_recipes_show_gspo_prints_components_with_bound_params(capsys):
    from grpokit.cli.main import cmd_recipes

    assert cmd_recipes(argparse.Namespace(action="show", name="gspo")) == 0
    out = capsys.readouterr().out
    assert "components:\n  advantage:\n    grpo: {adv_scale: group, adv_eps: 1.0e-06}\n" in out
    assert "  policy_loss:\n    gspo: {eps_low: 0.0003, eps_high: 0.0004}\n" in out
    assert "  loss_agg:\n    seq-mean-token-mean: {}\n" in out
    assert "mini_batches: 4" in out
    algo_section = out.split("\nalgo:\n", 1)[1].split("\ntrain:\n", 1)[0]
    assert "eps_low" not in algo_section and "dual_clip_c" not in algo_section  # shown once, under components


def test_uses_critic_is_what_the_estimator_declares(monkeypatch: pytest.MonkeyPatch) -> None:
    """An estimator that takes `values` needs a critic, whatever its name; one that does not, does not."""
    declared = {name: "values" in ADVANTAGES.takes(name) for name in ADVANTAGES.names()}
    assert {n for n, v in declared.items() if v} == {"gae", "length_adaptive_gae", "vapo_gae"}
    for name, wants in declared.items():
        assert AlgoConfig(advantage=name).uses_critic is wants, name

    def baseline(rewards: torch.Tensor, group_ids: torch.Tensor, *, values: torch.Tensor) -> torch.Tensor:
        return rewards - values

    monkeypatch.setitem(ADVANTAGES._items, "value_baseline", baseline)
    monkeypatch.setitem(ADVANTAGES._primary, "value_baseline", "value_baseline")
    assert AlgoConfig(advantage="value_baseline").uses_critic
    assert not AlgoConfig(advantage="no_such_estimator").uses_critic
