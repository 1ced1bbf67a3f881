#!/usr/bin/env python3
"""Fetch the hearing model's real recordings into the cache and check them.

    python tools/fetch_sounds.py            # every package of rt_fusion/training/real_sounds.yaml
    python tools/fetch_sounds.py --summary  # sources, clips and minutes per split and label

Each source is a Debian package (its exact version, ``apt-get download``); only the listed files
are extracted, each checked against its SHA-256, and kept with the package's copyright file in
``$RTF_SOUNDS_CACHE`` (default ``~/.cache/rt_fusion/sounds``). Packages already there are
skipped. The last line is ``RESULT sources=… files=…``.
"""

from __future__ import annotations

import argparse

from rt_fusion.core.scenario.audio_data import RATE
from rt_fusion.training import sounds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--summary', action='store_true', help='decode and count the clips too')
    args = parser.parse_args(argv)
    try:
        counts = sounds.fetch()
        if args.summary:
            for split in ('train', 'test'):
                for label, row in sounds.summary(sounds.load(split, RATE), RATE).items():
                    print(f'{split:5s} {label:5s} {row}')
    except sounds.SoundsError as e:
        print(f'error: {e}')
        return 1
    print(f'RESULT sources={len(counts)} files={sum(counts.values())}')
    return 0


if __name__ == '__main__':
    raise SystemExit(main())
