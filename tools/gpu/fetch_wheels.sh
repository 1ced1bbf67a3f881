#!/usr/bin/env bash
# What tools/gpu/session.sh needs on the GPU machine (Python 3.12, no network), fetched here into
# git-ignored folders to carry with the run: .whl/ (cp312 wheels of the lock file's ros-*
# packages, ~42 MB), .device/wheels/ (rosbags and the other pure-Python or cp312 wheels the
# image lacks, empy's sdist, ~10 MB), .device/launch/ (the Jazzy launch/launch_ros/ros2cli
# wheels of ../shared) and .device/composition_interfaces (its .srv package, built there).
# The tree plus these is close to the 64 MiB a run carries: check `du -sh .whl .device`.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
SHARED=${SHARED:-../shared}
plat=(--only-binary=:all: --python-version 3.12 --implementation cp --platform manylinux_2_28_x86_64
  --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64)
mkdir -p .whl .device/wheels .device/launch
pip download -q --no-deps "${plat[@]}" -d .whl -r <(grep '^ros-' requirements-lock.txt)
pin() { grep -i "^$1==" requirements-lock.txt; }
pip download -q --no-deps "${plat[@]}" -d .device/wheels \
  $(for p in apsw backports.zstd catkin-pkg docutils lark-parser lz4 markdown-it-py mdurl \
      Pygments rich osrf-pycommon psutil argcomplete pyparsing python-dateutil rosbags \
      ruamel.yaml typing_extensions PyYAML; do pin "$p"; done)
pip download -q --no-deps --no-binary=:all: -d .device/wheels "$(pin empy)"
cp "$SHARED"/wheels/ros2_launch/jazzy/*.whl .device/launch/
rm -rf .device/composition_interfaces
cp -r "$SHARED"/wheels/ros2_launch/src/composition_interfaces .device/
du -sh .whl .device
