#!/usr/bin/env python3
"""Benchmark: ARS408 and Xsens decoders, and the radar and IMU nodes as real processes.

Decoders (in this process): per-frame time and throughput of
  - Ars408Decoder on cycles of 100 objects (status + 100 × general/quality/extended = 301 frames
    a cycle, built with the project's DBC), the heaviest load the sensor sends (~4,000 frames/s);
  - XbusParser + parse_mtdata2 on MTData2 messages with counter, SampleTimeFine, quaternion, rate
    of turn, acceleration and status word, as an MTi sends at up to 1 kHz.
Nodes (real processes, as in the tests): radar_node fed the real candump log over python-can's
udp_multicast bus, imu_node fed by tools/xsens_emulator.py over a pty; their publish latency
(last frame of a cycle / MTData2 message received -> message published) as they report it in
diagnostics.

Final line:
  RESULT ars408_fps=... xsens_fps=... radar_node_p99_us=... imu_node_p99_us=...
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import rt_fusion.bench.protocols as bpr
from rt_fusion.core.latency import summarize_ns

ROOT = Path(__file__).resolve().parents[1]


DATA = ROOT.parent / 'shared' / 'data'


def main(argv: list[str] | None = None) -> int:
    """Runs the benchmark; returns the exit status."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument('--quick', action='store_true', help='fewer frames, shorter node runs')
    parser.add_argument('--out', type=Path, default=ROOT / 'results' / 'bench')
    args = parser.parse_args(argv)

    from rt_fusion import report  # noqa: PLC0415

    ars_fps, ars_t = bpr.bench_ars408(20 if args.quick else 200)
    xs_fps, xs_t = bpr.bench_xsens(5000 if args.quick else 50_000)
    report.console.print('decoders done; running the nodes (real processes) ...')
    nodes = bpr.bench_nodes(args.quick, ROOT, DATA)
    rows = {
        'ARS408 decode / frame (100-object cycles)': summarize_ns(ars_t),
        'Xsens frame + MTData2 decode / message': summarize_ns(xs_t),
    }
    extra = {
        'ARS408 decode / frame (100-object cycles)': {
            'frames/s': f'{ars_fps:,.0f}',
            'x device rate': f'{ars_fps / 4000:.0f}×',
        },
        'Xsens frame + MTData2 decode / message': {
            'frames/s': f'{xs_fps:,.0f}',
            'x device rate': f'{xs_fps / 1000:.0f}×',
        },
    }
    report.console.print(report.latency_table('protocol decoders', rows, extra=extra))
    report.console.print(
        f'node publish latency (diagnostics): radar_node P50 {nodes.get("radar_p50_us", "-")} '
        f'µs, P99 {nodes.get("radar_p99_us", "-")} µs; imu_node P50 '
        f'{nodes.get("imu_p50_us", "-")} µs, P99 {nodes.get("imu_p99_us", "-")} µs'
    )
    report.write_json(
        args.out / 'protocols.json',
        {'decoders': rows, 'ars408_fps': ars_fps, 'xsens_fps': xs_fps, 'nodes': nodes},
    )
    report.result_line(
        ars408_fps=round(ars_fps),
        xsens_fps=round(xs_fps),
        radar_node_p99_us=nodes.get('radar_p99_us', float('nan')),
        imu_node_p99_us=nodes.get('imu_p99_us', float('nan')),
    )
    return 0


if __name__ == '__main__':
    sys.exit(main())
