"""`grpokit` command line: recipes | methods | train | eval | doctor | report | compare | demo."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

import yaml

from ..common import safe_logging
from ..common.errors import GrpokitError
from ..common.safe_text import safe_text
from ..common.version import VERSION
from .trl_flags import apply_trl_flags

ERROR_CHARS = 20_000  # an error message past this keeps its head and tail (common.safe_text)


def _quiet_libraries() -> None:
    """Keep the terminal for grpokit's own progress: no per-shard bars or info logs from transformers. Set through
    the environment variables transformers and huggingface_hub read when first imported (a user's own setting
    wins), so a command that never loads a model never imports them."""
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")


def cmd_recipes(args: argparse.Namespace) -> int:
    from ..config import list_recipes, load_recipe

    if args.action == "show":  # the bound components: the algorithm registry (torch) is imported here only
        from ..algos.components import component_keys
        from ..config import build_config

        if not args.name:
            print("usage: grpokit recipes show NAME", file=sys.stderr)
            return 2
        cfg = build_config(args.name)
        meta = load_recipe(args.name)
        if meta.get("description"):
            math = f"docs/math.md {meta.get('spec', '')}"
            print(f"# {cfg.recipe}: {meta['description']} ({meta.get('paper', '')}; {math})")
        print("# components, each with its bound parameters (the paper's default where the recipe sets none);")
        print("# change one with --set algo.<parameter>=<value>, or the component with --set algo.<slot>=<name>")
        bound = {slot: {name: params} for slot, (name, params) in cfg.algo.bound().items()}
        print(yaml.safe_dump({"components": bound}, sort_keys=False, default_flow_style=None), end="")
        body = cfg.to_dict()
        body["algo"] = {k: v for k, v in body["algo"].items() if k not in component_keys()}
        print(yaml.safe_dump(body, sort_keys=False), end="")
        return 0
    for name, body in list_recipes().items():
        print(f"{name:<14} {body.get('description', '')}  [{body.get('spec', '')}]")
    return 0


def cmd_methods(args: argparse.Namespace) -> int:
    from ..algos import list_methods

    for kind, entries in list_methods().items():
        print(f"{kind}:")
        for name, doc in entries.items():
            print(f"  {name:<24} {doc}")
    return 0


def _config_from_args(args: argparse.Namespace):
    from ..config import build_config

    direct = {
        "train.autopilot": True if args.autopilot else None,
        "data.task": args.task,
        "model.name": args.model,
        "train.steps": args.steps,
        "train.out": args.out,
        "train.output_dir": args.output_dir,
        "train.seed": args.seed,
    }
    return build_config(args.recipe, overrides=args.set, config_file=args.config, job=True, **direct)


def _new_run_dir(cfg: Any, name: str | None) -> Path:
    from ..run.output_dir import claim_new_run

    return claim_new_run(cfg.train.out, cfg.train.output_dir, cfg.recipe, Path(cfg.data.task).stem, name)


def _rank0_run_dir(cfg: Any, name: str | None) -> Path:
    """Under torchrun every rank joins the job here and takes rank 0's run directory (names carry a timestamp)."""
    from ..parallel.distributed import broadcast_object, init_distributed
    from ..training.session import pick_device

    info = init_distributed(pick_device(cfg.model.device))
    return broadcast_object(_new_run_dir(cfg, name) if info.is_main else None, info)


class _Silent:
    """The display of ranks other than 0: rank 0 alone prints progress, alerts and summaries."""

    def __getattr__(self, name: str) -> Any:
        return lambda *a, **k: None


def _run_training(cfg: Any, run_dir: Path, eval_samples: int, resume: Any = None) -> dict[str, Any]:
    """`grpokit.training.run.run` with the console display (rank 0's), then the run's closing lines."""
    from ..parallel.distributed import DistInfo
    from ..training.run import run
    from .console import Display

    main = DistInfo.detect().is_main
    display = Display(cfg.train.steps) if main else _Silent()
    summary = run(cfg, run_dir, display=display, resume=resume, eval_samples=eval_samples)
    if not main or summary.get("nothing_left"):
        return summary
    before = summary.get("eval_before", {}).get("eval/accuracy")
    after = summary.get("eval_after", {}).get("eval/accuracy")
    if before is not None:
        print(f"held-out accuracy before: {before:.1%}")
    if after is not None:
        print(f"held-out accuracy after:  {after:.1%}")
    print(f"run directory: {safe_text(run_dir, limit=None)}")
    print(f"final model:   {safe_text(summary.get('final_model'), limit=None)}")
    return summary


def _end_note(summary: dict[str, Any]) -> str:
    """What a completed run's outcome adds: why it stopped before its last step, if it did."""
    learned = summary.get("stopped_learned")
    return f"stopped at step {learned['step']} ({learned['mode']}): {learned['message']}" if learned else ""


def cmd_train(args: argparse.Namespace) -> int:
    from ..parallel.distributed import shutdown_distributed

    if args.resume is True:  # bare --resume: the --output-dir run, as TRL's resume_from_checkpoint=True
        if not args.output_dir:
            print("error: --resume without RUN_DIR needs --output-dir DIR (or pass --resume RUN_DIR)", file=sys.stderr)
            return 2
        args.resume = args.output_dir
    from ..run.directory import claimed_run
    from ..run.outcome import outcome_line, read_outcome
    from ..training.interrupts import stop_at_once

    if args.resume:
        from ..training.resume import check_location, refuse_symlinks, repair_logs, require_checkpoint, resume_config
        from ..training.run import Resume, nothing_left

        run_dir = Path(args.resume)
        check_location(run_dir, args.output_dir, args.out, args.name)  # a resume stays in its directory
        flags = {"model": args.model, "task": args.task, "seed": args.seed, "config": args.config, "steps": args.steps}
        flags["recipe"] = None if args.recipe == "grpo" else args.recipe  # grpo is the flag's default
        cfg, diffs = resume_config(run_dir, args.set, flags)  # safe --set honoured (a diff), others refused
        refuse_symlinks(run_dir)
        # one process at a time trains a run; a signal before training starts stops at once, with one line
        ended = outcome_line(read_outcome(run_dir))
        said = f"grpokit: {run_dir} {ended}" if ended else f"grpokit: {run_dir} has no recorded end (killed?)"
        print(safe_text(said, limit=None))  # the folder's name and its recorded end: not grpokit's text
        done = nothing_left(run_dir, cfg.train.steps)
        if done is not None:  # a finished run: said, and left as it is (no claim, no save, no evaluation)
            print(safe_text(done, limit=None))
            return 0
        require_checkpoint(run_dir, cfg.train.steps)  # one there, and not a model-only one short of the end
        with stop_at_once(), claimed_run(run_dir, new=False) as end:
            resume = Resume(diffs, repair_logs(run_dir))
            end.message = _end_note(_run_training(cfg, run_dir, args.eval_samples, resume))
        shutdown_distributed()
        return 0
    cfg = _config_from_args(args)
    with stop_at_once():  # a signal before training starts stops at once; the run directory is then removed
        run_dir = _rank0_run_dir(cfg, args.name)
        with claimed_run(run_dir, new=True) as end:
            end.message = _end_note(_run_training(cfg, run_dir, args.eval_samples))
    shutdown_distributed()
    return 0


def cmd_eval(args: argparse.Namespace) -> int:
    from ..config import build_config
    from ..training.evaluation import evaluate
    from ..training.session import open_session
    from .eval_progress import EvalProgress

    overrides = list(args.set or []) + ["train.steps=0", f"rollout.eval_temperature={args.temperature}"]
    cfg = build_config(
        "grpo", overrides=overrides, **{"data.task": args.task, "model.name": args.model, "data.eval_size": args.n}
    )
    progress = EvalProgress()  # stderr lines while it works; stdout keeps only the result
    progress.say(f"loading model {safe_text(args.model)} and task {safe_text(args.task)} ...")
    session = open_session(cfg)
    try:
        progress.watch(session)
        res = evaluate(session, args.samples, seed=cfg.train.seed + 7919)
    finally:
        session.close()
    res = {k: v for k, v in res.items() if not k.startswith("time/")}
    if args.json:
        print(json.dumps(res))
    else:
        print(
            f"{args.task}: accuracy {res['eval/accuracy']:.1%} over {int(res['eval/n'])} samples, "
            f"mean length {res['eval/length']:.1f} tokens (temperature {args.temperature})"
        )
    return 0


def cmd_doctor(args: argparse.Namespace) -> int:
    from ..monitor.doctor import doctor_main

    # bad input: one line on stderr, exit 2
    return doctor_main(args.path, as_json=args.json, run=args.run, details=args.details)


def cmd_report(args: argparse.Namespace) -> int:
    from ..monitor.report import make_report

    try:
        page = make_report(args.path, args.out, run=args.run)
    except (ValueError, OSError) as e:
        print(safe_text(f"error: {e}"), file=sys.stderr)
        return 2
    print(f"report: {safe_text(page, limit=None)}")
    return 0


def cmd_compare(args: argparse.Namespace) -> int:
    from ..monitor.compare import make_compare

    try:
        page = make_compare(args.runs, args.x, args.out)
    except (ValueError, OSError) as e:
        print(safe_text(f"error: {e}"), file=sys.stderr)
        return 2
    print(f"compare: {safe_text(page, limit=None)}")
    print(f"tensorboard: tensorboard --logdir {safe_text(page.parent / 'tb', limit=None)}")
    return 0


DEMO_OVERRIDES = [
    "train.steps=36",
    "train.lr=2e-5",
    "rollout.prompts_per_step=4",
    "rollout.group_size=8",
    "rollout.max_new_tokens=32",
    "train.eval_every=12",
    "train.save_every=12",
    # the run directory stays under 1 GB: one checkpoint, of the model only (no AdamW state, which is twice the
    # model), and the final model hard-linked to it (docs/training.md, "Disk")
    "train.save_total_limit=1",
    "train.save_only_model=true",
    # end the run when the task is learned (the convergence reading of the advantage-collapse detector), saying so
    "monitor.stop_when_learned=true",
    # add1 is solved within the demo: once nearly every group is all-correct, train on the short batches that
    # remain (opt-in; the default is to stop with an error saying the task is learned) and bound the rounds
    "algo.ds_shortfall=partial",
    "algo.ds_oversample=1",
    "algo.max_gen_rounds=4",
]


def cmd_demo(args: argparse.Namespace) -> int:
    from ..config import build_config

    cfg = build_config("dapo", overrides=DEMO_OVERRIDES + list(args.set or []), **{"data.task": "add1"})
    from ..run.directory import claimed_run

    run_dir = _new_run_dir(cfg, None)
    with claimed_run(run_dir, new=True) as end:
        end.message = _end_note(_run_training(cfg, run_dir, args.eval_samples))
    from ..monitor.doctor import diagnose, render
    from ..monitor.report import make_report

    print(render(diagnose(run_dir)))
    print(f"report:        {make_report(run_dir)}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The `grpokit` parser: each subcommand's arguments from `grpokit.cli.args`, its command from here."""
    from . import args as cli_args

    p = cli_args.Parser(prog="grpokit", description="RL post-training with the GRPO family")
    p.add_argument("--version", action="version", version=f"grpokit {VERSION}")
    sub = p.add_subparsers(dest="command", required=True)
    for add, fn in (
        (cli_args.recipes, cmd_recipes),
        (cli_args.methods, cmd_methods),
        (cli_args.train, cmd_train),
        (cli_args.doctor, cmd_doctor),
        (cli_args.report, cmd_report),
        (cli_args.compare, cmd_compare),
        (cli_args.evaluate, cmd_eval),
    ):
        add(sub).set_defaults(fn=fn)
    cli_args.package_commands(sub)  # preflight, watch, audit-reward, config
    cli_args.demo(sub).set_defaults(fn=cmd_demo)
    return p


def main(argv: list[str] | None = None) -> int:
    args, extra = build_parser().parse_known_args(argv)
    apply_trl_flags(args, extra)  # TRL's flag names on train/preflight, translated by meaning; others refused
    _quiet_libraries()
    records = safe_logging.install()  # every log record escaped and cut, repeats counted (common.safe_logging)
    try:
        try:
            return int(args.fn(args) or 0)
        finally:  # before the line that ends the command, if any
            safe_logging.uninstall()
            if records.summary():
                print(f"grpokit: {records.summary()}", file=sys.stderr)
    except GrpokitError as e:  # a config, model, checkpoint, reward or sampling error: its label and status
        print(
            f"{e.label}: {safe_text(e, limit=ERROR_CHARS, multiline=True)}", file=sys.stderr
        )  # it may quote a reward's message
        return e.exit_code
    except ValueError as e:  # bad data or reward specs found while setting up; GRPOKIT_DEBUG=1 shows the traceback
        if os.environ.get("GRPOKIT_DEBUG"):
            raise
        print(f"error: {safe_text(e, limit=ERROR_CHARS, multiline=True)}", file=sys.stderr)
        return 2
    except BaseException as e:  # a signal, a divergence, a full disk: one line and its status (grpokit.cli.exits)
        from .exits import exit_line

        code = exit_line(e)
        if code is None:
            raise
        return code


if __name__ == "__main__":
    sys.exit(main())
