"""Data -> `Example`s: JSONL, local files and directories that `datasets` reads (json, jsonl, csv, parquet, arrow,
`save_to_disk`), and `datasets.load_dataset` names (`sources.py`); rows become Examples in `records.py`.

Every problem with the data raises one `ValueError` that names the file or dataset, the line or row, the field,
and how to fix it.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from ..common.bounded_read import lines, open_regular, refuse_special
from .example import Example
from .records import field_names, missing_key_error, record_to_example, resolve_answer_key
from .registry import TASKS, get_task, unknown_name_error
from .sources import hub_offline, looks_like_path, open_hub, open_local
from .task import sample_pool

__all__ = ["load_examples", "load_files", "load_hf_dataset", "load_jsonl", "record_to_example"]


def _existing(path: str | Path) -> Path:
    p = Path(path).expanduser()
    if not p.exists():
        raise ValueError(
            f"data path {str(path)!r} does not exist (resolved to {p.resolve()}); give an existing local file or "
            "directory, or a datasets.load_dataset name such as 'openai/gsm8k'"
        )
    return p


def examples_from_rows(
    rows: Iterable[tuple[int, Any]],
    *,
    source: str,
    stem: str,
    prompt_key: str,
    answer_key: str | None,
    unit: str = "row",
) -> list[Example]:
    """Examples from numbered dataset rows `(k, dict)`, named "<unit> k" in errors and "<stem>/k" in ids; the answer
    key is resolved on the first row (verl's `reward_model.ground_truth` for a default `answer` the rows lack)."""
    out: list[Example] = []
    for number, record in rows:
        if not out:
            answer_key = resolve_answer_key(record, answer_key)
        out.append(
            record_to_example(
                record,
                source=source,
                where=f"{unit} {number}",
                prompt_key=prompt_key,
                answer_key=answer_key,
                default_id=f"{stem}/{number}",
            )
        )
    if not out:
        raise ValueError(f"{source}: no examples (the {'file' if unit == 'line' else 'dataset'} is empty)")
    return out


def _jsonl_records(p: Path, prompt_key: str, answer_key: str | None) -> Iterator[tuple[int, Any]]:
    with open_regular(p) as f:  # a FIFO or device is refused, and each line is bounded (common.bounded_read)
        for lineno, raw in enumerate(lines(f, p), start=1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as e:
                raise ValueError(
                    f"{p}, line {lineno}: not UTF-8 text (byte 0x{raw[e.start]:02x} at column {e.start + 1}); "
                    "save the file as UTF-8 (e.g. iconv -f latin1 -t utf-8)"
                ) from None
            if not line.strip():
                continue
            try:
                yield lineno, json.loads(line)
            except json.JSONDecodeError as e:
                raise ValueError(
                    f"{p}, line {lineno}: invalid JSON ({e.msg} at column {e.colno}); each line must be one "
                    f'JSON object such as {{"{prompt_key}": "...", "{answer_key}": "..."}}'
                ) from None
            except RecursionError:
                raise ValueError(f"{p}, line {lineno}: JSON nested too deeply to be a record; fix the line") from None


def load_jsonl(path: str | Path, prompt_key: str = "prompt", answer_key: str | None = "answer") -> list[Example]:
    """Examples from a JSON-lines file, one object per line (blank lines skipped)."""
    p = _existing(path)
    records = _jsonl_records(p, prompt_key, answer_key)
    return examples_from_rows(
        records, source=str(p), stem=p.stem, prompt_key=prompt_key, answer_key=answer_key, unit="line"
    )


def open_dataset(spec: str | Path, split: str = "train", subset: str | None = None) -> tuple[Any, str, str]:
    """(a `datasets.Dataset`, its name in messages, the stem for ids) for a local path or a load_dataset name."""
    p = Path(spec).expanduser()
    if not p.exists():
        if looks_like_path(str(spec)):
            _existing(spec)
        return open_hub(str(spec), split, subset), str(spec), str(spec).rpartition("/")[2]
    refuse_special(p)  # a FIFO or /dev/zero named as the data: one line, not a hang
    try:
        return open_local(p, split), str(p), p.stem
    except Exception as e:  # datasets raises many types; name the path in all of them
        if isinstance(e, ValueError) and str(e).startswith(str(p)):
            raise
        cause = f"; caused by {type(e.__cause__).__name__}: {e.__cause__}" if e.__cause__ else ""
        raise ValueError(f"{p}: could not be loaded with datasets ({type(e).__name__}: {e}{cause})") from e


def load_hf_dataset(
    path_or_name: str | Path,
    split: str = "train",
    prompt_key: str = "prompt",
    answer_key: str | None = "answer",
    subset: str | None = None,
) -> list[Example]:
    """Examples from a local json/jsonl/csv/parquet/arrow file, a local dataset or `save_to_disk` directory, or a
    `datasets.load_dataset` name (`subset` = its configuration name).

    A single file is one split (`split` is ignored); a saved `DatasetDict` or a named dataset is indexed by
    `split`. Rows are numbered from 1 in errors and ids (row k of a JSONL file without blank lines is line k).
    """
    ds, source, stem = open_dataset(path_or_name, split, subset)
    if len(ds):
        first = ds[0]
        present = field_names(first)
        answer_key = resolve_answer_key(first, answer_key)
        for key, arg in ((prompt_key, "prompt_key"), (answer_key, "answer_key")):
            if key and key not in present:
                raise missing_key_error(source, "all rows", key, present, arg)
    return examples_from_rows(
        enumerate(ds, start=1), source=source, stem=stem, prompt_key=prompt_key, answer_key=answer_key
    )


def load_examples(
    spec: str,
    split: str = "train",
    n: int | None = None,
    seed: int = 0,
    *,
    prompt_key: str = "prompt",
    answer_key: str | None = "answer",
    subset: str | None = None,
) -> list[Example]:
    """Examples from a built-in task name, a local data path or a `datasets.load_dataset` name.

    Files are taken as given (a single file is one split; pass a separate file for evaluation); `n` draws a
    seeded sample from them (cycling through reshuffled copies for "train" when `n` exceeds the file). A name
    that is neither a task nor an existing path is loaded with `datasets.load_dataset` unless it is close to a
    task name (a typo) or looks like a path.
    """
    if spec in TASKS:
        return get_task(spec).examples(split, n, seed)
    p = Path(spec).expanduser()
    if not p.exists() and "/" not in spec and (difflib.get_close_matches(spec, list(TASKS), n=1) or hub_offline()):
        raise unknown_name_error(
            "task", spec, list(TASKS), " Or give a local data file or directory, or a datasets name such as org/name."
        )
    if p.is_file() and p.suffix.lower() == ".jsonl":
        examples = load_jsonl(p, prompt_key=prompt_key, answer_key=answer_key)
    else:
        examples = load_hf_dataset(spec, split=split, prompt_key=prompt_key, answer_key=answer_key, subset=subset)
    return sample_pool(examples, n, seed, cycle=split == "train")


def load_files(
    specs: list[str], split: str = "train", n: int | None = None, seed: int = 0, **keys: Any
) -> list[Example]:
    """`load_examples` over several data files or datasets names read as one (verl's `data.train_files` list): each
    file's rows in order, then a seeded sample of `n` as `load_examples` draws it. One spec is `load_examples`
    itself. An id two files share (`train/1` of gsm8k/train.parquet and math/train.parquet) gets its file's folder
    in front (`math/train/1`), so every example keeps its own id."""
    if len(specs) == 1:
        return load_examples(specs[0], split, n, seed, **keys)
    builtin = [s for s in specs if s in TASKS]
    if builtin:
        raise ValueError(
            f"data.extra_files adds data files to a data file, and {builtin[0]!r} is a built-in task; give data "
            "files or datasets names in data.task and data.extra_files"
        )
    pool: list[Example] = []
    seen: set[str] = set()
    for spec in specs:
        for ex in load_examples(spec, split, None, seed, **keys):
            if ex.id in seen:
                ex.id = f"{Path(spec).expanduser().parent.name or 'data'}/{ex.id}"
            while ex.id in seen:
                ex.id = f"{ex.id}+"
            seen.add(ex.id)
            pool.append(ex)
    return sample_pool(pool, n, seed, cycle=split == "train")
