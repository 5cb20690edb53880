"""Every fenced shell command of README.md and docs/ runs as written, or its page says what it needs (issue 39).

A fenced block (```bash, ```sh, ```shell) runs line by line in `bash`, from one scratch folder shared by every page
(pages in order: README.md, then docs/*.md by name), offline (HF_HUB_OFFLINE=1), with this interpreter's `grpokit`
first on PATH and nothing of tests/ on PYTHONPATH, as a new user's shell would. The scratch folder holds the user's
files the pages name (`USER_FILES`). A command passes when it exits 0; `grpokit doctor` and `grpokit audit-reward`
also when they exit 1, their answer that they found something (a critical mode, a run that never trained as a tiny
random model's run does; a reward hack that scores), never 2 (input they cannot read).

The line just before a fence (blank lines aside) may hold one HTML comment, invisible on the rendered page:

- `<!-- needs: WHAT (why) -->`: the block does not run here; WHAT is one of `NEEDS` (a GPU, the Hugging Face Hub,
  the network, a service such as a verl job or a webhook, more time than a test has, or files that stand for the
  reader's own).
- `<!-- docs-test: OLD => NEW; ... -->`: the block runs with each OLD replaced by NEW first: the small settings a
  training command runs with here (`--steps 20 => --steps 1 --model tiny`). Each OLD must occur in the block.
  `<!-- docs-test: as written -->` runs a block unchanged (what a ```python block needs to be run at all).

A ```python block runs (as a script, in the same folder) only when it carries a `docs-test:` comment; the others
are fragments (`GRPOTrainer(model=..., ...)`).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

import grpokit

ROOT = Path(__file__).parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SHELL = {"bash", "sh", "shell"}
NEEDS = {"gpu", "hub", "network", "service", "time", "your-files"}
FIXTURES = ROOT / "tests" / "fixtures" / "logs"
MARKER = re.compile(r"^<!--\s*(needs|docs-test):\s*(.*?)\s*-->$")
FENCE = re.compile(r"^```(\S*)\s*$")

# the user's own files the pages' commands name, as a reader following them would have them
DATA = "".join(
    f'{{"prompt": "What is {a} + {b}? Answer with just the number.", "answer": "{a + b}"}}\n'
    for a in range(5)
    for b in range(5)
)
USER_FILES = {
    "data.jsonl": DATA,
    "my_rewards.py": (
        "def brevity(completions, **kwargs):  # a TRL-style reward: one float per completion\n"
        "    return [-len(c) / 100 for c in completions]\n\n\n"
        "def accuracy(completions, answer, **kwargs):  # right when the last word is the answer\n"
        "    return [float(c.split()[-1:] == [a]) for c, a in zip(completions, answer)]\n"
    ),
    "labeled.jsonl": (
        '{"completion": "2 + 3 = 5", "answer": "5", "expected": true}\n'
        '{"completion": "The sum is 6", "answer": "5", "expected": false}\n'
        '{"completion": "5", "answer": "5", "expected": true}\n'
        '{"completion": "I do not know.", "answer": "7", "expected": false}\n'
    ),
    "my_trl_grpo_config.yaml": (
        "# a TRL GRPOConfig YAML, as `trl grpo --config` reads it\n"
        "model_name_or_path: tiny\n"
        "dataset_name: data.jsonl\n"
        "reward_funcs: [think_format_reward]\n"
        "learning_rate: 1.0e-6\n"
        "num_generations: 4\n"
        "per_device_train_batch_size: 8\n"
        "max_completion_length: 16\n"
        "max_steps: 1\n"
        "output_dir: runs/trl-style\n"
    ),
}
USER_COPIES = {  # name in the scratch folder -> a real log of the fixtures
    "my-trl-run": FIXTURES / "trl_healthy",  # a TRL output_dir (trainer_state.json)
    "train.log": FIXTURES / "real" / "trl_unsloth_tsc_grpo_first_50_steps" / "docker_run.log",  # a TRL console
}


@dataclass
class Block:
    page: str
    line: int  # 1-based line of the opening fence
    lang: str
    text: str
    kind: str  # "run", "needs" or "docs-test"
    arg: str  # the comment's text after "needs:" / "docs-test:"

    @property
    def id(self) -> str:
        return f"{self.page}:{self.line}"

    def substitutions(self) -> list[tuple[str, str]]:
        if self.kind != "docs-test" or self.arg == "as written":
            return []
        return [tuple(s.strip() for s in part.split("=>", 1)) for part in self.arg.split(";")]  # type: ignore[misc]

    def script(self) -> str:
        text = self.text
        for old, new in self.substitutions():
            text = text.replace(old, new)
        return text


def page_blocks(page: Path) -> list[Block]:
    lines = page.read_text(encoding="utf-8").splitlines()
    out, i = [], 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        end = next(j for j in range(i + 1, len(lines)) if lines[j].startswith("```"))
        before = next((lines[k].strip() for k in range(i - 1, -1, -1) if lines[k].strip()), "")
        marker = MARKER.match(before)
        kind, arg = (marker.group(1), marker.group(2)) if marker else ("run", "")
        text = "\n".join(lines[i + 1 : end]) + "\n"
        out.append(Block(str(page.relative_to(ROOT)), i + 1, m.group(1), text, kind, arg))
        i = end + 1
    return out


BLOCKS = [b for p in PAGES for b in page_blocks(p)]
SHELL_BLOCKS = [b for b in BLOCKS if b.lang in SHELL]
RUNS = [b for b in BLOCKS if (b.lang in SHELL and b.kind != "needs") or (b.lang == "python" and b.kind == "docs-test")]


def commands(text: str) -> list[str]:
    """The block's commands: continuation lines joined, comments and blank lines dropped."""
    joined = re.sub(r"\\\n\s*", " ", text)
    return [ln.strip() for ln in joined.splitlines() if ln.strip() and not ln.strip().startswith("#")]


def test_the_docs_have_shell_blocks_and_every_one_runs_or_says_what_it_needs() -> None:
    assert {b.page for b in SHELL_BLOCKS} >= {"README.md", "docs/training.md", "docs/diagnosis.md"}
    for b in BLOCKS:
        if b.kind == "needs":
            what = b.arg.split()[0] if b.arg else ""
            assert what in NEEDS, f"{b.id}: <!-- needs: {b.arg} -->: say one of {sorted(NEEDS)}, then why"
            assert b.lang in SHELL, f"{b.id}: a needs: comment on a {b.lang or 'plain'} block"
        for old, new in b.substitutions():
            assert old and new and old in b.text, f"{b.id}: docs-test substitution {old!r} is not in the block"
        if b.lang in SHELL and b.kind != "needs":
            for cmd in commands(b.script()):
                # a placeholder (runs/<run>, PATH, ...) cannot run: name a real file or mark the block
                code = re.sub(r"\s+#\s.*$", "", cmd)
                assert not re.search(r"<[a-z_-]+>|\.\.\.|\bPATH\b", code), f"{b.id}: placeholder in {cmd!r}"
    assert len([b for b in SHELL_BLOCKS if b.kind != "needs"]) >= 8


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("reader")
    for name, text in USER_FILES.items():
        (d / name).write_text(text, encoding="utf-8")
    for name, src in USER_COPIES.items():
        (shutil.copytree if src.is_dir() else shutil.copy)(src, d / name)
    return d


def user_env() -> dict[str, str]:
    """A new user's environment: offline, and on PYTHONPATH only the grpokit under test (nothing of tests/, so a
    user's module is found from the working directory or not at all)."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "GRPOKIT_DEBUG")}
    env |= {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "NO_COLOR": "1"}
    env["PYTHONPATH"] = str(Path(grpokit.__file__).parents[1])
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    return env


@pytest.mark.slow
@pytest.mark.parametrize("block", RUNS, ids=[b.id for b in RUNS])
def test_the_command_runs_as_written(block: Block, scratch: Path) -> None:
    if block.lang == "python":
        (scratch / "snippet.py").write_text(block.script(), encoding="utf-8")
        todo = [[sys.executable, "snippet.py"]]
    else:
        todo = [["bash", "-e", "-o", "pipefail", "-c", cmd] for cmd in commands(block.script())]
    for argv in todo:
        p = subprocess.run(argv, cwd=scratch, env=user_env(), capture_output=True, text=True, timeout=300)
        shown = argv[-1] if block.lang != "python" else block.script()
        ok = (0, 1) if argv[-1].startswith(("grpokit doctor ", "grpokit audit-reward ")) else (0,)
        assert p.returncode in ok, f"{block.id}: {shown}\nexit {p.returncode}\n{p.stdout[-2000:]}\n{p.stderr[-3000:]}"


def test_the_global_denominators_of_training_md_add_up_micro_batches() -> None:
    """docs/training.md's `denominators=sum(algos.Denominators.from_mask(m) for m in micro_masks)`, evaluated as
    printed: the micro-batches' sum is the denominator of the whole mini-batch, so each micro-batch's token-mean
    share adds up to the whole batch's token mean."""
    import torch

    from grpokit import algos

    text = (ROOT / "docs" / "training.md").read_text(encoding="utf-8")
    (expr,) = re.findall(r"`(algos\.aggregate\(loss_tok, mask, mode, denominators=sum\(.*?\)\))`", text)
    loss = torch.tensor([[1.0, 2.0, 3.0], [4.0, 0.0, 0.0], [5.0, 6.0, 0.0]])
    full = torch.tensor([[1.0, 1.0, 1.0], [1.0, 0.0, 0.0], [1.0, 1.0, 0.0]])
    micro_masks = [full[:2], full[2:]]
    shares = []
    for loss_tok, mask in zip([loss[:2], loss[2:]], micro_masks):
        shares.append(eval(expr, {"algos": algos, "loss_tok": loss_tok, "mask": mask, "mode": "token-mean",
                                  "micro_masks": micro_masks}))  # fmt: skip
    assert torch.isclose(sum(shares), torch.tensor(21.0 / 6.0))
