"""Yielding to an emergency vehicle: slow down and keep right while one is reported.

The fusion marks a track as an emergency vehicle (rt_fusion_msgs/Object
CLASS_EMERGENCY_VEHICLE) only while the hearing reports a siren *and* a vehicle track moves like
one (fast relative to the ego, within range: ``fusion.emergency_*``). The planner asks for more:
the reports must go on for ``confirm_s`` (consecutive reports no further apart than
``confirm_s``) before it yields, so one false siren (the hearing's false events last a few hops)
next to a fast car does not move the ego. Once yielding, it yields while such an object is in
the object lists and for ``hold_s`` after the last one: its cruise speed becomes at most
``speed_mps`` and its preferred lateral offset ``offset_m`` (negative: to the right of the
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
    confirm_s: float = param(
        'yield once emergency-vehicle reports have gone on this long (no gap longer than this): '
        'a single false siren does not make the ego yield',
        unit='s',
        default=1.0,
        low=0.0,
    )


class EmergencyYield:
    """Tracks whether to yield; :meth:`goal` gives the planner parameters to plan with."""

    def __init__(self, params: EmergencyParams | None = None) -> None:
        self.p = params or EmergencyParams()
        self.last_seen_ns: int | None = None
        self.run_start_ns: int | None = None  # first report of the current run of reports
        self.episodes = 0  # times yielding began
        self.unconfirmed = 0  # runs of reports that ended before confirm_s
        self._active = False
        self._confirmed = False

    def report(self, stamp_ns: int, probabilities: list[float]) -> None:
        """An object list's emergency vehicles (their class probabilities) at ``stamp_ns``."""
        if not any(pr >= self.p.min_probability for pr in probabilities):
            return
        last = self.last_seen_ns
        if last is None or self.run_start_ns is None or stamp_ns - last > self.p.confirm_s * 1e9:
            if last is not None and not self._confirmed:
                self.unconfirmed += 1
            self.run_start_ns = stamp_ns
            self._confirmed = False
        self.last_seen_ns = stamp_ns
        if stamp_ns - self.run_start_ns >= self.p.confirm_s * 1e9:
            self._confirmed = True

    def active(self, now_ns: int) -> bool:
        """Whether the planner yields at ``now_ns``."""
        on = (
            self.p.react
            and self._confirmed
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
