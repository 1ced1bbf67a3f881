"""The warm keeper (rt_fusion.core.keeper) between real processes: it forks its node again when
the node dies, forwards a stop, hands start-up errors and crash loops to launch, and its node
does not outlive it."""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

import pytest

from rt_fusion.core import keeper
from rt_fusion.core.errors import ParameterError
from tests.conftest import Proc, ros_env

# The node: says its pid, then waits for a signal (or ends as told by its first argument).
NODE = """
import os, signal, sys, time
from rt_fusion.core.keeper import Keeper
Keeper('test', delay_s=float(sys.argv[2]), quick_s=float(sys.argv[3])).serve()
print('NODE', os.getpid(), flush=True)
if sys.argv[1] == 'exit2':
    sys.exit(2)
if sys.argv[1] == 'crash':
    os.kill(os.getpid(), signal.SIGKILL)
while True:
    signal.pause()
"""


def _start(mode: str = 'wait', delay_s: float = 0.0, quick_s: float = 0.0) -> Proc:
    return Proc(
        [sys.executable, '-c', NODE, mode, str(delay_s), str(quick_s)], ros_env(), 'keeper'
    )


def _node_pid(proc: Proc) -> int:
    line = proc.read_line(60)
    assert line is not None and line.startswith('NODE '), (line, proc.tail())
    return int(line.split()[1])


def _gone(pid: int, deadline_s: float = 30.0) -> bool:
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        try:
            state = Path(f'/proc/{pid}/stat').read_text().rsplit(')', 1)[1].split()[0]
        except OSError:
            return True
        if state == 'Z':  # ended; its parent has not reaped it yet
            return True
        time.sleep(0.02)  # paced: polling /proc
    return False


def test_a_killed_node_is_forked_again_and_a_stop_reaches_it() -> None:
    proc = _start()
    try:
        first = _node_pid(proc)
        assert first != proc.popen.pid  # the node is the keeper's child
        os.kill(first, signal.SIGKILL)
        second = _node_pid(proc)
        assert second not in (first, proc.popen.pid)
        assert proc.wait_stderr('killed by SIGKILL', 30), proc.tail()
        assert proc.wait_stderr('warm restart 1', 30), proc.tail()
        # ros2 launch's SIGINT goes to the keeper; the node gets it and ends, then the keeper
        # ends as its node did.
        proc.popen.send_signal(signal.SIGINT)
        assert proc.wait(30) == -signal.SIGINT
        assert _gone(second)
    finally:
        proc.stop()


def test_the_restart_waits_for_the_respawn_delay() -> None:
    proc = _start(delay_s=1.5)
    try:
        first = _node_pid(proc)
        killed = time.monotonic()
        os.kill(first, signal.SIGKILL)
        _node_pid(proc)
        assert time.monotonic() - killed >= 1.5
        assert proc.wait_stderr('warm restart 1 in 1.5 s', 30), proc.tail()
    finally:
        proc.stop()


def test_a_start_up_error_ends_the_keeper_with_its_status() -> None:
    proc = _start('exit2')
    try:
        _node_pid(proc)
        assert proc.wait(60) == 2  # launch sees the node's own status and decides
        assert not any('warm restart' in line for line in proc.stderr)
    finally:
        proc.stop()


def test_a_crash_loop_is_handed_to_launch() -> None:
    proc = _start('crash', quick_s=30.0)
    try:
        for _ in range(3):
            _node_pid(proc)
        assert proc.wait(60) == -signal.SIGKILL  # ended as its node did
        assert proc.wait_stderr('3 times in a row', 10), proc.tail()
        assert sum('warm restart' in line for line in proc.stderr) == 2
    finally:
        proc.stop()


def test_a_killed_keeper_takes_its_node_down() -> None:
    proc = _start()
    try:
        node = _node_pid(proc)
        proc.popen.kill()
        proc.wait(30)
        assert _gone(node), 'the node outlived its keeper'
    finally:
        proc.stop()


@pytest.mark.parametrize('text', ['soon', '-1', 'nan'])
def test_a_bad_delay_before_a_restart_is_refused_with_its_name(text: str) -> None:
    with pytest.raises(ParameterError, match=keeper.ENV):
        keeper.delay_from_env({keeper.ENV: text})
    assert keeper.delay_from_env({}) is None
    assert keeper.delay_from_env({keeper.ENV: '0.5'}) == 0.5
