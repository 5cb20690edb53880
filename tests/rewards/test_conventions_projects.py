"""The reward conventions of EasyR1, Oat (understand-r1-zero), ms-swift and SkyRL (issue 48 item 1): each project's
own reward file, vendored byte for byte (tests/fixtures/conventions/<project>/SOURCE), called through grpokit's
RewardManager as that project's trainer calls it; a convention chosen by what a function declares, or by
reward.convention, and a function that could be two refused in one line naming the candidates and the key."""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import logging
import re
from pathlib import Path
from typing import Any

import pytest

from grpokit.data.example import Example
from grpokit.rewards import RewardManager
from grpokit.rewards.signature import detect_convention

FIX = Path(__file__).parents[1] / "fixtures" / "conventions"
DOC = Path(__file__).parents[2] / "docs" / "bring_your_job.md"
PROJECTS = ("easyr1", "oat", "ms_swift", "skyrl")


def _module(path: Path) -> Any:
    spec = importlib.util.spec_from_file_location(f"fixture_{path.parent.name}_{path.stem}", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("project", PROJECTS)
def test_the_vendored_files_are_byte_for_byte(project: str) -> None:
    source = (FIX / project / "SOURCE").read_text()
    listed = re.findall(r"^([0-9a-f]{64})  (\S+)$", source, re.M)
    assert listed and re.search(r"^commit: [0-9a-f]{40}$", source, re.M)
    for digest, name in listed:
        assert hashlib.sha256((FIX / project / name).read_bytes()).hexdigest() == digest, name
    assert (FIX / project / "LICENSE").read_text().lstrip().startswith(("Apache License", "MIT"))


# --- EasyR1 ----------------------------------------------------------------------------------------------------

EASYR1_MATH = f"{FIX / 'easyr1' / 'math.py'}:compute_score"


def test_easyr1_batch_compute_score(caplog: pytest.LogCaptureFixture) -> None:
    """EasyR1's math.py compute_score(reward_inputs: list[dict], format_weight=0.1): one call per batch with
    {"response", "response_length", "ground_truth"} dicts, each score's "overall" the reward (0.9 accuracy + 0.1
    format), said at the start; it was taken for grpokit's fn(completions, examples) by its arity and failed."""
    pytest.importorskip("mathruler")
    ex = Example("What is 3 + 4?", "7")
    texts = ["<think>3 + 4 = 7</think> so \\boxed{7}", "\\boxed{7}", "<think>hm</think> \\boxed{8}", "seven"]
    with caplog.at_level(logging.INFO, logger="grpokit.rewards.manager"):
        with RewardManager([(EASYR1_MATH, 1.0)], timeout_s=60) as m:
            assert m.rewards[0].convention == "easyr1"
            res = m.score(texts, [ex] * 4, completion_ids=[[1, 2, 3]] * 4)
    assert res.failures == [] and res.rewards == pytest.approx([1.0, 0.9, 0.1, 0.0])
    started = [r.getMessage() for r in caplog.records if r.getMessage().startswith("reward compute_score")]
    assert started and "easyr1-style function (EasyR1: compute_score(reward_inputs)" in started[0]


def test_easyr1_reward_function_kwargs() -> None:
    """EasyR1's dapo.py compute_score needs max_response_length, overlong_buffer_length and overlong_penalty_factor
    (EasyR1's reward_function_kwargs): named alone it is refused in one line naming them; bound with
    functools.partial, as EasyR1 binds them, its overlong punishment reads response_length in tokens."""
    dapo = _module(FIX / "easyr1" / "dapo.py")
    with pytest.raises(ValueError, match=r"needs \['max_response_length', 'overlong_buffer_length', 'overlong_pen"):
        RewardManager([(f"{FIX / 'easyr1' / 'dapo.py'}:compute_score", 1.0)], timeout_s=60)
    bound = functools.partial(
        dapo.compute_score, max_response_length=20, overlong_buffer_length=10, overlong_penalty_factor=1.0
    )
    ex = Example("What is 3 + 4?", "7")
    with RewardManager([(bound, 1.0)], isolation="inline") as m:
        assert m.rewards[0].convention == "easyr1"
        res = m.score(["Answer: 7", "Answer: 7", "Answer: 8"], [ex] * 3, completion_ids=[[0] * 5, [0] * 15, [0] * 25])
    assert res.failures == [] and res.rewards == pytest.approx([1.0, 0.5, -2.0])  # +-1 accuracy, -(L - 10)/10


# --- Oat / understand-r1-zero ----------------------------------------------------------------------------------

OAT = FIX / "oat" / "math_grader.py"


def test_oat_grader_info_and_reward() -> None:
    """understand-r1-zero's boxed_reward_fn(model_response, gt_answer) and answer_tag_reward_fn (the r1 template),
    called once per completion as Oat's MATHOracle calls them, each returning (info, reward)."""
    pytest.importorskip("pylatexenc")
    ex = Example("What is 1/2 + 1/4?", "\\frac{3}{4}")
    specs = [(f"{OAT}:boxed_reward_fn", 1.0), (f"{OAT}:answer_tag_reward_fn", 1.0)]
    texts = ["so \\boxed{\\frac{3}{4}}", "</think> <answer>0.75</answer>", "so \\boxed{1/2}"]
    with RewardManager(specs, timeout_s=60) as m:
        assert [r.convention for r in m.rewards] == ["oat", "oat"]
        res = m.score(texts, [ex] * 3)
    assert res.failures == []
    assert res.per_reward["boxed_reward_fn"] == [1.0, 0.0, 0.0]
    assert res.per_reward["answer_tag_reward_fn"] == [0.0, 1.0, 0.0]


# --- ms-swift ORM classes --------------------------------------------------------------------------------------

# ms-swift is not installed here: a swift.rewards with ORM as swift/rewards/orm.py defines it, and its orms dict
SWIFT_REWARDS = '''
class ORM:
    def __init__(self, args=None, **kwargs):
        self.args = args

    def __call__(self, **kwargs):
        raise NotImplementedError


orms = {}
'''


def test_swift_orm_class(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """ms-swift's gsm8k_plugin.py: GSM8KAccuracy and GSM8KFormat are ORM classes, built once and called per batch
    as instance(completions, **kwargs) with the dataset's columns as lists (`solution`); a class was called as a
    function and 'returned a GSM8KAccuracy instead of a list'."""
    (tmp_path / "swift").mkdir()
    (tmp_path / "swift" / "__init__.py").write_text("")
    (tmp_path / "swift" / "rewards.py").write_text(SWIFT_REWARDS)
    monkeypatch.syspath_prepend(str(tmp_path))
    plugin = FIX / "ms_swift" / "gsm8k_plugin.py"
    ex = Example("Natalia sold 48 clips ...", "72", columns={"prompt": "Natalia ...", "solution": "... #### 72"})
    specs = [(f"{plugin}:GSM8KAccuracy", 1.0), (f"{plugin}:GSM8KFormat", 0.5)]
    with RewardManager(specs, isolation="inline") as m:
        assert [r.convention for r in m.rewards] == ["swift", "swift"]
        built = m.rewards[0].fn.fn  # type: ignore[union-attr]
        res = m.score(["so #### 72", "\\boxed{72}", "\\boxed{71}", "72"], [ex] * 4)
        assert m.rewards[0].fn.fn is built  # built once, not per batch  # type: ignore[union-attr]
    assert res.failures == []
    assert res.per_reward["GSM8KAccuracy"] == [1.0, 1.0, 0.0, 0.0]
    assert res.per_reward["GSM8KFormat"] == [1.0, 1.0, 1.0, 0.0]


# --- SkyRL -----------------------------------------------------------------------------------------------------

SKYRL = f"{FIX / 'skyrl' / 'gsm8k_utils.py'}:compute_score"


def test_skyrl_compute_score_reward_spec() -> None:
    """SkyRL's gsm8k compute_score(solution_str, ground_truth) with its data's reward_spec column holding the
    ground truth (SkyRL's GSM8kEnv reads extras["reward_spec"]["ground_truth"]); the row has no other answer."""
    row = {"prompt": [{"role": "user", "content": "q"}], "env_class": "gsm8k"}
    row["reward_spec"] = {"method": "rule", "ground_truth": "72"}
    ex = Example("q", "", columns=row)
    for convention in ("auto", "skyrl"):
        with RewardManager([(SKYRL, 1.0)], timeout_s=60, convention=convention) as m:
            assert m.rewards[0].convention == ("verl" if convention == "auto" else "skyrl")
            assert m.score(["so #### 72", "so #### 71", "72"], [ex] * 3).rewards == [1.0, 0.0, 0.0]


# --- declared, named, or refused -------------------------------------------------------------------------------

GRADER = '''
def grade(response, answer):
    """1 where the response is the answer (one completion at a time)."""
    return {"seen": response}, float(response.strip() == answer)
'''


def test_an_ambiguous_function_is_refused_and_reward_convention_names_it(tmp_path: Path) -> None:
    """grade(response, answer) reads as grpokit's batch fn(completions, examples) or an Oat grader: refused in one
    line naming both and reward.convention; with reward.convention=oat it scores each completion (in the worker,
    which imports the spec itself, and in this process). An unknown convention is one line naming the choices."""
    (tmp_path / "grader.py").write_text(GRADER)
    spec = f"{tmp_path / 'grader.py'}:grade"
    with pytest.raises(ValueError, match=r"ambiguous: grpokit's fn\(completions, examples\).*reward.convention=grpok"):
        RewardManager([(spec, 1.0)], timeout_s=60)
    ex = Example("What is 3 + 4?", "7")
    for isolation in ("auto", "inline"):
        with RewardManager([(spec, 1.0), ("exact_numeric", 1.0)], convention="oat", isolation=isolation) as m:
            assert [r.convention for r in m.rewards] == ["oat", "grpokit"]  # the built-ins keep theirs
            assert m.score(["7", " 7 ", "8"], [ex] * 3).per_reward["grade"] == [1.0, 1.0, 0.0]
    with pytest.raises(ValueError, match=r"reward.convention='easyR1' is not a convention: use auto or one of \["):
        RewardManager([(spec, 1.0)], convention="easyR1")


def test_names_and_annotations_decide_not_arity() -> None:
    """Two positional parameters are grpokit's only when nothing else is declared."""

    def easyr1(reward_inputs, format_weight=0.1):  # EasyR1's names
        return []

    def annotated(inputs: list[dict[str, Any]]) -> list[dict[str, float]]:  # EasyR1's annotation
        return []

    def one(text: str, reference: str) -> float:  # one completion at a time
        return 0.0

    def both(model_response, ground_truth):
        return 0.0

    assert [detect_convention(f) for f in (easyr1, annotated, one)] == ["easyr1", "easyr1", "oat"]
    assert detect_convention(lambda c, e: [0.0] * len(c)) == "grpokit"
    with pytest.raises(ValueError, match=r"more than one reward convention: oat \(model_response\), verl \(ground_t"):
        detect_convention(both)


def test_reward_convention_is_a_config_key() -> None:
    from grpokit.config import build_config

    assert build_config("grpo").reward.convention == "auto"
    assert build_config("grpo", overrides=["reward.convention=easyr1"]).reward.convention == "easyr1"


def test_the_docs_table_has_a_row_for_each_project() -> None:
    """docs/bring_your_job.md's convention table names this file's tests, and each exists."""
    text = DOC.read_text()
    table = text[text.index("## Reward calling conventions") :]
    table = table[: table.index("\n\n", table.index("| convention |"))]
    named = set(re.findall(r"test_conventions_projects\.py::(test_\w+)", table))
    projects = {"test_easyr1_batch_compute_score", "test_oat_grader_info_and_reward", "test_swift_orm_class"}
    assert named >= projects | {"test_skyrl_compute_score_reward_spec"} and all(n in globals() for n in named)
