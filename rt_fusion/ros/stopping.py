"""A launched graph stops whole: SIGTERM to the launch as Ctrl-C, and no node outlives it.

``ros2 launch`` takes SIGTERM (what systemd, ``docker stop`` and supervisors send) by cancelling
its own run at once: it logs that this "can result in orphaned processes" and exits, and every
node keeps running with its shared-memory rings and DDS segments. Two pieces close that:

- :func:`sigterm_as_shutdown`, a launch action the graph's launch files hold: SIGTERM to the
  launch process (which, without a Python handler for it, simply died) becomes launch's own
  ``Shutdown`` event, which sends SIGINT to every node at
  once and escalates (SIGTERM, SIGKILL) for one that does not end, as a Ctrl-C does. A second
  SIGTERM falls back to launch's own handling.
- :data:`PARENT_DEATH_ENV`, which :func:`rt_fusion.ros.graph.launch_node` sets for every node:
  the node asks the kernel (``prctl(PR_SET_PDEATHSIG)``) for SIGINT when the launch process
  dies, so even a launch killed outright (SIGKILL, an OOM kill) leaves no node behind; the node
  then stops as on Ctrl-C (:class:`rt_fusion.ros.running.StopRequest`).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import signal
from typing import Any

#: Set by the launch files for their nodes: the signal a node gets when its launch dies.
PARENT_DEATH_ENV = 'RT_FUSION_PARENT_DEATH_SIGNAL'

_PR_SET_PDEATHSIG = 1


def die_with_parent(env: dict[str, str] | None = None) -> bool:
    """Asks for the signal named in :data:`PARENT_DEATH_ENV` when the parent (the launch) dies;
    False where it is not asked for or not available. A parent already gone (the launch died
    before this ran: this process was re-parented) gives the signal at once."""
    name = (env if env is not None else os.environ).get(PARENT_DEATH_ENV, '').strip()
    if not name:
        return False
    signum = getattr(signal, name, None)
    if not isinstance(signum, signal.Signals):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library('c') or 'libc.so.6', use_errno=True)
        if libc.prctl(_PR_SET_PDEATHSIG, int(signum), 0, 0, 0) != 0:
            return False
    except (OSError, AttributeError):
        return False
    if os.getppid() == 1:  # the launch is already gone
        os.kill(os.getpid(), signum)
    return True


def sigterm_as_shutdown() -> Any:
    """The launch action: from its execution on, SIGTERM to this launch stops the graph as
    Ctrl-C does (:mod:`rt_fusion.ros.stopping`)."""
    from launch.actions import OpaqueFunction  # noqa: PLC0415

    return OpaqueFunction(function=_take_sigterm)


def _take_sigterm(context: Any) -> list[Any]:
    import launch.logging  # noqa: PLC0415
    from launch.events import Shutdown  # noqa: PLC0415
    from launch.utilities.signal_management import AsyncSafeSignalManager  # noqa: PLC0415

    logger = launch.logging.get_logger('launch')
    # The manager launch entered for its run (it handles SIGINT, SIGTERM, SIGQUIT); not public.
    manager = getattr(AsyncSafeSignalManager, '_AsyncSafeSignalManager__current', None)
    if manager is None or not hasattr(manager, 'handle'):
        logger.warning(
            'rt_fusion: this launch version keeps its own SIGTERM handling: SIGTERM may leave '
            'nodes running (they still stop when the launch process ends)'
        )
        return []
    taken: list[bool] = []
    previous: list[Any] = []

    def on_sigterm(signum: int) -> None:
        if taken and previous and previous[0] is not None:  # a second one: launch's own way
            previous[0](signum)
            return
        taken.append(True)
        logger.warning('SIGTERM: stopping every node as on Ctrl-C (a second SIGTERM: at once)')
        context.emit_event_sync(Shutdown(reason='SIGTERM'))

    previous.append(manager.handle(signal.SIGTERM, on_sigterm))
    # The manager is woken through signal.set_wakeup_fd, which only a signal with a Python
    # handler writes to: without one, SIGTERM's default action ends the launch process at once,
    # before any handler of launch's runs (what left the nodes orphaned, with nothing logged).
    try:
        if signal.getsignal(signal.SIGTERM) in (signal.SIG_DFL, None):
            signal.signal(signal.SIGTERM, _wake_only)
    except ValueError:  # not the main thread: a launch run from a tool's thread
        logger.warning('rt_fusion: launch runs outside the main thread: SIGTERM not taken')
    return []


def _wake_only(signum: int, frame: object) -> None:
    """SIGTERM's Python-level handler: nothing here; its wakeup byte reaches launch's loop."""
