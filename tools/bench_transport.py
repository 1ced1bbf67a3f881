#!/usr/bin/env python3
"""Benchmark: large frames between two real processes, shared memory vs plain rclpy.

For each path, a writer process and a reader process run the same scenarios (frame size x
rate); latency is measured from the writer's commit of a frame (the frame is ready in its
memory) to the reader holding a usable numpy view of it:

  shm         ShmPublisher -> ShmSubscription: descriptor over rclpy, payload in /dev/shm
  fast        same, delivered by the ring's futex (same host; no rclpy hop)
  ros         plain rclpy sensor_msgs/Image, default transports (the conventional graph)
  ros_large   plain rclpy Image with FASTDDS_BUILTIN_TRANSPORTS=LARGE_DATA
  floor       a bare cross-process wake-up through a pipe (no payload, no ROS)

All paths are paced the same way in the same run, because this machine runs code much slower
right after a process has slept. Reports P50/P99/max, CPU % of each process, drops (frames sent
but never delivered), overruns and torn frames, and writes results/bench/transport.{json,png}.

Final line:
  RESULT shm_p50_us=... shm_p99_us=... fast_p99_us=... floor_p99_us=... ros_p99_us=...
         ratio_p99=... torn=... drops=...
with the figures of the reference scenario (1920x1080x3 at 30 Hz), ratio_p99 = ros / shm,
torn and drops summed over every shm and fast scenario.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

import numpy as np

import rt_fusion.bench.transport as bt

ROOT = Path(__file__).resolve().parents[1]


def main(argv: list[str] | None = None) -> int:
    """Runs the benchmark (or one of its worker roles)."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument('--quick', action='store_true', help='1080p at 30 and 120 Hz, 2 s each')
    parser.add_argument(
        '--peers',
        action='store_true',
        help='rt_fusion against iceoryx2, Zenoh (shared memory) and rclpy: 1080p and 4K at '
        '30 Hz, 1 and 4 readers, quiet and loaded (docs/transport.md)',
    )
    parser.add_argument('--readers', default='1,4', help='--peers: reader counts')
    parser.add_argument('--loads', default='quiet,loaded', help='--peers: quiet and/or loaded')
    parser.add_argument('--paths', default=','.join(bt.PATHS), help='comma-separated subset')
    parser.add_argument('--out', type=Path, default=ROOT / 'results' / 'bench')
    parser.add_argument('--role', choices=('writer', 'reader'), help=argparse.SUPPRESS)
    parser.add_argument('--path', help=argparse.SUPPRESS)
    parser.add_argument('--plan', help=argparse.SUPPRESS)
    parser.add_argument('--fifo', help=argparse.SUPPRESS)
    parser.add_argument('--segment', help=argparse.SUPPRESS)
    parser.add_argument('--reader-count', type=int, default=1, help=argparse.SUPPRESS)
    parser.add_argument('--endpoint', default='', help=argparse.SUPPRESS)
    parser.add_argument('--endpoints', default='', help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.role == 'writer':
        endpoints = tuple(e for e in args.endpoints.split(',') if e)
        bt.writer(
            args.path, json.loads(args.plan), args.fifo, args.segment, args.reader_count, endpoints
        )
        return 0
    if args.role == 'reader':
        bt.reader(args.path, json.loads(args.plan), args.fifo, 3.0, args.segment, args.endpoint)
        return 0

    if args.peers:
        return _peers(args)

    from rich.progress import Progress  # noqa: PLC0415

    from rt_fusion import report  # noqa: PLC0415
    from rt_fusion.core.latency import summarize_ns  # noqa: PLC0415

    plan = bt.scenarios(args.quick)
    paths = [p for p in args.paths.split(',') if p]
    unknown = set(paths) - set(bt.PATHS)
    if unknown:
        parser.error(f'unknown paths {sorted(unknown)}; choose from {bt.PATHS}')
    raw: dict[str, Any] = {}
    with Progress(console=report.console, transient=True) as progress:
        task = progress.add_task('bench_transport', total=len(paths))
        for i, path in enumerate(paths):
            progress.update(task, description=f'path {path} ({len(plan)} scenarios)')
            raw[path] = bt.run_path(path, plan, domain=1 + (os.getpid() + i) % 50)
            progress.advance(task)

    rows, extra, results = {}, {}, []
    ref_samples: dict[str, np.ndarray] = {}
    torn = drops = 0
    for path in paths:
        rd, wr = raw[path]['reader'], raw[path]['writer']
        for k, sc in enumerate(plan):
            lat = np.asarray(rd['scenarios'][k]['latency_ns'], np.int64)
            summary = summarize_ns(lat)
            sent = sc['frames'] - (1 if path == 'fast' and k == 0 else 0)
            dropped = max(0, sent - rd['scenarios'][k]['received'])
            name = f'{path} {sc["size"]}@{sc["rate"]:g}Hz'
            rows[name] = summary
            extra[name] = {
                'recv/sent': f'{rd["scenarios"][k]["received"]}/{sent}',
                'CPU% w/r': f'{wr[k]["cpu_pct"]:.0f}/{rd["scenarios"][k]["cpu_pct"]:.0f}',
            }
            if path in ('shm', 'fast'):
                drops += dropped
            results.append(
                {
                    'path': path,
                    **sc,
                    'latency': summary.as_dict(),
                    'dropped': dropped,
                    'writer_cpu_pct': wr[k]['cpu_pct'],
                    'writer_late': wr[k]['late'],
                    'reader_cpu_pct': rd['scenarios'][k]['cpu_pct'],
                }
            )
            if (sc['size'], sc['rate']) == bt.REFERENCE:
                ref_samples[path] = lat
        if path in ('shm', 'fast'):
            torn += rd.get('torn', 0)
            extra_path = {k2: v for k2, v in rd.items() if k2 in ('overruns', 'torn', 'stale')}
            results.append({'path': path, 'counters': extra_path})
    ref = {p: summarize_ns(s) for p, s in ref_samples.items()}
    report.console.print(
        report.latency_table(
            'commit -> usable view in the other process (all scenarios)', rows, extra=extra
        )
    )
    ref_name = f'{bt.REFERENCE[0]}@{bt.REFERENCE[1]:g}Hz'
    report.console.print(
        report.latency_table(
            f'reference scenario {ref_name}', ref, baseline='ros' if 'ros' in ref else None
        )
    )
    report.write_json(args.out / 'transport.json', {'plan': plan, 'results': results})
    report.plot_latency(
        args.out / 'transport.png',
        ref_samples,
        f'bench_transport: {ref_name}, commit -> usable view',
    )
    report.console.print(f'written: {args.out / "transport.json"}, {args.out / "transport.png"}')

    def p(path: str, key: str) -> float:
        s = ref.get(path)
        return float('nan') if s is None else float(getattr(s, key))

    shm_p99 = p('shm', 'p99_us')
    report.result_line(
        shm_p50_us=p('shm', 'p50_us'),
        shm_p99_us=shm_p99,
        fast_p99_us=p('fast', 'p99_us'),
        floor_p99_us=p('floor', 'p99_us'),
        ros_p99_us=p('ros', 'p99_us'),
        ratio_p99=p('ros', 'p99_us') / shm_p99 if shm_p99 > 0 else float('nan'),
        torn=torn,
        drops=drops,
    )
    return 0


def _peers(args: argparse.Namespace) -> int:
    """--peers: every path under every condition, a table per condition, a CDF grid, RESULT."""
    from rich.progress import Progress  # noqa: PLC0415

    from rt_fusion import report  # noqa: PLC0415
    from rt_fusion.bench import comparison  # noqa: PLC0415

    paths = [p for p in args.paths.split(',') if p] if args.paths != ','.join(bt.PATHS) else []
    paths = paths or list(bt.PEER_PATHS)
    readers = [int(n) for n in args.readers.split(',')]
    loads = [w == 'loaded' for w in args.loads.split(',')]
    plan = bt.scenarios(args.quick, peers=True)
    with Progress(console=report.console, transient=True) as progress:
        task = progress.add_task(
            'bench_transport --peers', total=len(paths) * len(readers) * len(loads)
        )

        def step(what: str) -> None:
            progress.update(task, description=what)
            progress.advance(task)

        cells = comparison.run(paths, plan, readers, loads, step)
    panels: dict[str, dict[str, np.ndarray]] = {}
    for cond in dict.fromkeys(c.condition for c in cells):
        mine = sorted((c for c in cells if c.condition == cond), key=lambda c: paths.index(c.path))
        rows = {c.path: c.summary for c in mine}
        extra = {
            c.path: {
                'lost': f'{c.lost}/{c.sent}',
                'CPU% w/r': f'{c.writer_cpu_pct:.0f}/{c.reader_cpu_pct:.0f}',
            }
            for c in mine
        }
        table = report.latency_table(f'commit -> view: {cond}', rows, baseline='fast', extra=extra)
        report.console.print(table)
        panels[cond] = {c.path: c.latency_ns for c in mine}
    best = comparison.ours_at_or_below_every_peer(cells)
    report.write_json(
        args.out / 'transport_peers.json',
        {
            'plan': plan,
            'versions': comparison.versions(),
            'cells': [
                {**{k: v for k, v in vars(c).items() if k != 'latency_ns'}, 'latency': c.summary}
                for c in cells
            ],
        },
    )
    report.plot_latency_grid(args.out / 'transport_peers.png', panels)
    report.console.print(
        f'written: {args.out / "transport_peers.json"}, {args.out / "transport_peers.png"}'
    )

    def p99(path: str, readers: int, loaded: bool) -> float:
        for c in cells:
            if (c.path, c.size, c.readers, c.loaded) == (path, '1080p', readers, loaded):
                return c.summary.p99_us if c.latency_ns.size else float('nan')
        return float('nan')

    values: dict[str, object] = {}
    for n in readers:
        for loaded in loads:
            tag = f'{n}r{"_loaded" if loaded else ""}'
            values.update({f'{path}_p99_us_{tag}': p99(path, n, loaded) for path in paths})
    report.result_line(
        **values,
        fast_best=sum(best.values()),
        conditions=len(best),
        lost_rt_fusion=sum(c.lost for c in cells if c.path in comparison.OURS),
        torn=sum(c.torn for c in cells if c.path in comparison.OURS),
    )
    return 0


if __name__ == '__main__':
    sys.exit(main())
