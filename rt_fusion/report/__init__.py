"""What every tool prints and writes: latency tables, the RESULT line, PNG plots, JSON results.

The tools' reporting room (rich, matplotlib), above the core and beside the nodes, which never
use it: :mod:`.tables` (evaluation and demo tables), :mod:`.plots` (the pictures of a run).
Convention for tools/: a human-readable table, then one final line
``RESULT key=value key=value ...`` that scripts parse.
"""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
from rich.console import Console
from rich.table import Table

from rt_fusion.core.latency import LatencySummary, summarize_ns

console = Console(highlight=False)
if not console.is_terminal:  # logs and CI: wide enough that tables keep one row per line
    console = Console(highlight=False, width=160)


def resolution(text: str) -> tuple[int, int]:
    """An argparse type: ``WxH`` (e.g. ``1920x1080``) as (width, height)."""
    try:
        w, h = (int(v) for v in text.lower().split('x'))
    except ValueError:
        raise argparse.ArgumentTypeError(f'{text!r}: want WxH, e.g. 1920x1080') from None
    return w, h


def _fmt(value: float) -> str:
    if math.isnan(value):
        return '-'
    return f'{value:,.1f}' if value < 10_000 else f'{value:,.0f}'


def latency_table(
    title: str,
    rows: Mapping[str, LatencySummary],
    baseline: str | None = None,
    extra: Mapping[str, Mapping[str, str]] | None = None,
) -> Table:
    """A table of P50/P99/max [µs] per path; with ``baseline``, the P99 ratio baseline/row."""
    table = Table(title=title, title_justify='left')
    table.add_column('path')
    table.add_column('n', justify='right')
    for name in ('P50 µs', 'P90 µs', 'P99 µs', 'max µs'):
        table.add_column(name, justify='right')
    if baseline is not None:
        table.add_column(f'P99 ×faster than {baseline}', justify='right')
    extra_cols = sorted({key for cols in (extra or {}).values() for key in cols})
    for key in extra_cols:
        table.add_column(key, justify='right')
    base = rows.get(baseline) if baseline is not None else None
    for name, s in rows.items():
        cells = [
            name,
            str(s.count),
            _fmt(s.p50_us),
            _fmt(s.p90_us),
            _fmt(s.p99_us),
            _fmt(s.max_us),
        ]
        if baseline is not None:
            ratio = base.p99_us / s.p99_us if base is not None and s.p99_us > 0 else float('nan')
            cells.append('-' if math.isnan(ratio) else f'{ratio:,.1f}×')
        cells += [(extra or {}).get(name, {}).get(key, '') for key in extra_cols]
        table.add_row(*cells)
    return table


def result_line(**values: Any) -> str:
    """``RESULT k=v ...`` (floats with 3 significant decimals), printed and returned."""
    parts = []
    for key, value in values.items():
        text = str(value)
        if isinstance(value, float):
            text = 'nan' if math.isnan(value) else f'{value:.3f}'.rstrip('0').rstrip('.')
        parts.append(f'{key}={text}')
    line = 'RESULT ' + ' '.join(parts)
    print(line, flush=True)
    return line


def write_json(path: Path, data: Any) -> None:
    """Writes ``data`` as indented JSON, creating the folder."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2, sort_keys=True, default=_json_default) + '\n')


def _json_default(obj: object) -> object:
    if isinstance(obj, LatencySummary):
        return obj.as_dict()
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    raise TypeError(f'not JSON serialisable: {type(obj).__name__}')


def _cdf(
    ax: Any, samples_ns: Mapping[str, npt.ArrayLike], log_x: bool, colors: Mapping[str, str]
) -> None:
    for name, samples in samples_ns.items():
        arr = np.sort(np.asarray(samples, dtype=np.float64)) / 1e3
        if arr.size == 0:
            continue
        s = summarize_ns(np.asarray(samples))
        ax.step(
            arr,
            np.arange(1, arr.size + 1) / arr.size,
            where='post',
            color=colors.get(name),
            label=f'{name}: P50 {_fmt(s.p50_us)} µs, P99 {_fmt(s.p99_us)} µs',
        )
    ax.axhline(0.99, color='grey', lw=0.6, ls=':')
    ax.axhline(0.5, color='grey', lw=0.6, ls=':')
    if log_x:
        ax.set_xscale('log')
    ax.set_xlabel('latency [µs]')
    ax.set_ylabel('fraction of samples ≤ latency')
    ax.grid(True, which='both', alpha=0.3)
    ax.legend(loc='lower right', fontsize=7)


def plot_latency(
    path: Path, samples_ns: Mapping[str, npt.ArrayLike], title: str, log_x: bool = True
) -> None:
    """PNG: empirical CDF of each path's latency, with P50/P99 marked."""
    plot_latency_grid(path, {title: samples_ns}, log_x=log_x)


def plot_latency_grid(
    path: Path,
    panels: Mapping[str, Mapping[str, npt.ArrayLike]],
    log_x: bool = True,
    columns: int = 2,
) -> None:
    """PNG: one CDF panel (as :func:`plot_latency`) per entry of ``panels`` (title → samples
    per path), ``columns`` to a row."""
    import matplotlib  # noqa: PLC0415 - plotting is optional work, imported when asked

    matplotlib.use('Agg')
    import matplotlib.pyplot as plt  # noqa: PLC0415

    # One colour per path in every panel (the legend order may differ from panel to panel).
    names = list(dict.fromkeys(name for samples in panels.values() for name in samples))
    cycle = plt.rcParams['axes.prop_cycle'].by_key()['color']
    colors = {name: cycle[i % len(cycle)] for i, name in enumerate(names)}
    cols = min(columns, len(panels))
    rows = -(-len(panels) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(9 * cols, 5 * rows), dpi=80, squeeze=False)
    for ax, (title, samples) in zip(axes.flat, panels.items(), strict=False):
        _cdf(ax, samples, log_x, colors)
        ax.set_title(title)
    for ax in list(axes.flat)[len(panels) :]:
        ax.set_visible(False)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
