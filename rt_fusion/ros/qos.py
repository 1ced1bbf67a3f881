"""QoS the nodes share: the user's overrides of the main publishers and subscriptions.

A vehicle stack sets QoS per topic in its parameter files, as rclpy reads them
(``qos_overrides.<resolved topic>.<publisher|subscription>.<policy>``, e.g.
``qos_overrides./imu/out/imu.subscription.reliability: reliable`` in the fusion's section):
history, depth and reliability of the entities created with :data:`OVERRIDABLE`. They are
read-only parameters (``ros2 param describe`` lists them); a bad one stops the start-up with
its name (:func:`check_overrides`, before anything is created). Sensor inputs are best effort by
default (they match best-effort and reliable drivers alike); lock-step replays make them
reliable (nothing may be lost).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rclpy.qos_overriding_options import QoSOverridingOptions

from rt_fusion.core.errors import ParameterError

#: Pass as ``qos_overriding_options`` to create_publisher / create_subscription.
OVERRIDABLE = QoSOverridingOptions.with_default_policies()

#: The policies a QoS override may set, and the values each takes (rclpy's names, any case).
_CHOICES = {
    'reliability': ('reliable', 'best_effort', 'system_default'),
    'history': ('keep_last', 'keep_all', 'system_default'),
    'durability': ('volatile', 'transient_local', 'system_default'),
    'liveliness': ('automatic', 'manual_by_topic', 'system_default'),
}
_INTEGERS = ('depth', 'deadline', 'lifespan', 'liveliness_lease_duration')


def check_overrides(overrides: Mapping[str, Any]) -> None:
    """Every ``qos_overrides.*`` among a node's parameter overrides (name → value) names a
    publisher or subscription and a policy, with a value that policy takes. rclpy checks them
    only as each entity is created, and says neither the parameter nor the choices.

    Raises:
        ParameterError: the first bad one, by its full name.
    """
    for name, value in sorted(overrides.items()):
        if not name.startswith('qos_overrides.'):
            continue
        head, _, policy = name.rpartition('.')
        entity = head.rsplit('.', 1)[-1].split('_', 1)[0]
        if entity not in ('publisher', 'subscription') or not head.startswith('qos_overrides./'):
            raise ParameterError(
                name, value, 'not qos_overrides./<topic>.<publisher|subscription>.<policy>'
            )
        if policy in _CHOICES:
            if not isinstance(value, str) or value.lower() not in _CHOICES[policy]:
                raise ParameterError(name, value, f'{policy} is one of {_CHOICES[policy]}')
        elif policy in _INTEGERS:
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ParameterError(name, value, f'{policy} is an integer >= 0')
        else:
            known = (*_CHOICES, *_INTEGERS)
            raise ParameterError(name, value, f'no QoS policy {policy!r} (one of {known})')
