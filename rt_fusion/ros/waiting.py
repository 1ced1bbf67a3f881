"""Waiting before a node starts streaming: for its subscribers, or for a start signal."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence

from rclpy.node import Node

from rt_fusion.core.errors import RtFusionError


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


class NoSubscriberError(RtFusionError):
    """A source node whose topics nobody subscribed to within its wait: the graph is not there."""


def wait_to_start(
    node: Node,
    counts: Sequence[Callable[[], int]] | Mapping[str, Callable[[], int]],
    wait_subscribers_s: float,
    start_topic: str,
    started: threading.Event,
    start_timeout_s: float,
    stop: threading.Event,
    required: bool = False,
) -> bool:
    """Before a source node's first message (replay_node, sim_node): every topic subscribed
    (bounded by ``wait_subscribers_s``, 0: do not wait), then the start signal on
    ``start_topic`` if one is set (bounded by ``start_timeout_s``); each timeout is logged, with
    the topics still without a subscriber when ``counts`` names them, and the node starts anyway,
    unless ``required``: then it raises :class:`NoSubscriberError` naming them (a replay never
    plays to an absent graph). False when ``stop`` was set meanwhile."""
    log = node.get_logger()
    named = dict(counts) if isinstance(counts, Mapping) else dict(enumerate(counts))

    def missing() -> list[str]:
        return [str(name) for name, count in named.items() if count() <= 0]

    def gave_up() -> None:
        names = missing() if isinstance(counts, Mapping) else []
        which = f': {", ".join(names)}' if names else ''
        if required:
            raise NoSubscriberError(
                f'no subscriber after {wait_subscribers_s:g} s{which}: the graph is not there'
            )
        log.warning(f'not every topic has a subscriber{which}: starting anyway')

    if wait_subscribers_s > 0 and not wait_until(
        lambda: not missing(), wait_subscribers_s, stop, gave_up
    ):
        return False
    return not start_topic or wait_until(
        started.is_set,
        start_timeout_s,
        stop,
        lambda: log.warning(f'nothing on {start_topic}: starting anyway'),
    )
