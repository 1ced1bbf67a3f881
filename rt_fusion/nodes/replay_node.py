"""replay_node: a rosbag2 (MCAP or sqlite3, read with ``rosbags``) published into the live graph.

Every selected topic is published under its recorded name (or its ``remap`` target) with the
stored CDR bytes, so stamps and values arrive exactly as recorded; ``/clock`` carries the recorded
time for nodes with ``use_sim_time``. Pacing (:mod:`rt_fusion.core.replay`): ``realtime`` (with
``rate``), ``lockstep`` (the next message waits for an acknowledgement on ``ack_topic``, a
``std_msgs/UInt64``; ``tools/topic_echo.py --ack`` gives one) or ``fast``. The node ends by itself
when the bag is done (exit status 0) and logs what it sent.

Not yet (issue 7): payload topics into the shared-memory rings (camera images from a bag as
``ShmFrame`` descriptors), radar stamps from the trigger topic, looping.
"""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path
from typing import Any, ClassVar

from rclpy.qos import QoSProfile, ReliabilityPolicy
from rclpy.task import Future
from rosgraph_msgs.msg import Clock
from std_msgs.msg import UInt64

from rt_fusion.core.bag import BagError, iter_messages, open_reader
from rt_fusion.core.errors import ParameterError
from rt_fusion.core.replay import Pacer, ReplayParams, parse_remaps
from rt_fusion.nodes import node_utils
from rt_fusion.nodes.conversions import message_class, ns_to_time


class ReplayNode(node_utils.DeviceNode):
    """A bag into the graph; see the module docstring."""

    PARAM_GROUPS: ClassVar[node_utils.ParamGroups] = ((ReplayParams, ''),)

    def __init__(self, **kwargs: Any) -> None:
        super().__init__('replay', **kwargs)
        self.params: ReplayParams | None = None
        self.finished: Future[int] = Future()
        self.pubs: dict[str, Any] = {}
        self.sent = 0
        self.ack_timeouts = 0
        self._acked = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def configure(self) -> None:
        """Opens the bag, checks the topics, creates a publisher per topic."""
        p = self.params = node_utils.declare_params(self, ReplayParams)
        remaps = parse_remaps(p.remap)
        try:
            with open_reader(p.bag) as reader:
                types = {c.topic: c.msgtype for c in reader.connections}
        except BagError as err:
            raise ParameterError('bag', p.bag, str(err)) from err
        except Exception as err:
            raise ParameterError('bag', p.bag, f'not a readable rosbag2: {err}') from err
        topics = list(p.topics) or sorted(types)
        unknown = [t for t in topics if t not in types]
        if unknown:
            raise ParameterError(
                'topics', p.topics, f'not in the bag: {unknown} (it has {sorted(types)})'
            )
        qos = QoSProfile(depth=p.qos_depth, reliability=ReliabilityPolicy.RELIABLE)
        for topic in topics:
            try:
                cls = message_class(types[topic])
            except (ImportError, AttributeError, ValueError) as err:
                raise ParameterError(
                    'topics', topic, f'message type {types[topic]} is not installed: {err}'
                ) from err
            self.pubs[topic] = self.create_publisher(cls, remaps.get(topic, topic), qos)
        self.topics = topics
        self.clock_pub = self.create_publisher(Clock, '/clock', 10) if p.publish_clock else None
        if p.mode == 'lockstep':
            self.create_subscription(UInt64, p.ack_topic, lambda _m: self._acked.set(), qos)

    def activate(self) -> None:
        """Starts the publishing thread."""
        self._stop.clear()
        self._thread = threading.Thread(target=self._play, name='replay', daemon=True)
        self._thread.start()

    def deactivate(self) -> None:
        """Stops the publishing thread."""
        self._stop.set()
        self._acked.set()
        if self._thread is not None:
            self._thread.join(2.0)
            self._thread = None

    def _play(self) -> None:
        p = self.params
        assert p is not None
        if self._stop.wait(p.start_delay_s):
            return
        pacer = Pacer(p.rate)
        started = time.monotonic()
        for m in iter_messages(Path(p.bag), self.topics, decode=False):
            if self._stop.is_set():
                return
            if p.mode == 'realtime':
                delay = (
                    pacer.due_ns(m.log_time_ns, time.monotonic_ns()) - time.monotonic_ns()
                ) / 1e9
                if delay > 0 and self._stop.wait(delay):  # paced: the recorded timeline
                    return
            if self.clock_pub is not None:
                self.clock_pub.publish(Clock(clock=ns_to_time(m.log_time_ns)))
            self._acked.clear()
            self.pubs[m.topic].publish(m.raw)
            self.sent += 1
            if p.mode == 'lockstep' and not self._acked.wait(p.ack_timeout_s):
                self.ack_timeouts += 1
                self.get_logger().warning(
                    f'no acknowledgement on {p.ack_topic} within {p.ack_timeout_s} s',
                    throttle_duration_sec=5.0,
                )
        self.get_logger().info(
            f'replayed {self.sent} messages of {len(self.topics)} topics in '
            f'{time.monotonic() - started:.1f} s ({p.mode}; {self.ack_timeouts} ack timeouts)'
        )
        print(f'REPLAYED {self.sent} ack_timeouts={self.ack_timeouts}', flush=True)
        if not self.finished.done():
            self.finished.set_result(self.sent)


def main(args: list[str] | None = None) -> int:
    """Entry point of ``replay_node``."""
    return node_utils.run(ReplayNode, args)


if __name__ == '__main__':
    sys.exit(main())
