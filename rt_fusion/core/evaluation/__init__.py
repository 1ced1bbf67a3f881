"""Evaluation, ROS-free: plain records of a run in, scores out.

- :mod:`.metrics`: perception, planning and driving metrics against ground truth (matching,
  CLEAR MOT, gaps, yields); re-exported here, so ``from rt_fusion.core import evaluation as ev``
  reads ``ev.score_perception``.
- :mod:`.truth`: a generated scenario's ``ground_truth.json`` as actors, ego samples, and plans
  moved into its world frame.
- :mod:`.runs`: one run scored (``score``), its headline numbers (``flat``), means over runs,
  the baseline a regression gate compares with.
- :mod:`.ledger`: where a live run's camera frames went, stage by stage.

A run's records are what :class:`rt_fusion.ros.harness.recorder.Recorder` keeps: dicts of
numbers, no messages.
"""

from rt_fusion.core.evaluation.metrics import (
    CLASS_CODES,
    EMERGENCY,
    MAX_SWITCH_EVENTS,
    UNKNOWN,
    ActorTrack,
    EgoSample,
    EvalParams,
    Frame,
    OutputObject,
    Plan,
    TruthObject,
    box_corners,
    box_gap,
    latency_stages,
    match,
    score_driving,
    score_perception,
    score_planning,
    score_yield,
    truth_frames,
)

__all__ = [
    'CLASS_CODES',
    'EMERGENCY',
    'MAX_SWITCH_EVENTS',
    'UNKNOWN',
    'ActorTrack',
    'EgoSample',
    'EvalParams',
    'Frame',
    'OutputObject',
    'Plan',
    'TruthObject',
    'box_corners',
    'box_gap',
    'latency_stages',
    'match',
    'score_driving',
    'score_perception',
    'score_planning',
    'score_yield',
    'truth_frames',
]
