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

setup() {
  $PY -m pip install -q --no-index --no-deps --no-compile .whl/*.whl || return 1
  local tag ver inc npinc
  tag=$($PY -c "import sys;print('cp%d%d-cp%d%d'%(sys.version_info[:2]*2))")
  ver=$($PY -c "import sys;print('%d.%d'%sys.version_info[:2])")
  inc=$($PY -c "import sysconfig;print(sysconfig.get_paths()['include'])")
  npinc=$($PY -c "import numpy;print(numpy.get_include())")
  { grep -rl "/opt/python/$tag/" "$PREFIX"/share/*/cmake/ 2>/dev/null || true; } | xargs -r sed -i \
    -e "s#/opt/python/$tag/include/python$ver#$inc#g" \
    -e "s#/opt/python/$tag/lib/python$ver/site-packages/numpy/_core/include#$npinc#g"
  export AMENT_PREFIX_PATH=$PREFIX CMAKE_PREFIX_PATH=$PREFIX
  cmake -S ros2_ws/src/rt_fusion_msgs -B /tmp/msgs_build -DCMAKE_INSTALL_PREFIX="$PREFIX" \
    -DBUILD_TESTING=OFF -DPython3_EXECUTABLE="$(command -v $PY)" >/tmp/msgs.log 2>&1 \
    && cmake --build /tmp/msgs_build -j"$(nproc)" >>/tmp/msgs.log 2>&1 \
    && cmake --install /tmp/msgs_build >>/tmp/msgs.log 2>&1 || { tail -20 /tmp/msgs.log; return 1; }
  $PY -m pip install -q --no-deps --no-build-isolation -e . >/tmp/pip_e.log 2>&1 || tail -5 /tmp/pip_e.log
  $PY -c "import rclpy, rt_fusion, rt_fusion_msgs.msg; print('ros ok')"
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
  inference) inference ;;
  transport) transport ;;
  tests) tests ;;
  demo) demo ;;
  stages) stages ;;
  all) setup && inference && tests && transport ;;
esac
