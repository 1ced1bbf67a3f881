#!/usr/bin/env python3
"""Benchmark: camera → trajectory through both graphs in one run, frames counted at every stage.

Runs the full graph twice on the same generated scenario (``tools/demo.py``: replay_node →
fusion_node → trajectory_node as separate processes over real DDS) — once as rt_fusion (the
camera frames through a shared-memory ring, descriptors over DDS) and once as the conventional
rclpy graph (the same fusion node taking each frame as a ``sensor_msgs/Image``) — at a vehicle
camera's resolution (default 1920×1080, 30 Hz). It prints the demo's per-stage table and frame
ledger, writes ``e2e.png`` (the end-to-end distributions of both graphs, and rt_fusion's stage
breakdown) beside the demo's ``results.json``, and ends with

  RESULT e2e_p99_ms=… conventional_e2e_p99_ms=… ratio_p99=… lost=… conventional_lost=…
  fusion_p99_ms=… committed_e2e_p99_ms=… ontime=… conventional_ontime=… overhead_p99_ms=…
  conventional_overhead_p99_ms=… cameras=… resolution=…

``e2e``: camera capture → trajectory published (the modelled sensor delivery included, the same
in both graphs); ``committed_e2e``: the frame's commit to shared memory → trajectory published
(rt_fusion only: a conventional frame carries no commit stamp); ``lost``: frames committed that
produced no object list, for any reason (the ledger in the output says which stage, and which of
those a configured drop policy explains); ``fusion``: the fusion node, inputs complete → objects;
``ontime``: the share of committed frames (after the warm-up) whose trajectory was published within
100 ms of capture, a lost frame counting as late; ``overhead``: each frame's end to end less its
own inference (inputs complete → inference done), what the graph adds around the detector.
The exit status is the demo's: non-zero when rt_fusion lost a frame no drop policy explains.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np

from rt_fusion import report
from rt_fusion.core.evaluation.ledger import OVERHEAD, loss_text, losses, on_time_share
from rt_fusion.core.latency import summarize_ns

ROOT = Path(__file__).resolve().parents[1]
E2E = 'camera → trajectory (end to end)'
COMMITTED = 'camera committed → trajectory published'
FUSION = 'fusion node (inputs complete → objects)'


def lost(ledger: dict[str, Any]) -> int:
    """Frames committed that were never fused, whatever the reason: the front camera's, and
    those of a surround rig's other cameras that were not fused with their front frame."""
    front = max(0, int(ledger.get('committed', 0)) - int(ledger.get('frames_fused', 0)))
    return front + sum(
        max(0, int(e.get('committed', 0)) - int(e.get('used', 0)) - int(e.get('skipped', 0)))
        for e in ledger.get('extra_cameras', {}).values()
    )


def plot(path: Path, samples: dict[str, dict[str, list[int]]], title: str) -> None:
    """Left: the end-to-end distributions (CDF) of both graphs; right: rt_fusion's stages."""
    import matplotlib  # noqa: PLC0415

    matplotlib.use('Agg')
    import matplotlib.pyplot as plt  # noqa: PLC0415

    fig, (ax, bx) = plt.subplots(1, 2, figsize=(14, 5), dpi=110)
    for run, stages in samples.items():
        for stage in (E2E, COMMITTED):
            v = np.sort(np.asarray(stages.get(stage) or [], np.float64)) / 1e6
            if v.size:
                ax.step(
                    v, np.arange(1, v.size + 1) / v.size, where='post', label=f'{run}: {stage}'
                )
    ax.set_xscale('log')
    ax.set_xlabel('latency [ms] (log)')
    ax.set_ylabel('fraction of frames')
    ax.grid(True, which='both', alpha=0.3)
    ax.legend(fontsize=8, loc='lower right')
    ax.set_title('end to end, both graphs')
    ours = samples.get('rt_fusion', {})
    labels = [k for k, v in ours.items() if k.startswith('  ') and v]
    if labels:
        bx.boxplot(
            [np.asarray(ours[k], np.float64) / 1e6 for k in labels],
            orientation='horizontal',
            whis=(1, 99),
            showfliers=False,
        )
        bx.set_yticks(range(1, len(labels) + 1), [k.strip() for k in labels], fontsize=7)
        bx.invert_yaxis()  # the stages top to bottom, in the order a frame passes them
        bx.set_xscale('log')
        bx.set_xlabel('ms (box: P25–P75, whiskers: P1–P99)')
        bx.set_title('rt_fusion, stage by stage')
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    """Runs both graphs through the demo and prints the RESULT line; returns the exit status."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument('--scenario', default='cut_in', help='built-in scenario or YAML path')
    parser.add_argument('--seconds', type=float, default=10.0, help='scenario length')
    parser.add_argument('--resolution', default='1920x1080', help='camera WxH (16:9)')
    parser.add_argument(
        '--cameras',
        type=int,
        default=1,
        choices=(1, 4),
        help='cameras in the graph (4: the surround rig, front, left, right, rear: each through '
        'its own ring and the network)',
    )
    parser.add_argument(
        '--backend', default='onnxruntime', choices=('onnxruntime', 'torch', 'tensorrt', 'none')
    )
    parser.add_argument('--device', default='cpu', help='cpu, cuda or cuda:N')
    parser.add_argument('--out', type=Path, default=ROOT / 'results' / 'bench' / 'e2e')
    parser.add_argument('--quick', action='store_true', help='a 4-s scenario (make bench)')
    parser.add_argument(
        '--check', action='store_true', help='exit 1 when rt_fusion lost any frame (any cause)'
    )
    args = parser.parse_args(argv)
    if args.quick:
        args.seconds = min(args.seconds, 4.0)
    cmd = [
        sys.executable,
        str(ROOT / 'tools' / 'demo.py'),
        '--source',
        'scenario',
        '--scenario',
        args.scenario,
        '--seconds',
        str(args.seconds),
        '--resolution',
        args.resolution,
        '--cameras',
        str(args.cameras),
        '--backend',
        args.backend,
        '--device',
        args.device,
        '--out',
        str(args.out),
        *(['--check'] if args.check else []),
    ]
    report.console.print('bench_e2e: ' + ' '.join(cmd[1:]))
    results = args.out / 'results.json'
    results.unlink(missing_ok=True)
    rc = subprocess.call(cmd, env=os.environ)
    if not results.exists():
        report.console.print(f'[red]bench_e2e: the demo wrote no {results} (exit {rc})[/]')
        return rc or 1
    data = json.loads(results.read_text())
    samples: dict[str, dict[str, list[int]]] = data['samples_ns']
    ledgers: dict[str, dict[str, Any]] = data['frame_ledger']
    nan = float('nan')

    def p99(run: str, stage: str) -> float:
        v = samples.get(run, {}).get(stage)
        return summarize_ns(v).p99_us / 1e3 if v else nan

    def ontime(run: str) -> float:
        committed = int(ledgers.get(run, {}).get('committed', 0))
        return on_time_share(samples.get(run, {}).get(E2E, []), committed, data['warmup_frames'])

    plot(
        args.out / 'e2e.png',
        samples,
        f'rt_fusion vs conventional rclpy graph: {args.cameras} × {args.resolution} camera, '
        f'{args.backend} on {args.device}, {args.scenario} {args.seconds:g} s',
    )
    report.console.print(f'plot: {args.out / "e2e.png"}')
    report.result_line(
        e2e_p99_ms=p99('rt_fusion', E2E),
        conventional_e2e_p99_ms=p99('conventional', E2E),
        ratio_p99=p99('conventional', E2E) / p99('rt_fusion', E2E),
        lost=lost(ledgers.get('rt_fusion', {})),
        lost_by_cause=loss_text(losses(ledgers.get('rt_fusion', {}))),
        conventional_lost=lost(ledgers.get('conventional', {})),
        unexplained=sum(ledgers.get('rt_fusion', {}).get('unexplained', {}).values()),
        fusion_p99_ms=p99('rt_fusion', FUSION),
        committed_e2e_p99_ms=p99('rt_fusion', COMMITTED),
        ontime=ontime('rt_fusion'),
        conventional_ontime=ontime('conventional'),
        overhead_p99_ms=p99('rt_fusion', OVERHEAD),
        conventional_overhead_p99_ms=p99('conventional', OVERHEAD),
        cameras=args.cameras,
        resolution=args.resolution,
    )
    return rc


if __name__ == '__main__':
    sys.exit(main())
