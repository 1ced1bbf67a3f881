"""What ``tools/rt_check.py`` measures of this machine's real-time behaviour: a periodic probe
process (SCHED_FIFO or SCHED_OTHER, pinned, with load beside it) and its wake-up lateness,
cyclictest where installed, and the verdicts on the kernel, the limits and the latencies."""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from typing import Any

from rt_fusion.core import realtime
from rt_fusion.core.latency import summarize_ns


def _probe(mode: str, priority: int, cpu: int, period_us: int, seconds: float) -> dict[str, Any]:
    """Runs in a child process: wake-up lateness of a periodic sleep (ns values)."""
    params = realtime.RealtimeParams(
        rt_priority=priority if mode == 'fifo' else 0,
        cpus=(cpu,),
        lock_memory=mode == 'fifo',
        prefault_heap_mib=16 if mode == 'fifo' else 0,
        freeze_gc=mode == 'fifo',
    )
    report = realtime.apply(params)
    period = period_us * 1000
    n = int(seconds * 1e9 / period)
    late = [0] * n  # allocated before the loop
    nxt = time.monotonic_ns() + period
    for i in range(n):
        delay = nxt - time.monotonic_ns()
        if delay > 0:
            time.sleep(delay / 1e9)
        late[i] = time.monotonic_ns() - nxt
        nxt += period
    s = summarize_ns(late)
    return {
        'mode': mode,
        'policy': report.policy,
        'warnings': report.warnings,
        'p50_us': s.p50_us,
        'p99_us': s.p99_us,
        'max_us': s.max_us,
        'count': s.count,
        'over_period': sum(1 for x in late if x > period),
    }


def probe_main(argv: list[str]) -> None:
    mode, priority, cpu, period_us, seconds = argv
    print(json.dumps(_probe(mode, int(priority), int(cpu), int(period_us), float(seconds))))


def burn(stop: Any) -> None:
    """CPU and memory load until ``stop`` is set (a load generator's process)."""
    x = 0
    while not stop.is_set():
        for i in range(10_000):
            x ^= i * i
        _ = bytearray(1 << 16)  # some allocation and memory traffic too


def run_probe(mode: str, args: argparse.Namespace) -> dict[str, Any]:
    out = subprocess.run(
        [
            sys.executable,
            '-m',
            'rt_fusion_tools.rt_check',
            '--probe',
            mode,
            str(args.priority),
            str(args.cpu),
            str(args.period_us),
            str(args.seconds),
        ],
        capture_output=True,
        text=True,
        timeout=args.seconds * 3 + 60,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def run_cyclictest(args: argparse.Namespace) -> dict[str, Any] | None:
    exe = shutil.which('cyclictest')
    if exe is None:
        return None
    out = subprocess.run(
        [
            exe,
            '-m',
            '-q',
            '-p',
            str(args.priority),
            '-a',
            str(args.cpu),
            '-t',
            '1',
            '-n',
            '-i',
            str(args.period_us),
            '-D',
            f'{int(args.seconds)}s',
        ],
        capture_output=True,
        text=True,
        timeout=args.seconds + 60,
        check=False,
    )
    values: dict[str, Any] = {}
    for key in ('Min', 'Avg', 'Max'):
        token = out.stdout.split(f'{key}:')
        if len(token) > 1:
            values[key.lower() + '_us'] = int(token[1].split()[0])
    return values or {'error': (out.stderr or out.stdout).strip()[:200]}


def verdicts(
    facts: dict[str, str],
    probes: dict[str, dict[str, Any]],
    cyclic: dict[str, Any] | None,
    args: argparse.Namespace,
) -> list[tuple[str, str, str, str]]:
    """(item, value, verdict, advice) rows; verdict is ok / FIX / info."""
    rows = []
    rt = facts['preemption'] == 'PREEMPT_RT'
    rows.append(
        (
            'preemption model',
            facts['preemption'],
            'ok' if rt else 'FIX',
            '' if rt else 'a PREEMPT_RT kernel (rt_kernel/rt_host.py apply --step kernel)',
        )
    )
    root = facts['euid'] == '0'
    rtprio_soft = facts['RLIMIT_RTPRIO'].split(' / ')[0]
    ok = (
        root
        or (rtprio_soft.isdigit() and int(rtprio_soft) >= args.priority)
        or rtprio_soft == 'unlimited'
    )
    rows.append(
        (
            'RLIMIT_RTPRIO',
            facts['RLIMIT_RTPRIO'] + (' (root)' if root else ''),
            'ok' if ok else 'FIX',
            '' if ok else '@realtime - rtprio 98 in limits.d',
        )
    )
    mem_soft = facts['RLIMIT_MEMLOCK'].split(' / ')[0]
    ok = root or mem_soft == 'unlimited'
    rows.append(
        (
            'RLIMIT_MEMLOCK',
            facts['RLIMIT_MEMLOCK'] + (' (root)' if root else ''),
            'ok' if ok else 'FIX',
            '' if ok else '@realtime - memlock unlimited',
        )
    )
    throttled = facts['sched_rt_runtime_us'] not in ('-1', '')
    rows.append(
        (
            'sched_rt_runtime_us',
            facts['sched_rt_runtime_us'] or '(n/a)',
            'info' if throttled else 'ok',
            'RT throttling at 95 %; -1 on the vehicle (rt_host.py --step sysctl)'
            if throttled
            else '',
        )
    )
    isolated = facts['isolated_cpus']
    rows.append(
        (
            'isolated CPUs',
            isolated,
            'ok' if isolated != '(none)' else 'info',
            ''
            if isolated != '(none)'
            else 'isolcpus/nohz_full on the vehicle (rt_host.py --step boot)',
        )
    )
    rows.append(
        (
            'governor',
            facts['governor'],
            'ok' if facts['governor'] in ('performance', '(n/a)') else 'info',
            '',
        )
    )
    fifo, other = probes.get('fifo'), probes.get('other')
    if fifo:
        got = fifo['policy'] == 'SCHED_FIFO'
        rows.append(
            (
                f'probe SCHED_FIFO {args.priority} on CPU {args.cpu}',
                (
                    f'P50 {fifo["p50_us"]:.0f} / P99 {fifo["p99_us"]:.0f} / max '
                    f'{fifo["max_us"]:.0f} µs, {fifo["over_period"]} late > period'
                ),
                'ok' if got else 'FIX',
                '' if got else '; '.join(fifo['warnings'])[:120],
            )
        )
    if other:
        rows.append(
            (
                'probe SCHED_OTHER (same CPU)',
                (
                    f'P50 {other["p50_us"]:.0f} / P99 {other["p99_us"]:.0f} / max '
                    f'{other["max_us"]:.0f} µs, {other["over_period"]} late > period'
                ),
                'info',
                '',
            )
        )
    if cyclic is None:
        rows.append(('cyclictest', 'not installed', 'info', 'apt install rt-tests'))
    elif 'error' in cyclic:
        rows.append(('cyclictest', cyclic['error'], 'FIX', ''))
    else:
        rows.append(
            (
                'cyclictest',
                f'min {cyclic["min_us"]} / avg {cyclic["avg_us"]} / max {cyclic["max_us"]} µs',
                'ok',
                '',
            )
        )
    return rows
