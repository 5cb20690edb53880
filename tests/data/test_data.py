"""Data layer: built-in tasks, local loaders and chat-template rendering (real files, no mocks)."""

from __future__ import annotations

import itertools
import json
from fractions import Fraction
from pathlib import Path

import pytest

from grpokit.data import (
    Example,
    get_task,
    list_tasks,
    load_examples,
    load_hf_dataset,
    load_jsonl,
    render_prompt,
)
from grpokit.rewards import load_reward

TASK_NAMES = ["add1", "add2", "mul1", "countdown"]


def _key(ex: Example) -> str:
    """A canonical problem key (countdown numbers are order-free)."""
    if "numbers" in ex.meta:
        return json.dumps([sorted(ex.meta["numbers"]), ex.meta["target"]])
    return f"{ex.meta['a']},{ex.meta['b']}"


def test_add1_splits_are_deterministic_and_disjoint() -> None:
    task = get_task("add1")
    train, test = task.examples("train"), task.examples("test")
    assert len(train) == 80 and len(test) == 20
    assert {_key(e) for e in train}.isdisjoint({_key(e) for e in test})
    assert len({_key(e) for e in train} | {_key(e) for e in test}) == 100
    assert task.examples("test") == test  # same call, same list
    a, b = task.examples("train", 200, seed=1), task.examples("train", 200, seed=1)
    assert a == b and len(a) == 200
    assert task.examples("train", 50, seed=2) != task.examples("train", 50, seed=1)
    # whatever the seed, sampled train problems never come from the held-out pairs
    held_out = {_key(e) for e in test}
    for seed in range(5):
        assert held_out.isdisjoint(_key(e) for e in task.examples("train", 100, seed=seed))
    assert task.examples("eval") == test  # alias


@pytest.mark.parametrize("name", TASK_NAMES)
def test_every_task_has_disjoint_deterministic_splits(name: str) -> None:
    task = get_task(name)
    train, test = task.examples("train", 300, seed=0), task.examples("test", 50, seed=0)
    assert {_key(e) for e in train}.isdisjoint({_key(e) for e in test})
    assert task.examples("test", 50, seed=0) == test
    assert all(e.prompt and e.answer and e.id for e in train + test)


def _solve_countdown(numbers: list[int], target: int) -> str | None:
    """Brute force: an expression over some of `numbers` (each once) equal to `target`, or None."""
    items = [(Fraction(x), str(x)) for x in numbers]

    def search(items: list[tuple[Fraction, str]]) -> str | None:
        for value, expr in items:
            if value == target:
                return expr
        for i, j in itertools.permutations(range(len(items)), 2):
            (a, ea), (b, eb) = items[i], items[j]
            rest = [it for k, it in enumerate(items) if k not in (i, j)]
            options = [(a + b, f"({ea} + {eb})"), (a - b, f"({ea} - {eb})"), (a * b, f"({ea} * {eb})")]
            if b != 0:
                options.append((a / b, f"({ea} / {eb})"))
            for option in options:
                found = search([*rest, option])
                if found:
                    return found
        return None

    return search(items)


@pytest.mark.parametrize("name", TASK_NAMES)
def test_each_task_reward_accepts_its_own_reference_answer(name: str) -> None:
    task = get_task(name)
    reward = load_reward(task.default_reward)
    examples = task.examples("test", 8, seed=3)
    if name == "countdown":
        solved = [_solve_countdown(e.meta["numbers"], e.meta["target"]) for e in examples]
        assert all(solved)
        assert reward([f"Answer: {s}" for s in solved], examples) == [1.0] * 8
        assert reward([e.meta["solution"] for e in examples], examples) == [1.0] * 8
        n = examples[0].meta["numbers"]
        twice = f"{n[0]} + {n[0]} + {n[0]} + {n[0]}"  # reuses a number: rejected even if it hit the target
        assert reward([twice], examples[:1]) == [0.0]
    else:
        assert reward([e.answer for e in examples], examples) == [1.0] * 8
        assert reward([f"So the answer is {e.answer}." for e in examples], examples) == [1.0] * 8
        assert reward([str(int(e.answer) + 1) for e in examples], examples) == [0.0] * 8


def test_get_task_unknown_name_suggests_closest() -> None:
    with pytest.raises(ValueError, match=r"'ad1'.*Did you mean 'add1'.*add2.*countdown.*mul1"):
        get_task("ad1")
    assert set(list_tasks()) == {*TASK_NAMES, "code1", "add2-tool"}  # code1: test_code_exec.py; add2-tool: below
    assert all(isinstance(d, str) and d for d in list_tasks().values())


def _write_jsonl(path: Path, records: list[object]) -> Path:
    path.write_text("\n".join(r if isinstance(r, str) else json.dumps(r) for r in records) + "\n")
    return path


def test_jsonl_round_trip(tmp_path: Path) -> None:
    records = [
        {"prompt": "What is 2 + 2?", "answer": "4", "source": "hand"},
        {"prompt": "What is 1/2 as a decimal?", "answer": 0.5, "id": "half"},
        {"question": "unused", "prompt": "Numbers?", "answer": {"numbers": [1, 2], "target": 3}},
    ]
    examples = load_jsonl(_write_jsonl(tmp_path / "mini.jsonl", records))
    assert [e.prompt for e in examples] == [r["prompt"] for r in records]
    assert [e.answer for e in examples] == ["4", "0.5", '{"numbers": [1, 2], "target": 3}']
    assert examples[0].meta == {"source": "hand"} and examples[2].meta == {"question": "unused"}
    assert examples[1].id == "half" and examples[0].id == "mini/1"
    custom = _write_jsonl(tmp_path / "custom.jsonl", [{"question": "What is 3 + 3?", "solution": 6}])
    [ex] = load_jsonl(custom, prompt_key="question", answer_key="solution")
    assert (ex.prompt, ex.answer, ex.meta) == ("What is 3 + 3?", "6", {})
    assert load_examples(str(tmp_path / "mini.jsonl")) == examples
    sampled = load_examples(str(tmp_path / "mini.jsonl"), n=7, seed=0)
    assert len(sampled) == 7 and sampled == load_examples(str(tmp_path / "mini.jsonl"), n=7, seed=0)


def test_jsonl_errors_name_file_line_field_and_fix(tmp_path: Path) -> None:
    missing = _write_jsonl(
        tmp_path / "missing.jsonl", [{"prompt": "a", "answer": "1"}, {"question": "b", "answer": "2"}]
    )
    with pytest.raises(ValueError, match=r"missing\.jsonl, line 2: missing field 'prompt'.*prompt_key='question'"):
        load_jsonl(missing)
    bad = _write_jsonl(tmp_path / "bad.jsonl", [{"prompt": "a", "answer": "1"}, "", '{"prompt": "b", "answer": '])
    with pytest.raises(ValueError, match=r"bad\.jsonl, line 3: invalid JSON"):
        load_jsonl(bad)
    empty = _write_jsonl(tmp_path / "empty_prompt.jsonl", [{"prompt": "  ", "answer": "1"}])
    with pytest.raises(ValueError, match=r"empty_prompt\.jsonl, line 1: field 'prompt' must be a non-empty string"):
        load_jsonl(empty)
    no_answer = _write_jsonl(tmp_path / "no_answer.jsonl", [{"prompt": "a", "solution": "1"}])
    with pytest.raises(ValueError, match=r"line 1: missing field 'answer'.*answer_key='solution'"):
        load_jsonl(no_answer)
    with pytest.raises(ValueError, match=r"does not exist"):
        load_examples(str(tmp_path / "nope.jsonl"))
    with pytest.raises(ValueError, match=r"unknown task 'countdwn'.*Did you mean 'countdown'"):
        load_examples("countdwn")


def test_hf_loader_on_local_files(tmp_path: Path) -> None:
    records = [{"problem": f"What is {i} + 1?", "solution": str(i + 1), "level": i} for i in range(5)]
    path = _write_jsonl(tmp_path / "hf.jsonl", records)
    examples = load_hf_dataset(str(path), prompt_key="problem", answer_key="solution")
    assert [(e.prompt, e.answer, e.meta) for e in examples] == [
        (r["problem"], r["solution"], {"level": r["level"]}) for r in records
    ]
    assert examples == load_jsonl(path, prompt_key="problem", answer_key="solution")
    with pytest.raises(ValueError, match=r"hf\.jsonl, all rows: missing field 'prompt'.*prompt_key='problem'"):
        load_hf_dataset(str(path))

    csv = tmp_path / "data.csv"
    csv.write_text("prompt,answer\nWhat is 2 + 3?,5\n ,1\n")
    with pytest.raises(ValueError, match=r"data\.csv, row 2: field 'prompt'"):
        load_hf_dataset(str(csv))


def test_hf_loader_on_saved_dataset_dict(tmp_path: Path) -> None:
    import datasets

    dd = datasets.DatasetDict(
        {
            "train": datasets.Dataset.from_dict({"prompt": ["What is 1 + 1?"], "answer": ["2"]}),
            "test": datasets.Dataset.from_dict({"prompt": ["What is 2 + 2?", "What is 3 + 3?"], "answer": ["4", "6"]}),
        }
    )
    dd.save_to_disk(str(tmp_path / "saved"))
    test = load_hf_dataset(str(tmp_path / "saved"), split="test")
    assert [e.answer for e in test] == ["4", "6"]
    assert [e.answer for e in load_examples(str(tmp_path / "saved"), split="train")] == ["2"]
    with pytest.raises(ValueError, match=r"no split 'validation'; available splits: \['test', 'train'\]"):
        load_hf_dataset(str(tmp_path / "saved"), split="validation")


def _tiny_tokenizer(chat_template: str | None):
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    core = Tokenizer(models.WordLevel({"[UNK]": 0, "What": 1, "is": 2}, unk_token="[UNK]"))
    core.pre_tokenizer = pre_tokenizers.Whitespace()
    tok = PreTrainedTokenizerFast(tokenizer_object=core, unk_token="[UNK]")
    tok.chat_template = chat_template
    return tok


TEMPLATE = (
    "{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)


def test_render_prompt_uses_the_chat_template() -> None:
    ex = Example(prompt="What is 1 + 2?", answer="3")
    tok = _tiny_tokenizer(TEMPLATE)
    assert render_prompt(tok, ex) == "<|user|>What is 1 + 2?\n<|assistant|>"
    assert render_prompt(tok, ex, "Be brief.") == "<|system|>Be brief.\n<|user|>What is 1 + 2?\n<|assistant|>"
    no_system = (
        "{% for m in messages %}{% if m['role'] == 'system' %}{{ raise_exception('no system') }}{% endif %}"
        "<|{{ m['role'] }}|>{{ m['content'] }}\n{% endfor %}"
        "{% if add_generation_prompt %}<|assistant|>{% endif %}"
    )
    merged = render_prompt(_tiny_tokenizer(no_system), ex, "Be brief.")
    assert merged == "<|user|>Be brief.\n\nWhat is 1 + 2?\n<|assistant|>"


def test_render_prompt_without_template_is_plain_text() -> None:
    ex = Example(prompt="What is 1 + 2?", answer="3")
    tok = _tiny_tokenizer(None)
    assert render_prompt(tok, ex) == "What is 1 + 2?"
    assert render_prompt(tok, ex, "Be brief.") == "Be brief.\n\nWhat is 1 + 2?"


def test_render_prompt_with_embedded_model_tokenizer(request: pytest.FixtureRequest) -> None:
    try:
        tok = request.getfixturevalue("smollm_tokenizer")
    except pytest.FixtureLookupError:
        pytest.skip("no smollm_tokenizer fixture in this checkout")
    text = render_prompt(tok, Example(prompt="What is 1 + 2?", answer="3"))
    assert "What is 1 + 2?" in text and text != "What is 1 + 2?"


def test_example_ids_are_stable() -> None:
    assert Example("p", "a").id == Example("p", "a").id != Example("p", "b").id
    assert get_task("add1").examples("test")[0].id.startswith("add1/")


def test_add2_tool_is_add2_with_worked_calculator_calls_in_front() -> None:
    """add2's questions (its own seeded 20% held out, train and test disjoint); each prompt a conversation of three
    worked calculator calls, then its own question; the task brings the calculator tool (tests/agents run it)."""
    tool, plain = get_task("add2-tool"), get_task("add2")
    test, train = ({e.prompt for e in tool.examples(s)} for s in ("test", "train"))
    assert not test & train and test | train == {e.prompt for s in ("test", "train") for e in plain.examples(s)}
    ex = tool.examples("train", 1, seed=3)[0]
    assert tool.tools == ("calculator",) and ex.messages[-1] == {"role": "user", "content": ex.prompt}
    calls = [m for m in ex.messages if m["role"] == "assistant" and "<tool_call>" in m["content"]]
    results = [m["content"] for m in ex.messages if m["role"] == "tool"]
    assert len(calls) == 3 and results == ["68", "53", "91"]
