"""One test per row of docs/bring_your_job.md's reward calling-convention table (issue 39): each convention's real
reward functions, vendored byte for byte from their projects (tests/fixtures/conventions/SOURCE.md), called
through grpokit's RewardManager (its sandboxed worker) the way their own trainer calls them."""

from __future__ import annotations

import hashlib
import importlib.util
import logging
import re
from pathlib import Path
from typing import Any

import pytest

from grpokit.agents.calls import ParsedTurn, ToolCall
from grpokit.agents.environment import FactoryEnvironment, Observation
from grpokit.agents.episode import Episode
from grpokit.agents.execution import ToolResult
from grpokit.config.compat.trl_rewards import resolve
from grpokit.data.example import Example
from grpokit.rewards import RewardManager

FIX = Path(__file__).parents[1] / "fixtures" / "conventions"
OPEN_R1 = Path(__file__).parents[1] / "fixtures" / "field" / "open-r1"
DOC = Path(__file__).parents[2] / "docs" / "bring_your_job.md"


def test_the_vendored_files_are_byte_for_byte() -> None:
    listed = re.findall(r"^([0-9a-f]{64})  (\S+)$", (FIX / "SOURCE.md").read_text(), re.M)
    assert len(listed) == 7
    for digest, name in listed:
        assert hashlib.sha256((FIX / name).read_bytes()).hexdigest() == digest, name
        assert (FIX / name).parent.joinpath("LICENSE").read_text().lstrip().startswith(("Apache License", "MIT"))


def _chat(text: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": text}]


# --- TRL single-turn -------------------------------------------------------------------------------------------


def test_trl_single_turn() -> None:
    """TRL's own think_format_reward (trl.rewards): keywords, completions as one assistant message each."""
    pytest.importorskip("trl.rewards")
    ex = Example("What is 3 + 4?", "7", messages=_chat("What is 3 + 4?"))
    with RewardManager([("trl.rewards:think_format_reward", 1.0)]) as m:
        res = m.score(["<think>\n3 + 4 = 7\n</think>\n7", "7"], [ex, ex])
    assert res.rewards == [1.0, 0.0] and res.failures == []


# --- TRL multi-turn with tools ---------------------------------------------------------------------------------

AGENT = FIX / "trl" / "grpo_agent.py"


def _tool_episode(sql: str | None, result: str, answer: str) -> dict[str, Any]:
    """One episode, built by grpokit's own Episode: a turn calling query_biogrid (unless `sql` is None), the tool's
    message, and the final answer."""
    e = Episode(prompt=[1, 2], env=None, group=0)  # type: ignore[arg-type]
    if sql is not None:
        call = ToolCall("query_biogrid", {"sql_command": sql})
        e.add_policy_turn(
            [5, 6], [0.0, 0.0], f'<tool_call>{{"name": "query_biogrid", "arguments": {{"sql_command": "{sql}"}}}}'
        )
        e.add_observation(
            Observation(parsed=ParsedTurn([call], attempts=1), results=[ToolResult(call.name, "ok", result)])
        )
        e.add_chunk([7, 8], [{"role": "tool", "name": call.name, "content": result}], ["ok"])
    e.add_policy_turn([9], [0.0], answer)
    e.end("answer")
    return e.record()


def test_trl_multi_turn_with_tools() -> None:
    """grpo_agent.py's structure_reward and query_reward read the whole episode (assistant tool_calls, tool
    results): they vary over episodes that differ in their calls, where the final message alone made them
    constant."""
    episodes = [
        _tool_episode("SELECT * FROM interactions WHERE gene = 'JNKK'", '[["JNKK", "MAPKK4"]]', "It does: *yes*"),
        _tool_episode("SELECT * FROM interactions LIMIT 1", "[]", "*yes*"),
        _tool_episode(None, "", "*yes*"),
    ]
    ex = Example("Does the gene JNKK interact with MAPKK4?", "yes", messages=_chat("Does the gene JNKK ...?"))
    ex.columns = {"prompt": ex.messages, "answer": "yes"}
    specs = [(f"{AGENT}:structure_reward", 1.0), (f"{AGENT}:query_reward", 1.0), (f"{AGENT}:correctness_reward", 1.0)]
    with RewardManager(specs, timeout_s=60) as m:
        res = m.score([e["turns"][-1]["content"] for e in episodes], [ex] * 3, episodes=episodes)
    assert res.failures == []
    # a call, its result and more text: 0.1; no call: 0 (upstream's own arithmetic)
    assert res.per_reward["structure_reward"] == [0.1, 0.1, 0.0]
    # WHERE (+0.4) with hits for "yes" (+2); LIMIT 1 (-1) without WHERE (-0.5), no hits (-1.5); no query (-1.5)
    assert res.per_reward["query_reward"] == pytest.approx([2.4, -3.0, -1.5])
    assert res.per_reward["correctness_reward"] == [0.6, 0.6, 0.6]  # the last message, as in TRL
    assert res.metrics["reward/structure_reward_constant"] == 0.0


# --- TRL environment_factory -----------------------------------------------------------------------------------

GAME = FIX / "trl" / "grpo_2048.py"


def _game_module() -> Any:
    pytest.importorskip("peft")
    spec = importlib.util.spec_from_file_location("grpo_2048_fixture", GAME)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _game_episode(env_class: type, moves: list[str]) -> dict[str, Any]:
    """An episode of the 2048 environment as grpokit runs a TRL environment_factory class: reset with the row,
    its `move` tool called; the record keeps the environment's attributes at the end."""
    instance = env_class()
    env = FactoryEnvironment(instance, parse=lambda text: ParsedTurn(), max_chars=1000)
    env.reset(Example("Play 2048", "", columns={"prompt": _chat("Play 2048")}))
    instance.board = [[2, 2, 4, 4], [0, 0, 0, 0], [0, 0, 0, 0], [0, 0, 0, 0]]
    e = Episode(prompt=[1], env=env, group=0)
    for move in moves:
        e.add_policy_turn([3], [0.0], f'<tool_call>{{"name": "move", "arguments": {{"direction": "{move}"}}}}')
        env.run(ToolCall("move", {"direction": move}))
    e.add_policy_turn([4], [0.0], "done")
    e.end("answer")
    return e.record()


def test_trl_environment_factory() -> None:
    """grpo_2048.py's reward_score(environments, **kwargs) gets each episode's environment and reads env.score."""
    game = _game_module()
    episodes = [_game_episode(game.Game2048Env, ["left"]), _game_episode(game.Game2048Env, [])]
    assert [e["environment"]["score"] for e in episodes] == [12.0, 0.0]  # 2+2 and 4+4 merged
    ex = Example("Play 2048", "", messages=_chat("Play 2048"))
    with RewardManager([(f"{GAME}:reward_score", 1.0)], timeout_s=60, max_fail_frac=1.0) as m:
        res = m.score(["done", "done"], [ex, ex], episodes=episodes)
        assert res.failures == [] and res.rewards == [12.0, 0.0]
        alone = m.score(["done"], [ex])  # no environment: TRL passes none either; the error says so
    assert "environment_factory" in alone.failures[0].message and "rename" not in alone.failures[0].message


# --- verl compute_score ----------------------------------------------------------------------------------------

COUNTDOWN = f"{FIX / 'tinyzero' / 'countdown.py'}:compute_score"
# TinyZero's countdown prompts (tinyzero/countdown_data.py make_prefix, template "base"), for 25, 5, 2 -> 40
BASE = (
    "A conversation between User and Assistant. The user asks a question, and the Assistant solves it. The "
    "assistant first thinks about the reasoning process in the mind and then provides the user with the answer.\n"
    "User: Using the numbers [25, 5, 2], create an equation that equals 40. You can use basic arithmetic operations "
    "(+, -, *, /) and each number can only be used once. Show your work in <think> </think> tags. And return the "
    "final answer in <answer> </answer> tags, for example <answer> (1 + 2) / 3 </answer>.\n"
    "Assistant: Let me solve this step by step.\n<think>"
)
RIGHT = " 25 - 5 = 20, 20 * 2 = 40 </think>\n<answer> (25 - 5) * 2 </answer>"
WRONG = " 25 + 5 + 2 = 32 </think>\n<answer> 25 + 5 + 2 </answer>"
NONE = " I cannot do this."
TRUTH = {"target": 40, "numbers": [25, 5, 2]}


def _countdown(prompt: str) -> Example:
    row = {
        "data_source": "countdown",
        "prompt": _chat(prompt),
        "reward_model": {"style": "rule", "ground_truth": TRUTH},
        "extra_info": {"split": "train", "index": 0},
    }
    return Example(prompt, "40", columns=row, messages=_chat(prompt))


def test_verl_compute_score_response_only() -> None:
    """verl today: solution_str is the response; data_source, ground_truth and extra_info from the row."""
    import toy_rewards

    row = {"data_source": "openai/gsm8k", "reward_model": {"ground_truth": "72"}, "extra_info": {"split": "train"}}
    ex = Example("q", "72", columns=row)
    with RewardManager([(toy_rewards.compute_score, 1.0)]) as m:
        assert m.score(["so #### 72", "so #### 71", "72"], [ex] * 3).rewards == [1.0, 0.0, 0.0]


def test_verl_compute_score_prompt_and_response(caplog: pytest.LogCaptureFixture) -> None:
    """TinyZero's countdown scorer cuts solution_str at 'Assistant:' or '<|im_start|>assistant': given the
    response alone it scores every answer 0, and the constant batch is warned about with the fix, found by trying
    the prompt + response once; with reward.verl_solution_str=prompt+response right answers score 1 (wrong ones
    get its 0.1 format score), from the example's prompt or from the prompt as the model saw it."""
    texts = [RIGHT, WRONG, NONE]
    exs = [_countdown(BASE)] * 3
    with caplog.at_level(logging.DEBUG, logger="grpokit.rewards.manager"):
        with RewardManager([(COUNTDOWN, 1.0)]) as m:
            res = m.score(texts, exs)
            assert res.rewards == [0.0, 0.0, 0.0] and res.metrics["reward/compute_score_constant"] == 1.0
            m.score(texts, exs)
            assert m.constant.batches == {"compute_score": 2}
    warnings = [
        r.getMessage() for r in caplog.records if r.levelno == logging.WARNING and "same value" in r.getMessage()
    ]
    assert len(warnings) == 1, warnings
    assert "scores 2 of them differently: set reward.verl_solution_str=prompt+response" in warnings[0]

    with RewardManager([(COUNTDOWN, 1.0)], verl_solution_str="prompt+response") as m:
        assert m.score(texts, exs).rewards == [1.0, 0.1, 0.0]
        # the chat-templated prompt as decoded from the model's tokens (Qwen's ChatML): cut at <|im_start|>assistant
        seen = "<|im_start|>user\nUsing the numbers [25, 5, 2], create ...<|im_end|>\n<|im_start|>assistant\n"
        res = m.score(texts, [_countdown("Using the numbers [25, 5, 2], create ...")] * 3, prompt_texts=[seen] * 3)
        assert res.rewards == [1.0, 0.1, 0.0]
    with pytest.raises(ValueError, match=r"reward.verl_solution_str='prompt'.*'response', 'prompt\+response'"):
        RewardManager([(COUNTDOWN, 1.0)], verl_solution_str="prompt")


# --- OpenRLHF reward_func --------------------------------------------------------------------------------------

OPENRLHF_CHECK = '''
import torch


def reward_func(queries, prompts, labels, **kwargs):
    """1 where the query is the prompt followed by a response that is the label."""
    out = [float(q.startswith(p) and q[len(p):].strip() == label) for q, p, label in zip(queries, prompts, labels)]
    return {"rewards": torch.tensor(out), "scores": torch.tensor(out), "extra_logs": {}}
'''


def test_openrlhf_reward_func(tmp_path: Path) -> None:
    """reward_func(queries, prompts, labels): queries = the decoded prompt + response; a dict of tensors whose
    "rewards" are the rewards. OpenRLHF's own example (random 0/1 rewards) and one that checks what it is given."""
    (tmp_path / "check.py").write_text(OPENRLHF_CHECK)
    seen = "<|im_start|>user\nWhat is 3 + 4?<|im_end|>\n<|im_start|>assistant\n"
    ex = Example("What is 3 + 4?", "7", messages=_chat("What is 3 + 4?"))
    specs = [(f"{FIX / 'openrlhf' / 'reward_func.py'}:reward_func", 1.0), (f"{tmp_path / 'check.py'}:reward_func", 1.0)]
    with RewardManager(specs, timeout_s=60) as m:
        assert [r.convention for r in m.rewards] == ["openrlhf", "openrlhf"]
        res = m.score(["7", "8", " 7"], [ex] * 3, prompt_texts=[seen] * 3)
        assert res.failures == []
        assert set(res.per_reward["reward_func"]) <= {0.0, 1.0} and len(res.per_reward["reward_func"]) == 3
        assert res.per_reward[f"{tmp_path / 'check.py'}:reward_func"] == [1.0, 0.0, 1.0]
        # no prompt text given: the example's prompt stands in
        res = m.score(["7"], [ex])
        assert res.per_reward[f"{tmp_path / 'check.py'}:reward_func"] == [1.0]


# --- open-r1's registry names ----------------------------------------------------------------------------------


def test_open_r1_registry_names(monkeypatch: pytest.MonkeyPatch) -> None:
    """A recipe's `reward_funcs: [accuracy, format, tag_count]` are open-r1's names: with its module named
    (--reward-module open_r1.rewards) each is NAME or NAME_reward there, called as TRL calls it."""
    pytest.importorskip("math_verify")
    monkeypatch.syspath_prepend(str(OPEN_R1))
    specs, missing = resolve(["accuracy", "format", "tag_count"], "open_r1.rewards")
    assert missing == [] and specs == [f"open_r1.rewards:{n}_reward" for n in ("accuracy", "format", "tag_count")]
    ex = Example("What is 1/2 + 0?", "$\\frac{1}{2}$", messages=_chat("What is 1/2 + 0?"))
    ex.columns = {"prompt": ex.messages, "solution": "$\\frac{1}{2}$"}
    good = "<think>\nhalf\n</think>\n<answer>\n$\\frac{1}{2}$\n</answer>"
    with RewardManager([(s, 1.0) for s in specs], timeout_s=60) as m:
        res = m.score([good, "1/3"], [ex, ex])
    assert res.failures == []
    assert res.per_reward["accuracy_reward"] == [1.0, 0.0]
    assert res.per_reward["format_reward"] == [1.0, 0.0] and res.per_reward["tag_count_reward"] == [1.0, 0.0]


def test_the_docs_table_has_a_row_for_each_test_here() -> None:
    """docs/bring_your_job.md's convention table names this file's row tests, and each exists."""
    text = DOC.read_text()
    table = text[text.index("## Reward calling conventions") :]
    named = re.findall(r"test_conventions\.py::(test_\w+)", table)
    rows = {n for n in globals() if n.startswith("test_") and n.split("_")[1] in ("trl", "verl", "openrlhf", "open")}
    assert set(named) >= rows and all(n in globals() for n in named), (sorted(rows), named)


def test_a_wrong_verl_solution_str_is_a_config_error() -> None:
    from grpokit.config import build_config

    with pytest.raises(
        Exception, match=r"reward.verl_solution_str='prompt' is invalid: use response .* prompt\+response"
    ):
        build_config("grpo", overrides=["reward.verl_solution_str=prompt"])
    assert build_config("grpo", overrides=["reward.verl_solution_str=prompt+response"]).reward.verl_solution_str
