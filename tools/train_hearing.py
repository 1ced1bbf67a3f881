#!/usr/bin/env python3
"""Train the hearing model (siren / horn / other), export it, and score it on held-out audio.

    python tools/train_hearing.py --out /tmp/hearing --examples 60000 --epochs 25   # the H200
    python tools/train_hearing.py --export /tmp/hearing/weights.pt --models models
    python tools/train_hearing.py --heldout models/rtf_hearing.yaml                   # quality

Data: ``rt_fusion.core.scenario.audio_data`` mixes generated sirens and horns with road, wind and
engine noise and with the training part of the real clips in ``../shared/data/audio``
(``--clips``); each example is the model's 0.975 s context window, labelled by its last 0.15 s.
A tenth of the examples start as a stream does in its first second (the oldest frame repeated).
Features are the runtime's own (:class:`rt_fusion.core.perception.hearing.LogMel`), computed in
worker processes.

The held-out check (``--heldout SPEC``) runs the streaming detector exactly as the fusion node
does (:class:`~rt_fusion.core.perception.hearing.AudioEventDetector`, ONNX Runtime on one thread,
one 100 ms hop at a time) over:

- the held-out part of the real clips (never trained on): per-hop accuracy;
- held-out generated scenes (seeds ``[4000000, k]``): per-hop accuracy, siren onset delay
  (share within 300 ms), horn onset delay;
- ``--noise-min`` minutes of held-out road, wind and engine noise (generated and real): false
  siren and horn events per 10 minutes;
- the per-hop cost (features + network) P50/P99/max on this machine.

Hops are labelled by the last 0.15 s before them: an event class if it covers all of it, other if
no event sound is in the whole context window, and left out in between. The last line is
``RESULT real_acc=… scene_acc=… siren_within_300ms=… false_sirens_per_10min=… hop_p99_ms=…``.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
from pathlib import Path

from rt_fusion.core.perception.hearing import HearingParams
from rt_fusion.training import hearing as th

ROOT = Path(__file__).resolve().parents[1]
CLIPS_DIR = ROOT.parent / 'shared' / 'data' / 'audio'


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--out', default='/tmp/rtf_hearing', help='training output folder')
    parser.add_argument('--examples', type=int, default=60000)
    parser.add_argument('--epochs', type=int, default=25)
    parser.add_argument('--batch', type=int, default=256)
    parser.add_argument('--lr', type=float, default=3e-3)
    parser.add_argument('--seed', type=int, default=0)
    parser.add_argument('--workers', type=int, default=mp.cpu_count())
    parser.add_argument('--clips', type=Path, default=CLIPS_DIR, help='the real clips folder')
    parser.add_argument('--export', type=Path, help='weights.pt to export instead of training')
    parser.add_argument('--models', type=Path, default=ROOT / 'models')
    parser.add_argument('--name', default='rtf_hearing')
    parser.add_argument('--heldout', type=Path, help='a hearing model spec to score')
    parser.add_argument('--scenes', type=int, default=90, help='held-out generated scenes')
    parser.add_argument('--scene-s', type=float, default=8.0, help='length of each scene')
    parser.add_argument('--noise-min', type=float, default=10.0, help='minutes of noise')
    parser.add_argument('--confirm-hops', type=int, default=HearingParams().confirm_hops)
    parser.add_argument('--on-threshold', type=float, default=HearingParams().on_threshold)
    parser.add_argument('--json', type=Path, help='--heldout: write the figures here too')
    args = parser.parse_args(argv)
    if args.export:
        th.export(args.export, args.models, args.name)
        return 0
    if args.heldout:
        rows = th.heldout(args.heldout, args)
        if args.json:
            args.json.write_text(json.dumps(rows, indent=1))
        return 0
    th.train(args)
    return 0


if __name__ == '__main__':
    raise SystemExit(main())
