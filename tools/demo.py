#!/usr/bin/env python3
"""The main job on the embedded default (`make demo`): the full node graph, measured.

By default (``--source scenario``) the graph is ``launch/replay.launch.py``: ``replay_node``
plays a generated scenario into ``fusion_node`` and ``trajectory_node`` (the fusion and planner
sections of config/replay.yaml). With ``--source recordings`` it is ``launch/vehicle.launch.py
emulate:=true``: the vehicle's graph and ``config/vehicle.yaml``, each sensor node on the next
real thing fed with the recordings of ``--data`` (default ``../shared/data``): the dash-cam video
as the camera, the ARS408 candump on a CAN bus, an Xsens MTi on a pseudo-terminal. A second run
has the fusion node take the frames as sensor_msgs/Image over rclpy: the conventional graph,
measured the same way (:mod:`rt_fusion.ros.harness.live` runs both).

It prints a latency table (P50/P99/max per stage, and the P99 ratio of the conventional path to
ours), the quality against the scenario's truth, where every camera frame went, and writes
``results/demo/results.json``, ``latency.png``, ``scene.png`` and every node's log in
``results/demo/logs``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

from rt_fusion import report
from rt_fusion.core import linux
from rt_fusion.core.evaluation import ledger as ledgers
from rt_fusion.core.evaluation.runs import score_restamped
from rt_fusion.core.evaluation.truth import load_truth
from rt_fusion.core.latency import summarize_ns
from rt_fusion.report import plots, tables
from rt_fusion.report.results import demo_result_line
from rt_fusion.ros.harness import launching, live
from rt_fusion.ros.harness.scenarios import scenario_bag

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / 'config' / 'replay.yaml'


def parse(argv: list[str] | None) -> argparse.Namespace:
    """The command line."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        '--data',
        type=Path,
        default=ROOT.parent / 'shared' / 'data',
        help='folder of the recordings',
    )
    parser.add_argument(
        '--source',
        choices=('scenario', 'recordings'),
        default='scenario',
        help='scenario: a generated scenario replayed by replay_node (needs nothing outside the '
        'repository); recordings: the real recordings of --data through the sensor nodes',
    )
    parser.add_argument(
        '--scenario', default='cut_in', help='built-in scenario name or YAML path (scenario)'
    )
    parser.add_argument('--seconds', type=float, default=10.0, help='scenario length (scenario)')
    parser.add_argument(
        '--resolution',
        type=report.resolution,
        default=(1920, 1080),
        metavar='WxH',
        help='camera resolution of the scenario (16:9; default: a 1080p vehicle camera, where a '
        'frame is 6.2 MB and the copies the conventional graph makes show)',
    )
    parser.add_argument(
        '--cameras',
        type=int,
        default=1,
        choices=(1, 4),
        help='cameras of the scenario (4: front, left, right, rear, all at --resolution, each '
        'through its own ring and the network; the front one anchors the alignment)',
    )
    parser.add_argument(
        '--frames',
        type=int,
        default=200,
        help='camera frames (recordings; the video has 221 at 25 fps)',
    )
    parser.add_argument(
        '--no-compare',
        dest='compare',
        action='store_false',
        help='skip the second run with the conventional transport (the fusion '
        'node taking sensor_msgs/Image over rclpy)',
    )
    parser.add_argument(
        '--backend',
        default='onnxruntime',
        choices=('onnxruntime', 'torch', 'tensorrt', 'none'),
        help='inference backend of the fusion node',
    )
    parser.add_argument('--device', default='cpu', help='cpu, cuda or cuda:N (torch, tensorrt)')
    parser.add_argument(
        '--infer-period-s',
        type=float,
        default=None,
        help=f'run the detector at most this often (default: every frame on a GPU, '
        f'{live.CPU_INFER_PERIOD_S} s on the CPU)',
    )
    parser.add_argument('--settle', type=float, default=3.0, help='seconds after the last frame')
    parser.add_argument(
        '--warmup-frames',
        type=int,
        default=25,
        help='first frames of each run left out of the statistics (start-up)',
    )
    parser.add_argument('--out', type=Path, default=ROOT / 'results' / 'demo')
    parser.add_argument(
        '--viewer', type=int, nargs='?', const=8765, default=0, metavar='PORT',
        help='the Foxglove live view of the rt_fusion run (scenario) on PORT (default 8765)',
    )  # fmt: skip
    parser.add_argument(
        '--check', action='store_true', help='exit 1 when rt_fusion lost any frame, by any cause'
    )
    return parser.parse_args(argv)


def run(args: argparse.Namespace, env: dict[str, str]) -> dict[str, live.LiveRun]:
    """The runs: ours, and the conventional transport unless ``--no-compare``."""
    from rt_fusion.core.scenario.world import ScenarioError  # noqa: PLC0415

    phases = {'rt_fusion': False, 'conventional': True} if args.compare else {'rt_fusion': False}
    opts = live.LiveOptions(
        args.out, args.frames, args.seconds, args.settle, args.backend, args.device,
        args.infer_period_s, args.cameras, args.viewer, linux.free_port() if args.viewer else -1,
    )  # fmt: skip
    if args.viewer:
        report.console.print(
            f'live view (Foxglove or Lichtblick, "Open connection"): ws://127.0.0.1:{args.viewer};'
            f' operator page: http://127.0.0.1:{opts.page_port}/'
        )
    if args.source == 'recordings':
        live.check_recordings(args.data)
        return {n: live.run_recordings(opts, args.data, env, c) for n, c in phases.items()}
    try:
        bag, _ego_speed = scenario_bag(
            args.scenario, args.seconds, args.out / 'scenario', ROOT / 'config' / 'scenarios',
            log=report.console.print, resolution=args.resolution, cameras=args.cameras,
        )  # fmt: skip
    except (ScenarioError, ValueError) as err:
        raise SystemExit(f'demo: {err}') from err
    opts.frames = args.frames = int(args.seconds * 30)
    return {n: live.run_scenario(opts, bag, CONFIG, env, c) for n, c in phases.items()}


def main(argv: list[str] | None = None) -> int:
    """Runs the demo and prints its latency table; returns the exit status."""
    args = parse(argv)
    if not launching.available():
        raise SystemExit(f'demo: {launching.LaunchUnavailableError()}')
    env = live.graph_env()
    args.out.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    try:
        runs = run(args, env)
    except live.LiveRunError as err:
        raise SystemExit(f'demo: {err}') from err
    return summarise(args, runs, time.monotonic() - started)


def summarise(args: argparse.Namespace, runs: dict[str, live.LiveRun], elapsed: float) -> int:
    """Tables, results.json, the pictures and the RESULT line; the exit status."""
    samples = {
        name: ledgers.latency_samples(r.recorder.objects, r.recorder.plans, args.warmup_frames)
        for name, r in runs.items()
    }
    failed = [f'{name}/{b}' for name, r in runs.items() for b in r.failed]
    ours = runs['rt_fusion'].recorder
    source = (
        f'scenario {args.scenario}'
        if args.source == 'scenario'
        else 'recordings: dash-cam, ARS408, Xsens'
    )
    report.console.print(tables.stage_table(
        f'rt_fusion demo ({source}): {args.frames} frames, camera + radar + IMU → fusion '
        f'({args.backend} on {args.device}) → planner; latency [ms]', samples,
    ))  # fmt: skip
    statuses = [p['status'] for p in ours.plans]
    solve = [p['solve_ms'] for p in ours.plans if p['points']]
    plan = ours.planner_status
    report.console.print(
        f'rt_fusion run: {len(ours.objects)} frames fused, {len(ours.plans)} plans '
        f'({statuses.count(0)} ok, {statuses.count(1)} comfort stop, {statuses.count(2)} '
        f'emergency stop, {statuses.count(3)} no input), solve P50 '
        f'{np.median(solve) if solve else float("nan"):.2f} ms (plan() alone P50/P99 '
        f'{plan.get("plan_p50_us", "-")}/{plan.get("plan_p99_us", "-")} µs), objects per frame '
        f'{np.mean([len(m["objects"]) for m in ours.objects]) if ours.objects else 0:.1f}; the '
        f'first {args.warmup_frames} frames of each run (start-up) are left out of the table'
    )
    truth = load_truth(args.out / 'scenario') if args.source == 'scenario' else None
    scores = (
        {n: score_restamped(truth, r.recorder.objects) for n, r in runs.items()} if truth else {}
    )
    for name, q in scores.items():
        if q is None:
            report.console.print(f'{name}: quality not scored (no ground truth lined up)')
            continue
        report.console.print(
            f'{name} quality against the ground truth ({q["frames_scored"]} fused frames, '
            f'objects a sensor sees, 2 m gate): precision {q["precision"]:.3f}, recall '
            f'{q["recall"]:.3f}, MOTA {q["mota"]:.3f}, id switches {q["id_switches"]}, '
            f'position error {q["pos_err_m"]:.2f} m, class accuracy {q["class_accuracy"]:.3f}'
        )
    led = {name: r.frame_ledger() for name, r in runs.items()}
    report.console.print(tables.ledger_table(led))
    losses = {name: ledgers.losses(entry) for name, entry in led.items()}
    for name, lost in ((n, x) for n, x in losses.items() if x):  # loud: printed and in its log
        line = f'WARNING {ledgers.loss_line(name, lost)}'
        report.console.print(f'[yellow]{line}[/]')
        with (runs[name].logs / 'launch.log').open('a') as log:
            log.write(line + '\n')
    stages = {name: r.recorder.stages for name, r in runs.items()}
    for name, st in stages.items():
        if st:
            report.console.print(
                f'{name} fusion node, its own stage times [µs] (every frame, start-up included): '
                f'P50 {st.get("stages_p50_us", "-")}; P99 {st.get("stages_p99_us", "-")}; '
                f'inference P99 {st.get("inference_p99_us", "-")}'
            )
    # Frames lost where no configured bound explains it (the transport, a stuck or failed
    # frame) fail rt_fusion's run; the conventional graph's losses are shown, not failed.
    unexplained = led['rt_fusion']['unexplained']
    if unexplained:
        report.console.print(f'[red]rt_fusion lost frames with no drop policy: {unexplained}[/]')
    if failed:
        report.console.print(f'[red]failed processes: {failed} (logs in {args.out / "logs"})[/]')
    flat = {f'{run}: {stage}': v for run, st in samples.items() for stage, v in st.items() if v}
    report.write_json(
        args.out / 'results.json',
        {
            'stage': 'full graph',
            'frames': args.frames,
            'source': args.source,
            'resolution': list(args.resolution) if args.source == 'scenario' else None,
            'cameras': args.cameras if args.source == 'scenario' else 1,
            'warmup_frames': args.warmup_frames,
            'elapsed_s': elapsed,
            'fused': {n: len(r.recorder.objects) for n, r in runs.items()},
            'plans': len(ours.plans),
            'statuses': {str(s): statuses.count(s) for s in set(statuses)},
            'latency': {k: summarize_ns(v) for k, v in flat.items()},
            'failed': failed,
            'frame_ledger': led,
            'losses': losses,
            'quality': scores,
            'fusion_stages': stages,
            'samples_ns': samples,
        },
    )
    report.plot_latency(
        args.out / 'latency.png',
        flat,
        'rt_fusion demo: latency per stage (dash-cam + ARS408 + Xsens replay)',
    )
    plots.scene_png(args.out / 'scene.png', ours.objects, ours.plans)
    report.console.print(f'results: {args.out}/results.json, latency.png, scene.png, logs/')
    demo_result_line(args, samples, {n: r.recorder for n, r in runs.items()}, scores, losses)
    e2e = samples['rt_fusion'][ledgers.E2E]
    # Frames dropped by a configured bound (the aligner's queue behind a slow CPU detector, a ring
    # overrun) are accounted for, not failures; a loss nothing explains is. Half the frames is a
    # sanity floor (a graph that barely runs), not a quality bar.
    ok = not failed and len(ours.objects) >= 0.5 * args.frames and bool(e2e) and not unexplained
    if args.check and losses['rt_fusion']:  # --check: rt_fusion's path must lose no frame
        report.console.print('[red]--check: rt_fusion lost frames[/]')
        ok = False
    return 0 if ok else 1


if __name__ == '__main__':
    sys.exit(main())
