"""The lifecycle every device-owning node shares (:class:`DeviceNode`): what configure creates
is released at cleanup, a failed transition says why, autostart, and the start-up times a
node reports when it is active.
"""

from __future__ import annotations

import contextlib
import importlib
import inspect
import sys
import time
import traceback
from collections.abc import Callable
from typing import Any, TypeVar

from rcl_interfaces.msg import ParameterDescriptor
from rclpy.lifecycle import LifecycleNode, LifecycleState, TransitionCallbackReturn
from rclpy.lifecycle.publisher import LifecyclePublisher
from rclpy.publisher import Publisher
from rclpy.subscription import Subscription
from rclpy.timer import Timer

from rt_fusion.core import linux, params
from rt_fusion.core.errors import RtFusionError
from rt_fusion.ros import compat, qos
from rt_fusion.ros.parameters import reject_unknown_params

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
            qos.check_overrides({k: v.value for k, v in self._parameter_overrides.items()})
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
