# The two commands a user needs: `make run` and `make test`. Everything else is set up by them.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp

.PHONY: setup run test bench clean

setup: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

run: setup
	$(BIN)/pincer demo

test: setup
	$(BIN)/python -m pytest -q

bench: setup
	$(BIN)/python bench/dispatch.py
	$(BIN)/python bench/scanner.py

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis build src/*.egg-info
