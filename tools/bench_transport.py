#!/usr/bin/env python3
"""Benchmark: large frames between two real processes, shared memory vs plain rclpy.

For each path, a writer process and a reader process run the same scenarios (frame size x
rate); latency is measured from the writer's commit of a frame (the frame is ready in its
memory) to the reader holding a usable numpy view of it:

  shm         ShmPublisher -> ShmSubscription: descriptor over rclpy, payload in /dev/shm
  fast        same, delivered by the ring's futex (same host; no rclpy hop)
  ros         plain rclpy sensor_msgs/Image, default transports (the conventional graph)
  ros_large   plain rclpy Image with FASTDDS_BUILTIN_TRANSPORTS=LARGE_DATA
  floor       a bare cross-process wake-up through a pipe (no payload, no ROS)

All paths are paced the same way in the same run, because this machine runs code much slower
right after a process has slept. Reports P50/P99/max, CPU % of each process, drops (frames sent
but never delivered), overruns and torn frames, and writes results/bench/transport.{json,png}.

Final line:
  RESULT shm_p50_us=... shm_p99_us=... fast_p99_us=... floor_p99_us=... ros_p99_us=...
         ratio_p99=... torn=... drops=...
with the figures of the reference scenario (1920x1080x3 at 30 Hz), ratio_p99 = ros / shm,
torn and drops summed over every shm and fast scenario.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
PATHS = ('shm', 'fast', 'ros', 'ros_large', 'floor')
SIZES = {'1080p': (1080, 1920, 3), '4k': (2160, 3840, 3)}
REFERENCE = ('1080p', 30.0)
_HDR = struct.Struct('<QQq')  # scenario, sequence, commit time [ns]
END = 2**32


def scenarios(quick: bool) -> list[dict[str, Any]]:
    """The (size, rate, duration) grid."""
    if quick:
        grid = [('1080p', 30.0), ('1080p', 120.0)]
        duration = 2.0
    else:
        grid = [(s, r) for s in SIZES for r in (30.0, 60.0, 120.0)]
        duration = 5.0
    return [{'size': s, 'rate': r, 'frames': int(r * duration)} for s, r in grid]


# --- worker processes -----------------------------------------------------------------------


def _pace(rate: float, frames: int, produce: Any) -> dict[str, float]:
    """Calls produce(i) at ``rate`` from absolute ticks; returns CPU % and ticks missed."""
    period = 1.0 / rate
    start = time.monotonic()
    cpu0 = time.process_time()
    late = 0
    for i in range(frames):
        target = start + i * period
        delay = target - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        elif delay < -period:
            late += 1  # behind by a whole period: the path cannot keep this rate
        produce(i)
    wall = time.monotonic() - start
    return {'cpu_pct': 100.0 * (time.process_time() - cpu0) / wall, 'late': late}


def _floor_write(fd: int, scenario: int, index: int) -> None:
    os.write(fd, _HDR.pack(scenario, index, time.time_ns()))


def _mark(frame: np.ndarray, scenario: int, index: int) -> None:
    frame.reshape(-1)[:16] = np.frombuffer(_HDR.pack(scenario, index, 0)[:16], np.uint8)


def _shm_write(pub: Any, base: np.ndarray, scenario: int, index: int) -> None:
    ws = pub.acquire(base.shape, base.dtype, 'rgb8')
    np.copyto(ws.array, base)  # the producer's work: decode into the slot
    _mark(ws.array, scenario, index)
    pub.commit(ws, stamp_ns=time.time_ns())


def _image_write(pub: Any, msg: Any, frame: np.ndarray, scenario: int, index: int) -> None:
    from rt_fusion.ros.conversions import ns_to_time  # noqa: PLC0415

    _mark(frame, scenario, index)
    now = time.time_ns()  # the frame is ready: the commit of this path
    msg.header.stamp = ns_to_time(now)
    msg.height, msg.width = frame.shape[:2]
    msg.encoding, msg.step = 'rgb8', frame.shape[1] * 3
    msg.data = frame.tobytes()
    pub.publish(msg)


def writer(path: str, plan: list[dict[str, Any]], fifo: str, segment: str) -> None:
    """Writes every scenario of ``plan`` on ``path``; prints one JSON line per scenario."""
    bases = {
        name: np.random.default_rng(1).integers(0, 255, shape, dtype=np.uint8)
        for name, shape in SIZES.items()
        if any(s['size'] == name for s in plan)
    }
    results = []
    if path == 'floor':
        fd = os.open(fifo, os.O_WRONLY)
        for k, sc in enumerate(plan):
            results.append(_pace(sc['rate'], sc['frames'], functools.partial(_floor_write, fd, k)))
            time.sleep(0.5)  # paced: a gap between scenarios
        os.write(fd, _HDR.pack(END, 0, 0))
        os.close(fd)
        print('WRITER ' + json.dumps(results), flush=True)
        return

    import rclpy  # noqa: PLC0415 - the floor path must not pay for ROS
    from sensor_msgs.msg import Image  # noqa: PLC0415

    from rt_fusion.ros import compat  # noqa: PLC0415
    from rt_fusion.ros.shm_transport import ShmPublisher  # noqa: PLC0415

    rclpy.init()
    node = rclpy.create_node('bench_writer')
    largest = max(int(np.prod(SIZES[s['size']])) for s in plan)
    shm_pub = img_pub = None
    if path in ('shm', 'fast'):
        shm_pub = ShmPublisher(node, '/bench/frames', segment, largest, 4, frame_id='bench')
        count: Callable[[], int] = shm_pub.subscriber_count
    else:
        img_pub = node.create_publisher(Image, '/bench/frames', 10)
        count = img_pub.get_subscription_count
    msg = Image()
    deadline = time.monotonic() + 30
    while count() == 0 and time.monotonic() < deadline:
        time.sleep(0.05)  # paced: waiting for discovery
    time.sleep(1.0)  # paced: let discovery settle on the reader's side too
    for k, sc in enumerate(plan):
        base = bases[sc['size']]
        produce: Callable[[int], None]
        if shm_pub is not None:
            produce = functools.partial(_shm_write, shm_pub, base, k)
        else:
            produce = functools.partial(_image_write, img_pub, msg, base.copy(), k)
        results.append(_pace(sc['rate'], sc['frames'], produce))
        time.sleep(0.5)  # paced: a gap between scenarios
    if shm_pub is not None:
        shm_pub.wait_for_all_acked(2.0)
        shm_pub.close()
    node.destroy_node()
    compat.try_shutdown()
    print('WRITER ' + json.dumps(results), flush=True)


class _Collector:
    """Per-scenario latency samples, CPU and counts of a reader."""

    def __init__(self, plan: list[dict[str, Any]]) -> None:
        self.plan = plan
        self.lat = [np.zeros(sc['frames'], np.int64) for sc in plan]
        self.n = [0] * len(plan)
        self.first: list[tuple[float, float] | None] = [None] * len(plan)
        self.last: list[tuple[float, float] | None] = [None] * len(plan)
        self.wrong = 0
        self.last_seen = time.monotonic()
        self.ended = False

    def add(self, scenario: int, latency_ns: int) -> None:
        if scenario >= len(self.plan):
            self.wrong += 1
            return
        stamp = (time.monotonic(), time.process_time())
        if self.first[scenario] is None:
            self.first[scenario] = stamp
        self.last[scenario] = stamp
        if self.n[scenario] < self.lat[scenario].size:
            self.lat[scenario][self.n[scenario]] = latency_ns
            self.n[scenario] += 1
        self.last_seen = stamp[0]

    def report(self, extra: dict[str, Any]) -> dict[str, Any]:
        out = []
        for k in range(len(self.plan)):
            first, last = self.first[k], self.last[k]
            cpu = float('nan')
            if first and last and last[0] > first[0]:
                cpu = 100.0 * (last[1] - first[1]) / (last[0] - first[0])
            out.append(
                {
                    'received': self.n[k],
                    'cpu_pct': cpu,
                    'latency_ns': self.lat[k][: self.n[k]].tolist(),
                }
            )
        return {'scenarios': out, 'wrong': self.wrong, **extra}


def reader(path: str, plan: list[dict[str, Any]], fifo: str, idle_s: float) -> None:
    """Receives every scenario on ``path``; prints READY, then one JSON line with the samples."""
    col = _Collector(plan)
    if path == 'floor':
        print('READY', flush=True)
        fd = os.open(fifo, os.O_RDONLY)
        buf = b''
        while True:
            chunk = os.read(fd, _HDR.size)
            if not chunk:
                break
            buf += chunk
            while len(buf) >= _HDR.size:
                k, _i, t = _HDR.unpack_from(buf)
                buf = buf[_HDR.size :]
                if k == END:
                    break
                col.add(k, time.time_ns() - t)
        os.close(fd)
        print('READER ' + json.dumps(col.report({})), flush=True)
        return

    import rclpy  # noqa: PLC0415
    from sensor_msgs.msg import Image  # noqa: PLC0415

    from rt_fusion.ros import compat  # noqa: PLC0415
    from rt_fusion.ros.conversions import time_to_ns  # noqa: PLC0415
    from rt_fusion.ros.node_utils import make_executor  # noqa: PLC0415
    from rt_fusion.ros.shm_transport import ShmSubscription  # noqa: PLC0415

    rclpy.init()
    node = rclpy.create_node('bench_reader')
    extra: dict[str, Any] = {}
    if path in ('shm', 'fast'):

        def on_frame(frame: Any, via: str) -> None:
            now = time.time_ns()
            if path == 'fast' and via != 'fast':
                return  # the first frame names the segment; measure only the futex path
            k = _HDR.unpack_from(frame.array.reshape(-1)[:16].tobytes() + bytes(8))[0]
            col.add(k, now - frame.desc.available_ns)

        sub = ShmSubscription(
            node, '/bench/frames', on_frame, transport='shm', fast_path=path == 'fast'
        )
    else:

        def on_image(msg: Image) -> None:
            view = np.frombuffer(msg.data, np.uint8)  # the usable view
            now = time.time_ns()
            k = _HDR.unpack_from(view[:16].tobytes() + bytes(8))[0]
            col.add(k, now - time_to_ns(msg.header.stamp))

        node.create_subscription(Image, '/bench/frames', on_image, 10)
    executor = make_executor(os.environ.get('RT_FUSION_EXECUTOR', 'events'))
    executor.add_node(node)
    print('READY', flush=True)
    deadline = time.monotonic() + sum(sc['frames'] / sc['rate'] + 1.0 for sc in plan) + 60
    while time.monotonic() < deadline:
        executor.spin_once(timeout_sec=0.1)
        done = all(col.n[k] >= sc['frames'] for k, sc in enumerate(plan))
        idle = any(col.n) and time.monotonic() - col.last_seen > idle_s
        if done or idle:
            break
    if path in ('shm', 'fast'):
        stats = sub.stats
        extra = {'overruns': stats.overruns, 'torn': stats.torn, 'stale': stats.stale}
        sub.destroy()
    node.destroy_node()
    compat.try_shutdown()
    print('READER ' + json.dumps(col.report(extra)), flush=True)


# --- orchestration --------------------------------------------------------------------------


def _line(proc: subprocess.Popen[str], prefix: str, timeout_s: float) -> str:
    end = time.monotonic() + timeout_s
    assert proc.stdout is not None
    while time.monotonic() < end:
        line = proc.stdout.readline()
        if not line:
            break
        if line.startswith(prefix):
            return line[len(prefix) :].strip()
    err = proc.stderr.read() if proc.stderr else ''
    raise RuntimeError(f'{proc.args!r}: no {prefix.strip()} line (exit {proc.poll()}):\n{err}')


def run_path(path: str, plan: list[dict[str, Any]], domain: int) -> dict[str, Any]:
    """One writer + one reader process for ``path``; returns their reports."""
    env = dict(
        os.environ,
        ROS_DOMAIN_ID=str(domain),
        ROS_AUTOMATIC_DISCOVERY_RANGE='LOCALHOST',
        PYTHONUNBUFFERED='1',
    )
    if path == 'ros_large':
        env['FASTDDS_BUILTIN_TRANSPORTS'] = 'LARGE_DATA'
    with tempfile.TemporaryDirectory() as tmp:
        fifo = str(Path(tmp) / 'floor.fifo')
        os.mkfifo(fifo)
        segment = f'rt_fusion_bench_{os.getpid()}'
        plan_json = json.dumps(plan)
        me = [sys.executable, str(Path(__file__).resolve())]
        rd = subprocess.Popen(
            [*me, '--role', 'reader', '--path', path, '--plan', plan_json, '--fifo', fifo],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        _line(rd, 'READY', 60)
        wr = subprocess.Popen(
            [
                *me,
                '--role',
                'writer',
                '--path',
                path,
                '--plan',
                plan_json,
                '--fifo',
                fifo,
                '--segment',
                segment,
            ],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        budget = sum(sc['frames'] / sc['rate'] + 1.0 for sc in plan) + 90
        written = json.loads(_line(wr, 'WRITER ', budget))
        got = json.loads(_line(rd, 'READER ', budget))
        wr.wait(30)
        rd.wait(30)
    return {'writer': written, 'reader': got}


def main(argv: list[str] | None = None) -> int:
    """Runs the benchmark (or one of its worker roles)."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument('--quick', action='store_true', help='1080p at 30 and 120 Hz, 2 s each')
    parser.add_argument('--paths', default=','.join(PATHS), help='comma-separated subset')
    parser.add_argument('--out', type=Path, default=ROOT / 'results' / 'bench')
    parser.add_argument('--role', choices=('writer', 'reader'), help=argparse.SUPPRESS)
    parser.add_argument('--path', help=argparse.SUPPRESS)
    parser.add_argument('--plan', help=argparse.SUPPRESS)
    parser.add_argument('--fifo', help=argparse.SUPPRESS)
    parser.add_argument('--segment', help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.role == 'writer':
        writer(args.path, json.loads(args.plan), args.fifo, args.segment)
        return 0
    if args.role == 'reader':
        reader(args.path, json.loads(args.plan), args.fifo, idle_s=3.0)
        return 0

    from rich.progress import Progress  # noqa: PLC0415

    from rt_fusion import report  # noqa: PLC0415
    from rt_fusion.core.latency import summarize_ns  # noqa: PLC0415

    plan = scenarios(args.quick)
    paths = [p for p in args.paths.split(',') if p]
    unknown = set(paths) - set(PATHS)
    if unknown:
        parser.error(f'unknown paths {sorted(unknown)}; choose from {PATHS}')
    raw: dict[str, Any] = {}
    with Progress(console=report.console, transient=True) as progress:
        task = progress.add_task('bench_transport', total=len(paths))
        for i, path in enumerate(paths):
            progress.update(task, description=f'path {path} ({len(plan)} scenarios)')
            raw[path] = run_path(path, plan, domain=1 + (os.getpid() + i) % 50)
            progress.advance(task)

    rows, extra, results = {}, {}, []
    ref_samples: dict[str, np.ndarray] = {}
    torn = drops = 0
    for path in paths:
        rd, wr = raw[path]['reader'], raw[path]['writer']
        for k, sc in enumerate(plan):
            lat = np.asarray(rd['scenarios'][k]['latency_ns'], np.int64)
            summary = summarize_ns(lat)
            sent = sc['frames'] - (1 if path == 'fast' and k == 0 else 0)
            dropped = max(0, sent - rd['scenarios'][k]['received'])
            name = f'{path} {sc["size"]}@{sc["rate"]:g}Hz'
            rows[name] = summary
            extra[name] = {
                'recv/sent': f'{rd["scenarios"][k]["received"]}/{sent}',
                'CPU% w/r': f'{wr[k]["cpu_pct"]:.0f}/{rd["scenarios"][k]["cpu_pct"]:.0f}',
            }
            if path in ('shm', 'fast'):
                drops += dropped
            results.append(
                {
                    'path': path,
                    **sc,
                    'latency': summary.as_dict(),
                    'dropped': dropped,
                    'writer_cpu_pct': wr[k]['cpu_pct'],
                    'writer_late': wr[k]['late'],
                    'reader_cpu_pct': rd['scenarios'][k]['cpu_pct'],
                }
            )
            if (sc['size'], sc['rate']) == REFERENCE:
                ref_samples[path] = lat
        if path in ('shm', 'fast'):
            torn += rd.get('torn', 0)
            extra_path = {k2: v for k2, v in rd.items() if k2 in ('overruns', 'torn', 'stale')}
            results.append({'path': path, 'counters': extra_path})
    ref = {p: summarize_ns(s) for p, s in ref_samples.items()}
    report.console.print(
        report.latency_table(
            'commit -> usable view in the other process (all scenarios)', rows, extra=extra
        )
    )
    ref_name = f'{REFERENCE[0]}@{REFERENCE[1]:g}Hz'
    report.console.print(
        report.latency_table(
            f'reference scenario {ref_name}', ref, baseline='ros' if 'ros' in ref else None
        )
    )
    report.write_json(args.out / 'transport.json', {'plan': plan, 'results': results})
    report.plot_latency(
        args.out / 'transport.png',
        ref_samples,
        f'bench_transport: {ref_name}, commit -> usable view',
    )
    report.console.print(f'written: {args.out / "transport.json"}, {args.out / "transport.png"}')

    def p(path: str, key: str) -> float:
        s = ref.get(path)
        return float('nan') if s is None else float(getattr(s, key))

    shm_p99 = p('shm', 'p99_us')
    report.result_line(
        shm_p50_us=p('shm', 'p50_us'),
        shm_p99_us=shm_p99,
        fast_p99_us=p('fast', 'p99_us'),
        floor_p99_us=p('floor', 'p99_us'),
        ros_p99_us=p('ros', 'p99_us'),
        ratio_p99=p('ros', 'p99_us') / shm_p99 if shm_p99 > 0 else float('nan'),
        torn=torn,
        drops=drops,
    )
    return 0


if __name__ == '__main__':
    sys.exit(main())
