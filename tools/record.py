#!/usr/bin/env python3
"""Records topics of the live graph into a rosbag2 (MCAP), written with rosbags.

  python tools/record.py --out results/bags/run1 /imu/out/imu /radar/out/objects /camera/out/image
  python tools/record.py --out DIR --duration 30 /imu/out/imu:sensor_msgs/msg/Imu

Each topic is recorded as the serialized bytes that arrived (no decode, no re-encode), with the
receive time as log time. A type may be given as ``topic:type``; otherwise it is discovered from
the graph (waiting up to ``--discover-s``). A shared-memory stream is recorded by its base topic
(``/camera/out/image`` when ``/camera/out/image/shm`` carries ShmFrame descriptors): the recorder
maps the ring, resolves each descriptor into a full ``sensor_msgs/Image`` and records that, so a
bag never depends on a segment that is gone after the run.

SIGINT or SIGTERM (or ``--duration``, ``--count``) ends the recording cleanly: the bag is
closed with every message received up to then and readable by ``ros2 bag`` and rosbags. Prints
``READY`` when subscribed, then a table of counts and ``RESULT messages=… topics=… bag_mb=…``.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

import rclpy
from rclpy.qos import QoSProfile, ReliabilityPolicy
from rclpy.serialization import serialize_message
from rclpy.signals import SignalHandlerOptions
from sensor_msgs.msg import Image
from std_msgs.msg import UInt64

from rt_fusion.core.scenario.bagout import BagWriter, typestore
from rt_fusion.ros import compat
from rt_fusion.ros.conversions import message_class
from rt_fusion.ros.node_utils import make_executor
from rt_fusion.ros.shm_transport import ImageCodec, ShmSubscription
from rt_fusion_tools import report

SHM_TYPE = 'rt_fusion_msgs/msg/ShmFrame'
IMAGE_TYPE = 'sensor_msgs/msg/Image'


def _discover(node: Any, wanted: dict[str, str | None], seconds: float) -> dict[str, str]:
    """Types of the wanted topics from the graph; a ShmFrame ``X/shm`` makes ``X`` an Image."""
    end = time.monotonic() + seconds
    while True:
        graph = {name: types[0] for name, types in node.get_topic_names_and_types() if types}
        found: dict[str, str] = {}
        for topic, given in wanted.items():
            if given:
                found[topic] = given
            elif graph.get(topic + '/shm') == SHM_TYPE:
                found[topic] = SHM_TYPE
            elif topic in graph:
                found[topic] = graph[topic]
        if len(found) == len(wanted) or time.monotonic() > end:
            return found
        time.sleep(0.1)


def main(argv: list[str] | None = None) -> int:
    """Records until a signal or ``--duration``; returns the exit status."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument('topics', nargs='+', help='topic or topic:type')
    parser.add_argument('--out', type=Path, required=True, help='bag directory (must not exist)')
    parser.add_argument('--duration', type=float, default=0.0, help='stop after this long [s]')
    parser.add_argument(
        '--count', type=int, default=0, help='stop after this many messages (0: never)'
    )
    parser.add_argument('--discover-s', type=float, default=10.0)
    parser.add_argument('--depth', type=int, default=1000, help='subscription queue depth')
    parser.add_argument(
        '--ack',
        metavar='TOPIC',
        help='after each message written, publish std_msgs/UInt64 (the count) here: '
        'replay_node mode:=lockstep ack_topic:=TOPIC then paces itself on the recorder',
    )
    args = parser.parse_args(argv)
    if args.out.exists():
        parser.error(f'{args.out} exists: choose a new folder')
    wanted: dict[str, str | None] = {}
    for item in args.topics:
        topic, _, typename = item.partition(':')
        wanted[topic] = typename or None

    stop = threading.Event()

    def on_signal(signum: int, _frame: object) -> None:
        stop.set()

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    rclpy.init(signal_handler_options=SignalHandlerOptions.NO)
    node = rclpy.create_node('rt_fusion_record')
    types = _discover(node, wanted, args.discover_s)
    missing = sorted(set(wanted) - set(types))
    if missing:
        print(f'record: no publisher (so no type) for {missing}; give topic:type', file=sys.stderr)
        node.destroy_node()
        compat.try_shutdown()
        return 2
    writer = BagWriter(args.out, typestore())
    lock = threading.Lock()
    qos = QoSProfile(depth=args.depth, reliability=ReliabilityPolicy.RELIABLE)
    ack_pub = node.create_publisher(UInt64, args.ack, qos) if args.ack else None

    def written() -> None:
        total = sum(writer.counts.values())
        if ack_pub is not None:
            ack_pub.publish(UInt64(data=total))
        if args.count and total >= args.count:
            stop.set()

    keep: list[Any] = []
    for topic, typename in types.items():
        if typename == SHM_TYPE:
            codec = ImageCodec()

            def on_frame(frame: Any, _path: str, topic: str = topic, codec: Any = codec) -> None:
                msg = codec.to_msg(frame.array, frame.desc, Image())
                if not frame.valid():
                    return  # overwritten while copied: the ring's overrun count says so
                data = serialize_message(msg)
                with lock:
                    writer.write_raw(topic, IMAGE_TYPE, time.time_ns(), data)
                written()

            keep.append(ShmSubscription(node, topic, on_frame, transport='shm', depth=args.depth))
            continue

        def on_raw(data: bytes, topic: str = topic, typename: str = typename) -> None:
            with lock:
                writer.write_raw(topic, typename, time.time_ns(), data)
            written()

        keep.append(
            node.create_subscription(message_class(typename), topic, on_raw, qos, raw=True)
        )
    executor = make_executor()
    executor.add_node(node)
    print('READY ' + ' '.join(f'{t}:{ty}' for t, ty in types.items()), flush=True)
    start = time.monotonic()
    try:
        while not stop.is_set():
            executor.spin_once(timeout_sec=0.05)
            if args.duration and time.monotonic() - start >= args.duration:
                break
    finally:
        for sub in keep:
            if isinstance(sub, ShmSubscription):
                sub.destroy()
        with lock:
            writer.close()
        node.destroy_node()
        compat.try_shutdown()
    size = sum(p.stat().st_size for p in args.out.iterdir())
    for topic, n in sorted(writer.counts.items()):
        report.console.print(f'  {topic:36s} {n:7d}')
    report.result_line(
        messages=sum(writer.counts.values()), topics=len(writer.counts), bag_mb=size / 1e6
    )
    return 0


if __name__ == '__main__':
    sys.exit(main())
