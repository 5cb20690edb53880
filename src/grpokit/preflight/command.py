"""The `grpokit preflight` subcommand: arguments, config, run, print."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any


def _progress(line: str) -> None:
    """Progress lines go to stderr, so `--json` output stays one JSON document on stdout."""
    print(f"preflight: {line}", file=sys.stderr, flush=True)


def cmd_preflight(args: argparse.Namespace) -> int:
    from ..config import build_config
    from .measure import run_preflight  # torch and transformers: imported when the command runs, not for --help
    from .render import render

    overrides = list(args.set or [])
    if args.group_size is not None:
        overrides.append(f"rollout.group_size={args.group_size}")
    if args.max_new_tokens is not None:
        overrides.append(f"rollout.max_new_tokens={args.max_new_tokens}")
    task = args.task or "add1"
    cfg = build_config(args.recipe, overrides, **{"model.name": args.model, "data.task": task})
    out = Path(args.out or f"runs/preflight-{time.strftime('%Y%m%d-%H%M%S')}")
    try:
        report = run_preflight(cfg, args.prompts, out, progress=_progress)
    except (ValueError, FileNotFoundError) as e:  # unknown task, missing file, bad reward spec
        print(f"error: {e}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(report, default=float))
    else:
        print(render(report))
    return 0


def register_cli(sub: Any) -> argparse.ArgumentParser:
    """Add the `preflight` subcommand to an argparse sub-parsers object."""
    p = sub.add_parser("preflight", help="measure the starting model on the data before training")
    p.add_argument("--model", default="smollm2-135m-instruct", help="smollm2-135m-instruct, tiny, or a local dir")
    p.add_argument("--task", default=None, help="built-in task (add1, add2, mul1, countdown) or a data file")
    p.add_argument("--recipe", default="grpo", help="recipe whose rollout settings to use")
    p.add_argument("--prompts", type=int, default=32, help="prompts to sample (default 32)")
    p.add_argument("--group-size", type=int, default=None, help="samples per prompt (default: the recipe's)")
    p.add_argument("--max-new-tokens", type=int, default=None, help="new tokens per sample (default: the recipe's)")
    p.add_argument("--out", default=None, help="output directory (default runs/preflight-<stamp>)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="a config override, repeatable")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.set_defaults(fn=cmd_preflight)
    return p
