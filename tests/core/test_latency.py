"""Latency summaries: percentiles by hand, bounded recording."""

from __future__ import annotations

import math

from rt_fusion.core.latency import LatencyRecorder, summarize_ns


def test_summary_of_known_samples() -> None:
    # 1..100 µs: P50 = 50.5 µs, P99 = 99.01 µs (linear interpolation), max 100 µs.
    s = summarize_ns([i * 1000 for i in range(1, 101)])
    assert s.count == 100
    assert math.isclose(s.p50_us, 50.5)
    assert math.isclose(s.p99_us, 99.01)
    assert s.max_us == 100.0


def test_recorder_never_grows_past_capacity() -> None:
    rec = LatencyRecorder(3)
    for v in (5, 6, 7, 8, 9):
        rec.record(v)
    assert len(rec) == 3
    assert rec.overflow == 2
    assert list(rec.samples_ns) == [5, 6, 7]


def test_a_wrapping_recorder_holds_the_last_samples() -> None:
    rec = LatencyRecorder(3, wrap=True)
    for v in (5, 6, 7, 8, 9):
        rec.record(v)
    assert len(rec) == 3 and rec.overflow == 0 and rec.recorded == 5
    assert sorted(rec.samples_ns) == [7, 8, 9]
    assert rec.summary().max_us == 9 / 1e3
    rec.clear()
    rec.record(1)
    assert list(rec.samples_ns) == [1] and rec.recorded == 1


def test_empty_summary_is_nan() -> None:
    assert math.isnan(summarize_ns([]).p99_us)
