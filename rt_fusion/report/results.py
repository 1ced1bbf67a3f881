"""The RESULT lines of the tools that run the whole graph (``tools/demo.py``)."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from typing import Any

from rt_fusion import report
from rt_fusion.core.evaluation import ledger as ledgers
from rt_fusion.core.latency import summarize_ns


def demo_result_line(
    args: argparse.Namespace,
    samples: Mapping[str, Mapping[str, list[int]]],
    recorders: Mapping[str, Any],
    scores: Mapping[str, Any],
    losses: Mapping[str, Mapping[str, int]],
) -> str:
    """The demo's RESULT line: frames fused, latency percentiles of both graphs and their
    ratio, the quality, and every frame rt_fusion lost, by cause (``lost=overrun:16,torn:1``)."""
    nan = float('nan')

    def pct(run: str, stage: str, which: str) -> float:
        v = samples.get(run, {}).get(stage)
        return getattr(summarize_ns(v), which) / 1e3 if v else nan

    e2e, fus = ledgers.E2E, ledgers.FUSION
    ours = scores.get('rt_fusion') or {}
    lost = losses.get('rt_fusion', {})
    return report.result_line(
        frames=len(recorders['rt_fusion'].objects),
        lost_frames=sum(lost.values()),
        lost=ledgers.loss_text(lost),
        fusion_p50_ms=pct('rt_fusion', fus, 'p50_us'),
        fusion_p99_ms=pct('rt_fusion', fus, 'p99_us'),
        e2e_p50_ms=pct('rt_fusion', e2e, 'p50_us'),
        e2e_p99_ms=pct('rt_fusion', e2e, 'p99_us'),
        conventional_e2e_p99_ms=pct('conventional', e2e, 'p99_us'),
        conventional_frames=len(recorders['conventional'].objects)
        if 'conventional' in recorders
        else 0,
        conventional_lost=ledgers.loss_text(losses.get('conventional', {})),
        committed_e2e_p99_ms=pct('rt_fusion', ledgers.COMMITTED_E2E, 'p99_us'),
        ratio_e2e_p99=pct('conventional', e2e, 'p99_us') / pct('rt_fusion', e2e, 'p99_us'),
        resolution=f'{args.resolution[0]}x{args.resolution[1]}'
        if args.source == 'scenario'
        else 'video',
        cameras=args.cameras if args.source == 'scenario' else 1,
        precision=ours.get('precision', nan),
        recall=ours.get('recall', nan),
    )
