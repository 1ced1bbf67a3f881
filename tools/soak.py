#!/usr/bin/env python3
"""Soak: the full replay graph on a looped scenario for a long time, watched minute by minute.

  python tools/soak.py --minutes 30                 # the acceptance run (README)
  python tools/soak.py --minutes 3 --sample-s 20    # a quick look

``launch/replay.launch.py`` (replay -> fusion -> planner, camera frames through shared memory,
stamps moved onto the host clock) replays a generated scenario in real time, over and over
(``loops:=0``). Every ``--sample-s`` it records, per node process: resident memory (VmRSS) and
open file descriptors; the shared-memory segments of its ROS domain in /dev/shm; and for the
frames of that interval: camera committed -> fused objects published and -> trajectory published
latency (P50/P99/max), and frames lost (a committed frame whose stamp never comes out of the
fusion node). Growth is measured from the first sample after ``--warmup-min``.

Writes ``soak.json`` and ``soak.png`` under ``--out``, prints a table per sample, and a last line
``RESULT minutes=… rss_growth_pct=… fds_growth=… shm_growth=… frames=… lost=…
dropped_by_policy=… torn=… failed=… e2e_p99_first_ms=… e2e_p99_last_ms=… died=…``
(``dropped_by_policy``, ``torn``, ``failed``: the fusion node's frame ledger, its diagnostics).
A change in open files after the warm-up is itemised per node (``fds_changed`` in the JSON, and a
line each: what the descriptors opened and closed point at), so a growth says what leaked.
``fds_growth`` counts the files held at the last sample beyond the most of each held at any
earlier sample after the warm-up (``fds_grown``): a file held part of the time, as the looped bag
between two passes, is not a leak whichever phase the samples caught.
Exit status 1 when a node died or the graph fed nothing.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

from rt_fusion import report
from rt_fusion.core.latency import summarize_ns
from rt_fusion.report import plots
from rt_fusion.ros import graph
from rt_fusion.ros.harness import live, processes

ROOT = Path(__file__).resolve().parents[1]
START_TOPIC = graph.start_topic('soak')
GRACE_NS = 3_000_000_000  # a frame younger than this at a sample may still be in flight


def interval(watch: Any, lo_ns: int, hi_ns: int) -> dict[str, Any]:
    """Frames committed with stamps in [lo, hi): how many, lost, and their latencies [ms]."""
    frames = [s for s in watch.frame_stamps if lo_ns <= s < hi_ns]
    fused = [watch.fused[s] - s for s in frames if s in watch.fused]
    planned = [watch.planned[s] - s for s in frames if s in watch.planned]
    fs, ps = summarize_ns(fused), summarize_ns(planned)
    return {
        'frames': len(frames),
        'lost': sum(1 for s in frames if s not in watch.fused),
        'fusion_p50_ms': fs.p50_us / 1e3,
        'fusion_p99_ms': fs.p99_us / 1e3,
        'e2e_p50_ms': ps.p50_us / 1e3,
        'e2e_p99_ms': ps.p99_us / 1e3,
        'e2e_max_ms': ps.max_us / 1e3,
    }


def main(argv: list[str] | None = None) -> int:
    """Runs the soak; returns the exit status."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument('--minutes', type=float, default=30.0)
    parser.add_argument('--sample-s', type=float, default=60.0, help='seconds per sample')
    parser.add_argument('--warmup-min', type=float, default=2.0, help='left out of the growth')
    parser.add_argument('--scenario', default='cut_in')
    parser.add_argument('--seconds', type=float, default=20.0, help='scenario length (a loop)')
    parser.add_argument('--backend', default='onnxruntime')
    parser.add_argument('--device', default='cpu')
    parser.add_argument('--infer-period-s', type=float, default=None)
    parser.add_argument('--out', type=Path, default=ROOT / 'results' / 'soak')
    args = parser.parse_args(argv)
    if args.sample_s <= 0 or args.minutes * 60 < 2 * args.sample_s:
        parser.error('--minutes must span at least two samples of --sample-s')
    domain = live.graph_env()['ROS_DOMAIN_ID']  # leased, and set for this process too
    args.out.mkdir(parents=True, exist_ok=True)

    from rt_fusion.ros.harness import launching  # noqa: PLC0415
    from rt_fusion.ros.harness.recorder import Recorder  # noqa: PLC0415
    from rt_fusion.ros.harness.scenarios import graph_params, scenario_bag  # noqa: PLC0415

    bag, _speed = scenario_bag(
        args.scenario,
        args.seconds,
        args.out / 'scenario',
        ROOT / 'config' / 'scenarios',
        log=report.console.print,
    )
    infer = args.infer_period_s
    if infer is None:  # as the demo: every frame on a GPU, at most every 0.1 s on the CPU
        infer = 0.1 if args.device == 'cpu' and args.backend != 'none' else 0.0
    config = graph_params(
        ROOT / 'config' / 'replay.yaml',
        args.out / 'params.yaml',
        conventional=False,
        backend=args.backend,
        device=args.device,
        infer_period_s=infer,
    )
    watch = Recorder('soak_probe', cameras=('front',))
    launched = launching.LaunchedGraph(
        'replay.launch.py',
        {
            'bag': str(bag),
            'config': str(config),
            'mode': 'realtime',
            'restamp': 'true',
            'loops': '0',
            'start_topic': START_TOPIC,
        },
        env={'PYTHONUNBUFFERED': '1'},
        log=args.out / 'launch.log',
    )
    samples: list[dict[str, Any]] = []
    descriptors: list[dict[str, Counter[str]]] = []  # per sample: node -> its descriptors
    died: list[str] = []
    try:
        end = time.monotonic() + 120.0
        while not watch.graph_ready():
            if launched.died() or time.monotonic() > end:
                why = '; '.join(launched.died()) or 'timeout'
                raise SystemExit(f'soak: the graph did not come up ({why}); see {args.out}')
            watch.spin(0.2)
        watch.send_start(START_TOPIC)
        t0_mono, t0_ns = time.monotonic(), time.time_ns()
        pids = processes.node_pids(launched.popen.pid)
        report.console.print(
            f'soak: {args.minutes:g} min of {args.scenario} ({args.seconds:g} s a loop), '
            f'nodes {sorted(pids)}; a sample every {args.sample_s:g} s'
        )
        k = 1
        while time.monotonic() - t0_mono < args.minutes * 60 + 1e-3:
            watch.spin(max(0.0, t0_mono + k * args.sample_s - time.monotonic()))
            now_ns = time.time_ns()
            lo = t0_ns + (k - 1) * int(args.sample_s * 1e9) - GRACE_NS
            stats = {n: processes.process_stats(pid) for n, pid in pids.items()}
            sample = {
                'minute': k * args.sample_s / 60.0,
                'rss_mb': {n: round(s[0], 1) for n, s in stats.items()},
                'fds': sum(sum(s[1].values()) for s in stats.values()),
                'shm_segments': len(processes.shm_segments(domain)),
                'ledger': dict(watch.ledger),
                **interval(watch, lo if k > 1 else 0, now_ns - GRACE_NS),
            }
            samples.append(sample)
            descriptors.append({n: s[1] for n, s in stats.items()})
            report.console.print(
                f'  {sample["minute"]:6.1f} min  RSS {sum(sample["rss_mb"].values()):7.1f} MB  '
                f'fds {sample["fds"]:4d}  shm {sample["shm_segments"]:2d}  '
                f'frames {sample["frames"]:5d} lost {sample["lost"]:3d}  '
                f'e2e P50/P99 {sample["e2e_p50_ms"]:.2f}/{sample["e2e_p99_ms"]:.2f} ms'
            )
            sys.stdout.flush()  # progress shows in a log file too
            died = launched.died()
            if died:
                report.console.print(f'[red]soak: {died} died[/]')
                break
            k += 1
    finally:
        launched.stop(timeout_s=30.0)
        watch.close()
    after = [i for i, s in enumerate(samples) if s['minute'] > args.warmup_min]
    after = after or [len(samples) - 1]
    first, last = samples[after[0]], samples[after[-1]]
    fds_changed = processes.fds_diff(descriptors[after[0]], descriptors[after[-1]])
    fds_grown = processes.fds_beyond_peak(
        [descriptors[i] for i in after[:-1]], descriptors[after[-1]]
    )
    rss0, rss1 = sum(first['rss_mb'].values()), sum(last['rss_mb'].values())
    ledger = samples[-1]['ledger'] if samples else {}
    policy = sum(
        ledger.get(f'frames_{k}', 0)
        for k in ('overrun', 'stale', 'queue_dropped', 'late', 'out_of_order')
    )
    summary = {
        'minutes': round(samples[-1]['minute'], 2) if samples else 0.0,
        'rss_growth_pct': 100.0 * (rss1 - rss0) / rss0 if rss0 else float('nan'),
        # Files held at the end beyond the most held of each in any earlier sample after the
        # warm-up: a leak (a bag held between two loops is not one, whichever sample saw it).
        'fds_growth': sum(sum(g.values()) for g in fds_grown.values()),
        'shm_growth': last['shm_segments'] - first['shm_segments'],
        'frames': sum(s['frames'] for s in samples),
        'lost': sum(s['lost'] for s in samples),
        # The fusion node's own account of them (cumulative, at the last sample): dropped by a
        # configured bound (ring overrun, aligner queue, too late), torn, failed.
        'dropped_by_policy': policy,
        'torn': ledger.get('frames_torn', 0),
        'failed': ledger.get('frames_failed', 0),
        'e2e_p99_first_ms': first['e2e_p99_ms'],
        'e2e_p99_last_ms': last['e2e_p99_ms'],
        'died': len(died),
    }
    settings = {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()}
    report.write_json(
        args.out / 'soak.json',
        {
            'args': settings,
            'samples': samples,
            'fds_changed': fds_changed,
            'fds_grown': fds_grown,
            **summary,
        },
    )
    for node, change in fds_changed.items():  # what a growth (or a shrink) in open files was
        report.console.print(f'soak: {node} after the warm-up: {change}')
    if samples:
        plots.soak_png(args.out / 'soak.png', samples, args.warmup_min)
    report.console.print(f'soak: wrote {args.out / "soak.json"} and {args.out / "soak.png"}')
    report.result_line(**summary)
    return 1 if died or not summary['frames'] else 0


if __name__ == '__main__':
    sys.exit(main())
