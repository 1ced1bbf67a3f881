"""A node of a running graph killed, and timed back: when its new process exists, when it is
active again (and where its start went), when its output is back, and which other outputs
stalled meanwhile. ``tools/chaos.py`` kills every node in turn with this."""

from __future__ import annotations

import os
import re
import signal
import time
from collections.abc import Mapping
from typing import Any

from rt_fusion.ros.harness import processes
from rt_fusion.ros.harness.launching import LaunchedGraph
from rt_fusion.ros.harness.recorder import Recorder

# Who may idle while a node is down: the planner publishes only on the fusion's objects.
DEPENDS = {'fusion': {'planner'}}
# The node's active line; a process started by running.run says where its start went.
ACTIVE = re.compile(r'\[INFO\] \[(\d+\.\d+)\] \[(\w+)\]: active(?: \(([^)]*)\))?')
STEP = re.compile(r'([a-zA-Z ]+?) (\d+\.\d+)')


def start_steps(text: str | None) -> dict[str, float]:
    """The steps of an active line's start-up report (``lifecycle.StartupTimes``)."""
    if not text or ': ' not in text:
        return {}
    return {m.group(1).strip(): float(m.group(2)) for m in STEP.finditer(text.split(': ', 1)[1])}


def kill_and_time(
    launched: LaunchedGraph,
    probe: Recorder,
    name: str,
    outputs: Mapping[str, Any],
    *,
    keeper: bool,
    deadline_s: float,
) -> dict[str, Any]:
    """SIGKILLs node ``name`` (its warm keeper with ``keeper``) and times it back; ``probe``
    counts the arrivals on every output (``outputs``: the node names it records)."""
    pid = processes.node_pid(launched.popen.pid, name, keeper=keeper)
    if pid is None:
        return {'node': name, 'error': 'no process found'}
    seen = len(launched.history)
    kill_wall, kill_mono = time.time(), time.monotonic()
    kill_boot = time.clock_gettime(time.CLOCK_BOOTTIME)
    os.kill(pid, signal.SIGKILL)
    active_s: float | None = None
    steps: dict[str, float] = {}
    deadline = kill_mono + deadline_s
    while active_s is None and time.monotonic() < deadline:
        probe.spin(0.05)
        for line in launched.history[seen:]:
            m = ACTIVE.search(line)
            if m and m.group(2) == name and float(m.group(1)) > kill_wall:
                active_s = float(m.group(1)) - kill_wall
                steps = start_steps(m.group(3))
                break
    while probe.first_after(name, kill_mono + (active_s or 0.0)) is None:
        if time.monotonic() > deadline:
            break
        probe.spin(0.05)
    probe.spin(1.0)
    first = probe.first_after(name, kill_mono + (active_s or 0.0))
    hi = kill_mono + (active_s if active_s is not None else deadline_s) + 1.0
    others = {other: probe.count(other, kill_mono, hi) for other in outputs if other != name}
    stalled = [o for o, n in others.items() if n == 0 and o not in DEPENDS.get(name, ())]
    new_pid = processes.node_pid(launched.popen.pid, name)
    started = processes.started_boot_s(new_pid)
    return {
        'node': name,
        'pid': pid,
        'new_pid': new_pid,
        # kill -> the new node's process exists (0: a standby, forked before the kill)
        'spawned_s': None if started is None else max(0.0, started - kill_boot),
        'active_s': active_s,
        'start_steps_s': steps,  # where the new process's start went
        'output_back_s': None if first is None else first - kill_mono,
        'outage_s': hi - kill_mono,
        'others': others,
        'stalled': stalled,
    }


def describe(row: Mapping[str, Any]) -> str:
    """One line of a kill's timings."""

    def s(key: str) -> str:
        return '-' if row.get(key) is None else f'{row[key]:.2f} s'

    return (
        f'  {row["node"]:10s} killed (pid {row["pid"]}): active again after {s("active_s")} '
        f'(process started after {s("spawned_s")}), output after {s("output_back_s")}; '
        f'stalled meanwhile: {row["stalled"] or "none"}'
    )
