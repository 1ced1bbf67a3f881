#!/usr/bin/env bash
# `make test-aarch64`: the ROS-free core's architecture-specific code run as aarch64 code, on an
# arm64 Debian root under QEMU user emulation (binfmt), as the Jetson AGX Orin's CPU runs it.
#
#   tools/test_aarch64.sh [pytest args]      # default: the tests listed in TESTS below
#
# 1. qemu-user-static, binfmt-support and debootstrap from apt when missing; binfmt_misc mounted
#    and the qemu-aarch64 handler enabled (needs root: a container must be privileged);
# 2. an arm64 Debian 12 root in build/aarch64-root with its Python 3.11 (debootstrap; cached), and
#    the core's Python dependencies at the lock file's versions as PyPI's aarch64 wheels
#    (numpy, scipy, numba/llvmlite, PyYAML; pytest, hypothesis, psutil for the tests), installed
#    from here with pip's --platform into the root's /opt/rt_fusion-site (cached by the lock);
# 3. rt_fusion/ and tests/ copied in, and pytest run in the root (chroot): every process in it,
#    the two-process ring tests' children included, is aarch64 code.
#
# Exit status: pytest's; 77 when this machine cannot emulate at all (not root, no binfmt_misc,
# no apt or Debian mirror), which .ci/run reports as skipped with the reason, not as passed.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
say() { printf '\033[1maarch64:\033[0m %s\n' "$*"; }
die() { printf '\033[1;31maarch64: error:\033[0m %s\n' "$*" >&2; exit 1; }
cannot() { printf '\033[1;33maarch64: cannot emulate here:\033[0m %s\n' "$*" >&2; exit 77; }

ARM=${AARCH64_ROOT:-$ROOT/build/aarch64-root}
SUITE=bookworm
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
PACKAGES=python3
# The ROS-free core's dependencies (tests/test_package.py holds the core to them) and the tests'.
WHEELS=(numpy scipy numba llvmlite PyYAML opencv-python-headless cantools rosbags
        pytest pytest-timeout hypothesis psutil)
LOCK=$ROOT/requirements-lock.txt
# The code that differs by architecture: shared-memory rings across processes (futex waits,
# memory barriers, torn-read detection) and the process keeper; clock mapping; time alignment;
# the tracker's kernels (numpy and numba) and the planner's (numpy and numba).
TESTS=(
  tests/core/test_shm.py
  tests/core/test_keeper.py
  tests/core/test_clock.py
  tests/core/test_sync.py
  tests/core/perception/test_track_kernels.py
  tests/core/perception/test_tracker.py
  tests/core/perception/test_assignment.py
  tests/core/planning/test_frenet.py
  tests/core/planning/test_frenet_jit.py
)
[[ $(id -u) -eq 0 ]] || cannot "needs root (debootstrap, binfmt_misc, chroot): sudo make test-aarch64"
[[ $(uname -m) == aarch64 ]] && say "this machine is aarch64 itself: the tests run natively in the root"

# --- 1. emulation -------------------------------------------------------------------------------
need=()
command -v qemu-aarch64-static >/dev/null || need+=(qemu-user-static)
command -v update-binfmts >/dev/null || need+=(binfmt-support)
command -v debootstrap >/dev/null || need+=(debootstrap)
if ((${#need[@]})); then
  say "installing ${need[*]}"
  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null; } \
    || cannot "apt-get could not install ${need[*]}"
fi
if [[ $(uname -m) != aarch64 ]]; then
  [[ -e /proc/sys/fs/binfmt_misc/register ]] \
    || mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc \
    || cannot "cannot mount binfmt_misc (an unprivileged container cannot run foreign binaries)"
  [[ -e /proc/sys/fs/binfmt_misc/qemu-aarch64 ]] || update-binfmts --enable qemu-aarch64 \
    || cannot "update-binfmts --enable qemu-aarch64 failed"
fi

# --- 2. the arm64 root ---------------------------------------------------------------------------
KEY=$(echo "$SUITE $PACKAGES" | sha256sum | cut -d' ' -f1)
if [[ ! -f $ARM/.rt_fusion_root && -d $ARM ]] || [[ -f $ARM/.rt_fusion_root && $(cat "$ARM/.rt_fusion_root") != "$KEY" ]]; then
  say "the root in $ARM is from another version of this script: building it again"
  rm -rf "$ARM"
fi
if [[ ! -f $ARM/.rt_fusion_root ]]; then
  say "debootstrap arm64 $SUITE into $ARM (first time: 10-20 min under emulation)"
  t0=$SECONDS
  rm -rf "$ARM.tmp"
  mkdir -p "$ROOT/build" "$(dirname "$ARM")"
  debootstrap --arch=arm64 --variant=minbase --include="$PACKAGES" "$SUITE" "$ARM.tmp" "$MIRROR" \
    >"$ROOT/build/aarch64-debootstrap.log" 2>&1 \
    || { tail -20 "$ROOT/build/aarch64-debootstrap.log" >&2
         cannot "debootstrap from $MIRROR failed (log: build/aarch64-debootstrap.log)"; }
  rm -rf "$ARM.tmp/var/cache/apt/archives"/*.deb
  : >"$ARM.tmp/COLCON_IGNORE"
  mv "$ARM.tmp" "$ARM"
  echo "$KEY" >"$ARM/.rt_fusion_root"
  say "root built in $((SECONDS - t0)) s"
fi
SITE=$ARM/opt/rt_fusion-site
WKEY=$({ grep -iE "^($(IFS='|'; echo "${WHEELS[*]}"))==" "$LOCK"; echo "${WHEELS[*]}"; } | sha256sum | cut -d' ' -f1)
if [[ ! -f $SITE/.key || $(cat "$SITE/.key") != "$WKEY" ]]; then
  say "the core's dependencies as aarch64 wheels (lock versions) into ${SITE#"$ROOT/"}"
  rm -rf "$SITE"
  pyver=$(chroot "$ARM" /usr/bin/python3 -c 'import sys; print("%d%d" % sys.version_info[:2])')
  python3 -m pip install -q --disable-pip-version-check --no-warn-script-location \
    --platform manylinux_2_28_aarch64 --platform manylinux2014_aarch64 --platform linux_aarch64 \
    --implementation cp --python-version "$pyver" --only-binary=:all: --target "$SITE" \
    -c "$LOCK" "${WHEELS[@]}" 2>&1 | grep -v 'is ignored: it is neither' >&2 || true
  python3 - "$SITE" <<'PY' || die "pip did not install every wheel into $SITE"
import sys, pathlib
site = pathlib.Path(sys.argv[1])
for mod in ('numpy', 'scipy', 'numba', 'llvmlite', 'yaml', 'cv2', 'cantools', 'rosbags', 'pytest',
            'hypothesis', 'psutil'):
    assert (site / mod).is_dir(), mod
PY
  echo "$WKEY" >"$SITE/.key"
fi
[[ $(file -b "$ARM/usr/bin/python3.11" 2>/dev/null || echo aarch64) == *aarch64* ]] \
  || die "$ARM/usr/bin/python3.11 is not an aarch64 binary"

# --- 3. the tests --------------------------------------------------------------------------------
rm -rf "$ARM/src" && mkdir -p "$ARM/src"
cp -r "$ROOT/rt_fusion" "$ROOT/tests" "$ROOT/pyproject.toml" "$ARM/src/"
find "$ARM/src" -name __pycache__ -prune -exec rm -rf {} +
mountpoint -q "$ARM/proc" || mount -t proc proc "$ARM/proc"
mountpoint -q "$ARM/dev" || mount --bind /dev "$ARM/dev"   # /dev/shm for the rings
# The real recordings (tests look for them in ../shared/data beside the sources), read-only.
DATA=$ROOT/../shared/data
if [[ -d $DATA ]]; then
  mkdir -p "$ARM/shared/data"
  mountpoint -q "$ARM/shared/data" || mount --bind -o ro "$DATA" "$ARM/shared/data"
fi
cleanup() {
  umount "$ARM/shared/data" 2>/dev/null || true
  umount "$ARM/dev" 2>/dev/null || true
  umount "$ARM/proc" 2>/dev/null || true
}
trap cleanup EXIT
(($#)) || set -- "${TESTS[@]}"
say "pytest in the arm64 root: $*"
t0=$SECONDS
set +e
chroot "$ARM" /usr/bin/env -i HOME=/root PATH=/usr/bin:/bin PYTHONPATH=/src:/opt/rt_fusion-site \
  PYTHONDONTWRITEBYTECODE=1 NUMBA_CACHE_DIR=/tmp/numba LANG=C.UTF-8 \
  sh -c 'cd /src && uname -m && python3 -c "import platform, numpy, numba; print(platform.machine(), \"python\", platform.python_version(), \"numpy\", numpy.__version__, \"numba\", numba.__version__)" && python3 -m pytest -q -p no:cacheprovider -m "not integration" "$@"' \
  sh "$@"
rc=$?
set -e
say "pytest under emulation took $((SECONDS - t0)) s (exit $rc)"
exit $rc
