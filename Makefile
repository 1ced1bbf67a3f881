# rt_fusion: one entry point. `make demo` and `make test` do all set-up on a fresh machine.
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
VENV := .venv
PY := $(VENV)/bin/python
export PYTHONUNBUFFERED := 1

.PHONY: setup test lint typecheck pytest demo bench lock clean help

help:
	@echo 'make setup   venv + ROS 2 wheels + rt_fusion_msgs + rt_fusion (idempotent)'
	@echo 'make test    setup, then ruff, mypy (strict on core/ and inference/), pytest'
	@echo 'make demo    setup, then the main job on the embedded default (results/demo/)'
	@echo 'make bench   setup, then every benchmark under tools/ (--quick unless FULL=1)'

setup:
	@tools/setup_env.sh

lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

typecheck: setup
	$(VENV)/bin/mypy rt_fusion tools rt_kernel/rt_host.py

pytest: setup
	@tools/run_pytest.sh $(PYTEST_ARGS)

test: lint typecheck pytest

demo: setup
	$(PY) tools/demo.py $(DEMO_ARGS)

bench: setup
	@tools/run_benchmarks.sh

lock: setup
	@{ echo '# pip freeze --all of a working .venv (constraints for make setup). Regenerate: make lock'; \
	  $(PY) -m pip freeze --all --exclude-editable | grep -viE '^(rt[-_]fusion|pip==)'; } > requirements-lock.txt

clean:
	rm -rf build results .mypy_cache .ruff_cache .pytest_cache
