"""Publishes std_msgs/UInt64 (0, 1, 2, …) on a topic with a chosen reliability (test helper).

  python -m tests.tools.qos_talker /topic --best-effort --rate 50

Prints READY once the publisher exists; runs until SIGINT/SIGTERM.
"""

from __future__ import annotations

import argparse
import signal
import threading

import rclpy
from rclpy.qos import QoSProfile, ReliabilityPolicy
from rclpy.signals import SignalHandlerOptions
from std_msgs.msg import UInt64

from rt_fusion.ros import compat


def main() -> None:
    """Publishes until a signal."""
    parser = argparse.ArgumentParser()
    parser.add_argument('topic')
    parser.add_argument('--best-effort', action='store_true')
    parser.add_argument('--rate', type=float, default=50.0)
    args = parser.parse_args()
    stop = threading.Event()
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    rclpy.init(signal_handler_options=SignalHandlerOptions.NO)
    node = rclpy.create_node('qos_talker')
    reliability = ReliabilityPolicy.BEST_EFFORT if args.best_effort else ReliabilityPolicy.RELIABLE
    pub = node.create_publisher(UInt64, args.topic, QoSProfile(depth=10, reliability=reliability))
    print('READY', flush=True)
    n = 0
    while not stop.wait(1.0 / args.rate):  # paced: the publishing rate
        pub.publish(UInt64(data=n))
        n += 1
    node.destroy_node()
    compat.try_shutdown()


if __name__ == '__main__':
    main()
