"""Run the tests that train a model (marker `trains`) under several seeds and CPU kernel sets; print a table.

A test that trains a tiny model and asserts what happened is only correct if it holds whatever kernels sum the
numbers: AVX2, AVX-512 and AMX kernels add in different orders, and a chaotic tiny run can go another way. This
script runs `pytest -m trains` once per (kernel set, seed, bf16 setting) in a fresh process with

* ``ATEN_CPU_CAPABILITY`` = ``default`` (no SIMD), ``avx2`` (with ``MKL_ENABLE_INSTRUCTIONS=AVX2``) and the best
  this CPU has (``avx512`` where present; on an AVX2-only CPU that is ``avx2`` itself, run once);
* ``GRPOKIT_TEST_SEED`` = each seed (the tiny runs' `train.seed`: model init, prompts, sampling);
* ``GRPOKIT_CPU_BF16`` = 0 by default; ``--bf16`` adds runs with 1 (bf16 autocast where `auto` is asked for);

and prints test x (kernel set, seed) -> ok / FAIL, with each test's recorded margins (the `margin` fixture) as
min .. max over the runs. Exit status 1 when any cell failed.

    .venv/bin/python scripts/kernel_matrix.py --seeds 0 1 2 3 4 --out docs/kernel_matrix.md
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import os
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def kernel_sets() -> list[str]:
    """default, avx2 and this CPU's best (avx512 when it has AVX-512), each once."""
    try:
        flags = set(next(x for x in open("/proc/cpuinfo").read().splitlines() if x.startswith("flags")).split())
    except (OSError, StopIteration):
        flags = set()
    sets = ["default"]
    if "avx2" in flags:
        sets.append("avx2")
    if "avx512f" in flags:
        sets.append("avx512")
    return sets


def env_for(kernels: str, seed: int, bf16: int) -> dict[str, str]:
    env = dict(os.environ, ATEN_CPU_CAPABILITY=kernels, GRPOKIT_TEST_SEED=str(seed), GRPOKIT_CPU_BF16=str(bf16))
    env.pop("MKL_ENABLE_INSTRUCTIONS", None)
    if kernels == "avx2":
        env["MKL_ENABLE_INSTRUCTIONS"] = "AVX2"
    env.setdefault("HF_HUB_OFFLINE", "1")
    return env


@contextlib.contextmanager
def held(lock: Path | None):
    """An exclusive flock on `lock` while a cell runs, so other torch jobs sharing the machine wait their turn."""
    if lock is None:
        yield
        return
    with open(lock, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def run_cell(
    kernels: str, seed: int, bf16: int, marker: str, extra: list[str], lock: Path | None, paths: list[str]
) -> dict:
    """{test id: {"ok": bool, "skipped": bool, "margins": {name: value}}} of one pytest run."""
    with tempfile.TemporaryDirectory() as tmp, held(lock):
        xml = Path(tmp) / "junit.xml"
        cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", marker, f"--junitxml={xml}"]
        t0 = time.time()
        proc = subprocess.run(
            [*cmd, *extra, *paths], cwd=ROOT, env=env_for(kernels, seed, bf16), capture_output=True, text=True
        )
        took = time.time() - t0
        if not xml.exists():
            sys.exit(f"pytest wrote no report ({kernels}, seed {seed}):\n{proc.stdout[-3000:]}{proc.stderr[-3000:]}")
        results = {}
        for case in ET.parse(xml).getroot().iter("testcase"):
            name = f"{case.get('classname', '').rsplit('.', 1)[-1]}::{case.get('name')}"
            failed = case.find("failure") is not None or case.find("error") is not None
            skipped = case.find("skipped") is not None
            margins = {
                p.get("name", "")[len("margin:") :]: float(p.get("value", "nan"))
                for p in case.iter("property")
                if p.get("name", "").startswith("margin:")
            }
            results[name] = {"ok": not failed, "skipped": skipped, "margins": margins}
    print(
        f"  {kernels:8s} seed {seed} bf16={bf16}: {sum(r['ok'] for r in results.values())}/{len(results)} passed "
        f"in {took:.0f} s",
        flush=True,
    )
    return results


def table(cells: dict[tuple[str, int, int], dict[str, dict]]) -> str:
    cols = sorted(cells)
    tests = sorted({t for r in cells.values() for t in r})
    head = ["test"] + [f"{k} s{s}" + (" bf16" if b else "") for k, s, b in cols] + ["margins (min .. max)"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for t in tests:
        row, spans = [t], defaultdict(list)
        for c in cols:
            r = cells[c].get(t)
            row.append("-" if r is None else ("skip" if r["skipped"] else ("ok" if r["ok"] else "**FAIL**")))
            for k, v in (r or {}).get("margins", {}).items():
                spans[k].append(v)
        row.append("; ".join(f"{k} {min(v):.4g} .. {max(v):.4g}" for k, v in sorted(spans.items())))
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    ap.add_argument("--kernels", nargs="+", default=None, help="kernel sets (default: default, avx2, the best)")
    ap.add_argument("--bf16", action="store_true", help="also run every cell with GRPOKIT_CPU_BF16=1")
    ap.add_argument("--marker", default="trains", help="pytest -m expression (default: trains)")
    ap.add_argument("--out", type=Path, default=None, help="also write the table (markdown) here")
    ap.add_argument("--lock", type=Path, default=None, help="hold an flock on this file while each cell runs")
    ap.add_argument("--paths", nargs="+", default=["tests"], help="test files or folders (default: tests)")
    ap.add_argument("pytest_args", nargs="*", help="passed to pytest (e.g. -k learns)")
    args = ap.parse_args()
    sets = args.kernels or kernel_sets()
    cells = {}
    started = time.strftime("%Y-%m-%d %H:%M")
    print(f"kernel sets {sets}, seeds {args.seeds}, marker {args.marker!r}", flush=True)
    for kernels in sets:
        for seed in args.seeds:
            for bf16 in (0, 1) if args.bf16 else (0,):
                cell = (kernels, seed, bf16)
                cells[cell] = run_cell(*cell, args.marker, args.pytest_args, args.lock, args.paths)
    text = table(cells)
    print(text)
    if args.out:
        from grpokit.models.precision import machine_lines

        header = [f"Measured {started} with `python scripts/kernel_matrix.py {' '.join(sys.argv[1:])}`", ""]
        header += [f"    {line}" for line in machine_lines()] + [""]
        args.out.write_text("\n".join(header) + text + "\n")
    return int(any(not r["ok"] for c in cells.values() for r in c.values()))


if __name__ == "__main__":
    sys.exit(main())
