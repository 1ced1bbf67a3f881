#!/usr/bin/env python3
"""Benchmark: the fusion node as deployed — its aligner, decoding, tracking and the rclpy
publishing of every output — on real detector outputs, without the network's cost.

  python tools/bench_fusion_node.py                          # 1 camera, 20 objects
  python tools/bench_fusion_node.py --cameras 4 --objects 64

A generated scenario of ``--objects`` road users (:func:`crowd`: five lanes around the ego, at
its speed, so they stay in view), 1080p, ``--cameras`` cameras. The detector (ONNX Runtime, the
node's zoom) runs once on every camera frame of the bag and its outputs are kept
(``recorded_outputs.npz`` beside the bag, reused while the bag is the same); the graph
(``replay.launch.py``: replay -> fusion -> planner, real processes over real DDS, the frames
through their shared-memory rings) then runs with the fusion node's ``recorded`` backend, which
hands each view the output recorded for it (:mod:`rt_fusion.inference.recorded_backend`). The
same is run with the plain-rclpy path (the frames as ``sensor_msgs/Image`` over rclpy), as the
comparison of the same run.

Prints, per run: the node's time per frame (inputs complete -> objects published, from each
message's lineage) P50/P99/max, its own stage times (P50/P99/max, from its diagnostics), the
tracks it held, its frame ledger; then
``RESULT node_p50_us=… node_p99_us=… node_max_us=… cameras=… objects=… tracks=…
rclpy_node_p99_us=… ratio_p99=… lost=… node_cpu_p50_us=… node_cpu_p99_us=…`` (``ratio_p99``: the
plain-rclpy path's P99 over this one's; ``lost``: frames rt_fusion lost, by cause;
``node_cpu_*``: the worker thread's own CPU time per frame, the part of the node's time that is
its code rather than waiting for a core on a busy machine).
"""

from __future__ import annotations

import argparse
import hashlib
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from rt_fusion import report
from rt_fusion.core.evaluation import ledger as ledgers
from rt_fusion.core.latency import summarize_ns
from rt_fusion.ros.harness import launching, live
from rt_fusion.ros.harness.scenarios import scenario_bag

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / 'config' / 'replay.yaml'
CLASSES = ('car', 'car', 'car', 'car', 'truck', 'truck', 'bicycle')


def crowd(objects: int, seed: int) -> dict[str, Any]:
    """A straight five-lane road (four left of the ego's, one right), ``objects`` road users
    around the ego at its speed (±2 m/s), 9-14 m apart in each lane from 30 m behind (the ego's
    lane clear for 25 m ahead), and every sixth a pedestrian on a kerb: as many as the sensors
    can see at once (a surround rig sees those beside and behind too)."""
    rng = np.random.default_rng(seed)
    lanes = (-1, 0, 1, 2, 3)
    actors: list[dict[str, Any]] = []
    ahead = {lane: (25.0 if lane == 0 else -30.0) for lane in lanes}
    for i in range(objects):
        if i % 6 == 5:
            kerb = -6.0 if i % 12 == 5 else 3.5 * len(lanes) - 1.0
            s = float(rng.uniform(-20.0, 80.0))
            actors.append({'class': 'pedestrian', 'd': kerb, 's': round(s, 1), 'speed': 1.4})
            continue
        lane = lanes[i % len(lanes)]
        ahead[lane] += float(rng.uniform(9.0, 14.0))
        actors.append({
            'class': CLASSES[int(rng.integers(len(CLASSES)))], 'lane': lane,
            's': round(ahead[lane], 1), 'speed': round(15.0 + float(rng.uniform(-2, 2)), 2),
        })  # fmt: skip
    return {
        'name': f'crowd_{objects}_seed{seed}',
        'road': {'curvature': 0.0, 'lanes': 4, 'lane_width': 3.5},
        'ego': {'class': 'car', 'speed': 15.0, 'lane': 0},
        'actors': actors,
    }


def record_outputs(bag: Path, cameras: int, out: Path) -> Path:
    """The detector's outputs for every camera frame of ``bag`` (``out``; kept while the bag's
    checksum is the one recorded beside it)."""
    from rt_fusion.core.bag import image_to_array, iter_messages  # noqa: PLC0415
    from rt_fusion.core.scenario.sensors import RIG  # noqa: PLC0415
    from rt_fusion.inference.recorded_backend import Recorder  # noqa: PLC0415
    from rt_fusion.inference.runner import FrameRunner  # noqa: PLC0415
    from rt_fusion.ros import graph, params_file  # noqa: PLC0415

    digest = hashlib.sha256(b''.join(p.read_bytes() for p in sorted(bag.glob('*.mcap'))))
    stamp = out.with_suffix('.sha256')
    if out.exists() and stamp.exists() and stamp.read_text() == digest.hexdigest():
        report.console.print(f'bench_fusion_node: detector outputs {out} (kept)')
        return out
    fusion = params_file.load(CONFIG)['fusion']
    runner = FrameRunner(
        ROOT / str(fusion['model']), 'onnxruntime', 'cpu', threads=0,
        zoom=float(fusion.get('zoom', 1.0)),
    )  # fmt: skip
    recorder = Recorder(runner.model)
    topics = [graph.bag_topic(graph.COMPRESSED_CAMERA_TOPIC)]
    topics += [graph.rig_topic(topics[0], n) for n in RIG[1:cameras]]
    from rich.progress import Progress  # noqa: PLC0415

    messages = list(iter_messages(bag, topics))
    with Progress(console=report.console) as bar:
        task = bar.add_task('detector on every frame (recorded once)', total=len(messages))
        for m in messages:
            image, encoding = image_to_array(m.msg, m.msgtype)
            runner.run(image, encoding, lambda: True)
            bar.advance(task)
    runner.release()
    runs = recorder.save(out)
    stamp.write_text(digest.hexdigest())
    report.console.print(f'bench_fusion_node: {runs} network runs recorded in {out}')
    return out


def profile(domain: str, svg: Path, stop: threading.Event) -> threading.Thread:
    """py-spy on the fusion node from its start to its end (its threads apart; idle samples
    left out, so the waits between frames do not show), written as a flame graph to ``svg``."""

    def run() -> None:
        while not stop.wait(0.2):  # paced: the node is starting
            pid = launching.domain_process(domain, 'fusion_node')
            if pid is not None:
                break
        else:
            return
        subprocess.run(
            [str(Path(sys.executable).parent / 'py-spy'), 'record', '--pid', str(pid),
             '--rate', '250', '--threads', '--format',
             'raw' if svg.suffix == '.txt' else 'flamegraph', '--output', str(svg),
             '--nonblocking'],
            check=False, capture_output=True, timeout=1800,
        )  # fmt: skip

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def stage_rows(stages: dict[str, str]) -> dict[str, tuple[float, float, float]]:
    """The node's stage times from its diagnostics: name -> (P50, P99, max) [µs]."""

    def parse(text: str) -> dict[str, float]:
        pairs = (item.rsplit(' ', 1) for item in text.split(', ') if ' ' in item)
        return {k: float(v) for k, v in pairs}

    p50, p99, top = (parse(stages.get(f'stages_{k}_us', '')) for k in ('p50', 'p99', 'max'))
    return {n: (p50[n], p99.get(n, np.nan), top.get(n, np.nan)) for n in p50}


def main(argv: list[str] | None = None) -> int:
    """Records the detector's outputs, runs both graphs, prints the tables and RESULT."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument('--cameras', type=int, choices=(1, 4), default=1)
    parser.add_argument('--objects', type=int, default=20, help='road users in the scenario')
    parser.add_argument('--seconds', type=float, default=6.0)
    parser.add_argument('--resolution', type=report.resolution, default=(1920, 1080))
    parser.add_argument('--seed', type=int, default=3)
    parser.add_argument('--warmup-frames', type=int, default=25)
    parser.add_argument('--no-compare', dest='compare', action='store_false')
    parser.add_argument(
        '--message-objects', action='store_true',
        help='a third run: ~/out/objects built as message objects instead of CDR bytes',
    )  # fmt: skip
    parser.add_argument(
        '--profile',
        type=Path,
        help="a py-spy flame graph (SVG) of rt_fusion's fusion node (.txt: its collapsed stacks)",
    )
    parser.add_argument('--out', type=Path, default=ROOT / 'results' / 'bench' / 'fusion_node')
    args = parser.parse_args(argv)
    if not launching.available():
        raise SystemExit(f'bench_fusion_node: {launching.LaunchUnavailableError()}')
    env = live.graph_env()
    args.out.mkdir(parents=True, exist_ok=True)
    scenario = args.out / f'crowd_{args.objects}_seed{args.seed}.yaml'
    scenario.write_text(yaml.safe_dump(crowd(args.objects, args.seed), sort_keys=False))
    bag, _speed = scenario_bag(
        str(scenario), args.seconds, args.out / 'scenario', ROOT / 'config' / 'scenarios',
        log=report.console.print, resolution=args.resolution, cameras=args.cameras,
    )  # fmt: skip
    outputs = record_outputs(bag, args.cameras, args.out / 'recorded_outputs.npz')
    opts = live.LiveOptions(
        args.out, int(args.seconds * 30), args.seconds, 3.0, 'recorded', 'cpu', 0.0,
        args.cameras, fusion={'recorded_outputs': str(outputs)}, wait_kernels=True,
    )  # fmt: skip
    phases = {'rt_fusion': False, 'plain rclpy': True} if args.compare else {'rt_fusion': False}
    if args.message_objects:
        phases['rt_fusion, message objects'] = False
    results: dict[str, dict[str, Any]] = {}
    for name, conventional in phases.items():
        opts.fusion['serialized_objects'] = name != 'rt_fusion, message objects'
        stop = threading.Event()
        spy = None
        if args.profile and name == 'rt_fusion':
            spy = profile(env['ROS_DOMAIN_ID'], args.profile, stop)
        try:
            run = live.run_scenario(opts, bag, CONFIG, env, conventional)
        finally:
            stop.set()
        if spy is not None:
            spy.join(120.0)
            report.console.print(f'bench_fusion_node: flame graph {args.profile}')
        samples = ledgers.latency_samples(
            run.recorder.objects, run.recorder.plans, args.warmup_frames
        )[ledgers.FUSION]
        node = summarize_ns(samples)
        lost = ledgers.losses(run.frame_ledger())
        stages = run.recorder.stages
        results[name] = {'node': node, 'lost': lost, 'stages': stages, 'failed': run.failed}
        report.console.print(
            f'{name}: node (inputs complete -> objects published) P50 {node.p50_us:.0f} µs, '
            f'P99 {node.p99_us:.0f} µs, max {node.max_us:.0f} µs over {node.count} frames; '
            f'tracks {stages.get("tracks_all", "?")} ({stages.get("tracks_confirmed", "?")} '
            f'confirmed); inference errors {stages.get("inference_errors", "?")}, views '
            f'without a recorded output {stages.get("recorded_missed", "?")}; lost '
            f'{ledgers.loss_text(lost)}'
        )
        cpu = [float(v) for v in stages.get('cpu_us', 'nan nan nan').split()]
        report.console.print(
            f'  on its own CPU (worker thread time, released -> published): P50 {cpu[0]:.0f}, '
            f'P99 {cpu[1]:.0f}, max {cpu[2]:.0f} µs; the rest of the wall time waits for a core'
        )
        results[name]['cpu_us'] = cpu
        for stage, (p50, p99, top) in stage_rows(stages).items():
            report.console.print(
                f'  {stage:10s} P50 {p50:7.0f}  P99 {p99:7.0f}  max {top:7.0f} µs'
            )
    ours = results['rt_fusion']
    plain = results.get('plain rclpy', {}).get('node')
    settings = {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()}
    report.write_json(args.out / 'results.json', {'args': settings, **results})
    report.result_line(
        node_p50_us=ours['node'].p50_us,
        node_p99_us=ours['node'].p99_us,
        node_max_us=ours['node'].max_us,
        cameras=args.cameras,
        objects=args.objects,
        tracks=ours['stages'].get('tracks_all', 'nan'),
        rclpy_node_p99_us=plain.p99_us if plain else float('nan'),
        ratio_p99=plain.p99_us / ours['node'].p99_us if plain else float('nan'),
        lost=ledgers.loss_text(ours['lost']),
        node_cpu_p50_us=ours['cpu_us'][0],
        node_cpu_p99_us=ours['cpu_us'][1],
    )
    failed = [b for r in results.values() for b in r['failed']]
    return 1 if failed or not ours['node'].count else 0


if __name__ == '__main__':
    sys.exit(main())
