"""Fuzzing the readers of everything grpokit is handed (issue 29): generated malformed input for the config loader,
the data loader, the checkpoint and run-directory readers and every log reader of `grpokit doctor`.

Each example runs under a time limit (SIGALRM raising `Hang`, a BaseException no reader catches) and an
address-space limit (RLIMIT_AS a fixed amount above the process's size: a blow-up is a MemoryError). The outcome
must be one of: the input read; the documented exception (ConfigError, ValueError naming the file and line,
CheckpointError, ResumeError / RunInUseError); a counted skip; for the command line, exit 2 with one line on
stderr. Never a traceback of another type, a hang, or a write outside the run directory (a sentinel folder beside
the run is compared before and after). Example counts are bounded and the generation derandomized: the whole
module runs in well under a minute, the same way every time (`GRPOKIT_FUZZ_SCALE=N`: N times the examples, drawn
at random).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import resource
import signal
import string
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

SECONDS = 10  # per example; a quadratic reader on these inputs takes minutes
HEADROOM = 1 << 30  # address space an example may add (a YAML alias bomb needed 5.6 GiB)
# GRPOKIT_FUZZ_SCALE=10: ten times the examples, drawn at random (a deeper search than the suite's fixed one)
SCALE = int(os.environ.get("GRPOKIT_FUZZ_SCALE", "1"))


def fuzz(n: int) -> settings:
    """Hypothesis settings of one fuzz test: `n` examples (times SCALE), reproducible unless scaled, no example
    database on disk."""
    return settings(
        max_examples=n * SCALE,
        deadline=None,
        derandomize=SCALE == 1,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture, HealthCheck.data_too_large],
    )


class Hang(BaseException):
    """An example ran past SECONDS."""


def _vm_size() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmSize:"):
            return int(line.split()[1]) * 1024
    return 0


def _alarm(signum: int, frame: Any) -> None:
    raise Hang(f"an input took more than {SECONDS} s")


@contextlib.contextmanager
def bounded() -> Iterator[None]:
    """The time and memory limits of one example."""
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    limit = _vm_size() + HEADROOM
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    previous = signal.signal(signal.SIGALRM, _alarm)
    resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
    signal.setitimer(signal.ITIMER_REAL, SECONDS)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


def tree_digest(root: Path) -> str:
    """Every path and file content under `root`: a write there changes it."""
    h = hashlib.sha256()
    for p in sorted(root.rglob("*")):
        h.update(str(p.relative_to(root)).encode())
        if p.is_file() and not p.is_symlink():
            h.update(p.read_bytes())
    return h.hexdigest()


@contextlib.contextmanager
def sandbox(tmp: Path) -> Iterator[Path]:
    """A fresh run directory beside an `outside` folder holding a file the run directory links to; the outside
    must be unchanged afterwards."""
    import shutil

    base = tmp / "case"
    shutil.rmtree(base, ignore_errors=True)
    outside, run = base / "outside", base / "run"
    outside.mkdir(parents=True)
    run.mkdir()
    (outside / "precious.jsonl").write_text('{"step": 1, "mine": true}\n')
    before = tree_digest(outside)
    yield run
    assert tree_digest(outside) == before, "a reader wrote outside the run directory"


# ------------------------------------------------------------------------------------------------- generators

SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=20),
)
JSON = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)
KEYS = st.sampled_from(
    ["train", "algo", "rollout", "data", "model", "reward", "monitor", "critic", "recipe", "steps", "lr",
     "eps_high", "group_size", "step", "data_position", "kl_coef", "precision", "log_history", "loss", "reward"]
)  # fmt: skip
CONFIG_LIKE = st.recursive(
    SCALARS, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(KEYS, inner, max_size=4), max_leaves=6
)


@st.composite
def deep(draw: st.DrawFn) -> str:
    """YAML or JSON nested to a random depth (hundreds of levels overflow recursive parsers)."""
    levels = draw(st.one_of(st.sampled_from([1500, 3000]), st.integers(1, 3000)))
    opener, closer = draw(st.sampled_from([("[", "]"), ("{a: ", "}"), ('{"a": ', "}")]))
    return opener * levels + "1" + closer * levels


@st.composite
def alias_bomb(draw: st.DrawFn) -> str:
    """Nested YAML anchors and aliases: `width`^`levels` values once expanded, a few hundred bytes of text."""
    levels, width = draw(st.integers(2, 9)), draw(st.integers(2, 12))
    parts = ["&a0 [" + ", ".join(["1"] * width) + "]"]
    parts += [f"&a{i} [" + ", ".join([f"*a{i - 1}"] * width) + "]" for i in range(1, levels)]
    key = draw(st.sampled_from(["train:\n  steps", "algo:\n  eps_high", "rollout:\n  group_size", "x"]))
    return f"{key}: [" + ", ".join(parts) + "]\n"


def mutated(text: str | bytes) -> st.SearchStrategy[bytes]:
    """`text` cut, with bytes flipped, or with garbage inserted."""
    data = text.encode() if isinstance(text, str) else text

    @st.composite
    def build(draw: st.DrawFn) -> bytes:
        out = bytearray(data)
        for _ in range(draw(st.integers(1, 4))):
            op = draw(st.sampled_from(["cut", "flip", "insert"]))
            at = draw(st.integers(0, max(0, len(out) - 1)))
            if op == "cut":
                del out[at:]
            elif op == "flip" and out:
                out[at] = draw(st.integers(0, 255))
            else:
                out[at:at] = draw(st.binary(max_size=30))
        return bytes(out)

    return build()


YAML_TEXT = st.one_of(
    CONFIG_LIKE.map(yaml.safe_dump),
    deep(),
    alias_bomb(),
    st.text(alphabet=string.printable, max_size=200),
    st.binary(max_size=200).map(lambda b: b.decode("latin-1")),
    mutated("train:\n  steps: 3\n  lr: 1.0e-5\nalgo:\n  eps_high: 0.28\n").map(lambda b: b.decode("latin-1")),
)


# ----------------------------------------------------------------------------------------------- config loader


@fuzz(60)
@given(text=YAML_TEXT)
def test_config_file_is_read_or_refused_with_a_config_error(text: str, tmp_path: Path) -> None:
    from grpokit.config import ConfigError, build_config

    f = tmp_path / "c.yaml"
    f.write_text(text, encoding="utf-8", errors="surrogateescape")
    with bounded():
        try:
            build_config("grpo", config_file=str(f))
        except ConfigError:
            pass


@fuzz(60)
@given(value=YAML_TEXT, key=st.sampled_from(["train.steps", "algo.eps_high", "reward.functions", "monitor.x"]))
def test_set_override_is_read_or_refused_with_a_config_error(value: str, key: str) -> None:
    from grpokit.config import ConfigError, build_config

    with bounded():
        try:
            build_config("grpo", overrides=[f"{key}={value}"])
        except ConfigError:
            pass


def test_config_error_on_the_command_line_is_exit_2_and_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from grpokit.cli.main import main

    for i, text in enumerate(["[" * 4000, "a: &a [*a]\n", "train: {steps: [" + "&x [1,1]," * 3 + "]}", "\x00\xff"]):
        f = tmp_path / f"{i}.yaml"
        f.write_text(text, encoding="utf-8", errors="surrogateescape")
        with bounded():
            code = main(["train", "--model", "tiny", "--config", str(f), "--out", str(tmp_path / "runs")])
        err = capsys.readouterr().err
        assert code == 2 and "Traceback" not in err and len(err.strip().splitlines()) == 1, err
        assert not (tmp_path / "runs").exists()


# ------------------------------------------------------------------------------------------------- data loader

MESSAGE = st.fixed_dictionaries({"role": st.sampled_from(["user", "system", "assistant", 3, None])}, optional={
    "content": st.one_of(st.text(max_size=10), st.none(), st.integers(), st.lists(st.text(max_size=3), max_size=2))
})  # fmt: skip
RECORD = st.one_of(
    JSON,
    st.fixed_dictionaries(
        {},
        optional={
            "prompt": st.one_of(JSON, st.lists(MESSAGE, max_size=3), st.text(max_size=20)),
            "answer": st.one_of(JSON, st.text(max_size=10)),
            "id": JSON,
        },
    ),
)
LINE = st.one_of(
    RECORD.map(lambda r: json.dumps(r).encode()),
    st.binary(max_size=40),
    mutated('{"prompt": "What is 2 plus 2?", "answer": "4"}'),
    deep().map(str.encode),
)


@fuzz(80)
@given(lines=st.lists(LINE, max_size=8))
def test_jsonl_data_is_read_or_refused_naming_file_and_line(lines: list[bytes], tmp_path: Path) -> None:
    from grpokit.data.example import Example
    from grpokit.data.loaders import load_jsonl

    f = tmp_path / "d.jsonl"
    f.write_bytes(b"\n".join(lines) + b"\n")
    with bounded():
        try:
            examples = load_jsonl(f)
        except ValueError as e:
            assert str(f) in str(e) and len(str(e)) < 2000, e  # names the file; bounded, even for a huge value
            return
    assert examples and all(isinstance(x, Example) and x.prompt.strip() for x in examples)


@fuzz(30)
@given(text=mutated("prompt,answer\nWhat is 1 plus 1?,2\nWhat is 2 plus 2?,4\n"))
def test_csv_data_is_read_or_refused_with_a_value_error(
    text: bytes, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from grpokit.data.loaders import load_examples

    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path / "cache"))  # datasets' cache stays in the test's folder
    f = tmp_path / "d.csv"
    f.write_bytes(text)
    with bounded():
        try:
            load_examples(str(f))
        except ValueError as e:
            assert str(f) in str(e), e


# ---------------------------------------------------------------------------------- checkpoint and run directory

STATE = st.one_of(
    JSON.map(lambda v: json.dumps(v).encode()),
    st.fixed_dictionaries(
        {"step": st.one_of(st.integers(0, 10), JSON)},
        optional={k: st.one_of(st.integers(0, 10), st.floats(), JSON) for k in
                  ("data_position", "group_counter", "kl_coef", "entropy_coef", "precision", "log_sizes")},
    ).map(lambda v: json.dumps(v).encode()),
    mutated('{"step": 2, "data_position": 4, "group_counter": 4, "kl_coef": 0.0, "entropy_coef": 0.0}'),
    deep().map(str.encode),
)  # fmt: skip


@fuzz(80)
@given(state=STATE)
def test_checkpoint_state_is_read_or_a_checkpoint_error(state: bytes, tmp_path: Path) -> None:
    from grpokit.run.checkpoint import CheckpointError, read_state, recorded_precision
    from grpokit.training.checkpointing import STATE_FIELDS

    with sandbox(tmp_path) as run:
        ckpt = run / "checkpoints" / "step_2" / "trainer_state"
        ckpt.mkdir(parents=True)
        (ckpt / "state.json").write_bytes(state)
        with bounded():
            try:
                got = read_state(ckpt.parent, STATE_FIELDS)
            except CheckpointError:
                got = None
            precision = recorded_precision(run)
        if got is not None:
            assert all(isinstance(got[k], t) and not isinstance(got[k], bool) for k, t in STATE_FIELDS.items())
        assert precision is None or isinstance(precision, str)


LOG_LINE = st.one_of(
    JSON.map(lambda v: json.dumps(v).encode()),
    st.fixed_dictionaries({"step": JSON}, optional={"after_step": JSON, "reward/mean": JSON}).map(
        lambda v: json.dumps(v).encode()
    ),
    st.integers(0, 5).map(lambda s: json.dumps({"step": s, "reward/mean": 0.5, "time/step": 1.0}).encode()),
    st.binary(max_size=30),
    deep().map(str.encode),
)


@fuzz(60)
@given(
    logs=st.dictionaries(
        st.sampled_from(["metrics.jsonl", "completions.jsonl", "alerts.jsonl", "interventions.jsonl"]),
        st.lists(LOG_LINE, max_size=6),
        max_size=4,
    ),
    sizes=st.one_of(JSON, st.dictionaries(st.sampled_from(["metrics.jsonl", "alerts.jsonl"]), JSON, max_size=2)),
    link=st.booleans(),
    step=st.integers(0, 5),
    keep=st.booleans(),
)
def test_run_logs_are_repaired_and_cut_back_without_an_exception(
    logs: dict[str, list[bytes]], sizes: Any, link: bool, step: int, keep: bool, tmp_path: Path
) -> None:
    from grpokit.run.writer import RunWriter
    from grpokit.training.resume import ResumeError, is_row, refuse_symlinks, repair_logs

    with sandbox(tmp_path) as run:
        for name, lines in logs.items():
            (run / name).write_bytes(b"\n".join(lines))
        if link:  # a log that points outside the run: refused, never followed
            (run / "alerts.jsonl").unlink(missing_ok=True)
            (run / "alerts.jsonl").symlink_to(run.parent / "outside" / "precious.jsonl")
        with bounded():
            try:
                refuse_symlinks(run)
            except ResumeError:
                assert link
                return
            notes = repair_logs(run)
            log = RunWriter(run, tensorboard=False)
            log.truncate_after(step, sizes, keep_own_step=keep)
        assert all(isinstance(n, str) for n in notes)
        for name in logs:
            assert all(is_row(x) for x in (run / name).read_bytes().split(b"\n") if x.strip())


@fuzz(40)
@given(text=YAML_TEXT, marker=st.one_of(st.binary(max_size=40), JSON.map(lambda v: json.dumps(v).encode())))
def test_run_config_and_claim_are_read_or_refused_with_a_value_error(text: str, marker: bytes, tmp_path: Path) -> None:
    from grpokit.run.directory import MARKER, RunInUseError, claim_existing_run, read_claim
    from grpokit.training.resume import resume_config

    with sandbox(tmp_path) as run:
        (run / "config.yaml").write_text(text, encoding="utf-8", errors="surrogateescape")
        (run / MARKER).write_bytes(marker)
        with bounded():
            try:
                resume_config(run, [], {})
            except ValueError:  # ResumeError, ConfigError
                pass
            claim = read_claim(run)
            try:
                claim_existing_run(run)
            except RunInUseError:
                pass
        assert claim is None or isinstance(claim["pid"], int)


# ------------------------------------------------------------------------------------------ doctor's log readers

CONSOLE_PIECES = st.sampled_from(
    [
        "{'loss': 0.1, 'reward': 0.5, 'kl': 0.01, 'epoch': 0.1}",
        "{'loss': 0.1, 'reward': " + "}" * 300,
        '{"loss": 1, "reward": [[[[',
        " 12/300 [00:41<01:00,  1.2s/it]",
        "1" * 3000 + "/",
        "step:3 - actor/entropy:0.4 - critic/score/mean:0.5 - response_length/mean:12",
        "step:x - actor/pg_loss:nan",
        "Global step 4: {'policy_loss': 0.1, 'reward': 0.2}",
        "Episode [1/2]:  10%|#  | 1/10 [00:03<00:45,  3.04s/it, act_loss=-0.208, reward=0.1]",
        "a" * 3000 + "=1",
        "Traceback (most recent call last):\nValueError: boom",
        "***** Running training *****",
        "'actor_rollout_ref': {'actor': {'ppo_epochs': 1}}",
        "\x1b[31m",
        "{" * 200,
    ]
)
CONSOLE = st.lists(st.one_of(CONSOLE_PIECES, st.text(max_size=30)), max_size=12).map("\n".join)


def trl_state() -> st.SearchStrategy[bytes]:
    entry = st.one_of(JSON, st.fixed_dictionaries({"step": JSON}, optional={"loss": JSON, "reward": JSON}))
    state = st.fixed_dictionaries({"log_history": st.one_of(st.lists(entry, max_size=5), JSON)}, optional={
        "logging_steps": JSON})  # fmt: skip
    return st.one_of(state.map(lambda v: json.dumps(v).encode()), JSON.map(lambda v: json.dumps(v).encode()))


def verl_jsonl() -> st.SearchStrategy[bytes]:
    row = st.fixed_dictionaries({"step": JSON, "data": st.one_of(st.dictionaries(KEYS, JSON, max_size=3), JSON)})
    return st.lists(row.map(json.dumps), max_size=5).map(lambda r: "\n".join(r).encode())


WANDB = st.one_of(
    mutated("Step,run - train/reward,run - train/kl\n1,0.5,0.01\n2,0.6,0.02\n"),
    st.lists(st.lists(st.text(alphabet='ab,1."_', max_size=6), max_size=4).map(",".join), max_size=5).map(
        lambda rows: ("_step,train/reward\n" + "\n".join(rows)).encode()
    ),
)


@st.composite
def doctor_input(draw: st.DrawFn, root: Path) -> Path:
    """A log of one of the formats `doctor` reads, malformed by the generators above; returns the path to give."""
    kind = draw(st.sampled_from(["grpokit", "trl", "verl", "wandb", "console", "tensorboard"]))
    if kind == "grpokit":
        from grpokit.run.directory import MARKER

        (root / MARKER).write_text("")
        (root / "metrics.jsonl").write_bytes(b"\n".join(draw(st.lists(LOG_LINE, max_size=6))))
        (root / "config.yaml").write_text(draw(YAML_TEXT), encoding="utf-8", errors="surrogateescape")
        (root / "run.json").write_bytes(draw(STATE))
        return root
    if kind == "trl":
        (root / "trainer_state.json").write_bytes(draw(trl_state()))
        return root
    if kind == "verl":
        (root / "log.jsonl").write_bytes(draw(verl_jsonl()))
        return root / "log.jsonl"
    if kind == "wandb":
        (root / "history.csv").write_bytes(draw(WANDB))
        return root / "history.csv"
    if kind == "console":
        (root / "train.log").write_text(draw(CONSOLE), encoding="utf-8", errors="surrogateescape")
        return root / "train.log"
    events = root / "tb" / "events.out.tfevents.1.host"
    events.parent.mkdir()
    events.write_bytes(draw(mutated(TB_EVENTS)))
    return events.parent


def _tb_events() -> bytes:
    """A small real TensorBoard event file (mutated by the tensorboard case)."""
    import tempfile

    from torch.utils.tensorboard import SummaryWriter

    with tempfile.TemporaryDirectory() as d:
        w = SummaryWriter(d)
        for step in range(1, 4):
            w.add_scalar("reward/mean", 0.1 * step, step)
            w.add_scalar("zv/frac", 0.2, step)
        w.close()
        return next(Path(d).glob("events.out.tfevents.*")).read_bytes()


TB_EVENTS = _tb_events()


@fuzz(120)
@given(data=st.data())
def test_doctor_reads_or_refuses_every_malformed_log_in_one_line(
    data: st.DataObject, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from grpokit.monitor.doctor import doctor_main
    from grpokit.monitor.rundata import load_run

    with sandbox(tmp_path) as run:
        path = data.draw(doctor_input(run))
        with bounded():
            code = doctor_main(str(path))
            out = capsys.readouterr()
            try:
                load_run(path)  # what `report` and `compare` read
            except ValueError:
                pass
    assert code in (0, 1, 2), code
    if code == 2:
        lines = out.err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: "), out.err
        assert "cannot read it as a training log" not in out.err, out.err  # the catch-all is for the unforeseen
        assert "MemoryError" not in out.err, out.err
