"""Neural reward models as rewards (issue 28 item 7): a local sequence-classification model directory in
`reward.functions`, scored as TRL scores one (prompt + completion, `logits[:, 0]`), beside rule rewards with weights,
in a real training step, and audited by `audit-reward`. Real models: a tiny random Llama classifier built from a
config with the embedded SmolLM2 tokenizer, and SmolLM2-135M-Instruct itself with a seeded random score head."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path
from typing import Any

import pytest
import torch
from tiny_config import tiny_overrides
from tiny_reward_model import build_tiny_reward_model

from grpokit.audit import audit_reward, render
from grpokit.config import ConfigError, build_config
from grpokit.data import Example
from grpokit.rewards import RewardManager
from grpokit.rewards.reward_model import RewardModel
from grpokit.training import Trainer, fit

PROMPT = "What is 3 + 4?"
COMPLETIONS = ["7", "The answer is 7.", "5", "I think it is 7, or maybe 5, or 3."]


def _save_classifier(model: Any, tokenizer: Any, out: Path) -> Path:
    model.save_pretrained(out, safe_serialization=True)
    tokenizer.save_pretrained(out)
    return out


@pytest.fixture(scope="module")
def tiny_rm(tmp_path_factory: pytest.TempPathFactory, embedded_model_dir: Path) -> Path:
    """A 2-layer random LlamaForSequenceClassification (num_labels=1) with the embedded tokenizer, seeded."""
    return build_tiny_reward_model(tmp_path_factory.mktemp("models") / "tiny_rm", embedded_model_dir)


def _examples(n: int) -> list[Example]:
    return [Example(PROMPT, "7")] * n


def _direct(path: Path, texts: list[str]) -> list[float]:
    """The model called by hand, one text at a time (no padding): TRL's `logits[:, 0]`."""
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(path)
    model = AutoModelForSequenceClassification.from_pretrained(path, num_labels=1).eval()
    out = []
    with torch.no_grad():
        for t in texts:
            out.append(float(model(**tok(t, return_tensors="pt", add_special_tokens=False)).logits[0, 0]))
    return out


def test_tiny_rm_scores_a_batch_in_eval_mode_without_grad_like_a_direct_call(tiny_rm: Path) -> None:
    seen: list[tuple[bool, bool]] = []
    with RewardManager([(str(tiny_rm), 1.0)]) as m:
        [r] = m.rewards
        assert (r.name, r.convention, r.isolated) == ("tiny_rm", "reward_model", False)
        assert m.reward_models == ["tiny_rm"]
        model = r.fn.model
        model.register_forward_hook(lambda mod, args, out: seen.append((mod.training, torch.is_grad_enabled())))
        with torch.enable_grad():
            result = m.score(COMPLETIONS, _examples(4))
    assert seen == [(False, False)]  # one batched forward of the 4 texts, in eval mode, under no_grad
    assert not any(p.requires_grad for p in model.parameters())
    expected = _direct(tiny_rm, [PROMPT + c for c in COMPLETIONS])
    assert result.per_reward["tiny_rm"] == pytest.approx(expected, abs=1e-5)
    assert result.rewards == pytest.approx(expected, abs=1e-5)
    assert len(set(round(v, 6) for v in expected)) == 4  # a random head still tells the texts apart
    assert result.failures == [] and result.metrics["reward/fail_frac"] == 0.0


def test_batches_group_similar_lengths_and_a_long_text_goes_alone(tiny_rm: Path) -> None:
    rm = RewardModel(str(tiny_rm))
    assert (rm.batch_size, rm.batch_tokens) == (16, 8192)
    assert rm.batches([10, 8000, 12, 11]) == [[0, 3, 2], [1]]  # 4 x 8000 padded tokens would be over 8192
    rm.batch_size = 2
    assert rm.batches([10, 8000, 12, 11]) == [[0, 3], [2], [1]]
    texts = [PROMPT + c for c in COMPLETIONS]
    assert rm.score_texts(texts) == pytest.approx(_direct(tiny_rm, texts), abs=1e-5)  # 2 batches, same scores


def test_rm_weights_combine_with_a_rule_reward(tiny_rm: Path) -> None:
    with RewardManager([(str(tiny_rm), 0.5), ("exact_numeric", 2.0)]) as m:
        result = m.score(COMPLETIONS, _examples(4))
    rm, rule = result.per_reward["tiny_rm"], result.per_reward["exact_numeric"]
    assert rule == [1.0, 1.0, 0.0, 0.0]
    assert result.rewards == pytest.approx([0.5 * a + 2.0 * b for a, b in zip(rm, rule)])
    assert result.accuracy == rm  # correctness is the first reward unless named


def test_conversational_prompts_go_through_the_chat_template(tiny_rm: Path) -> None:
    messages = [{"role": "user", "content": PROMPT}]
    rm = RewardModel(str(tiny_rm))
    [text] = rm.texts(["7"], [Example(PROMPT, "7", messages=messages)])
    assert text == rm.tokenizer.apply_chat_template([*messages, {"role": "assistant", "content": "7"}], tokenize=False)
    assert "<|im_start|>assistant\n7<|im_end|>" in text
    assert rm.texts(["7"], [Example(PROMPT, "7")]) == [PROMPT + "7"]


def test_model_device_is_validated_in_the_manager_and_the_config() -> None:
    with pytest.raises(ValueError, match=r"reward.model_device='gpu' is invalid: use auto .*cuda:N"):
        RewardManager([("format", 1.0)], model_device="gpu")
    assert build_config("grpo").reward.model_device == "auto"
    assert build_config("grpo", overrides=["reward.model_device=cuda:1"]).reward.model_device == "cuda:1"
    with pytest.raises(ConfigError, match=r"reward.model_device='gpu' is invalid"):
        build_config("grpo", overrides=["reward.model_device=gpu"])


def test_pickle_weights_and_causal_lms_are_refused_with_the_fix(tiny_rm: Path, tmp_path: Path) -> None:
    pickled = tmp_path / "pickled_rm"
    pickled.mkdir()
    shutil.copy(tiny_rm / "config.json", pickled / "config.json")
    torch.save({"w": torch.zeros(1)}, pickled / "pytorch_model.bin")
    with pytest.raises(ValueError, match=r"'.*pickled_rm' has only pickle weights \(pytorch_model.bin\).*safe_serial"):
        RewardManager([(str(pickled), 1.0)])
    causal = tmp_path / "causal"
    shutil.copytree(tiny_rm, causal)
    config = json.loads((causal / "config.json").read_text())
    (causal / "config.json").write_text(json.dumps({**config, "architectures": ["LlamaForCausalLM"]}))
    with pytest.raises(ValueError, match=r"architectures \['LlamaForCausalLM'\] name no \*ForSequenceClassification"):
        RewardManager([(str(causal), 1.0)])


def test_audit_reward_reports_the_reward_model_checks(tiny_rm: Path) -> None:
    report = audit_reward(str(tiny_rm), kind="numeric", timeout_s=5)
    assert report["convention"] == "reward_model"
    rm = report["reward_model"]
    assert rm["verifier"] == "exact_numeric"
    assert set(rm["checks"]) == {"agreement", "spread", "length", "format", "rewrite"}
    right = [c for c in rm["cases"] if c["right"]]
    assert {c["case"] for c in right} >= {"correct", "boxed", "sentence"}  # exact_numeric accepts these
    agreement = rm["checks"]["agreement"]
    assert 0.0 <= agreement["auc"] <= 1.0 and agreement["right"] == len(right)
    assert rm["checks"]["spread"]["std"] > 0 and rm["checks"]["rewrite"]["rewrites"] > 20
    assert report["determinism"]["ok"]  # eval mode, no dropout: the same text scores the same
    # a random head is noise: a whitespace or casing rewrite moves its score several times the right-wrong gap
    rewrite = rm["checks"]["rewrite"]
    assert rewrite["relative_to_gap"] > 1 and not rewrite["ok"]
    assert any(i.startswith("reward model stability: a whitespace or casing rewrite") for i in report["issues"])
    assert report["verdict"] == "ISSUES FOUND"
    text = render(report)
    assert "(reward model, kind numeric" in text and "reward model (verifier exact_numeric): AUC" in text


def test_audit_reward_of_a_reward_model_on_a_labeled_file(tiny_rm: Path, tmp_path: Path) -> None:
    rows = [
        {"prompt": PROMPT, "completion": "7", "answer": "7", "expected": True},
        {"prompt": PROMPT, "completion": "The answer is 7.", "answer": "7", "expected": True},
        {"prompt": PROMPT, "completion": "5", "answer": "7", "expected": False},
        {"prompt": PROMPT, "completion": "It is 12.", "answer": "7", "expected": False},
    ]
    labeled = tmp_path / "labeled.jsonl"
    labeled.write_text("".join(json.dumps(r) + "\n" for r in rows))
    report = audit_reward(str(tiny_rm), labeled=labeled, timeout_s=5)
    rm = report["reward_model"]
    assert rm["verifier"] == "the labeled rows' expected"
    assert [c["right"] for c in rm["cases"]] == [True, True, False, False]
    direct = _direct(tiny_rm, [PROMPT + r["completion"] for r in rows])
    assert [c["score"] for c in rm["cases"]] == pytest.approx(direct, abs=1e-5)
    right, wrong = direct[:2], direct[2:]
    assert rm["checks"]["agreement"]["auc"] == sum((a > b) + 0.5 * (a == b) for a in right for b in wrong) / 4
    formats = [c["case"] for c in rm["checks"]["format"]["cases"]]
    assert formats == ["bold markdown", "answer prefix", "trailing sentence"]
    assert report["labeled"]["rows"] == 4


@pytest.mark.slow
def test_a_training_step_runs_with_the_rm_beside_a_rule_reward(tiny_rm: Path, tmp_path: Path) -> None:
    overrides = tiny_overrides("train.steps=1", f"reward.functions=[{tiny_rm}, toy_rewards:vowel_frac]")
    cfg = build_config("grpo", overrides=[*overrides, "reward.weights=[0.5, 1.0]"])
    fit(Trainer(cfg, tmp_path / "run"), None, eval_before=False)
    [row] = [json.loads(x) for x in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines() if '"time/step"' in x]
    assert math.isfinite(row["reward/tiny_rm_mean"]) and math.isfinite(row["reward/vowel_frac_mean"])
    assert row["reward/fail_frac"] == 0.0 and row["reward/valid_frac"] == 1.0
    assert row["actor/loss"] is not None


@pytest.mark.slow
def test_embedded_model_with_a_seeded_score_head_as_a_reward(embedded_model_dir: Path, tmp_path: Path) -> None:
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    torch.manual_seed(0)
    model = AutoModelForSequenceClassification.from_pretrained(embedded_model_dir, num_labels=1)
    tok = AutoTokenizer.from_pretrained(embedded_model_dir)
    path = _save_classifier(model, tok, tmp_path / "smollm_rm")
    config = json.loads((path / "config.json").read_text())
    assert config["architectures"] == ["LlamaForSequenceClassification"]
    with RewardManager([(str(path), 1.0), ("exact_numeric", 1.0)], correctness="exact_numeric") as m:
        result = m.score(COMPLETIONS, _examples(4))
    expected = _direct(path, [PROMPT + c for c in COMPLETIONS])
    assert result.per_reward["smollm_rm"] == pytest.approx(expected, abs=1e-3)
    assert result.accuracy == [1.0, 1.0, 0.0, 0.0]
    assert result.rewards == pytest.approx([a + b for a, b in zip(expected, result.accuracy)], abs=1e-3)
