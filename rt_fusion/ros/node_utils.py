"""What every rt_fusion node shares: parameter declaration from core dataclasses, and main()."""

from __future__ import annotations

import atexit
import contextlib
import faulthandler
import importlib
import inspect
import os
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

import rclpy
from rcl_interfaces.msg import IntegerRange, ParameterDescriptor
from rclpy.exceptions import (
    InvalidParameterTypeException,
    InvalidParameterValueException,
    ParameterUninitializedException,
)
from rclpy.executors import Executor, ExternalShutdownException, SingleThreadedExecutor
from rclpy.lifecycle import LifecycleNode, LifecycleState, TransitionCallbackReturn
from rclpy.lifecycle.publisher import LifecyclePublisher
from rclpy.node import Node
from rclpy.parameter import Parameter
from rclpy.publisher import Publisher
from rclpy.signals import SignalHandlerOptions
from rclpy.subscription import Subscription
from rclpy.task import Future
from rclpy.timer import Timer

import rt_fusion
from rt_fusion.core import keeper, linux, params
from rt_fusion.core.errors import ParameterError, RtFusionError
from rt_fusion.ros import compat, params_file

T = TypeVar('T')


class StartupTimes:
    """Where a node process's start went, said once in its ``active`` line: the interpreter and
    imports (the process's start to :func:`run`), ROS (``rclpy.init`` and the node's
    construction), configure and activate. A respawned node is judged by how soon it is back
    (``tools/chaos.py``); this says which part to look at when it is not."""

    def __init__(self) -> None:
        self.marks: dict[str, float] = {}  # step -> time.monotonic() at its end
        self.started: float | None = None  # the process's start, on the same clock
        self.since = 'the process started'
        self.reported = False

    def mark(self, step: str) -> None:
        """``step`` ended now (the first time only)."""
        if not self.reported:
            self.marks.setdefault(step, time.monotonic())

    def begin(self) -> None:
        """run() is called: the imports are done."""
        age = linux.process_age_s()
        self.mark('interpreter and imports')
        if age is not None:
            self.started = self.marks['interpreter and imports'] - age

    def took_over(self, restart: int) -> None:
        """This process's turn came from its warm keeper (:mod:`rt_fusion.core.keeper`). The
        first node carries on the keeper's start (its imports); a restarted node's start is its
        turn, said as ``after it took over: ROS ...`` (its ROS start: the node, rclpy being up
        already in a standby)."""
        if restart:
            self.marks = {}
            self.started = time.monotonic()
            self.since = 'it took over'

    def report(self) -> str:
        """`` (0.81 s after the process started: interpreter and imports 0.40, ...)`` once, for
        a process started through :func:`run`; otherwise ''."""
        if self.reported or self.started is None:
            return ''
        self.reported = True
        parts, last = [], self.started
        for step, at in self.marks.items():
            parts.append(f'{step} {at - last:.2f}')
            last = at
        return f' ({last - self.started:.2f} s after {self.since}: {", ".join(parts)})'


#: This process's start-up (one node per process).
STARTUP = StartupTimes()

_SCALAR = {
    bool: Parameter.Type.BOOL,
    int: Parameter.Type.INTEGER,
    float: Parameter.Type.DOUBLE,
    str: Parameter.Type.STRING,
}
_ARRAY = {
    bool: Parameter.Type.BOOL_ARRAY,
    int: Parameter.Type.INTEGER_ARRAY,
    float: Parameter.Type.DOUBLE_ARRAY,
    str: Parameter.Type.STRING_ARRAY,
}
_INT_MIN, _INT_MAX = -(2**63), 2**63 - 1


def _descriptor(field: params.ParamField) -> ParameterDescriptor:
    spec = field.spec
    desc = ParameterDescriptor(description=spec.describe())
    kind = field.item_kind if field.kind is tuple else field.kind
    # Floats accept integers written in YAML (`rate: 30`); the core converts and checks them.
    desc.dynamic_typing = kind is float
    if spec.low is not None or spec.high is not None:
        if kind is int:
            desc.integer_range = [
                IntegerRange(
                    from_value=int(spec.low) if spec.low is not None else _INT_MIN,
                    to_value=int(spec.high) if spec.high is not None else _INT_MAX,
                    step=0,
                )
            ]
        elif kind is float:
            desc.additional_constraints = (
                f'range [{spec.low if spec.low is not None else "-inf"}, '
                f'{spec.high if spec.high is not None else "inf"}]'
            )
    if spec.choices:
        desc.additional_constraints = f'one of {list(spec.choices)}'
    return desc


def declare_params(node: Node, cls: type[T], prefix: str = '') -> T:
    """Declares every field of the parameter dataclass ``cls`` on ``node`` and reads it back.

    Fields without a default are declared without a value: a parameter file must set them.

    Raises:
        ParameterError: naming the parameter that is missing, mistyped or out of range.
    """
    values: dict[str, Any] = {}
    for field in params.fields(cls):
        name = prefix + field.name
        kind = field.item_kind if field.kind is tuple else field.kind
        assert kind is not None
        ptype = (_ARRAY if field.kind is tuple else _SCALAR)[kind]
        try:
            if node.has_parameter(name):  # configured before (lifecycle re-configure): re-read
                values[field.name] = node.get_parameter(name).value
                continue
            if field.kind is tuple and not field.default and kind is float:
                # An empty list of floats: untyped and unset (dynamic typing, so that a file's
                # `[2, 1.5]` is taken as floats too; the core converts and checks).
                node.declare_parameter(name, None, _descriptor(field))
                value = node.get_parameter(name).value
                values[field.name] = field.default if value is None else value
                continue
            if field.required or (field.kind is tuple and not field.default):
                # An empty list has no element type: declare it typed, unset.
                node.declare_parameter(name, ptype, _descriptor(field))
            else:
                default = list(field.default) if field.kind is tuple else field.default
                node.declare_parameter(name, default, _descriptor(field))
            values[field.name] = node.get_parameter(name).value
        except ParameterUninitializedException:
            values[field.name] = None if field.required else field.default
        except (InvalidParameterValueException, InvalidParameterTypeException) as err:
            raise ParameterError(name, None, str(err)) from err
    defaulted = [
        prefix + f.name
        for f in params.fields(cls)
        if f.spec.calibration and prefix + f.name not in node._parameter_overrides
    ]
    if defaulted:
        node.get_logger().warning(
            "vehicle calibration not set, on the generated scenarios' defaults: "
            + ', '.join(defaulted)
            + ' (set them in the parameter file)'
        )
    try:
        return params.build(cls, values)
    except ParameterError as err:
        raise ParameterError(prefix + err.name, err.value, err.reason) from err


@contextlib.contextmanager
def param_prefix(prefix: str) -> Iterator[None]:
    """Re-raises a ParameterError from a parameter group's later checks under its full name."""
    try:
        yield
    except ParameterError as err:
        if err.name.startswith(prefix):
            raise
        raise ParameterError(prefix + err.name, err.value, err.reason) from err


ParamGroups = tuple[tuple[type, str], ...]  # (parameter dataclass, name prefix) of a node


def check_param_section(groups: ParamGroups, section: Mapping[str, Any]) -> list[object]:
    """Validates one node's ``ros__parameters`` (nested YAML mapping) without starting it.

    Returns the built parameter objects, one per group.

    Raises:
        ParameterError: naming the first unknown, mistyped or out-of-range parameter.
    """
    flat: dict[str, Any] = {}

    def walk(prefix: str, value: Any) -> None:
        if isinstance(value, Mapping):
            for key, item in value.items():
                walk(f'{prefix}{key}.', item)
        else:
            flat[prefix[:-1]] = value

    walk('', section)
    built: list[object] = []
    # Longest prefix first, so 'planner.x' is not taken by the '' group.
    claimed: set[str] = set()
    for cls, prefix in sorted(groups, key=lambda g: -len(g[1])):
        values = {
            k[len(prefix) :]: v
            for k, v in flat.items()
            if k.startswith(prefix) and k not in claimed
        }
        if prefix == '':
            values = {k: v for k, v in values.items() if k not in _FOREIGN_PARAMS}
        claimed |= {prefix + k for k in values}
        try:
            built.append(params.build(cls, values))
        except ParameterError as err:
            raise ParameterError(prefix + err.name, err.value, err.reason) from err
    return built


# Set on every node by rclpy or ros2 launch, not by us.
_FOREIGN_PARAMS = ('use_sim_time', 'start_type_description_service', 'autostart')


def reject_unknown_params(node: Node) -> None:
    """Fails on a parameter given to ``node`` (YAML file, ``-p``) that it never declared.

    rclpy silently ignores such overrides, so a misspelt name in a parameter file would leave the
    default in force without a word; here it stops the start-up instead.

    Raises:
        ParameterError: naming the first unknown parameter.
    """
    for name, value in sorted(node._parameter_overrides.items()):
        if (
            node.has_parameter(name)
            or name in _FOREIGN_PARAMS
            or name.startswith('qos_overrides.')
        ):
            continue
        raise ParameterError(
            name,
            value.value,
            f'unknown parameter of node {node.get_name()!r} (misspelt? '
            f'`ros2 param list /{node.get_name()}` shows the known ones)',
        )


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


class DeviceNode(LifecycleNode):
    """A lifecycle node that owns a device, a ring or an engine (the STYLE's node anatomy).

    Subclasses implement :meth:`configure` (read parameters, open and set up the device, allocate
    everything), :meth:`activate` / :meth:`deactivate` (start / stop streaming) and
    :meth:`cleanup` (release everything). An :class:`RtFusionError` from them fails the
    transition with its message, which :func:`autostart` raises again, so a bad parameter or a
    missing device stops the process at start-up with a clear error. With the parameter
    ``autostart`` (default true) :func:`run` configures and activates the node itself; set it to
    false where a lifecycle manager drives the transitions.
    """

    def __init__(self, node_name: str, **kwargs: Any) -> None:
        super().__init__(node_name, **kwargs)
        self.declare_parameter(
            'autostart',
            True,
            ParameterDescriptor(
                description='configure and activate at start (false: a lifecycle manager does)'
            ),
        )
        self.failure: RtFusionError | None = None
        self._owned: list[Any] = []  # what configure() created, released at cleanup
        self._owning = False

    #: Parameter dataclasses this node declares in configure (read once by :meth:`preload`).
    PARAMS: tuple[type, ...] = ()

    @classmethod
    def preload(cls) -> None:
        """Start-up work a warm keeper (:mod:`rt_fusion.core.keeper`) does once, before it forks
        the node, instead of every restart doing it again: no ROS, no device, no thread.
        Subclasses import here what configure would import late (their backends)."""
        # rclpy's logger finds each line's caller with inspect, whose first call maps every
        # loaded module to its file: 0.15-0.2 s of a node's first warning.
        inspect.getframeinfo(sys._getframe())
        for kind in cls.PARAMS:
            params.fields(kind)
        preload_type_support()

    # -- what configure() creates is released by cleanup, whatever the subclass forgets -------

    def _own(self, entity: T) -> T:
        # rclpy's own publishers are made inside Node.__init__, before our attributes exist.
        if getattr(self, '_owning', False) and all(entity is not e for e in self._owned):
            self._owned.append(entity)
        return entity

    def create_publisher(self, *args: Any, **kwargs: Any) -> Publisher:
        """As rclpy's; made during configure, it is destroyed at cleanup."""
        return self._own(super().create_publisher(*args, **kwargs))

    def create_lifecycle_publisher(self, *args: Any, **kwargs: Any) -> LifecyclePublisher:
        """As rclpy's; made during configure, it is destroyed at cleanup."""
        pub: LifecyclePublisher = super().create_lifecycle_publisher(*args, **kwargs)
        return self._own(pub)

    def create_subscription(self, *args: Any, **kwargs: Any) -> Subscription:
        """As rclpy's; made during configure, it is destroyed at cleanup."""
        return self._own(super().create_subscription(*args, **kwargs))

    def create_timer(
        self, timer_period_sec: float, callback: Any, *args: Any, **kwargs: Any
    ) -> Timer:
        """As rclpy's; made during configure, it is destroyed at cleanup.

        The callback's error raised after the context ended (SIGINT under a publishing timer:
        "publisher's context is invalid") is the shutdown, not a fault: it is dropped, where the
        executor would log it as a fatal timer exception. Callbacks take no argument (Kilted's
        form with timer information is not used here).
        """

        def guarded() -> None:
            try:
                callback()
            except Exception:
                if compat.ok():
                    raise

        return self._own(super().create_timer(timer_period_sec, guarded, *args, **kwargs))

    def input_publishers(self) -> str:
        """``topic n, ...``: how many publishers each input this node subscribed to in
        configure is matched with (0: nobody publishes it, or discovery has not matched them
        yet, as for a node just restarted)."""
        counts = []
        for entity in self._owned:
            if isinstance(entity, Subscription):
                with contextlib.suppress(Exception):  # destroyed meanwhile
                    count = compat.publisher_counter(self, entity)()
                    counts.append(f'{entity.topic_name} {count}')
        return ', '.join(counts)

    def release_owned(self) -> None:
        """Destroys the publishers, subscriptions and timers configure() created (idempotent)."""
        owned, self._owned = self._owned, []
        for entity in reversed(owned):
            if isinstance(entity, LifecyclePublisher):
                self.destroy_lifecycle_publisher(entity)
            elif isinstance(entity, Publisher):
                self.destroy_publisher(entity)
            elif isinstance(entity, Subscription):
                self.destroy_subscription(entity)
            elif isinstance(entity, Timer):
                self.destroy_timer(entity)

    def _cleanup_all(self) -> None:
        try:
            self.cleanup()
        finally:
            self.release_owned()

    def configure(self) -> None:
        """Reads parameters, opens the device, allocates buffers."""

    def activate(self) -> None:
        """Starts streaming."""

    def deactivate(self) -> None:
        """Stops streaming."""

    def cleanup(self) -> None:
        """Releases what configure() acquired (idempotent)."""

    def _guard(self, step: Callable[[], None], state: LifecycleState) -> TransitionCallbackReturn:
        try:
            step()
        except RtFusionError as err:
            self.failure = err
            self.get_logger().error(f'{state.label}: {type(err).__name__}: {err}')
            with contextlib.suppress(RtFusionError):
                self._cleanup_all()
            return TransitionCallbackReturn.FAILURE
        except Exception as err:  # noqa: BLE001  (a bug, not bad input: keep the traceback)
            detail = ''.join(traceback.format_exception(err))
            self.failure = TransitionError(f'{state.label}: {type(err).__name__}: {err}')
            self.get_logger().error(f'{state.label} failed:\n{detail}')
            with contextlib.suppress(Exception):
                self._cleanup_all()
            return TransitionCallbackReturn.FAILURE
        return TransitionCallbackReturn.SUCCESS

    def on_configure(self, state: LifecycleState) -> TransitionCallbackReturn:
        """Lifecycle: unconfigured -> inactive."""
        self.failure = None
        return self._guard(self._configure_checked, state)

    def _configure_checked(self) -> None:
        self._owning = True
        try:
            self.configure()
        finally:
            self._owning = False
        reject_unknown_params(self)
        STARTUP.mark('configure')

    def on_activate(self, state: LifecycleState) -> TransitionCallbackReturn:
        """Lifecycle: inactive -> active."""
        # Lifecycle publishers first: streaming may publish as soon as it starts.
        super().on_activate(state)
        result = self._guard(self.activate, state)
        if result == TransitionCallbackReturn.SUCCESS:
            STARTUP.mark('activate')
            # What launch tests and operators wait for; the first time, where the start went.
            self.get_logger().info('active' + STARTUP.report())
        return result

    def on_deactivate(self, state: LifecycleState) -> TransitionCallbackReturn:
        """Lifecycle: active -> inactive."""
        self._guard(self.deactivate, state)
        return super().on_deactivate(state)

    def on_cleanup(self, state: LifecycleState) -> TransitionCallbackReturn:
        """Lifecycle: inactive -> unconfigured."""
        return self._guard(self._cleanup_all, state)

    def on_shutdown(self, state: LifecycleState) -> TransitionCallbackReturn:
        """Lifecycle: any -> finalized."""
        with contextlib.suppress(RtFusionError):
            self.deactivate()
        with contextlib.suppress(RtFusionError):
            self._cleanup_all()
        return TransitionCallbackReturn.SUCCESS

    def destroy_node(self) -> None:
        """Stops and releases everything, then destroys the node."""
        with contextlib.suppress(RtFusionError):
            self.deactivate()
        with contextlib.suppress(RtFusionError):
            self.cleanup()
        self._owned = []  # destroy_node destroys every entity of the node
        super().destroy_node()
        # rclpy's LifecycleNode leaves its state machine, which holds the node's handle: the
        # node, and with the last one the DDS participant, lived on until the interpreter's
        # finalisation, which a node process skips (leave: os._exit). Every node exit left
        # its participant's shared memory in /dev/shm (~0.6 MB; tests/ros/test_lifecycle.py).
        with contextlib.suppress(Exception):
            self._state_machine.destroy_when_not_in_use()


#: How much lower a restarted node's nice value is while it starts (:class:`keeper.StartBoost`):
#: 10, about 10 times a default process's CPU share (chaos on the 2-core VM, 18 kills each:
#: 18 and 17 active within 1 s; with 5, 15).
START_BOOST = 10

#: [s] a restarted node keeps its larger CPU share (:class:`keeper.StartBoost`) this long after
#: it is active: its first outputs (a fusion's first frame, a microphone's first block).
BOOST_AFTER_ACTIVE_S = 0.5

#: Interfaces every node uses beside its own messages: its lifecycle, parameter and type
#: description services and their service events.
NODE_INTERFACES = (
    'lifecycle_msgs.msg',
    'lifecycle_msgs.srv',
    'rcl_interfaces.msg',
    'rcl_interfaces.srv',
    'service_msgs.msg',
    'type_description_interfaces.msg',
    'type_description_interfaces.srv',
)


def preload_type_support() -> None:
    """Loads the C type support of every ROS interface imported so far (and of the node's own
    services): what rclpy otherwise loads at the first publisher, subscription or service of
    each type, 50-odd extension modules and their libraries in a node's start. A warm keeper
    does it once before it forks; the load opens libraries and starts no thread."""
    for name in NODE_INTERFACES:
        with contextlib.suppress(ImportError):
            importlib.import_module(name)
    for name, module in list(sys.modules.items()):
        if name.rpartition('.')[2] not in ('msg', 'srv', 'action'):
            continue
        for obj in list(vars(module).values()):
            load = getattr(obj, '__import_type_support__', None)
            if isinstance(obj, type) and callable(load):
                load()


def autostart(node: DeviceNode) -> None:
    """configure + activate, raising the node's own error when a transition fails."""
    for trigger, want in ((node.trigger_configure, 'inactive'), (node.trigger_activate, 'active')):
        trigger()
        state = node._state_machine.current_state[1]
        if state != want:
            if node.failure is not None:
                raise node.failure
            raise LifecycleError(node.get_name(), state, want)


class TransitionError(RtFusionError):
    """A lifecycle step raised an unexpected exception (its traceback is in the log)."""


class LifecycleError(RtFusionError):
    """A lifecycle transition failed without a more specific error."""

    def __init__(self, node: str, state: str, wanted: str) -> None:
        super().__init__(f'node {node}: lifecycle state {state!r}, expected {wanted!r}')


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
        spin(executor, getattr(node, 'finished', None), stop)
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


def resolve_share(path: str) -> Path:
    """A path relative to the installed share folder or the repository (editable installs)."""
    p = Path(path)
    if p.is_absolute():
        return p
    candidates = [
        Path(rt_fusion.__file__).resolve().parents[1] / p,
        Path(sys.prefix) / 'share' / 'rt_fusion' / p,
    ]
    try:
        from ament_index_python.packages import get_package_share_directory  # noqa: PLC0415

        candidates.insert(0, Path(get_package_share_directory('rt_fusion')) / p)
    except (ImportError, LookupError, ValueError, OSError):  # no ament index (a venv)
        pass
    return next((c for c in candidates if c.exists()), candidates[-1])


def wait_until(
    ready: Callable[[], bool],
    timeout_s: float,
    stop: threading.Event,
    on_timeout: Callable[[], object] | None = None,
) -> bool:
    """Waits (polled every 50 ms) until ``ready()`` or ``timeout_s``; calls ``on_timeout`` when
    it gives up. Returns False only when ``stop`` was set (the caller should leave)."""
    end = time.monotonic() + timeout_s
    while not ready():
        if time.monotonic() > end:
            if on_timeout is not None:
                on_timeout()
            return True
        if stop.wait(0.05):  # paced: discovery, or a consumer's start signal
            return False
    return True


def wait_to_start(
    node: Node,
    counts: Sequence[Callable[[], int]],
    wait_subscribers_s: float,
    start_topic: str,
    started: threading.Event,
    start_timeout_s: float,
    stop: threading.Event,
) -> bool:
    """Before a source node's first message (replay_node, sim_node): every topic subscribed
    (bounded by ``wait_subscribers_s``, 0: do not wait), then the start signal on
    ``start_topic`` if one is set (bounded by ``start_timeout_s``); each timeout is logged and
    the node starts anyway. False when ``stop`` was set meanwhile."""
    log = node.get_logger()
    if wait_subscribers_s > 0 and not wait_until(
        lambda: all(count() > 0 for count in counts),
        wait_subscribers_s,
        stop,
        lambda: log.warning('not every topic has a subscriber: starting anyway'),
    ):
        return False
    return not start_topic or wait_until(
        started.is_set,
        start_timeout_s,
        stop,
        lambda: log.warning(f'nothing on {start_topic}: starting anyway'),
    )
