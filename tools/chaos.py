#!/usr/bin/env python3
"""Chaos: kill -9 each node of the vehicle graph in turn, mid-stream, and watch it come back.

  python tools/chaos.py                         # every node, on emulated sensors
  python tools/chaos.py --nodes radar,camera    # some
  python tools/chaos.py --respawn-delay-s 3     # each node down for 3 s at least
  python tools/chaos.py --rounds 3              # every node killed 3 times (spread, max)
  python tools/chaos.py --dds-profile none      # Fast DDS's defaults (3-s announcements)
  python tools/chaos.py --cold                  # launch starts a new process (no warm keeper)
  python tools/chaos.py --no-standby            # the keeper forks the node when it dies
  python tools/chaos.py --kill keeper           # kill the warm keeper: launch's cold respawn

``launch/vehicle.launch.py emulate:=true respawn:=true`` runs the whole graph (camera from the
dash-cam video into shared memory, ARS408 on a CAN replay bus, Xsens on a pty, microphone on an
ALSA file PCM, fusion, planner). For each node in turn, once every output flows: SIGKILL to
its process. Each node's process has a warm keeper (``rt_fusion/core/keeper.py``: the process
launch started, which imported everything and forked the node and a standby with ROS up), whose
standby takes over; with ``--no-standby`` the keeper forks the node again at its death, with
``--cold`` (``warm_restart:=false``) launch respawns a new process, and ``--kill keeper`` kills
the keeper and its children, which launch respawns the same way. Measured per node:

- **back**: kill -> the new process logs ``active`` (its own log stamp; the line says where its
  start went: imports or the fork, ROS, configure, activate), and kill -> its output topic
  carries a message again;
- **the rest keeps running**: messages on every other node's output during the outage (from
  the kill until the node is active again plus 1 s); a node that depends on the killed one
  (the planner on the fusion) may idle, which the table shows. The fusion does not depend on the
  camera: after ``sync.camera_timeout_s`` without frames it fuses each radar scan on its own
  (``camera_less`` in the result line);
- **no torn frame delivered**: the fusion node's ``torn`` count (frames the ring overwrote while
  read: detected by the slot's sequence and dropped, never fused) and its ``camera_overruns``;
- **no segment leaks**: shared-memory segments of the ROS domain before, during and after the
  run (the camera's ring keeps its name across a restart, so a killed camera leaves nothing),
  and Fast DDS's own segments that processes of the run left behind (``dds_left``: a killed
  node leaves its participant's; the warm keeper removes them, ``rt_fusion/core/dds_shm.py``).

Prints a table and ``RESULT nodes=… back_max_s=… active_max_s=… rest_stalled=… torn=…
camera_less=… shm_running=… shm_end=… leaked=… dds_left=…``; writes ``chaos.json`` under
``--out``. Exit status 1 when a node did not come back, another node stalled that does not depend
on it, or a segment of ours leaked.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from rt_fusion import report
from rt_fusion.report import plots, tables
from rt_fusion.ros import graph
from rt_fusion.ros.harness import live, outage, processes

ROOT = Path(__file__).resolve().parents[1]
OUTPUTS = {
    'camera': (graph.CAMERA_TOPIC + graph.SHM_SUFFIX, 'rt_fusion_msgs/msg/ShmFrame'),
    'radar': (graph.RADAR_TOPIC, 'rt_fusion_msgs/msg/RadarObjects'),
    'imu': (graph.IMU_TOPIC, 'sensor_msgs/msg/Imu'),
    'microphone': (graph.AUDIO_TOPIC, 'rt_fusion_msgs/msg/AudioChunk'),
    'fusion': (graph.OBJECTS_TOPIC, 'rt_fusion_msgs/msg/ObjectArray'),
    'planner': (graph.TRAJECTORY_TOPIC, 'rt_fusion_msgs/msg/Trajectory'),
}


def main(argv: list[str] | None = None) -> int:
    """Runs the chaos round; returns the exit status."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument('--nodes', default=','.join(OUTPUTS), help='nodes to kill, in order')
    parser.add_argument('--data', type=Path, default=ROOT.parent / 'shared' / 'data')
    parser.add_argument('--backend', default='onnxruntime')
    parser.add_argument('--device', default='cpu')
    parser.add_argument('--back-deadline-s', type=float, default=60.0)
    parser.add_argument(
        '--rounds', type=int, default=1, help='kill every node this many times, in turn'
    )
    parser.add_argument(
        '--respawn-delay-s',
        type=float,
        default=0.0,
        help='launch waits this long before restarting a killed node: a longer outage',
    )
    parser.add_argument(
        '--dds-profile',
        default='vehicle',
        help="the launch's dds_profile (vehicle, large_frames, a path; none: Fast DDS's "
        'defaults), given to the probe too',
    )
    parser.add_argument(
        '--cold',
        action='store_true',
        help='no warm keeper (warm_restart:=false): launch starts a new process for a dead node',
    )
    parser.add_argument(
        '--no-standby',
        action='store_true',
        help='warm restart without a standby (standby:=false): the node is forked at its death',
    )
    parser.add_argument(
        '--kill',
        choices=('node', 'keeper'),
        default='node',
        help="which process gets the SIGKILL: the node's, or its warm keeper (with the node)",
    )
    parser.add_argument('--out', type=Path, default=ROOT / 'results' / 'chaos')
    args = parser.parse_args(argv)
    victims = [n.strip() for n in args.nodes.split(',') if n.strip()]
    unknown = sorted(set(victims) - set(OUTPUTS))
    if unknown:
        parser.error(f'--nodes: unknown {unknown} (nodes: {sorted(OUTPUTS)})')
    domain = live.graph_env()['ROS_DOMAIN_ID']  # leased, and set for this process too

    for var in ('FASTRTPS_DEFAULT_PROFILES_FILE', 'FASTDDS_DEFAULT_PROFILES_FILE'):
        os.environ.pop(var, None)
    # The probe stands for the graph's subscribers: the same profile.
    os.environ.update(graph.dds_profile_env(args.dds_profile, ROOT / 'config'))
    args.out.mkdir(parents=True, exist_ok=True)

    from rt_fusion.ros.harness import launching  # noqa: PLC0415
    from rt_fusion.ros.harness.recorder import Recorder  # noqa: PLC0415

    overrides = args.out / 'dev.yaml'
    overrides.write_text(
        f'fusion:\n  ros__parameters:\n    backend: {args.backend}\n    device: {args.device}\n'
        '    infer_period_s: 0.1\n'
    )
    from rt_fusion.core import dds_shm  # noqa: PLC0415

    shm_before = processes.shm_segments(domain)
    dds_before = set(dds_shm.names())  # live or not: only what this run leaves counts
    probe = Recorder('chaos_probe', outputs=False, arrivals=OUTPUTS)
    launched = launching.LaunchedGraph(
        'vehicle.launch.py',
        {
            'emulate': 'true',
            'respawn': 'true',
            'respawn_delay': str(args.respawn_delay_s),
            'warm_restart': str(not args.cold).lower(),
            'standby': str(not args.no_standby).lower(),
            'overrides': str(overrides),
            'data': str(args.data),
            'dds_profile': args.dds_profile,
        },
        env={'PYTHONUNBUFFERED': '1'},
        log=args.out / 'launch.log',
    )
    rows: list[dict[str, Any]] = []
    shm_during: list[str] = []
    camera_less = 0  # most frames the fusion fused without the camera (it restarts at 0)
    try:
        end = time.monotonic() + 240.0
        while not all(probe.arrivals[n] for n in OUTPUTS):
            if time.monotonic() > end or launched.popen.poll() is not None:
                silent = [n for n in OUTPUTS if not probe.arrivals[n]]
                raise SystemExit(
                    f'chaos: no output from {silent} ({"; ".join(launched.died()) or "timeout"}); '
                    f'see {args.out}/launch.log'
                )
            probe.spin(0.2)
        probe.spin(3.0)  # steady flow
        shm_during = processes.shm_segments(domain)
        report.console.print(f'chaos: graph up; shm segments {shm_during}')
        for name in victims * args.rounds:
            row = outage.kill_and_time(
                launched, probe, name, OUTPUTS, keeper=args.kill == 'keeper',
                deadline_s=args.back_deadline_s,
            )  # fmt: skip
            if 'error' in row:
                rows.append(row)
                continue
            rows.append(row)
            report.console.print(outage.describe(row))
            probe.spin(2.0)  # the fusion's diagnostics of the outage, too
            camera_less = max(
                camera_less, int(probe.fusion_status.get('frames_without_camera') or 0)
            )
        shm_end = processes.shm_segments(domain)
    finally:
        status = launched.stop(timeout_s=30.0)
        fusion = dict(probe.fusion_status)
        probe.close()
    shm_after = processes.shm_segments(domain)
    leaked = sorted(set(shm_after) - set(shm_before))
    # Fast DDS's own segments that the run's processes left (killed nodes): the keepers remove
    # those of dead processes, launch's cold respawn does not.
    dds_left = sorted(set(dds_shm.dead(min_age_s=0.0)) - dds_before)
    how = (
        'launch respawn'
        if args.cold or args.kill == 'keeper'
        else 'warm restart' + (', forked at the death' if args.no_standby else ' from a standby')
    )
    report.console.print(tables.chaos_table(rows, how))
    report.console.print(
        f'fusion: torn {fusion.get("torn", "?")}, camera overruns '
        f'{fusion.get("camera_overruns", "?")}, frames fused without the camera '
        f'{camera_less}; shm segments before {len(shm_before)}, '
        f'running {len(shm_during)}, at the end {len(shm_end)}, after stop {len(shm_after)} '
        f'(leaked: {leaked or "none"}); Fast DDS segments of dead processes left: '
        f'{len(dds_left)}; launch exit status {status}'
    )
    back = [r['active_s'] for r in rows if r.get('active_s') is not None]
    out_back = [r['output_back_s'] for r in rows if r.get('output_back_s') is not None]
    failed = [r['node'] for r in rows if r.get('active_s') is None or r.get('stalled')]
    report.write_json(
        args.out / 'chaos.json',
        {
            'rows': rows,
            'fusion': fusion,
            'shm_before': shm_before,
            'shm_running': shm_during,
            'shm_end': shm_end,
            'shm_after': shm_after,
            'dds_left': dds_left,
        },
    )
    plots.chaos_png(args.out / 'chaos.png', rows, how)
    within = sum(1 for b in back if b <= 1.0)
    report.console.print(
        f'active again within 1 s: {within} of {len(rows)} kills; median '
        f'{float(np.median(back)) if back else float("nan"):.2f} s; plot {args.out / "chaos.png"}'
    )
    step_names = list(dict.fromkeys(k for r in rows for k in r.get('start_steps_s', {})))
    if step_names:
        medians = {
            k: float(np.median([r['start_steps_s'][k] for r in rows if k in r['start_steps_s']]))
            for k in step_names
        }
        report.console.print(
            'where a restarted process spent its start (median over the kills): '
            + ', '.join(f'{k} {v:.2f} s' for k, v in medians.items())
        )
    report.result_line(
        restart='cold' if how == 'launch respawn' else 'fork' if args.no_standby else 'standby',
        nodes=len(set(victims)),
        kills=len(rows),
        active_within_1s=within,
        active_p50_s=float(np.median(back)) if back else float('nan'),
        spawned_max_s=max(
            (r['spawned_s'] for r in rows if r.get('spawned_s') is not None), default=float('nan')
        ),
        active_max_s=max(back) if back else float('nan'),
        back_max_s=max(out_back) if out_back else float('nan'),
        rest_stalled=sum(len(r.get('stalled', ())) for r in rows),
        failed=len(failed),
        torn=fusion.get('torn', 'nan'),
        camera_less=camera_less,
        shm_running=len(shm_during),
        shm_end=len(shm_end),
        leaked=len(leaked),
        dds_left=len(dds_left),
    )
    return 1 if failed or leaked or len(shm_end) > len(shm_during) else 0


if __name__ == '__main__':
    sys.exit(main())
