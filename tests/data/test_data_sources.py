"""Data as TRL and verl users have it: every local file type, dataset directories, `datasets` names (offline here),
TRL's standard and conversational formats, system prompts, dotted keys, verl's parquet schema as is."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest

from grpokit.config import DataConfig
from grpokit.data import Example, load_examples, load_hf_dataset, render_prompt
from grpokit.data.split import load_task_data
from grpokit.rewards import RewardManager

datasets = pytest.importorskip("datasets")

ROWS = [{"prompt": f"What is {i} + 1?", "answer": str(i + 1), "level": i % 3} for i in range(6)]
TEMPLATE = (
    "{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)


def _chat(*pairs: tuple[str, str]) -> list[dict[str, str]]:
    return [{"role": r, "content": c} for r, c in pairs]


def _verl_rows() -> list[dict[str, Any]]:
    """Rows as verl's gsm8k preprocessing writes them: chat prompt, rule reward model, extra_info."""
    return [
        {
            "data_source": "openai/gsm8k",
            "prompt": _chat(("system", "Think step by step."), ("user", f"How many apples? {i}")),
            "ability": "math",
            "reward_model": {"style": "rule", "ground_truth": str(10 + i)},
            "extra_info": {"split": "train", "index": i},
        }
        for i in range(4)
    ]


def _write_all_formats(tmp_path: Path) -> dict[str, Path]:
    ds = datasets.Dataset.from_list(ROWS)
    paths = {ext: tmp_path / f"rows.{ext}" for ext in ("json", "jsonl", "parquet", "csv")}
    paths["json"].write_text(json.dumps(ROWS))
    paths["jsonl"].write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    ds.to_parquet(str(paths["parquet"]))
    ds.to_csv(str(paths["csv"]), index=False)
    ds.save_to_disk(str(tmp_path / "saved"))
    paths["arrow"] = next((tmp_path / "saved").glob("*.arrow"))
    paths["save_to_disk"] = tmp_path / "saved"
    return paths


def test_every_local_file_type_gives_the_same_examples(tmp_path: Path) -> None:
    paths = _write_all_formats(tmp_path)
    expected = [(r["prompt"], r["answer"], {"level": r["level"]}) for r in ROWS]
    for kind, path in paths.items():
        examples = load_examples(str(path))
        assert [(e.prompt, e.answer, e.meta) for e in examples] == expected, kind
        assert examples[0].messages is None


def test_dataset_directory_with_split_files_like_a_hub_repo(tmp_path: Path) -> None:
    repo = tmp_path / "my_dataset"
    (repo / "data").mkdir(parents=True)
    (repo / "data" / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in ROWS[:4]))
    (repo / "data" / "test.jsonl").write_text("".join(json.dumps(r) + "\n" for r in ROWS[4:]))
    assert [e.answer for e in load_examples(str(repo))] == ["1", "2", "3", "4"]
    assert [e.answer for e in load_examples(str(repo), split="test")] == ["5", "6"]
    with pytest.raises(ValueError, match=r"no split 'dev'; available splits: \['test', 'train'\] \(set data.split\)"):
        load_hf_dataset(str(repo), split="dev")


def test_dataset_name_offline_says_why_and_how(tmp_path: Path) -> None:
    assert datasets.config.HF_HUB_OFFLINE  # the tests run offline (conftest / Makefile)
    with pytest.raises(ValueError) as err:
        load_examples("grpokit-tests/no-such-dataset")
    msg = str(err.value)
    assert "'grpokit-tests/no-such-dataset' is not in the local datasets cache" in msg
    assert "HF_HUB_OFFLINE=1 keeps the Hub off" in msg and "unset HF_HUB_OFFLINE" in msg
    assert "Dataset.save_to_disk folder" in msg
    with pytest.raises(ValueError, match=r"unknown task 'countdwn'.*Did you mean 'countdown'"):
        load_examples("countdwn")  # a typo of a task is not sent to the Hub
    with pytest.raises(ValueError, match=r"data path './nothing/here.jsonl' does not exist"):
        load_examples("./nothing/here.jsonl")


def test_verl_parquet_as_is(tmp_path: Path) -> None:
    path = tmp_path / "train.parquet"
    datasets.Dataset.from_list(_verl_rows()).to_parquet(str(path))
    examples = load_examples(str(path))  # default answer_key: reward_model.ground_truth stands in for `answer`
    ex = examples[1]
    assert ex.answer == "11" and ex.prompt == "How many apples? 1"
    assert ex.messages == _chat(("system", "Think step by step."), ("user", "How many apples? 1"))
    assert ex.meta["data_source"] == "openai/gsm8k" and ex.meta["extra_info"] == {"split": "train", "index": 1}
    assert ex.columns is not None and ex.columns["reward_model"]["ground_truth"] == "11"
    dotted = load_examples(str(path), answer_key="extra_info.index")
    assert [e.answer for e in dotted] == ["0", "1", "2", "3"]
    with pytest.raises(ValueError) as err:
        load_examples(str(path), answer_key="reward_model.truth")
    msg = str(err.value)
    assert "all rows: missing field 'reward_model.truth'" in msg
    assert "'reward_model.ground_truth'" in msg and "pass answer_key='reward_model.ground_truth'" in msg


def test_verl_compute_score_and_trl_columns_on_loaded_parquet(tmp_path: Path) -> None:
    """Rows loaded from parquet reach a verl compute_score (ground truth, extra_info) and a TRL reward (every other
    column as a keyword list, prompts and completions as messages) unchanged."""
    path = tmp_path / "train.parquet"
    datasets.Dataset.from_list(_verl_rows()).to_parquet(str(path))
    examples = load_examples(str(path))[:2]

    def compute_score(data_source, solution_str, ground_truth, extra_info=None):
        return float(solution_str.strip() == ground_truth) + extra_info["index"] / 10

    def trl_reward(prompts, completions, ability, extra_info, data_source, **kwargs):
        assert prompts[0][-1] == {"role": "user", "content": "How many apples? 0"}
        assert completions[1] == [{"role": "assistant", "content": "12"}]
        assert ability == ["math", "math"] and data_source == ["openai/gsm8k"] * 2
        return [float(e["index"]) for e in extra_info]

    with RewardManager([(compute_score, 1.0), (trl_reward, 1.0)], isolation="inline") as m:
        result = m.score(["10", "12"], examples)
    assert result.failures == []
    assert result.per_reward == {"compute_score": [1.0, 0.1], "trl_reward": [0.0, 1.0]}


def test_answer_key_null_for_prompt_only_data(tmp_path: Path) -> None:
    path = tmp_path / "prompts.jsonl"
    path.write_text("".join(json.dumps({"prompt": r["prompt"]}) + "\n" for r in ROWS))
    examples = load_examples(str(path), answer_key=None)
    assert [e.answer for e in examples] == [""] * len(ROWS)
    with pytest.raises(ValueError, match=r"missing field 'answer'.*data.answer_key; null when the rewards need no"):
        load_examples(str(path))


def test_conversation_errors_name_the_message(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    rows = [{"prompt": _chat(("user", "hi")), "answer": "1"}, {"prompt": [{"role": "user"}], "answer": "2"}]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(ValueError, match=r"bad\.jsonl, line 2: field 'prompt' message 0 has no text 'content'"):
        load_examples(str(path))


def test_task_data_renders_conversations_with_the_system_prompt(
    tmp_path: Path, smollm_tokenizer: Any, caplog: pytest.LogCaptureFixture
) -> None:
    rows = [{"prompt": _chat(("user", f"Q{i}?")), "solution": str(i)} for i in range(9)]
    rows.append({"prompt": _chat(("system", "Own system."), ("user", "Q9?")), "solution": "9"})
    path = tmp_path / "conv.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    cfg = DataConfig(task=str(path), answer_key="solution", system_prompt="Be brief.", eval_size=1)
    with caplog.at_level(logging.WARNING, logger="grpokit.data.split"):
        data = load_task_data(cfg, smollm_tokenizer, seed=0)
    assert len(data.train) == 9 and len(data.held_out) == 1 and data.default_reward == "math_verify"
    texts = {e.prompt: smollm_tokenizer.decode(t) for e, t in zip(data.train, data.train_tokens)}
    texts |= {e.prompt: smollm_tokenizer.decode(t) for e, t in zip(data.held_out, data.held_out_tokens)}
    sys_user = "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nQ1?<|im_end|>\n"
    assert texts["Q1?"] == sys_user + "<|im_start|>assistant\n"
    assert "Own system." in texts["Q9?"] and "Be brief." not in texts["Q9?"]
    assert "data.system_prompt not used on 1 examples that bring their own system message" in caplog.text
    no_answer = load_task_data(DataConfig(task=str(path), answer_key=None), smollm_tokenizer, seed=0)
    assert no_answer.default_reward is None


def test_render_conversation_without_template_and_with_template_kwargs() -> None:
    from tokenizers import Tokenizer, models
    from transformers import PreTrainedTokenizerFast

    tok = PreTrainedTokenizerFast(tokenizer_object=Tokenizer(models.WordLevel({"[UNK]": 0}, unk_token="[UNK]")))
    ex = Example(prompt="Q?", answer="1", messages=_chat(("user", "Q?"), ("assistant", "A."), ("user", "And?")))
    assert render_prompt(tok, ex, "Sys.") == "Sys.\n\nQ?\n\nA.\n\nAnd?"
    tok.chat_template = TEMPLATE.replace("<|assistant|>{% endif %}", "<|assistant|>{% endif %}{{ suffix }}")
    text = render_prompt(tok, ex, None, {"suffix": "/no_think"})
    assert text == "<|user|>Q?\n<|assistant|>A.\n<|user|>And?\n<|assistant|>/no_think"


def test_conversation_under_another_key_reaches_trl_rewards_as_messages(tmp_path: Path) -> None:
    path = tmp_path / "chats.jsonl"
    rows = [{"messages": _chat(("user", f"Say {w}.")), "solution": w} for w in ("yes", "no")]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    examples = load_examples(str(path), prompt_key="messages", answer_key="solution")

    def echo(prompts, completions, solution, **kwargs):
        assert prompts == [r["messages"] for r in rows]
        return [float(c[0]["content"] == s) for c, s in zip(completions, solution)]

    with RewardManager([(echo, 1.0)], isolation="inline") as m:
        assert m.score(["yes", "yes"], examples).rewards == [1.0, 0.0]
