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
import sys
from pathlib import Path
from typing import Any

import rt_fusion.bench.realtime as rc
from rt_fusion.core import realtime


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ['--probe']:
        rc.probe_main(argv[1:])
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
                proc = multiprocessing.Process(target=rc.burn, args=(stop,), daemon=True)
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
                probes[mode] = rc.run_probe(mode, args)
            status.update(f'cyclictest {args.seconds:.0f} s')
            cyclic = rc.run_cyclictest(args)
    finally:
        stop.set()
        for proc in burners:
            proc.join(5)
    rows = rc.verdicts(facts, probes, cyclic, args)
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
