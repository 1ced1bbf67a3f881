#!/usr/bin/env bash
# GPU machine session: ROS 2 Kilted from carried cp312 wheels (.whl/), rt_fusion_msgs built with
# cmake, rt_fusion importable; then the GPU benchmarks and tests. Results go to $OUT (or results/).
# Usage there:  bash tools/gpu/session.sh [setup|inference|transport|tests|demo|all]
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
OUT=${OUT:-results/gpu}
mkdir -p "$OUT"
PY=${PYTHON:-python3}
PREFIX=$($PY -c 'import sys; print(sys.prefix)')
export PYTHONUNBUFFERED=1 COLUMNS=160

# Carried (git-ignored, see the README's GPU section): .whl/ (cp312 wheels of the lock file's
# ros-* packages), .device/wheels/ (rosbags, apsw, backports.zstd, rich, catkin_pkg, lark,
# empy's sdist, ...), .device/launch/ (../shared/wheels/ros2_launch/jazzy/*.whl) and
# .device/composition_interfaces (../shared/wheels/ros2_launch/src/composition_interfaces:
# launch_ros imports it at start; without it every launch fails).
setup() {
  $PY -m pip install -q --no-index --no-deps --no-compile .whl/*.whl || return 1
  if [[ -d .device/wheels ]]; then
    $PY -m pip install -q --no-index --no-deps --no-compile .device/wheels/*.whl \
      .device/launch/*.whl || return 1
    $PY -m pip install -q --no-index --no-deps --no-build-isolation .device/wheels/empy-*.tar.gz
  fi
  local tag ver inc npinc
  tag=$($PY -c "import sys;print('cp%d%d-cp%d%d'%(sys.version_info[:2]*2))")
  ver=$($PY -c "import sys;print('%d.%d'%sys.version_info[:2])")
  inc=$($PY -c "import sysconfig;print(sysconfig.get_paths()['include'])")
  npinc=$($PY -c "import numpy;print(numpy.get_include())")
  { grep -rl "/opt/python/$tag/" "$PREFIX"/share/*/cmake/ 2>/dev/null || true; } | xargs -r sed -i \
    -e "s#/opt/python/$tag/include/python$ver#$inc#g" \
    -e "s#/opt/python/$tag/lib/python$ver/site-packages/numpy/_core/include#$npinc#g"
  export AMENT_PREFIX_PATH=$PREFIX CMAKE_PREFIX_PATH=$PREFIX
  cmake -S packages/rt_fusion_msgs -B /tmp/msgs_build -DCMAKE_INSTALL_PREFIX="$PREFIX" \
    -DBUILD_TESTING=OFF -DPython3_EXECUTABLE="$(command -v $PY)" >/tmp/msgs.log 2>&1 \
    && cmake --build /tmp/msgs_build -j"$(nproc)" >>/tmp/msgs.log 2>&1 \
    && cmake --install /tmp/msgs_build >>/tmp/msgs.log 2>&1 || { tail -20 /tmp/msgs.log; return 1; }
  if [[ -d .device/composition_interfaces ]]; then
    cmake -S .device/composition_interfaces -B /tmp/ci_build -DCMAKE_INSTALL_PREFIX="$PREFIX" \
      -DBUILD_TESTING=OFF -DPython3_EXECUTABLE="$(command -v $PY)" >/tmp/ci.log 2>&1 \
      && cmake --build /tmp/ci_build -j"$(nproc)" >>/tmp/ci.log 2>&1 \
      && cmake --install /tmp/ci_build >>/tmp/ci.log 2>&1 || { tail -20 /tmp/ci.log; return 1; }
  fi
  $PY -m pip install -q --no-deps --no-build-isolation --use-pep517 -e packages/rt_fusion >/tmp/pip_e.log 2>&1 || tail -5 /tmp/pip_e.log
  ament_layout
  # The numba kernels into their on-disk cache now, as make setup does: otherwise every node of
  # a fresh machine's first graph run compiles them on a thread of its own (~10 s, tracking and
  # planning in numpy meanwhile), and that run stalls 50-450 ms at a time in both graphs.
  $PY -c 'from rt_fusion.core.perception import tracker; tracker.warm_up()
from rt_fusion.core.planning import frenet; frenet.warm_up()' 2>&1 | tail -2
  $PY -m compileall -q -j 0 rt_fusion tools >/dev/null
  $PY -c "import rclpy, rt_fusion, rt_fusion_msgs.msg; print('ros ok')"
  $PY -c "import launch_ros.actions; print('launch ok')"
}

# bench_e2e on the GPU, one camera and the four-camera rig (the #16 figures).
e2e() {
  export AMENT_PREFIX_PATH=$PREFIX
  for n in 1 4; do
    ROS_DOMAIN_ID=4$n $PY tools/bench_e2e.py --backend torch --device cuda --cameras $n \
      --out "$OUT/e2e$n" 2>&1 | tail -60 | tee "$OUT/e2e$n.txt"
  done
}

# The ament prefix layout launch_ros looks for (as tools/setup_env.sh lays it out in .venv):
# the package marker, share/rt_fusion/{launch,config,models} and lib/rt_fusion/<executable>.
ament_layout() {
  local share=$PREFIX/share/rt_fusion lib=$PREFIX/lib/rt_fusion folder file
  mkdir -p "$PREFIX/share/ament_index/resource_index/packages"
  : >"$PREFIX/share/ament_index/resource_index/packages/rt_fusion"
  rm -rf "$share" "$lib" && mkdir -p "$share" "$lib"
  ln -s "$PWD/packages/rt_fusion/package.xml" "$share/package.xml"
  for folder in launch config models; do
    while IFS= read -r -d '' file; do
      mkdir -p "$share/$(dirname "$file")" && ln -s "$PWD/$file" "$share/$file"
    done < <(find "$folder" -type f ! -path '*/__pycache__/*' -print0)
  done
  $PY - "$lib" "$PREFIX/bin" <<'PY'
import importlib.metadata as md, os, sys
lib, bindir = sys.argv[1:]
for ep in md.distribution('rt_fusion').entry_points:
    if ep.group == 'console_scripts' and os.path.exists(os.path.join(bindir, ep.name)):
        os.symlink(os.path.join(bindir, ep.name), os.path.join(lib, ep.name))
PY
}

inference() {
  nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv,noheader
  $PY tools/bench_inference.py --backend torch --device cuda --matrix --h2d --runs 1000 \
    --out "$OUT" 2>&1 | tee "$OUT/inference_torch_cuda.txt"
  $PY tools/bench_inference.py --backend onnxruntime --device cpu --runs 1000 --out "$OUT" 2>&1 \
    | tee "$OUT/inference_ort_cpu.txt"
}

transport() {
  $PY tools/bench_transport.py ${TRANSPORT_ARGS:-} --out "$OUT" 2>&1 | tee "$OUT/transport.txt"
}

tests() {
  $PY -m pytest -q -p no:cacheprovider tests/inference tests/core/test_shm.py 2>&1 | tail -15 \
    | tee "$OUT/tests.txt"
}

# The full graph of tools/demo.py with the fusion node on the GPU (PyTorch CUDA graph) and, for
# comparison, on ONNX Runtime CPU. Needs the recordings in .device/data and the wheels the image
# lacks (cantools, python-can, pyserial, rosbags and their dependencies) in .device/wheels.
demo() {
  $PY -m pip install -q --no-index --no-deps .device/wheels/*.whl || return 1
  $PY tools/demo.py --source recordings --data .device/data --backend torch --device cuda \
    --out "$OUT/demo_torch" \
    2>&1 | tail -30 | tee "$OUT/demo_torch.txt"
  $PY tools/demo.py --source recordings --data .device/data --no-compare --out "$OUT/demo_ort" \
    2>&1 | tail -30 \
    | tee "$OUT/demo_ort.txt"
}

# The fusion node's stage breakdown (from its /diagnostics) during a scenario demo on the GPU.
stages() {
  export ROS_DOMAIN_ID=42 ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST
  (timeout 90 $PY tools/topic_echo.py /diagnostics diagnostic_msgs/msg/DiagnosticArray \
    --timeout 80 > /tmp/diag.log 2>&1 &)
  $PY tools/demo.py --backend torch --device cuda --out "$OUT/demo_scenario_torch" 2>&1 \
    | tail -22 | tee "$OUT/demo_scenario_torch.txt"
  sleep 2
  grep 'fusion: fusion' /tmp/diag.log | tail -1 > "$OUT/fusion_diag.txt"
}

case "${1:-all}" in
  setup) setup ;;
  layout) ament_layout ;;
  e2e) e2e ;;
  inference) inference ;;
  transport) transport ;;
  tests) tests ;;
  demo) demo ;;
  stages) stages ;;
  all) setup && inference && tests && transport ;;
esac
