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


class LatencyRecorder:
    """A fixed-capacity buffer of latency samples [ns]; recording never allocates.

    When full, further samples are counted in ``overflow`` and dropped, so a long run cannot
    grow memory inside a real-time loop.
    """

    def __init__(self, capacity: int) -> None:
        self._buf = np.zeros(capacity, dtype=np.int64)
        self._n = 0
        self.overflow = 0

    def record(self, latency_ns: int) -> None:
        """Adds one sample [ns]."""
        if self._n < self._buf.size:
            self._buf[self._n] = latency_ns
            self._n += 1
        else:
            self.overflow += 1

    def __len__(self) -> int:
        return self._n

    @property
    def samples_ns(self) -> npt.NDArray[np.int64]:
        """A view of the samples recorded so far."""
        return self._buf[: self._n]

    def summary(self) -> LatencySummary:
        """Summary of the samples recorded so far."""
        return summarize_ns(self.samples_ns)

    def clear(self) -> None:
        """Forgets all samples."""
        self._n = 0
        self.overflow = 0
