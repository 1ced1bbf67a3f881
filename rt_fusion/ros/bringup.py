"""Ordered bring-up of a graph's lifecycle nodes, and pause / resume of the whole graph.

The launch files start every node with ``autostart: false`` and one ``bringup`` node beside
them, which drives the standard lifecycle services (``<node>/get_state``,
``<node>/change_state``): it waits (bounded by ``timeout_s``) until every node of ``nodes`` is
up, configures them all in order, then activates them all, and says in one line which nodes are
active and how long it took. A node that does not reach ``active`` is named, with the error it
logged (read from ``/rosout``), and the bring-up node exits with status 1, which ends the launch
(a graph that fails, fails whole) unless the node is listed in ``optional``: the graph then runs
without it, degraded, and says so.

Once up it watches: a node that comes back ``unconfigured`` (respawned after a crash) is brought
up again. ``~/pause`` deactivates every node (in reverse order) and ``~/resume`` activates them
again (``std_srvs/Trigger``: ``ros2 service call /bringup/pause std_srvs/srv/Trigger``).

With ``drive: false`` (``respawn:=true`` on the vehicle launch, where each node brings itself up
so that a restart needs no manager), the nodes start themselves and this node only waits for
them, names any that does not reach ``active`` and serves pause / resume.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from typing import Any

from lifecycle_msgs.msg import State, Transition
from lifecycle_msgs.srv import ChangeState, GetState
from rcl_interfaces.msg import Log
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.node import Node
from rclpy.qos import QoSProfile, ReliabilityPolicy
from std_srvs.srv import Trigger

from rt_fusion.core.errors import ParameterError
from rt_fusion.core.params import param
from rt_fusion.ros import parameters

LABELS = {
    State.PRIMARY_STATE_UNKNOWN: 'unknown',
    State.PRIMARY_STATE_UNCONFIGURED: 'unconfigured',
    State.PRIMARY_STATE_INACTIVE: 'inactive',
    State.PRIMARY_STATE_ACTIVE: 'active',
    State.PRIMARY_STATE_FINALIZED: 'finalized',
}


@dataclasses.dataclass(frozen=True)
class BringupParams:
    """Parameters of the bring-up node."""

    nodes: tuple[str, ...] = param(
        "the lifecycle nodes to bring up, in this order (names in this node's namespace)",
        default=(),
    )
    optional: tuple[str, ...] = param(
        'nodes the graph may run without: one that does not come up is reported and left out '
        '(degraded); any other ends the graph',
        default=(),
    )
    drive: bool = param(
        'configure all, then activate all (the nodes have autostart false); false: they start '
        'themselves (respawn), and are only waited for and reported',
        default=True,
    )
    timeout_s: float = param(
        'how long a node may take to appear, and each transition', unit='s', default=60.0,
        low=0.1,
    )  # fmt: skip
    watch_period_s: float = param(
        'how often the states are checked once up (a restarted node is brought up again)',
        unit='s',
        default=0.5,
        low=0.05,
    )


class BringupError(Exception):
    """A node that must come up did not reach ``active``."""


class Bringup:
    """The bring-up and the watch, on ``node`` (spun by a multi-threaded executor: the service
    calls are waited for in this object's thread and in the pause / resume callbacks)."""

    def __init__(self, node: Node) -> None:
        self.node = node
        self.p = parameters.declare_params(node, BringupParams)
        parameters.reject_unknown_params(node)
        unknown = sorted(set(self.p.optional) - set(self.p.nodes))
        if unknown:
            raise ParameterError('optional', list(self.p.optional), f'not in nodes: {unknown}')
        group = ReentrantCallbackGroup()
        self.get: dict[str, Any] = {
            n: node.create_client(GetState, f'{n}/get_state', callback_group=group)
            for n in self.p.nodes
        }
        self.change: dict[str, Any] = {
            n: node.create_client(ChangeState, f'{n}/change_state', callback_group=group)
            for n in self.p.nodes
        }
        self.left_out: set[str] = set()  # optional nodes that did not come up
        self.paused = False
        self.exit_status = 0
        self.done = threading.Event()  # bring-up over (either way)
        self.finished = threading.Event()  # the node should end (a failed bring-up)
        self._lock = threading.Lock()  # transitions: the watch, pause and resume take turns
        self.errors: dict[str, str] = {}  # a node's last error line (/rosout)
        rosout = QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE)
        node.create_subscription(Log, '/rosout', self._on_log, rosout, callback_group=group)
        node.create_service(Trigger, '~/pause', self._on_pause, callback_group=group)
        node.create_service(Trigger, '~/resume', self._on_resume, callback_group=group)
        self._thread = threading.Thread(target=self._run, name='bringup', daemon=True)

    def start(self) -> None:
        """The bring-up, then the watch, in a thread of their own."""
        self._thread.start()

    def close(self, timeout_s: float = 5.0) -> bool:
        """Ends the bring-up or the watch (before the node is destroyed): every wait returns at
        once. False when the thread did not end within ``timeout_s``."""
        self.finished.set()
        if self._thread.is_alive():
            self._thread.join(timeout_s)
        return not self._thread.is_alive()

    # -- /rosout: why a node failed ----------------------------------------------------------

    def _on_log(self, msg: Log) -> None:
        if msg.level >= Log.ERROR:
            self.errors[msg.name.rsplit('.', 1)[-1]] = msg.msg.splitlines()[0][:300]

    # -- service calls, waited for in this thread ---------------------------------------------

    def _wait(self, future: Any, timeout_s: float) -> Any:
        """The call's result; None after ``timeout_s`` or once the node is ending (a stop: the
        answer may never come once the executor stops spinning, and the process must not wait
        for it)."""
        done = threading.Event()
        future.add_done_callback(lambda _f: done.set())
        deadline = time.monotonic() + timeout_s
        while not done.wait(0.05):  # paced: the answer, or the node's end
            if self.finished.is_set() or time.monotonic() >= deadline:
                future.cancel()
                return None
        return future.result()

    def state(self, name: str, timeout_s: float = 5.0) -> int:
        """A node's primary state id (PRIMARY_STATE_UNKNOWN when it does not answer)."""
        client = self.get[name]
        unknown = int(State.PRIMARY_STATE_UNKNOWN)
        if not client.service_is_ready():
            return unknown
        got = self._wait(client.call_async(GetState.Request()), timeout_s)
        return int(got.current_state.id) if got is not None else unknown

    def settled_state(self, name: str) -> int:
        """:meth:`state`, asked again while the node does not answer (up to ``timeout_s``): on a
        loaded host a lifecycle node's answer can be lost ("failed to send response (timeout)"
        on its side) although the node is there and well; one unanswered call is no verdict."""
        unknown = int(State.PRIMARY_STATE_UNKNOWN)
        end = time.monotonic() + self.p.timeout_s
        while True:
            s = self.state(name)
            if s != unknown or time.monotonic() >= end or self.finished.is_set():
                return s
            self.node.get_logger().warning(f'bring-up: {name} did not answer get_state: again')
            self.finished.wait(0.2)  # paced: the node's services catching up

    def transition(self, name: str, transition: int) -> bool:
        """One transition of one node; True when it succeeded."""
        req = ChangeState.Request()
        req.transition.id = transition
        got = self._wait(self.change[name].call_async(req), self.p.timeout_s)
        return bool(got is not None and got.success)

    def _appear(self, deadline: float) -> list[str]:
        """Waits until every node's lifecycle services answer; the names that never did."""
        missing = list(self.p.nodes)
        while missing and time.monotonic() < deadline and not self.finished.is_set():
            missing = [
                n
                for n in missing
                if not (self.get[n].service_is_ready() and self.change[n].service_is_ready())
            ]
            if missing:
                self.finished.wait(0.05)  # paced: the graph's discovery
        return missing

    def _fail(self, name: str, why: str) -> None:
        said = self.errors.get(name, '')
        text = f"node '{name}' did not reach active: {why}" + (f' ({said})' if said else '')
        if name in self.p.optional:
            self.left_out.add(name)
            self.node.get_logger().warning(f'bring-up: {text}; the graph runs without it')
            return
        raise BringupError(text)

    def _up(self, names: list[str]) -> None:
        """Configure all of ``names``, then activate all (those already there are left)."""
        ok = []
        for name in names:
            s = self.settled_state(name)
            if s == State.PRIMARY_STATE_UNCONFIGURED and not self.transition(
                name, Transition.TRANSITION_CONFIGURE
            ):
                self._fail(name, 'configure failed')
                continue
            if s in (State.PRIMARY_STATE_UNKNOWN, State.PRIMARY_STATE_FINALIZED):
                self._fail(name, f'it is {LABELS.get(s, s)}')
                continue
            ok.append(name)
        for name in ok:
            if self.settled_state(name) == State.PRIMARY_STATE_INACTIVE and not self.transition(
                name, Transition.TRANSITION_ACTIVATE
            ):
                self._fail(name, 'activate failed')

    def _await_active(self, deadline: float) -> None:
        """drive false: the nodes bring themselves up; wait until each is active."""
        pending = list(self.p.nodes)
        while pending and time.monotonic() < deadline and not self.finished.is_set():
            pending = [n for n in pending if self.state(n) != State.PRIMARY_STATE_ACTIVE]
            if pending:
                self.finished.wait(0.1)  # paced: their own start-up
        for name in pending:
            self._fail(name, f'still {LABELS.get(self.state(name), "not answering")}')

    def _run(self) -> None:
        log = self.node.get_logger()
        t0 = time.monotonic()
        deadline = t0 + self.p.timeout_s
        try:
            for name in self._appear(deadline):
                self._fail(name, f'its lifecycle services did not appear in {self.p.timeout_s} s')
            present = [n for n in self.p.nodes if n not in self.left_out]
            with self._lock:
                if self.p.drive:
                    self._up(present)
                else:
                    self._await_active(deadline)
        except BringupError as err:
            if self.finished.is_set():  # stopped (SIGINT) while it brought the graph up
                log.info('bring-up: stopped before the graph was up')
                self.done.set()
                return
            log.fatal(f'bring-up: {err}; stopping the graph')
            self.exit_status = 1
            self.done.set()
            self.finished.set()
            return
        up = [n for n in self.p.nodes if n not in self.left_out]
        log.info(
            f'bring-up: {len(up)} nodes active in {time.monotonic() - t0:.1f} s: {", ".join(up)}'
            + (f' (without {", ".join(sorted(self.left_out))})' if self.left_out else '')
        )
        self.done.set()
        self._watch(up)

    def _watch(self, up: list[str]) -> None:
        """A node that comes back unconfigured (restarted) is brought up again."""
        while not self.finished.wait(self.p.watch_period_s):
            if not self.p.drive or self.paused:
                continue
            for name in up:
                if self.state(name) != State.PRIMARY_STATE_UNCONFIGURED:
                    continue
                self.node.get_logger().warning(f'bring-up: {name} restarted: bringing it up')
                with self._lock:
                    try:
                        self._up([name])
                    except BringupError as err:
                        self.node.get_logger().error(f'bring-up: {err}')

    # -- pause / resume ----------------------------------------------------------------------

    def _all(self, transition: int, from_state: int, order: list[str]) -> tuple[bool, str]:
        failed = []
        with self._lock:
            for name in order:
                if self.state(name) == from_state and not self.transition(name, transition):
                    failed.append(name)
        return not failed, (f'failed: {", ".join(failed)}' if failed else 'ok')

    def _on_pause(self, _req: Trigger.Request, res: Trigger.Response) -> Trigger.Response:
        if not self.done.is_set() or self.exit_status:
            res.success, res.message = False, 'the graph is not up'
            return res
        up = [n for n in self.p.nodes if n not in self.left_out]
        self.paused = True
        res.success, res.message = self._all(
            Transition.TRANSITION_DEACTIVATE, State.PRIMARY_STATE_ACTIVE, up[::-1]
        )
        self.node.get_logger().info(f'bring-up: paused ({res.message})')
        return res

    def _on_resume(self, _req: Trigger.Request, res: Trigger.Response) -> Trigger.Response:
        if not self.done.is_set() or self.exit_status:
            res.success, res.message = False, 'the graph is not up'
            return res
        up = [n for n in self.p.nodes if n not in self.left_out]
        res.success, res.message = self._all(
            Transition.TRANSITION_ACTIVATE, State.PRIMARY_STATE_INACTIVE, up
        )
        self.paused = False
        self.node.get_logger().info(f'bring-up: resumed ({res.message})')
        return res
