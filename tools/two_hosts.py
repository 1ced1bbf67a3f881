#!/usr/bin/env python3
"""Two hosts on one machine: the sensors on one, fusion and planner on the other (needs root).

  sudo python tools/two_hosts.py                 # both layouts, 20 s of cut_in each
  sudo python tools/two_hosts.py --seconds 10

Two network namespaces joined by a veth pair stand for two vehicle computers on one Ethernet
link; each "host" also gets its own hostname and its own /dev/shm (a private tmpfs), so shared
memory between them is as unreachable as between two machines. The scenario replay (camera frames
into a shared-memory ring with ShmFrame descriptors, radar objects, IMU — what the sensor nodes
publish) runs on the sensor host; fusion, planner and the measuring probe on the compute host, or,
for the one-host layout, all on the sensor host. DDS discovers across the link by multicast
(``ROS_AUTOMATIC_DISCOVERY_RANGE=SUBNET``).

Nothing is configured for the split: the fusion node's camera subscription (``transport:
auto``) finds the descriptors' segment missing, says so in its log and falls back to the full
``sensor_msgs/Image``, which the replay's publisher then sends because someone subscribes
(every process with the shipped ``large_frames`` profile, ``--dds-profile``: 4 MiB socket
buffers; with Fast DDS's defaults, ``--dds-profile ''``, most frames are lost on the link). The
table gives, per layout: frames committed, fused and lost, camera -> trajectory latency
(P50/P99/max) and the camera path the fusion node took; ``RESULT one_host_e2e_p99_ms=…
two_hosts_e2e_p99_ms=… ratio_p99=… one_host_lost=… two_hosts_lost=… fallback_detected=…``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from rt_fusion.core import domains
from rt_fusion.ros import graph
from rt_fusion.ros.harness import netns

ROOT = Path(__file__).resolve().parents[1]

START_TOPIC = graph.start_topic('two_hosts')
FALLBACK = 'shared memory unusable'
QUIET_S = 5.0  # the probe stops once nothing new came for this long


def node_argv(module: str, *ros_args: str) -> list[str]:
    return [sys.executable, '-m', f'rt_fusion.nodes.{module}', '--ros-args', *ros_args]


def probe_main(seconds: float, out: Path) -> int:
    """The measuring probe (run on the compute host): waits for fusion and planner, starts the
    replay, records frames and outputs for ``seconds`` + settling, writes JSON."""
    from rt_fusion.ros.harness.recorder import Recorder  # noqa: PLC0415

    watch = Recorder('two_hosts_probe', cameras=('front',))
    end = time.monotonic() + 120.0
    while not watch.graph_ready():
        if time.monotonic() > end:
            print('PROBE no fusion/planner publishers', flush=True)
            return 1
        watch.spin(0.2)
    watch.send_start(START_TOPIC)
    print('PROBE started', flush=True)
    # The replay's whole stream, however long a loaded machine takes for it: at least the
    # scenario and some settling, then until nothing new came for QUIET_S (a deadline bounds it).
    # A fixed window counted 102 of 180 frames once on a busy 2-core machine.
    watch.spin(seconds + 4.0)
    deadline = time.monotonic() + 5.0 * seconds + 30.0
    seen = -1
    while time.monotonic() < deadline:
        now = len(watch.frame_stamps) + len(watch.fused) + len(watch.planned)
        if now == seen:
            break
        seen = now
        watch.spin(QUIET_S)
    out.write_text(
        json.dumps(
            {
                'committed': watch.frame_stamps,
                'fused': list(watch.fused.items()),
                'planned': list(watch.planned.items()),
            }
        )
    )
    watch.close()
    return 0


def run_layout(
    hosts: netns.Hosts, split: bool, bag: Path, config: Path, seconds: float, out: Path, env: dict
) -> dict[str, Any]:
    """One layout: the replay on host 0; fusion, planner and probe on host 1 when ``split``."""
    from rt_fusion.core.latency import summarize_ns  # noqa: PLC0415

    compute = 1 if split else 0
    logs = out / ('two_hosts' if split else 'one_host')
    logs.mkdir(parents=True, exist_ok=True)
    camera = graph.bag_topic(graph.COMPRESSED_CAMERA_TOPIC)
    imu, radar = graph.bag_topic(graph.IMU_TOPIC), graph.bag_topic(graph.RADAR_TOPIC)

    def remaps(node: Any) -> list[str]:
        return [x for a, b in node.remappings for x in ('-r', f'{a}:={b}')]

    procs: dict[str, subprocess.Popen[bytes]] = {}

    def start(name: str, host: int, cmd: list[str]) -> subprocess.Popen[bytes]:
        log = (logs / f'{name}.log').open('wb')
        procs[name] = subprocess.Popen(
            hosts.argv(host, cmd), stdout=log, stderr=subprocess.STDOUT, env=env
        )
        return procs[name]

    try:
        cfg = ['--params-file', str(config)]
        start(
            'fusion',
            compute,
            node_argv('fusion_node', '-r', '__node:=fusion', *cfg, *remaps(graph.FUSION)),
        )
        start(
            'planner',
            compute,
            node_argv('trajectory_node', '-r', '__node:=planner', *cfg, *remaps(graph.PLANNER)),
        )
        start(
            'replay',
            0,
            node_argv(
                'replay_node',
                *('-r', '__node:=replay', '-p', f'bag:={bag}'),
                *('-p', f'topics:=[{imu}, {radar}, {camera}]'),
                *('-p', f'shm:=[{camera}->{graph.CAMERA_TOPIC}]'),
                *('-p', 'restamp:=true', '-p', 'publish_clock:=false'),
                *('-p', 'wait_subscribers_s:=60.0', '-p', f'start_topic:={START_TOPIC}'),
            ),
        )
        result = logs / 'probe.json'
        probe = start(
            'probe',
            compute,
            [sys.executable, str(Path(__file__).resolve()), '--probe', str(seconds), str(result)],
        )
        probe.wait(timeout=6.0 * seconds + 300.0)
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.send_signal(2)
        for proc in procs.values():
            try:
                proc.wait(timeout=20.0)
            except subprocess.TimeoutExpired:
                proc.kill()
    if not result.exists():
        raise SystemExit(f'two_hosts: the probe wrote nothing; see {logs}')
    data = json.loads(result.read_text())
    fused, planned = dict(data['fused']), dict(data['planned'])
    frames = data['committed']
    e2e = summarize_ns([planned[s] - s for s in frames if s in planned])
    fusion_log = (logs / 'fusion.log').read_text(errors='replace')
    return {
        'layout': 'two hosts' if split else 'one host',
        'frames': len(frames),
        'fused': sum(1 for s in frames if s in fused),
        'lost': sum(1 for s in frames if s not in fused),
        'e2e_p50_ms': e2e.p50_us / 1e3,
        'e2e_p99_ms': e2e.p99_us / 1e3,
        'e2e_max_ms': e2e.max_us / 1e3,
        'camera_path': 'full Image over DDS (fallback)' if FALLBACK in fusion_log else 'shm',
    }


def main(argv: list[str] | None = None) -> int:
    """Both layouts and the table; returns the exit status."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument('--seconds', type=float, default=20.0, help='scenario length')
    parser.add_argument('--scenario', default='cut_in')
    parser.add_argument(
        '--dds-profile',
        default='large_frames',
        help='Fast DDS profile of every process: a shipped one (large_frames, vehicle), a file, '
        "or '' (Fast DDS's defaults, which lose frames)",
    )
    parser.add_argument(
        '--backend',
        default='onnxruntime',
        help="the fusion's detector backend (CPU); none: no detector, the link's test alone (a "
        'VM too slow for the CPU detector at 10 Hz loses frames to the compute, not the link)',
    )
    parser.add_argument('--out', type=Path, default=ROOT / 'results' / 'two_hosts')
    parser.add_argument('--probe', nargs=2, metavar=('SECONDS', 'OUT'), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.probe:
        return probe_main(float(args.probe[0]), Path(args.probe[1]))
    if os.geteuid() != 0:
        print('two_hosts: needs root (network namespaces, veth, mounts)', file=sys.stderr)
        return 2
    from rt_fusion import report  # noqa: PLC0415
    from rt_fusion.ros import graph  # noqa: PLC0415
    from rt_fusion.ros.harness.scenarios import graph_params, scenario_bag  # noqa: PLC0415

    args.out.mkdir(parents=True, exist_ok=True)
    bag, _speed = scenario_bag(
        args.scenario,
        args.seconds,
        args.out / 'scenario',
        ROOT / 'config' / 'scenarios',
        log=report.console.print,
    )
    config = graph_params(
        ROOT / 'config' / 'replay.yaml',
        args.out / 'params.yaml',
        conventional=False,
        backend=args.backend,
        device='cpu',
        infer_period_s=0.1,
    )
    env = {
        **os.environ,
        'ROS_DOMAIN_ID': domains.from_env_or_lease(),
        'ROS_AUTOMATIC_DISCOVERY_RANGE': 'SUBNET',
        'PYTHONUNBUFFERED': '1',
    }
    env.pop('FASTDDS_DEFAULT_PROFILES_FILE', None)
    env.pop('FASTRTPS_DEFAULT_PROFILES_FILE', None)
    env.update(graph.dds_profile_env(args.dds_profile, ROOT / 'config'))
    try:
        hosts = netns.Hosts()
    except netns.NetnsError as err:
        raise SystemExit(f'two_hosts: {err}') from err
    try:
        rows = [
            run_layout(hosts, split, bag, config, args.seconds, args.out, env)
            for split in (False, True)
        ]
    finally:
        hosts.close()
    from rich.table import Table  # noqa: PLC0415

    table = Table(
        title=f'{args.scenario}, {args.seconds:g} s: sensors and compute on one host / two',
        title_justify='left',
    )
    for col in ('layout', 'frames', 'fused', 'lost', 'e2e P50', 'e2e P99', 'e2e max', 'camera'):
        table.add_column(col)
    for r in rows:
        table.add_row(
            r['layout'],
            str(r['frames']),
            str(r['fused']),
            str(r['lost']),
            f'{r["e2e_p50_ms"]:.2f}',
            f'{r["e2e_p99_ms"]:.2f}',
            f'{r["e2e_max_ms"]:.2f}',
            r['camera_path'],
        )
    report.console.print(table)
    report.write_json(args.out / 'two_hosts.json', rows)
    one, two = rows
    report.console.print(f'DDS profile: {args.dds_profile or "Fast DDS defaults"}')
    report.result_line(
        one_host_e2e_p99_ms=one['e2e_p99_ms'],
        two_hosts_e2e_p99_ms=two['e2e_p99_ms'],
        ratio_p99=two['e2e_p99_ms'] / one['e2e_p99_ms'] if one['e2e_p99_ms'] else float('nan'),
        one_host_lost=one['lost'],
        two_hosts_lost=two['lost'],
        fallback_detected=int(two['camera_path'] != 'shm' and one['camera_path'] == 'shm'),
    )
    return 0 if one['frames'] and two['frames'] else 1


if __name__ == '__main__':
    sys.exit(main())
