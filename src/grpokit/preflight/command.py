"""The `grpokit preflight` subcommand: arguments, config, run, print."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path


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
