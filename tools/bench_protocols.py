#!/usr/bin/env python3
"""Benchmark: ARS408 and Xsens decoders, and the radar and IMU nodes as real processes.

Decoders (in this process): per-frame time and throughput of
  - Ars408Decoder on cycles of 100 objects (status + 100 × general/quality/extended = 301 frames
    a cycle, built with the project's DBC), the heaviest load the sensor sends (~4,000 frames/s);
  - XbusParser + parse_mtdata2 on MTData2 messages with counter, SampleTimeFine, quaternion, rate
    of turn, acceleration and status word, as an MTi sends at up to 1 kHz.
Nodes (real processes, as in the tests): radar_node fed the real candump log over python-can's
udp_multicast bus, imu_node fed by tools/xsens_emulator.py over a pty; their publish latency
(last frame of a cycle / MTData2 message received -> message published) as they report it in
diagnostics.

Final line:
  RESULT ars408_fps=... xsens_fps=... radar_node_p99_us=... imu_node_p99_us=...
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from rt_fusion.core.latency import summarize_ns
from rt_fusion.core.linux import can_udp_port
from rt_fusion.core.protocols import xsens
from rt_fusion.core.protocols.ars408 import (
    OBJ_EXTENDED,
    OBJ_GENERAL,
    OBJ_QUALITY,
    OBJ_STATUS,
    Ars408Decoder,
    load_database,
)
from rt_fusion.ros import graph

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / 'shared' / 'data'


def ars408_stream(cycles: int, objects: int = 100) -> list[tuple[int, bytes]]:
    """Frames of ``cycles`` object cycles of ``objects`` targets each."""
    db = load_database(0)
    rng = np.random.default_rng(0)
    msgs = {
        i: db.get_message_by_frame_id(i)
        for i in (OBJ_STATUS, OBJ_GENERAL, OBJ_QUALITY, OBJ_EXTENDED)
    }
    frames = []
    for c in range(cycles):
        frames.append(
            (
                OBJ_STATUS,
                msgs[OBJ_STATUS].encode(
                    {'Obj_NofObjects': objects, 'Obj_MeasCounter': c, 'Obj_InterfaceVersion': 1}
                ),
            )
        )
        for k in range(objects):
            frames.append(
                (
                    OBJ_GENERAL,
                    msgs[OBJ_GENERAL].encode(
                        {
                            'Obj_ID': k,
                            'Obj_DistLong': float(rng.uniform(0, 200)),
                            'Obj_DistLat': float(rng.uniform(-20, 20)),
                            'Obj_VrelLong': -3.0,
                            'Obj_VrelLat': 0.25,
                            'Obj_DynProp': 0,
                            'Obj_RCS': 10.0,
                        }
                    ),
                )
            )
        for k in range(objects):
            frames.append(
                (
                    OBJ_QUALITY,
                    msgs[OBJ_QUALITY].encode(
                        {
                            'Obj_ID': k,
                            'Obj_DistLong_rms': 10,
                            'Obj_DistLat_rms': 12,
                            'Obj_VrelLong_rms': 8,
                            'Obj_VrelLat_rms': 8,
                            'Obj_ArelLong_rms': 9,
                            'Obj_ArelLat_rms': 9,
                            'Obj_Orientation_rms': 20,
                            'Obj_MeasState': 2,
                            'Obj_ProbOfExist': 7,
                        }
                    ),
                )
            )
        for k in range(objects):
            frames.append(
                (
                    OBJ_EXTENDED,
                    msgs[OBJ_EXTENDED].encode(
                        {
                            'Obj_ID': k,
                            'Obj_ArelLong': 0.1,
                            'Obj_ArelLat': 0.0,
                            'Obj_Class': 1,
                            'Obj_OrientationAngle': 0.0,
                            'Obj_Length': 4.4,
                            'Obj_Width': 1.8,
                        }
                    ),
                )
            )
    return frames


def bench_ars408(cycles: int) -> tuple[float, np.ndarray]:
    """(frames/s, per-frame times [ns])."""
    frames = ars408_stream(cycles)
    dec = Ars408Decoder(0)
    times = np.empty(len(frames), np.int64)
    start = time.perf_counter()
    for i, (fid, data) in enumerate(frames):
        t0 = time.perf_counter_ns()
        dec.feed(fid, data, i)
        times[i] = time.perf_counter_ns() - t0
    elapsed = time.perf_counter() - start
    assert dec.stats.cycles == cycles
    assert dec.stats.decode_errors == 0
    return len(frames) / elapsed, times


def bench_xsens(count: int) -> tuple[float, np.ndarray]:
    """(messages/s, per-message times [ns]) for framing + MTData2 decoding."""
    rng = np.random.default_rng(1)
    stream = b''.join(
        xsens.build_message(
            xsens.MID_MTDATA2,
            xsens.encode_mtdata2(
                {
                    'packet_counter': k,
                    'sample_time_fine': 10 * k,
                    'quaternion': (1.0, 0.0, 0.0, 0.0),
                    'rate_of_turn': rng.normal(size=3),
                    'acceleration': rng.normal(size=3),
                    'status_word': 0,
                }
            ),
        )
        for k in range(count)
    )
    size = len(stream) // count
    parser = xsens.XbusParser()
    times = np.empty(count, np.int64)
    n = 0
    start = time.perf_counter()
    for pos in range(0, len(stream), size):  # one message per read, as a serial port delivers
        t0 = time.perf_counter_ns()
        for _mid, payload in parser.feed(stream[pos : pos + size]):
            xsens.parse_mtdata2(payload)
        times[n] = time.perf_counter_ns() - t0
        n += 1
    elapsed = time.perf_counter() - start
    assert parser.stats.messages == count
    return count / elapsed, times[:n]


def _diag_value(lines: list[str], name_part: str, key: str) -> float:
    for line in reversed(lines):
        if not line.startswith('MSG '):
            continue
        for status in json.loads(line[4:])['status']:
            if name_part in status['name']:
                values = {kv['key']: kv['value'] for kv in status['values']}
                if key in values:
                    return float(values[key])
    return float('nan')


def _run(argv: list[str], env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        argv, env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
    )


def bench_nodes(quick: bool) -> dict[str, float]:
    """Publish latencies of radar_node and imu_node [µs], from their diagnostics."""
    env = dict(
        os.environ,
        ROS_DOMAIN_ID=str(60 + os.getpid() % 40),
        ROS_AUTOMATIC_DISCOVERY_RANGE='LOCALHOST',
        PYTHONUNBUFFERED='1',
    )
    py = sys.executable
    out: dict[str, float] = {}
    log = DATA / 'radar_ars408' / 'candump-2026-06-24_154259.log'
    if log.is_file():
        port = str(can_udp_port())
        diag = _run(
            [
                py,
                'tools/topic_echo.py',
                graph.DIAGNOSTICS_TOPIC,
                'diagnostic_msgs/msg/DiagnosticArray',
                '--timeout',
                '14' if quick else '40',
            ],
            env,
        )
        radar = _run(
            [
                py,
                '-m',
                'rt_fusion.nodes.radar_node',
                '--ros-args',
                '-r',
                '__node:=radar',
                '-p',
                'interface:=udp_multicast',
                '-p',
                'channel:=239.74.163.2',
                '-p',
                f'port:={port}',
                '-p',
                'configure_sensor:=false',
                '-p',
                'ego_rate_hz:=0.0',
                '-p',
                'diagnostics_period_s:=0.5',
            ],
            env,
        )
        replay = _run(
            [
                py,
                'tools/can_replay.py',
                str(log),
                '-c',
                '239.74.163.2',
                '--port',
                port,
                '--rate',
                '4' if quick else '1',
                '--start-delay',
                '2',
                '--quiet',
            ],
            env,
        )
        replay.wait(120)
        lines = diag.communicate(timeout=120)[0].splitlines()
        radar.terminate()
        radar.wait(30)
        out['radar_p50_us'] = _diag_value(lines, 'ARS408', 'publish_latency_p50_us')
        out['radar_p99_us'] = _diag_value(lines, 'ARS408', 'publish_latency_p99_us')
    bag = DATA / 'imu_radar_rio' / 'ti_mmwave_rospkg_demo_ros2'
    if bag.is_dir():
        link = f'/tmp/rt_fusion_bench_mti_{os.getpid()}'
        count = '2000' if quick else '8000'
        diag = _run(
            [
                py,
                'tools/topic_echo.py',
                graph.DIAGNOSTICS_TOPIC,
                'diagnostic_msgs/msg/DiagnosticArray',
                '--timeout',
                '16' if quick else '50',
            ],
            env,
        )
        emu = _run(
            [
                py,
                'tools/xsens_emulator.py',
                '--link',
                link,
                '--count',
                count,
                '--speed',
                '1',
                '--stream-delay',
                '2',
            ],
            env,
        )
        assert emu.stdout is not None
        emu.stdout.readline()  # READY
        imu = _run(
            [
                py,
                '-m',
                'rt_fusion.nodes.imu_node',
                '--ros-args',
                '-r',
                '__node:=imu',
                '-p',
                f'port:={link}',
                '-p',
                'diagnostics_period_s:=0.5',
            ],
            env,
        )
        lines = diag.communicate(timeout=120)[0].splitlines()
        for proc in (imu, emu):
            proc.terminate()
            proc.wait(30)
        Path(link).unlink(missing_ok=True)
        out['imu_p50_us'] = _diag_value(lines, 'Xsens', 'publish_latency_p50_us')
        out['imu_p99_us'] = _diag_value(lines, 'Xsens', 'publish_latency_p99_us')
    return out


def main(argv: list[str] | None = None) -> int:
    """Runs the benchmark; returns the exit status."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument('--quick', action='store_true', help='fewer frames, shorter node runs')
    parser.add_argument('--out', type=Path, default=ROOT / 'results' / 'bench')
    args = parser.parse_args(argv)

    from rt_fusion import report  # noqa: PLC0415

    ars_fps, ars_t = bench_ars408(20 if args.quick else 200)
    xs_fps, xs_t = bench_xsens(5000 if args.quick else 50_000)
    report.console.print('decoders done; running the nodes (real processes) ...')
    nodes = bench_nodes(args.quick)
    rows = {
        'ARS408 decode / frame (100-object cycles)': summarize_ns(ars_t),
        'Xsens frame + MTData2 decode / message': summarize_ns(xs_t),
    }
    extra = {
        'ARS408 decode / frame (100-object cycles)': {
            'frames/s': f'{ars_fps:,.0f}',
            'x device rate': f'{ars_fps / 4000:.0f}×',
        },
        'Xsens frame + MTData2 decode / message': {
            'frames/s': f'{xs_fps:,.0f}',
            'x device rate': f'{xs_fps / 1000:.0f}×',
        },
    }
    report.console.print(report.latency_table('protocol decoders', rows, extra=extra))
    report.console.print(
        f'node publish latency (diagnostics): radar_node P50 {nodes.get("radar_p50_us", "-")} '
        f'µs, P99 {nodes.get("radar_p99_us", "-")} µs; imu_node P50 '
        f'{nodes.get("imu_p50_us", "-")} µs, P99 {nodes.get("imu_p99_us", "-")} µs'
    )
    report.write_json(
        args.out / 'protocols.json',
        {'decoders': rows, 'ars408_fps': ars_fps, 'xsens_fps': xs_fps, 'nodes': nodes},
    )
    report.result_line(
        ars408_fps=round(ars_fps),
        xsens_fps=round(xs_fps),
        radar_node_p99_us=nodes.get('radar_p99_us', float('nan')),
        imu_node_p99_us=nodes.get('imu_p99_us', float('nan')),
    )
    return 0


if __name__ == '__main__':
    sys.exit(main())
