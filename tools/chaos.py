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
import re
import signal
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from rt_fusion import report
from rt_fusion.ros import graph

ROOT = Path(__file__).resolve().parents[1]
OUTPUTS = {
    'camera': (graph.CAMERA_TOPIC + graph.SHM_SUFFIX, 'rt_fusion_msgs/msg/ShmFrame'),
    'radar': (graph.RADAR_TOPIC, 'rt_fusion_msgs/msg/RadarObjects'),
    'imu': (graph.IMU_TOPIC, 'sensor_msgs/msg/Imu'),
    'microphone': (graph.AUDIO_TOPIC, 'rt_fusion_msgs/msg/AudioChunk'),
    'fusion': (graph.OBJECTS_TOPIC, 'rt_fusion_msgs/msg/ObjectArray'),
    'planner': (graph.TRAJECTORY_TOPIC, 'rt_fusion_msgs/msg/Trajectory'),
}
# Who may idle while a node is down: the planner publishes only on the fusion's objects.
DEPENDS = {'fusion': {'planner'}}
# The node's active line; a process started by node_utils.run says where its start went.
ACTIVE = re.compile(r'\[INFO\] \[(\d+\.\d+)\] \[(\w+)\]: active(?: \(([^)]*)\))?')
STEP = re.compile(r'([a-zA-Z ]+?) (\d+\.\d+)')


def node_pid(pgid: int, name: str, keeper: bool = False) -> int | None:
    """The pid of node ``name``'s process in a launch's group; with ``keeper``, the process
    launch started (the node's warm keeper when there is one)."""
    from rt_fusion.ros.harness.launching import node_processes  # noqa: PLC0415

    pids = node_processes(pgid).get(name)
    return None if pids is None else pids[1 if keeper else 0]


def started_boot_s(pid: int | None) -> float | None:
    """When process ``pid`` started, in CLOCK_BOOTTIME seconds (the kernel's clock ticks: 10 ms
    resolution), or None when it is gone."""
    from rt_fusion.core import linux  # noqa: PLC0415

    ticks = None if pid is None else linux.process_start_ticks(pid)
    return None if ticks is None else ticks / os.sysconf('SC_CLK_TCK')


def start_steps(text: str | None) -> dict[str, float]:
    """The steps of an active line's start-up report (``node_utils.StartupTimes``)."""
    if not text or ': ' not in text:
        return {}
    return {m.group(1).strip(): float(m.group(2)) for m in STEP.finditer(text.split(': ', 1)[1])}


def shm_segments(domain: str) -> list[str]:
    """This ROS domain's rt_fusion shared-memory segments."""
    prefix = f'rt_fusion_d{domain}_'
    return sorted(p.name for p in Path('/dev/shm').iterdir() if p.name.startswith(prefix))


def plot(path: Path, rows: list[dict[str, Any]], how: str) -> None:
    """Per node: each kill's time to the new process, to ``active``, to output again."""
    import matplotlib  # noqa: PLC0415

    matplotlib.use('Agg')
    import matplotlib.pyplot as plt  # noqa: PLC0415

    names = list(dict.fromkeys(r['node'] for r in rows if 'active_s' in r))
    fig, ax = plt.subplots(figsize=(9, 4.5))
    marks = (
        ('spawned_s', 'process started', 'x'),
        ('active_s', 'active', 'o'),
        ('output_back_s', 'output again', '^'),
    )
    for key, label, marker in marks:
        xs, ys = [], []
        for i, name in enumerate(names):
            vals = [r[key] for r in rows if r['node'] == name and r.get(key) is not None]
            xs += [i + 0.08 * (k - (len(vals) - 1) / 2) for k in range(len(vals))]  # kills
            ys += vals
        ax.scatter(xs, ys, marker=marker, label=label)
    ax.axhline(1.0, color='0.5', ls='--', lw=1)
    ax.set_xticks(range(len(names)), names)
    ax.set_ylabel('seconds after kill -9')
    ax.set_title(f'chaos: kill -9 and {how} (dashed: 1 s)')
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


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
    domain = os.environ.get('ROS_DOMAIN_ID', '44')
    os.environ.update(ROS_DOMAIN_ID=domain, ROS_AUTOMATIC_DISCOVERY_RANGE='LOCALHOST')

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

    shm_before = shm_segments(domain)
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
        shm_during = shm_segments(domain)
        report.console.print(f'chaos: graph up; shm segments {shm_during}')
        for name in victims * args.rounds:
            pid = node_pid(launched.popen.pid, name, keeper=args.kill == 'keeper')
            if pid is None:
                rows.append({'node': name, 'error': 'no process found'})
                continue
            seen = len(launched.history)
            kill_wall, kill_mono = time.time(), time.monotonic()
            kill_boot = time.clock_gettime(time.CLOCK_BOOTTIME)
            os.kill(pid, signal.SIGKILL)
            active_s: float | None = None
            steps: dict[str, float] = {}
            deadline = kill_mono + args.back_deadline_s
            while active_s is None and time.monotonic() < deadline:
                probe.spin(0.05)
                for line in launched.history[seen:]:
                    m = ACTIVE.search(line)
                    if m and m.group(2) == name and float(m.group(1)) > kill_wall:
                        active_s = float(m.group(1)) - kill_wall
                        steps = start_steps(m.group(3))
                        break
            while probe.first_after(name, kill_mono + (active_s or 0.0)) is None:
                if time.monotonic() > deadline:
                    break
                probe.spin(0.05)
            probe.spin(1.0)
            first = probe.first_after(name, kill_mono + (active_s or 0.0))
            hi = kill_mono + (active_s if active_s is not None else args.back_deadline_s) + 1.0
            others = {
                other: probe.count(other, kill_mono, hi) for other in OUTPUTS if other != name
            }
            stalled = [o for o, n in others.items() if n == 0 and o not in DEPENDS.get(name, ())]
            new_pid = node_pid(launched.popen.pid, name)
            started = started_boot_s(new_pid)
            row = {
                'node': name,
                'pid': pid,
                'new_pid': new_pid,
                # kill -> the new node's process exists (0: a standby, forked before the kill)
                'spawned_s': None if started is None else max(0.0, started - kill_boot),
                'active_s': active_s,
                'start_steps_s': steps,  # where the new process's start went
                'output_back_s': None if first is None else first - kill_mono,
                'outage_s': hi - kill_mono,
                'others': others,
                'stalled': stalled,
            }
            rows.append(row)
            report.console.print(
                f'  {name:10s} killed (pid {pid}): active again after '
                f'{"-" if active_s is None else f"{active_s:.2f} s"} (process started after '
                f'{"-" if started is None else f"{max(0.0, started - kill_boot):.2f} s"}), '
                'output after '
                f'{"-" if first is None else f"{first - kill_mono:.2f} s"}; '
                f'stalled meanwhile: {stalled or "none"}'
            )
            probe.spin(2.0)  # the fusion's diagnostics of the outage, too
            camera_less = max(
                camera_less, int(probe.fusion_status.get('frames_without_camera') or 0)
            )
        shm_end = shm_segments(domain)
    finally:
        status = launched.stop(timeout_s=30.0)
        fusion = dict(probe.fusion_status)
        probe.close()
    shm_after = shm_segments(domain)
    leaked = sorted(set(shm_after) - set(shm_before))
    # Fast DDS's own segments that the run's processes left (killed nodes): the keepers remove
    # those of dead processes, launch's cold respawn does not.
    dds_left = sorted(set(dds_shm.dead(min_age_s=0.0)) - dds_before)
    from rich.table import Table  # noqa: PLC0415

    how = (
        'launch respawn'
        if args.cold or args.kill == 'keeper'
        else 'warm restart' + (', forked at the death' if args.no_standby else ' from a standby')
    )
    table = Table(title=f'chaos: kill -9 and {how}, per node', title_justify='left')
    cols = (
        'node',
        'process up [s]',
        'active again [s]',
        'its start: imports or fork / ROS / configure / activate [s]',
        'output again [s]',
        'others during outage',
    )
    for col in cols:
        table.add_column(col)
    for row in rows:
        table.add_row(
            row['node'],
            '-' if row.get('spawned_s') is None else f'{row["spawned_s"]:.2f}',
            '-' if row.get('active_s') is None else f'{row["active_s"]:.2f}',
            ' / '.join(f'{v:.2f}' for v in row.get('start_steps_s', {}).values()) or '-',
            '-' if row.get('output_back_s') is None else f'{row["output_back_s"]:.2f}',
            ', '.join(f'{k} {v}' for k, v in row.get('others', {}).items())
            or row.get('error', ''),
        )
    report.console.print(table)
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
    plot(args.out / 'chaos.png', rows, how)
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
