"""Hardware clocks on the host timeline: an online, one-way-delay-aware clock mapping.

Every sensor stamps data with its own clock (a V4L2 buffer time, a PortAudio ADC time, the Xsens
SampleTimeFine counter, ...). The host sees each sample at a receive time that is *later* than
the sample by a delay that is never negative (scheduling, USB, CAN, the driver). So the pairs
``(hardware time h, host receive time r)`` all lie on or above the true line
``host = offset + (1 + skew) * h``, and the lowest ones are the most informative.

:class:`ClockMapper` estimates that line as the *minimum-delay line*: the edge of the lower convex
hull of the pairs in a sliding window that lies under the window's mean hardware time. That edge
solves the linear programme "the line below every pair with the least total delay above it"
(Moon, Skelly & Towsley, 1999; the same lower-bound hull as TICSync), which least squares does not:
least squares through one-sided delays is biased by their mean and pulled by their tail.

Practicalities:

- hardware counters are unwrapped (any bit width and tick length);
- to keep the hull small, the window keeps one pair per bin (the one with the least delay), so
  an update costs O(bins), not O(samples);
- a pair far off the current line (a device reset, a counter jump, a host clock step) resets the
  window and the mapper re-locks;
- it is a pure function of its inputs: it never reads a clock, so a replayed bag maps the same
  way every time.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections import deque

from rt_fusion.core.errors import ParameterError
from rt_fusion.core.params import param

_NS = 1_000_000_000


@dataclasses.dataclass(frozen=True)
class ClockParams:
    """Parameters of one sensor's clock mapping."""

    tick_ns: float = param('length of one hardware tick', unit='ns', default=1.0, low=1e-3)
    counter_bits: int = param(
        'width of the hardware counter (0: never wraps)', default=0, low=0, high=64
    )
    window_s: float = param('sliding window of pairs', unit='s', default=20.0, low=0.5)
    bin_s: float = param(
        'one pair (the least delayed) is kept per bin', unit='s', default=0.1, low=1e-3
    )
    lock_span_s: float = param(
        'window span needed to report a lock', unit='s', default=2.0, low=0.0
    )
    lock_bins: int = param('bins needed to report a lock', default=8, low=2)
    jump_s: float = param(
        'a pair this far from the line resets the mapping', unit='s', default=0.5, low=1e-3
    )
    anchor: float = param(
        'where in the window the supporting hull edge is taken (0 oldest, '
        '1 newest; 0.5 = the least-total-delay line)',
        default=0.5,
        low=0.0,
        high=1.0,
    )
    max_skew_ppm: float = param(
        'skews beyond this are rejected as implausible', unit='ppm', default=2000.0, low=1.0
    )

    def check(self) -> None:
        """Cross-field rules."""
        if self.bin_s * 4 > self.window_s:
            raise ParameterError('bin_s', self.bin_s, 'needs at least 4 bins per window_s')


@dataclasses.dataclass(frozen=True, slots=True)
class ClockState:
    """What a mapper reports for diagnostics.

    Attributes:
        locked: the line rests on enough pairs over a long enough span.
        skew_ppm: how much faster the hardware clock runs than the host clock [ppm].
        offset_ns: host time of hardware time zero on the current line [ns].
        residual_ns: median delay of the window's pairs above the line [ns].
        pairs: pairs seen since the last reset.
        resets: resets (jumps, device restarts) so far.
        wraps: counter wraparounds so far.
    """

    locked: bool
    skew_ppm: float
    offset_ns: float
    residual_ns: float
    pairs: int
    resets: int
    wraps: int


def _cross(o: tuple[int, int], a: tuple[int, int], b: tuple[int, int]) -> int:
    return (a[0] - o[0]) * (b[1] - o[1]) - (a[1] - o[1]) * (b[0] - o[0])


def lower_hull(points: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Lower convex hull of points sorted by x (Andrew's monotone chain), exact integers."""
    hull: list[tuple[int, int]] = []
    for p in points:
        while len(hull) >= 2 and _cross(hull[-2], hull[-1], p) <= 0:
            hull.pop()
        hull.append(p)
    return hull


class ClockMapper:
    """Online mapping of one sensor's hardware clock onto the host timeline.

    Feed pairs with :meth:`update` (the raw hardware stamp and the host receive time of the same
    sample), map stamps with :meth:`to_host`. Everything is integer nanoseconds except the line.
    """

    def __init__(self, params: ClockParams | None = None) -> None:
        self.params = params or ClockParams()
        p = self.params
        self._wrap_ticks = 1 << p.counter_bits if p.counter_bits else 0
        self._last_raw: int | None = None
        self._wrap_base = 0
        self.wraps = 0
        self.resets = 0
        self.out_of_order = 0
        self._bin_ns = int(p.bin_s * _NS)
        self._window_ns = int(p.window_s * _NS)
        # Bins: (bin index, hw_ns, host_ns - hw_ns) with the least delay in the bin.
        self._bins: deque[tuple[int, int, int]] = deque()
        self._pairs = 0
        # Current line in relative coordinates: host - hw = c0 + slope * (hw - x0).
        self._x0 = 0
        self._c0 = 0.0
        self._slope = 0.0
        self._have_line = False
        self._dirty = False

    # -- input ---------------------------------------------------------------------------------

    def unwrap(self, raw_ticks: int) -> int:
        """Raw counter value -> hardware time [ns] since counter zero, across wraparounds."""
        if self._wrap_ticks:
            raw_ticks %= self._wrap_ticks
            if self._last_raw is not None and raw_ticks < self._last_raw - self._wrap_ticks // 2:
                self._wrap_base += self._wrap_ticks
                self.wraps += 1
            self._last_raw = raw_ticks
            raw_ticks += self._wrap_base
        return round(raw_ticks * self.params.tick_ns)

    def update(self, raw_ticks: int, host_ns: int) -> int:
        """Adds the pair (hardware stamp, host receive time); returns the hardware time [ns].

        A pair further than ``jump_s`` from the current line (a device reset, a counter jump)
        restarts the estimate from this pair.
        """
        hw = self.unwrap(raw_ticks)
        diff = host_ns - hw
        if self._have_line:
            self._refresh()
            # Delay above the line; negative means the pair lies under it (a real improvement,
            # unless it is far under: then the clock jumped).
            delay = diff - self._line_diff(hw)
            if abs(delay) > self.params.jump_s * _NS:
                self.reset()
        elif self._bins and abs(diff - self._bins[-1][2]) > self.params.jump_s * _NS:
            self.reset()
        self._pairs += 1
        idx = hw // self._bin_ns
        if self._bins and self._bins[-1][0] == idx:
            if diff < self._bins[-1][2]:
                self._bins[-1] = (idx, hw, diff)
                self._dirty = True
        elif not self._bins or idx > self._bins[-1][0]:
            self._bins.append((idx, hw, diff))
            self._dirty = True
            while self._bins and hw - self._bins[0][1] > self._window_ns:
                self._bins.popleft()
        elif self._bins[-1][1] - hw > self.params.jump_s * _NS:
            # Hardware time went far back: the device restarted its clock.
            self.reset()
            self._bins.append((idx, hw, diff))
            self._pairs = 1
            self._dirty = True
        else:
            self.out_of_order += 1  # a sample older than the current bin: it cannot help
        return hw

    def reset(self) -> None:
        """Forgets the window (the counter's unwrap state stays); counts a reset."""
        if self._bins or self._have_line:
            self.resets += 1
        self._bins.clear()
        self._pairs = 0
        self._have_line = False
        self._dirty = False

    # -- estimate ------------------------------------------------------------------------------

    def _refresh(self) -> None:
        if not self._dirty:
            return
        self._dirty = False
        bins = self._bins
        if not bins:
            self._have_line = False
            return
        x0, c_ref = bins[0][1], bins[0][2]
        pts = [(hw - x0, diff - c_ref) for _, hw, diff in bins]
        if len(pts) == 1:
            self._x0, self._c0, self._slope, self._have_line = x0, float(c_ref), 0.0, True
            return
        hull = lower_hull(pts)
        mean_x = pts[-1][0] * self.params.anchor
        a, b = hull[0], hull[-1]
        for left, right in itertools.pairwise(hull):
            if left[0] <= mean_x <= right[0]:
                a, b = left, right
                break
        slope = (b[1] - a[1]) / (b[0] - a[0]) if b[0] != a[0] else 0.0
        max_slope = self.params.max_skew_ppm * 1e-6
        if abs(slope) > max_slope:
            slope = math.copysign(max_slope, slope)
        self._x0 = x0 + a[0]
        self._c0 = float(c_ref + a[1])
        self._slope = slope
        self._have_line = True

    def _line_diff(self, hw_ns: int) -> float:
        return self._c0 + self._slope * (hw_ns - self._x0)

    def to_host(self, hw_ns: int) -> int:
        """Host time [ns] of a hardware time [ns] (from :meth:`update` or :meth:`unwrap`).

        Before any pair has been seen this is the hardware time itself.
        """
        self._refresh()
        if not self._have_line:
            return hw_ns
        return hw_ns + round(self._line_diff(hw_ns))

    def map(self, raw_ticks: int, host_ns: int) -> int:
        """:meth:`update` with the pair, then the host time of this sample [ns]."""
        return self.to_host(self.update(raw_ticks, host_ns))

    @property
    def locked(self) -> bool:
        """True once the window holds enough bins over a long enough span."""
        bins = self._bins
        return (
            len(bins) >= self.params.lock_bins
            and bins[-1][1] - bins[0][1] >= self.params.lock_span_s * _NS
        )

    def state(self) -> ClockState:
        """A snapshot for diagnostics."""
        self._refresh()
        residual = float('nan')
        if self._have_line and self._bins:
            delays = sorted(diff - self._line_diff(hw) for _, hw, diff in self._bins)
            residual = delays[len(delays) // 2]
        return ClockState(
            locked=self.locked,
            skew_ppm=-self._slope / (1.0 + self._slope) * 1e6,
            offset_ns=self._line_diff(0) if self._have_line else float('nan'),
            residual_ns=residual,
            pairs=self._pairs,
            resets=self.resets,
            wraps=self.wraps,
        )
