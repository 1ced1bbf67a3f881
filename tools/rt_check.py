"""Is this machine ready for rt_fusion's real-time nodes? A verdict table.

Reports the preemption model, the real-time limits (RLIMIT_RTPRIO, RLIMIT_MEMLOCK,
sched_rt_runtime_us), isolated CPUs and the governor; runs ``cyclictest`` when it is installed;
and runs a Python wake-up probe the way the planner runs: a child process set up with
:func:`rt_fusion.core.realtime.apply` (SCHED_FIFO at ``--priority``, pinned to ``--cpu``,
mlockall) sleeping to absolute deadlines every ``--period-us``, against the same probe as
SCHED_OTHER, while a load generator keeps every other CPU busy.

  rt_fusion_rt_check                       # 10 s per probe
  rt_fusion_rt_check --priority 80 --cpu 10 --seconds 60 --json results/rt_check.json

Exit status 0 when nothing needs fixing, 1 otherwise (the table says what and how).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
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


def _probe_main(argv: list[str]) -> None:
    mode, priority, cpu, period_us, seconds = argv
    print(json.dumps(_probe(mode, int(priority), int(cpu), int(period_us), float(seconds))))


def _burn(stop: Any) -> None:
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


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ['--probe']:
        _probe_main(argv[1:])
        return 0
    parser = argparse.ArgumentParser(
        description=__doc__.split('\n\n')[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=__doc__.split('\n\n', 1)[1],
    )
    n = os.cpu_count() or 1
    parser.add_argument('--priority', type=int, default=80, help='SCHED_FIFO priority')
    parser.add_argument('--cpu', type=int, default=n - 1, help='CPU of the probe')
    parser.add_argument('--period-us', type=int, default=1000, help='probe period')
    parser.add_argument('--seconds', type=float, default=10.0, help='per probe')
    parser.add_argument('--no-load', action='store_true', help='no load on the other CPUs')
    parser.add_argument('--json', type=Path, help='write facts, probes and verdicts here')
    args = parser.parse_args(argv)
    if not 0 <= args.cpu < n:
        parser.error(f'--cpu {args.cpu}: this machine has CPUs 0..{n - 1}')
    from rich.table import Table  # noqa: PLC0415

    from rt_fusion.report import console  # noqa: PLC0415

    facts = realtime.system_facts()
    stop = multiprocessing.Event()
    burners = []
    if not args.no_load:
        for cpu in range(n):
            if cpu != args.cpu:
                proc = multiprocessing.Process(target=_burn, args=(stop,), daemon=True)
                proc.start()
                if proc.pid is not None:
                    os.sched_setaffinity(proc.pid, {cpu})
                burners.append(proc)
    probes: dict[str, dict[str, Any]] = {}
    try:
        with console.status('') as status:
            for mode in ('fifo', 'other'):
                status.update(
                    f'wake-up probe {mode}: {args.seconds:.0f} s at '
                    f'{args.period_us} µs, load on {len(burners)} other CPUs'
                )
                probes[mode] = run_probe(mode, args)
            status.update(f'cyclictest {args.seconds:.0f} s')
            cyclic = run_cyclictest(args)
    finally:
        stop.set()
        for proc in burners:
            proc.join(5)
    rows = verdicts(facts, probes, cyclic, args)
    table = Table(title=f'rt_check — {facts["kernel"]}, {facts["cpus"]} CPUs')
    for col in ('item', 'value', 'verdict', 'what to do'):
        table.add_column(col)
    for item, value, verdict, advice in rows:
        style = {'ok': 'green', 'FIX': 'bold red', 'info': 'yellow'}[verdict]
        table.add_row(item, value, f'[{style}]{verdict}[/]', advice)
    console.print(table)
    bad = [r for r in rows if r[2] == 'FIX']
    fifo, other = probes['fifo'], probes['other']
    console.print(f'verdict: {"ready" if not bad else f"{len(bad)} to fix"}')
    print(
        f'RESULT late_p99_us_fifo={fifo["p99_us"]:.1f} late_max_us_fifo={fifo["max_us"]:.1f} '
        f'late_p99_us_other={other["p99_us"]:.1f} late_max_us_other={other["max_us"]:.1f} '
        f'fix={len(bad)}'
    )
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(
            json.dumps(
                {'facts': facts, 'probes': probes, 'cyclictest': cyclic, 'rows': rows}, indent=1
            )
        )
    return 1 if bad else 0


if __name__ == '__main__':
    sys.exit(main())
