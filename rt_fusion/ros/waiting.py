"""Waiting before a node starts streaming: for its subscribers, or for a start signal."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence

from rclpy.node import Node


def wait_until(
    ready: Callable[[], bool],
    timeout_s: float,
    stop: threading.Event,
    on_timeout: Callable[[], object] | None = None,
) -> bool:
    """Waits (polled every 50 ms) until ``ready()`` or ``timeout_s``; calls ``on_timeout`` when
    it gives up. Returns False only when ``stop`` was set (the caller should leave)."""
    end = time.monotonic() + timeout_s
    while not ready():
        if time.monotonic() > end:
            if on_timeout is not None:
                on_timeout()
            return True
        if stop.wait(0.05):  # paced: discovery, or a consumer's start signal
            return False
    return True


def wait_to_start(
    node: Node,
    counts: Sequence[Callable[[], int]],
    wait_subscribers_s: float,
    start_topic: str,
    started: threading.Event,
    start_timeout_s: float,
    stop: threading.Event,
) -> bool:
    """Before a source node's first message (replay_node, sim_node): every topic subscribed
    (bounded by ``wait_subscribers_s``, 0: do not wait), then the start signal on
    ``start_topic`` if one is set (bounded by ``start_timeout_s``); each timeout is logged and
    the node starts anyway. False when ``stop`` was set meanwhile."""
    log = node.get_logger()
    if wait_subscribers_s > 0 and not wait_until(
        lambda: all(count() > 0 for count in counts),
        wait_subscribers_s,
        stop,
        lambda: log.warning('not every topic has a subscriber: starting anyway'),
    ):
        return False
    return not start_topic or wait_until(
        started.is_set,
        start_timeout_s,
        stop,
        lambda: log.warning(f'nothing on {start_topic}: starting anyway'),
    )
