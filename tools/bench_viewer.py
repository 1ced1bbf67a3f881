#!/usr/bin/env python3
"""Benchmark: what the live view costs the graph — the same scenario with no viewer, and with the
viewer and a Foxglove client subscribed to every channel, in one run.

Runs ``tools/demo.py`` (replay → fusion → planner as processes over real DDS, the camera through
its shared-memory ring) on one generated scenario, ``--pairs`` times each way, alternated:
without a viewer, then with ``--viewer`` and a Foxglove WebSocket client
(:mod:`rt_fusion.ros.viewer.client`) reading every channel for the whole run. It prints each
way's end-to-end latency P50/P99/max over the frames of all its runs and frames lost, the ratio
of the P99s, what the client received per channel, and the viewer process's CPU use (its user +
system time over the run's wall time, from /proc), and ends with

  RESULT e2e_p99_ms=… viewer_e2e_p99_ms=… ratio_p99=… lost=… viewer_lost=… viewer_cpu_pct=…
  client_messages=… client_channels=…

``ratio_p99`` is with the viewer over without (1.05: 5 % slower). On a 2-core machine the viewer
shares the cores with the graph, so this is its worst case; a vehicle computer has more.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from rt_fusion import report
from rt_fusion.core import domains, linux
from rt_fusion.core.latency import summarize_ns
from rt_fusion.ros.harness import launching

ROOT = Path(__file__).resolve().parents[1]
E2E = 'camera → trajectory (end to end)'


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU time of process ``pid`` [s] (None once it is gone)."""
    try:
        fields = Path(f'/proc/{pid}/stat').read_text().rsplit(')', 1)[1].split()
    except (OSError, IndexError):
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf('SC_CLK_TCK')


class CpuWatch(threading.Thread):
    """Samples a process's CPU time while it runs: the first and the last sample."""

    def __init__(self, needle: str, domain: str, stop: threading.Event) -> None:
        super().__init__(daemon=True)
        self.needle, self.domain, self.stop = needle, domain, stop
        self.first: tuple[float, float] | None = None
        self.last: tuple[float, float] | None = None

    def run(self) -> None:
        pid = None
        while not self.stop.wait(0.5):  # paced: sampling
            pid = pid or launching.domain_process(self.domain, self.needle)
            cpu = cpu_seconds(pid) if pid else None
            if cpu is None:
                pid = None
                continue
            sample = (time.monotonic(), cpu)
            self.first = self.first or sample
            self.last = sample

    def percent(self) -> float:
        """CPU use over the sampled span [% of one core]."""
        if self.first is None or self.last is None or self.last[0] <= self.first[0]:
            return float('nan')
        return 100.0 * (self.last[1] - self.first[1]) / (self.last[0] - self.first[0])


def demo(args: argparse.Namespace, out: Path, env: dict[str, str], *extra: str) -> dict[str, Any]:
    """One demo run; its results.json."""
    cmd = [
        sys.executable, str(ROOT / 'tools' / 'demo.py'), '--scenario', args.scenario,
        '--seconds', str(args.seconds), '--resolution', args.resolution, '--backend',
        args.backend, '--device', args.device, '--no-compare', '--out', str(out), *extra,
    ]  # fmt: skip
    report.console.print('bench_viewer: ' + ' '.join(cmd[1:]))
    (out / 'results.json').unlink(missing_ok=True)
    rc = subprocess.call(cmd, env=env)
    if not (out / 'results.json').exists():
        raise SystemExit(f'bench_viewer: the demo wrote no results (exit {rc})')
    return dict(json.loads((out / 'results.json').read_text()))


def main(argv: list[str] | None = None) -> int:
    """Both runs; the table and the RESULT line."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument('--scenario', default='cut_in')
    parser.add_argument('--seconds', type=float, default=8.0)
    parser.add_argument('--resolution', default='1920x1080')
    parser.add_argument(
        '--backend', default='none', help="the fusion's detector (none: the graph's transport "
        'and tracking only, the least noisy comparison on a CPU)',
    )  # fmt: skip
    parser.add_argument('--device', default='cpu')
    parser.add_argument(
        '--pairs', type=int, default=1, help='runs of each, alternated; the P99s over all frames'
    )
    parser.add_argument('--out', type=Path, default=ROOT / 'results' / 'bench' / 'viewer')
    args = parser.parse_args(argv)
    from rt_fusion.ros.viewer.client import listen  # noqa: PLC0415

    env = dict(os.environ, ROS_DOMAIN_ID=domains.from_env_or_lease())
    domain = env['ROS_DOMAIN_ID']
    runs: dict[str, list[dict[str, Any]]] = {'no viewer': [], 'viewer + client': []}
    got: dict[str, Any] = {}
    cpu: list[float] = []
    for k in range(args.pairs):  # alternated, so a drift of the machine's load hits both alike
        report.console.print(f'bench_viewer: pair {k + 1} of {args.pairs}')
        runs['no viewer'].append(demo(args, args.out / f'no_viewer_{k}', env))
        port = linux.free_port()
        stop = threading.Event()

        def client(port: int = port, stop: threading.Event = stop) -> None:
            url = f'ws://127.0.0.1:{port}'
            done = lambda _g: stop.is_set()  # noqa: E731
            got.update(asyncio.run(listen(url, done, 3600.0, keep=1, connect_s=600.0)))

        reader = threading.Thread(target=client, daemon=True)
        reader.start()
        watch = CpuWatch('viewer_node', domain, stop)
        watch.start()
        try:
            runs['viewer + client'].append(
                demo(args, args.out / f'viewer_{k}', env, '--viewer', str(port))
            )
        finally:
            stop.set()
            reader.join(10.0)
        cpu.append(watch.percent())
    rows = {}
    for name, results in runs.items():  # the frames of all its runs together
        s = summarize_ns([x for r in results for x in r['samples_ns']['rt_fusion'][E2E]])
        lost = sum(sum(r['losses']['rt_fusion'].values()) for r in results)
        rows[name] = (s, lost)
        each = ', '.join(
            f'{summarize_ns(r["samples_ns"]["rt_fusion"][E2E]).p99_us / 1e3:.1f}' for r in results
        )
        report.console.print(
            f'{name}: end to end P50 {s.p50_us / 1e3:.2f} ms, P99 {s.p99_us / 1e3:.2f} ms, '
            f'max {s.max_us / 1e3:.2f} ms over {s.count} frames of {len(results)} runs '
            f'(P99 of each: {each} ms); {lost} frames lost'
        )
    for topic, entry in sorted(got.items()):
        report.console.print(f'  client {topic}: {entry["count"]} messages, {entry["bytes"]} B')
    p99 = {k: v[0].p99_us / 1e3 for k, v in rows.items()}
    viewer_cpu = sum(cpu) / len(cpu)
    report.console.print(f'viewer CPU: {viewer_cpu:.1f} % of one core')
    report.result_line(
        e2e_p99_ms=p99['no viewer'],
        viewer_e2e_p99_ms=p99['viewer + client'],
        ratio_p99=p99['viewer + client'] / p99['no viewer'],
        lost=rows['no viewer'][1],
        viewer_lost=rows['viewer + client'][1],
        viewer_cpu_pct=viewer_cpu,
        client_messages=sum(e['count'] for e in got.values()),
        client_channels=sum(1 for e in got.values() if e['count']),
    )
    return 0


if __name__ == '__main__':
    sys.exit(main())
