#!/usr/bin/env bash
# One-command development environment for rt_fusion (called by `make setup`).
#
#   ROS_DISTRO=jazzy (default, the LTS) -> .venv;  ROS_DISTRO=kilted -> .venv-kilted.
#   Each distribution has its own venv, so switching between them is instant.
#
#   1. system packages (apt, sudo when not root) when missing;
#   2. the venv with the pinned requirements (requirements.txt + requirements-ros-<distro>.txt,
#      constrained by the distribution's lock file);
#   3. rt_fusion_msgs built with cmake against the wheels and installed into the venv
#      (the recipe verified in ../shared/ROS2_WHEELS.md);
#   4. launch, launch_ros and ros2cli from ../shared/wheels/ros2_launch[/jazzy] when that folder
#      exists (--no-deps --no-index), composition_interfaces built the same way as the messages;
#   5. rt_fusion installed in editable mode, the ament prefix layout that launch_ros and
#      `ros2 launch` need laid out inside the venv, then an import check.
#
# Idempotent: a stamp keyed on every input (requirements, setup files, .msg files, this script)
# makes a second run with nothing changed take about a second. `--force` rebuilds anyway.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
# shellcheck source=tools/ros_wheels.sh
source "$ROOT/tools/ros_wheels.sh"
say() { printf '\033[1msetup:\033[0m %s\n' "$*"; }
die() { printf '\033[1;31msetup: error:\033[0m %s\n' "$*" >&2; exit 1; }

DISTRO=${ROS_DISTRO:-jazzy}
case $DISTRO in
  jazzy) VENV=$ROOT/.venv; LOCK=requirements-lock.txt; LAUNCH_WHEELS=$ROOT/../shared/wheels/ros2_launch/jazzy ;;
  kilted) VENV=$ROOT/.venv-kilted; LOCK=requirements-lock-kilted.txt; LAUNCH_WHEELS=$ROOT/../shared/wheels/ros2_launch ;;
  *) die "ROS_DISTRO=$DISTRO: make setup builds jazzy (default) or kilted from PyPI wheels; with a ROS install from apt (/opt/ros/$DISTRO) build with colcon instead (README: On the vehicle)" ;;
esac
COMPOSITION_SRC=$ROOT/../shared/wheels/ros2_launch/src/composition_interfaces
STAMP=$VENV/.rt_fusion_setup.sha256
MSG_PKG=packages/rt_fusion_msgs
# Standard interfaces no wheel provides (tf2_msgs, vision_msgs, radar_msgs), as source in ../shared.
STD_MSGS_SRC=$ROOT/../shared/msgs_src
STD_MSGS=(tf2_msgs vision_msgs radar_msgs)
PKG=packages/rt_fusion
BUILD=$ROOT/build/$DISTRO
APT_PACKAGES=(cmake g++ make libportaudio2 libasound2)

inputs_key() {
  { cat requirements.txt requirements-nodeps.txt "requirements-ros-$DISTRO.txt" "$PKG"/setup.py "$PKG"/setup.cfg "$PKG"/package.xml \
        "$MSG_PKG/CMakeLists.txt" "$MSG_PKG/package.xml" "$MSG_PKG"/msg/*.msg tools/setup_env.sh \
        tools/ros_wheels.sh
    local pkg
    for pkg in "${STD_MSGS[@]}"; do
      [[ -d $STD_MSGS_SRC/$pkg ]] && find "$STD_MSGS_SRC/$pkg" -type f \( -name '*.msg' -o -name '*.srv' \
        -o -name '*.action' -o -name CMakeLists.txt -o -name package.xml \) -print0 | sort -z | xargs -0 cat
    done
    [[ -f $LOCK ]] && cat "$LOCK"
    [[ -f $LAUNCH_WHEELS/SHA256SUMS ]] && cat "$LAUNCH_WHEELS/SHA256SUMS"
    echo "$DISTRO"; } | sha256sum | cut -d' ' -f1
}

# The ament prefix layout launch_ros and `ros2 launch` look for (../shared/wheels/ros2_launch/
# README.md): the package marker, share/rt_fusion/ with real folders and one symlink per file
# (ros2 launch walks with os.walk, which does not follow directory symlinks), and
# lib/rt_fusion/<executable> for every console script. Cheap: refreshed on every run so a new
# launch or config file is found without --force.
ament_layout() {
  local share=$VENV/share/rt_fusion lib=$VENV/lib/rt_fusion
  mkdir -p "$VENV/share/ament_index/resource_index/packages"
  : >"$VENV/share/ament_index/resource_index/packages/rt_fusion"
  rm -rf "$share" "$lib"
  mkdir -p "$share" "$lib"
  ln -s "$ROOT/$PKG/package.xml" "$share/package.xml"
  local folder file
  for folder in launch config models; do
    while IFS= read -r -d '' file; do
      mkdir -p "$share/$(dirname "$file")"
      ln -s "$ROOT/$file" "$share/$file"
    done < <(find "$folder" -type f ! -path '*/__pycache__/*' -print0)
  done
  "$VENV/bin/python" - "$lib" "$VENV/bin" <<'PY'
import importlib.metadata as md, os, sys
lib, bindir = sys.argv[1:]
for ep in md.distribution('rt_fusion').entry_points:
    if ep.group == 'console_scripts' and os.path.exists(os.path.join(bindir, ep.name)):
        os.symlink(os.path.join(bindir, ep.name), os.path.join(lib, ep.name))
PY
}

# The tracker's and the planner's numba kernels compiled into their on-disk cache once here, so
# that no test or node start pays it (about 10 and 20 s on two cores; a second or less when the
# cache is current).
warm_kernels() {
  local code='from rt_fusion.core.perception import tracker; tracker.warm_up()
from rt_fusion.core.planning import frenet; frenet.warm_up()'
  "$VENV/bin/python" -c "$code" \
    || die "the tracker's or the planner's kernels did not compile: $VENV/bin/python -c '$code'"
}

# rt_fusion is installed editable, so nothing byte-compiles it, and where the environment sets
# PYTHONDONTWRITEBYTECODE every node start compiles its ~30 modules from source: 0.07-0.1 s of
# the fusion node's start on this VM (imports 0.35-0.44 s -> 0.29-0.31 s), which a respawned
# node pays again. Compiled here once (only what changed; cheap when current).
byte_compile() {
  "$VENV/bin/python" -m compileall -q -j 0 "$ROOT/rt_fusion" "$ROOT/tools" >/dev/null \
    || die "byte-compiling failed: $VENV/bin/python -m compileall $ROOT/rt_fusion $ROOT/tools"
}

# colcon, run anywhere above this repository (a workspace holding the clone), must not take the
# venv's ament prefix or the cmake build trees for packages.
colcon_ignore() {
  mkdir -p "$ROOT/build"
  : >"$ROOT/build/COLCON_IGNORE"
  [[ -d $VENV ]] && : >"$VENV/COLCON_IGNORE"
  return 0
}

KEY=$(inputs_key)
if [[ ${1:-} != --force && -f $STAMP && $(cat "$STAMP") == "$KEY" ]] \
   && "$VENV/bin/python" -c 'import rt_fusion' 2>/dev/null; then
  ament_layout
  colcon_ignore
  byte_compile
  warm_kernels
  say "up to date ($DISTRO: $(basename "$VENV") matches requirements and interfaces; --force rebuilds)"
  exit 0
fi
START=$SECONDS
say "ROS 2 $DISTRO into $(basename "$VENV")"

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
  # A real browser for the operator page's test (tests/nodes/test_viewer_node.py): optional,
  # the rest of the setup does not need it (the test skips, saying so, without it).
  if ! command -v chromium-headless-shell >/dev/null 2>&1 && ! command -v chromium >/dev/null 2>&1; then
    SUDO=; [[ $(id -u) -ne 0 ]] && SUDO=sudo
    say "installing chromium-headless-shell (the operator page's browser test)"
    { $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq \
        --no-install-recommends chromium-headless-shell >/dev/null; } \
      || say "chromium-headless-shell not installable here: the operator page's test will skip"
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
  say "creating $(basename "$VENV") with $("$PYTHON" -V 2>&1)"
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
say "installing pinned requirements into $(basename "$VENV") (first time: about a minute)"
constraints=()
if [[ -f $LOCK ]]; then constraints=(-c "$LOCK"); else say "no $LOCK yet: unconstrained (make lock writes it)"; fi
pip_install -r requirements.txt -r "requirements-ros-$DISTRO.txt" "${constraints[@]}"
pip_install --no-deps -r requirements-nodeps.txt  # (they lack, on purpose, dependencies they declare)
nodeps=$(sed -n 's/^\([A-Za-z0-9_.-]*\)==.*/\1/p' requirements-nodeps.txt | paste -sd'|')
conflicts=$(python -m pip check 2>&1 | grep -viE "^($nodeps) |no broken requirements" || true)
[[ -z $conflicts ]] || say "warning: pip check reports conflicts in $(basename "$VENV"): $conflicts"

# --- 3. rt_fusion_msgs (cmake recipe of ROS2_WHEELS.md) ---------------------------------------
# The wheels' exported CMake files carry the build container's Python paths; point them here.
fix_wheel_cmake_paths "$VENV/bin/python" "$VENV"
export AMENT_PREFIX_PATH=$VENV CMAKE_PREFIX_PATH=$VENV
cmake_package() {  # name source-dir
  local log=$BUILD/$1.log
  mkdir -p "$BUILD"
  # A build tree configured from another source folder (the messages moved from ros2_ws/src to
  # packages/) is stale: cmake refuses it, so start that one afresh.
  if [[ -f $BUILD/$1/CMakeCache.txt ]] \
     && ! grep -qx "CMAKE_HOME_DIRECTORY:INTERNAL=$(cd "$2" && pwd)" "$BUILD/$1/CMakeCache.txt"; then
    rm -rf "${BUILD:?}/$1"
  fi
  {
    cmake -S "$2" -B "$BUILD/$1" -DCMAKE_INSTALL_PREFIX="$VENV" -DBUILD_TESTING=OFF \
          -DPython3_EXECUTABLE="$VENV/bin/python" \
    && cmake --build "$BUILD/$1" -j"$(nproc)" \
    && cmake --install "$BUILD/$1"
  } >"$log" 2>&1 || { tail -30 "$log" >&2; die "building $1 failed (full log: $log)"; }
}
say "building rt_fusion_msgs (cmake + rosidl) into $(basename "$VENV")"
cmake_package rt_fusion_msgs "$MSG_PKG"
for pkg in "${STD_MSGS[@]}"; do
  [[ -d $STD_MSGS_SRC/$pkg ]] || die "no $STD_MSGS_SRC/$pkg: the standard interfaces' sources (../shared/msgs_src)"
  say "building $pkg (${STD_MSGS_SRC#"$ROOT/"}/$pkg, cmake + rosidl) into $(basename "$VENV")"
  cmake_package "$pkg" "$STD_MSGS_SRC/$pkg"
done

# --- 4. launch, launch_ros, ros2cli ------------------------------------------------------------
if [[ -d $LAUNCH_WHEELS && -d $COMPOSITION_SRC ]]; then
  say "installing launch/launch_ros/ros2cli ($DISTRO wheels of ${LAUNCH_WHEELS#"$ROOT/"}) and building composition_interfaces"
  (cd "$LAUNCH_WHEELS" && sha256sum --quiet -c SHA256SUMS) >&2 \
    || die "checksum mismatch in $LAUNCH_WHEELS (sha256sum -c SHA256SUMS there)"
  pip_install --no-deps --no-index "$LAUNCH_WHEELS"/*.whl "$LAUNCH_WHEELS"/extra/*.whl
  cmake_package composition_interfaces "$COMPOSITION_SRC"
else
  say "no ${LAUNCH_WHEELS#"$ROOT/"} (the launch wheels of ../shared): ros2 launch is not installed, the launch tests will skip and say so"
fi

# --- 5. rt_fusion itself ---------------------------------------------------------------------
say "installing rt_fusion (editable)"
pip_install --no-deps --no-build-isolation --use-pep517 -e "$PKG"
ament_layout
colcon_ignore

python -c "import rclpy, rt_fusion, rt_fusion_msgs.msg, tf2_msgs.msg, vision_msgs.msg, radar_msgs.msg; print('setup: import check ok:', \
rt_fusion.__version__, 'rclpy', rclpy.__file__.rsplit('/', 2)[-2])" \
  || die "import check failed: $VENV/bin/python -c 'import rclpy, rt_fusion, rt_fusion_msgs.msg'"
byte_compile
warm_kernels
inputs_key >"$STAMP"
say "done in $((SECONDS - START)) s"
