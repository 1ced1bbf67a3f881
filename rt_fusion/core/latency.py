"""Latency samples and their summary (P50/P99/max), recorded without allocation per sample."""

from __future__ import annotations

import dataclasses

import numpy as np
import numpy.typing as npt


@dataclasses.dataclass(frozen=True, slots=True)
class LatencySummary:
    """Summary of latency samples [µs]; ``count`` is the number of samples."""

    count: int
    p50_us: float
    p90_us: float
    p99_us: float
    max_us: float
    mean_us: float

    def as_dict(self) -> dict[str, float]:
        """Plain dict for JSON and RESULT lines."""
        return dataclasses.asdict(self)


EMPTY = LatencySummary(0, float('nan'), float('nan'), float('nan'), float('nan'), float('nan'))


def summarize_ns(samples_ns: npt.ArrayLike) -> LatencySummary:
    """P50/P90/P99/max/mean of samples given in nanoseconds, reported in microseconds."""
    arr = np.asarray(samples_ns, dtype=np.float64)
    if arr.size == 0:
        return EMPTY
    p50, p90, p99 = np.percentile(arr, [50.0, 90.0, 99.0]) / 1e3
    return LatencySummary(
        int(arr.size),
        float(p50),
        float(p90),
        float(p99),
        float(arr.max() / 1e3),
        float(arr.mean() / 1e3),
    )


# Samples a node's diagnostics summarise: the last 10,000 (5.5 min of camera frames, 25 s of a
# 400 Hz IMU), so a summary costs the same after an hour as after a minute (~0.3 ms).
DIAG_WINDOW = 10_000


class LatencyRecorder:
    """A fixed-capacity buffer of latency samples [ns]; recording never allocates.

    When full, further samples are counted in ``overflow`` and dropped, so a long run cannot
    grow memory inside a real-time loop; or, with ``wrap``, they overwrite the oldest, so the
    buffer holds the last ``capacity`` samples: what a node's diagnostics summarise (the
    recent past, at a cost that does not grow with the run: a summary sorts the buffer).
    """

    def __init__(self, capacity: int, wrap: bool = False) -> None:
        self._buf = np.zeros(capacity, dtype=np.int64)
        self._n = 0
        self._next = 0  # where the next sample goes once wrapping
        self.wrap = wrap
        self.overflow = 0
        self.recorded = 0  # every sample ever recorded (wrapped ones included)

    def record(self, latency_ns: int) -> None:
        """Adds one sample [ns]."""
        if self._n < self._buf.size:
            self._buf[self._n] = latency_ns
            self._n += 1
            self.recorded += 1
        elif self.wrap:
            self._buf[self._next] = latency_ns
            self._next = (self._next + 1) % self._buf.size
            self.recorded += 1
        else:
            self.overflow += 1

    def __len__(self) -> int:
        return self._n

    @property
    def samples_ns(self) -> npt.NDArray[np.int64]:
        """A view of the samples held: in recording order until a wrapping buffer wraps (then
        the last ``capacity`` samples, in no particular order)."""
        return self._buf[: self._n]

    def summary(self) -> LatencySummary:
        """Summary of the samples held."""
        return summarize_ns(self.samples_ns)

    def clear(self) -> None:
        """Forgets all samples."""
        self._n = self._next = self.recorded = 0
        self.overflow = 0
