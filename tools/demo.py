#!/usr/bin/env python3
"""The main job on the embedded default: `make demo`.

Stage of the project: the transport. A talker process writes 1080p frames into a shared-memory
ring and publishes ``rt_fusion_msgs/ShmFrame`` descriptors; one listener takes them through the
descriptors over rclpy, another through the ring's same-host fast path. Both measure commit ->
usable view. The demo grows with every capability into the full node graph replaying a recording.

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
    parser.add_argument('--count', type=int, default=300, help='frames to send')
    parser.add_argument('--rate', type=float, default=30.0, help='frame rate [Hz]')
    parser.add_argument('--out', type=Path, default=ROOT / 'results' / 'demo')
    args = parser.parse_args(argv)

    env = dict(
        os.environ,
        ROS_DOMAIN_ID=os.environ.get('ROS_DOMAIN_ID', '42'),
        ROS_AUTOMATIC_DISCOVERY_RANGE='LOCALHOST',
        PYTHONUNBUFFERED='1',
    )
    args.out.mkdir(parents=True, exist_ok=True)
    listeners = {'descriptor over rclpy': 'false', 'same-host fast path': 'true'}
    with tempfile.TemporaryDirectory() as tmp:
        report.console.print(
            f'[bold]rt_fusion demo[/] (transport stage): {args.count} 1920x1080 rgb8 frames at '
            f'{args.rate:g} Hz through a shared-memory ring, to two listener processes'
        )
        start = time.monotonic()
        procs = {}
        for i, (name, fast_flag) in enumerate(listeners.items()):
            procs[name] = subprocess.Popen(
                _node(
                    'frame_probe_node',
                    '-p',
                    'role:=listener',
                    '-p',
                    f'count:={args.count}',
                    '-p',
                    f'fast_path:={fast_flag}',
                    '-p',
                    f'samples_file:={tmp}/{i}.npy',
                    '-r',
                    f'__node:=demo_listener_{i}',
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
                '-p',
                'transport:=shm',
                '-p',
                f'count:={args.count}',
                '-p',
                f'rate_hz:={args.rate}',
                '-p',
                'width:=1920',
                '-p',
                'height:=1080',
                '-p',
                'segment:=rt_fusion_demo',
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
        budget = 60 + args.count / args.rate
        sent = _summary(talker, budget)
        received = {name: _summary(proc, budget) for name, proc in procs.items()}
        samples = {name: np.load(f'{tmp}/{i}.npy') for i, name in enumerate(listeners)}
    elapsed = time.monotonic() - start

    rows = {name: summarize_ns(s) for name, s in samples.items()}
    report.console.print(report.latency_table('frame commit -> usable view in the listener', rows))
    results = {
        'stage': 'transport',
        'sent': sent['sent'],
        'received': {name: r['received'] for name, r in received.items()},
        'stats': {name: r['stats'] for name, r in received.items()},
        'elapsed_s': elapsed,
        'latency': rows,
    }
    report.write_json(args.out / 'results.json', results)
    report.plot_latency(
        args.out / 'latency.png',
        samples,
        'rt_fusion demo: 1080p frames through shared memory, commit -> view',
    )
    report.console.print(f'results: {args.out / "results.json"}, {args.out / "latency.png"}')
    over_ros, fast = rows['descriptor over rclpy'], rows['same-host fast path']
    report.result_line(
        sent=sent['sent'],
        received=min(r['received'] for r in received.values()),
        shm_p50_us=over_ros.p50_us,
        shm_p99_us=over_ros.p99_us,
        fast_p50_us=fast.p50_us,
        fast_p99_us=fast.p99_us,
    )
    ok = all(r['received'] == sent['sent'] == args.count for r in received.values())
    return 0 if ok else 1


if __name__ == '__main__':
    sys.exit(main())
