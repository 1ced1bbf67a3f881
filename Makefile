# rt_fusion: one entry point. `make demo` and `make test` do all set-up on a fresh machine.
# ROS 2 Jazzy (LTS) by default; `ROS_DISTRO=kilted make setup test` uses Kilted in its own venv.
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
ROS_DISTRO ?= jazzy
ifeq ($(ROS_DISTRO),kilted)
VENV := .venv-kilted
LOCK := requirements-lock-kilted.txt
else
VENV := .venv
LOCK := requirements-lock.txt
endif
PY := $(VENV)/bin/python
export ROS_DISTRO VENV
# launch_ros, `ros2 launch` and ament_index find packages here (tools/setup_env.sh lays it out).
export AMENT_PREFIX_PATH := $(CURDIR)/$(VENV)
export PYTHONUNBUFFERED := 1

.PHONY: setup test test-all test-under-load lint typecheck pytest demo eval bench lock clean help

help:
	@echo 'make setup   venv + ROS 2 wheels + rt_fusion_msgs + launch + rt_fusion (idempotent)'
	@echo 'make test    setup, then ruff, mypy (strict on core/ and inference/), pytest'
	@echo 'make test-under-load   pytest RUNS times (3) in a row with every core busy (LOAD)'
	@echo 'make demo    setup, then the main job on the embedded default (results/demo/)'
	@echo 'make eval    setup, then every scenario x 3 seeds scored against ground truth and the baseline'
	@echo 'make bench   setup, then every benchmark under tools/ (--quick unless FULL=1)'
	@echo 'ROS_DISTRO=kilted make ...   the same on ROS 2 Kilted (.venv-kilted); default jazzy'

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

# The suite with every core busy (stress-ng, or busy loops), RUNS times in a row: what a loaded
# CI machine does to timing. RUNS=1 LOAD=4 PYTEST_ARGS='-x tests/nodes' narrow it.
test-under-load: setup
	@tools/under_load.sh tools/run_pytest.sh $(PYTEST_ARGS)

# What CI runs: the full suite on Jazzy (the default), then on Kilted.
test-all:
	$(MAKE) test ROS_DISTRO=jazzy
	$(MAKE) test ROS_DISTRO=kilted

demo: setup
	$(PY) tools/demo.py $(DEMO_ARGS)

# Perception and planning scored against the scenarios' ground truth (tools/evaluate.py), with the
# single-modality ablations, compared with config/eval_baseline.yaml (exit 1 names regressions).
EVAL_ARGS ?=
eval: setup
	$(PY) tools/evaluate.py --suite --seeds 3 --seconds 6 --ablate radar_only,camera_only \
	  --baseline config/eval_baseline.yaml --out results/eval $(EVAL_ARGS)

bench: setup
	@tools/run_benchmarks.sh

# The launch wheels come from ../shared (--no-index), not from the lock: leave them out.
lock: setup
	@{ echo '# pip freeze --all of a working $(VENV) (ROS 2 $(ROS_DISTRO); constraints for make setup). Regenerate: ROS_DISTRO=$(ROS_DISTRO) make lock'; \
	  $(PY) -m pip freeze --all --exclude-editable | grep -viE '^(rt[-_]fusion|pip==)' | grep -v ' @ file://'; } > $(LOCK)

clean:
	rm -rf build results .mypy_cache .ruff_cache .pytest_cache
