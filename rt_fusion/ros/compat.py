"""The one place that knows which ROS 2 distribution's rclpy is running.

Supported and tested (``.ci/run``): Jazzy (rclpy 7.1, the LTS, default) and Kilted (rclpy 9.1).
Where their rclpy differ, the rest of the code goes through the names here:

- ``ok`` / ``try_shutdown``: rclpy 7.1 does not re-export them explicitly from ``rclpy``
  (``rclpy.ok`` works at run time, but a type checker rejects it); both have them in
  ``rclpy.utilities``.
- ``events_executor()``: ``rclpy.experimental.events_executor.EventsExecutor`` exists in 7.1.6
  and 9.1; Humble's rclpy 3.3 has no ``rclpy.experimental`` (``None`` there).
- ``SubscriptionEventCallbacks`` / ``PublisherEventCallbacks``: ``rclpy.event_handler`` since
  Iron (ros2/rclpy#1058, which renamed ``rclpy.qos_event``); Humble has only
  ``rclpy.qos_event``, and no ``matched`` event there (``MATCHED_EVENTS`` is False: tools that
  wait for a match say so).
- ``publisher_events(matched=...)`` / ``subscription_events(matched=...)``: event callbacks with
  a ``matched`` callback where the distribution has the event (Iron and later, ros2/rclpy#1083);
  on Humble the callback is left out (its ``qos_event`` callbacks reject the keyword), so callers
  must not wait for it there.
- ``publisher_counter(node, subscription)``: ``Subscription.get_publisher_count`` exists since
  rclpy 4.0 (ros2/rclpy#1089, Iron); on Humble the graph's count of publishers on the topic
  (``Node.count_publishers``) stands in.
- ``discovery_env()``: ``ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST`` (Iron and later; Jazzy warns
  that ``ROS_LOCALHOST_ONLY`` is deprecated) or Humble's ``ROS_LOCALHOST_ONLY=1``.
- Timer callbacks take no argument: rclpy 9.1 passes a ``TimerInfo`` to callbacks that accept
  one, 7.1 never does (so nothing here relies on it).
- Types: ``Future``, ``Subscription`` and ``Publisher`` are generic in 9.1 only; annotations in
  the nodes use them unparameterised. Calls into rclpy 7.1's untyped functions are allowed by
  ``untyped_calls_exclude = ['rclpy']`` in pyproject.toml (mypy).
"""

from __future__ import annotations

import importlib.metadata
import os
from collections.abc import Callable
from typing import Any

from rclpy.utilities import ok, try_shutdown

try:
    from rclpy.event_handler import PublisherEventCallbacks, SubscriptionEventCallbacks

    MATCHED_EVENTS = True
except ImportError:  # Humble
    from rclpy.qos_event import (  # type: ignore[no-redef,unused-ignore]
        PublisherEventCallbacks,
        SubscriptionEventCallbacks,
    )

    MATCHED_EVENTS = False

__all__ = [
    'DISTROS',
    'MATCHED_EVENTS',
    'PublisherEventCallbacks',
    'SubscriptionEventCallbacks',
    'discovery_env',
    'distro',
    'events_executor',
    'ok',
    'publisher_counter',
    'publisher_events',
    'rclpy_version',
    'subscription_events',
    'try_shutdown',
]

# rclpy major version -> distribution (rclpy's own numbering; Humble 3, Iron 5, Jazzy 7, Kilted 9).
DISTROS = {3: 'humble', 5: 'iron', 7: 'jazzy', 8: 'kilted', 9: 'kilted', 10: 'rolling'}


def rclpy_version() -> tuple[int, ...]:
    """The installed rclpy's version (from the wheel's or the apt package's metadata)."""
    for name in ('rclpy', 'ros-rclpy'):
        try:
            text = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
        return tuple(int(part) for part in text.split('.')[:3] if part.isdigit())
    return ()


def distro() -> str:
    """The ROS 2 distribution of the running rclpy ('jazzy', 'kilted', ...; 'unknown')."""
    version = rclpy_version()
    return (
        DISTROS.get(version[0], 'unknown') if version else os.environ.get('ROS_DISTRO', 'unknown')
    )


def events_executor() -> Any | None:
    """rclpy's EventsExecutor, or None where this distribution has none (Humble)."""
    try:
        from rclpy.experimental.events_executor import EventsExecutor  # noqa: PLC0415
    except ImportError:
        return None
    return EventsExecutor()


def discovery_env(domain_id: int) -> dict[str, str]:
    """Variables that keep a graph on this host in its own domain, for every distribution."""
    if distro() == 'humble':
        return {'ROS_DOMAIN_ID': str(domain_id), 'ROS_LOCALHOST_ONLY': '1'}
    return {'ROS_DOMAIN_ID': str(domain_id), 'ROS_AUTOMATIC_DISCOVERY_RANGE': 'LOCALHOST'}


def publisher_events(*, matched: Callable[[Any], None] | None = None) -> Any:
    """PublisherEventCallbacks with ``matched`` where the distribution has the event."""
    if matched is not None and MATCHED_EVENTS:
        return PublisherEventCallbacks(matched=matched)
    return PublisherEventCallbacks()


def subscription_events(*, matched: Callable[[Any], None] | None = None) -> Any:
    """SubscriptionEventCallbacks with ``matched`` where the distribution has the event."""
    if matched is not None and MATCHED_EVENTS:
        return SubscriptionEventCallbacks(matched=matched)
    return SubscriptionEventCallbacks()


def publisher_counter(node: Any, subscription: Any) -> Callable[[], int]:
    """A function counting the publishers of ``subscription``'s topic: the subscription's own
    matched count (rclpy 4.0 and later), or on Humble the graph's count for its topic."""
    own = getattr(subscription, 'get_publisher_count', None)
    if own is not None:
        return own  # type: ignore[no-any-return]
    topic = subscription.topic_name
    return lambda: int(node.count_publishers(topic))
