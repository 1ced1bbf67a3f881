#!/usr/bin/env python3
"""Prints messages of a topic as JSON lines (``ros2 topic echo`` where ros2cli is missing).

  python tools/topic_echo.py /imu/out/imu sensor_msgs/msg/Imu --count 10

Each line is ``MSG {json}``; at the end ``SUMMARY {"received": n}``. ``--qos sensor`` subscribes
best-effort (SensorDataQoS), ``--qos latched`` reliable and transient-local (a latched topic's
history, such as the fusion's audio events), the default is reliable with ``--depth``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

import rclpy
from rclpy.duration import Duration
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy, qos_profile_sensor_data
from std_msgs.msg import UInt64

from rt_fusion.ros import compat
from rt_fusion.ros.conversions import message_class, msg_to_dict
from rt_fusion.ros.running import make_executor


def main(argv: list[str] | None = None) -> int:
    """Echoes the topic; returns the exit status (1 when fewer than --count arrived)."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument('topic')
    parser.add_argument('type', help='e.g. sensor_msgs/msg/Imu')
    parser.add_argument('--count', type=int, default=0, help='stop after this many (0: never)')
    parser.add_argument('--timeout', type=float, default=0.0, help='stop after this long [s]')
    parser.add_argument(
        '--idle',
        type=float,
        default=0.0,
        help='stop when nothing arrived for this long, once something did [s]',
    )
    parser.add_argument('--qos', choices=('reliable', 'sensor', 'latched'), default='reliable')
    parser.add_argument('--depth', type=int, default=1000)
    parser.add_argument('--quiet', action='store_true', help='only the summary')
    parser.add_argument(
        '--matched',
        type=int,
        default=0,
        metavar='N',
        help='print MATCHED once N publishers are matched (the data path, not just the graph)',
    )
    parser.add_argument(
        '--ack',
        metavar='TOPIC',
        help='after each message publish std_msgs/UInt64 (the count) here (replay lock-step)',
    )
    args = parser.parse_args(argv)
    cls = message_class(args.type)
    rclpy.init()
    node = rclpy.create_node('topic_echo')
    received = 0
    last = time.monotonic()

    def on_msg(msg: object) -> None:
        nonlocal received, last
        received += 1
        last = time.monotonic()
        if not args.quiet:
            print('MSG ' + json.dumps(msg_to_dict(msg)), flush=True)
        if ack_pub is not None:
            ack_pub.publish(UInt64(data=received))

    qos = (
        qos_profile_sensor_data
        if args.qos == 'sensor'
        else QoSProfile(
            depth=args.depth,
            reliability=ReliabilityPolicy.RELIABLE,
            durability=DurabilityPolicy.TRANSIENT_LOCAL
            if args.qos == 'latched'
            else DurabilityPolicy.VOLATILE,
        )
    )
    ack_pub = (
        node.create_publisher(
            UInt64, args.ack, QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE)
        )
        if args.ack
        else None
    )
    if ack_pub is not None:
        # The acknowledged source starts on seeing our subscription below, and an ack published
        # before this publisher matches its reader is lost (a lock-step timeout): match first.
        print('READY', flush=True)
        ready = time.monotonic() + (args.timeout or 60.0)
        while ack_pub.get_subscription_count() == 0 and time.monotonic() < ready:
            time.sleep(0.02)
    matched_printed = False

    def on_matched(info: Any) -> None:
        nonlocal matched_printed
        if args.matched and not matched_printed and info.current_count >= args.matched:
            matched_printed = True
            print(f'MATCHED {info.current_count}', flush=True)

    node.create_subscription(
        cls,
        args.topic,
        on_msg,
        qos,
        event_callbacks=compat.subscription_events(matched=on_matched),
    )
    executor = make_executor()
    executor.add_node(node)
    if ack_pub is None:
        print('READY', flush=True)
    start = time.monotonic()
    try:
        while compat.ok():
            executor.spin_once(timeout_sec=0.05)
            now = time.monotonic()
            if args.count and received >= args.count:
                break
            if args.timeout and now - start > args.timeout:
                break
            if args.idle and received and now - last > args.idle:
                break
    except KeyboardInterrupt:
        pass
    if ack_pub is not None:
        # The last acknowledgement is published just before the loop ends; destroying the node
        # at once can drop it before the source has it (a lock-step source then waits out its
        # timeout on the last message): wait until the readers have taken every ack.
        ack_pub.wait_for_all_acked(Duration(seconds=10.0))
    print('SUMMARY ' + json.dumps({'received': received}), flush=True)
    node.destroy_node()
    compat.try_shutdown()
    return 0 if not args.count or received >= args.count else 1


if __name__ == '__main__':
    sys.exit(main())
