"""The field's own artifacts translated (tests/fixtures/field, each with its SOURCE.md): open-r1's recipe and reward
names, verl's example flags and its fully resolved config. Each break issue 28 found, fixed and held here:
reward names that resolve to nothing are refused (not counted as mapped), open-r1's prompt column and system prompt
are mapped, a verl job without a custom reward is scored like verl scores its data_source, `${...}` is resolved and
the message is a summary, and the TRL default assumed for beta / loss_type says what older TRL meant."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest
import yaml

from grpokit.config import Config, ConfigError, all_keys, build_config
from grpokit.config.compat import translate
from grpokit.config.compat.interpolation import resolve

FIELD = Path(__file__).parents[1] / "fixtures" / "field"
RECIPE = FIELD / "open-r1" / "config_demo.yaml"
VERL_YAML = FIELD / "verl" / "_generated_ppo_trainer.yaml"
KEYS = set(all_keys(Config()))


def recipe() -> dict:
    return yaml.safe_load(RECIPE.read_text())


@pytest.fixture
def open_r1_on_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(FIELD / "open-r1"))


# ------------------------------------------------------------------------------ a. reward names of a recipe


def test_recipe_reward_names_are_refused_with_the_fix_not_counted_as_mapped() -> None:
    t = translate(recipe(), str(RECIPE), KEYS, strict=False)
    assert "reward_funcs" not in t.mapped and "reward.functions" not in t.keys
    assert t.unsupported["reward_funcs"] == ["accuracy", "format", "tag_count"]
    (why,) = t.refused
    assert "reward_funcs ['accuracy', 'format', 'tag_count'] resolve to no function" in why
    assert "--reward-module open_r1.rewards" in why and "--set reward.functions=[MODULE:accuracy_reward," in why
    with pytest.raises(ConfigError, match="resolve to no function"):  # a run is refused, not trained on another reward
        build_config("grpo", config_file=str(RECIPE))


def test_recipe_reward_names_resolve_in_the_recipes_module(open_r1_on_path: None) -> None:
    """open-r1's get_reward_funcs convention: accuracy -> accuracy_reward, in the module the user names."""
    t = translate({**recipe(), "reward_module": "open_r1.rewards"}, str(RECIPE), KEYS)
    want = ["open_r1.rewards:accuracy_reward", "open_r1.rewards:format_reward", "open_r1.rewards:tag_count_reward"]
    assert t.keys["reward.functions"] == want and t.mapped["reward_funcs"] == ["reward.functions", "data.answer_key"]
    assert t.keys["data.answer_key"] is None  # TRL has no answer column: its rewards read `solution` themselves
    assert t.refused == []


def test_a_py_file_as_reward_module_and_a_dotted_path() -> None:
    path = str(FIELD / "open-r1" / "open_r1" / "rewards.py")
    t = translate({"reward_funcs": ["tag_count"], "reward_module": path}, "x.yaml", KEYS)
    assert t.keys["reward.functions"] == [f"{path}:tag_count_reward"]
    t = translate({"reward_funcs": ["grpokit.rewards.gsm8k.gsm8k_answer", "no.such.module.fn"]}, "x.yaml", KEYS,
                  strict=False)  # fmt: skip
    assert t.refused and "['no.such.module.fn']" in t.refused[0]


def test_trls_own_reward_names_resolve_to_trl_rewards() -> None:
    import trl.rewards

    t = translate({"reward_funcs": ["accuracy_reward", "think_format_reward"]}, "x.yaml", KEYS)
    assert t.keys["reward.functions"] == ["trl.rewards:accuracy_reward", "trl.rewards:think_format_reward"]
    assert callable(trl.rewards.accuracy_reward) and callable(trl.rewards.think_format_reward)  # real functions


# ------------------------------------------------------------------------- b. prompt column, system prompt


def test_open_r1_prompt_column_and_system_prompt_are_mapped(open_r1_on_path: None) -> None:
    t = translate({**recipe(), "reward_module": "open_r1.rewards"}, str(RECIPE), KEYS)
    assert t.keys["data.prompt_key"] == "problem" and t.mapped["dataset_prompt_column"] == ["data.prompt_key"]
    assert t.keys["data.system_prompt"].startswith("You are a helpful AI Assistant that provides well-reasoned")
    assert "dataset_prompt_column" not in t.unsupported and "system_prompt" not in t.unsupported
    assert t.keys["model.dtype"] == "bfloat16"  # torch_dtype: from_pretrained's dtype


# --------------------------------------------------------------- c. verl without a custom reward: data_source


def _gsm8k_parquet(tmp_path: Path, source: str = "openai/gsm8k") -> Path:
    datasets = pytest.importorskip("datasets")
    rows = [json.loads(line) for line in (FIELD / "data" / "gsm8k_train.jsonl").read_text().splitlines()]
    path = tmp_path / "train.parquet"
    datasets.Dataset.from_list([{**r, "data_source": source} for r in rows]).to_parquet(str(path))
    return path


def test_verl_job_without_custom_reward_is_scored_like_verl_scores_its_data_source(tmp_path: Path) -> None:
    t = translate({"algorithm.adv_estimator": "grpo", "data.train_files": str(_gsm8k_parquet(tmp_path))}, "v", KEYS)
    assert t.keys["reward.functions"] == ["gsm8k"]  # not math_verify: verl's gsm8k.compute_score
    assert any("verl scores data_source 'openai/gsm8k' with gsm8k.compute_score" in n for n in t.notes)


def test_an_unknown_data_source_is_one_clear_line(tmp_path: Path) -> None:
    flat = {"algorithm.adv_estimator": "grpo", "data.train_files": str(_gsm8k_parquet(tmp_path, "my/own_source"))}
    with pytest.raises(ValueError) as e:
        translate(flat, "v", KEYS)
    assert "data_source 'my/own_source' has no verl default scorer" in str(e.value)
    assert "custom_reward_function.path" in str(e.value) and "\n" not in str(e.value)


# ------------------------------------------------------------------ d. ${...} resolved, the message summarised


def test_resolve_follows_omegaconf_rules() -> None:
    flat = {"a.b": 3, "a.c": "${.b}", "d": "x/${a.b}/${oc.select:missing.key,7}", "e": "${oc.select:a.b,1}",
            "f": "${nope}", "g": "${oc.env:GRPOKIT_TEST_UNSET_VAR,fallback}", "h": "${oc.decode:x}"}  # fmt: skip
    out, failed = resolve(flat)
    assert (out["a.c"], out["d"], out["e"], out["g"]) == (3, "x/3/7", 3, "fallback")
    assert set(failed) == {"f", "h"} and "no key 'nope'" in failed["f"] and "resolver 'oc.decode'" in failed["h"]


def test_verls_resolved_config_has_no_interpolation_left_and_a_short_message() -> None:
    data = yaml.safe_load(VERL_YAML.read_text())
    t = translate(data, str(VERL_YAML), KEYS, strict=False)
    # the file says checkpoints/${trainer.project_name}/${trainer.experiment_name}
    assert t.keys["train.output_dir"] == "checkpoints/verl_examples/gsm8k"
    assert not [k for k, v in t.keys.items() if "${" in str(v)]
    message = t.message()
    assert len(message) < 3000  # was 30 KB
    assert f"{len(t.unsupported)} keys: " in message and f"(all {len(t.unsupported)} in the header" in message
    assert "# not supported: " in t.to_yaml()  # where the full list is


def test_an_unresolvable_mapped_key_is_refused_not_written_literally() -> None:
    with pytest.raises(ValueError, match=r"trainer.default_local_dir: cannot resolve checkpoints/\$\{nowhere\}"):
        translate({"algorithm.adv_estimator": "grpo", "trainer.default_local_dir": "checkpoints/${nowhere}"}, "v", KEYS)


# ------------------------------------------------------------------- e. defaults of the recipe's own TRL


def test_assumed_beta_and_loss_type_say_what_older_trl_meant(open_r1_on_path: None) -> None:
    t = translate({**recipe(), "reward_module": "open_r1.rewards"}, str(RECIPE), KEYS)
    notes = " ".join(t.notes)
    assert "the file does not set beta: TRL 1.x's beta=0.0 is assumed; TRL < 0.19 defaulted to beta=0.04" in notes
    assert "TRL 0.17-0.21 defaulted to loss_type=bnpo, TRL < 0.16 averaged per sequence (loss_type=grpo)" in notes
    assert "pin it with beta: <value>" in notes
    pinned = translate({"beta": 0.04, "loss_type": "bnpo", "learning_rate": 1e-6}, "x.yaml", KEYS)
    assert not [n for n in pinned.notes if "does not set" in n]


# -------------------------------------------------------------------- verl's example script, as it is written


def verl_script_overrides(home: Path) -> list[str]:
    """The `key=value` overrides of verl's examples/grpo_trainer/run_qwen2-7b.sh as bash passes them, with $HOME."""
    text = (FIELD / "verl" / "run_qwen2-7b.sh").read_text().replace("\\\n", " ")
    return [t.replace("$HOME", str(home)) for t in shlex.split(text) if "=" in t and not t.startswith("$")]


def test_verl_example_script_translates(tmp_path: Path) -> None:
    from grpokit.config.compat import parse_dotted

    (tmp_path / "data" / "gsm8k").mkdir(parents=True)
    _gsm8k_parquet(tmp_path).rename(tmp_path / "data" / "gsm8k" / "train.parquet")
    overrides = verl_script_overrides(tmp_path)
    assert f"data.train_files={tmp_path}/data/gsm8k/train.parquet" in overrides
    t = translate(parse_dotted(overrides), "run_qwen2-7b.sh", KEYS)
    assert (t.keys["rollout.prompts_per_step"], t.keys["rollout.group_size"], t.keys["train.mini_batches"]) == (
        1024, 5, 4,
    )  # fmt: skip
    assert t.keys["reward.functions"] == ["gsm8k"] and t.keys["algo.kl_estimator"] == "low_var_kl"
