"""Wall time of grpokit's light commands, each a fresh process, next to `python -c "import torch"` and `trl --help`
measured in the same run (the ratio, not the absolute, carries across machines).

    .venv/bin/python bench/cli_startup.py            # 5 runs each; median and max, seconds
    .venv/bin/python bench/cli_startup.py --out startup.md   # the table as markdown

The target (issue: commands that answer at once): `grpokit --help` under one second.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LOGS = ROOT / "tests" / "fixtures" / "logs"


def commands() -> dict[str, list[str]]:
    grpokit = [sys.executable, "-m", "grpokit"]
    cases = {
        "python -c pass (floor)": [sys.executable, "-c", "pass"],
        "python -c 'import torch'": [sys.executable, "-c", "import torch"],
        "grpokit --help": [*grpokit, "--help"],
        "grpokit --version": [*grpokit, "--version"],
        "grpokit recipes": [*grpokit, "recipes"],
        "grpokit train --help": [*grpokit, "train", "--help"],
        "grpokit doctor <TRL run>": [*grpokit, "doctor", str(LOGS / "trl_healthy")],
        "grpokit methods (imports the torch components)": [*grpokit, "methods"],
    }
    trl = shutil.which("trl") or str(Path(sys.executable).parent / "trl")
    if Path(trl).exists():
        cases["trl --help"] = [trl, "--help"]
    return cases


def timed(cmd: list[str], runs: int) -> list[float]:
    out = []
    for _ in range(runs):
        t = time.perf_counter()
        subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        out.append(time.perf_counter() - t)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--out", default=None, help="also write the table to this Markdown file")
    args = ap.parse_args()
    lines = ["| command | median s | max s |", "|---|---:|---:|"]
    for name, cmd in commands().items():
        t = timed(cmd, args.runs)
        lines.append(f"| `{name}` | {statistics.median(t):.2f} | {max(t):.2f} |")
        print(lines[-1], flush=True)
    if args.out:
        Path(args.out).write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
