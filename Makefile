# Two commands for a fresh machine with Python 3.11 and make:  `make demo`, `make test`.
# `make demo` installs the package and its runtime dependencies only; `make test` (and lint, bench,
# evaluate) add the test, eval, spark, geo and fast extras.  Each install runs once per pyproject.toml version
# (a stamp file in the venv named after its checksum) and says in one line what it installs.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
SUM    := $(shell cat pyproject.toml | cksum | cut -d' ' -f1)
BASE   := $(VENV)/.installed-base-$(SUM)
FULL   := $(VENV)/.installed-full-$(SUM)
EXTRAS := test,eval,spark,geo,fast
# the dependencies pyproject.toml declares (for the announcement), e.g. "polars, pyarrow, ..."
DEPS    = $(shell $(PYTHON) -c "import re, tomllib; p = tomllib.load(open('pyproject.toml', 'rb'))['project']; \
          print(', '.join(re.split('[<>=!~ ;\[]', d)[0] for d in p['dependencies']))")
EXTRA_DEPS = $(shell $(PYTHON) -c "import re, tomllib; p = tomllib.load(open('pyproject.toml', 'rb'))['project']; \
          print(', '.join(sorted({re.split('[<>=!~ ;\[]', d)[0] for e in '$(EXTRAS)'.split(',') \
          for d in p['optional-dependencies'][e]})))")

# `make test-oldest`: a short suite against the oldest versions pyproject.toml declares (its `>=`
# bounds, written as pins by .ci/oldest_constraints.py), in a venv of its own
OLDEST       ?= .venv-oldest
OLDEST_STAMP := $(OLDEST)/.installed-oldest-$(SUM)
OLDEST_SUITE := tests/unit/counting tests/system/sql tests/system/engines/test_engines.py \
                tests/unit/mechanisms/test_basic_release.py tests/unit/releases/test_release_integrity.py \
                tests/unit/releases/test_arrow_stream.py tests/unit/releases/test_scan_release.py

.PHONY: demo test test-oldest lint bench evaluate evaluate-quick clean

$(BIN)/python:
	@$(PYTHON) -m venv $(VENV)

$(BASE): pyproject.toml | $(BIN)/python
	@echo "polars-dp: installing polars-dp and its dependencies ($(DEPS)) into $(VENV), once"
	@$(BIN)/python -m pip install --quiet --disable-pip-version-check -e .
	@rm -f $(VENV)/.installed-base-*
	@touch $@

$(FULL): pyproject.toml | $(BIN)/python
	@echo "polars-dp: installing polars-dp with the $(EXTRAS) extras ($(DEPS), $(EXTRA_DEPS)) into $(VENV), once"
	@$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[$(EXTRAS)]'
	@rm -f $(VENV)/.installed-base-* $(VENV)/.installed-full-*
	@touch $(BASE) $@

demo: $(BASE)
	$(BIN)/python -m polars_dp demo

test: $(FULL)
	$(BIN)/python -m pytest -q

$(OLDEST)/bin/python:
	@$(PYTHON) -m venv $(OLDEST)

$(OLDEST_STAMP): pyproject.toml .ci/oldest_constraints.py | $(OLDEST)/bin/python
	@$(PYTHON) .ci/oldest_constraints.py > $(OLDEST)/constraints.txt
	@echo "polars-dp: installing polars-dp with the test extra and the oldest declared versions" \
	      "($$(paste -sd' ' $(OLDEST)/constraints.txt)) into $(OLDEST), once"
	@$(OLDEST)/bin/python -m pip install --quiet --disable-pip-version-check \
	      -c $(OLDEST)/constraints.txt -e '.[test]'
	@rm -f $(OLDEST)/.installed-oldest-*
	@touch $@

test-oldest: $(OLDEST_STAMP)
	$(OLDEST)/bin/python .ci/oldest_constraints.py --check
	$(OLDEST)/bin/python -m pytest -q -p no:cacheprovider $(OLDEST_SUITE)

lint: $(FULL)
	$(BIN)/ruff check .
	$(BIN)/mypy polars_dp

bench: $(FULL)
	$(BIN)/python -m benchmarks $(ARGS)

evaluate: $(FULL)
	$(BIN)/python benchmarks/evaluate.py $(ARGS)

evaluate-quick: $(FULL)
	$(BIN)/python benchmarks/evaluate.py --quick $(ARGS)

clean:
	rm -rf $(VENV) $(OLDEST) .pytest_cache .ruff_cache build dist
