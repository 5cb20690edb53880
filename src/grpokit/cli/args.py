"""The `grpokit` command line's grammar: one function per core subcommand that adds its parser, arguments and
help to argparse's sub-parsers and returns it (`grpokit.cli` attaches the command that runs it). Subcommands of
their own packages register themselves (`preflight`, `audit-reward`, `config from-trl/from-verl`)."""

from __future__ import annotations

import argparse
from typing import Any

from ..data.registry import TASKS
from ..models.embedded import EMBEDDED_MODELS

Parser = argparse.ArgumentParser

HEALTH_LINE = """\
each step prints one health line (docs/diagnosis.md, "The health line"):
  step s/N          steps done of train.steps
  reward            mean reward of the step's samples (reward/mean)
  acc               share of samples the correctness reward passes (reward/accuracy)
  H                 mean token entropy of the policy on its own samples, nats (entropy/token_mean)
  zv                share of groups whose samples all got the same reward: no gradient (zv/frac)
  (acc ✓ a ✗ b)     of all groups: share all-correct (✓) and all-wrong (✗)
  kl                KL to the reference, k3 estimator (kl_ref/k3), when the recipe has a reference
  clip lo/hi        share of tokens clipped below 1 - eps_low / above 1 + eps_high
  len               mean response length, tokens
  rounds            generation rounds of the step, when dynamic sampling drew more than one
  Ns                seconds the step took
  ⚠ mode, ...       the failure modes active now (the alert itself is printed when it starts, with its fix)
"""


def recipes(sub: Any) -> Parser:
    r = sub.add_parser("recipes", help="list recipes, or `recipes show NAME` for the resolved config")
    r.add_argument("action", nargs="?", choices=["list", "show"], default="list")
    r.add_argument("name", nargs="?")
    return r


def methods(sub: Any) -> Parser:
    return sub.add_parser("methods", help="list every registered algorithm component")


def train(sub: Any) -> Parser:
    t = sub.add_parser(
        "train",
        help="train a model with a recipe",
        epilog=HEALTH_LINE,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    t.add_argument("--recipe", default="grpo", help="recipe name (grpokit recipes) or a YAML path")
    t.add_argument(
        "--task",
        default=None,
        help=f"built-in task ({', '.join(TASKS.primary())}), a data file or directory, or a datasets name",
    )
    t.add_argument(
        "--model",
        default=None,
        help=f"{', '.join(EMBEDDED_MODELS)} (embedded; default), tiny, or a from_pretrained name or directory",
    )
    t.add_argument("--steps", type=int, default=None)
    t.add_argument("--out", default=None, help="parent directory of run directories (default runs/)")
    t.add_argument(
        "--output-dir", default=None, help="exactly this run directory, as TRL's output_dir (refused if it holds a run)"
    )
    t.add_argument("--name", default=None, help="run directory name")
    t.add_argument("--seed", type=int, default=None)
    t.add_argument("--config", default=None, help="YAML file with config sections to apply over the recipe")
    t.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="e.g. --set algo.eps_high=0.28")
    t.add_argument(
        "--resume",
        nargs="?",
        const=True,
        default=None,
        metavar="RUN_DIR",
        help="continue a run from its last checkpoint (bare --resume: the --output-dir run)",
    )
    t.add_argument("--eval-samples", type=int, default=1, help="samples per held-out prompt in eval")
    t.add_argument("--autopilot", action="store_true", help="apply detectors' fixes within train.autopilot_* bounds")
    return t


def doctor(sub: Any) -> Parser:
    dr = sub.add_parser(
        "doctor", help="diagnose trainings from their logs (grpokit, TRL, verl, W&B exports, TensorBoard, consoles)"
    )
    dr.add_argument("path", help="a log file, a run directory, or a folder of runs (each diagnosed on its own)")
    dr.add_argument("--json", action="store_true")
    dr.add_argument("--run", default=None, metavar="NAME", help="only the run of that name under PATH")
    return dr


def report(sub: Any) -> Parser:
    rp = sub.add_parser("report", help="HTML page + PNG plots of a run's health, with alert markers")
    rp.add_argument("path")
    rp.add_argument("--out", default=None)
    rp.add_argument("--run", default=None, metavar="NAME", help="the run to report when PATH holds several")
    return rp


def compare(sub: Any) -> Parser:
    cp = sub.add_parser("compare", help="overlay several runs' curves (HTML + PNGs + TensorBoard) with a final table")
    cp.add_argument("runs", nargs="+", help="run directories or logs (a folder of runs adds each of them)")
    cp.add_argument(
        "--x",
        default="tokens",
        choices=["tokens", "samples", "steps", "seconds"],
        help="x axis: cumulative generated tokens (default), generated samples, training steps, or wall seconds",
    )
    cp.add_argument("--out", default=None, help="output directory (default runs/compare-<stamp>)")
    return cp


def evaluate(sub: Any) -> Parser:
    e = sub.add_parser("eval", help="held-out accuracy of a model on a task")
    e.add_argument("--model", default="smollm2-135m-instruct")
    e.add_argument("--task", default="add1")
    e.add_argument("--n", type=int, default=100, help="held-out prompts")
    e.add_argument("--samples", type=int, default=1, help="samples per prompt")
    e.add_argument("--temperature", type=float, default=1.0)
    e.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    e.add_argument("--json", action="store_true")
    return e


def demo(sub: Any) -> Parser:
    d = sub.add_parser("demo", help="about 10 minutes of DAPO on single-digit addition with the embedded model")
    d.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    d.add_argument("--eval-samples", type=int, default=5, help="samples per held-out prompt in eval")
    return d


def self_registering(sub: Any) -> None:
    """Subcommands whose packages add their own parser and command."""
    from ..audit import register_cli as register_audit
    from ..config.compat.cli import register_cli as register_config
    from ..monitor.watch import register_cli as register_watch
    from ..preflight import register_cli as register_preflight

    register_preflight(sub)
    register_watch(sub)
    register_audit(sub)
    register_config(sub)
