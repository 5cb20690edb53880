"""Models by any `from_pretrained` name or path: names in the Hugging Face cache, offline errors, remote code,
attention implementation and dtype; importing the CLI leaves HF_HUB_OFFLINE to the environment."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

from grpokit.config import ConfigError, build_config
from grpokit.models import ModelSpecError, build_tiny_model, load_model_and_tokenizer

REPO = "grpokit-tests/tiny-llama"
REVISION = "0123456789abcdef0123456789abcdef01234567"


def _save_tiny(directory: Path, tokenizer: Any, seed: int = 5) -> None:
    build_tiny_model(tokenizer=tokenizer, seed=seed).save_pretrained(directory)
    tokenizer.save_pretrained(directory)


def _hub_cache(root: Path, tokenizer: Any) -> Path:
    """A Hugging Face hub cache holding REPO, laid out as `hf download` leaves it (refs/main -> snapshot)."""
    repo = root / f"models--{REPO.replace('/', '--')}"
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(REVISION)
    _save_tiny(repo / "snapshots" / REVISION, tokenizer)
    return root


def test_a_hub_name_already_in_the_hf_cache_loads_offline(tmp_path: Path, smollm_tokenizer: Any) -> None:
    cache = _hub_cache(tmp_path / "hub", smollm_tokenizer)
    script = (
        "import json, torch\n"
        "from grpokit.models import load_model_and_tokenizer, build_tiny_model\n"
        f"model, tok = load_model_and_tokenizer({REPO!r}, dtype='bf16', attn_implementation='eager')\n"
        "ref = build_tiny_model(tokenizer=tok, seed=5)\n"
        "same = all(torch.equal(p.float(), q.to(torch.bfloat16).float())\n"
        "           for p, q in zip(model.parameters(), ref.parameters()))\n"
        "print(json.dumps({'dtype': str(model.dtype), 'attn': model.config._attn_implementation, 'same': same,\n"
        "                  'pad': tok.padding_side, 'vocab': len(tok)}))\n"
    )
    env = {**os.environ, "HF_HUB_CACHE": str(cache), "HF_HUB_OFFLINE": "1"}
    proc = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    facts = json.loads(proc.stdout.strip().splitlines()[-1])
    assert facts == {
        "dtype": "torch.bfloat16",
        "attn": "eager",
        "same": True,
        "pad": "left",
        "vocab": len(smollm_tokenizer),
    }


def test_a_name_offline_and_not_cached_says_so() -> None:
    from huggingface_hub import constants

    assert constants.HF_HUB_OFFLINE  # the tests run offline (conftest / Makefile)
    with pytest.raises(ModelSpecError) as err:
        load_model_and_tokenizer("grpokit-tests/not-cached-anywhere")
    msg = str(err.value)
    assert (
        "--model 'grpokit-tests/not-cached-anywhere' is neither a local directory nor in the Hugging Face cache" in msg
    )
    assert "HF_HUB_OFFLINE=1 keeps the Hub off" in msg and "hf download grpokit-tests/not-cached-anywhere" in msg
    with pytest.raises(ModelSpecError, match=r"'\./models/none': no such directory.*HuggingFaceTB/SmolLM2"):
        load_model_and_tokenizer("./models/none")


CONFIG_CODE = "from transformers import LlamaConfig\n\n\nclass TinyXConfig(LlamaConfig):\n    model_type = 'tinyx'\n"
MODEL_CODE = (
    "from transformers import LlamaForCausalLM\n\nfrom .configuration_tinyx import TinyXConfig\n\n\n"
    "class TinyXForCausalLM(LlamaForCausalLM):\n    config_class = TinyXConfig\n    grpokit_remote = True\n"
)


def test_trust_remote_code_runs_the_repositorys_own_model_class(tmp_path: Path, smollm_tokenizer: Any) -> None:
    _save_tiny(tmp_path, smollm_tokenizer)
    (tmp_path / "configuration_tinyx.py").write_text(CONFIG_CODE)
    (tmp_path / "modeling_tinyx.py").write_text(MODEL_CODE)
    config = json.loads((tmp_path / "config.json").read_text())
    config |= {
        "model_type": "tinyx",
        "architectures": ["TinyXForCausalLM"],
        "auto_map": {
            "AutoConfig": "configuration_tinyx.TinyXConfig",
            "AutoModelForCausalLM": "modeling_tinyx.TinyXForCausalLM",
        },
    }
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(ModelSpecError, match=r"comes with its own model code.*set model.trust_remote_code=true"):
        load_model_and_tokenizer(str(tmp_path), dtype="fp32")
    model, _ = load_model_and_tokenizer(str(tmp_path), dtype="fp32", trust_remote_code=True)
    assert type(model).__name__ == "TinyXForCausalLM" and model.grpokit_remote


def test_attn_implementation_on_the_tiny_model() -> None:
    model, _ = load_model_and_tokenizer("tiny", dtype="fp32", attn_implementation="eager")
    assert model.config._attn_implementation == "eager"


def test_model_dtype_maps_onto_precision() -> None:
    assert build_config("grpo", overrides=["model.dtype=bfloat16"]).model.precision == "bf16"
    assert build_config("grpo", overrides=["model.dtype=float32"]).model.precision == "fp32"
    assert build_config("grpo").model.precision == "auto"
    with pytest.raises(ConfigError, match=r"model.dtype='float16' is not supported.*use bfloat16"):
        build_config("grpo", overrides=["model.dtype=float16"])
    with pytest.raises(ConfigError, match=r"model.dtype='bfloat16' loads bf16 weights but model.precision='fp32'"):
        build_config("grpo", overrides=["model.dtype=bfloat16", "model.precision=fp32"])
    model, _ = load_model_and_tokenizer(
        "tiny", dtype=build_config("grpo", overrides=["model.dtype=bfloat16"]).model.precision
    )
    assert model.dtype == torch.bfloat16


def test_importing_the_cli_leaves_hf_hub_offline_to_the_environment() -> None:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE")
    }
    code = "import os, grpokit.cli; print([k for k in os.environ if k.endswith('_OFFLINE')])"
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip() == "[]"
