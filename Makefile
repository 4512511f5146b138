# Quick start: `make demo` (set-up, then a triage of a shipped example) and `make test`
# (set-up, then the whole suite). Everything installs into .venv, pinned.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
DEMO   ?= examples/pp-offset-garbled

.PHONY: venv demo test test-fast test-sglang bench bench-ingest clean

$(STAMP): requirements.lock constraints.txt pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet -c constraints.txt -r requirements.lock
	$(BIN)/pip install --quiet --no-deps --no-build-isolation -e .
	$(BIN)/python -c "import torch, sys; v = torch.__version__; sys.exit(0 if v.startswith('2.13.0') else f'torch {v} installed, 2.13.0 expected')"
	touch $(STAMP)

venv: $(STAMP)

demo: venv
	@$(BIN)/triage run $(DEMO); rc=$$?; [ $$rc -eq 0 ] || [ $$rc -eq 3 ] || exit $$rc

test: venv
	$(BIN)/python -m pytest -q

test-sglang: venv
	scripts/test-sglang.sh

test-fast: venv
	$(BIN)/python -m pytest -q -m "not slow"

bench: venv
	$(BIN)/triage bench --out bench-out

bench-ingest: venv
	$(BIN)/python benchmarks/bench_ingest.py

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache
