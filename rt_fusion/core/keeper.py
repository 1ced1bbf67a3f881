"""Warm restart: a node process that dies is replaced by a fork of its already-imported self.

A node killed by a crash or ``kill -9`` is restarted by launch (``respawn``) as a new
interpreter, which spends most of its start (0.4-1.5 s on the vehicle computer's little cores,
more on a loaded one) importing Python modules: numpy, OpenCV, rclpy, ONNX Runtime. With a
keeper, the process launch starts imports everything once, forks the node and waits. When the
node dies by a signal or an unexpected exit status, the keeper forks it again at once (after the
respawn delay): the new node only initialises ROS, configures and activates.

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
- A node that dies within ``quick_s`` of its start ``quick_limit`` times in a row is not
  restarted again: the keeper ends with its status and launch takes over (a crash loop starting
  from the same warm state would repeat forever).

``RT_FUSION_WARM_RESTART`` turns it on (``vehicle.launch.py respawn:=true`` sets it): its
value is the delay before a restart in seconds.
"""

from __future__ import annotations

import contextlib
import ctypes
import math
import os
import signal
import sys
import time
import warnings
from collections.abc import Callable
from typing import TextIO

from rt_fusion.core import dds_shm
from rt_fusion.core.errors import ParameterError

ENV = 'RT_FUSION_WARM_RESTART'
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


def describe(status: int) -> str:
    """``killed by SIGKILL`` or ``exit status 1`` for a ``waitstatus_to_exitcode`` value."""
    if status < 0:
        try:
            return f'killed by {signal.Signals(-status).name}'
        except ValueError:
            return f'killed by signal {-status}'
    return f'exit status {status}'


class Keeper:
    """Forks the node, waits, forks it again when it dies. :meth:`serve` returns only in a
    child (which then runs the node); the keeper itself ends the process with the node's
    status.

    ``label`` names the node in the keeper's lines on stderr; ``on_fork`` runs first thing in
    each child (its start-up clock restarts there).
    """

    def __init__(
        self,
        label: str,
        delay_s: float = 0.0,
        quick_s: float = 2.0,
        quick_limit: int = 3,
        on_fork: Callable[[int], None] | None = None,
        err: TextIO | None = None,
    ) -> None:
        self.label = label
        self.delay_s = delay_s
        self.quick_s = quick_s
        self.quick_limit = quick_limit
        self.on_fork = on_fork
        self.err = err if err is not None else sys.stderr
        self.child = 0
        self.stop_signal = 0  # the SIGINT/SIGTERM the keeper received, forwarded to the node
        self.restarts = 0

    def _say(self, text: str) -> None:
        print(f'[keeper {self.label}] {text}', file=self.err, flush=True)

    def _forward(self, signum: int, frame: object) -> None:
        del frame
        self.stop_signal = signum
        if self.child:
            with contextlib.suppress(ProcessLookupError):  # it ended: waitpid reports it
                os.kill(self.child, signum)

    def _fork(self) -> int:
        keeper = os.getpid()
        with warnings.catch_warnings():
            # Python 3.12 warns of fork() in a process with threads: the imports' idle native
            # pools, which the child does not use (see the module's docstring).
            warnings.simplefilter('ignore', DeprecationWarning)
            pid = os.fork()
        if pid == 0:
            signal.signal(signal.SIGINT, signal.default_int_handler)
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            set_parent_death_signal(signal.SIGTERM)
            if os.getppid() != keeper:  # the keeper died before prctl
                os._exit(1)
        return pid

    def serve(self) -> None:
        """Runs the keeper loop in this process; returns in each forked node."""
        signal.signal(signal.SIGINT, self._forward)
        signal.signal(signal.SIGTERM, self._forward)
        quick = 0
        sweep = False
        while True:
            started = time.monotonic()
            pid = self._fork()
            if pid == 0:
                if self.on_fork is not None:
                    self.on_fork(self.restarts)
                return
            self.child = pid
            if sweep:  # while the new node starts: what the killed one left in /dev/shm
                self._sweep()
            if self.stop_signal:  # a stop that came while the node was being forked
                self._forward(self.stop_signal, None)
            _, wait_status = os.waitpid(pid, 0)
            self.child = 0
            status = os.waitstatus_to_exitcode(wait_status)
            lived = time.monotonic() - started
            if self.stop_signal or status in FINAL_STATUSES:
                self._leave(status)
            quick = quick + 1 if lived < self.quick_s else 0
            if quick >= self.quick_limit:
                self._say(
                    f'node {pid} {describe(status)} {quick} times in a row within '
                    f'{self.quick_s:g} s of its start: not restarted here (launch decides)'
                )
                self._leave(status)
            self.restarts += 1
            sweep = status < 0  # killed: its DDS shared memory was not released
            self._say(
                f'node {pid} {describe(status)} after {lived:.1f} s: warm restart '
                f'{self.restarts}'
                + (f' in {self.delay_s:g} s' if self.delay_s else '')
                + ' (forked from the imported keeper)'
            )
            end = time.monotonic() + self.delay_s
            while time.monotonic() < end and not self.stop_signal:
                time.sleep(min(0.05, max(0.0, end - time.monotonic())))  # paced: the delay
            if self.stop_signal:
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
