"""Drives one node through configure → cleanup cycles in this process and prints what it holds.

    python -m tests.ros.lifecycle_probe MODULE CLASS CYCLES --ros-args -p autostart:=false ...

After every configure and every cleanup it prints ``STATE {json}`` with the node's publishers,
subscriptions, timers, live threads, open file descriptors and this process's shared-memory
segments; at the end ``DONE``. A node that leaks shows growing numbers from cycle to cycle.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
import threading
from pathlib import Path

import rclpy

from rt_fusion.core import realtime
from rt_fusion.core.shm import SHM_DIR
from rt_fusion.ros import compat


def _segments() -> list[str]:
    mine = set()
    for fd in os.listdir('/proc/self/fd'):
        try:
            target = os.readlink(f'/proc/self/fd/{fd}')
        except OSError:
            continue
        if target.startswith(str(SHM_DIR)):
            mine.add(Path(target).name)
    with Path('/proc/self/maps').open() as maps:
        for line in maps:
            if str(SHM_DIR) in line:
                mine.add(Path(line.split()[-1]).name)
    return sorted(mine)


def state(node: object, step: str, cycle: int) -> dict[str, object]:
    """What the node holds now, once its start-up work in the background (a node's compiled
    kernels, modules for later: ``realtime.start_in_background``) has finished: transient, and
    what it leaves (a loaded library) stays for the process's life, not per cycle."""
    for thread in realtime.background_threads():
        thread.join(120)
    return {
        'step': step,
        'cycle': cycle,
        'lifecycle': node._state_machine.current_state[1],  # type: ignore[attr-defined]
        'publishers': sorted(p.topic_name for p in node.publishers),  # type: ignore[attr-defined]
        'subscriptions': sorted(s.topic_name for s in node.subscriptions),  # type: ignore[attr-defined]
        'timers': len(list(node.timers)),  # type: ignore[attr-defined]
        'threads': sorted(t.name for t in threading.enumerate()),
        'fds': len(os.listdir('/proc/self/fd')),
        'segments': _segments(),
    }


def main() -> int:
    module, cls_name, cycles = sys.argv[1], sys.argv[2], int(sys.argv[3])
    rclpy.init(args=sys.argv)
    cls = getattr(importlib.import_module(f'rt_fusion.nodes.{module}'), cls_name)
    node = cls()
    try:
        for cycle in range(cycles):
            node.trigger_configure()
            print('STATE ' + json.dumps(state(node, 'configured', cycle)), flush=True)
            if node.failure is not None:
                print(f'FAILED {node.failure}', flush=True)
                return 1
            node.trigger_activate()
            print('STATE ' + json.dumps(state(node, 'active', cycle)), flush=True)
            node.trigger_deactivate()
            node.trigger_cleanup()
            print('STATE ' + json.dumps(state(node, 'cleaned', cycle)), flush=True)
        print('DONE', flush=True)
    finally:
        node.destroy_node()
        compat.try_shutdown()
    return 0


if __name__ == '__main__':
    raise SystemExit(main())
