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

.PHONY: setup test test-integration test-aarch64 test-all test-under-load lint typecheck pytest demo eval bench lock clean help

help:
	@echo 'make setup   venv + ROS 2 wheels + rt_fusion_msgs + launch + rt_fusion (idempotent)'
	@echo 'make test    setup, then ruff, mypy (strict on core/ and inference/), the fast pytest tier'
	@echo 'make test-integration   setup, then the integration tier (process graphs, launch, demo, eval, colcon)'
	@echo 'make test-aarch64   the core'"'"'s architecture-specific tests as aarch64 code (QEMU, arm64 Debian root; root needed)'
	@echo 'make test-all   what CI runs: fast tier on jazzy and kilted, integration tier on jazzy, aarch64'
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

# The test tiers: `make test` is the fast one (unit and in-process tests; everything not marked
# `integration`), `make test-integration` the rest (real process graphs, launch, demo,
# evaluation, soak/chaos, colcon, rosdep). PYTEST_MARK= (empty) runs both, e.g. for one test by
# name: make pytest PYTEST_MARK= PYTEST_ARGS='tests/test_launch.py -k vehicle'.
PYTEST_MARK ?= not integration
PYTEST_ARGS ?=
pytest: setup
	@tools/run_pytest.sh $(if $(PYTEST_MARK),-m '$(PYTEST_MARK)') $(PYTEST_ARGS)

test: lint typecheck pytest

test-integration: setup
	@tools/run_pytest.sh -m integration $(PYTEST_ARGS)

# The ROS-free core's architecture-specific tests (shared-memory rings across processes, keeper,
# clock, sync, tracker and planner kernels) as aarch64 code: an arm64 Debian root under QEMU user
# emulation, cached in build/aarch64-root (tools/test_aarch64.sh; needs root for chroot/binfmt).
test-aarch64:
	@tools/test_aarch64.sh $(PYTEST_ARGS)

# The suite with every core busy (stress-ng, or busy loops), RUNS times in a row: what a loaded
# CI machine does to timing. RUNS=1 LOAD=4 PYTEST_ARGS='-x tests/nodes' narrow it.
test-under-load: setup
	@tools/under_load.sh tools/run_pytest.sh $(PYTEST_ARGS)

# What CI runs: the fast tier on Jazzy (the default) and on Kilted (there without the tests
# marked ros_free, whose results do not depend on the distribution), the integration tier on
# Jazzy, and the aarch64 tests (skipped, saying why, where this machine cannot emulate).
test-all:
	$(MAKE) test ROS_DISTRO=jazzy
	$(MAKE) test ROS_DISTRO=kilted PYTEST_MARK='not integration and not ros_free'
	$(MAKE) test-integration ROS_DISTRO=jazzy
	tools/test_aarch64.sh || [ $$? -eq 77 ]  # 77: this machine cannot emulate (reason printed)

demo: setup
	$(PY) tools/demo.py $(DEMO_ARGS)

# Perception and planning scored against the scenarios' ground truth (tools/evaluate.py), with the
# single-modality ablations, and the planner driving the ego (closed loop), each run compared with
# config/eval_baseline.yaml: exit 1 names regressions and runs without an entry.
EVAL_ARGS ?=
eval: setup
	$(PY) tools/evaluate.py --suite --seeds 3 --seconds 6 --ablate radar_only,camera_only \
	  --baseline config/eval_baseline.yaml --out results/eval $(EVAL_ARGS)
	$(PY) tools/evaluate.py --closed-loop --scenario stopped_car --seconds 12 \
	  --baseline config/eval_baseline.yaml --out results/eval-closed $(EVAL_ARGS)

bench: setup
	@tools/run_benchmarks.sh

# The launch wheels come from ../shared (--no-index), not from the lock: leave them out.
lock: setup
	@{ echo '# pip freeze --all of a working $(VENV) (ROS 2 $(ROS_DISTRO); constraints for make setup). Regenerate: ROS_DISTRO=$(ROS_DISTRO) make lock'; \
	  $(PY) -m pip freeze --all --exclude-editable | grep -viE '^(rt[-_]fusion|pip==)' | grep -v ' @ file://'; } > $(LOCK)

clean:
	rm -rf build results .mypy_cache .ruff_cache .pytest_cache
