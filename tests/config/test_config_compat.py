"""TRL GRPOConfig and verl configs read as grpokit configs, checked by meaning: the translated config's advantages and
loss equal TRL's formulas (written here from TRL's documentation) on random tensors; batch sizes and step counts
convert between completions and prompts and between optimizer steps and rollout steps; every foreign key not
mapped is named in one message; did-you-mean knows TRL's and verl's names; `grpokit config from-trl/from-verl`
write files that train as they are."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml

from grpokit.algos.compose import LossInputs, compute_advantages, compute_loss
from grpokit.cli.main import main
from grpokit.config import Config, ConfigError, all_keys, build_config
from grpokit.config.compat import detect, translate

KEYS = set(all_keys(Config()))


def trl_config(tmp_path: Path, body: dict, name: str = "trl_grpo.yaml") -> Path:
    p = tmp_path / name
    p.write_text(yaml.safe_dump(body))
    return p


# ------------------------------------------------------------------------------- semantics against TRL's formulas


def _trl_loss(logp, old, ref, adv, mask, *, loss_type, eps, eps_high, beta, max_len):
    """TRL's documented per-token GRPO loss and its loss_type aggregations (TRL 1.x docs)."""
    ratio = torch.exp(logp - old)
    a = adv[:, None]
    per_tok = -torch.minimum(ratio * a, torch.clamp(ratio, 1 - eps, 1 + eps_high) * a)
    if beta:
        d = ref - logp
        per_tok = per_tok + beta * (torch.exp(d) - d - 1)
    if loss_type == "grpo":
        return ((per_tok * mask).sum(1) / mask.sum(1)).mean()
    if loss_type in ("dapo", "bnpo"):
        return (per_tok * mask).sum() / mask.sum()
    return (per_tok * mask).sum() / (mask.shape[0] * max_len)  # dr_grpo


@pytest.mark.parametrize("loss_type", ["grpo", "dapo", "bnpo", "dr_grpo"])
@pytest.mark.parametrize("beta", [0.0, 0.04])
def test_translated_loss_equals_trls_formula(loss_type: str, beta: float, tmp_path: Path) -> None:
    body = {"loss_type": loss_type, "beta": beta, "epsilon": 0.2, "epsilon_high": 0.28, "max_completion_length": 7}
    cfg = build_config("grpo", config_file=str(trl_config(tmp_path, body)))
    g = torch.Generator().manual_seed(0)
    n, t = 8, 7
    logp = -torch.rand(n, t, generator=g) * 3
    old = logp + 0.3 * torch.randn(n, t, generator=g)  # ratios well outside [0.8, 1.28]: the clips matter
    ref = logp + 0.2 * torch.randn(n, t, generator=g)
    mask = (torch.arange(t)[None, :] < torch.randint(2, t + 1, (n, 1), generator=g)).float()
    rewards = torch.rand(n, generator=g)
    groups = torch.arange(n) // 4
    adv = compute_advantages(cfg.algo, rewards, groups)
    mean = torch.stack([rewards[groups == i].mean() for i in groups])
    std = torch.stack([rewards[groups == i].std() for i in groups])
    torch.testing.assert_close(adv, (rewards - mean) / (std + 1e-4))  # TRL: std over the group, epsilon 1e-4
    loss, _ = compute_loss(LossInputs(logp=logp, mask=mask, advantages=adv, old_logp=old, ref_logp=ref), cfg.algo)
    want = _trl_loss(logp, old, ref, adv, mask, loss_type=loss_type, eps=0.2, eps_high=0.28, beta=beta, max_len=t)
    torch.testing.assert_close(loss, want)
    assert cfg.algo.needs_reference == (beta > 0)  # beta 0 (TRL's default) keeps no reference model


def test_scale_rewards_none_is_mean_only_and_batch_scales_by_batch_std(tmp_path: Path) -> None:
    rewards = torch.tensor([1.0, 0.0, 0.0, 0.0, 1.0, 1.0, 0.0, 1.0])
    groups = torch.arange(8) // 4
    none = build_config("grpo", config_file=str(trl_config(tmp_path, {"scale_rewards": False})))
    mean = torch.tensor([0.25] * 4 + [0.75] * 4)
    torch.testing.assert_close(compute_advantages(none.algo, rewards, groups), rewards - mean)
    batch = build_config("grpo", config_file=str(trl_config(tmp_path, {"scale_rewards": "batch"}, "b.yaml")))
    torch.testing.assert_close(
        compute_advantages(batch.algo, rewards, groups), (rewards - mean) / (rewards.std() + 1e-4)
    )


def test_sequence_importance_sampling_is_gspo_and_cispo_caps_at_epsilon_high(tmp_path: Path) -> None:
    gspo = build_config(
        "grpo",
        config_file=str(
            trl_config(tmp_path, {"importance_sampling_level": "sequence", "epsilon": 3e-4, "epsilon_high": 4e-4})
        ),
    )
    assert (gspo.algo.policy_loss, gspo.algo.eps_low, gspo.algo.eps_high) == ("gspo", 3e-4, 4e-4)
    cispo = build_config("grpo", config_file=str(trl_config(tmp_path, {"loss_type": "cispo", "epsilon_high": 5.0})))
    assert (cispo.algo.policy_loss, cispo.algo.cispo_cap_mode, cispo.algo.cispo_cap) == ("cispo", "absolute", 5.0)
    assert cispo.algo.loss_agg == "token-mean"


# ------------------------------------------------------------------------------------- batch sizes and steps


@pytest.mark.parametrize(
    ("body", "want"),
    [
        # TRL's defaults: 8 completions per device step, 8 per prompt -> 1 prompt x 8, one optimizer step
        ({"learning_rate": 1e-6}, {"prompts_per_step": 1, "group_size": 8, "mini_batches": 1, "micro": 8}),
        # accumulation: one generation of 8 x 2 = 16 completions = 4 prompts x 4, one optimizer step
        (
            {"per_device_train_batch_size": 8, "gradient_accumulation_steps": 2, "num_generations": 4},
            {"prompts_per_step": 4, "group_size": 4, "mini_batches": 1, "micro": 8},
        ),
        # steps_per_generation 4: one generation of 32 feeds 4 optimizer steps of 8 (off-policy mini-batches)
        (
            {"per_device_train_batch_size": 8, "steps_per_generation": 4, "num_generations": 8, "max_steps": 100},
            {"prompts_per_step": 4, "group_size": 8, "mini_batches": 4, "micro": 8, "steps": 25},
        ),
        # num_iterations 2 (mu): each rollout trains twice, so 100 optimizer steps are 50 grpokit steps
        (
            {"num_generations": 4, "num_iterations": 2, "max_steps": 100, "save_steps": 10},
            {"prompts_per_step": 2, "group_size": 4, "mini_batches": 1, "epochs": 2, "steps": 50, "save_every": 5},
        ),
    ],
)
def test_batch_sizes_count_completions_and_steps_count_optimizer_steps(body: dict, want: dict, tmp_path: Path) -> None:
    cfg = build_config("grpo", config_file=str(trl_config(tmp_path, body)))
    got = {
        "prompts_per_step": cfg.rollout.prompts_per_step,
        "group_size": cfg.rollout.group_size,
        "mini_batches": cfg.train.mini_batches,
        "micro": cfg.train.micro_batch_size,
        "epochs": cfg.train.ppo_epochs,
        "steps": cfg.train.steps,
        "save_every": cfg.train.save_every,
    }
    assert {k: got[k] for k in want} == want
    # completions per optimizer step are the same in both: TRL's per_device x accumulation
    per_opt = cfg.rollout.prompts_per_step * cfg.rollout.group_size / cfg.train.mini_batches
    assert per_opt == body.get("per_device_train_batch_size", 8) * body.get("gradient_accumulation_steps", 1)


def test_generation_batch_not_a_multiple_of_num_generations_is_one_clear_error(tmp_path: Path) -> None:
    path = trl_config(tmp_path, {"per_device_train_batch_size": 6, "num_generations": 4})
    with pytest.raises(ConfigError, match="not a multiple of num_generations=4"):
        build_config("grpo", config_file=str(path))


# ---------------------------------------------------------------------------------- one message, every key


def test_one_message_names_unmapped_ignored_and_defaults(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    body = {
        "learning_rate": 2e-6,
        "num_generations": 4,
        "per_device_train_batch_size": 4,
        "use_liger_kernel": True,
        "min_p": 0.05,
        "logging_steps": 5,
        "push_to_hub": False,
        "report_to": "none",
    }
    cfg = build_config("grpo", config_file=str(trl_config(tmp_path, body)))
    err = capsys.readouterr().err
    assert err.count("is a TRL GRPOConfig file") == 1  # one message
    lines = err.splitlines()
    unsupported = next(ln for ln in lines if "not supported" in ln)
    assert "use_liger_kernel=True" in unsupported and "min_p=0.05" in unsupported
    ignored = next(ln for ln in lines if "ignored" in ln)
    assert "logging_steps=5" in ignored and "push_to_hub=False" in ignored
    defaults = next(ln for ln in lines if "defaults used" in ln)
    assert "beta=0.0" in defaults and "loss_type='dapo'" in defaults and "max_completion_length=512" in defaults
    # TRL's defaults, not grpokit's grpo recipe values: no KL, token-mean, TRL's adam_beta2 and completion cap
    assert (cfg.algo.kl_coef, cfg.algo.loss_agg, cfg.train.adam_beta2) == (0.0, "token-mean", 0.999)
    assert (cfg.rollout.max_new_tokens, cfg.train.lr, cfg.train.report_to, cfg.train.seed) == (512, 2e-6, [], 42)


def test_every_key_of_a_real_trl_grpoconfig_is_accounted_for(tmp_path: Path) -> None:
    """A file written from TRL's own GRPOConfig (the keys a user's YAML uses): each key is mapped, named as not
    supported or named as ignored, and the values reach grpokit."""
    from trl import GRPOConfig

    keys = ["learning_rate", "num_generations", "per_device_train_batch_size", "beta", "epsilon", "epsilon_high"]
    keys += ["loss_type", "max_completion_length", "temperature", "scale_rewards", "importance_sampling_level"]
    keys += [
        "gradient_accumulation_steps",
        "num_iterations",
        "max_steps",
        "logging_steps",
        "seed",
        "top_entropy_quantile",
    ]
    real = GRPOConfig(
        output_dir=str(tmp_path / "o"), learning_rate=3e-6, num_generations=4, per_device_train_batch_size=8,
        beta=0.02, epsilon_high=0.28, loss_type="grpo", max_completion_length=64, temperature=0.9, max_steps=20,
        top_entropy_quantile=0.2, use_cpu=True, bf16=False,
    ).to_dict()  # fmt: skip
    body = {k: real[k] for k in keys}
    t = translate(body, "x.yaml", KEYS)
    assert t is not None and detect(body) == "trl"
    assert set(body) <= set(t.mapped) | set(t.unsupported) | set(t.ignored)
    assert set(t.mapped) - set(body) == set(t.defaults)  # the rest of what was mapped are TRL defaults, named
    assert t.keys["train.lr"] == 3e-6 and t.keys["algo.kl_coef"] == 0.02 and t.keys["algo.eps_high"] == 0.28
    assert t.keys["rollout.temperature"] == 0.9 and t.keys["algo.top_entropy_rho"] == 0.2
    assert t.keys["rollout.prompts_per_step"] == 2 and t.keys["train.steps"] == 20


# -------------------------------------------------------------------------------------------- did-you-mean


@pytest.mark.parametrize(
    ("override", "needle"),
    [
        ("learning_rate=1e-5", "Did you mean 'train.lr'? ('learning_rate' is TRL's name)"),
        ("train.learning_rate=1e-5", "Did you mean 'train.lr'?"),
        ("num_generations=4", "Did you mean 'rollout.group_size'?"),
        ("beta=0.04", "Did you mean 'algo.kl_coef'? ('beta' is TRL's name: TRL's beta is the KL coefficient)"),
        ("actor_rollout_ref.actor.clip_ratio_high=0.28", "Did you mean 'algo.eps_high'? ('actor_rollout_ref"),
        ("algo.clip_ratio_high=0.28", "Did you mean 'algo.eps_high'? ('clip_ratio_high' is verl's name)"),
        ("actor_rollout_ref.rollout.n=8", "Did you mean 'rollout.group_size'?"),
        ("algo.eps_hgh=0.3", "Did you mean 'algo.eps_high'?"),  # grpokit's own closest key still works
    ],
)
def test_did_you_mean_knows_trl_and_verl_names(override: str, needle: str) -> None:
    with pytest.raises(ConfigError) as e:
        build_config("grpo", overrides=[override])
    assert needle in str(e.value)


def test_did_you_mean_on_the_command_line() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "grpokit.cli", "train", "--model", "tiny", "--set", "train.learning_rate=1e-5"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 2 and "Did you mean 'train.lr'?" in out.stderr and "Traceback" not in out.stderr


# ------------------------------------------------------------------------------------ config from-trl/verl


def test_from_trl_writes_a_file_that_builds_the_same_config(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    body = {"learning_rate": 1e-5, "num_generations": 4, "beta": 0.04, "loss_type": "dr_grpo", "max_steps": 30}
    body |= {"max_completion_length": 32, "logging_steps": 1}
    src = trl_config(tmp_path, body)
    out = tmp_path / "grpokit.yaml"
    assert main(["config", "from-trl", str(src), "--out", str(out)]) == 0
    text = out.read_text()
    assert "kl_coef: 0.04  # beta" in text and "group_size: 4  # num_generations" in text
    assert "# ignored: logging_steps=1" in text
    direct = build_config("grpo", config_file=str(src)).to_dict()
    written = build_config("grpo", config_file=str(out)).to_dict()
    assert written == direct
    assert written["algo"]["loss_agg"] == "constant-norm" and written["algo"]["l_norm"] == 32.0


def test_from_verl_reads_dotted_overrides(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    overrides = [
        "algorithm.adv_estimator=grpo",
        "data.train_batch_size=16",
        "actor_rollout_ref.actor.ppo_mini_batch_size=4",
        "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=8",
        "actor_rollout_ref.rollout.n=8",
        "actor_rollout_ref.actor.clip_ratio_high=0.28",
        "actor_rollout_ref.actor.use_kl_loss=True",
        "actor_rollout_ref.actor.kl_loss_coef=0.001",
        "actor_rollout_ref.actor.kl_loss_type=low_var_kl",
        "actor_rollout_ref.rollout.gpu_memory_utilization=0.6",
        "trainer.total_training_steps=40",
        "+trainer.val_before_train=False",
    ]
    out = tmp_path / "from_verl.yaml"
    assert main(["config", "from-verl", *overrides, "--out", str(out)]) == 0
    cfg = build_config("grpo", config_file=str(out))
    # train_batch_size and ppo_mini_batch_size count prompts: 16 prompts in 4 mini-batches of 4 prompts x 8
    assert (cfg.rollout.prompts_per_step, cfg.rollout.group_size, cfg.train.mini_batches) == (16, 8, 4)
    assert cfg.train.micro_batch_size == 8 and cfg.train.steps == 40
    # verl's vanilla loss always dual-clips at clip_ratio_c (default 3); clip_ratio (0.2) is the lower clip
    assert (cfg.algo.eps_low, cfg.algo.eps_high, cfg.algo.dual_clip_c) == (0.2, 0.28, 3.0)
    assert (cfg.algo.kl_coef, cfg.algo.kl_estimator, cfg.algo.kl_placement) == (0.001, "low_var_kl", "loss")
    assert cfg.train.weight_decay == 0.01  # verl's AdamW default, not grpokit's 0
    err = capsys.readouterr().err
    assert "gpu_memory_utilization=0.6" in err and "val_before_train=False" in err


def test_verl_hydra_yaml_as_config(tmp_path: Path) -> None:
    body = {
        "algorithm": {"adv_estimator": "grpo", "norm_adv_by_std_in_grpo": False, "use_kl_in_reward": True,
                      "kl_penalty": "k1", "kl_ctrl": {"kl_coef": 0.002}},
        "actor_rollout_ref": {"actor": {"loss_agg_mode": "seq-mean-token-sum-norm", "optim": {"lr": 3e-6}},
                              "rollout": {"n": 4}},
        "data": {"max_response_length": 16, "train_files": "train.parquet"},
    }  # fmt: skip
    cfg = build_config("grpo", config_file=str(trl_config(tmp_path, body, "verl.yaml")))
    assert cfg.algo.advantage == "dr_grpo"  # norm_adv_by_std_in_grpo false: mean-only advantages
    assert (cfg.algo.kl_placement, cfg.algo.kl_coef, cfg.algo.kl_estimator) == ("reward", 0.002, "k1")
    assert cfg.algo.loss_agg == "constant-norm" and cfg.algo.l_norm == 16.0
    assert cfg.data.task == "train.parquet" and cfg.data.answer_key == "reward_model.ground_truth"
    assert cfg.train.lr == 3e-6


def test_grpokit_config_is_not_mistaken_for_a_foreign_one(tmp_path: Path) -> None:
    body = {"train": {"lr": 1e-5}, "rollout": {"group_size": 4}, "data": {"task": "add1"}}
    assert detect(body) is None
    cfg = build_config("grpo", config_file=str(trl_config(tmp_path, body, "g.yaml")))
    assert cfg.train.lr == 1e-5 and cfg.algo.kl_coef == 0.04  # the recipe's values stay


# ------------------------------------------------------------------------------------- --output-dir, --version


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "grpokit.cli", *args], capture_output=True, text=True, timeout=300)


def test_output_dir_refuses_a_folder_holding_another_run(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.yaml").write_text("recipe: grpo\n")
    (run / "metrics.jsonl").write_text('{"step": 1}\n')
    out = _cli("train", "--model", "tiny", "--steps", "1", "--output-dir", str(run))
    assert out.returncode == 2, out.stderr
    assert f"--output-dir {run} already holds a run (config.yaml, metrics.jsonl)" in out.stderr
    assert f"grpokit train --resume {run}" in out.stderr and "Traceback" not in out.stderr
    assert (run / "metrics.jsonl").read_text() == '{"step": 1}\n'  # nothing written over


def test_output_dir_is_claimed_once(tmp_path: Path) -> None:
    from grpokit.run.output_dir import OutputDirError, claim_output_dir

    assert claim_output_dir(tmp_path / "new") == tmp_path / "new"
    with pytest.raises(OutputDirError, match="claimed by another grpokit run"):
        claim_output_dir(tmp_path / "new")  # a second run started at the same moment


def test_version() -> None:
    from grpokit import __version__

    out = _cli("--version")
    assert out.returncode == 0 and out.stdout.strip() == f"grpokit {__version__}"


def test_trl_checkpoint_keys_keep_their_meaning(tmp_path: Path) -> None:
    """save_total_limit (None in TRL: keep all) and save_only_model (no optimizer state) mean what they mean in TRL."""
    body = {"num_generations": 8, "save_total_limit": None, "save_only_model": True}
    cfg = build_config("grpo", config_file=str(trl_config(tmp_path, body)))
    assert cfg.train.save_total_limit == 0 and cfg.train.save_only_model is True
    body = {"num_generations": 8, "save_total_limit": 3}
    cfg = build_config("grpo", config_file=str(trl_config(tmp_path, body, "b.yaml")))
    assert cfg.train.save_total_limit == 3 and cfg.train.save_only_model is False  # unset: TRL's default


def test_a_reward_model_path_in_trl_reward_funcs_is_a_reward_model(tmp_path: Path, embedded_model_dir: Path) -> None:
    """TRL takes a model path in reward_funcs as a sequence-classification reward model; so does the translation."""
    from tiny_reward_model import build_tiny_reward_model

    rm = build_tiny_reward_model(tmp_path / "rm", embedded_model_dir)
    body = {"num_generations": 8, "reward_funcs": [str(rm), "accuracy_reward"], "reward_weights": [0.5, 1.0]}
    cfg = build_config("grpo", config_file=str(trl_config(tmp_path, body)))
    assert cfg.reward.functions == [str(rm), "trl.rewards:accuracy_reward"] and cfg.reward.weights == [0.5, 1.0]
