# Quick start: `make run` (the main job) and `make test`.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
STAMP := $(VENV)/.installed

.PHONY: setup run test clean

# Idempotent: the venv and the install are redone only when setup.py changes.
setup: $(STAMP)

$(STAMP): setup.py
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip wheel setuptools
	$(PIP) install -q torch==2.13.0
	$(PIP) install -q -e ".[train,demo,dev]"
	touch $(STAMP)

# For now the main job fetches the assets, builds the three KBs and prints their statistics.
run: setup
	$(PY) -m weasel run assets
	$(PY) -m weasel run kb
	$(PY) -m weasel run kb-stats

test: setup
	$(PY) -m pytest -q tests

clean:
	rm -rf $(VENV) build *.egg-info
