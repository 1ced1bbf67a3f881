#!/usr/bin/env bash
# A ROS 2 prefix that stands for the vehicle's /opt/ros/<distro>, assembled from the
# distribution's PyPI wheels, for building and launching rt_fusion the way the vehicle does
# (colcon in a workspace on top of an underlay). Not the project's venv: the system Python with a
# prefix of its own, entered with `source PREFIX/setup.bash` as /opt/ros/<distro>/setup.bash is.
#
#   tools/ros_underlay.sh [PREFIX]        # default build/underlay-$ROS_DISTRO (jazzy)
#   source build/underlay-jazzy/setup.bash
#
# What it holds, as the vehicle's apt packages would: the ROS wheels of requirements-ros-<distro>.txt
# (rclpy, Fast DDS, the message packages, ament_cmake and rosidl for building interfaces),
# launch/launch_ros/ros2cli from ../shared/wheels/ros2_launch, composition_interfaces built with
# cmake, colcon, and the Python libraries package.xml's rosdep keys install (python3-numpy ...).
# Versions from the distribution's lock file. Cached: a stamp keyed on its inputs makes a second
# run with nothing changed take a second. Used by tests/test_vehicle_workspace.py.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=tools/ros_wheels.sh
source "$ROOT/tools/ros_wheels.sh"
say() { printf '\033[1munderlay:\033[0m %s\n' "$*"; }
die() { printf '\033[1;31munderlay: error:\033[0m %s\n' "$*" >&2; exit 1; }

DISTRO=${ROS_DISTRO:-jazzy}
case $DISTRO in
  jazzy) LOCK=$ROOT/requirements-lock.txt; LAUNCH_WHEELS=$ROOT/../shared/wheels/ros2_launch/jazzy ;;
  kilted) LOCK=$ROOT/requirements-lock-kilted.txt; LAUNCH_WHEELS=$ROOT/../shared/wheels/ros2_launch ;;
  *) die "ROS_DISTRO=$DISTRO: the wheel underlay exists for jazzy and kilted" ;;
esac
PREFIX=${1:-$ROOT/build/underlay-$DISTRO}
mkdir -p "$PREFIX"
PREFIX=$(cd "$PREFIX" && pwd)
COMPOSITION_SRC=$ROOT/../shared/wheels/ros2_launch/src/composition_interfaces
# The standard interfaces rt_fusion uses that no wheel provides (apt on the vehicle).
STD_MSGS_SRC=$ROOT/../shared/msgs_src
STD_MSGS=(tf2_msgs vision_msgs radar_msgs)
[[ -d $LAUNCH_WHEELS && -d $COMPOSITION_SRC ]] \
  || die "no launch wheels in ${LAUNCH_WHEELS} (../shared/wheels/ros2_launch): nothing to launch with"
# The first python3 on PATH outside any venv (on the vehicle /usr/bin/python3). Not Debian's
# /usr/bin/python3 here: its pip splits a --prefix into local/lib/.../dist-packages and
# site-packages, a layout no ROS install has.
PYTHON=${UNDERLAY_PYTHON:-}
if [[ -z $PYTHON ]]; then
  IFS=: read -ra dirs <<<"$PATH"
  for d in "${dirs[@]}"; do
    [[ $d == "$ROOT"/.venv* || ( -n ${VIRTUAL_ENV:-} && $d == "$VIRTUAL_ENV"* ) ]] && continue
    [[ -x $d/python3 ]] && { PYTHON=$d/python3; break; }
  done
fi
[[ -n $PYTHON ]] || die "no system python3 on PATH outside a venv (UNDERLAY_PYTHON=... names one)"
PYTHON=$("$PYTHON" -c "import sys; print(sys.executable)")
PYVER=$("$PYTHON" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
SITE=$PREFIX/lib/python$PYVER/site-packages

# What package.xml's exec_depend keys give on the vehicle (python3-numpy, python3-scipy, ...
# python3-onnxruntime-pip), plus colcon and what the launch wheels need.
RUNTIME=(numpy scipy numba PyYAML opencv-python-headless rosbags cantools python-can msgpack
         pyserial sounddevice onnxruntime rich matplotlib
         colcon-common-extensions osrf-pycommon psutil argcomplete packaging)
# The setuptools Ubuntu 24.04 ships (python3-setuptools), not the lock's: colcon's
# --symlink-install runs `setup.py develop --editable`, which setuptools 80 no longer has.
SETUPTOOLS=setuptools==68.1.2

key() {
  { cat "$ROOT/requirements-ros-$DISTRO.txt" "$LOCK" "$LAUNCH_WHEELS/SHA256SUMS" "${BASH_SOURCE[0]}" \
        "$ROOT/tools/ros_wheels.sh"
    find "$STD_MSGS_SRC" -type f \( -name '*.msg' -o -name CMakeLists.txt -o -name package.xml \) \
      -print0 | sort -z | xargs -0 cat
    echo "$PYTHON $PYVER ${RUNTIME[*]} $SETUPTOOLS"; } | sha256sum | cut -d' ' -f1
}
STAMP=$PREFIX/.underlay.sha256
if [[ -f $STAMP && $(cat "$STAMP") == "$(key)" ]]; then
  say "up to date ($PREFIX)"
  exit 0
fi
START=$SECONDS
say "ROS 2 $DISTRO wheels into $PREFIX for $PYTHON ($PYVER) (first time: about 2 minutes)"
rm -rf "$PREFIX" && mkdir -p "$PREFIX"
log=$PREFIX/pip.log
pip_prefix() {
  PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore "$PYTHON" -m pip install -q \
    --no-warn-script-location --ignore-installed --prefix "$PREFIX" "$@" >>"$log" 2>&1 \
    || { grep -v 'is ignored: it is neither' "$log" | tail -20 >&2; die "pip install --prefix failed (log: $log)"; }
}
grep -v '^setuptools==' "$LOCK" >"$PREFIX/constraints.txt"
pip_prefix -c "$PREFIX/constraints.txt" -r "$ROOT/requirements-ros-$DISTRO.txt" "${RUNTIME[@]}" "$SETUPTOOLS"
(cd "$LAUNCH_WHEELS" && sha256sum --quiet -c SHA256SUMS) >&2 || die "checksum mismatch in $LAUNCH_WHEELS"
pip_prefix --no-deps --no-index "$LAUNCH_WHEELS"/*.whl "$LAUNCH_WHEELS"/extra/*.whl

# The environment /opt/ros/<distro>/setup.bash sets (its ament prefix, libraries, Python, tools),
# with the interpreter it was built for first on PATH (as /usr/bin/python3 is on the vehicle).
# The wheels' own re-exec (ros_wheels_bootstrapper.pth) only runs in a site directory; here the
# libraries are on LD_LIBRARY_PATH as on the vehicle.
libs=$PREFIX/lib
for d in "$SITE"/ros_*.libs; do [[ -d $d ]] && libs+=":$d"; done
for name in setup.bash local_setup.bash; do
  cat >"$PREFIX/$name" <<EOF
# generated by tools/ros_underlay.sh: stands for /opt/ros/$DISTRO/$name (ROS 2 $DISTRO from wheels)
export ROS_DISTRO=$DISTRO ROS_VERSION=2 ROS_PYTHON_VERSION=3
export AMENT_PREFIX_PATH=$PREFIX\${AMENT_PREFIX_PATH:+:\$AMENT_PREFIX_PATH}
export CMAKE_PREFIX_PATH=$PREFIX\${CMAKE_PREFIX_PATH:+:\$CMAKE_PREFIX_PATH}
export PYTHONPATH=$SITE\${PYTHONPATH:+:\$PYTHONPATH}
export PATH=$PREFIX/bin:$(dirname "$PYTHON")\${PATH:+:\$PATH}
export LD_LIBRARY_PATH=$libs\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}
export _ROS_WHEELS_BOOTSTRAP_COMPLETE=1
EOF
done
: >"$PREFIX/COLCON_IGNORE"

fix_wheel_cmake_paths "$PYTHON" "$PREFIX" "$SITE"

# composition_interfaces (launch_ros imports it) and the standard interfaces (ros-<distro>-tf2-msgs
# ... on the vehicle), built into the prefix as on a ROS install.
say "building composition_interfaces, ${STD_MSGS[*]} into the prefix"
(
  # shellcheck source=/dev/null
  source "$PREFIX/setup.bash"
  for src in "$COMPOSITION_SRC" "${STD_MSGS[@]/#/$STD_MSGS_SRC/}"; do
    b=$PREFIX/.build/$(basename "$src")
    { cmake -S "$src" -B "$b" -DCMAKE_INSTALL_PREFIX="$PREFIX" -DBUILD_TESTING=OFF \
        -DPython3_EXECUTABLE="$PYTHON" \
      && cmake --build "$b" -j"$(nproc)" && cmake --install "$b"; } >>"$PREFIX/cmake.log" 2>&1 \
      || { tail -30 "$PREFIX/cmake.log" >&2; exit 1; }
  done
  rm -rf "$PREFIX/.build"
  "$PYTHON" -c 'import rclpy, launch_ros, composition_interfaces.srv, tf2_msgs.msg, vision_msgs.msg, radar_msgs.msg' \
    || { echo "import check failed with $PREFIX/setup.bash sourced" >&2; exit 1; }
) || die "composition_interfaces, the standard interfaces or the import check failed (log: $PREFIX/cmake.log)"
key >"$STAMP"
say "done in $((SECONDS - START)) s: source $PREFIX/setup.bash"
