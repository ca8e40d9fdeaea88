# t1: the two commands a new user runs are `make demo` and `make test`; each sets itself up.
#
# Python: inside a virtualenv (an activated one, or PYTHON naming a venv's interpreter) everything is
# installed there; otherwise into the project's own virtualenv $(VENV), made with $(PYTHON) on first use,
# so a Python that refuses system installs (PEP 668: Debian 12, Ubuntu 23.04+) works too. t1 needs
# Python >= 3.11 (tomllib).
PYTHON ?= python3
VENV ?= .venv
# PyTorch for t1train (`make test`). Install it before t1's `train` extra: on Linux x86_64 the default
# index gives the CUDA build (several GB). For the CPU-only build, set TORCH_INDEX_URL to PyTorch's CPU
# wheel index (the `--index-url` that PyTorch's install page gives for "CPU"), e.g.
#   make test TORCH_INDEX_URL=<PyTorch's CPU wheel index>
TORCH_SPEC ?= torch==2.13.0
TORCH_INDEX_URL ?=
SUDO := $(shell [ "$$(id -u)" -eq 0 ] || echo sudo)

# Host programs as program:Debian-package. The local sandbox runs the host's /usr read-only, so a task's
# tools must be installed on the host: every `environment.tools` of tasks/*/task.toml and of the families
# in t1env/families is here (tests/packaging/test_setup.py checks), plus what the oracle solutions and
# checks call (file, ps, ldd) and the companions agents reach for in C, SQL and JSON tasks (g++, sqlite3,
# jq; the Docker backend's default image has them too). bubblewrap is the sandbox; slirp4netns or passt
# gives a sandbox with network a network namespace of its own, iptables its egress filter (t1env/sandbox/egress.py).
HOST_TOOLS := bwrap:bubblewrap slirp4netns:slirp4netns passt:passt iptables-restore:iptables \
	bash:bash python3:python3 git:git gcc:gcc g++:g++ make:make \
	ar:binutils nm:binutils readelf:binutils \
	tar:tar gzip:gzip xz:xz-utils sqlite3:sqlite3 jq:jq file:file ps:procps ldd:libc-bin \
	awk:mawk sed:sed grep:grep find:findutils \
	base64:coreutils chmod:coreutils chown:coreutils comm:coreutils cp:coreutils cut:coreutils mv:coreutils \
	sha256sum:coreutils sort:coreutils stat:coreutils touch:coreutils tr:coreutils uniq:coreutils

IN_VENV := $(shell $(PYTHON) -c 'import sys; print(int(sys.prefix != sys.base_prefix))' 2>/dev/null)
ifeq ($(IN_VENV),1)
PY := $(PYTHON)
else
PY := $(VENV)/bin/python
endif

# `apt-get install` the packages named in $(1) (a shell expression), with sudo when not root.
apt_install = { \
	  if ! command -v apt-get >/dev/null 2>&1; then \
	    echo "missing:$(1) (Debian package names); install them with your package manager"; exit 1; fi; \
	  echo "installing$(1) (apt-get)"; \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $(1) >/dev/null; }

# t1 counts as installed when it imports from the interpreter's site-packages (-I: not from the current
# folder), from this checkout, with its `t1env` command, installed after pyproject.toml last changed (so a
# `git pull` that adds a dependency installs again).
T1_INSTALLED := $(PY) -I -c 'import importlib.metadata as md, pathlib, sys, sysconfig, t1env; \
	dist = md.distribution("t1"); \
	meta = dist.locate_file(next(f for f in dist.files if f.name == "METADATA")); \
	sys.exit(not (pathlib.Path(t1env.__file__).resolve().parent == pathlib.Path("t1env").resolve() \
	  and pathlib.Path(sysconfig.get_path("scripts"), "t1env").exists() \
	  and meta.stat().st_mtime >= pathlib.Path("pyproject.toml").stat().st_mtime))'

.PHONY: demo test test-fast python which-python setup-core setup-all system-deps bench docs-tasks

python:  ## the interpreter: the active virtualenv's, else $(VENV) (made with $(PYTHON) on first use)
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null || { \
	  echo "t1 needs Python >= 3.11; PYTHON=$(PYTHON) is: $$($(PYTHON) -V 2>&1)"; \
	  echo "name a newer one, e.g. make $(or $(MAKECMDGOALS),demo) PYTHON=python3.11"; exit 1; }
ifneq ($(IN_VENV),1)
	@$(PY) -m pip --version >/dev/null 2>&1 || { \
	  $(PYTHON) -c 'import ensurepip' 2>/dev/null || \
	    $(call apt_install, python$$($(PYTHON) -c 'import sys; print("%d.%d" % sys.version_info[:2])')-venv); \
	  echo "making the project virtualenv $(VENV) with $(PYTHON)"; \
	  $(PYTHON) -m venv --clear $(VENV); }
endif

which-python: python  ## print the interpreter t1 is installed into
	@$(PY) -c 'import sys; print(sys.executable)'

system-deps:  ## host programs: the sandbox and the built-in tasks' tools (apt-get, only what is missing)
	@pkgs=""; for pair in $(HOST_TOOLS); do \
	  command -v "$${pair%%:*}" >/dev/null 2>&1 || case " $$pkgs " in \
	    *" $${pair#*:} "*) ;; *) pkgs="$$pkgs $${pair#*:}";; esac; \
	done; \
	[ -e /usr/include/stdio.h ] || pkgs="$$pkgs libc6-dev"; \
	[ -z "$$pkgs" ] || $(call apt_install,$$pkgs)

setup-core: python system-deps  ## t1env only (no torch)
	@$(T1_INSTALLED) 2>/dev/null || { echo "installing t1 (pip install -e .) into $$($(PY) -c 'import sys; print(sys.prefix)')"; \
	  $(PY) -m pip install -q -e .; }

setup-all: python system-deps  ## t1env + t1train + docker SDK + dev tools
	@$(PY) -c "import torch" 2>/dev/null || { echo "installing $(TORCH_SPEC)"; \
	  $(PY) -m pip install -q $(if $(TORCH_INDEX_URL),--index-url "$(TORCH_INDEX_URL)") "$(TORCH_SPEC)"; }
	@echo "installing t1 with its train, docker and dev extras into $$($(PY) -c 'import sys; print(sys.prefix)')"
	@$(PY) -m pip install -q -e ".[train,docker,dev,ray]"

demo: setup-core  ## the main job: the oracle solves a built-in task in the bubblewrap sandbox
	$(PY) -m t1env run git-recover-branch --agent oracle

test: setup-all  ## everything: unit, slow and Docker-marked tests (Docker ones skip without an engine)
	$(PY) -m pytest -m "" -q

test-fast: setup-all  ## the quick loop: what plain `pytest` runs
	$(PY) -m pytest -q

docs-tasks: setup-core  ## regenerate the task catalogue (a test fails when it is stale)
	$(PY) -m t1env.tools.catalog > docs/tasks.md

bench: setup-core
	$(PY) bench/env_latency.py
