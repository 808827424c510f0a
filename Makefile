# Two commands do everything on a fresh machine: `make run` and `make test`.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# The simulator compiles with the system's C++ compiler; only a machine without one gets zig's.
# Workers and the compiler run in a sandbox whose namespaces come from bubblewrap on Linux
# (apt-get install bubblewrap); without it Landlock and seccomp still apply: `mlxport doctor`.
ZIG := $(if $(shell command -v c++ g++ clang++ 2>/dev/null),,zig)
RUN_STAMP := $(VENV)/.installed-run
TEST_STAMP := $(VENV)/.installed-test
PIP := $(BIN)/python -m pip install --progress-bar off
SHOW := { grep -E "^(Collecting|Successfully)" | cut -c1-100 || true; }

$(BIN)/python:
	@echo "mlxport: creating $(VENV)"
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

$(RUN_STAMP): pyproject.toml | $(BIN)/python
	@echo "mlxport: installing mlxport and what running it needs$(if $(ZIG), (with zig: no C++ compiler here))"
	set -o pipefail; $(PIP) -e ".$(if $(ZIG),[zig])" | $(SHOW)
	@echo "mlxport: installed ($$(du -sh $(VENV) | cut -f1) in $(VENV))"
	touch $(RUN_STAMP)

$(TEST_STAMP): $(RUN_STAMP)
	@echo "mlxport: adding the test tools (pytest, ray, mlx-lm, an OpenAI client, mcp, NVRTC on Linux x86-64)"
	set -o pipefail; $(PIP) -e ".[dev$(if $(ZIG),$(comma)zig)]" | $(SHOW)
	@echo "mlxport: installed ($$(du -sh $(VENV) | cut -f1) in $(VENV))"
	touch $(TEST_STAMP)

comma := ,

install: $(RUN_STAMP)

run: $(RUN_STAMP)
	@echo "mlxport: porting the suite's softmax_rows with the rules baseline on this machine's backend"
	$(BIN)/mlxport port --task softmax_rows --out mlxport-out

test: $(TEST_STAMP)
	@command -v bwrap >/dev/null 2>&1 || [ "$$(uname)" != Linux ] || echo "mlxport: no bwrap here (apt-get install bubblewrap): the namespace tests are skipped"
	@echo "mlxport: running the tests on 2 workers (about 6 minutes; skipped tests say why at the end)"
	$(BIN)/python -m pytest -q -n 2 -rs

lint: $(TEST_STAMP)
	$(BIN)/ruff check mlxport tests benchmarks

.PHONY: install run test lint
