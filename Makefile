# Two commands for a fresh machine with Python 3.11 and make:  `make demo`, `make test`.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-$(shell cat pyproject.toml | cksum | cut -d' ' -f1)

.PHONY: demo test lint bench evaluate evaluate-quick clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test,eval,spark,geo]'
	rm -f $(VENV)/.installed-*
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/python -m polars_dp demo

test: $(STAMP)
	$(BIN)/python -m pytest -q

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/mypy polars_dp

bench: $(STAMP)
	$(BIN)/python -m benchmarks $(ARGS)

evaluate: $(STAMP)
	$(BIN)/python benchmarks/evaluate.py $(ARGS)

evaluate-quick: $(STAMP)
	$(BIN)/python benchmarks/evaluate.py --quick $(ARGS)

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache build dist
