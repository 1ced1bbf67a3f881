"""Warm restart: a node that dies is replaced by a standby forked from its already-imported self.

A node killed by a crash or ``kill -9`` is restarted by launch (``respawn``) as a new
interpreter, which spends most of its start (0.4-1.5 s on the vehicle computer's little cores,
more on a loaded one) importing Python modules: numpy, OpenCV, rclpy, ONNX Runtime. With a
keeper, the process launch starts imports everything once, forks the node and waits. When the
node dies by a signal or an unexpected exit status, the keeper starts another at once (after the
respawn delay), which only initialises ROS, configures and activates.

With ``standby`` the keeper keeps that other node forked in advance (``standby_after_s`` after
the running node's start, out of its way), with ROS initialised and a DDS participant held by a
hidden node without endpoints (``ros.running``), and nothing else: its participant has long been
discovered by every other process when it takes over. A participant's first second is when its
endpoints reach the others late (the first endpoint announcements reach processes that have not
discovered it yet and are dropped; Fast DDS repairs them at its 1-s endpoint-discovery
heartbeat; measured in the README): a fusion node forked at the death got its first input
0.7-1.4 s after it was active, a standby's within 3-40 ms. The standby is named
``standby-<node>`` in ``ps`` until its turn comes.

The keeper never initialises ROS, opens a device, starts a thread or touches a GPU: it forks
before any of that, so the child starts as clean as a new process, with the imported modules
shared copy-on-write. Only native threads started by the imports exist at the fork (OpenBLAS's
pool and LTTng-UST's listeners, both idle; glibc and OpenBLAS handle fork), and they are not
carried into the child.

What the keeper passes on and what it does not:

- SIGINT and SIGTERM are forwarded to the node; the keeper then ends with the node's status
  (``ros2 launch``'s shutdown reaches the node exactly as without a keeper).
- A node that ends by itself with status 0, or with 2 (a start-up error: a bad parameter, a
  missing device), ends the keeper with the same status: launch decides, as without a keeper.
- A keeper killed itself (``kill -9`` of the keeper) takes its node down (the kernel sends the
  node SIGTERM: ``PR_SET_PDEATHSIG``), and launch respawns the keeper: a cold restart.
- A node killed leaves Fast DDS's shared-memory files behind; the keeper removes those of dead
  processes (:mod:`rt_fusion.core.dds_shm`) while the new node starts.
- A standby that dies while it waits is forked again (``quick_limit`` times, then the keeper
  goes on without one).
- A node that dies within ``quick_s`` of its start ``quick_limit`` times in a row is not
  restarted again: the keeper ends with its status and launch takes over (a crash loop starting
  from the same warm state would repeat forever).

``RT_FUSION_WARM_RESTART`` turns it on (``vehicle.launch.py respawn:=true`` sets it): its
value is the delay before a restart in seconds. ``RT_FUSION_STANDBY=0`` goes without the
standby (``standby:=false``).
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import math
import os
import signal
import sys
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from rt_fusion.core import dds_shm
from rt_fusion.core.errors import ParameterError

ENV = 'RT_FUSION_WARM_RESTART'
STANDBY_ENV = 'RT_FUSION_STANDBY'
STANDBY_PREFIX = 'standby-'
_PR_SET_NAME = 15
_PR_SET_PDEATHSIG = 1
#: Statuses of a node that ended by itself: not restarted by the keeper.
FINAL_STATUSES = (0, 2)


def delay_from_env(environ: dict[str, str] | None = None) -> float | None:
    """The restart delay of ``RT_FUSION_WARM_RESTART`` [s]; None when it is unset or empty."""
    text = (os.environ if environ is None else environ).get(ENV, '').strip()
    if not text:
        return None
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value >= 0.0):
        raise ParameterError(ENV, text, 'not a restart delay >= 0 s')
    return value


def set_parent_death_signal(signum: int) -> None:
    """The kernel sends this process ``signum`` when its parent ends (Linux ``prctl``)."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_PDEATHSIG, signum, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), 'prctl(PR_SET_PDEATHSIG)')


def process_name(pid: int | str = 'self') -> str:
    """A process's name (``/proc/<pid>/comm``, as ``ps`` shows it); '' once it is gone."""
    try:
        return Path(f'/proc/{pid}/comm').read_text().strip()
    except OSError:
        return ''


def set_process_name(name: str) -> None:
    """This thread's name (the process's, for the main thread: ``ps``, ``/proc/<pid>/comm``);
    15 bytes at most."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_NAME, name.encode()[:15], 0, 0, 0)


def describe(status: int) -> str:
    """``killed by SIGKILL`` or ``exit status 1`` for a ``waitstatus_to_exitcode`` value."""
    if status < 0:
        try:
            return f'killed by {signal.Signals(-status).name}'
        except ValueError:
            return f'killed by signal {-status}'
    return f'exit status {status}'


class Turn:
    """A forked node's wait for its turn to run: at once for the first node, when the running
    node dies for a standby. Meanwhile a standby has initialised ROS (its DDS participant is
    known to every other process by the time it takes over) and holds nothing else."""

    def __init__(
        self,
        fd: int,
        label: str = '',
        on_turn: Callable[[int], None] | None = None,
        name: str = '',
    ) -> None:
        self.fd = fd
        self.label = label
        self.on_turn = on_turn
        self.name = name  # the process's name once its turn comes ('': as it is)
        self.restart = 0  # the number of the restart its turn is (0: the first node)

    def standing_by(self) -> bool:
        """True in a standby (forked in advance), False in a node forked for its turn."""
        return bool(self.name)

    def wait(self) -> bool:
        """True when it is this node's turn; False when the keeper ends or the process was
        asked to stop (SIGINT, SIGTERM) while it stood by: the caller then ends."""

        stopped: list[int] = []

        def stop(signum: int, frame: object) -> None:
            del frame
            if not stopped:  # once: launch's SIGINT and the terminal's come together
                stopped.append(signum)
                raise KeyboardInterrupt

        old = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
        for sig in old:
            signal.signal(sig, stop)
        data = b''
        try:
            data = os.read(self.fd, 64)
        except KeyboardInterrupt:
            pass
        finally:
            if stopped or not data:  # the process ends: a further SIGINT must not cut that
                # short with a KeyboardInterrupt traceback; SIGTERM still ends it
                signal.signal(signal.SIGINT, signal.SIG_IGN)
                signal.signal(signal.SIGTERM, signal.SIG_DFL)
            else:
                for sig, handler in old.items():
                    signal.signal(sig, handler)
            os.close(self.fd)
            if self.name:  # a standby: the node's name again
                set_process_name(self.name)
        if not data:
            return False
        self.restart = int(data.split()[0])
        if self.on_turn is not None:
            self.on_turn(self.restart)
        return True


class StartBoost:
    """A restarted node's start at a higher CPU share: its threads' nice value lowered by
    ``delta`` until :meth:`end` (once the node is active), then given back.

    A node restarted on a loaded machine starts slowly, when it is needed most: on the 2-core
    VM with the whole graph running, SCHED_OTHER start-up work got the little CPU the real-time
    threads left, shared with a dozen processes. A lower nice value gives it a larger share of
    that (-10: ~10 times a default process's) without preempting anyone, as a real-time
    priority would. Lowering nice needs ``CAP_SYS_NICE`` or an ``RLIMIT_NICE`` that allows it
    (``rt_kernel/README.md``); without either the start is as before (``granted`` False).
    """

    def __init__(self, delta: int = 10) -> None:
        self.base = os.getpriority(os.PRIO_PROCESS, 0)
        self.boosted = max(-20, self.base - delta)
        try:
            os.setpriority(os.PRIO_PROCESS, 0, self.boosted)
            self.granted = True
        except PermissionError:
            self.granted = False

    def end(self) -> None:
        """Every thread of the process still at the boosted value (those started meanwhile
        inherited it) goes back to the value the node had (raising nice needs no privilege).
        Idempotent."""
        if not self.granted:
            return
        self.granted = False
        with contextlib.suppress(FileNotFoundError):
            for entry in os.scandir('/proc/self/task'):
                tid = int(entry.name)
                with contextlib.suppress(OSError):  # ended meanwhile
                    if os.getpriority(os.PRIO_PROCESS, tid) == self.boosted:
                        os.setpriority(os.PRIO_PROCESS, tid, self.base)


@dataclass
class _Child:
    pid: int
    fd: int  # the write end of its turn pipe; -1 once its turn was given


class Keeper:
    """Forks the node, waits, and when the node dies hands over to a standby (or forks the node
    again). :meth:`serve` returns only in a child, with its :class:`Turn`; the keeper itself
    ends the process with the node's status.

    ``standby`` keeps one more child forked beside the running node, waiting for its turn with
    ROS initialised. ``label`` names the node in the keeper's lines on stderr; ``on_turn``
    runs in a child when its turn comes, with the number of the restart (0: the first node).
    """

    def __init__(
        self,
        label: str,
        delay_s: float = 0.0,
        quick_s: float = 2.0,
        quick_limit: int = 3,
        standby: bool = False,
        on_turn: Callable[[int], None] | None = None,
        err: TextIO | None = None,
        standby_after_s: float = 1.0,
    ) -> None:
        self.label = label
        self.delay_s = delay_s
        self.quick_s = quick_s
        self.quick_limit = quick_limit
        self.standby = standby
        self.standby_after_s = standby_after_s
        self.on_turn = on_turn
        self.err = err if err is not None else sys.stderr
        self.active = 0  # the running node's pid
        self.waiting: _Child | None = None  # the standby
        self.stop_signal = 0  # the SIGINT/SIGTERM the keeper received, forwarded to the node
        self.restarts = 0

    def _say(self, text: str) -> None:
        print(f'[keeper {self.label}] {text}', file=self.err, flush=True)

    def _forward(self, signum: int, frame: object) -> None:
        del frame
        self.stop_signal = signum
        for pid in (self.active, self.waiting.pid if self.waiting else 0):
            if pid:
                with contextlib.suppress(ProcessLookupError):  # it ended: waitpid reports it
                    os.kill(pid, signum)

    def _spawn(self, standby: bool = False) -> _Child | Turn:
        """Forks a child: its :class:`Turn` in the child, the child in the keeper. A standby is
        named ``standby-<node>`` from its fork until its turn, so that nothing mistakes it for
        the node meanwhile (``launching.node_processes``): the keeper takes that name for the
        fork and its own back at once, and the child is born with it. (Named by the child, it
        kept the node's name until the child first ran: under load a test found two children
        and no standby among them.)"""
        keeper = os.getpid()
        read_end, write_end = os.pipe()
        # What the keeper imported is never garbage: frozen, no collection in a child touches it
        # (its pages stay shared with the keeper, and a node's start-up collection, before
        # it freezes its own objects, does not walk them: ~50 ms of a restart on 2 cores).
        gc.freeze()
        own = process_name()
        if standby:
            set_process_name(STANDBY_PREFIX + self.label)
        try:
            with warnings.catch_warnings():
                # Python 3.12 warns of fork() in a process with threads: the imports' idle
                # native pools, which the child does not use (see the module's docstring).
                warnings.simplefilter('ignore', DeprecationWarning)
                pid = os.fork()
        finally:
            if standby and os.getpid() == keeper:
                set_process_name(own)
        if pid == 0:
            os.close(write_end)
            signal.signal(signal.SIGINT, signal.default_int_handler)
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            set_parent_death_signal(signal.SIGTERM)
            if os.getppid() != keeper:  # the keeper died before prctl
                os._exit(1)
            return Turn(read_end, self.label, self.on_turn, own if standby else '')
        os.close(read_end)
        return _Child(pid, write_end)

    @staticmethod
    def _give_turn(child: _Child, restart: int) -> None:
        with contextlib.suppress(OSError):  # it died meanwhile: waitpid reports it
            os.write(child.fd, f'{restart}\n'.encode())
        os.close(child.fd)
        child.fd = -1

    def serve(self) -> Turn:
        """Runs the keeper loop in this process; returns in each forked child."""
        signal.signal(signal.SIGINT, self._forward)
        signal.signal(signal.SIGTERM, self._forward)
        first = self._spawn()
        if isinstance(first, Turn):
            return first
        self._give_turn(first, 0)
        self.active = first.pid
        started = time.monotonic()
        quick = standby_deaths = 0
        while True:
            want_standby = (
                self.standby
                and self.waiting is None
                and not self.stop_signal
                and standby_deaths < self.quick_limit
            )
            if want_standby and time.monotonic() - started >= self.standby_after_s:
                spawned = self._spawn(standby=True)
                if isinstance(spawned, Turn):
                    return spawned
                self.waiting = spawned
                want_standby = False
            # A standby is forked standby_after_s after the node: not in the CPU's way while
            # the node starts (its participant is one more for every process to discover).
            pid, wait_status = os.waitpid(-1, os.WNOHANG if want_standby else 0)
            if pid == 0:
                time.sleep(0.02)  # paced: until the standby is due
                continue
            status = os.waitstatus_to_exitcode(wait_status)
            if self.waiting is not None and pid == self.waiting.pid:
                os.close(self.waiting.fd)
                self.waiting = None
                if not self.stop_signal:
                    standby_deaths += 1
                    self._say(f'standby {pid} {describe(status)}')
                continue
            if pid != self.active:
                continue
            self.active = 0
            lived = time.monotonic() - started
            if self.stop_signal or status in FINAL_STATUSES:
                self._end(status)
            quick = quick + 1 if lived < self.quick_s else 0
            if quick >= self.quick_limit:
                self._say(
                    f'node {pid} {describe(status)} {quick} times in a row within '
                    f'{self.quick_s:g} s of its start: not restarted here (launch decides)'
                )
                self._end(status)
            self.restarts += 1
            how = (
                f'standby {self.waiting.pid} takes over'
                if self.waiting is not None
                else 'forked from the imported keeper'
            )
            delay = f' in {self.delay_s:g} s' if self.delay_s else ''
            self._say(
                f'node {pid} {describe(status)} after {lived:.1f} s: '
                f'warm restart {self.restarts}{delay} ({how})'
            )
            end = time.monotonic() + self.delay_s
            while time.monotonic() < end and not self.stop_signal:
                time.sleep(min(0.05, max(0.0, end - time.monotonic())))  # paced: the delay
            if self.stop_signal:
                self._end(status)
            if self.waiting is None:
                spawned = self._spawn()
                if isinstance(spawned, Turn):
                    return spawned
                self.waiting = spawned
            nxt, self.waiting = self.waiting, None
            self._give_turn(nxt, self.restarts)
            self.active = nxt.pid
            started = time.monotonic()
            if status < 0:  # killed: its DDS shared memory was not released
                self._sweep()

    def _end(self, status: int) -> None:
        """Dismisses the standby (its turn never comes: it ends by itself), then leaves."""
        if self.waiting is not None:
            os.close(self.waiting.fd)
            end = time.monotonic() + 10.0
            with contextlib.suppress(ChildProcessError):
                while os.waitpid(self.waiting.pid, os.WNOHANG)[0] == 0:
                    if time.monotonic() > end:
                        os.kill(self.waiting.pid, signal.SIGKILL)
                        os.waitpid(self.waiting.pid, 0)
                        break
                    time.sleep(0.02)  # paced: the standby's own shutdown
            self.waiting = None
        self._leave(status)

    def _sweep(self) -> None:
        swept = dds_shm.sweep()
        if swept.segments:
            self._say(
                f'removed {len(swept.segments)} Fast DDS shared-memory segments of dead '
                f'processes ({swept.bytes / 1e6:.1f} MB)'
            )

    def _leave(self, status: int) -> None:
        """Ends the keeper like its node ended: the same exit status, or the same signal."""
        sys.stdout.flush()
        sys.stderr.flush()
        if status < 0:
            with contextlib.suppress(OSError, ValueError):  # SIGKILL has no handler to reset
                signal.signal(-status, signal.SIG_DFL)
            os.kill(os.getpid(), -status)
            time.sleep(1.0)  # paced: the signal is delivered meanwhile
            status = 128 - status
        os._exit(status)
