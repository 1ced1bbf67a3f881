# Sourced by tools/setup_env.sh (the venv) and tools/ros_underlay.sh (the /opt/ros stand-in).
#
# fix_wheel_cmake_paths PYTHON PREFIX [PYTHONPATH]: the ROS wheels' exported CMake files carry
# their build container's Python paths (/opt/python/cpXY-cpXY/...); point them at PYTHON's include
# folder and numpy's (../shared/ROS2_WHEELS.md). Re-run after reinstalling those wheels.
fix_wheel_cmake_paths() {
  local py=$1 prefix=$2 pypath=${3:-} tag ver inc npinc
  tag=$("$py" -c "import sys; print('cp%d%d-cp%d%d' % (sys.version_info[:2] * 2))")
  ver=$("$py" -c "import sys; print('%d.%d' % sys.version_info[:2])")
  inc=$("$py" -c "import sysconfig; print(sysconfig.get_paths()['include'])")
  npinc=$(PYTHONPATH=$pypath "$py" -c "import numpy; print(numpy.get_include())")
  { grep -rl "/opt/python/$tag/" "$prefix"/share/*/cmake/ 2>/dev/null || true; } | xargs -r sed -i \
    -e "s#/opt/python/$tag/include/python$ver#$inc#g" \
    -e "s#/opt/python/$tag/lib/python$ver/site-packages/numpy/_core/include#$npinc#g"
}
