"""The `grpokit audit-reward` subcommand."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from .probes import PROBES
from .render import render
from .report import audit_reward


def cmd_audit_reward(args: argparse.Namespace) -> int:
    """Exit status 0 when the audit passes, 1 when it found issues, 2 for a bad reward spec or labeled file."""
    try:
        report = audit_reward(
            args.reward, labeled=args.labeled, kind=args.kind, timeout_s=args.timeout, threshold=args.threshold
        )
    except (ValueError, FileNotFoundError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(json.dumps(report, default=float) if args.json else render(report))
    return 0 if report["verdict"] == "PASS" else 1


def register_cli(sub: Any) -> argparse.ArgumentParser:
    """Add the `audit-reward` subcommand to an argparse sub-parsers object."""
    p = sub.add_parser(
        "audit-reward", help="test a reward function: equivalences, hacks, determinism, timeouts (exit 1 on issues)"
    )
    p.add_argument(
        "--reward",
        required=True,
        help="built-in name, module:function, path.py:function, or a reward model directory (a local "
        "*ForSequenceClassification model with safetensors weights: audited for noise against a verifier)",
    )
    p.add_argument("--labeled", default=None, help="JSONL with completion, answer (prompt), expected true/false")
    p.add_argument("--kind", choices=sorted(PROBES), default="numeric", help="probe set (without --labeled)")
    p.add_argument("--timeout", type=float, default=10.0, help="seconds per call, as reward.timeout_s")
    p.add_argument("--threshold", type=float, default=0.5, help="score counted as 'accepted' (labeled mode)")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.set_defaults(fn=cmd_audit_reward)
    return p
