#!/usr/bin/env bash
# One-command development environment for rt_fusion (called by `make setup`).
#
#   1. system packages (apt, sudo when not root) when missing;
#   2. .venv with the pinned requirements (ROS 2 Kilted wheels from PyPI, numpy, opencv, ...);
#   3. rt_fusion_msgs built with cmake against the wheels and installed into .venv
#      (the recipe verified in ../shared/ROS2_WHEELS.md);
#   4. rt_fusion installed in editable mode, then checked by importing it.
#
# Idempotent: a stamp keyed on every input (requirements, setup files, .msg files, this script)
# makes a second run with nothing changed take about a second. `--force` rebuilds anyway.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
VENV=$ROOT/.venv
STAMP=$VENV/.rt_fusion_setup.sha256
MSG_PKG=ros2_ws/src/rt_fusion_msgs
BUILD=$ROOT/build/rt_fusion_msgs
APT_PACKAGES=(cmake g++ make libportaudio2 libasound2)

say() { printf '\033[1msetup:\033[0m %s\n' "$*"; }
die() { printf '\033[1;31msetup: error:\033[0m %s\n' "$*" >&2; exit 1; }

inputs_key() {
  cat requirements.txt requirements-lock.txt setup.py setup.cfg package.xml \
      "$MSG_PKG/CMakeLists.txt" "$MSG_PKG/package.xml" "$MSG_PKG"/msg/*.msg \
      tools/setup_env.sh | sha256sum | cut -d' ' -f1
}

KEY=$(inputs_key)
if [[ ${1:-} != --force && -f $STAMP && $(cat "$STAMP") == "$KEY" ]] \
   && "$VENV/bin/python" -c 'import rt_fusion' 2>/dev/null; then
  say "up to date (.venv matches requirements and interfaces; --force rebuilds)"
  exit 0
fi
START=$SECONDS

# --- 1. system packages ---------------------------------------------------------------------
missing=()
if command -v dpkg-query >/dev/null 2>&1; then
  for pkg in "${APT_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'ok installed' || missing+=("$pkg")
  done
  if ((${#missing[@]})); then
    say "installing system packages: ${missing[*]}"
    SUDO=; [[ $(id -u) -ne 0 ]] && SUDO=sudo
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends \
      "${missing[@]}" >/dev/null
  fi
else
  say "no apt on this system: install these yourself if missing: ${APT_PACKAGES[*]}"
  for tool in cmake g++ make; do
    command -v "$tool" >/dev/null 2>&1 || die "'$tool' not found and this system has no apt"
  done
fi

# --- 2. virtual environment ------------------------------------------------------------------
PYTHON=${PYTHON:-}
if [[ -z $PYTHON ]]; then
  for candidate in python3.11 python3.12 python3.10 python3.13 python3; do
    if command -v "$candidate" >/dev/null 2>&1; then PYTHON=$candidate; break; fi
  done
fi
[[ -n $PYTHON ]] || die "no python3 found (Python 3.10-3.13 needed; 3.11 preferred)"
"$PYTHON" -c 'import sys; sys.exit(not (3, 10) <= sys.version_info[:2] <= (3, 13))' \
  || die "$PYTHON is $("$PYTHON" -V 2>&1); the ROS 2 wheels need Python 3.10-3.13"
if [[ ! -x $VENV/bin/python ]]; then
  say "creating .venv with $("$PYTHON" -V 2>&1)"
  "$PYTHON" -m venv "$VENV" || die "'$PYTHON -m venv' failed (Debian/Ubuntu: apt install python3-venv)"
fi
export VIRTUAL_ENV=$VENV PATH=$VENV/bin:$PATH
# pip, quiet; on failure its output (without the noise about absent local indexes) and a stop.
pip_install() {
  local log=$ROOT/build/pip.log
  mkdir -p "$ROOT/build"
  if ! python -m pip --disable-pip-version-check install -q "$@" >"$log" 2>&1; then
    grep -vE 'is ignored: it is neither a file nor a directory' "$log" >&2 || true
    die "pip install $* failed (log: $log)"
  fi
}
say "installing pinned requirements into .venv (first time: about a minute)"
pip_install -r requirements.txt -c requirements-lock.txt
python -m pip check >/dev/null 2>&1 || say "warning: .venv/bin/pip check reports conflicts"

# --- 3. rt_fusion_msgs (cmake recipe of ROS2_WHEELS.md) ---------------------------------------
# The wheels' exported CMake files carry the build container's Python paths; point them here.
PYINC=$(python -c "import sysconfig; print(sysconfig.get_paths()['include'])")
NPINC=$(python -c "import numpy; print(numpy.get_include())")
PYTAG=$(python -c "import sys; print('cp%d%d-cp%d%d' % (sys.version_info[:2] * 2))")
PYVER=$(python -c "import sys; print('%d.%d' % sys.version_info[:2])")
{ grep -rl "/opt/python/$PYTAG/" "$VENV"/share/*/cmake/ 2>/dev/null || true; } | xargs -r sed -i \
  -e "s#/opt/python/$PYTAG/include/python$PYVER#$PYINC#g" \
  -e "s#/opt/python/$PYTAG/lib/python$PYVER/site-packages/numpy/_core/include#$NPINC#g"
export AMENT_PREFIX_PATH=$VENV CMAKE_PREFIX_PATH=$VENV
say "building rt_fusion_msgs (cmake + rosidl) into .venv"
LOG=$ROOT/build/rt_fusion_msgs.log
mkdir -p "$ROOT/build"
{
  cmake -S "$MSG_PKG" -B "$BUILD" -DCMAKE_INSTALL_PREFIX="$VENV" -DBUILD_TESTING=OFF \
        -DPython3_EXECUTABLE="$VENV/bin/python" \
  && cmake --build "$BUILD" -j"$(nproc)" \
  && cmake --install "$BUILD"
} >"$LOG" 2>&1 || { tail -30 "$LOG" >&2; die "building rt_fusion_msgs failed (full log: $LOG)"; }

# --- 4. rt_fusion itself ---------------------------------------------------------------------
say "installing rt_fusion (editable)"
pip_install --no-deps --no-build-isolation -e .

python -c "import rclpy, rt_fusion, rt_fusion_msgs.msg; print('setup: import check ok:', \
rt_fusion.__version__, 'rclpy', rclpy.__file__.rsplit('/', 2)[-2])" \
  || die "import check failed: .venv/bin/python -c 'import rclpy, rt_fusion, rt_fusion_msgs.msg'"
inputs_key >"$STAMP"
say "done in $((SECONDS - START)) s"
