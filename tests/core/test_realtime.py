"""Real-time set-up (in child processes: it changes the process for good) and DeadlineMonitor."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from rt_fusion.core import params
from rt_fusion.core.errors import ParameterError
from rt_fusion.core.realtime import DeadlineMonitor, RealtimeParams, apply, system_facts

CHILD = textwrap.dedent("""
    import json, os, sys
    from rt_fusion.core import params, realtime
    if {drop}:
        os.setgid(65534); os.setuid(65534)  # nobody: no CAP_SYS_NICE, RLIMIT_RTPRIO 0
    p = params.build(realtime.RealtimeParams, json.loads(sys.argv[1]))
    try:
        r = realtime.apply(p)
    except realtime.RealtimeError as err:
        print(json.dumps({{'error': str(err)}})); sys.exit(0)
    status = dict(l.split(':', 1) for l in open('/proc/self/status'))
    print(json.dumps({{'policy': r.policy, 'cpus': r.cpus, 'locked': r.memory_locked,
                      'warnings': r.warnings, 'sched': os.sched_getscheduler(0),
                      'affinity': sorted(os.sched_getaffinity(0)),
                      'vmlck_kib': int(status['VmLck'].split()[0]),
                      'rss_kib': int(status['VmRSS'].split()[0]),
                      'gc': __import__('gc').isenabled(),
                      'switch_interval_s': sys.getswitchinterval()}}))
""")


def _child(values: dict[str, object], drop: bool = False) -> dict[str, object]:
    out = subprocess.run(
        [sys.executable, '-c', CHILD.format(drop=drop), json.dumps(values)],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return json.loads(out.stdout)  # type: ignore[no-any-return]


@pytest.mark.skipif(os.geteuid() != 0, reason='SCHED_FIFO needs root (or CAP_SYS_NICE)')
def test_apply_sets_fifo_affinity_locked_memory_and_gc_policy() -> None:
    r = _child({'rt_priority': 10, 'cpus': [0], 'prefault_heap_mib': 8, 'require_rt': True})
    assert r['policy'] == 'SCHED_FIFO' and r['sched'] == os.SCHED_FIFO
    assert r['cpus'] == [0] and r['affinity'] == [0]
    assert r['locked'] is True
    assert r['vmlck_kib'] > 8 * 1024  # the pre-faulted heap is locked too
    assert r['gc'] is False
    assert r['warnings'] == []


@pytest.mark.skipif(os.geteuid() != 0, reason='mlockall of a whole process needs root')
def test_locking_on_fault_reads_in_only_what_was_touched() -> None:
    # Every mapped page (numpy's libraries: tens of MB) read in and locked, or only the pages
    # touched (the pre-faulted heap among them): same lock, far less start-up work.
    full = _child({'prefault_heap_mib': 8, 'lock_on_fault': False})
    on_fault = _child({'prefault_heap_mib': 8})
    assert full['locked'] is True and on_fault['locked'] is True
    assert on_fault['warnings'] == []
    assert on_fault['rss_kib'] > 8 * 1024  # the heap is resident (and locked)
    assert on_fault['rss_kib'] < 0.8 * int(full['rss_kib'])  # type: ignore[call-overload]


@pytest.mark.skipif(os.geteuid() != 0, reason='needs root to drop to an unprivileged user')
def test_refused_set_up_warns_and_stays_sched_other_or_fails_when_required() -> None:
    r = _child({'rt_priority': 50, 'lock_memory': False}, drop=True)
    assert r['policy'] == 'SCHED_OTHER' and r['sched'] == os.SCHED_OTHER
    assert any('SCHED_FIFO priority 50' in w and 'RLIMIT_RTPRIO' in w for w in r['warnings'])
    r = _child({'rt_priority': 50, 'lock_memory': False, 'require_rt': True}, drop=True)
    assert 'SCHED_FIFO priority 50' in str(r['error'])


def test_the_gil_switch_interval_is_set() -> None:
    r = _child({'lock_memory': False, 'prefault_heap_mib': 0, 'switch_interval_s': 0.001})
    assert r['switch_interval_s'] == pytest.approx(0.001)


def test_cpus_that_do_not_exist_are_a_parameter_error_at_start() -> None:
    p = params.build(RealtimeParams, {'cpus': [0, 4096]})  # a file for another machine is valid
    with pytest.raises(ParameterError, match="'cpus'"):
        apply(p)  # ... but not here: refused before anything changed
    with pytest.raises(ParameterError, match="'cpus'"):
        params.build(RealtimeParams, {'cpus': [0, 0]})


def test_deadline_monitor_counts_lateness_runtime_and_overruns() -> None:
    m = DeadlineMonitor(period_ns=10_000_000)
    for k in range(100):
        scheduled = k * 10_000_000
        m.start(scheduled, scheduled + 50_000)  # woke 50 us late
        run = 2_000_000 if k % 10 else 12_000_000  # every tenth misses its deadline
        assert m.finish(scheduled + 50_000 + run) == bool(k % 10)
    s = m.summary()
    assert s['iterations'] == 100 and s['overruns'] == 10
    late, runtime = s['lateness'], s['runtime']
    assert not isinstance(late, int) and not isinstance(runtime, int)
    assert late.p50_us == pytest.approx(50.0)
    assert runtime.max_us == pytest.approx(12_000.0)
    with pytest.raises(ParameterError, match="'period'"):
        DeadlineMonitor(0)


def test_system_facts_reports_the_kernel_and_limits() -> None:
    facts = system_facts()
    for key in (
        'kernel',
        'preemption',
        'RLIMIT_RTPRIO',
        'RLIMIT_MEMLOCK',
        'isolated_cpus',
        'sched_rt_runtime_us',
    ):
        assert facts[key], key


def test_background_start_up_work_runs_once_on_its_own_named_thread() -> None:
    code = textwrap.dedent("""
        import sys, threading
        from rt_fusion.core import realtime
        go = threading.Event()
        first = realtime.start_in_background('held', go.wait)
        again = realtime.start_in_background('held', go.wait)  # still running: the same
        names = [t.name for t in realtime.background_threads()]
        go.set()
        first.join(60)
        imports = realtime.import_in_background(('xml.dom.minidom', 'no_such_module_x'))
        imports.join(60)
        print(first is again, names, 'xml.dom.minidom' in sys.modules,
              realtime.background_threads())
    """)
    out = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, check=True)
    # A missing module is no error; nothing is left running.
    assert out.stdout.split() == ['True', "['startup-held']", 'True', '[]']


THREAD_CHILD = textwrap.dedent("""
    import ctypes, json, resource, sys, threading
    from rt_fusion.core import params, realtime
    p = params.build(realtime.RealtimeParams, json.loads(sys.argv[1]))
    realtime.apply(p, prefault_here=False)  # locks memory, keeps freed heap; touches nothing
    libc = ctypes.CDLL(None)
    libc.malloc.restype = ctypes.c_void_p
    libc.malloc.argtypes = [ctypes.c_size_t]
    libc.free.argtypes = [ctypes.c_void_p]
    faults = {}

    def loop(name, warm):
        if warm:
            realtime.prefault(p)
        before = resource.getrusage(resource.RUSAGE_THREAD).ru_minflt
        blocks = [libc.malloc(1 << 20) for _ in range(6)]  # the loop's working memory
        for b in blocks:
            ctypes.memset(b, 2, 1 << 20)
        faults[name] = resource.getrusage(resource.RUSAGE_THREAD).ru_minflt - before
        for b in blocks:
            libc.free(b)
        done.wait()  # alive until both ran: a thread's arena passes to the next thread made

    done = threading.Barrier(3)
    threads = [threading.Thread(target=loop, args=a) for a in (('cold', False), ('warm', True))]
    for t in threads:
        t.start()
    done.wait()
    print(json.dumps(faults))
""")


@pytest.mark.skipif(os.geteuid() != 0, reason='mlockall of a whole process needs root')
def test_a_worker_that_prefaults_its_own_arena_does_not_fault_in_its_loop() -> None:
    # glibc gives each allocating thread an arena: the heap a node's worker uses is its own,
    # so the worker touches it (prefault), not the main thread at configure.
    out = subprocess.run(
        [sys.executable, '-c', THREAD_CHILD, json.dumps({'prefault_heap_mib': 16})],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    faults = json.loads(out.stdout)
    assert faults['cold'] > 1000, faults  # 6 MiB of fresh pages: ~1,500 faults
    assert faults['warm'] < faults['cold'] / 10, faults
