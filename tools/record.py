#!/usr/bin/env python3
"""Records topics of the live graph into a rosbag2 (MCAP), written with rosbags.

  python tools/record.py --out results/bags/run1 /imu/out/imu /radar/out/objects /camera/out/image
  python tools/record.py --out DIR --duration 30 /imu/out/imu:sensor_msgs/msg/Imu

Each topic is recorded as the serialized bytes that arrived (no decode, no re-encode), with the
receive time as log time. A type may be given as ``topic:type``; otherwise it is discovered from
the graph (waiting up to ``--discover-s``).

Each topic is subscribed with the QoS its publishers offer, as ``ros2 bag record`` does: reliable
only when every publisher is reliable (a reliable subscription never matches a best-effort
publisher, so radar objects and odometry would record nothing), transient-local only when every
publisher is. ``--qos TOPIC=best_effort|reliable[,transient_local]`` sets it instead. A topic
that records no message is an error at the end (exit status 1, named).

A shared-memory stream is recorded by its base topic (``/camera/out/image`` when
``/camera/out/image/shm`` carries ShmFrame descriptors): the recorder maps the ring, resolves each
descriptor into a full ``sensor_msgs/Image`` and records that, so a bag never depends on a segment
that is gone after the run.

SIGINT or SIGTERM (or ``--duration``, ``--count``) ends the recording cleanly: the bag is
closed with every message received up to then and readable by ``ros2 bag`` (of Jazzy on; of
Humble on with ``--bag-version 8``) and rosbags. Prints
``READY`` when subscribed (with each topic's QoS), ``FIRST topic`` when a topic's first message
is written, ``QOS topic=…`` when a late publisher changes a topic's QoS, then a table of counts and
``RESULT messages=… topics=… silent=… bag_mb=…``.
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
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from rclpy.serialization import serialize_message
from rclpy.signals import SignalHandlerOptions
from sensor_msgs.msg import Image
from std_msgs.msg import UInt64

from rt_fusion import report
from rt_fusion.core.scenario.bagout import BAG_VERSION, READERS, BagWriter, typestore
from rt_fusion.ros import compat
from rt_fusion.ros.conversions import message_class
from rt_fusion.ros.running import make_executor
from rt_fusion.ros.shm_transport import ImageCodec, ShmSubscription

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


RELIABILITY = {
    'reliable': ReliabilityPolicy.RELIABLE,
    'best_effort': ReliabilityPolicy.BEST_EFFORT,
}
DURABILITY = {
    'volatile': DurabilityPolicy.VOLATILE,
    'transient_local': DurabilityPolicy.TRANSIENT_LOCAL,
}


def parse_qos(items: list[str]) -> dict[str, tuple[str, str]]:
    """``--qos`` values: topic -> (reliability, durability).

    Raises:
        ValueError: not ``TOPIC=RELIABILITY[,DURABILITY]`` with known policy names.
    """
    out: dict[str, tuple[str, str]] = {}
    for item in items:
        topic, sep, policies = item.partition('=')
        rel, _, dur = policies.partition(',')
        dur = dur or 'volatile'
        if not sep or not topic or rel not in RELIABILITY or dur not in DURABILITY:
            raise ValueError(
                f'--qos {item!r}: expected TOPIC=RELIABILITY[,DURABILITY] with reliability in '
                f'{sorted(RELIABILITY)} and durability in {sorted(DURABILITY)}'
            )
        out[topic] = (rel, dur)
    return out


def offered_qos(node: Any, topic: str) -> tuple[str, str] | None:
    """The (reliability, durability) that matches every publisher of ``topic`` now, or None
    when it has none: reliable and transient-local only where every publisher offers them."""
    infos = node.get_publishers_info_by_topic(topic)
    if not infos:
        return None
    reliable = all(i.qos_profile.reliability == ReliabilityPolicy.RELIABLE for i in infos)
    latched = all(i.qos_profile.durability == DurabilityPolicy.TRANSIENT_LOCAL for i in infos)
    return (
        'reliable' if reliable else 'best_effort',
        'transient_local' if latched else 'volatile',
    )


def main(argv: list[str] | None = None) -> int:
    """Records until a signal or ``--duration``; returns the exit status."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument('topics', nargs='+', help='topic or topic:type')
    parser.add_argument('--out', type=Path, required=True, help='bag directory (must not exist)')
    parser.add_argument('--duration', type=float, default=0.0, help='stop after this long [s]')
    parser.add_argument('--bag-version', type=int, choices=sorted(READERS), default=BAG_VERSION)
    parser.add_argument(
        '--count', type=int, default=0, help='stop after this many messages (0: never)'
    )
    parser.add_argument('--discover-s', type=float, default=10.0)
    parser.add_argument('--depth', type=int, default=1000, help='subscription queue depth')
    parser.add_argument(
        '--qos',
        action='append',
        default=[],
        metavar='TOPIC=POLICY',
        help="subscription QoS of a topic instead of its publishers' offer: "
        'TOPIC=best_effort|reliable[,transient_local|volatile] (repeatable)',
    )
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
    try:
        explicit = parse_qos(args.qos)
    except ValueError as err:
        parser.error(str(err))
    stray = sorted(set(explicit) - set(wanted))
    if stray:
        parser.error(f'--qos for topics not recorded: {stray}')

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
    writer = BagWriter(args.out, typestore(), version=args.bag_version)
    lock = threading.Lock()
    reliable = QoSProfile(depth=args.depth, reliability=ReliabilityPolicy.RELIABLE)
    ack_pub = node.create_publisher(UInt64, args.ack, reliable) if args.ack else None
    policies: dict[str, str] = {}

    alive: set[str] = set()

    def written(topic: str) -> None:
        if topic not in alive:  # a topic coming alive is worth a line
            alive.add(topic)
            print(f'FIRST {topic}', flush=True)
        total = sum(writer.counts.values())
        if ack_pub is not None:
            ack_pub.publish(UInt64(data=total))
        if args.count and total >= args.count:
            stop.set()

    keep: list[ShmSubscription] = []
    subs: dict[str, Any] = {}
    callbacks: dict[str, Any] = {}
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
                written(topic)

            keep.append(ShmSubscription(node, topic, on_frame, transport='shm', depth=args.depth))
            continue

        def on_raw(data: bytes, topic: str = topic, typename: str = typename) -> None:
            with lock:
                writer.write_raw(topic, typename, time.time_ns(), data)
            written(topic)

        callbacks[topic] = on_raw

    def subscribe(topic: str, rel: str, dur: str) -> None:
        old = subs.pop(topic, None)
        if old is not None:
            node.destroy_subscription(old)
        policies[topic] = rel if dur == 'volatile' else f'{rel},{dur}'
        qos = QoSProfile(
            depth=args.depth, reliability=RELIABILITY[rel], durability=DURABILITY[dur]
        )
        cls = message_class(types[topic])
        subs[topic] = node.create_subscription(cls, topic, callbacks[topic], qos, raw=True)

    # A topic typed on the command line may have no publisher yet: it starts reliable and adapts
    # to the first publishers seen (as ros2 bag record does); a topic that stays silent fails.
    undecided: set[str] = set()
    for topic in callbacks:
        offer = explicit.get(topic) or offered_qos(node, topic)
        if offer is None:
            undecided.add(topic)
        subscribe(topic, *(offer or ('reliable', 'volatile')))
    executor = make_executor()
    executor.add_node(node)
    print(
        'READY ' + ' '.join(f'{t}:{ty}' for t, ty in types.items()),
        ' '.join(f'{t}={q}' for t, q in policies.items()),
        flush=True,
    )
    start = time.monotonic()
    try:
        next_check = start
        while not stop.is_set():
            executor.spin_once(timeout_sec=0.05)
            now = time.monotonic()
            if args.duration and now - start >= args.duration:
                break
            if undecided and now >= next_check:
                next_check = now + 0.2
                for topic in sorted(undecided):
                    offer = offered_qos(node, topic)
                    if offer is not None:
                        undecided.discard(topic)
                        if offer != ('reliable', 'volatile'):
                            subscribe(topic, *offer)
                            print(f'QOS {topic}={policies[topic]}', flush=True)
    finally:
        for shm in keep:
            shm.destroy()
        with lock:
            writer.close()
        node.destroy_node()
        compat.try_shutdown()
    size = sum(p.stat().st_size for p in args.out.iterdir())
    for topic in sorted(types):
        report.console.print(
            f'  {topic:36s} {writer.counts.get(topic, 0):7d}  {policies.get(topic, "shm")}'
        )
    report.console.print(f'  bag metadata version {writer.version}: {writer.readers}')
    silent = sorted(t for t in types if not writer.counts.get(t))
    if silent:
        print(
            f'record: no message recorded on {silent}: no publisher, or one whose QoS no '
            'subscription here matches (see --qos)',
            file=sys.stderr,
        )
    report.result_line(
        messages=sum(writer.counts.values()),
        topics=len(writer.counts),
        silent=len(silent),
        bag_mb=size / 1e6,
    )
    return 1 if silent else 0


if __name__ == '__main__':
    sys.exit(main())
