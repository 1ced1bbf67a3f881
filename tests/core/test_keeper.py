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

from rt_fusion.core import keeper, linux
from rt_fusion.core.errors import ParameterError
from tests.conftest import Proc, child_pids, ros_env, wait_for

# The node: says its pid once its turn comes, then waits for a signal (or ends as told by its
# first argument). A standby that is dismissed ends with status 0.
NODE = """
import gc, os, signal, sys, time
from rt_fusion.core.keeper import Keeper
turn = Keeper(
    'test', delay_s=float(sys.argv[2]), quick_s=float(sys.argv[3]), standby=sys.argv[4] == '1'
).serve()
if not turn.wait():
    time.sleep(0.3)  # paced: a standby's teardown (a node's: its hidden node destroyed)
    sys.exit(0)
print('NODE', os.getpid(), gc.get_freeze_count(), flush=True)
if sys.argv[1] == 'exit2':
    sys.exit(2)
if sys.argv[1] == 'crash':
    os.kill(os.getpid(), signal.SIGKILL)
while True:
    signal.pause()
"""


def _start(
    mode: str = 'wait', delay_s: float = 0.0, quick_s: float = 0.0, standby: bool = True
) -> Proc:
    argv = [sys.executable, '-c', NODE, mode, str(delay_s), str(quick_s), str(int(standby))]
    return Proc(argv, ros_env(), 'keeper')


def _node_line(proc: Proc) -> list[str]:
    line = proc.read_line(60)
    assert line is not None and line.startswith('NODE '), (line, proc.tail())
    return line.split()


def _node_pid(proc: Proc) -> int:
    return int(_node_line(proc)[1])


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


def test_a_standby_takes_over_from_a_killed_node_and_a_stop_reaches_both() -> None:
    proc = _start()
    try:
        first = _node_pid(proc)
        assert first != proc.popen.pid  # the node is the keeper's child
        # Beside it, a standby forked in advance, once the node has had its start (the
        # keeper's standby_after_s, 1 s), named so in ps from its fork, waiting for its turn.
        assert wait_for(lambda: len(child_pids(proc.popen.pid)) == 2), proc.tail()
        (standby,) = set(child_pids(proc.popen.pid)) - {first}
        assert keeper.process_name(standby) == 'standby-test'  # never taken for the node
        first_age, standby_age = linux.process_age_s(first), linux.process_age_s(standby)
        assert first_age is not None and standby_age is not None
        assert first_age - standby_age >= 0.9, (first_age, standby_age)
        os.kill(first, signal.SIGKILL)
        assert _node_pid(proc) == standby  # the standby's turn came
        assert keeper.process_name(standby) != 'standby-test'
        assert proc.wait_stderr('killed by SIGKILL', 30), proc.tail()
        assert proc.wait_stderr(f'warm restart 1 (standby {standby} takes over)', 30)
        # ... and the keeper forks the next standby.
        assert wait_for(lambda: len(child_pids(proc.popen.pid)) == 2), proc.tail()
        (spare,) = set(child_pids(proc.popen.pid)) - {standby}
        # ros2 launch's SIGINT goes to the keeper; the node and the standby end, then the
        # keeper ends as its node did.
        proc.popen.send_signal(signal.SIGINT)
        assert proc.wait(30) == -signal.SIGINT
        assert _gone(standby) and _gone(spare)
    finally:
        proc.stop()


def _reading_a_pipe(pid: int) -> bool:
    """Whether process ``pid`` sleeps in a pipe read (a standby waiting for its turn)."""
    try:
        wchan = Path(f'/proc/{pid}/wchan').read_text()
        syscall = Path(f'/proc/{pid}/syscall').read_text().split()
    except OSError:
        return False
    # the kernel's function where it sleeps, or (where that is hidden) x86-64's read(2)
    return 'pipe_read' in wchan or (wchan == '0' and syscall[:1] == ['0'])


def test_a_standby_stopped_by_several_sigints_at_once_ends_quietly() -> None:
    """ros2 launch's SIGINT (the keeper forwards it) and a terminal's come together: the
    second one cut a standby's teardown short with a KeyboardInterrupt traceback (chaos runs'
    launch logs)."""
    proc = _start()
    try:
        node = _node_pid(proc)
        assert wait_for(lambda: len(child_pids(proc.popen.pid)) == 2), proc.tail()
        (standby,) = set(child_pids(proc.popen.pid)) - {node}
        # Once it waits for its turn (before, a stop is the starting process's, as any other)
        assert wait_for(lambda: _reading_a_pipe(standby)), proc.tail()
        os.kill(standby, signal.SIGINT)
        time.sleep(0.1)  # paced: the second while the first one's teardown runs
        os.kill(standby, signal.SIGINT)
        assert proc.wait_stderr(f'standby {standby} exit status 0', 30), proc.tail()
        assert not any('Traceback' in line for line in proc.stderr), proc.tail()
    finally:
        proc.stop()


def test_without_a_standby_the_node_is_forked_at_its_death() -> None:
    proc = _start(standby=False)
    try:
        _, pid, frozen = _node_line(proc)
        first = int(pid)
        # What the keeper imported is frozen before the fork: a node's start-up collection
        # does not walk it (nor copies its pages).
        assert int(frozen) > 1000
        assert child_pids(proc.popen.pid) == [first]
        os.kill(first, signal.SIGKILL)
        second = _node_pid(proc)
        assert second not in (first, proc.popen.pid)
        assert proc.wait_stderr('warm restart 1 (forked from the imported keeper)', 30)
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
        assert not any('NODE' in line for line in proc.lines.queue)  # the standby never ran
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


def test_a_killed_keeper_takes_its_node_and_standby_down() -> None:
    proc = _start()
    try:
        node = _node_pid(proc)
        assert wait_for(lambda: len(child_pids(proc.popen.pid)) == 2), proc.tail()
        (standby,) = set(child_pids(proc.popen.pid)) - {node}
        proc.popen.kill()
        proc.wait(30)
        assert _gone(node), 'the node outlived its keeper'
        assert _gone(standby), 'the standby outlived its keeper'
    finally:
        proc.stop()


@pytest.mark.parametrize('text', ['soon', '-1', 'nan'])
def test_a_bad_delay_before_a_restart_is_refused_with_its_name(text: str) -> None:
    with pytest.raises(ParameterError, match=keeper.ENV):
        keeper.delay_from_env({keeper.ENV: text})
    assert keeper.delay_from_env({}) is None
    assert keeper.delay_from_env({keeper.ENV: '0.5'}) == 0.5


BOOST = """
import os, sys, threading
from rt_fusion.core.keeper import StartBoost
base = os.getpriority(os.PRIO_PROCESS, 0)
boost = StartBoost(delta=5)
print('granted', boost.granted, flush=True)
nices = {}
def worker():
    nices['started meanwhile'] = os.getpriority(os.PRIO_PROCESS, 0)
    done.wait()
    nices['after'] = os.getpriority(os.PRIO_PROCESS, 0)
done = threading.Event()
t = threading.Thread(target=worker)
t.start()
nices['boosted'] = os.getpriority(os.PRIO_PROCESS, 0)
boost.end()
done.set()
t.join()
nices['main after'] = os.getpriority(os.PRIO_PROCESS, 0)
print(base, nices['boosted'], nices['started meanwhile'], nices['after'], nices['main after'])
"""


def test_a_restart_boost_lowers_nice_for_every_thread_of_the_start_and_gives_it_back() -> None:
    proc = Proc([sys.executable, '-c', BOOST], ros_env(), 'boost')
    try:
        granted = proc.read_line(30)
        line = proc.read_line(30)
        assert proc.wait(30) == 0, proc.tail()
    finally:
        proc.stop()
    assert granted is not None and line is not None, proc.tail()
    base, boosted, meanwhile, after, main_after = (int(x) for x in line.split())
    if granted == 'granted False':  # no CAP_SYS_NICE or RLIMIT_NICE here: nothing changed
        assert boosted == meanwhile == after == main_after == base
        pytest.skip('lowering nice is not permitted here')
    assert boosted == max(-20, base - 5) and meanwhile == boosted  # threads inherit it
    assert after == main_after == base  # end() gave every thread its value back
