# Two entry points, both of which set everything up first: `make serve` and `make test`.
VENV ?= .venv
BIN := $(VENV)/bin
EXTRAS := piper,espeak,wyoming,kokoro,pocket,postgres,redis,ray,dev,bench

.PHONY: serve test lint setup system-packages

$(BIN)/speechgate: pyproject.toml
	python3 -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet --editable '.[$(EXTRAS)]'
	touch $@

setup: $(BIN)/speechgate

serve: setup
	$(BIN)/speechgate serve

lint: setup
	$(BIN)/ruff check src tests bench
	$(BIN)/ruff format --check src tests bench
	$(BIN)/mypy

# Debian's chromium, PostgreSQL and Redis, for the browser, store and shared-limits tests
# (apt-get, only if missing).
system-packages:
	bash scripts/system-packages.sh

test: lint system-packages
	$(BIN)/pytest
