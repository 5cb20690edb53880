"""Shared pytest fixtures. Tests never reach the Hugging Face Hub."""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import pytest  # noqa: E402


@pytest.fixture(scope="session")
def embedded_model_dir() -> Path:
    """The converted SmolLM2-135M-Instruct directory (converted once into the grpokit cache, ~1 min)."""
    from grpokit.models import ensure_embedded_model

    return ensure_embedded_model("smollm2-135m-instruct")


@pytest.fixture(scope="session")
def smollm_tokenizer(embedded_model_dir: Path) -> Any:
    """The real SmolLM2-Instruct tokenizer (ChatML chat template, left padding, pad = eos). Do not mutate."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(embedded_model_dir, local_files_only=True)
    tok.padding_side = "left"
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    return tok


def pytest_report_header() -> list[str]:
    """The machine, first: a failure report from a user's CPU then carries its kernels and precision."""
    from grpokit.models.precision import machine_lines

    return machine_lines()


@pytest.fixture
def margin(record_property: Any) -> Any:
    """`margin(name, value)`: record how far a training test's outcome was from its bound (a junit-xml property
    that `scripts/kernel_matrix.py` tabulates over seeds and kernel sets)."""

    def record(name: str, value: float) -> None:
        record_property(f"margin:{name}", f"{float(value):.6g}")

    return record


# `make test-fast` runs `-m "not slow and not trains"`. Slow = trains a model, or starts the grpokit command line or
# another interpreter (each start imports torch: ~4 s here). Whole modules where that is what every test does:
SLOW_MODULES = {
    "test_checkpoint_hf",
    "test_compare",
    "test_critic",
    "test_distributed",
    "test_dropin",
    "test_integration_trl",
    "test_precision",
    "test_report",
    "test_trackers",
    "test_trainer",
    "test_logging_resume_and_sampling",
    "test_vllm",
    "test_watch",
}
# and single tests of mixed modules that took 2 s or more in `pytest --durations=0` on the 2-core CI machine
SLOW_TESTS = {
    "test_api.py::test_notebook_script_trains_with_in_memory_data_and_functions",
    "test_api.py::test_output_dir_is_the_run_directory_claimed_as_the_cli_claims_it",
    "test_returns_kl_and_quantiles.py::test_14_2_threshold_matches_torch_quantile_and_scales_past_2_pow_24",
    "test_returns_kl_and_quantiles.py::test_14_2_threshold_is_computed_over_all_ranks",
    "test_returns_kl_and_quantiles.py::test_adaptive_kl_in_the_trainer_moves_beta_by_the_batch_size",
    "test_audit.py::test_audit_reward_cli",
    "test_audit.py::test_hanging_reward_is_reported_as_timeout_and_stops_early",
    "test_code_exec.py::test_audit_reward_code_probes_pass_for_code_exec",
    "test_code_exec.py::test_hostile_programs_score_zero_and_do_no_harm",
    "test_config_compat.py::test_output_dir_refuses_a_folder_holding_another_run",
    "test_config_compat.py::test_did_you_mean_on_the_command_line",
    "test_config_compat.py::test_version",
    "test_model_sources.py::test_a_hub_name_already_in_the_hf_cache_loads_offline",
    "test_models.py::test_embedded_model_greedy_answers_with_chat_template",
    "test_preflight.py::test_preflight_talks_times_training_rounds_and_prints_the_train_command",
    "test_preflight.py::test_preflight_cli",
    "test_reward_sandbox.py::test_burning_cpu_past_the_cpu_limit_is_killed",
    "test_rewards.py::test_each_failure_kind_is_isolated_and_reported",
    "test_rollout.py::test_learner_scores_the_truncated_distribution_the_sampler_drew_from",
    "test_rollout.py::test_top_p_run_logs_an_importance_ratio_of_one",
}
# modules whose every test starts the command line: slow too
SLOW_CLI_MODULES = {"test_bad_inputs", "test_cli", "test_doctor"}


def pytest_collection_modifyitems(items: list[Any]) -> None:
    for item in items:
        module = item.module.__name__.rpartition(".")[2]
        name = f"{module}.py::{getattr(item, 'originalname', item.name)}"
        if module in SLOW_MODULES or name in SLOW_TESTS or (module in SLOW_CLI_MODULES and _starts_cli(item)):
            item.add_marker(pytest.mark.slow)


def _starts_cli(item: Any) -> bool:
    """Whether a test's source starts a process (the grpokit CLI, a Python interpreter) or trains a model."""
    import inspect

    try:
        src = inspect.getsource(item.function)
    except (OSError, TypeError):
        return True
    return any(s in src for s in ("subprocess", "grpokit(", "Popen", "fit(", "doctor(", "run_cli", "finish("))
