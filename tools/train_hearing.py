#!/usr/bin/env python3
"""Train the hearing model (siren / horn / other), export it, and score it on held-out audio.

    python tools/train_hearing.py --out /tmp/hearing --examples 60000 --epochs 25   # the H200
    python tools/train_hearing.py --export /tmp/hearing/weights.pt --models models
    python tools/train_hearing.py --heldout models/rtf_hearing.yaml                   # quality
    python tools/fetch_sounds.py                          # the real recordings (--heldout does it)

Data: ``rt_fusion.core.scenario.audio_data`` mixes generated sirens and horns with road, wind and
engine noise, with the training part of the real clips in ``../shared/data/audio`` (``--clips``)
and with the real recordings of the training sources of ``rt_fusion/training/real_sounds.yaml``
(``tools/fetch_sounds.py`` puts them in the cache; ``--no-real`` leaves them out); each example
is the model's 0.975 s context window, labelled by its last 0.15 s.
A tenth of the examples start as a stream does in its first second (the oldest frame repeated).
Features are the runtime's own (:class:`rt_fusion.core.perception.hearing.LogMel`), computed in
worker processes.

The held-out check (``--heldout SPEC``) runs the streaming detector exactly as the fusion node
does (:class:`~rt_fusion.core.perception.hearing.AudioEventDetector`, ONNX Runtime on one thread,
one 100 ms hop at a time) over:

- the held-out part of the real clips (never trained on): per-hop accuracy;
- held-out generated scenes (seeds ``[4000000, k]``): per-hop accuracy, siren onset delay
  (share in time: within 300 ms past its confirmation), horn onset delay;
- ``--noise-min`` minutes of held-out road, wind and engine noise (generated and real): false
  siren and horn events per 10 minutes;
- real recordings of the held-out sources (``rt_fusion/training/hearing_real.py``): each real
  siren and horn ``--real-conditions`` times at 0-20 dB SNR over real everyday sounds (event
  recall), and ``--real-hours`` of those everyday sounds (false siren and horn events per hour);
- the per-hop cost (features + network) P50/P99/max on this machine.

Hops are labelled by the last 0.15 s before them: an event class if it covers all of it, other if
no event sound is in the whole context window, and left out in between. The last line is
``RESULT real_acc=… scene_acc=… siren_in_time=… false_sirens_per_10min=… hop_p99_ms=…
real_siren_recall=… real_horn_recall=… real_false_sirens_per_hour=… real_false_horns_per_hour=…``.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
from pathlib import Path

from rt_fusion.core.perception.hearing import HearingParams
from rt_fusion.training import hearing as th
from rt_fusion.training import sounds

ROOT = Path(__file__).resolve().parents[1]
CLIPS_DIR = ROOT.parent / 'shared' / 'data' / 'audio'


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--out', default='/tmp/rtf_hearing', help='training output folder')
    parser.add_argument('--examples', type=int, default=60000)
    parser.add_argument('--epochs', type=int, default=25)
    parser.add_argument('--batch', type=int, default=256)
    parser.add_argument(
        '--data', type=Path, help='examples file: made and kept there, or read if it exists'
    )
    parser.add_argument('--width', type=float, default=1.0, help='channel multiplier')
    parser.add_argument('--lr', type=float, default=3e-3)
    parser.add_argument('--seed', type=int, default=0)
    parser.add_argument('--workers', type=int, default=mp.cpu_count())
    parser.add_argument(
        '--no-real', action='store_true', help='train without the real recordings (generated only)'
    )
    parser.add_argument('--clips', type=Path, default=CLIPS_DIR, help='the real clips folder')
    parser.add_argument('--export', type=Path, help='weights.pt to export instead of training')
    parser.add_argument('--models', type=Path, default=ROOT / 'models')
    parser.add_argument('--name', default='rtf_hearing')
    parser.add_argument('--heldout', type=Path, help='a hearing model spec to score')
    parser.add_argument('--scenes', type=int, default=90, help='held-out generated scenes')
    parser.add_argument('--scene-s', type=float, default=8.0, help='length of each scene')
    parser.add_argument('--noise-min', type=float, default=10.0, help='minutes of noise')
    parser.add_argument('--confirm-hops', type=int, default=HearingParams().confirm_hops)
    parser.add_argument(
        '--siren-confirm-hops', type=int, default=HearingParams().siren_confirm_hops
    )
    parser.add_argument('--on-threshold', type=float, default=HearingParams().on_threshold)
    parser.add_argument(
        '--real-hours', type=float, default=1.0, help='hours of real non-event audio (0: none)'
    )
    parser.add_argument(
        '--real-conditions', type=int, default=8, help='plays of each real event clip'
    )
    parser.add_argument('--json', type=Path, help='--heldout: write the figures here too')
    args = parser.parse_args(argv)
    if args.export:
        th.export(args.export, args.models, args.name)
        return 0
    if args.heldout:
        try:
            if args.real_hours > 0:
                sounds.fetch()  # the real held-out sources (skipped when in the cache)
            rows = th.heldout(args.heldout, args)
        except sounds.SoundsError as e:
            print(f'error: {e} (--real-hours 0 scores without the real recordings)')
            return 1
        if args.json:
            args.json.write_text(json.dumps(rows, indent=1))
        return 0
    try:
        th.train(args)
    except sounds.SoundsError as e:
        print(f'error: {e} (--no-real trains without the real recordings)')
        return 1
    return 0


if __name__ == '__main__':
    raise SystemExit(main())
