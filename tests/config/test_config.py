"""Config values keep their meaning through every layer: the word `none` is a choice where a field's choices name
it (`algo.adv_scale=none`: Dr. GRPO's mean-only advantage, docs/math.md §4), and null (unset) elsewhere."""

from __future__ import annotations

import pytest
import torch

from grpokit.algos.algo_config import AlgoConfig
from grpokit.algos.compose import compute_advantages
from grpokit.config import ConfigError, build_config, config_from_dict

REWARDS = torch.tensor([1.0, 0.0, 0.0, 0.0, 1.0, 1.0, 0.0, 1.0])
GROUPS = torch.tensor([0, 0, 0, 0, 1, 1, 1, 1])


def _group_centred(rewards: torch.Tensor, groups: torch.Tensor) -> torch.Tensor:
    means = torch.stack([rewards[groups == g].mean() for g in groups.unique()])
    return rewards - means[groups]


def test_adv_scale_none_survives_an_override_and_leaves_the_advantage_unscaled():
    cfg = build_config("grpo", overrides=["algo.adv_scale=none"])
    assert cfg.algo.adv_scale == "none"
    assert cfg.algo.bound()["advantage"] == ("grpo", {"adv_scale": "none", "adv_eps": 1e-6})
    adv = compute_advantages(cfg.algo, REWARDS, GROUPS)
    # group 0: mean 0.25 -> [0.75, -0.25, -0.25, -0.25]; group 1: mean 0.75 -> [0.25, 0.25, -0.75, 0.25]
    expected = torch.tensor([0.75, -0.25, -0.25, -0.25, 0.25, 0.25, -0.75, 0.25])
    assert torch.allclose(adv, expected)
    assert torch.allclose(adv, _group_centred(REWARDS, GROUPS))
    scaled = compute_advantages(build_config("grpo").algo, REWARDS, GROUPS)
    assert not torch.allclose(scaled, adv)  # the default ("group") divides by the group std: 0.75 / 0.5 = 1.5
    assert scaled[0].item() == pytest.approx(0.75 / 0.5, rel=1e-5)


def test_adv_scale_none_survives_a_config_file_direct_values_and_a_saved_config(tmp_path):
    f = tmp_path / "c.yaml"
    f.write_text("algo:\n  adv_scale: none\n")
    assert build_config("grpo", config_file=str(f)).algo.adv_scale == "none"
    assert build_config("grpo", **{"algo.adv_scale": "none"}).algo.adv_scale == "none"
    saved = build_config("grpo", overrides=["algo.adv_scale=none"]).to_dict()
    assert config_from_dict(saved).algo.adv_scale == "none"  # resume keeps Dr. GRPO's estimator


@pytest.mark.parametrize("key", [k for k, allowed in AlgoConfig.CHOICES.items() if "none" in allowed])
def test_every_field_whose_choices_name_none_keeps_the_string(key):
    assert key in {"reference", "adv_scale"}  # today's fields with a "none" choice
    cfg = build_config("grpo", overrides=[f"algo.{key}=none", "algo.kl_coef=0"])  # no reference: no KL term
    assert getattr(cfg.algo, key) == "none"


@pytest.mark.parametrize(
    ("override", "field"),
    [("data.answer_key=none", "answer_key"), ("data.eval_size=none", "eval_size"), ("data.subset=null", "subset")],
)
def test_none_and_null_still_unset_an_optional_field_without_that_choice(override, field):
    cfg = build_config("grpo", overrides=[override])
    assert getattr(cfg.data, field) is None


def test_an_unset_optional_choice_field_still_takes_the_component_default():
    assert build_config("grpo", overrides=["algo.adv_scale=null"]).algo.adv_scale == "group"
    with pytest.raises(ConfigError, match=r"algo.adv_scale='std' is not one of \('group', 'batch', 'none'\)"):
        build_config("grpo", overrides=["algo.adv_scale=std"])


def test_vf_coef_is_not_a_config_key() -> None:
    """The trainer's critic has its own AdamW, on which a constant value-loss weight has no effect: algo.vf_coef is
    no key (compute_loss takes vf_coef for a loop with one optimizer); the PPO-family recipes train their critic."""
    with pytest.raises(ConfigError, match=r"unknown config key 'algo.vf_coef'"):
        build_config("ppo", overrides=["algo.vf_coef=0.5"])
    for recipe in ("ppo", "vapo", "orz"):
        assert build_config(recipe).algo.uses_critic, recipe


# ------------------------------------------------------------------------------------- renamed keys and registries


@pytest.mark.parametrize(
    ("old", "hint"),
    [
        ("train.epochs=3", " Did you mean 'train.ppo_epochs'?"),
        ("algo.dynamic_sampling=true", ""),  # nothing in algo is close: no hint rather than a wrong one
        ("train.keep_checkpoints=1", ""),
    ],
)
def test_grpokits_own_old_key_names_are_unknown_keys(old: str, hint: str) -> None:
    """grpokit's own renamed keys are not translated (0.1.0 has no users to keep them for): the old name is an
    unknown key, and a did-you-mean is offered only where a key of the same section is close by its own name."""
    with pytest.raises(ConfigError) as e:
        build_config("grpo", overrides=[old])
    assert str(e.value) == f"unknown config key {old.split('=')[0]!r}.{hint}"


def test_gpg_threshold_alone_does_not_pick_the_group_filter() -> None:
    """algo.gpg_threshold is the gpg filter's parameter, not a switch: with the default filter it has no effect
    and the config says so; the gpg recipe names its filter."""
    cfg = build_config("grpo", overrides=["algo.gpg_threshold=0.5"])
    assert cfg.algo.group_filter == "all"
    assert any("algo.gpg_threshold=0.5 has no effect" in w and "group_filter=gpg" in w for w in cfg.warnings)
    assert build_config("gpg").algo.group_filter == "gpg"


def test_gpg_threshold_with_another_group_filter_is_warned_not_ignored() -> None:
    """algo.gpg_threshold is read by the gpg filter only: with dynamic sampling it would do nothing, silently."""
    cfg = build_config("dapo", overrides=["algo.gpg_threshold=0.5"])
    assert cfg.algo.group_filter == "dynamic_sampling"
    assert any("algo.gpg_threshold=0.5 has no effect" in w and "group_filter=gpg" in w for w in cfg.warnings)
    assert not [w for w in build_config("gpg").warnings if "gpg_threshold" in w]


def test_agent_settings_on_a_single_turn_run_are_warned_not_ignored() -> None:
    """agent.* shapes episodes; without tools, an environment or a task that brings tools, the run is single-turn
    and the settings would do nothing, silently. With any of the three they are used and not warned about."""
    cfg = build_config("grpo", overrides=["agent.max_turns=2", "agent.tool_timeout_s=1"])
    [w] = [w for w in cfg.warnings if "agent." in w]
    assert "agent.max_turns=2, agent.tool_timeout_s=1.0 has no effect: the run is single-turn" in w
    assert "agent.tools" in w and "add2-tool" in w
    for on in (["agent.tools=[calculator]"], ["data.task=add2-tool"], ["agent.environment=tests.toy_envs:Echo"]):
        assert not [w for w in build_config("grpo", overrides=["agent.max_turns=2", *on]).warnings if "agent." in w]
    assert not [w for w in build_config("grpo").warnings if "agent." in w]
