# t1: the two commands a new user runs are `make demo` and `make test`; each sets itself up.
PYTHON ?= python3
PIP := $(PYTHON) -m pip
# the CPU build of PyTorch (an unpinned `torch` pulls a multi-GB CUDA build)
TORCH_SPEC ?= torch==2.13.0
SUDO := $(shell [ "$$(id -u)" -eq 0 ] || echo sudo)

.PHONY: demo test test-fast setup-core setup-all system-deps bench docs-tasks

system-deps:  ## bubblewrap: the local sandbox
	@command -v bwrap >/dev/null 2>&1 || { \
	  echo "installing bubblewrap"; \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq bubblewrap >/dev/null; }

setup-core: system-deps  ## t1env only (no torch)
	@$(PYTHON) -c "import t1env" 2>/dev/null || $(PIP) install -q -e .

setup-all: system-deps  ## t1env + t1train + docker SDK + dev tools
	@$(PYTHON) -c "import torch" 2>/dev/null || $(PIP) install -q "$(TORCH_SPEC)"
	@$(PIP) install -q -e ".[train,docker,dev]"

demo: setup-core  ## the main job: the oracle solves a built-in task in the bubblewrap sandbox
	$(PYTHON) -m t1env run git-recover-branch --agent oracle

test: setup-all  ## everything: unit, slow and Docker-marked tests (Docker ones skip without an engine)
	$(PYTHON) -m pytest -m "" -q

test-fast: setup-all  ## the quick loop: what plain `pytest` runs
	$(PYTHON) -m pytest -q

docs-tasks: setup-core  ## regenerate the task catalogue (a test fails when it is stale)
	$(PYTHON) -m t1env.catalog > docs/tasks.md

bench: setup-core
	$(PYTHON) bench/env_latency.py
