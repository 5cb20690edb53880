"""The `grpokit` command line's grammar: one function per core subcommand that adds its parser, arguments and
help to argparse's sub-parsers and returns it (`grpokit.cli` attaches the command that runs it). The grammar of the
subcommands whose commands live in their own packages (`preflight`, `watch`, `audit-reward`, `config
from-trl/from-verl`) is here too; `package_commands` attaches their commands.

Every option has help text (tests/cli/test_cli_flags.py walks them all). `train` and `preflight` also take TRL's
flag names (`--learning_rate`, `--num_generations`, ...), translated by meaning (`grpokit.cli.trl_flags`); the
same concept has one name in every subcommand (`--task`, `--model`, `--recipe`, `--set`, `--out`).

Every numeric option is range-checked as it is parsed, with the ranges `--set` uses (`grpokit.config.ranges`) or
its own: a value out of range, infinity or NaN is one line naming the flag, the value and the range
(`grpokit train: error: argument --steps: 0 is out of range: use 1 or more (at most 10000000)`), exit 2, as is
every other usage error (`Parser.error`)."""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable
from typing import Any, NoReturn

from ..config.ranges import BIG, DAY_S, HUGE, RANGES, R, Range, positive
from ..data.registry import TASKS
from ..models.embedded import EMBEDDED_MODELS


class Parser(argparse.ArgumentParser):
    """argparse with usage errors on one line (`grpokit train: error: argument --steps: ...; see grpokit train
    --help`), exit 2: the usage block argparse prints first hid the line that says what is wrong."""

    def error(self, message: str) -> NoReturn:
        print(f"{self.prog}: error: {message}; see {self.prog} --help", file=sys.stderr)
        sys.exit(2)


def number(kind: Callable[[str], float], rng: Range) -> Callable[[str], float]:
    """An argparse `type`: the text read as `kind` (int or float) within `rng`; ArgumentTypeError naming the value
    and the range otherwise (argparse adds the flag). Infinity and NaN are outside every range."""

    def parse(text: str) -> float:
        try:
            x = float(text)
            value = kind(text) if kind is int else x
        except (ValueError, OverflowError):
            raise argparse.ArgumentTypeError(f"{text!r} is not {'an integer' if kind is int else 'a number'}") from None
        if not math.isfinite(x) or not rng.holds(value):
            raise argparse.ArgumentTypeError(f"{text} is out of range: {rng.fix()}")
        return value

    parse.__name__ = kind.__name__  # argparse names the type in its own messages
    return parse


COUNT = number(int, R(1, BIG))  # prompts, samples, steps: 1 or more
SECONDS = number(float, positive(DAY_S))  # a wait or a timeout: > 0, at most a day

HEALTH_LINE = """\
each step prints one health line, at most 100 columns (docs/diagnosis.md, "The health line"):
  step s/N          steps done of train.steps
  reward            mean reward of the step's samples, every generation round (reward/mean)
  acc               share of the samples the correctness reward passes (reward/accuracy)
  H                 mean token entropy of the policy on its own samples, nats (entropy/token_mean)
  zv                share of groups with no correctness signal, every sample equally right or wrong
                    (zv/acc_frac: what DAPO's filter drops and the collapse detector reads; zv/frac, groups
                    whose rewards are all equal, for a log without accuracy)
  all✓ all✗         the parts of zv, each a share of ALL groups: groups whose samples are all correct /
                    all wrong (zv/all_correct, zv/all_wrong); all✓ + all✗ = zv for a 0/1 accuracy
  kl                KL to the reference, k3 estimator (kl_ref/k3); only with a reference policy
  clip lo/hi        % of tokens clipped below 1 - eps_low / above 1 + eps_high; only when one is above 0
                    (with one optimizer step per batch the ratio is 1 and nothing is clipped)
  len               mean response length, tokens (length/mean)
  turns calls ✗     multi-turn runs: policy turns and tool calls per episode, and the share of tried tool
                    calls that failed (malformed, raised or timed out) (episode/*)
  rounds            generation rounds of the step; only when dynamic sampling drew more than one
  Ns                seconds the step took (time/step)
  eta               time left: steps left x mean seconds of a step so far, evaluations and checkpoints
                    included (on a terminal it is in the progress bar, next to the elapsed time)
  ⚠n                n alerts active now; an alert is printed with its fix when it starts (again when its
                    severity or reading changes) and one line says when it clears
a line that would pass 100 columns leaves out Ns, len, clip lo/hi, H, turns, in that order, until it fits.
also printed: held-out accuracy when measured (eval before training, eval step N, eval after step N) and
one line per checkpoint saved (path, size on disk, seconds); on a terminal, progress bars of the steps
and of the phase running now (rollout, score, advantages, update i/n, signals, eval, checkpoint).
"""


def recipes(sub: Any) -> Parser:
    r = sub.add_parser("recipes", help="list recipes, or `recipes show NAME` for the resolved config")
    r.add_argument("action", nargs="?", choices=["list", "show"], default="list", help="list (default) or show")
    r.add_argument("name", nargs="?", help="the recipe to show (with show)")
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
    t.add_argument("--steps", type=COUNT, default=None, help="training steps: rollout batches (train.steps)")
    t.add_argument("--out", default=None, help="parent directory of run directories (default runs/)")
    t.add_argument(
        "--output-dir",
        "--output_dir",
        dest="output_dir",
        default=None,
        help="exactly this run directory, as TRL's output_dir (refused if it holds a run)",
    )
    t.add_argument("--name", default=None, help="run directory name")
    t.add_argument(
        "--seed", type=number(int, RANGES["train.seed"]), default=None, help="random seed (train.seed; TRL's --seed)"
    )
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
    t.add_argument("--eval-samples", type=COUNT, default=1, help="samples per held-out prompt in eval")
    t.add_argument("--autopilot", action="store_true", help="apply detectors' fixes within train.autopilot_* bounds")
    reward_module(t)
    t.epilog = (t.epilog or "") + TRL_FLAGS
    return t


TRL_FLAGS = """
TRL's flag names are accepted too and translated by meaning, as --config translates a TRL GRPOConfig file
(grpokit config from-trl): e.g. --learning_rate 3e-6 -> train.lr, --num_generations 4 -> rollout.group_size
(with the prompts per step its default per_device_train_batch_size means), --max_steps -> train.steps; each
says on one line what it became. A TRL flag with no grpokit meaning is refused with the reason.
"""


def reward_module(p: Parser) -> None:
    """`--reward-module`: where a TRL recipe's reward_funcs names live (open-r1's recipes name their own)."""
    p.add_argument(
        "--reward-module",
        "--reward_module",
        dest="reward_module",
        default=None,
        metavar="MODULE",
        help="module or .py file where a TRL recipe's reward_funcs names live: NAME resolves to NAME or NAME_reward "
        "there, as open-r1's get_reward_funcs names them (e.g. --reward-module open_r1.rewards)",
    )


def doctor(sub: Any) -> Parser:
    dr = sub.add_parser(
        "doctor", help="diagnose trainings from their logs (grpokit, TRL, verl, W&B exports, TensorBoard, consoles)"
    )
    dr.add_argument("path", help="a log file, a run directory, or a folder of runs (each diagnosed on its own)")
    dr.add_argument("--json", action="store_true", help="print the diagnosis as JSON")
    dr.add_argument("--run", default=None, metavar="NAME", help="only the run of that name under PATH")
    dr.add_argument(
        "--details", action="store_true", help="a folder of several runs: each run's diagnosis after the summary table"
    )
    return dr


def report(sub: Any) -> Parser:
    rp = sub.add_parser("report", help="HTML page + PNG plots of a run's health, with alert markers")
    rp.add_argument("path", help="a run directory or a log file (any format grpokit doctor reads)")
    rp.add_argument("--out", default=None, help="output directory (default: <run>/report)")
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
    cp.add_argument("--out", default=None, help="output directory (default comparisons/compare-<stamp>, beside runs/)")
    return cp


def evaluate(sub: Any) -> Parser:
    e = sub.add_parser("eval", help="held-out accuracy of a model on a task")
    e.add_argument("--model", default="smollm2-135m-instruct", help="embedded name, tiny, or a model directory")
    e.add_argument("--task", default="add1", help="built-in task, a data file or directory, or a datasets name")
    e.add_argument("--n", type=COUNT, default=100, help="held-out prompts")
    e.add_argument("--samples", type=COUNT, default=1, help="samples per prompt")
    e.add_argument(
        "--temperature",
        type=number(float, RANGES["rollout.eval_temperature"]),
        default=1.0,
        help="sampling temperature (default 1.0)",
    )
    e.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="a config override, repeatable")
    e.add_argument("--json", action="store_true", help="print the result as JSON")
    return e


def demo(sub: Any) -> Parser:
    d = sub.add_parser("demo", help="DAPO on single-digit addition, embedded model: about 4 minutes on 2 CPU cores")
    d.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="a config override, repeatable")
    d.add_argument("--eval-samples", type=COUNT, default=5, help="samples per held-out prompt in eval")
    return d


def preflight(sub: Any) -> Parser:
    p = sub.add_parser("preflight", help="measure the starting model on the data before training")
    p.add_argument("--model", default="smollm2-135m-instruct", help="smollm2-135m-instruct, tiny, or a local dir")
    p.add_argument("--task", default=None, help="built-in task (add1, add2, mul1, countdown) or a data file")
    p.add_argument("--recipe", default="grpo", help="recipe whose rollout settings to use")
    p.add_argument("--prompts", type=COUNT, default=32, help="prompts to sample (default 32)")
    p.add_argument(
        "--group-size",
        type=number(int, RANGES["rollout.group_size"]),
        default=None,
        help="samples per prompt (default: the recipe's)",
    )
    p.add_argument(
        "--max-new-tokens",
        type=number(int, RANGES["rollout.max_new_tokens"]),
        default=None,
        help="new tokens per sample (default: the recipe's)",
    )
    p.add_argument("--out", default=None, help="output directory (default runs/preflight-<stamp>)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="a config override, repeatable")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    return p


def watch(sub: Any) -> Parser:
    w = sub.add_parser(
        "watch",
        help="follow a training log while it is written (verl, TRL, TensorBoard, OpenRLHF, grpokit) and raise alerts",
    )
    w.add_argument("path", help="the log file or run directory being written (it may not exist yet)")
    w.add_argument("--interval", type=SECONDS, default=2.0, help="seconds between reads (default 2)")
    w.add_argument("--idle-exit", type=SECONDS, default=None, metavar="S", help="stop after S seconds with no new row")
    w.add_argument("--on-critical", default=None, metavar="CMD", help="shell command run once on the first critical")
    w.add_argument("--notify", default=None, metavar="URL", help="Slack/Discord incoming webhook for each alert event")
    w.add_argument("--run", default=None, metavar="NAME", help="the run to follow when PATH holds several")
    return w


def audit_reward(sub: Any) -> Parser:
    from ..audit.probes import PROBES

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
    p.add_argument(
        "--timeout",
        type=number(float, RANGES["reward.timeout_s"]),
        default=10.0,
        help="seconds per call, as reward.timeout_s",
    )
    p.add_argument(
        "--threshold",
        type=number(float, R(-HUGE, HUGE)),
        default=0.5,
        help="score counted as 'accepted' (labeled mode)",
    )
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    return p


def config(sub: Any) -> Parser:
    from ..config.compat.cli import ACTIONS

    c = sub.add_parser("config", help="write the grpokit config equivalent to another trainer's config")
    c.add_argument("action", choices=ACTIONS, help="the trainer of the sources (from: recognise it)")
    c.add_argument(
        "sources",
        nargs=argparse.REMAINDER,
        help="a config file; verl/SkyRL: files and/or key=value overrides; ms-swift/OpenRLHF: their --flags",
    )
    c.add_argument("--out", "-o", default=None, help="write the YAML here (default: stdout)")
    reward_module(c)  # from-trl: where a recipe's reward_funcs names live, as on grpokit train
    return c


def package_commands(sub: Any) -> None:
    """The subcommands whose commands live in their own packages: each parser here, its `cmd_*` there."""
    from ..audit.command import cmd_audit_reward
    from ..config.compat.cli import cmd_config
    from ..monitor.watch import cmd_watch
    from ..preflight.command import cmd_preflight

    preflight(sub).set_defaults(fn=cmd_preflight)
    watch(sub).set_defaults(fn=cmd_watch)
    audit_reward(sub).set_defaults(fn=cmd_audit_reward)
    config(sub).set_defaults(fn=cmd_config)
