# `make test` builds .venv from nothing (torch first, pinned, so pip never pulls a CUDA build),
# installs posbench with its test extras and runs the test suite.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
TORCH := torch==2.13.0

.PHONY: venv test clean

$(VENV)/.installed: pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet $(TORCH)
	$(PY) -m pip install --quiet -e '.[test]'
	touch $@

venv: $(VENV)/.installed

test: venv
	$(PY) -m pytest -q

clean:
	rm -rf $(VENV)
