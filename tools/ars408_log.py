#!/usr/bin/env python3
"""Decodes an ARS408 CAN log (candump -l or any format python-can reads) into cycles.

Prints, per cycle, the measurement counter and its targets (id, x, y, vx, vy, RCS, dynamic
property, class), the radar states and versions seen, and a last line

  RESULT cycles=... incomplete=... errors=... objects_last=...

``--summary`` prints only the stationary targets seen in most cycles and the RESULT line.
"""

from __future__ import annotations

import argparse
import collections
import sys
from pathlib import Path

import can
import numpy as np

from rt_fusion.core.protocols.ars408 import (
    DYN_PROP,
    OBJ_CLASS,
    Ars408Decoder,
    RadarCycle,
    RadarState,
    RadarVersion,
)


def decode_log(path: Path, sensor_id: int = 0) -> tuple[list[RadarCycle], Ars408Decoder]:
    """Every cycle of a log, and the decoder (with its counters, state and version)."""
    decoder = Ars408Decoder(sensor_id)
    cycles: list[RadarCycle] = []
    for msg in can.LogReader(str(path)):
        if msg.is_error_frame or msg.is_remote_frame:
            continue
        for event in decoder.feed(msg.arbitration_id, bytes(msg.data), round(msg.timestamp * 1e9)):
            if isinstance(event, RadarCycle):
                cycles.append(event)
    cycles += [e for e in decoder.flush() if isinstance(e, RadarCycle)]
    return cycles, decoder


def main(argv: list[str] | None = None) -> int:
    """Decodes the log and prints it; returns the exit status."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument('log', type=Path)
    parser.add_argument('--sensor-id', type=int, default=0)
    parser.add_argument('--summary', action='store_true', help='no per-cycle table')
    args = parser.parse_args(argv)
    if not args.log.is_file():
        parser.error(f'no such log: {args.log}')

    from rich.table import Table  # noqa: PLC0415

    from rt_fusion import report  # noqa: PLC0415

    cycles, decoder = decode_log(args.log, args.sensor_id)
    if not args.summary:
        table = Table(title=f'{args.log.name}: {len(cycles)} cycles', title_justify='left')
        for col in (
            'cycle',
            'counter',
            't (s)',
            'complete',
            'id',
            'x (m)',
            'y (m)',
            'vx (m/s)',
            'vy (m/s)',
            'RCS (dBm²)',
            'dyn. property',
            'class',
        ):
            table.add_column(col, justify='right')
        t0 = cycles[0].stamp_ns if cycles else 0
        for k, c in enumerate(cycles):
            for j, t in enumerate(c.targets or [None]):
                head = (
                    [
                        str(k),
                        str(c.meas_counter),
                        f'{(c.stamp_ns - t0) / 1e9:.3f}',
                        'yes' if c.complete else 'NO',
                    ]
                    if j == 0
                    else [''] * 4
                )
                if t is None:
                    table.add_row(*head, '-', *[''] * 7)
                    continue
                table.add_row(
                    *head,
                    str(t.id),
                    f'{t.x:.1f}',
                    f'{t.y:.1f}',
                    f'{t.vx:.2f}',
                    f'{t.vy:.2f}',
                    f'{t.rcs:.1f}',
                    DYN_PROP[t.dyn_prop],
                    OBJ_CLASS[t.obj_class] if t.obj_class >= 0 else '-',
                )
        report.console.print(table)
    tracks: dict[int, list[tuple[float, float, int]]] = collections.defaultdict(list)
    for c in cycles:
        for t in c.targets:
            tracks[t.id].append((t.x, t.y, t.dyn_prop))
    stationary = sorted(
        (float(np.median([p[0] for p in v])), float(np.median([p[1] for p in v])), len(v), k)
        for k, v in tracks.items()
        if len(v) >= 0.4 * len(cycles)
        and collections.Counter(p[2] for p in v).most_common(1)[0][0] == 1
    )
    report.console.print(
        'stationary targets in >= 40 % of cycles (x, y in m, cycles, id): '
        + ', '.join(f'({x:.1f}, {y:.1f}, {n}, #{k})' for x, y, n, k in stationary)
    )
    if decoder.state is not None:
        report.console.print(f'radar state: {decoder.state}')
    if isinstance(decoder.version, RadarVersion):
        v = decoder.version
        report.console.print(f'radar version: {v.major}.{v.minor}.{v.patch}')
    assert decoder.state is None or isinstance(decoder.state, RadarState)
    s = decoder.stats
    report.result_line(
        cycles=len(cycles),
        incomplete=s.incomplete,
        errors=s.decode_errors + s.orphans + s.stray,
        objects_last=len(cycles[-1].targets) if cycles else 0,
    )
    return 0


if __name__ == '__main__':
    sys.exit(main())
