"""The protocol benchmark's runs (``tools/bench_protocols.py`` is its command line): ARS408
frames and Xsens MTData2 packets decoded (a synthetic full cycle, timed per message), and the
radar and IMU nodes' own publish latencies from their diagnostics, fed with the real
recordings."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from rt_fusion.core import domains
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


def _run(argv: list[str], env: dict[str, str], root: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        argv, env=env, cwd=root, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
    )


def bench_nodes(quick: bool, root: Path, data: Path) -> dict[str, float]:
    """Publish latencies of radar_node and imu_node [µs], from their diagnostics: the nodes run
    from the repository ``root`` on the recordings in ``data``."""
    env = dict(
        os.environ,
        ROS_DOMAIN_ID=domains.from_env_or_lease(),
        ROS_AUTOMATIC_DISCOVERY_RANGE='LOCALHOST',
        PYTHONUNBUFFERED='1',
    )
    py = sys.executable

    def run(argv: list[str], env: dict[str, str]) -> subprocess.Popen[str]:
        return _run(argv, env, root)

    out: dict[str, float] = {}
    log = data / 'radar_ars408' / 'candump-2026-06-24_154259.log'
    if log.is_file():
        port = str(can_udp_port())
        diag = run(
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
        radar = run(
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
        replay = run(
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
    bag = data / 'imu_radar_rio' / 'ti_mmwave_rospkg_demo_ros2'
    if bag.is_dir():
        link = f'/tmp/rt_fusion_bench_mti_{os.getpid()}'
        count = '2000' if quick else '8000'
        diag = run(
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
        emu = run(
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
        imu = run(
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
