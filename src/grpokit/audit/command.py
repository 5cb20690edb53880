"""The `grpokit audit-reward` subcommand."""

from __future__ import annotations

import argparse
import json
import sys

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
