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

# The main job: annotate the bundled example abstracts with the embedded default pipeline
# (NER -> abbreviations -> sapbert_linker; it ships in spacy_sapbert/data/default) and print them.
run: setup
	$(PY) -m spacy_sapbert.cli annotate examples/abstracts.jsonl --output annotations/examples.jsonl --overwrite --show

test: setup
	$(PY) -m pytest -q tests

clean:
	rm -rf $(VENV) build *.egg-info
