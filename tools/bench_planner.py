#!/usr/bin/env python3
"""Benchmark: planner solve time, and the 100 Hz planning loop under SCHED_FIFO vs SCHED_OTHER.

1. Solve time: 1,000 seeded traffic scenes with 20 obstacles each, 500 candidates (10 offsets ×
   10 speeds × 5 horizons), pinned to one CPU, by the planner as the node runs it (compiled by
   numba where it is installed) and by its numpy form; against the same scenes solved by brute
   force (every candidate turned into x/y and its bounding circle checked against every
   obstacle's at every step with one numpy expression, then the cheapest collision-free one) in
   the same run.
2. The planning loop as trajectory_node runs it: 100 Hz, moving traffic, each mode in its own
   process pinned to the last CPU — SCHED_FIFO + mlockall + pre-faulting + frozen GC, then plain
   SCHED_OTHER — while a load generator keeps the other CPUs busy (``--load both`` adds a hog on
   the planner's own CPU, where only the real-time policy protects the loop). Wake-up lateness
   P50/P99/max and missed deadlines (an iteration finishing after its period).
3. results/bench/planner.png: a closed-loop scenario (candidates at the first replan, the chosen
   trajectories, obstacles over time) and the lateness distributions; planner.json.

Final line:
  RESULT solve_p50_ms=... solve_p99_ms=... late_p99_us_fifo=... late_p99_us_other=... misses=...
(``misses``: the SCHED_FIFO loop's; the target is 0 at 100 Hz, and solve P99 ≤ 1 ms).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import numpy as np

import rt_fusion.bench.planner as bp
from rt_fusion.core.latency import summarize_ns

ROOT = Path(__file__).resolve().parents[1]


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ['--loop']:
        mode, seconds, hz, cpu_s, priority, seed = argv[1:]
        bp.loop(mode, float(seconds), float(hz), int(cpu_s), int(priority), int(seed))
        return 0
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument('--quick', action='store_true', help='300 solves, 15 s loops (< 60 s)')
    parser.add_argument('--solves', type=int, default=1000)
    parser.add_argument('--loop-s', type=float, default=60.0, help='seconds per loop mode')
    parser.add_argument('--hz', type=float, default=100.0)
    parser.add_argument('--priority', type=int, default=80)
    parser.add_argument(
        '--load',
        choices=('other', 'both', 'none'),
        default='other',
        help='CPU hogs on the other CPUs (default), also on the planner CPU, or none',
    )
    parser.add_argument('--seed', type=int, default=7)
    parser.add_argument('--out', type=Path, default=ROOT / 'results' / 'bench')
    args = parser.parse_args(argv)
    if args.quick:
        args.solves, args.loop_s = 300, 15.0
    from rt_fusion import report  # noqa: PLC0415

    cpu = (os.cpu_count() or 1) - 1
    solve = bp.bench_solve(args.solves, max(20, args.solves // 10), args.seed, cpu)
    loops = bp.run_loops(args, cpu)
    s = summarize_ns(solve['solve_ns'])
    b = summarize_ns(solve['brute_ns'])
    npy = summarize_ns(solve['numpy_ns'])
    rows = {'brute-force numpy': b, 'rt_fusion Frenet, numpy': npy}
    if solve['kind'] == 'numba':
        rows['rt_fusion Frenet, numba'] = s
    report.console.print(
        report.latency_table(
            f'planner solve, {solve["candidates"]} candidates × 20 obstacles, CPU {cpu}',
            rows,
            baseline='brute-force numpy',
        )
    )
    fifo, other = loops['fifo'], loops['other']
    report.console.print(
        report.latency_table(
            f'planning loop wake-up lateness, {args.hz:.0f} Hz × {args.loop_s:.0f} s, load: '
            f'{args.load}',
            {
                m: summarize_ns(r['late_ns'])
                for m, r in (('SCHED_OTHER', other), ('SCHED_FIFO + mlockall', fifo))
            },
            baseline='SCHED_OTHER',
            extra={
                'SCHED_OTHER': {
                    'misses': str(other['misses']),
                    'run P99 µs': f'{other["runtime"]["p99_us"]:.0f}',
                },
                'SCHED_FIFO + mlockall': {
                    'misses': str(fifo['misses']),
                    'run P99 µs': f'{fifo["runtime"]["p99_us"]:.0f}',
                },
            },
        )
    )
    if fifo['policy'] != 'SCHED_FIFO':
        report.console.print(f'[yellow]SCHED_FIFO refused: {"; ".join(fifo["warnings"])}[/]')
    st = solve['statuses']
    report.console.print(
        f'scenes: {st[0]} planned, {st[1]} comfort stops, {st[2]} emergency stops; collision '
        f'checks per solve P50 {int(np.median(solve["checks"]))}, max {max(solve["checks"])}'
    )
    args.out.mkdir(parents=True, exist_ok=True)
    bp.scenario_png(args.out / 'planner.png', loops, solve['solve_ns'])
    report.write_json(
        args.out / 'planner.json',
        {
            'planner': solve['kind'],
            'solve': s,
            'solve_numpy': npy,
            'brute_force': b,
            'statuses': st,
            'loops': {m: {k: v for k, v in r.items() if k != 'late_ns'} for m, r in loops.items()},
            'load': args.load,
            'hz': args.hz,
            'loop_s': args.loop_s,
        },
    )
    report.console.print(f'wrote {args.out / "planner.png"} and planner.json')
    report.result_line(
        solve_p50_ms=s.p50_us / 1e3,
        solve_p99_ms=s.p99_us / 1e3,
        planner=solve['kind'],
        solve_numpy_p99_ms=npy.p99_us / 1e3,
        late_p99_us_fifo=fifo['late']['p99_us'],
        late_p99_us_other=other['late']['p99_us'],
        misses=fifo['misses'],
        misses_other=other['misses'],
        speedup_vs_brute_p50=b.p50_us / s.p50_us,
    )
    return 0


if __name__ == '__main__':
    sys.exit(main())
