"""The processes of a running graph as the operating system sees them: which pid is which node,
what each holds (resident memory, open files), when it started, and this domain's shared-memory
segments. Soak and chaos runs watch a graph through these."""

from __future__ import annotations

import os
import time
from collections import Counter
from pathlib import Path
from typing import Any

from rt_fusion.core import linux
from rt_fusion.ros.harness import launching

FD_READS, FD_READ_GAP_S = 3, 0.1  # open files per sample: the fewest of these reads


def node_pids(pgid: int) -> dict[str, int]:
    """name -> pid of the rt_fusion node processes of a launch's process group."""
    out: dict[str, int] = {}
    for pid, argv in launching.group_argv(pgid).items():
        node = next((n for n in (Path(a).name for a in argv[:2]) if n.endswith('_node')), None)
        if node is not None:
            out[node] = pid
    return out


def open_files(pid: int) -> Counter[str]:
    """What a process's open file descriptors point at. Sockets and anonymous inodes lose their
    inode number (``socket:``), so that two samples' descriptors compare by kind and path."""
    targets: Counter[str] = Counter()
    for fd in os.listdir(f'/proc/{pid}/fd'):
        try:
            target = os.readlink(f'/proc/{pid}/fd/{fd}')
        except OSError:  # closed between the listing and the link
            continue
        targets[target.split('[', 1)[0] if target.endswith(']') else target] += 1
    return targets


def process_stats(pid: int, reads: int = FD_READS) -> tuple[float, Counter[str]]:
    """(resident MB, open files) of a process; (nan, {}) once it is gone. The open files are
    the fewest of ``reads`` reads ``FD_READ_GAP_S`` apart: a file the process opens and closes
    at that instant (a log rotation, a bag reopened for the next loop) is not one it holds,
    while a leaked one is in every read."""
    try:
        status = Path(f'/proc/{pid}/status').read_text()
        rss_kb = next(int(x.split()[1]) for x in status.splitlines() if x.startswith('VmRSS:'))
        targets = open_files(pid)
        for _ in range(reads - 1):
            time.sleep(FD_READ_GAP_S)
            again = open_files(pid)
            if again.total() < targets.total():
                targets = again
    except (OSError, StopIteration, ValueError):
        return float('nan'), Counter()
    return rss_kb / 1024.0, targets


def fds_diff(first: dict[str, Counter[str]], last: dict[str, Counter[str]]) -> dict[str, Any]:
    """The descriptors each node opened and closed between two samples: ``{node: {'opened':
    {target: n}, 'closed': {target: n}}}``, nodes without a change left out."""
    out: dict[str, Any] = {}
    for node in sorted(set(first) | set(last)):
        a, b = first.get(node, Counter()), last.get(node, Counter())
        opened, closed = dict(sorted((b - a).items())), dict(sorted((a - b).items()))
        if opened or closed:
            out[node] = {'opened': opened, 'closed': closed}
    return out


def fds_beyond_peak(
    earlier: list[dict[str, Counter[str]]], last: dict[str, Counter[str]]
) -> dict[str, dict[str, int]]:
    """The descriptors each node holds at ``last`` beyond the most it held of each target in any
    ``earlier`` sample: ``{node: {target: n}}``. A leak outgrows every earlier count; a file held
    part of the time (a looped bag between two passes, a log being rotated) does not, whichever
    phase a sample caught it in."""
    out: dict[str, dict[str, int]] = {}
    for node, held in sorted(last.items()):
        peak: Counter[str] = Counter()
        for sample in earlier:
            peak |= sample.get(node, Counter())
        grown = dict(sorted((held - peak).items()))
        if grown:
            out[node] = grown
    return out


def node_pid(pgid: int, name: str, keeper: bool = False) -> int | None:
    """The pid of node ``name``'s process in a launch's group; with ``keeper``, the process
    launch started (the node's warm keeper when there is one)."""
    pids = launching.node_processes(pgid).get(name)
    return None if pids is None else pids[1 if keeper else 0]


def started_boot_s(pid: int | None) -> float | None:
    """When process ``pid`` started, in CLOCK_BOOTTIME seconds (the kernel's clock ticks: 10 ms
    resolution), or None when it is gone."""
    ticks = None if pid is None else linux.process_start_ticks(pid)
    return None if ticks is None else ticks / os.sysconf('SC_CLK_TCK')


def shm_segments(domain: str) -> list[str]:
    """This ROS domain's rt_fusion shared-memory segments."""
    prefix = f'rt_fusion_d{domain}_'
    return sorted(p.name for p in Path('/dev/shm').iterdir() if p.name.startswith(prefix))
