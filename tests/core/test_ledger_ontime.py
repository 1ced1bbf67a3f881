"""The end-to-end figures bench_e2e reports beside its percentiles: the share of frames on time
(a lost frame is late) and each frame's end to end less its own inference."""

from __future__ import annotations

import math

from rt_fusion.core.evaluation import ledger

MS = 1_000_000


def test_a_lost_frame_counts_as_late_and_the_warm_up_is_left_out() -> None:
    e2e = [40 * MS, 99 * MS, 100 * MS, 101 * MS]  # three on time, one late
    assert ledger.on_time_share(e2e, committed=4, warmup=0) == 0.75
    assert ledger.on_time_share(e2e, committed=14, warmup=2) == 3 / 12  # eight never planned on
    assert ledger.on_time_share(e2e, committed=2, warmup=0) == 0.75  # never below what came
    assert math.isnan(ledger.on_time_share([], committed=0, warmup=0))


def _lineage(inputs: int, inference: int) -> dict[str, int]:
    stamps = ('capture_ns', 'committed_ns', 'received_ns', 'published_ns', 'planner_received_ns',
              'planner_solved_ns', 'planner_published_ns')  # fmt: skip
    return {
        **dict.fromkeys(stamps, 0),
        'inputs_complete_ns': inputs,
        'inference_done_ns': inference,
    }


def test_the_overhead_is_each_frame_s_end_to_end_less_its_own_inference() -> None:
    objects = [{'stamp_ns': 1000 * k, 'published_ns': 1000 * k + 5, 'inputs_complete_ns': 0}
               for k in (1, 2, 3)]  # fmt: skip
    plans = [
        {'objects_stamp_ns': 1000, 'published_ns': 1000 + 50, 'lineage': _lineage(10, 40)},
        {'objects_stamp_ns': 1000, 'published_ns': 1000 + 90, 'lineage': _lineage(10, 40)},  # 2nd
        {'objects_stamp_ns': 2000, 'published_ns': 2000 + 70, 'lineage': _lineage(10, 0)},  # none
        {'objects_stamp_ns': 3000, 'published_ns': 3000 + 60, 'lineage': _lineage(5, 25)},
    ]
    samples = ledger.latency_samples(objects, plans, warmup=0)
    assert samples[ledger.E2E] == [50, 70, 60]
    assert samples[ledger.OVERHEAD] == [50 - 30, 70, 60 - 20]
