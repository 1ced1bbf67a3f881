"""Yielding to an emergency vehicle: slow down and keep right while one is reported.

The fusion marks the track it hears a siren from as an emergency vehicle
(rt_fusion_msgs/Object CLASS_EMERGENCY_VEHICLE). While such an object is in the object lists,
and for ``hold_s`` after the last one, the planner's goal changes: its cruise speed becomes at
most ``speed_mps`` and its preferred lateral offset ``offset_m`` (negative: to the right of the
reference). The planner's limits, obstacles and collision checks are unchanged: yielding never
overrides safety, it only moves the target the candidates are scored against.
"""

from __future__ import annotations

import dataclasses

from rt_fusion.core.params import param
from rt_fusion.core.planning.frenet import PlannerParams


@dataclasses.dataclass(frozen=True)
class EmergencyParams:
    """How the planner yields."""

    react: bool = param('yield to emergency vehicles (false: ignore them)', default=True)
    speed_mps: float = param('cruise speed while yielding', unit='m/s', default=8.0, low=0.0)
    offset_m: float = param(
        'preferred lateral offset while yielding (negative: right)', unit='m', default=-0.875
    )
    hold_s: float = param(
        'keep yielding this long after the last report', unit='s', default=3.0, low=0.0
    )
    min_probability: float = param(
        'reports below this class probability are ignored', default=0.5, low=0.0, high=1.0
    )


class EmergencyYield:
    """Tracks whether to yield; :meth:`goal` gives the planner parameters to plan with."""

    def __init__(self, params: EmergencyParams | None = None) -> None:
        self.p = params or EmergencyParams()
        self.last_seen_ns: int | None = None
        self.episodes = 0  # times yielding began
        self._active = False

    def report(self, stamp_ns: int, probabilities: list[float]) -> None:
        """An object list's emergency vehicles (their class probabilities) at ``stamp_ns``."""
        if any(pr >= self.p.min_probability for pr in probabilities):
            self.last_seen_ns = stamp_ns

    def active(self, now_ns: int) -> bool:
        """Whether the planner yields at ``now_ns``."""
        on = (
            self.p.react
            and self.last_seen_ns is not None
            and 0 <= now_ns - self.last_seen_ns <= self.p.hold_s * 1e9
        )
        if on and not self._active:
            self.episodes += 1
        self._active = bool(on)
        return self._active

    @property
    def yielding(self) -> bool:
        """What the last :meth:`active` call decided."""
        return self._active

    def goal(self, base: PlannerParams, now_ns: int) -> PlannerParams:
        """``base``, or ``base`` with the yielding speed and offset while yielding."""
        if not self.active(now_ns):
            return base
        return dataclasses.replace(
            base,
            desired_speed=min(base.desired_speed, self.p.speed_mps),
            preferred_offset=self.p.offset_m,
        )
