#!/usr/bin/env python3
"""The main job on the embedded default: `make demo`.

Stage of the project: the foundation. Two real rclpy processes (Fast DDS, an isolated domain)
exchange ``rt_fusion_msgs/ShmFrame`` descriptors; the listener measures the one-way latency of
each. The demo grows with every capability into the full node graph replaying a recording.

Writes ``results/demo/results.json`` and ``results/demo/latency.png``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from rt_fusion.core.latency import summarize_ns
from rt_fusion_tools import report

ROOT = Path(__file__).resolve().parents[1]


def _node(module: str, *ros_args: str) -> list[str]:
    return [sys.executable, '-m', f'rt_fusion.nodes.{module}', '--ros-args', *ros_args]


def _summary(proc: subprocess.Popen[str], timeout_s: float) -> dict:  # type: ignore[type-arg]
    out, err = proc.communicate(timeout=timeout_s)
    for line in out.splitlines():
        if line.startswith('SUMMARY '):
            return json.loads(line.removeprefix('SUMMARY '))  # type: ignore[no-any-return]
    raise SystemExit(f'demo: {proc.args!r} printed no summary (exit {proc.returncode}):\n{err}')


def main(argv: list[str] | None = None) -> int:
    """Runs the demo and prints its latency table; returns the exit status."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument('--count', type=int, default=500, help='descriptors to exchange')
    parser.add_argument('--rate', type=float, default=100.0, help='publication rate [Hz]')
    parser.add_argument('--out', type=Path, default=ROOT / 'results' / 'demo')
    args = parser.parse_args(argv)

    env = dict(
        os.environ,
        ROS_DOMAIN_ID=os.environ.get('ROS_DOMAIN_ID', '42'),
        ROS_AUTOMATIC_DISCOVERY_RANGE='LOCALHOST',
        PYTHONUNBUFFERED='1',
    )
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        samples_file = Path(tmp) / 'latency.npy'
        common = ['-p', f'count:={args.count}', '-p', 'depth:=1000']
        report.console.print(
            f'[bold]rt_fusion demo[/] (foundation stage): {args.count} ShmFrame '
            f'descriptors at {args.rate:g} Hz between two rclpy processes'
        )
        start = time.monotonic()
        listener = subprocess.Popen(
            _node(
                'frame_probe_node',
                '-p',
                'role:=listener',
                *common,
                '-p',
                f'samples_file:={samples_file}',
                '-r',
                '__node:=demo_listener',
                '-r',
                '~/in/frames:=/demo/frames',
            ),
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        talker = subprocess.Popen(
            _node(
                'frame_probe_node',
                '-p',
                'role:=talker',
                *common,
                '-p',
                f'rate_hz:={args.rate}',
                '-r',
                '__node:=demo_talker',
                '-r',
                '~/out/frames:=/demo/frames',
            ),
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        budget = 30 + args.count / args.rate
        sent = _summary(talker, budget)
        received = _summary(listener, budget)
        samples = np.load(samples_file)
    elapsed = time.monotonic() - start

    rows = {'ShmFrame over rclpy (one hop)': summarize_ns(samples)}
    report.console.print(report.latency_table('descriptor latency, commit -> received', rows))
    results = {
        'stage': 'foundation',
        'sent': sent['sent'],
        'received': received['received'],
        'elapsed_s': elapsed,
        'latency': rows,
    }
    report.write_json(args.out / 'results.json', results)
    report.plot_latency(
        args.out / 'latency.png',
        {'ShmFrame over rclpy': samples},
        'rt_fusion demo: ShmFrame descriptor one-way latency',
    )
    report.console.print(f'results: {args.out / "results.json"}, {args.out / "latency.png"}')
    s = rows['ShmFrame over rclpy (one hop)']
    report.result_line(
        sent=sent['sent'],
        received=received['received'],
        p50_us=s.p50_us,
        p99_us=s.p99_us,
        max_us=s.max_us,
    )
    return 0 if received['received'] == sent['sent'] == args.count else 1


if __name__ == '__main__':
    sys.exit(main())
