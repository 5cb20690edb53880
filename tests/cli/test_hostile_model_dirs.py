"""A `--model` directory is foreign input (issue 38): a chat template that reaches for Python internals, and
weights that are only a pickle, each end in one line naming the file and the fix (exit 2), never a traceback, and
never run the directory's code. Real tiny model directories (the SmolLM2 tokenizer files, seeded random weights)
and the real command line in a subprocess."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from grpokit.data.chat import ChatTemplateError, render_prompt
from grpokit.data.example import Example
from grpokit.models import ModelSpecError, build_tiny_model, load_model_and_tokenizer

pytestmark = pytest.mark.slow

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json")
SMALL = ["--set", "train.steps=1", "--set", "rollout.prompts_per_step=2", "--set", "rollout.group_size=2"]
SMALL += ["--set", "rollout.max_new_tokens=4", "--set", "train.eval_every=0", "--set", "model.precision=fp32"]


def model_dir(root: Path, embedded: Path) -> Path:
    """A tiny Llama directory with SmolLM2's tokenizer files (its chat template then in tokenizer_config.json)."""
    from transformers import AutoTokenizer

    root.mkdir(parents=True)
    for name in TOKENIZER_FILES:
        shutil.copy(embedded / name, root / name)
    config = json.loads((root / "tokenizer_config.json").read_text())
    config["chat_template"] = (embedded / "chat_template.jinja").read_text()
    (root / "tokenizer_config.json").write_text(json.dumps(config))
    build_tiny_model(tokenizer=AutoTokenizer.from_pretrained(root)).save_pretrained(root)
    return root


def hostile_template(marker: Path) -> str:
    """A template that would run a shell command through a function's globals (jinja's sandbox stops it)."""
    return (
        "{% for m in messages %}{{ m['content'] }}{% endfor %}"
        f"{{{{ cycler.__init__.__globals__.os.popen('touch {marker}').read() }}}}"
    )


def grpokit(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    return subprocess.run(
        [sys.executable, "-m", "grpokit.cli", *args], capture_output=True, text=True, timeout=300, env=env, cwd=cwd
    )


def one_line(stderr: str) -> str:
    lines = [ln for ln in stderr.splitlines() if ln.strip()]
    assert "Traceback" not in stderr, stderr[-3000:]
    return lines[-1]


@pytest.mark.parametrize("where", ["tokenizer_config.json", "chat_template.jinja"])
def test_a_hostile_chat_template_is_one_line_naming_its_file(
    where: str, tmp_path: Path, embedded_model_dir: Path
) -> None:
    model = model_dir(tmp_path / "model", embedded_model_dir)
    marker = tmp_path / "pwned"
    if where == "chat_template.jinja":  # transformers reads a template file before tokenizer_config.json's
        (model / where).write_text(hostile_template(marker))
    else:
        config = json.loads((model / where).read_text())
        (model / where).write_text(json.dumps({**config, "chat_template": hostile_template(marker)}))
    p = grpokit("train", "--model", str(model), "--out", str(tmp_path / "runs"), *SMALL, cwd=tmp_path)
    line = one_line(p.stderr)
    assert p.returncode == 2, p.stderr[-2000:]
    assert line.startswith(f"error: {model / where}: the chat template failed to render (SecurityError: ")
    assert "jinja's sandbox" in line and "__init__" in line
    assert not marker.exists()


def test_a_template_error_in_the_library_is_a_chat_template_error(tmp_path: Path, embedded_model_dir: Path) -> None:
    from transformers import AutoTokenizer

    model = model_dir(tmp_path / "model", embedded_model_dir)
    (model / "chat_template.jinja").write_text("{{ raise_exception('this template takes no system role') }}")
    tok = AutoTokenizer.from_pretrained(model)
    with pytest.raises(ChatTemplateError) as e:
        render_prompt(tok, Example(prompt="2 + 2?", answer="4"), system_prompt="Be brief.")
    assert str(e.value).startswith(f"{model / 'chat_template.jinja'}: the chat template failed to render (")
    assert "this template takes no system role" in str(e.value)


def test_a_model_with_only_pickle_weights_is_refused_in_one_line(tmp_path: Path, embedded_model_dir: Path) -> None:
    model = model_dir(tmp_path / "model", embedded_model_dir)
    weights = build_tiny_model(tokenizer=None, vocab_size=49152).state_dict()
    (model / "model.safetensors").unlink()
    marker = tmp_path / "pwned"

    class Payload:
        def __reduce__(self) -> tuple:
            return (os.system, (f"touch {marker}",))

    torch.save({**weights, "x": Payload()}, model / "pytorch_model.bin")
    with pytest.raises(ModelSpecError) as e:
        load_model_and_tokenizer(str(model))
    p = grpokit("train", "--model", str(model), "--out", str(tmp_path / "runs"), *SMALL, cwd=tmp_path)
    line = one_line(p.stderr)
    assert p.returncode == ModelSpecError.exit_code and line == f"error: {e.value}"
    where = repr(str(model))
    assert str(e.value) == (
        f"--model {str(model)!r} holds only pickle weights (pytorch_model.bin), and loading a pickle can run any "
        "code it carries: grpokit loads safetensors only. Convert it to model.safetensors once, where you trust the "
        f'file: python -c "from transformers import AutoModelForCausalLM as M; M.from_pretrained({where})'
        f'.save_pretrained({where})"'
    )
    assert not marker.exists()
