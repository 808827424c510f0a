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
# pip prints straight to the terminal: its own progress bars, nothing held back in a pipe.
PIP := $(BIN)/python -m pip install

# The venv without pip, and pip put in by the host's own pip where there is one (a second or two,
# with pip's progress), else by ensurepip (silent for several seconds).
$(BIN)/python:
	@echo "mlxport: creating $(VENV)"
	$(PYTHON) -m venv --without-pip $(VENV)
	$(PYTHON) -m pip --python $(BIN)/python install --upgrade pip 2>/dev/null \
	  || { echo "mlxport: installing pip into $(VENV) with ensurepip (a few seconds)"; \
	       $(BIN)/python -m ensurepip --upgrade; }

$(RUN_STAMP): pyproject.toml | $(BIN)/python
	@echo "mlxport: installing mlxport and what running it needs$(if $(ZIG), (with zig: no C++ compiler here))"
	$(PIP) -e ".$(if $(ZIG),[zig])"
	@echo "mlxport: installed ($$(du -sh $(VENV) | cut -f1) in $(VENV))"
	touch $(RUN_STAMP)

$(TEST_STAMP): $(RUN_STAMP)
	@echo "mlxport: adding the test tools (pytest, ray, mlx-lm, an OpenAI client, mcp, NVRTC on Linux x86-64)"
	$(PIP) -e ".[dev$(if $(ZIG),$(comma)zig)]"
	@echo "mlxport: installed ($$(du -sh $(VENV) | cut -f1) in $(VENV))"
	touch $(TEST_STAMP)

comma := ,

install: $(RUN_STAMP)

run: $(RUN_STAMP)
	@echo "mlxport: porting the suite's softmax_rows with the rules baseline on this machine's backend"
	$(BIN)/mlxport port --task softmax_rows --out mlxport-out

# worksteal: each worker starts on its own half of the files (a module's fixtures built once) and
# the one that runs out takes over the other's last tests, so no long test waits alone at the end.
test: $(TEST_STAMP)
	@command -v bwrap >/dev/null 2>&1 || [ "$$(uname)" != Linux ] || echo "mlxport: no bwrap here (apt-get install bubblewrap): the namespace tests are skipped"
	@command -v chromium chromium-browser google-chrome >/dev/null 2>&1 || echo "mlxport: no Chromium here (apt-get install chromium): the report.html browser test is skipped"
	@echo "mlxport: running the tests on 2 workers (about 10 minutes on 2 cores; skipped tests say why at the end)"
	$(BIN)/python -m pytest -q -n 2 --dist worksteal -rs

lint: $(TEST_STAMP)
	$(BIN)/ruff check mlxport tests benchmarks

.PHONY: install run test lint
