"""The reward worker's environment variables: an allow-list of what Python and a reward's libraries need.

The trainer's environment holds credentials under every kind of name (`DATABASE_URL`, `GH_PAT`, `HTTPS_PROXY`
with a password in it, `MLFLOW_TRACKING_URI`, `PIP_INDEX_URL`, `SENTRY_DSN`, ...), so a name filter cannot
find them all. The sandboxed worker keeps only the names below, plus those the user passes on by name
(`SandboxLimits.env`, the config key `reward.sandbox_env`; `fnmatch` patterns such as `WANDB_*` work), and
drops everything else. What is kept, and why:

- the interpreter and locale: `PATH` (programs a reward runs), `PYTHONPATH`, `PYTHONHOME` and the other
  `PYTHON*` settings listed, `VIRTUAL_ENV`, `CONDA_PREFIX`, `CONDA_DEFAULT_ENV`, `LD_LIBRARY_PATH` (shared
  libraries of conda or CUDA installs), `LANG`, `LANGUAGE`, `LC_*`, `TZ`, `USER`, `LOGNAME`;
- thread counts of the numeric libraries: `OMP_*`, `MKL_*`, `KMP_*`, `OPENBLAS_*`, `NUMEXPR_*`,
  `VECLIB_MAXIMUM_THREADS`, `TOKENIZERS_PARALLELISM`;
- offline switches of Hugging Face libraries: `HF_HUB_OFFLINE`, `HF_DATASETS_OFFLINE`, `TRANSFORMERS_OFFLINE`;
- `CUDA_VISIBLE_DEVICES`, so a reward that uses a GPU uses the one the user picked.

`HOME`, `TMPDIR`, `TMP` and `TEMP` are set to the worker's private directory. Proxies are left out on purpose
(they often carry a password; the sandbox has no network unless `network=True`).
"""

from __future__ import annotations

import fnmatch
import os
from collections.abc import Iterable, Mapping

ALLOWED = (
    "PATH",
    "PYTHONPATH",
    "PYTHONHOME",
    "PYTHONHASHSEED",
    "PYTHONIOENCODING",
    "PYTHONUTF8",
    "PYTHONDONTWRITEBYTECODE",
    "PYTHONWARNINGS",
    "PYTHONNOUSERSITE",
    "PYTHONSAFEPATH",
    "VIRTUAL_ENV",
    "CONDA_PREFIX",
    "CONDA_DEFAULT_ENV",
    "LD_LIBRARY_PATH",
    "LANG",
    "LANGUAGE",
    "LC_*",
    "TZ",
    "USER",
    "LOGNAME",
    "OMP_*",
    "MKL_*",
    "KMP_*",
    "OPENBLAS_*",
    "NUMEXPR_*",
    "VECLIB_MAXIMUM_THREADS",
    "TOKENIZERS_PARALLELISM",
    "HF_HUB_OFFLINE",
    "HF_DATASETS_OFFLINE",
    "TRANSFORMERS_OFFLINE",
    "CUDA_VISIBLE_DEVICES",
)
PRIVATE_DIR_VARS = ("HOME", "TMPDIR", "TMP", "TEMP")


def allowed(name: str, passthrough: Iterable[str] = ()) -> bool:
    """Whether variable `name` reaches the reward: on the allow-list or passed through (exact names or patterns,
    matched case-sensitively)."""
    return any(fnmatch.fnmatchcase(name, pattern) for pattern in (*ALLOWED, *passthrough))


def worker_environment(environ: Mapping[str, str], passthrough: Iterable[str], workdir: str) -> dict[str, str]:
    """The environment a sandboxed worker keeps from `environ`, with its private directory as HOME and TMPDIR."""
    patterns = tuple(passthrough)
    kept = {k: v for k, v in environ.items() if allowed(k, patterns)}
    return kept | dict.fromkeys(PRIVATE_DIR_VARS, workdir)


def restrict_environment(passthrough: Iterable[str], workdir: str) -> str:
    """Replace this process's environment by `worker_environment`; returns what to report."""
    patterns = tuple(passthrough)
    kept = worker_environment(os.environ, patterns, workdir)
    dropped = [k for k in os.environ if k not in kept]
    os.environ.clear()
    os.environ.update(kept)
    extra = f", plus {', '.join(patterns)}" if patterns else ""
    return f"allow-list (grpokit.rewards.env_vars{extra}): {len(dropped)} variables dropped"
