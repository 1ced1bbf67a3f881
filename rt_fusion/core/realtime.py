"""Real-time set-up of a process and the deadline monitor of a periodic loop.

:func:`apply` does what a real-time loop needs from the OS and from Python, from parameters:
SCHED_FIFO at a priority, CPU affinity, ``mlockall(MCL_CURRENT | MCL_FUTURE)`` (a page once
resident stays resident; with ``MCL_ONFAULT``, the default, pages are locked as they are first
touched rather than all read in at start-up), pre-faulting of stack and heap (and keeping the
heap: malloc must not hand freed memory back to the kernel, or the next allocation faults
again), and a garbage-collector policy: a full collection, ``gc.freeze()`` of everything
allocated during initialisation, automatic collection off, and :func:`collect_at_safe_point`
between iterations. Without the permissions (no root, no CAP_SYS_NICE / RLIMIT_RTPRIO,
RLIMIT_MEMLOCK too low) it warns and stays SCHED_OTHER, or raises when ``require_rt`` is set.

:class:`DeadlineMonitor` measures a periodic loop against its schedule: wake-up lateness, run
time and overruns (an iteration finishing after its deadline), with no allocation per iteration.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import dataclasses
import errno as errno_mod
import functools
import gc
import importlib
import os
import resource
import sys
import threading
from collections.abc import Callable, Sequence
from pathlib import Path

from rt_fusion.core.errors import ParameterError, RtFusionError
from rt_fusion.core.latency import LatencyRecorder, LatencySummary
from rt_fusion.core.params import param

__all__ = [
    'DeadlineMonitor',
    'LatencySummary',
    'RealtimeError',
    'RealtimeParams',
    'RealtimeReport',
    'apply',
    'background_threads',
    'collect_at_safe_point',
    'import_in_background',
    'start_in_background',
    'system_facts',
]

MCL_CURRENT, MCL_FUTURE, MCL_ONFAULT = 1, 2, 4
M_TRIM_THRESHOLD, M_MMAP_MAX = -1, -4


class RealtimeError(RtFusionError):
    """Real-time scheduling was required but could not be set up."""


@dataclasses.dataclass(frozen=True)
class RealtimeParams:
    """Real-time parameters of a node."""

    rt_priority: int = param(
        'SCHED_FIFO priority (0: stay SCHED_OTHER)', default=0, low=0, high=99
    )
    cpus: tuple[int, ...] = param('CPUs the process may run on (empty: all)', default=())
    lock_memory: bool = param('mlockall(MCL_CURRENT | MCL_FUTURE)', default=True)
    lock_on_fault: bool = param(
        'lock pages as they are first touched (MCL_ONFAULT) instead of reading in every mapped '
        "page at start-up: ~1 GB of a node's libraries, most never used, 0.1-0.2 s per restart; "
        'what the loop touches is resident once warm (the node runs its model and kernels '
        'before streaming) and locked from then on',
        default=True,
    )
    prefault_stack_kib: int = param('stack to touch at start', unit='KiB', default=512, low=0)
    prefault_heap_mib: int = param(
        'heap to touch and keep at start, in the arena of the thread that runs the loop (see '
        "prefault); up to ~60 MiB stays with a worker thread (its arena's first heap)",
        unit='MiB',
        default=64,
        low=0,
    )
    freeze_gc: bool = param('gc.freeze() after start-up, automatic collection off', default=True)
    require_rt: bool = param(
        'fail at start-up when the real-time set-up is refused', default=False
    )
    switch_interval_s: float = param(
        "Python's GIL switch interval: the longest a running thread keeps the interpreter from "
        'one that woke (a worker back from the GPU) before it must hand it over',
        unit='s',
        default=0.005,
        low=0.00005,
        high=0.1,
    )

    def check(self) -> None:
        """Cross-field rules (host-independent: a vehicle's file validates anywhere)."""
        if any(c < 0 for c in self.cpus) or len(set(self.cpus)) != len(self.cpus):
            raise ParameterError('cpus', self.cpus, 'CPU numbers are >= 0 and listed once')

    def check_host(self) -> None:
        """Rules about this machine, checked by :func:`apply` at start-up.

        Raises:
            ParameterError: ``cpus`` names CPUs this machine does not have.
        """
        n = os.cpu_count() or 1
        bad = [c for c in self.cpus if c >= n]
        if bad:
            raise ParameterError('cpus', self.cpus, f'CPUs {bad} do not exist (0..{n - 1})')


@dataclasses.dataclass
class RealtimeReport:
    """What :func:`apply` achieved."""

    policy: str = 'SCHED_OTHER'
    priority: int = 0
    cpus: tuple[int, ...] = ()
    memory_locked: bool = False
    gc_frozen: bool = False
    warnings: list[str] = dataclasses.field(default_factory=list)

    @property
    def realtime(self) -> bool:
        """True when running under SCHED_FIFO."""
        return self.policy == 'SCHED_FIFO'


@functools.cache
def _libc() -> ctypes.CDLL:
    """The C library, looked up once (``find_library`` runs ``ldconfig``: a process and its
    pipes, which a worker's prefault would otherwise open while the node runs)."""
    libc = ctypes.CDLL(ctypes.util.find_library('c') or 'libc.so.6', use_errno=True)
    libc.malloc.restype = ctypes.c_void_p
    libc.malloc.argtypes = [ctypes.c_size_t]
    libc.free.argtypes = [ctypes.c_void_p]
    return libc


def _prefault_stack(kib: int) -> None:
    """Touches about ``kib`` KiB of the C stack so that its pages are resident (and locked).

    Python 3.11 keeps Python frames on the heap; what grows the C stack is C recursion. The JSON
    decoder recurses in C once per nesting level (a few hundred bytes each), so decoding a deeply
    nested array walks the stack down and back.
    """
    import json  # noqa: PLC0415
    import sys  # noqa: PLC0415

    depth = max(1, kib * 4)  # ~256 bytes of C stack per level
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, depth + 100))
    try:
        json.loads('[' * depth + ']' * depth)
    finally:
        sys.setrecursionlimit(limit)


PREFAULT_CHUNK = 1 << 20  # below a worker arena's heap size (64 MiB): the chunks stay there


def prefault(params: RealtimeParams) -> None:
    """Touches ``prefault_heap_mib`` of heap and ``prefault_stack_kib`` of stack for the calling
    thread, so that its loop's allocations and calls do not fault later.

    glibc gives each thread that allocates an arena of its own: heap touched on the main thread
    serves the main thread (a node whose loop runs in executor callbacks), not a worker's. The
    heap is taken in 1 MiB blocks from this thread's arena, touched, and freed back to it (kept:
    :func:`apply` turned heap trimming off when it locked memory). Call it at the start of the
    thread that runs the loop; :func:`apply` calls it for the main thread unless told not to.
    """
    if params.prefault_heap_mib:
        libc = _libc()
        blocks = []
        try:
            for _ in range(params.prefault_heap_mib * (1 << 20) // PREFAULT_CHUNK):
                block = libc.malloc(PREFAULT_CHUNK)
                if not block:
                    break
                ctypes.memset(block, 1, PREFAULT_CHUNK)  # touched: resident (and locked) now
                blocks.append(block)
        finally:
            for block in blocks:
                libc.free(block)
    if params.prefault_stack_kib:
        _prefault_stack(params.prefault_stack_kib)


def apply(params: RealtimeParams, *, prefault_here: bool = True) -> RealtimeReport:
    """Applies the real-time set-up of ``params`` to this process.

    ``prefault_here=False`` leaves :func:`prefault` to the thread that will run the loop (a
    node's worker): touching the main thread's heap would cost the start-up time (0.17 s for
    64 MiB on a VM) for memory the loop never uses.

    Raises:
        RealtimeError: a step was refused and ``require_rt`` is set.
        ParameterError: ``cpus`` names CPUs this machine does not have.
    """
    params.check_host()
    report = RealtimeReport()
    sys.setswitchinterval(params.switch_interval_s)
    libc = _libc()

    def refuse(what: str) -> None:
        if params.require_rt:
            raise RealtimeError(f'{what} (require_rt is set)')
        report.warnings.append(what)

    if params.cpus:
        try:
            os.sched_setaffinity(0, set(params.cpus))
            report.cpus = tuple(sorted(os.sched_getaffinity(0)))
        except OSError as err:
            refuse(f'sched_setaffinity({list(params.cpus)}): {err}')
    else:
        report.cpus = tuple(sorted(os.sched_getaffinity(0)))
    if params.lock_memory:
        # Keep freed heap in the process: returning it would mean faults when it is reused.
        libc.mallopt(M_TRIM_THRESHOLD, -1)
        libc.mallopt(M_MMAP_MAX, 0)
        flags = MCL_CURRENT | MCL_FUTURE
        if not params.lock_on_fault:
            locked = libc.mlockall(flags) == 0
        else:
            locked = libc.mlockall(flags | MCL_ONFAULT) == 0
            if not locked and ctypes.get_errno() == errno_mod.EINVAL:
                report.warnings.append('mlockall: MCL_ONFAULT unknown (Linux < 4.4): locking all')
                locked = libc.mlockall(flags) == 0
        if locked:
            report.memory_locked = True
        else:
            errno = ctypes.get_errno()
            soft, _ = resource.getrlimit(resource.RLIMIT_MEMLOCK)
            refuse(f'mlockall: {os.strerror(errno)} (RLIMIT_MEMLOCK {soft} bytes)')
    if prefault_here:
        prefault(params)
    if params.rt_priority > 0:
        try:
            os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(params.rt_priority))
            report.policy, report.priority = 'SCHED_FIFO', params.rt_priority
        except (PermissionError, OSError) as err:
            limit = resource.getrlimit(resource.RLIMIT_RTPRIO)[0]
            refuse(
                f'SCHED_FIFO priority {params.rt_priority}: {err} (RLIMIT_RTPRIO {limit}); '
                'running SCHED_OTHER'
            )
    if params.freeze_gc:
        gc.collect()
        gc.freeze()
        gc.disable()
        report.gc_frozen = True
    return report


BACKGROUND = 'startup-'  # name prefix of the threads start_in_background makes
_background: dict[str, threading.Thread] = {}


def start_in_background(name: str, work: Callable[[], object]) -> threading.Thread:
    """Runs ``work`` on a daemon thread named ``startup-<name>``, one at a time per name:
    start-up work a node need not wait for (compiled kernels, modules for later), begun once it
    is up.

    The thread drops to SCHED_OTHER first: a real-time node's threads inherit its SCHED_FIFO,
    and loading must not compete with the loop at its priority. A second call while the first
    thread lives returns that thread; after it, a new one runs ``work`` again (cheap when its
    work is done: imports and caches are already there). Errors in ``work`` are left to the
    code that needs its result."""
    running = _background.get(name)
    if running is not None and running.is_alive():
        return running

    def run() -> None:
        with contextlib.suppress(OSError, AttributeError):
            os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))
        with contextlib.suppress(Exception):
            work()

    thread = threading.Thread(target=run, name=BACKGROUND + name, daemon=True)
    _background[name] = thread
    thread.start()
    return thread


def background_threads() -> list[threading.Thread]:
    """The start-up threads still running (a test waits for them before counting resources)."""
    return [t for t in threading.enumerate() if t.name.startswith(BACKGROUND)]


def import_in_background(modules: Sequence[str]) -> threading.Thread:
    """Imports ``modules`` with :func:`start_in_background`: what a node needs only later (a
    planner's spline for the first curved route), loaded after it is up instead of before. A
    module that fails to import is left for the code that needs it to raise."""

    def work() -> None:
        for name in modules:
            with contextlib.suppress(Exception):
                importlib.import_module(name)

    return start_in_background('imports', work)


def collect_at_safe_point(generation: int = 0) -> None:
    """A young-generation collection between iterations (automatic collection is off)."""
    gc.collect(generation)


class DeadlineMonitor:
    """Lateness, run time and overruns of a periodic loop; time passed in, no allocation.

    Per iteration: ``start(scheduled_ns, now_ns)`` when it wakes, ``finish(now_ns)`` when done.
    The deadline of an iteration is its scheduled time plus one period.
    """

    def __init__(self, period_ns: int, capacity: int = 100_000) -> None:
        if period_ns <= 0:
            raise ParameterError('period', period_ns, 'must be > 0 ns')
        self.period_ns = period_ns
        self.lateness = LatencyRecorder(capacity)
        self.runtime = LatencyRecorder(capacity)
        self.iterations = 0
        self.overruns = 0
        self._scheduled = 0
        self._started = 0

    def start(self, scheduled_ns: int, now_ns: int) -> None:
        """An iteration due at ``scheduled_ns`` woke at ``now_ns``."""
        self._scheduled, self._started = scheduled_ns, now_ns
        self.lateness.record(now_ns - scheduled_ns)

    def finish(self, now_ns: int) -> bool:
        """The iteration ended at ``now_ns``; returns False when it missed its deadline."""
        self.iterations += 1
        self.runtime.record(now_ns - self._started)
        if now_ns > self._scheduled + self.period_ns:
            self.overruns += 1
            return False
        return True

    def summary(self) -> dict[str, LatencySummary | int]:
        """Lateness and run time summaries, iteration and overrun counts."""
        return {
            'lateness': self.lateness.summary(),
            'runtime': self.runtime.summary(),
            'iterations': self.iterations,
            'overruns': self.overruns,
        }


def system_facts() -> dict[str, str]:
    """What the kernel and limits say about real-time here (for rt_check and diagnostics)."""

    def read(path: str) -> str:
        try:
            return Path(path).read_text().strip()
        except OSError:
            return ''

    version = read('/proc/version')
    if read('/sys/kernel/realtime') == '1' or 'PREEMPT_RT' in version:
        model = 'PREEMPT_RT'
    elif 'PREEMPT_DYNAMIC' in version:
        model = (
            'PREEMPT_DYNAMIC (' + (read('/sys/kernel/debug/sched/preempt') or 'mode unknown') + ')'
        )
    elif 'PREEMPT' in version:
        model = 'PREEMPT (low-latency desktop)'
    else:
        model = 'none (server)'
    rtprio = resource.getrlimit(resource.RLIMIT_RTPRIO)
    memlock = resource.getrlimit(resource.RLIMIT_MEMLOCK)

    def lim(v: int) -> str:
        return 'unlimited' if v == resource.RLIM_INFINITY else str(v)

    return {
        'kernel': version.split(' (')[0],
        'preemption': model,
        'euid': str(os.geteuid()),
        'RLIMIT_RTPRIO': f'{lim(rtprio[0])} / {lim(rtprio[1])}',
        'RLIMIT_MEMLOCK': f'{lim(memlock[0])} / {lim(memlock[1])}',
        'sched_rt_runtime_us': read('/proc/sys/kernel/sched_rt_runtime_us'),
        'isolated_cpus': read('/sys/devices/system/cpu/isolated') or '(none)',
        'nohz_full': read('/sys/devices/system/cpu/nohz_full') or '(none)',
        'cmdline': read('/proc/cmdline'),
        'cpus': str(os.cpu_count()),
        'governor': read('/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor') or '(n/a)',
    }
