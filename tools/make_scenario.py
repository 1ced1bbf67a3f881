#!/usr/bin/env python3
"""Generates a driving scenario as a rosbag2 (MCAP) with ground truth and a preview.

  python tools/make_scenario.py --scenario cut_in --seconds 10 --out results/scenarios/cut_in
  python tools/make_scenario.py --scenario my_case.yaml --seed 3 --raw-images --out DIR
  python tools/make_scenario.py --list

Built-in scenarios are the YAML files in config/scenarios/ (cut_in, stopped_car,
pedestrian_crossing, emergency_vehicle); a path to your own YAML works the same (the format is
documented in rt_fusion/core/scenario/world.py). Writes ``OUT/bag`` (the topics and messages of
the live nodes plus ``/scenario/truth/*``; see rt_fusion/core/scenario/generate.py),
``OUT/ground_truth.json``, ``OUT/camera_info.yaml`` and ``OUT/preview.png`` (bird's-eye view of
the road, the ego path and the actors, beside a camera frame). The same seed gives a
byte-identical bag. Last line: ``RESULT scenario=… messages=… bag_mb=… seconds=…``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from rt_fusion import report
from rt_fusion.core.scenario import library
from rt_fusion.core.scenario import sensors as sm
from rt_fusion.core.scenario.bagout import BAG_VERSION, READERS
from rt_fusion.core.scenario.generate import generate
from rt_fusion.core.scenario.render import Look, render
from rt_fusion.core.scenario.world import ScenarioError, World

ROOT = Path(__file__).resolve().parents[1]
LIBRARY = ROOT / 'config' / 'scenarios'


def load_scenario(name: str) -> dict[str, Any]:
    """A built-in scenario by name, or a YAML file by path (exits with the reason)."""
    try:
        return library.load(name, LIBRARY)
    except ScenarioError as err:
        raise SystemExit(f'make_scenario: {err}') from err


def preview(path: Path, world: World, cam: sm.CameraModel, seed: int) -> None:
    """Bird's-eye view with the road, ego path and actors, plus the camera frame at mid-time."""
    import matplotlib  # noqa: PLC0415

    matplotlib.use('Agg')
    import matplotlib.pyplot as plt  # noqa: PLC0415
    from matplotlib.patches import Polygon  # noqa: PLC0415

    fig, (ax, axc) = plt.subplots(1, 2, figsize=(16, 5), gridspec_kw={'width_ratios': [1.4, 1]})
    road = world.road
    s = np.linspace(world.ego.s.min() - 20, world.ego.s.max() + 80, 400)
    right, left = road.edges()
    for d, style in [(right, 'k-'), (left, 'k-')] + [
        (road.lane_d(i) + road.lane_width / 2, 'k--') for i in range(-1, road.lanes - 1)
    ]:
        x, y, _ = road.to_world(s, np.full_like(s, d))
        ax.plot(x, y, style, lw=0.8, alpha=0.6)
    ax.plot(world.ego.x, world.ego.y, 'C0-', lw=2, label='ego path')
    times = np.linspace(0, world.seconds, 6)
    for a in world.actors:
        ax.plot(a.x, a.y, '-', lw=1, color='C3' if a.siren else 'C1', alpha=0.7)
    for k, t in enumerate(times):
        alpha = 0.25 + 0.75 * k / (len(times) - 1)
        for tr in [world.ego, *world.actors]:
            st = tr.at(float(t))
            length, width, _h = tr.size
            c, sn = np.cos(st['yaw']), np.sin(st['yaw'])
            pts = [
                (
                    st['x'] + c * a * length / 2 - sn * b * width / 2,
                    st['y'] + sn * a * length / 2 + c * b * width / 2,
                )
                for a, b in ((1, 1), (-1, 1), (-1, -1), (1, -1))
            ]
            color = 'C0' if tr is world.ego else np.array(sm.CLASS_BGR[tr.cls][::-1]) / 255
            ax.add_patch(Polygon(pts, closed=True, fc=color, ec='k', lw=0.5, alpha=alpha))
            if k == len(times) - 1 and tr is not world.ego:
                ax.annotate(f'{tr.id} {tr.cls}', (st['x'], st['y'] + 2), fontsize=7)
    right_w, left_w = road.edges()
    ys = np.concatenate([world.ego.y, *[a.y for a in world.actors]])
    ax.set_ylim(min(ys.min(), right_w) - 6, max(ys.max(), left_w) + 6)
    ax.set_xlabel('x [m]')
    ax.set_ylabel('y [m] (stretched)')
    ax.set_title(f'{world.name}: {world.seconds:g} s, boxes every {times[1]:.1f} s (faint: early)')
    ax.legend(loc='upper left', fontsize=8)
    ax.grid(True, alpha=0.3)
    rng = np.random.default_rng([seed, 99])
    frame = render(cam, world, world.seconds / 2, rng, Look(scenery_seed=seed))
    axc.imshow(frame[:, :, ::-1])
    axc.set_title(f'camera at t = {world.seconds / 2:g} s')
    axc.axis('off')
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    """Generates the scenario; returns the exit status."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument('--scenario', default='cut_in', help='built-in name or YAML path')
    parser.add_argument('--seconds', type=float, default=10.0)
    parser.add_argument('--seed', type=int, default=0)
    parser.add_argument('--out', type=Path, help='output folder (replaced if it holds a bag)')
    parser.add_argument(
        '--raw-images', action='store_true', help='sensor_msgs/Image instead of JPEG'
    )
    parser.add_argument('--storage', choices=('mcap', 'sqlite3'), default='mcap')
    parser.add_argument(
        '--bag-version',
        type=int,
        choices=sorted(READERS),
        default=BAG_VERSION,
        help=f'rosbag2 metadata version (default {BAG_VERSION}); 8: readable by Humble',
    )
    parser.add_argument(
        '--camera',
        type=report.resolution,
        default=(1920, 1080),
        help='camera WxH, 16:9 (default 1920x1080, the vehicle camera; the lens keeps its field)',
    )
    parser.add_argument(
        '--cameras',
        type=int,
        default=1,
        choices=(1, 4),
        help='1: the front camera; 4: the surround rig (front, left, right, rear on '
        '/camera_<name>/out/...)',
    )
    parser.add_argument(
        '--workers',
        type=int,
        default=min(os.cpu_count() or 1, 16),
        help='processes rendering the camera frames (the same bag with any number)',
    )
    parser.add_argument(
        '--clips',
        type=Path,
        default=ROOT.parent / 'shared' / 'data' / 'audio',
        help='folder of the WAV files that clip audio events name (default ../shared/data/audio)',
    )
    parser.add_argument('--list', action='store_true', help='list the built-in scenarios')
    args = parser.parse_args(argv)
    if args.list:
        for p in sorted(LIBRARY.glob('*.yaml')):
            first = p.read_text().splitlines()[0].lstrip('# ')
            print(f'{p.stem:22s} {first}')
        return 0
    if args.out is None:
        parser.error('--out is required')
    scenario = load_scenario(args.scenario)
    try:
        camera = sm.CameraModel.sized(*args.camera)
    except ValueError as err:
        parser.error(f'--camera: {err}')
    if (args.out / 'bag').exists():
        shutil.rmtree(args.out / 'bag')
    from rich.progress import Progress  # noqa: PLC0415

    start = time.monotonic()
    try:
        with Progress(transient=False, console=report.console) as progress:
            task = progress.add_task(f'{args.scenario}: simulating', total=args.seconds)
            summary = generate(
                scenario,
                args.seconds,
                args.seed,
                args.out,
                raw_images=args.raw_images,
                storage=args.storage,
                bag_version=args.bag_version,
                clips_dir=args.clips,
                camera=camera,
                cameras=args.cameras,
                workers=max(1, args.workers),
                progress=lambda t: progress.update(task, completed=min(t, args.seconds)),
            )
            progress.update(task, completed=args.seconds)
    except ScenarioError as err:
        print(f'make_scenario: {err}', file=sys.stderr)
        return 2
    preview(args.out / 'preview.png', summary['world'], summary['camera'], args.seed)
    size = sum(p.stat().st_size for p in (args.out / 'bag').iterdir())
    for topic, n in sorted(summary['counts'].items()):
        report.console.print(f'  {topic:32s} {n:6d}')
    report.console.print(
        f'wrote {args.out}/bag ({size / 1e6:.1f} MB), ground_truth.json, camera_info.yaml, '
        f'preview.png in {time.monotonic() - start:.1f} s'
    )
    report.console.print(f'bag metadata version {args.bag_version}: {READERS[args.bag_version]}')
    report.result_line(
        scenario=summary['world'].name,
        messages=sum(summary['counts'].values()),
        bag_mb=size / 1e6,
        seconds=args.seconds,
    )
    return 0


if __name__ == '__main__':
    sys.exit(main())
