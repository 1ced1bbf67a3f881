"""Linux primitives the shared-memory transport needs, through ctypes: futex, fence, identity.

- ``futex_wait`` / ``futex_wake``: the wake-up of the same-host fast path. A futex on a word in
  the segment itself needs no file descriptor, no registration of readers and no clean-up when a
  reader dies; one FUTEX_WAKE wakes every reader; and FUTEX_WAIT compares the word atomically,
  so a commit between a reader's check and its wait is never missed. (An eventfd cannot be
  shared between unrelated processes without passing the descriptor over a socket; a named
  semaphore counts, so it cannot broadcast to an unknown number of readers; a FIFO needs one per
  reader.)
- ``fence``: the memory barrier of the seqlock. On the Orin's Arm cores it is required: a
  ``dmb ish`` instruction put in an executable page and called through ctypes (about 0.2 µs
  warm); where the system refuses executable pages, ``membarrier(2)`` serves, slower but
  correct. x86-64 keeps stores in order with stores and loads with loads (TSO), which is all a
  single-writer seqlock needs, and CPython's calls are compiler barriers: there ``fence`` does
  nothing, because every foreign call on the commit path costs tens of µs when the process has
  just woken up (measured: a cold ctypes call ~20 µs, a cold futex wake ~60 µs).
- ``boot_id``, ``process_start_ticks``: who wrote a segment, to detect one left by a crashed
  writer even when its pid has been reused.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import mmap
import os
import platform
import socket
import time
from collections.abc import Callable
from pathlib import Path

from rt_fusion.core.errors import RtFusionError

_MACHINE = platform.machine()
_SYS_FUTEX = {'x86_64': 202, 'aarch64': 98, 'arm64': 98}
_SYS_MEMBARRIER = {'x86_64': 324, 'aarch64': 283, 'arm64': 283}
_FUTEX_WAIT = 0
_FUTEX_WAKE = 1
_INT_MAX = 2**31 - 1

_libc = ctypes.CDLL(ctypes.util.find_library('c') or 'libc.so.6', use_errno=True)
_syscall = _libc.syscall
_syscall.restype = ctypes.c_long
# syscall(2) is variadic; a fixed prototype for the futex calls spares ctypes the argument
# guessing on every call (integer and pointer arguments travel alike in both ABIs we run on).
_futex_call = ctypes.CFUNCTYPE(
    ctypes.c_long,
    ctypes.c_long,
    ctypes.c_void_p,
    ctypes.c_int,
    ctypes.c_int,
    ctypes.c_void_p,
    ctypes.c_void_p,
    ctypes.c_int,
    use_errno=True,
)(('syscall', _libc))


class PlatformError(RtFusionError):
    """The platform lacks something the transport needs (futex, an architecture we know)."""


if _MACHINE not in _SYS_FUTEX:
    raise PlatformError(f'futex syscall number unknown for {_MACHINE}')
_NR_FUTEX = _SYS_FUTEX[_MACHINE]


class _Timespec(ctypes.Structure):
    _fields_ = (('tv_sec', ctypes.c_long), ('tv_nsec', ctypes.c_long))


def futex_wait(address: int, expected: int, timeout_ns: int) -> bool:
    """Sleeps while the 32-bit word at ``address`` equals ``expected``, at most ``timeout_ns``.

    Shared (not private) futex: it works across processes that map the same file. The GIL is
    released while waiting (ctypes).

    Returns:
        False when the timeout expired, True otherwise (woken, value already changed, signal).
    """
    ts = _Timespec(timeout_ns // 1_000_000_000, timeout_ns % 1_000_000_000)
    value = expected - 2**32 if expected >= 2**31 else expected
    res = _futex_call(_NR_FUTEX, address, _FUTEX_WAIT, value, ctypes.addressof(ts), None, 0)
    if res == 0:
        return True
    err = ctypes.get_errno()
    if err == errno.ETIMEDOUT:
        return False
    if err in (errno.EAGAIN, errno.EINTR):
        return True
    raise OSError(err, f'futex wait: {os.strerror(err)}')


def futex_wake(address: int, count: int = _INT_MAX) -> int:
    """Wakes up to ``count`` waiters on the word at ``address``; returns how many woke."""
    res = _futex_call(_NR_FUTEX, address, _FUTEX_WAKE, count, None, None, 0)
    if res < 0:
        err = ctypes.get_errno()
        raise OSError(err, f'futex wake: {os.strerror(err)}')
    return int(res)


# --- memory fence --------------------------------------------------------------------------

_FENCE_CODE = {
    'x86_64': bytes.fromhex('0faef0c3'),  # mfence; ret
    'aarch64': bytes.fromhex('bf3b03d5c0035fd6'),  # dmb ish; ret (little-endian words)
    'arm64': bytes.fromhex('bf3b03d5c0035fd6'),
}
_PROT_READ, _PROT_WRITE, _PROT_EXEC = 1, 2, 4


def make_native_fence(code: bytes) -> tuple[Callable[[], None], mmap.mmap]:
    """A callable that runs ``code`` (a leaf function) from an executable page.

    The page is written while writable, then switched to read+execute (W^X), never both.
    Returns the callable and the page, which must stay alive as long as the callable.

    Raises:
        OSError: the system refuses executable pages.
    """
    page = mmap.mmap(-1, mmap.PAGESIZE, prot=_PROT_READ | _PROT_WRITE)
    page.write(code)
    buf = (ctypes.c_char * mmap.PAGESIZE).from_buffer(page)
    address = ctypes.addressof(buf)
    del buf  # no exported pointer may stay, or the page can never be closed
    mprotect = _libc.mprotect
    mprotect.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
    if mprotect(address, mmap.PAGESIZE, _PROT_READ | _PROT_EXEC) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f'mprotect(PROT_EXEC): {os.strerror(err)}')
    return ctypes.CFUNCTYPE(None)(address), page


def _membarrier_fence() -> None:
    # MEMBARRIER_CMD_GLOBAL (1): a full barrier on every CPU; slow (an IPI) but correct.
    _syscall(ctypes.c_long(_SYS_MEMBARRIER[_MACHINE]), ctypes.c_int(1), ctypes.c_int(0))


def _no_fence() -> None:
    """x86-64 (TSO): the ordering the seqlock needs is the hardware's own."""


def _select_fence() -> tuple[Callable[[], None], str, object]:
    if _MACHINE == 'x86_64':
        return _no_fence, 'x86-64 TSO (no fence instruction needed)', None
    code = _FENCE_CODE.get(_MACHINE)
    if code is None:
        raise PlatformError(f'no memory fence known for architecture {_MACHINE}')
    try:
        func, page = make_native_fence(code)
    except OSError:
        return _membarrier_fence, 'membarrier(2)', None
    return func, 'native dmb ish', page


fence, FENCE_KIND, _fence_page = _select_fence()


# --- identity of hosts and processes -------------------------------------------------------


def boot_id() -> str:
    """This boot's id (changes at every reboot; differs between hosts)."""
    return Path('/proc/sys/kernel/random/boot_id').read_text().strip()


def process_start_ticks(pid: int) -> int | None:
    """Start time of process ``pid`` [clock ticks since boot]; None when it does not exist.

    Together with the pid it identifies a process even when pids are reused.
    """
    try:
        stat = Path(f'/proc/{pid}/stat').read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    # Field 22; the command name (field 2) may contain spaces and parentheses.
    rest = stat[stat.rindex(')') + 2 :].split()
    return int(rest[19])


def process_age_s(pid: int | None = None) -> float | None:
    """How long process ``pid`` (default: this one) has been running [s]: CLOCK_BOOTTIME now
    against its start (the kernel's clock ticks: 10 ms resolution); None when it does not exist."""
    ticks = process_start_ticks(os.getpid() if pid is None else pid)
    if ticks is None:
        return None
    return time.clock_gettime(time.CLOCK_BOOTTIME) - ticks / os.sysconf('SC_CLK_TCK')


def process_alive(pid: int, start_ticks: int) -> bool:
    """True when process ``pid`` runs and is the one that started at ``start_ticks``."""
    return pid > 0 and process_start_ticks(pid) == start_ticks


def stop_on_signals() -> None:
    """SIGINT and SIGTERM raise KeyboardInterrupt in the main thread (tools that end cleanly).

    A process started from a shell without job control (a background ``&``, CI runners, some
    service managers) inherits SIGINT *ignored*, and Python then installs no handler: Ctrl-C or
    ``ros2 launch``'s SIGINT does nothing, and a tool blocked in a pipe write or a select stays
    until it is killed. SIGTERM would kill it without its clean-up.
    """
    import signal  # noqa: PLC0415

    def _interrupt(signum: int, frame: object) -> None:
        del signum, frame
        raise KeyboardInterrupt

    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, _interrupt)


def free_port() -> int:
    """A TCP port on 127.0.0.1 nobody listens on now (an operator page, a benchmark's peers)."""
    with socket.socket() as probe:
        probe.bind(('127.0.0.1', 0))
        return int(probe.getsockname()[1])


def can_udp_port() -> int:
    """A random UDP port for an emulated CAN bus (python-can ``udp_multicast``).

    Below DDS's ports: RTPS uses 7400 + 250 × domain + small offsets, for every domain up to
    65535, and a multicast socket bound to a port receives every group's datagrams on it. A CAN
    port drawn from 20000-40000 once met a DDS discovery port, and the radar node died on an
    RTPS packet it could not unpack. Also below Linux's ephemeral ports (32768-60999).
    """
    import random  # noqa: PLC0415

    return random.randint(4000, 7399)


def nice_process(niceness: int, idle: bool = False) -> int:
    """Lowers this process's CPU priority to ``niceness`` (0..19), and with ``idle`` puts it
    under ``SCHED_IDLE`` (it runs only on CPU time no normal task wants; a normal task that
    wakes takes the CPU from it at once): every thread it has now (on Linux each thread has its
    own, and ``os.nice`` sets only the caller's) and, as threads inherit their creator's, those
    they start later. Returns how many threads were set; a thread that ended meanwhile is
    skipped.

    Raises:
        ValueError: ``niceness`` outside 0..19 (raising a priority is not this function's job).
    """
    if not 0 <= niceness <= 19:
        raise ValueError(f'niceness {niceness}: want 0..19')
    done = 0
    for tid in os.listdir('/proc/self/task'):
        try:
            os.setpriority(os.PRIO_PROCESS, int(tid), niceness)
            if idle:
                os.sched_setscheduler(int(tid), os.SCHED_IDLE, os.sched_param(0))
        except (ProcessLookupError, PermissionError):
            continue
        done += 1
    return done
