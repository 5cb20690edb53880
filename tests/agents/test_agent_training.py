"""Training on episodes: every algorithm switch trains on them as on single responses (the environment's tokens in
context, out of the loss), the environment's reward reaches the batch, a run resumed mid-way gives the rows of a run
never stopped, one-step-off-policy sampling runs episodes too, and the episode signals and records are logged.

The tiny random model almost never samples its EOS token, so its turns would all be cut by rollout.max_new_tokens;
these tests list every third token id as an end of turn (as a model's generation_config may list several EOS ids),
so turns end after a few tokens and episodes run several turns."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from tiny_config import tiny_overrides
from toy_rewards import vowel_frac

from grpokit.config import build_config
from grpokit.rollout import build_engine
from grpokit.training import Trainer, fit
from grpokit.training.session import Session, episodes_of, open_session

pytestmark = pytest.mark.slow

EPISODES = ["agent.environment=toy_envs:Echo", "agent.max_turns=3", "rollout.max_new_tokens=6"]


def short_turns(cfg) -> Session:  # noqa: ANN001
    """The run's session with every third token id ending a turn (module docstring)."""
    session = open_session(cfg)
    vocab = session.model.get_output_embeddings().weight.shape[0]
    session.model.generation_config.eos_token_id = list(range(2, vocab, 3))
    session.engine = episodes_of(session, build_engine(cfg.rollout.engine, session))
    return session


def trainer(tmp: Path, recipe: str, *changes: str) -> Trainer:
    cfg = build_config(recipe, overrides=tiny_overrides(*EPISODES, *changes))
    return Trainer(cfg, tmp, session=short_turns(cfg))


def has_holes(mask: torch.Tensor) -> bool:
    """Some row has an environment token (0) between two policy tokens (1)."""
    for row in mask:
        ones = torch.nonzero(row).flatten()
        if ones.numel() and (row[int(ones[0]) : int(ones[-1]) + 1] == 0).any():
            return True
    return False


RECIPES = ["grpo", "dr_grpo", "dapo", "gspo", "gmpo", "cispo", "gpg", "dapo_tis", "dapo_kl_cov", "t1", "ppo"]


@pytest.mark.parametrize("recipe", RECIPES)
def test_every_recipe_trains_on_episodes(tmp_path: Path, recipe: str) -> None:
    t = trainer(tmp_path, recipe, "train.lr=1e-3", "rollout.group_size=4")
    before = [p.detach().clone() for p in t.model.parameters()]
    res = t.train_step()
    m, b = res.metrics, res.batch
    assert m["episode/turns_mean"] > 1.2 and m["episode/n"] >= 8
    assert m["episode/env_tokens_mean"] > 0 and 0 < m["episode/env_token_frac"] < 1
    assert has_holes(b.raw_mask), "no episode had an environment message between two turns"
    assert (b.mask * (1 - b.raw_mask)).abs().sum() == 0  # the environment's tokens are never in the loss
    assert all(torch.isfinite(torch.tensor(v)) for k, v in m.items() if k.startswith(("actor/", "episode/")))
    moved = sum(float((p.detach() - q).abs().sum()) for p, q in zip(t.model.parameters(), before))
    assert moved > 0, "the policy did not change"
    t.rewards.close()
    t.session.close()


def test_the_environments_reward_is_added_to_the_reward_functions(tmp_path: Path) -> None:
    t = trainer(tmp_path, "grpo")
    b = t.train_step().batch
    env = torch.tensor([0.5 if e["ended_by"] == "answer" else 0.0 for e in b.episodes])
    assert env.sum() > 0
    functions = torch.tensor(vowel_frac(b.texts, []), dtype=torch.float32)  # reward.functions of TINY
    torch.testing.assert_close(b.scores, functions + env)
    torch.testing.assert_close(b.rewards, b.scores)  # grpo shapes nothing
    t.session.close()


def rows(run_dir: Path) -> list[dict]:
    return [r for r in map(json.loads, (run_dir / "metrics.jsonl").read_text().splitlines()) if "time/step" in r]


def test_a_run_resumed_mid_way_gives_the_rows_of_a_run_never_stopped(tmp_path: Path) -> None:
    extra = ("train.save_every=2", "train.lr=1e-3", "train.steps=4")
    straight = trainer(tmp_path / "a", "dapo", *extra)
    fit(straight, None, eval_before=False)
    first = trainer(tmp_path / "b", "dapo", *extra[:2], "train.steps=2")
    fit(first, None, eval_before=False)
    resumed = trainer(tmp_path / "b", "dapo", *extra)
    assert resumed.restore() == 2
    fit(resumed, None, eval_before=False)
    a, b = rows(tmp_path / "a"), rows(tmp_path / "b")
    assert [r["step"] for r in b] == [1, 2, 3, 4]
    for ra, rb in zip(a, b):
        for key in ("reward/mean", "episode/turns_mean", "episode/env_tokens_mean", "actor/loss"):
            assert ra[key] == pytest.approx(rb[key], rel=1e-4, abs=1e-6), (rb["step"], key)
    for pa, pb in zip(straight.model.parameters(), resumed.model.parameters()):
        torch.testing.assert_close(pa, pb, rtol=1e-5, atol=1e-6)
    logged = [json.loads(x) for x in (tmp_path / "b" / "completions.jsonl").read_text().splitlines()]
    episodes = [s["episode"] for s in logged if "episode" in s]
    assert episodes and all(e["turns"][0]["role"] == "assistant" for e in episodes)
    assert {e["ended_by"] for e in episodes} <= {"answer", "turn_limit", "context_limit", "length_limit"}


def test_one_step_off_policy_sampling_runs_episodes(tmp_path: Path) -> None:
    t = trainer(tmp_path, "grpo", "rollout.max_staleness=1", "train.steps=3")
    fit(t, None, eval_before=False)
    got = rows(tmp_path)
    assert [r["rollout/staleness"] for r in got] == [0.0, 1.0, 1.0]
    assert all(r["episode/turns_mean"] > 1.2 for r in got)


def test_trl_environment_factory_tools_run_in_training(tmp_path: Path) -> None:
    """A TRL-convention environment's tools are shown in the prompt (SmolLM2's template has no tool support: the
    system prompt lists them with the <tool_call> format)."""
    cfg = build_config("grpo", overrides=tiny_overrides("agent.environment=toy_envs:Tally"))
    t = Trainer(cfg, tmp_path, session=short_turns(cfg))
    prompt = t.tokenizer.decode(t.prompt_tokens[0])
    assert '"name": "add"' in prompt and "<tool_call>" in prompt
    assert t.session.agent.schemas[0]["function"]["parameters"]["properties"]["n"]["type"] == "integer"
    t.session.close()


EPISODE_REWARD = '''
def turns_and_seen(completions, environments, **kwargs):
    """TRL's multi-turn convention: each completion is the episode's messages; environments are the episodes'."""
    assert all(isinstance(c, list) and c[0]["role"] == "assistant" for c in completions)
    return [len(c) + 10.0 * env.seen for c, env in zip(completions, environments)]
'''


def test_trl_rewards_of_a_multi_turn_run_get_the_episode_and_its_environment(tmp_path: Path) -> None:
    """In training, a TRL-style reward gets each episode's messages (policy turns and the environment's) as its
    completion and the episode's environment in `environments` (issue 39; docs/agents.md)."""
    (tmp_path / "episode_reward.py").write_text(EPISODE_REWARD)
    t = trainer(tmp_path, "grpo", f"reward.functions=[{tmp_path / 'episode_reward.py'}:turns_and_seen]")
    b = t.train_step().batch
    env = torch.tensor([0.5 if e["ended_by"] == "answer" else 0.0 for e in b.episodes])
    expected = torch.tensor([len(e["turns"]) + 10.0 * e["environment"]["seen"] for e in b.episodes])
    torch.testing.assert_close(b.scores, expected + env)
    t.session.close()


def test_trls_2048_environment_and_its_reward_train_unchanged(tmp_path: Path) -> None:
    """TRL's examples/scripts/grpo_2048.py, vendored byte for byte: its Game2048Env as agent.environment (TRL's
    environment_factory) and its reward_score(environments, **kwargs) as the reward: each episode's reward is its
    game's score (issue 39; docs/agents.md)."""
    pytest.importorskip("peft")
    game = Path(__file__).parents[1] / "fixtures" / "conventions" / "trl" / "grpo_2048.py"
    t = trainer(tmp_path, "grpo", f"agent.environment={game}:Game2048Env", f"reward.functions=[{game}:reward_score]")
    b = t.train_step().batch
    scores = torch.tensor([float(e["environment"]["score"]) for e in b.episodes])
    torch.testing.assert_close(b.scores, scores)  # no get_reward(): the environment adds nothing itself
    assert all(len(e["environment"]["board"]) == 4 for e in b.episodes)
    t.session.close()
