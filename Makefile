# Two entry points, both of which set everything up first: `make serve` and `make test`.
# Two jobs at once: `make test`'s Python packages (uv) and Debian packages (apt-get) install side
# by side, most of a minute less on a fresh machine.
MAKEFLAGS += --jobs=2
VENV ?= .venv
BIN := $(VENV)/bin
# Every install goes through the tested pins (constraints.txt), so a run is reproducible. uv
# installs them (in parallel: about half of pip's time for the test set). It reads none of pip's
# configuration, so it is given pip's find-links, where a machine keeps local wheels (the CPU
# build of torch, which the test set needs: PyPI's torch for Linux is a CUDA build of gigabytes).
FIND_LINKS = $(shell python3 -m pip config get global.find-links 2> /dev/null)
UV_INSTALL = $(BIN)/uv pip install --quiet --python $(VENV) --compile-bytecode \
	--constraint constraints.txt $(foreach links,$(FIND_LINKS),--find-links $(links))
.PHONY: serve test test-fast lint setup system-packages

$(BIN)/uv:
	python3 -m venv $(VENV)
	$(BIN)/pip install --quiet uv==0.13.8

# What serving needs: speechgate without extras.
$(VENV)/.installed-serve: pyproject.toml constraints.txt | $(BIN)/uv
	$(UV_INSTALL) --editable .
	touch $@

# What the suite needs: every extra, and the tools.
$(VENV)/.installed-dev: pyproject.toml constraints.txt | $(BIN)/uv
	$(UV_INSTALL) --editable '.[dev]'
	touch $@

setup: $(VENV)/.installed-dev

# The engines of speechgate's own dependencies (Piper's embedded voice, espeak-ng), even in a
# venv that `make test` filled with every extra (installed engines are the default, and pocket
# without its weights would fail to start); to serve others: SPEECHGATE_ENGINES=piper,kokoro.
serve: export SPEECHGATE_ENGINES ?= piper,espeak
serve: $(VENV)/.installed-serve
	$(BIN)/speechgate serve

lint: setup
	$(BIN)/ruff check src tests bench
	$(BIN)/ruff format --check src tests bench
	$(BIN)/mypy

# Debian's chromium, PostgreSQL and Redis, for the browser, store and shared-limits tests
# (apt-get, only if missing).
system-packages:
	bash scripts/system-packages.sh

# One test process per core (pytest-xdist), each given whole modules, so a module's shared server
# starts once; TEST_WORKERS=0 runs in this process alone.
TEST_WORKERS ?= auto
PYTEST := $(BIN)/pytest --numprocesses $(TEST_WORKERS) --dist loadscope

# The linters first, not beside the suite: the type checker there, even niced, made the suite's
# timing-sensitive tests flaky (two failures in two runs) for a dozen seconds saved.
test: lint system-packages
	$(PYTEST)

# The inner loop: no real engine, no browser (the fake engine stands in where the engine is not
# the subject); `make test` runs everything, these included.
test-fast: setup
	$(PYTEST) -m "not slow and not browser"
