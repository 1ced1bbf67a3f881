"""``tools/bench_transport.py --peers``: rt_fusion's frame paths against iceoryx2, Zenoh with
shared memory and plain rclpy, in one run, on the same payloads and pacing: 1080p and 4K BGR
frames at 30 Hz, 1 and 4 reader processes, quiet and beside a busy loop per core.

Each condition (readers × load) runs every path in turn (one writer process, the readers);
the paths' order is rotated from one condition to the next so that no path always runs first
or last. Latency is from the writer's commit (the frame in place, stamped) to a reader holding
a numpy view; every reader's frames are pooled. Lost = frames sent and never received, summed
over the readers.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from rt_fusion.bench import transport as bt
from rt_fusion.core import domains
from rt_fusion.core.latency import LatencySummary, summarize_ns

#: rt_fusion's own paths (the ones whose losses count against it).
OURS = ('fast', 'shm')


@dataclasses.dataclass
class Cell:
    """One path under one condition and payload size."""

    path: str
    size: str
    readers: int
    loaded: bool
    latency_ns: np.ndarray
    sent: int
    lost: int
    writer_cpu_pct: float
    reader_cpu_pct: float
    torn: int = 0

    @property
    def summary(self) -> LatencySummary:
        """P50/P99/max of the pooled samples."""
        return summarize_ns(self.latency_ns)

    @property
    def condition(self) -> str:
        """e.g. ``1080p, 4 readers, loaded``."""
        return f'{self.size}, {self.readers} reader(s), {"loaded" if self.loaded else "quiet"}'


def _cells(
    path: str, plan: list[dict[str, Any]], raw: dict[str, Any], readers: int, loaded: bool
) -> list[Cell]:
    out = []
    for k, sc in enumerate(plan):
        # The fast path's first frame goes by descriptor (it names the ring): not timed.
        sent = sc['frames'] - (1 if path == 'fast' and k == 0 else 0)
        per_reader = [rd['scenarios'][k] for rd in raw['readers']]
        lat = np.concatenate([np.asarray(r['latency_ns'], np.int64) for r in per_reader])
        cpus = [r['cpu_pct'] for r in per_reader if not np.isnan(r['cpu_pct'])]
        out.append(
            Cell(
                path=path,
                size=sc['size'],
                readers=readers,
                loaded=loaded,
                latency_ns=lat,
                sent=sent * readers,
                lost=sum(max(0, sent - r['received']) for r in per_reader),
                writer_cpu_pct=float(raw['writer'][k]['cpu_pct']),
                reader_cpu_pct=float(np.mean(cpus)) if cpus else float('nan'),
                torn=sum(int(rd.get('torn', 0)) for rd in raw['readers']) if k == 0 else 0,
            )
        )
    return out


def run(
    paths: Sequence[str],
    plan: list[dict[str, Any]],
    readers: Sequence[int],
    loads: Sequence[bool],
    step: Callable[[str], None] = lambda _: None,
) -> list[Cell]:
    """Every path under every (readers, load) condition; ``step`` is told before each run."""
    cells: list[Cell] = []
    conditions = [(n, load) for load in loads for n in readers]
    for c, (n, load) in enumerate(conditions):
        order = list(paths[c % len(paths) :]) + list(paths[: c % len(paths)])
        for path in order:
            step(f'{path}: {n} reader(s), {"loaded" if load else "quiet"}')
            # The caller's ROS domain when it has one (a test's own), else one leased per run.
            domain = int(domains.from_env_or_lease())
            raw = bt.run_path(path, plan, domain=domain, readers=n, load=load)
            cells += _cells(path, plan, raw, n, load)
    return cells


def ours_at_or_below_every_peer(cells: Sequence[Cell], size: str = '1080p') -> dict[str, bool]:
    """Per condition of ``size``: whether rt_fusion's fast path's P99 is at or below every
    other path's."""
    out = {}
    for cell in cells:
        if cell.size != size or cell.path != 'fast':
            continue
        peers = [
            c
            for c in cells
            if c.condition == cell.condition and c.path not in OURS and c.latency_ns.size
        ]
        mine = cell.summary.p99_us if cell.latency_ns.size else float('inf')
        out[cell.condition] = all(mine <= p.summary.p99_us for p in peers)
    return out


def versions() -> dict[str, str]:
    """The installed version of each peer's package (``-`` where it is missing)."""
    from importlib import metadata  # noqa: PLC0415

    out = {}
    for dist in ('iceoryx2', 'eclipse-zenoh', 'rclpy'):
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            out[dist] = '-'
    return out
