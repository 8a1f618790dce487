# Quick start: `make run` (the main job) and `make test`.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
STAMP := $(VENV)/.installed
CHROMIUM ?= /usr/bin/chromium

.PHONY: setup run test chromium clean

# Idempotent: the venv and the install are redone only when setup.py changes.
setup: $(STAMP)

$(STAMP): setup.py
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip wheel setuptools
	$(PIP) install -q torch==2.13.0
	$(PIP) install -q -e ".[torch,train,demo,dev,ray]"
	touch $(STAMP)

# The main job: annotate the bundled example abstracts with the embedded default pipeline
# (NER -> abbreviations -> sapbert_linker; it ships in spacy_sapbert/data/default) and print them.
run: setup
	$(PY) -m spacy_sapbert.cli annotate examples/abstracts.jsonl --output annotations/examples.jsonl --overwrite --show

# The demo's browser test drives Debian's headless Chromium (no browser is ever downloaded): `make test`
# installs it with apt-get when it is missing and it can (root), else stops here saying how to get it.
# Tests run in parallel (pytest-xdist): one worker per CPU, at most 4; each test file stays in one worker,
# so its module fixtures (a Ray cluster, a trained toy model) are built once. Many tests start Python
# processes (the CLI, Ray actors): compiled modules are cached under the venv (not beside the sources),
# even where PYTHONDONTWRITEBYTECODE is set, so each process does not compile them again.
test: setup chromium
	PYTHONDONTWRITEBYTECODE= PYTHONPYCACHEPREFIX=$(abspath $(VENV))/pycache SAPBERT_CHROMIUM=$(CHROMIUM) \
		$(PY) -m pytest -q -n auto --maxprocesses 4 --dist loadfile tests

chromium:
	@if [ -x "$(CHROMIUM)" ]; then exit 0; fi; \
	if [ "$(CHROMIUM)" = /usr/bin/chromium ] && [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
		echo "make: installing Debian's chromium for tests/demo/test_demo_browser.py (apt-get install chromium)"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null || true; \
	fi; \
	if [ ! -x "$(CHROMIUM)" ]; then \
		echo "make: error: $(CHROMIUM) not found; the browser test needs it: run 'sudo apt-get install chromium' (Debian/Ubuntu), or set CHROMIUM=/path/to/chromium" >&2; \
		exit 1; \
	fi

clean:
	rm -rf $(VENV) build *.egg-info
