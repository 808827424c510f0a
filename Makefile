# Two commands do everything on a fresh machine: `make run` and `make test`.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

$(STAMP): pyproject.toml
	@echo "mlxport: creating $(VENV) and installing mlxport with its test tools (once; a few minutes on a fresh machine)"
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	set -o pipefail; $(BIN)/python -m pip install --progress-bar off -e ".[dev]" | { grep -E "^(Collecting|Successfully)" | cut -c1-100 || true; }
	@echo "mlxport: installed ($$(du -sh $(VENV) | cut -f1) in $(VENV))"
	touch $(STAMP)

install: $(STAMP)

run: $(STAMP)
	@echo "mlxport: porting the suite's softmax_rows with the rules baseline on this machine's backend"
	$(BIN)/mlxport port --task softmax_rows --out mlxport-out

test: $(STAMP)
	@echo "mlxport: running the tests on 2 workers (about 5 minutes; skipped tests say why at the end)"
	$(BIN)/python -m pytest -q -n 2 -rs

lint: $(STAMP)
	$(BIN)/ruff check mlxport tests benchmarks

.PHONY: install run test lint
