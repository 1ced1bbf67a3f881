#!/usr/bin/env python3
"""Regression replay scored against ground truth.

    python tools/evaluate.py --scenario cut_in --seed 5 --seconds 6
    python tools/evaluate.py --scenario-file my_scenario.yaml --seed 1
    python tools/evaluate.py --bag PATH/TO/SCENARIO_OR_BAG          # a generated or recorded bag
    python tools/evaluate.py --suite --seeds 3 --ablate radar_only,camera_only
    python tools/evaluate.py --suite --baseline config/eval_baseline.yaml   # exit 1 on regression
    python tools/evaluate.py --closed-loop --scenario stopped_car --seconds 12  # planner drives

A built-in scenario (``config/scenarios/``) or a scenario YAML is generated first (seeded,
deterministic), then replayed **lock-step** through ``launch/replay.launch.py`` with the shipped
``config/replay.yaml`` (:mod:`rt_fusion.ros.harness.lockstep` says which overrides, and why two
runs give the same ``metrics.json`` on any machine). The outputs are recorded
(:mod:`rt_fusion.ros.harness.recorder`) and scored (:mod:`rt_fusion.core.evaluation`) against the
generator's ``ground_truth.json``: perception for objects visible to the run's sensors (any
sensor for the fused run, its one sensor for an ablation: ``visible_any`` keeps every sensor's
view) and for all objects (1–80 m, |y| ≤ 20 m, 2 m gate), planning against the true actors'
motion. ``--ablate`` adds runs with an input off: ``radar_only`` (``fusion.backend: none``),
``camera_only`` (``fusion.radar_input: false``), ``radar_tracks``, and with ``--cameras 4``
``no_left``, ``no_right``, ``no_rear`` (a rig camera left out). Latency: ``timing.json``.

Per run: ``OUT/<scenario>-s<seed>/<variant>/metrics.json``, ``timing.json``, ``run.png``,
``graph.log``; a table, and a last line ``RESULT precision=… recall=… … frames_fused=…`` (the
fused runs' aggregate, with ``--no-fused`` the first ablation's; ``collisions_seen``: plans
overlapping an actor a sensor had seen).

``--closed-loop`` runs ``launch/sim.launch.py`` instead: the planner's trajectories drive the
ego (:mod:`rt_fusion.core.scenario.closed_loop`), and the run is also scored by what the ego did
(``driving``; ``ego_collisions=… ego_min_gap_m=… ego_final_speed_mps=…`` on the RESULT line).
``--sim-script`` lets the script drive instead: the simulator checked against the replay.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import time
from pathlib import Path
from typing import Any

import yaml
from rich.console import Console

from rt_fusion import report
from rt_fusion.core import evaluation as ev
from rt_fusion.core.evaluation import runs
from rt_fusion.core.evaluation.truth import load_truth
from rt_fusion.core.scenario.sensors import CameraModel
from rt_fusion.report import field_metrics, plots, tables
from rt_fusion.ros import graph
from rt_fusion.ros.harness import launching, live, lockstep
from rt_fusion.ros.harness.recorder import Recorder

ROOT = Path(__file__).resolve().parents[1]
SCENARIOS = ROOT / 'config' / 'scenarios'
CONFIG = ROOT / 'config' / 'replay.yaml'
# What to run: (run name, bag folder or None for the closed loop, scenario YAML, seed).
Job = tuple[str, Path | None, Path | None, int]


def parse(argv: list[str] | None) -> argparse.Namespace:
    """The command line, checked."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    src = parser.add_mutually_exclusive_group()
    src.add_argument('--scenario', default=None, help='built-in scenario (config/scenarios)')
    src.add_argument('--scenario-file', type=Path, help='a scenario YAML')
    src.add_argument('--bag', type=Path, help='a generated scenario folder or a recorded bag')
    src.add_argument('--suite', action='store_true', help='every built-in scenario × --seeds')
    parser.add_argument('--seed', type=int, default=5)
    parser.add_argument('--seeds', type=int, default=3, help='--suite: seeds per scenario')
    parser.add_argument('--first-seed', type=int, default=100, help='--suite: first seed')
    parser.add_argument('--scenarios', default='', help='--suite: comma-separated subset')
    parser.add_argument('--seconds', type=float, default=6.0)
    parser.add_argument(
        '--camera',
        type=report.resolution,
        default=(1920, 1080),
        help='scenario camera WxH, 16:9 (default 1920x1080, the vehicle camera)',
    )
    parser.add_argument(
        '--camera-mount',
        type=lockstep.parse_mount,
        help="the scenarios' front camera at X,Y,Z,YAW[,PITCH] [m, m, m, deg, deg] on base_link "
        "(default: the rig's, 1.8,0,1.4,0,0); the fusion's mounting is --calibration's",
    )
    parser.add_argument(
        '--calibration', type=Path, help='calibration file of the graph (the scenario rig)'
    )
    parser.add_argument(
        '--cameras', type=int, default=1, choices=(1, 4), help='4: the surround rig, each scored'
    )
    parser.add_argument('--ablate', default='', help='also: radar_only,camera_only,…; see above')
    parser.add_argument('--no-fused', action='store_true', help='only the --ablate runs')
    parser.add_argument('--config', type=Path, default=CONFIG, help='parameter file of the graph')
    parser.add_argument('--gate', type=float, default=2.0, help='match gate [m]')
    parser.add_argument(
        '--zoom',
        type=float,
        help="the fusion node's zoom for every run (default: the config's, 3 in "
        'config/replay.yaml; 1: off)',
    )
    parser.add_argument('--baseline', type=Path, help='fail (exit 1) on regressions against it')
    parser.add_argument('--write-baseline', type=Path, help='store this run as the baseline')
    parser.add_argument('--out', type=Path, default=ROOT / 'results' / 'eval')
    parser.add_argument('--deadline', type=float, default=900.0, help='per run [s]')
    parser.add_argument(
        '--closed-loop', action='store_true', help='the planner drives the ego (sim.launch.py)'
    )
    parser.add_argument(
        '--sim-script', action='store_true', help='--closed-loop, but the script drives the ego'
    )
    args = parser.parse_args(argv)
    try:
        CameraModel.sized(*args.camera)
    except ValueError as err:
        parser.error(f'--camera: {err}')
    if args.closed_loop and args.bag is not None:
        parser.error('--closed-loop simulates a scenario: give --scenario or --scenario-file')
    if args.cameras > 1 and (args.closed_loop or args.bag is not None):
        parser.error('--cameras 4: a generated scenario, replayed (not --closed-loop, --bag)')
    ablations = [v for v in args.ablate.split(',') if v]
    args.variants = ablations if args.no_fused else ['fused', *ablations]
    if not args.variants:
        parser.error('--no-fused needs --ablate: nothing would run')
    for v in args.variants:
        try:
            lockstep.overrides(v)  # unknown names fail here, before anything runs
        except ValueError as err:
            parser.error(f'--ablate: {err}')
    args.jobs = jobs(args, parser)
    return args


def jobs(args: argparse.Namespace, parser: argparse.ArgumentParser) -> list[Job]:
    """The runs to make; scenarios are generated (or reused) on the way."""
    out: list[Job] = []
    suffix = ('-sim' if args.sim_script else '-closed') if args.closed_loop else ''

    def add(name: str, path: Path, seed: int) -> None:
        job = runs.run_name(name, seed, args.seconds) + suffix
        if args.closed_loop:  # the simulator renders as it goes: nothing to generate
            out.append((job, None, path, seed))
            return
        print(f'evaluate: generating {name} seed {seed} ({args.seconds:g} s)', flush=True)
        scenario = yaml.safe_load(path.read_text())
        bag = lockstep.make_bag(
            scenario, name, seed, args.seconds, args.camera, args.out, args.camera_mount,
            args.cameras,
        )  # fmt: skip
        out.append((job, bag, path, seed))

    if args.bag is not None:
        out.append((args.bag.name, args.bag, None, 0))  # a scenario folder or a bag
    elif args.scenario_file is not None:
        scenario = yaml.safe_load(args.scenario_file.read_text())
        add(scenario.get('name', args.scenario_file.stem), args.scenario_file.resolve(), args.seed)
    else:
        names = (
            [n for n in args.scenarios.split(',') if n]
            or sorted(p.stem for p in SCENARIOS.glob('*.yaml'))
            if args.suite
            else [args.scenario or 'cut_in']
        )
        seeds = range(args.first_seed, args.first_seed + args.seeds) if args.suite else [args.seed]
        for name in names:
            path = SCENARIOS / f'{name}.yaml'
            if not path.is_file():
                parser.error(f'no built-in scenario {name!r} in {SCENARIOS}')
            for seed in seeds:
                add(name, path, seed)
    return out


def run_job(
    args: argparse.Namespace, job: Job, variant: str, recorder: Recorder
) -> dict[str, Any]:
    """One run × variant: run, score, write, plot; returns its headline numbers."""
    name, folder, scenario_path, seed = job
    out = args.out / name / variant
    started = time.monotonic()
    if folder is None:
        assert scenario_path is not None
        print(f'evaluate: {name} {variant}: closed loop ...', flush=True)
        rec = lockstep.run_closed_loop(
            scenario_path, seed, args.seconds, variant, out, recorder, args.config,
            args.deadline, drive=not args.sim_script,
        )  # fmt: skip
        truth = load_truth(out / 'scenario')  # the ego as this run drove it
        frames_in = rec['frames']
    else:
        bag = folder / 'bag' if (folder / 'bag').is_dir() else folder
        truth = load_truth(folder)
        counts = lockstep.bag_counts(bag)
        print(f'evaluate: {name} {variant}: lock-step replay ...', flush=True)
        rec = lockstep.run_replay(
            bag, variant, out, recorder, args.config, args.deadline,
            lockstep.camera_topic(counts), args.calibration,
        )  # fmt: skip
        frames_in = counts.get(graph.bag_topic(graph.COMPRESSED_CAMERA_TOPIC), 0) + counts.get(
            graph.bag_topic(graph.CAMERA_TOPIC), 0
        )
    sensors = runs.SENSORS.get(variant, runs.SENSORS['fused'])
    params = ev.EvalParams(gate_m=args.gate)
    metrics, timing, frames = runs.score(rec, truth, frames_in, params, sensors)
    field_metrics.add_to(metrics, frames, truth, variant, params)  # HOTA, CLEAR MOT, … (TrackEval)
    runs.write_run(out, rec, metrics, timing)
    if frames:
        plots.plot(frames, metrics, f'{name} {variant}', out / 'run.png')
    if folder is None and truth is not None and scenario_path is not None:
        plots.plot_drive(truth, scenario_path, metrics, f'{name} {variant}', out / 'drive.png')
    d = metrics.get('driving', {})
    closed = (
        f', {d["plans_applied"]} plans drove the ego ({d["plan_timeouts"]} timeouts), '
        f'{d["collision_samples"]} collision samples, min gap {d["min_gap_m"]} m, final speed '
        f'{d["final_speed_mps"]} m/s'
        if d
        else ''
    )
    print(
        f'evaluate: {name} {variant}: {metrics["frames_fused"]}/{metrics["frames"]} frames fused, '
        f'{metrics["ack_timeouts"]} ack timeouts, {time.monotonic() - started:.0f} s{closed}',
        flush=True,
    )
    return runs.flat(metrics)


def main(argv: list[str] | None = None) -> int:
    """Runs the evaluation; exit status 1 on a regression against ``--baseline``."""
    args = parse(argv)
    if not launching.available():
        print(f'evaluate: {launching.LaunchUnavailableError()}', file=sys.stderr)
        return 2
    args.config = lockstep.config_for(args.config, args.out, args.zoom, args.cameras)
    live.graph_env()  # this process's ROS domain (leased) and discovery, for the graphs
    # SIGTERM (a timeout, CI) ends the run through the finally blocks: the graph is stopped.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    recorder = Recorder('evaluate', odometry=True, depth=5000).start()
    rows: list[tuple[str, dict[str, Any]]] = []
    by_key: dict[str, dict[str, Any]] = {}
    try:
        for job in args.jobs:
            for variant in args.variants:
                row = run_job(args, job, variant, recorder)
                rows.append((f'{job[0]} {variant}', row))
                by_key[f'{job[0]}/{variant}'] = row
    except lockstep.GraphRunError as err:
        print(f'evaluate: {err}', file=sys.stderr)
        return 2
    finally:
        recorder.close()
    return report_runs(args, rows, by_key)


def report_runs(
    args: argparse.Namespace,
    rows: list[tuple[str, dict[str, Any]]],
    by_key: dict[str, dict[str, Any]],
) -> int:
    """The table, summary.json, the baseline (written or compared) and the RESULT line."""
    for variant in args.variants:
        group = [r for n, r in rows if n.endswith(f' {variant}')]
        if len(group) > 1:
            rows.append((f'mean {variant}', runs.aggregate(group)))
    Console(width=200).print(tables.evaluation_table(rows))
    aggregate = {
        v: runs.aggregate([r for k, r in by_key.items() if k.endswith('/' + v)])
        for v in args.variants
    }
    args.out.mkdir(parents=True, exist_ok=True)
    summary = {'runs': by_key, 'aggregate': aggregate}
    (args.out / 'summary.json').write_text(json.dumps(summary, indent=1, sort_keys=True) + '\n')
    status = 0
    if args.write_baseline is not None:
        path = args.write_baseline
        old = yaml.safe_load(path.read_text()) if path.is_file() else None
        path.write_text(
            '# Evaluation baseline: tools/evaluate.py --write-baseline (see docs/evaluation.md).\n'
            + yaml.safe_dump(runs.updated_baseline(old, by_key, args.closed_loop), sort_keys=True)
        )
        print(f'evaluate: baseline written to {path}')
    if args.baseline is not None:
        regressions = runs.compare(by_key, yaml.safe_load(args.baseline.read_text()))
        for line in regressions:
            print(f'REGRESSION {line}')
        status = 1 if regressions else 0
    fields = runs.result_fields(aggregate[args.variants[0]], args.closed_loop)
    print('RESULT ' + ' '.join(f'{k}={v}' for k, v in fields.items()), flush=True)
    return status


if __name__ == '__main__':
    sys.exit(main())
