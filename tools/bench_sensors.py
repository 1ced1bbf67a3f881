#!/usr/bin/env python3
"""Benchmark: camera_node and microphone_node as real processes.

Camera: a 1920x1080 video made from the real dash-cam clip (upscaled, MJPEG) played by
camera_node at 30 and 60 Hz (paced by its container timestamps); reports the node's cost per
frame from "frame decoded" to "descriptor published" (P50/P99, from its diagnostics) and the
process's CPU % (decoding included).
Microphone: microphone_node capturing through PortAudio from an ALSA ``file`` PCM fed at the
clip's sample rate with the real car-horn clip (4096-byte writes paced in real time, as a device
delivers); reports the audio callback's duration (P99) and the time from the callback to
the AudioChunk published (P99).

Final line: RESULT cam_p99_us=... cam_cpu_pct=... mic_cb_p99_us=... mic_pub_p99_us=...
(camera figures at 30 Hz).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import wave
from pathlib import Path

import cv2

from rt_fusion.core import domains
from rt_fusion.ros import graph

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / 'shared' / 'data'


def make_video(path: Path, fps: float, frames: int) -> None:
    """A 1080p MJPEG video from the dash-cam clip, looping it as needed."""
    src = cv2.VideoCapture(str(DATA / 'camera' / 'solidWhiteRight.mp4'))
    clip = []
    while True:
        ok, f = src.read()
        if not ok:
            break
        clip.append(cv2.resize(f, (1920, 1080), interpolation=cv2.INTER_LINEAR))
    src.release()
    out = cv2.VideoWriter(str(path), cv2.VideoWriter.fourcc(*'MJPG'), fps, (1920, 1080))
    for k in range(frames):
        out.write(clip[k % len(clip)])
    out.release()


def _cpu_ticks(pid: int) -> int:
    fields = Path(f'/proc/{pid}/stat').read_text().rsplit(')', 1)[1].split()
    return int(fields[11]) + int(fields[12])


def _diag(lines: list[str], part: str) -> dict[str, str]:
    for line in reversed(lines):
        if line.startswith('MSG '):
            for s in json.loads(line[4:])['status']:
                if part in s['name']:
                    return {kv['key']: kv['value'] for kv in s['values']}
    return {}


def _env() -> dict[str, str]:
    return dict(
        os.environ,
        ROS_DOMAIN_ID=domains.from_env_or_lease(),
        ROS_AUTOMATIC_DISCOVERY_RANGE='LOCALHOST',
        PYTHONUNBUFFERED='1',
    )


def bench_camera(fps: float, seconds: float, tmp: Path) -> dict[str, float]:
    """Cost per frame and CPU % of camera_node at ``fps``."""
    video = tmp / f'cam{fps:g}.avi'
    make_video(video, fps, int(fps * seconds))
    env = _env()
    diag = subprocess.Popen(
        [
            sys.executable,
            'tools/topic_echo.py',
            graph.DIAGNOSTICS_TOPIC,
            'diagnostic_msgs/msg/DiagnosticArray',
            '--timeout',
            str(seconds + 6),
        ],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        text=True,
    )
    cam = subprocess.Popen(
        [
            sys.executable,
            '-m',
            'rt_fusion.nodes.camera_node',
            '--ros-args',
            '-r',
            '__node:=camera',
            '-p',
            'source:=file',
            '-p',
            f'file:={video}',
            '-p',
            'segment:=rt_fusion_bench_cam',
            '-p',
            'start_delay_s:=1.0',
            '-p',
            'diagnostics_period_s:=0.5',
        ],
        cwd=ROOT,
        env=env,
        stderr=subprocess.DEVNULL,
    )
    time.sleep(1.5)
    t0, c0 = time.monotonic(), _cpu_ticks(cam.pid)
    time.sleep(seconds - 1.0)
    cpu = 100.0 * (_cpu_ticks(cam.pid) - c0) / os.sysconf('SC_CLK_TCK') / (time.monotonic() - t0)
    lines = diag.communicate(timeout=60)[0].splitlines()
    cam.terminate()
    cam.wait(20)
    values = _diag(lines, 'camera')
    return {
        'p50_us': float(values.get('publish_cost_p50_us') or 'nan'),
        'p99_us': float(values.get('publish_cost_p99_us') or 'nan'),
        'cpu_pct': cpu,
        'frames': float(values.get('frames', 'nan')),
    }


def bench_microphone(tmp: Path) -> dict[str, float]:
    """Callback and callback-to-publish P99 of microphone_node on the ALSA file PCM."""
    with wave.open(str(DATA / 'audio' / 'car-horn.wav')) as w:
        raw, rate, ch = w.readframes(w.getnframes()), w.getframerate(), w.getnchannels()
    (tmp / 'clip.raw').write_bytes(raw * 3)  # 13 s at the clip's sample rate
    fifo = tmp / 'mic.fifo'
    os.mkfifo(fifo)
    (tmp / '.asoundrc').write_text(
        f'pcm.rtf_mic {{\n type file\n slave.pcm "null"\n file "/dev/null"\n infile "{fifo}"\n'
        ' format "raw"\n hint { show on description "bench" }\n}\n'
    )
    env = _env()
    diag = subprocess.Popen(
        [
            sys.executable,
            'tools/topic_echo.py',
            graph.DIAGNOSTICS_TOPIC,
            'diagnostic_msgs/msg/DiagnosticArray',
            '--timeout',
            '14',
        ],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        text=True,
    )
    feeder = subprocess.Popen(
        [
            sys.executable,
            '-m',
            'tests.nodes.alsa_feeder',
            str(fifo),
            str(tmp / 'clip.raw'),
            '--hold',
            '15',
            '--pace-bytes-per-s',
            str(rate * ch * 2),
        ],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert feeder.stdout is not None
    feeder.stdout.readline()
    mic = subprocess.Popen(
        [
            sys.executable,
            '-m',
            'rt_fusion.nodes.microphone_node',
            '--ros-args',
            '-r',
            '__node:=mic',
            '-p',
            'device:=rtf_mic',
            '-p',
            f'sample_rate:={rate}',
            '-p',
            f'channels:={ch}',
            '-p',
            'segment:=rt_fusion_bench_mic',
            '-p',
            'stall_s:=30.0',
            '-p',
            'diagnostics_period_s:=0.5',
        ],
        cwd=ROOT,
        env=dict(env, HOME=str(tmp)),
        stderr=subprocess.DEVNULL,
    )
    lines = diag.communicate(timeout=60)[0].splitlines()
    feeder.kill()  # first: PortAudio waits on the FIFO until its writer goes
    mic.terminate()
    mic.wait(20)
    values = _diag(lines, 'microphone')
    return {
        'cb_p99_us': float(values.get('callback_p99_us') or 'nan'),
        'pub_p99_us': float(values.get('block_to_publish_p99_us') or 'nan'),
        'blocks': float(values.get('blocks', 'nan')),
    }


def main(argv: list[str] | None = None) -> int:
    """Runs the benchmark; returns the exit status."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument('--quick', action='store_true', help='4 s per camera rate')
    parser.add_argument('--out', type=Path, default=ROOT / 'results' / 'bench')
    args = parser.parse_args(argv)
    if not (DATA / 'camera' / 'solidWhiteRight.mp4').is_file():
        print('bench_sensors: ../shared/data is missing; nothing to play')
        return 0

    from rt_fusion import report  # noqa: PLC0415

    seconds = 4.0 if args.quick else 10.0
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        cams = {fps: bench_camera(fps, seconds, tmp) for fps in (30.0, 60.0)}
        mic = bench_microphone(tmp)
    for fps, c in cams.items():
        report.console.print(
            f'camera_node 1080p @ {fps:g} Hz: decoded -> descriptor published P50 '
            f'{c["p50_us"]:.0f} µs, P99 {c["p99_us"]:.0f} µs; CPU {c["cpu_pct"]:.0f} % '
            f'(decoding included); {c["frames"]:.0f} frames'
        )
    report.console.print(
        f'microphone_node: callback P99 {mic["cb_p99_us"]:.0f} µs, callback -> '
        f'AudioChunk published P99 {mic["pub_p99_us"]:.0f} µs '
        f'({mic["blocks"]:.0f} blocks)'
    )
    report.write_json(args.out / 'sensors.json', {'camera': cams, 'microphone': mic})
    report.result_line(
        cam_p99_us=cams[30.0]['p99_us'],
        cam_cpu_pct=cams[30.0]['cpu_pct'],
        mic_cb_p99_us=mic['cb_p99_us'],
        mic_pub_p99_us=mic['pub_p99_us'],
    )
    return 0


if __name__ == '__main__':
    sys.exit(main())
