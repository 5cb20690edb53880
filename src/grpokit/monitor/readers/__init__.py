"""Readers that turn the training logs people have into grpokit's canonical per-step metric rows.

`read_runs(path)` finds every run under a file or directory and returns one `RunLog` per run: one row per training
step (`{"step": int, <canonical name>: float, ...}`, NaN where a row lacks a signal the run records elsewhere), the
set of canonical names the log records (`available`), the source's own names (`raw_names`), what the log says about
the run's configuration (`context`, `config`) and how it was read (`notes`). `read_run(path)` is the one-run view.
A signal the log does not record is simply absent from `available`: nothing is derived from unrelated metrics.

Supported sources (the registry `READERS` holds them; `docs/doctor.md` has the signal -> key table):

- `grpokit`: a run directory (or its `metrics.jsonl`); names are grpokit's own, the config is `config.yaml`.
  Rows that share a step (the eval-only row written after the last train step) are merged into one row.
- `trl`: a TRL output directory, its `trainer_state.json`, or the newest `checkpoint-*/trainer_state.json` when the
  top-level one is absent. Rows come from `log_history`; names are mapped with `TRL_NAMES` (aliases across TRL
  versions included).
- `console`: printed output. verl's console logger (lines `... step:N - key:value - ...`, values plain or
  `np.float64(x)`; the config verl prints at start gives the context), the per-step dicts transformers' Trainer
  prints for TRL / Unsloth / ms-swift (`{'loss': ..., 'reward': ...}` among progress bars; the step comes from the
  progress bar, and a file holding several trainings, e.g. SFT then GRPO, is split into runs), or OpenRLHF's
  output (`Global step N: {...}` status lines, else the status postfix of its `Episode` bar, else its `Train epoch`
  bars; see `readers_openrlhf.py`), names mapped with `OPENRLHF_NAMES`.
- `skyrl`, `nemo-rl`, `prime-rl`, `slime`: those trainers' printed output, each recognised by its own lines before
  the generic `console` reader (`console_skyrl`, `console_nemo`, `console_prime`, `console_slime`; tables in
  `names_more`). SkyRL prints no step number: steps are counted from its `Started: 'step'` lines and progress bar
  (a note says so); NeMo-RL's step is its `Step N/M` banner; a prime-rl output directory's `logs/trainer.log` and
  `logs/orchestrator.log` are one run; slime's rollout-level dicts join the row of the rollout's first training step.
- `verl`: verl's JSONL file logger (`{"step": N, "data": {...}}` per line, or flat keys). Names: `VERL_NAMES` and
  `VERL_PATTERNS` (0.3+ names and older aliases such as `actor/entropy_loss`).
- `wandb`: W&B run-history exports: the UI's CSV (`Step`, `<run> - <metric>` columns, several runs per file) or the
  API's history as CSV / JSON / JSONL (`_step`; TRL's `train/global_step` wins as the step).
- `wandb-run`: a W&B run directory (`wandb/run-*`, `wandb/offline-run-*`, `latest-run`) or its `run-<id>.wandb`
  transaction log: wandb's protobuf `Record`s (`wandb.proto.wandb_internal_pb2`) in LevelDB-log framing, the one
  part read by hand (`wandb_run`); history, config and the run's name, the step as for W&B exports.
- `mlflow`: an MLflow file store (`mlruns/`, an experiment or run folder of it) or SQLite store (`mlflow.db`), read
  with MLflow's own client (`mlflow_store`); one run per MLflow run, config from its params.
- `trackio`: a trackio project database (`<project>.db`) through a read-only SQLite connection (`trackio_db`); one
  run per trackio run, config from its `configs` table. The three trackers' keys are mapped with the table that
  knows the most of them (`wandb_export.keyed_segment`, as for TensorBoard); `tracker_common` holds what they share.
- `tensorboard`: each directory of `events.out.tfevents.*` files is one run. Scalars are grouped by step; the tag
  flavour (grpokit, TRL's `train/...`/`eval/...` tags, verl, or OpenRLHF's `train/...` names in `OPENRLHF_NAMES`)
  is chosen by which mapping recognises the most tags; grpokit's config is read back from the `grpokit/config`
  text summary (or the run's `config.yaml`).

A directory is searched recursively and each run in it is read separately (never merged); a grpokit run directory, a
TRL output directory, a W&B run directory and an MLflow file store are one run each (the store: one run per MLflow
run in it); a symbolic link to something inside the folder (W&B's `latest-run`) is not read twice. Canonical names
are grpokit's (`grpokit.metric_names`); the mappings only ever map a source metric to the canonical name whose
definition it matches, and say where the match is only approximate.

Modules: `names` (mapping tables), `values` (numbers out of logs), `canonical` (`RunLog`, mappers, the `Reader`
interface), one module per format (`grpokit_run`, `trl_state`, `jsonl` (verl), `console` with `console_verl` /
`console_trl` (and `console_openrlhf`), `console_skyrl`, `console_nemo`, `console_prime`, `console_slime` (with
`console_text`, what they share, and `names_more`, their tables), `wandb_export`, `wandb_run`, `mlflow_store`,
`trackio_db` (with `tracker_common`), `tensorboard_events`), and `discovery` (the registry, the search of a path,
`read_runs`).
"""

from __future__ import annotations

from .canonical import FLAVORS, Reader, RunLog, Segment
from .console_verl import verl_context
from .discovery import READERS, SUPPORTED, detect, discover, read_run, read_runs
from .grpokit_run import grpokit_context
from .names import CANONICAL, OPENRLHF_NAMES, TRL_NAMES, VERL_NAMES, VERL_PATTERNS
from .tensorboard_events import CONFIG_TEXT_TAG

# value parsers shared with `readers_openrlhf`
from .values import dict_at as dict_at
from .values import numeric_items as numeric_items
from .values import to_float as to_float

__all__ = [
    "CANONICAL",
    "CONFIG_TEXT_TAG",
    "FLAVORS",
    "OPENRLHF_NAMES",
    "READERS",
    "SUPPORTED",
    "TRL_NAMES",
    "VERL_NAMES",
    "VERL_PATTERNS",
    "Reader",
    "Segment",
    "RunLog",
    "detect",
    "discover",
    "grpokit_context",
    "read_run",
    "read_runs",
    "verl_context",
]
