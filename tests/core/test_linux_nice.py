"""linux.nice_process: every thread of the process yields (nice, SCHED_IDLE), those it had and
those it starts later; read back from /proc for each thread."""

from __future__ import annotations

import ast
import os
import subprocess
import sys


def test_every_thread_before_and_after_is_niced_and_idle() -> None:
    code = (
        'import os, threading, time\n'
        'from rt_fusion.core import linux\n'
        'stop = threading.Event()\n'
        'before = threading.Thread(target=stop.wait); before.start()\n'
        'linux.nice_process(19, idle=True)\n'
        'after = threading.Thread(target=stop.wait); after.start()\n'
        'out = []\n'
        'for tid in os.listdir("/proc/self/task"):\n'
        '    stat = open(f"/proc/self/task/{tid}/stat").read().rsplit(")", 1)[1].split()\n'
        '    out.append((int(stat[16]), os.sched_getscheduler(int(tid))))\n'
        'stop.set(); print(out)\n'
    )
    proc = subprocess.run(
        [sys.executable, '-c', code], capture_output=True, text=True, timeout=60, check=True
    )
    threads = ast.literal_eval(proc.stdout)
    assert len(threads) == 3, threads  # main, the one before, the one after
    assert all(nice == 19 and policy == os.SCHED_IDLE for nice, policy in threads), threads
