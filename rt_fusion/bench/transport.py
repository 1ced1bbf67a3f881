"""The frame-transport benchmark's workers (``tools/bench_transport.py`` is its command line): a
writer and a reader process per path (shared memory, the fast path, sensor_msgs/Image over
rclpy, the same with Fast DDS's large-data transport, and a FIFO floor), paced at each scenario's
rate, each frame stamped with its commit time; ``run_path`` runs one path and collects it."""

from __future__ import annotations

import contextlib
import functools
import json
import os
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from rt_fusion.bench import peers
from rt_fusion.core import linux

PATHS = ('shm', 'fast', 'ros', 'ros_large', 'floor', 'iceoryx2', 'zenoh')

#: What ``--peers`` compares: rt_fusion's two paths, the PyPI peers, the conventional rclpy path.
PEER_PATHS = ('fast', 'shm', 'iceoryx2', 'zenoh', 'ros')


SIZES = {'1080p': (1080, 1920, 3), '4k': (2160, 3840, 3)}


REFERENCE = ('1080p', 30.0)


_HDR = struct.Struct('<QQq')  # scenario, sequence, commit time [ns]


END = 2**32


def scenarios(quick: bool, peers: bool = False) -> list[dict[str, Any]]:
    """The (size, rate, duration) grid (``peers``: 1080p and 4K at 30 Hz)."""
    if peers:
        duration = 2.0 if quick else 6.0
        return [{'size': s, 'rate': 30.0, 'frames': int(30 * duration)} for s in SIZES]
    if quick:
        grid = [('1080p', 30.0), ('1080p', 120.0)]
        duration = 2.0
    else:
        grid = [(s, r) for s in SIZES for r in (30.0, 60.0, 120.0)]
        duration = 5.0
    return [{'size': s, 'rate': r, 'frames': int(r * duration)} for s, r in grid]


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


def _peer_write(
    send: Callable[[np.ndarray, Callable[[], bytes]], None],
    base: np.ndarray,
    scenario: int,
    index: int,
) -> None:
    send(base, lambda: _HDR.pack(scenario, index, time.time_ns()))


def writer(
    path: str,
    plan: list[dict[str, Any]],
    fifo: str,
    segment: str,
    readers: int = 1,
    endpoints: tuple[str, ...] = (),
) -> None:
    """Writes every scenario of ``plan`` on ``path`` to ``readers`` readers (the Zenoh peer's
    ``endpoints``); prints one JSON line per scenario."""
    bases = {
        name: np.random.default_rng(1).integers(0, 255, shape, dtype=np.uint8)
        for name, shape in SIZES.items()
        if any(s['size'] == name for s in plan)
    }
    results = []
    largest = max(int(np.prod(SIZES[s['size']])) for s in plan)
    if path in peers.PEERS:
        if path == 'iceoryx2':
            send, close = peers.iox_writer(segment, readers, largest)
        else:
            send, close = peers.zenoh_writer(segment, list(endpoints), largest)
        time.sleep(1.0)  # paced: let every reader settle, as for the other paths
        for k, sc in enumerate(plan):
            write = functools.partial(_peer_write, send, bases[sc['size']], k)
            results.append(_pace(sc['rate'], sc['frames'], write))
            time.sleep(0.5)  # paced: a gap between scenarios
        time.sleep(0.5)  # paced: the last frames reach the readers before the writer goes
        close()
        print('WRITER ' + json.dumps(results), flush=True)
        return
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
    shm_pub = img_pub = None
    if path in ('shm', 'fast'):
        shm_pub = ShmPublisher(node, '/bench/frames', segment, largest, 4, frame_id='bench')
        count: Callable[[], int] = shm_pub.subscriber_count
    else:
        img_pub = node.create_publisher(Image, '/bench/frames', 10)
        count = img_pub.get_subscription_count
    msg = Image()
    deadline = time.monotonic() + 30
    while count() < readers and time.monotonic() < deadline:
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


def _peer_read(
    path: str,
    plan: list[dict[str, Any]],
    col: _Collector,
    segment: str,
    endpoint: str,
    idle_s: float,
) -> None:
    def on_frame(view: np.ndarray) -> None:
        now = time.time_ns()
        k, _i, t = _HDR.unpack_from(view[: _HDR.size].tobytes())
        col.add(k, now - t)

    poll: Callable[[float], None]
    if path == 'iceoryx2':
        poll = peers.iox_reader(segment, on_frame)
        close: Callable[[], None] = lambda: None  # noqa: E731
    else:
        close = peers.zenoh_reader(segment, endpoint, on_frame)
        poll = time.sleep  # paced: Zenoh calls back on its own thread
    print('READY', flush=True)
    deadline = time.monotonic() + sum(sc['frames'] / sc['rate'] + 1.0 for sc in plan) + 60
    while time.monotonic() < deadline:
        poll(0.1)
        done = all(col.n[k] >= sc['frames'] for k, sc in enumerate(plan))
        if done or (any(col.n) and time.monotonic() - col.last_seen > idle_s):
            break
    close()
    print('READER ' + json.dumps(col.report({})), flush=True)


def reader(
    path: str,
    plan: list[dict[str, Any]],
    fifo: str,
    idle_s: float,
    segment: str = '',
    endpoint: str = '',
) -> None:
    """Receives every scenario on ``path``; prints READY, then one JSON line with the samples."""
    col = _Collector(plan)
    if path in peers.PEERS:
        _peer_read(path, plan, col, segment, endpoint, idle_s)
        return
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
    from rt_fusion.ros.running import make_executor  # noqa: PLC0415
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


@contextlib.contextmanager
def busy_cores(on: bool) -> Iterator[int]:
    """While open, a busy loop per core (``on``), as the vehicle's shared cores are: yields how
    many. The loops end with the block, however it ends."""
    loops = [
        subprocess.Popen([sys.executable, '-c', 'while True: pass'])
        for _ in range(os.cpu_count() or 1 if on else 0)
    ]
    try:
        yield len(loops)
    finally:
        for loop in loops:
            loop.kill()
            loop.wait()


def run_path(
    path: str, plan: list[dict[str, Any]], domain: int, readers: int = 1, load: bool = False
) -> dict[str, Any]:
    """One writer and ``readers`` reader processes for ``path`` (beside a busy loop per core
    with ``load``); returns their reports (``reader``: the first one's, ``readers``: all)."""
    env = dict(
        os.environ,
        ROS_DOMAIN_ID=str(domain),
        ROS_AUTOMATIC_DISCOVERY_RANGE='LOCALHOST',
        PYTHONUNBUFFERED='1',
    )
    if path == 'ros_large':
        env['FASTDDS_BUILTIN_TRANSPORTS'] = 'LARGE_DATA'
    with tempfile.TemporaryDirectory() as tmp, busy_cores(load):
        fifo = str(Path(tmp) / 'floor.fifo')
        os.mkfifo(fifo)
        segment = f'rt_fusion_bench_{os.getpid()}_d{domain}'
        plan_json = json.dumps(plan)
        me = [sys.executable, '-m', 'rt_fusion_tools.bench_transport']
        common = ['--path', path, '--plan', plan_json, '--fifo', fifo, '--segment', segment]
        endpoints = [f'tcp/127.0.0.1:{linux.free_port()}' for _ in range(readers)]
        procs = []
        for k in range(readers):
            rd = subprocess.Popen(
                [*me, '--role', 'reader', *common, '--endpoint', endpoints[k]],
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            procs.append(rd)
        for rd in procs:
            _line(rd, 'READY', 60)
        wr = subprocess.Popen(
            [*me, '--role', 'writer', *common, '--reader-count', str(readers),
             '--endpoints', ','.join(endpoints)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )  # fmt: skip
        budget = sum(sc['frames'] / sc['rate'] + 1.0 for sc in plan) + 90
        written = json.loads(_line(wr, 'WRITER ', budget))
        got = [json.loads(_line(rd, 'READER ', budget)) for rd in procs]
        wr.wait(30)
        for rd in procs:
            rd.wait(30)
    return {'writer': written, 'reader': got[0], 'readers': got}
