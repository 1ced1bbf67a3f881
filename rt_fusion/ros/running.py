"""A node's main(): its executor, spinning until SIGINT/SIGTERM (each stop handled once), a warm
keeper's standby and restart, and the process's exit status.
"""

from __future__ import annotations

import atexit
import contextlib
import faulthandler
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import rclpy
from rclpy.executors import Executor, ExternalShutdownException, SingleThreadedExecutor
from rclpy.node import Node
from rclpy.parameter import Parameter
from rclpy.signals import SignalHandlerOptions
from rclpy.task import Future

from rt_fusion.core import keeper
from rt_fusion.core.errors import ParameterError, RtFusionError
from rt_fusion.ros import compat, params_file, stopping
from rt_fusion.ros.lifecycle import STARTUP, DeviceNode, autostart

EXECUTORS = ('events', 'single')


def make_executor(kind: str = 'single') -> Executor:
    """The executor nodes spin in.

    ``single`` (the default): the classic SingleThreadedExecutor. ``events``: rclpy's
    EventsExecutor (through rt_fusion.ros.compat), which dispatches from a C++ event queue
    instead of rebuilding a wait set in Python for every callback; on our machines it roughly
    halves the time from a message's arrival to its callback, but nodes spinning in it aborted
    now and then at SIGINT with heap corruption (``malloc_consolidate(): unaligned fastbin
    chunk``; open upstream destruction bugs, ros2/rclpy#1644), so it is opt-in.
    """
    if kind == 'events':
        executor = compat.events_executor()
        return executor if executor is not None else SingleThreadedExecutor()
    if kind == 'single':
        return SingleThreadedExecutor()
    raise ParameterError('executor', kind, f'must be one of {list(EXECUTORS)}')


#: How much lower a restarted node's nice value is while it starts (:class:`keeper.StartBoost`):
#: 10, about 10 times a default process's CPU share (chaos on the 2-core VM, 18 kills each:
#: 18 and 17 active within 1 s; with 5, 15).
START_BOOST = 10


#: [s] a restarted node keeps its larger CPU share (:class:`keeper.StartBoost`) this long after
#: it is active: its first outputs (a fusion's first frame, a microphone's first block).
BOOST_AFTER_ACTIVE_S = 0.5


class StopRequest:
    """SIGINT/SIGTERM handler of a node process: a flag the spin loop reads.

    rclpy's own handler shuts the context down at once, under running callbacks and worker
    threads ("publisher's context is invalid", a KeyboardInterrupt inside a subscription
    callback). Here the signal only asks: the loop ends, the node deactivates and cleans up with
    the context still valid, and only then is rclpy shut down. Before spinning (a node still
    configuring) it interrupts at once.
    """

    def __init__(self) -> None:
        self.requested = False
        self.spinning = False

    def __call__(self, signum: int, frame: object) -> None:
        self.requested = True
        if not self.spinning:
            raise KeyboardInterrupt

    def install(self) -> None:
        """Handles SIGINT and SIGTERM (main thread only)."""
        signal.signal(signal.SIGINT, self)
        signal.signal(signal.SIGTERM, self)

    @contextlib.contextmanager
    def deferred(self) -> Iterator[None]:
        """A block a stop does not cut in two: a signal inside it is taken when it ends."""
        spinning, self.spinning = self.spinning, True
        try:
            yield
        finally:
            self.spinning = spinning
        if self.requested and not spinning:
            raise KeyboardInterrupt


def _ignore_further_stops() -> None:
    """A second SIGINT (launch forwards one, the terminal sends another) must not interrupt the
    teardown with a KeyboardInterrupt traceback; SIGTERM and SIGKILL still end it."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def spin(executor: Executor, finished: object = None, stop: StopRequest | None = None) -> None:
    """Spins until shutdown, ``stop`` is requested, or ``finished`` (a Future) is done.

    Always through ``spin_once`` with a timeout: rclpy 9.1.2's EventsExecutor busy-loops in
    ``spin()`` and ``spin_until_future_complete()`` without a timeout and then ignores SIGINT.
    """
    done = finished.done if isinstance(finished, Future) else (lambda: False)
    if stop is not None:
        stop.spinning = True
    while compat.ok() and not done() and not (stop is not None and stop.requested):
        try:
            executor.spin_once(timeout_sec=0.1)
        except Exception:
            if compat.ok():
                raise
            # The context was shut down under a running callback (a timer publishing:
            # "publisher's context is invalid"): that is the shutdown, not an error.
            break


def _quiet_shutdown_excepthook(default: Callable[[Any], object]) -> Callable[[Any], None]:
    """threading.excepthook that drops a worker thread's error raised after the context ended."""

    def hook(args: Any) -> None:
        if not compat.ok() and not issubclass(args.exc_type, AssertionError):
            return  # a publish/take racing the shutdown
        default(args)

    return hook


def run(
    factory: Callable[[], Node],
    args: Sequence[str] | None = None,
    executor_kind: str = '',
    exit_process: bool = True,
) -> int:
    """main() of a node: init, construct, spin, and always clean up. Returns the exit status.

    A node that ends by itself (a tool, a replay) has a ``finished`` future; run() returns when
    it completes. Other nodes spin until SIGINT or SIGTERM (:class:`StopRequest`), then
    deactivate and clean up while the context is still valid.

    The executor is ``executor_kind`` (a node's own choice), else :func:`make_executor`'s
    default; ``RT_FUSION_EXECUTOR`` overrides both.
    A :class:`RtFusionError` during construction (a bad parameter, a missing device) is logged
    as fatal with its message and gives exit status 2, so launch files and tests see why.
    With ``exit_process`` (a node's main), the process then ends through :func:`leave`.
    """
    STARTUP.begin()
    stopping.die_with_parent()  # launched: no node outlives its launch
    # A crash in native code prints every thread's Python stack to stderr (launch logs keep it).
    faulthandler.enable(all_threads=True)
    argv = list(args) if args is not None else list(sys.argv)
    turn = _keep_warm(argv, factory) if exit_process else None
    files = params_file.files_in_args(argv)
    try:  # before rclpy.init, which reports a broken file as an RCLError traceback
        for path in files:
            params_file.load(path)
    except params_file.ParameterFileError as err:
        print(f'rt_fusion: {type(err).__name__}: {err}', file=sys.stderr, flush=True)
        return 2
    stop = StopRequest()
    standby: Node | None = None
    boost: keeper.StartBoost | None = None
    try:
        rclpy.init(args=argv, signal_handler_options=SignalHandlerOptions.NO)
        if turn is not None and turn.standing_by():
            standby = _standby_participant()
        if turn is not None and not turn.wait():  # a standby whose turn did not come
            raise KeyboardInterrupt
        # A restart starts at a larger CPU share, until it is active.
        if turn is not None and turn.restart:
            boost = keeper.StartBoost(delta=START_BOOST)
    except KeyboardInterrupt:  # stopped before it ran (a standby, the keeper ending)
        _ignore_further_stops()  # launch's SIGINT and the terminal's: one must not cut this short
        if standby is not None:  # its participant's shared memory goes with it
            with contextlib.suppress(Exception):
                standby.destroy_node()
        compat.try_shutdown()
        leave(0)
    stop.install()
    threading.excepthook = _quiet_shutdown_excepthook(threading.excepthook)
    node: Node | None = None
    executor: Executor | None = None
    status = 0
    try:
        node = factory()
        if standby is not None:  # the node's own endpoints now hold the participant
            standby.destroy_node()
        STARTUP.mark('ROS')
        params_file.check_node_has_section(files, node.get_fully_qualified_name())
        if isinstance(node, DeviceNode) and node.get_parameter('autostart').value:
            autostart(node)
        if boost is not None:  # kept for its first outputs, then given back
            ending = threading.Timer(BOOST_AFTER_ACTIVE_S, boost.end)
            ending.daemon = True
            ending.start()
        with stop.deferred():  # a stop inside rclpy's Executor() left it half-made (its __del__
            # then printed an AttributeError traceback into the launch log)
            executor = make_executor(
                os.environ.get('RT_FUSION_EXECUTOR', '') or executor_kind or 'single'
            )
            executor.add_node(node)
        finished = getattr(node, 'finished', None)
        spin(executor, finished, stop)
        failed = finished.exception() if isinstance(finished, Future) and finished.done() else None
        if isinstance(failed, BaseException):
            raise failed  # a node that ended failing (a replay whose bag broke)
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    except RtFusionError as err:
        logger = node.get_logger() if node is not None else rclpy.logging.get_logger('rt_fusion')
        logger.fatal(f'{type(err).__name__}: {err}')
        print(f'rt_fusion: {type(err).__name__}: {err}', file=sys.stderr, flush=True)
        status = 2
    finally:
        _ignore_further_stops()
        if executor is not None and node is not None:
            # The executor first: the EventsExecutor's timer thread must not touch a timer that
            # destroy_node frees (a planner aborted with heap corruption at exit without this).
            with contextlib.suppress(Exception):
                executor.remove_node(node)
            with contextlib.suppress(Exception):
                executor.shutdown()
        if node is not None:
            node.destroy_node()
        compat.try_shutdown()
    if exit_process:
        leave(status)
    return status


#: The hidden node by which a standby holds its participant (``ros2 node list --all``).
STANDBY_NODE = '_rt_fusion_standby'


def _standby_participant() -> Node:
    """The DDS participant a standby holds while it waits, by a hidden node without endpoints
    of its own. rmw_fastrtps creates a context's participant with its first node, so without
    one a standby's participant would be as new at its takeover as a fresh process's. With one,
    the node created at the takeover shares a participant every other process has long
    discovered, and its endpoints reach them within milliseconds; a participant's first second
    is when they arrive late (its first endpoint announcements are often dropped by processes
    that have not discovered it yet, and repaired at the 1-s endpoint-discovery heartbeat)."""
    return rclpy.create_node(
        STANDBY_NODE,
        use_global_arguments=False,  # not the node's name (__node:=) nor its parameters
        start_parameter_services=False,
        enable_rosout=False,
        parameter_overrides=[Parameter('start_type_description_service', value=False)],
    )


def _keep_warm(argv: Sequence[str], factory: Callable[[], Node]) -> keeper.Turn | None:
    """With ``RT_FUSION_WARM_RESTART`` set (``respawn:=true``), this process becomes the node's
    keeper (:mod:`rt_fusion.core.keeper`) and returns only in a forked child, with the turn it
    waits for once ROS is up (a standby waits until the running node dies)."""
    try:
        delay_s = keeper.delay_from_env()
    except ParameterError as err:
        print(f'rt_fusion: ParameterError: {err}', file=sys.stderr, flush=True)
        leave(2)
        return None
    if delay_s is None:
        return None
    label = next((a.split(':=', 1)[1] for a in argv if a.startswith('__node:=')), '')
    if isinstance(factory, type) and issubclass(factory, DeviceNode):
        factory.preload()
    standby = os.environ.get(keeper.STANDBY_ENV, '1').strip().lower() not in ('0', 'false', 'no')
    return keeper.Keeper(
        label or Path(argv[0]).name, delay_s, standby=standby, on_turn=STARTUP.took_over
    ).serve()


def leave(status: int) -> None:
    """Ends a node process once its node is destroyed and rclpy is shut down: Python's atexit
    handlers run and the standard streams are flushed, but the interpreter's finalisation and the
    native libraries' static destructors do not.

    The fusion node and the planner died with SIGSEGV at a launch's SIGINT now and then (-11
    after a clean teardown, about 1 run in 5 of CI's launch tests). faulthandler printed no stack,
    so the crash came after the interpreter had begun finalising: module teardown or the native
    libraries' static destructors (DDS, ONNX Runtime) running beside their own threads. Nothing
    a node owns is left to release at this point.
    """
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(status)
