"""The tables the evaluation and the demo print (rich)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rich.table import Table

from rt_fusion.core.evaluation.ledger import LEDGER_STAGES
from rt_fusion.core.evaluation.runs import CLOSED_LOOP_KEYS
from rt_fusion.core.latency import summarize_ns

EVALUATION_COLUMNS = (
    'precision',
    'recall',
    'mota',
    'hota',
    'assa',
    'amota',
    'pos_err_m',
    'vel_err_mps',
    'id_switches',
    'fp_per_frame',
    'class_accuracy',
    'emergency_recognised',
    'collisions',
    'collisions_seen',
    'min_gap_m',
)


def evaluation_table(rows: Sequence[tuple[str, Mapping[str, Any]]]) -> Table:
    """One row per run of headline numbers (:func:`rt_fusion.core.evaluation.runs.flat`)."""
    table = Table(title="evaluation (visible objects: to the run's sensors; 1–80 m, 2 m gate)")
    cols = (
        *EVALUATION_COLUMNS,
        *(c for c in CLOSED_LOOP_KEYS if any(r.get(c) is not None for _n, r in rows)),
        'frames_fused',
    )
    table.add_column('run')
    for c in cols:
        table.add_column(c.replace('_', ' '), justify='right')
    for name, row in rows:
        table.add_row(
            name,
            *(
                ''
                if row.get(c) is None
                else f'{row[c]:.3g}'
                if isinstance(row[c], float)
                else str(row[c])
                for c in cols
            ),
        )
    return table


def stage_table(title: str, samples: Mapping[str, Mapping[str, Sequence[int]]]) -> Table:
    """Per stage and run (the first is ours, an optional ``conventional`` the comparison): P50 /
    P99 / max [ms], and the P99 ratio conventional / ours."""
    table = Table(title=title, title_justify='left')
    table.add_column('stage')
    runs = list(samples)
    ours = runs[0]
    for run in runs:
        for col in ('n', 'P50', 'P99', 'max'):
            table.add_column(f'{run} {col}', justify='right')
    if 'conventional' in samples:
        table.add_column(f'P99 conventional / {ours}', justify='right')
    for stage in samples[ours]:
        cells = [stage]
        p99 = {}
        for run in runs:
            v = samples[run].get(stage, [])
            if v:
                sm = summarize_ns(v)
                p99[run] = sm.p99_us
                cells += [
                    str(sm.count),
                    f'{sm.p50_us / 1e3:.2f}',
                    f'{sm.p99_us / 1e3:.2f}',
                    f'{sm.max_us / 1e3:.2f}',
                ]
            else:
                cells += ['0', '-', '-', '-']
        if 'conventional' in samples:
            ok = p99.get(ours) and p99.get('conventional')
            cells.append(f'{p99["conventional"] / p99[ours]:.1f}×' if ok else '-')
        table.add_row(*cells)
    return table


def ledger_table(ledgers: Mapping[str, Mapping[str, Any]]) -> Table:
    """Where each run's camera frames went (:func:`rt_fusion.core.evaluation.ledger.
    frame_ledger`)."""
    table = Table(title='camera frames, stage by stage', title_justify='left')
    table.add_column('stage')
    for run in ledgers:
        table.add_column(run, justify='right')
    for key, label in LEDGER_STAGES:
        table.add_row(label, *(str(led.get(key, '-')) for led in ledgers.values()))
    names = sorted({n for led in ledgers.values() for n in led.get('extra_cameras', {})})
    for name in names:
        keys = ('committed', 'used', 'skipped', 'torn', 'late', 'unmatched', 'missing', 'lost')
        for key in keys:
            table.add_row(
                f'camera {name}: {key}',
                *(
                    str(led.get('extra_cameras', {}).get(name, {}).get(key, '-'))
                    for led in ledgers.values()
                ),
            )
    return table


def chaos_table(rows: Sequence[Mapping[str, Any]], how: str) -> Table:
    """Per killed node: when its process, its active state and its output were back."""
    table = Table(title=f'chaos: kill -9 and {how}, per node', title_justify='left')
    cols = (
        'node',
        'process up [s]',
        'active again [s]',
        'its start: imports or fork / ROS / configure / activate [s]',
        'output again [s]',
        'others during outage',
    )
    for col in cols:
        table.add_column(col)

    def cell(row: Mapping[str, Any], key: str) -> str:
        return '-' if row.get(key) is None else f'{row[key]:.2f}'

    for row in rows:
        table.add_row(
            row['node'],
            cell(row, 'spawned_s'),
            cell(row, 'active_s'),
            ' / '.join(f'{v:.2f}' for v in row.get('start_steps_s', {}).values()) or '-',
            cell(row, 'output_back_s'),
            ', '.join(f'{k} {v}' for k, v in row.get('others', {}).items())
            or row.get('error', ''),
        )
    return table
