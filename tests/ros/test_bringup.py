"""The bring-up node drives real lifecycle nodes (the calibration and the planner, waiting with
``autostart: false``) through the standard services: configure all, then activate all; pause
and resume the graph over ``std_srvs/Trigger``; a node that fails is named with its error."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.conftest import ros_context


def _until(what: Callable[[], bool], deadline_s: float = 60.0) -> None:
    end = time.monotonic() + deadline_s
    while not what():
        assert time.monotonic() < end, 'not within the deadline'
        time.sleep(0.02)  # paced: another thread spins


@pytest.fixture
def graph() -> Iterator[Callable[..., tuple[Any, dict[str, Any]]]]:
    """Starts lifecycle nodes and a bring-up node in this process, spun by one executor."""
    import rclpy  # noqa: PLC0415
    from rclpy.executors import MultiThreadedExecutor  # noqa: PLC0415
    from rclpy.parameter import Parameter  # noqa: PLC0415

    from rt_fusion.nodes.calibration_node import CalibrationNode  # noqa: PLC0415
    from rt_fusion.nodes.trajectory_node import TrajectoryNode  # noqa: PLC0415
    from rt_fusion.ros.bringup import Bringup  # noqa: PLC0415

    made: list[Any] = []
    stop = threading.Event()
    with ros_context() as context:
        executor = MultiThreadedExecutor(num_threads=4, context=context)

        def start(calibration: str = 'config/calibration/scenario.yaml', **params: Any) -> Any:
            wait = [Parameter('autostart', value=False)]
            nodes = {
                'calibration': CalibrationNode(
                    context=context,
                    parameter_overrides=[*wait, Parameter('calibration', value=calibration)],
                ),
                'planner': TrajectoryNode(context=context, parameter_overrides=wait),
            }
            manager = rclpy.create_node(
                'bringup',
                context=context,
                parameter_overrides=[
                    Parameter('nodes', value=list(nodes)),
                    *(Parameter(k, value=v) for k, v in params.items()),
                ],
            )
            bringup = Bringup(manager)
            for node in [*nodes.values(), manager]:
                executor.add_node(node)
                made.append(node)

            def spin() -> None:
                while not stop.is_set():
                    executor.spin_once(timeout_sec=0.05)

            threading.Thread(target=spin, daemon=True).start()
            bringup.start()
            made.append(bringup)
            return bringup, nodes

        try:
            yield start
        finally:
            for bringup in (m for m in made if hasattr(m, 'close')):
                bringup.close()
            stop.set()
            executor.shutdown()
            for node in (m for m in made if not hasattr(m, 'close')):
                node.destroy_node()


def _labels(nodes: dict[str, Any]) -> dict[str, str]:
    return {name: node._state_machine.current_state[1] for name, node in nodes.items()}


def test_the_graph_comes_up_in_order_and_pauses_and_resumes(graph: Any) -> None:
    from std_srvs.srv import Trigger  # noqa: PLC0415

    bringup, nodes = graph()
    _until(bringup.done.is_set)
    assert bringup.exit_status == 0
    assert _labels(nodes) == {'calibration': 'active', 'planner': 'active'}
    client = bringup.node.create_client(Trigger, '/bringup/pause')
    _until(client.service_is_ready)
    got = bringup._wait(client.call_async(Trigger.Request()), 30.0)
    assert got.success, got.message
    assert _labels(nodes) == {'calibration': 'inactive', 'planner': 'inactive'}
    client = bringup.node.create_client(Trigger, '/bringup/resume')
    _until(client.service_is_ready)
    got = bringup._wait(client.call_async(Trigger.Request()), 30.0)
    assert got.success, got.message
    assert _labels(nodes) == {'calibration': 'active', 'planner': 'active'}


def test_a_node_that_fails_to_configure_is_named_and_ends_the_bring_up(graph: Any) -> None:
    bringup, nodes = graph(calibration='/no/such/calibration.yaml')
    _until(bringup.finished.is_set)
    assert bringup.exit_status == 1
    # It stopped at the first failure: nothing after it was touched, nothing activated.
    assert _labels(nodes) == {'calibration': 'unconfigured', 'planner': 'unconfigured'}
    assert 'No such file' in bringup.errors.get('calibration', ''), bringup.errors


def test_an_optional_node_that_fails_is_left_out_and_the_rest_comes_up(graph: Any) -> None:
    bringup, nodes = graph(calibration='/no/such/calibration.yaml', optional=['calibration'])
    _until(bringup.done.is_set)
    assert bringup.exit_status == 0 and bringup.left_out == {'calibration'}
    assert _labels(nodes) == {'calibration': 'unconfigured', 'planner': 'active'}


@contextlib.contextmanager
def _lifecycle_services(
    procs: Any, name: str, get_state: Callable[..., Any], change_state: Callable[..., Any]
) -> Iterator[None]:
    """A node in this process on the test's domain that offers only ``<name>/get_state`` and
    ``<name>/change_state`` with the given callbacks, spun by its own executor while open."""
    import rclpy  # noqa: PLC0415
    from lifecycle_msgs.srv import ChangeState, GetState  # noqa: PLC0415
    from rclpy.callback_groups import ReentrantCallbackGroup  # noqa: PLC0415
    from rclpy.executors import MultiThreadedExecutor  # noqa: PLC0415

    with ros_context(int(procs.env['ROS_DOMAIN_ID'])) as context:
        node = rclpy.create_node(name, context=context)
        group = ReentrantCallbackGroup()
        node.create_service(GetState, f'{name}/get_state', get_state, callback_group=group)
        node.create_service(
            ChangeState, f'{name}/change_state', change_state, callback_group=group
        )
        executor = MultiThreadedExecutor(num_threads=3, context=context)
        executor.add_node(node)
        stop = threading.Event()

        def spin() -> None:
            while not stop.is_set():
                executor.spin_once(timeout_sec=0.05)

        spinner = threading.Thread(target=spin, daemon=True)
        spinner.start()
        try:
            yield
        finally:
            stop.set()
            spinner.join(5)
            executor.shutdown()
            node.destroy_node()


@pytest.mark.parametrize('signum', ['SIGINT', 'SIGTERM'])
def test_a_stop_while_a_call_is_unanswered_ends_the_process_at_once(
    signum: str, procs: Any
) -> None:
    """The bring-up node process, stopped while it waits on a node that never answers (a CI
    launch escalated to SIGKILL: the bring-up thread waited out its 60-s timeout): it ends
    cleanly, with status 0, well before the call's timeout could end it."""
    import os  # noqa: PLC0415
    import signal  # noqa: PLC0415

    asked = threading.Event()
    release = threading.Event()

    def never(_req: Any, res: Any) -> Any:  # a node whose executor is stuck
        asked.set()
        release.wait(600)
        return res

    with _lifecycle_services(procs, 'ghost', never, never):
        try:
            proc = procs.node(
                'bringup_node', '-r', '__node:=bringup', '-p', 'nodes:=[ghost]',
                '-p', 'timeout_s:=600.0',
            )  # fmt: skip
            assert asked.wait(120), proc.tail()
            os.kill(proc.popen.pid, getattr(signal, signum))
            assert proc.wait(timeout_s=120) == 0, proc.tail()
            assert any('stopped before the graph was up' in x for x in proc.stderr), proc.tail()
        finally:
            release.set()


def test_a_lost_get_state_answer_is_asked_again_and_the_node_comes_up(procs: Any) -> None:
    """A lifecycle node whose first get_state answer comes too late (on a loaded host its
    response can be lost: "failed to send response (timeout)") is asked again instead of being
    declared 'unknown' and stopping the graph. Before: the bring-up failed on the first
    unanswered call."""
    from lifecycle_msgs.msg import State, Transition  # noqa: PLC0415

    state = {'id': State.PRIMARY_STATE_UNCONFIGURED, 'asked': 0}
    release = threading.Event()

    def get_state(_req: Any, res: Any) -> Any:
        state['asked'] += 1
        if state['asked'] == 1:
            release.wait(8.0)  # longer than the bring-up's 5-s wait for one answer
        res.current_state.id = state['id']
        return res

    def change_state(req: Any, res: Any) -> Any:
        moves = {
            (State.PRIMARY_STATE_UNCONFIGURED, Transition.TRANSITION_CONFIGURE):
                State.PRIMARY_STATE_INACTIVE,
            (State.PRIMARY_STATE_INACTIVE, Transition.TRANSITION_ACTIVATE):
                State.PRIMARY_STATE_ACTIVE,
        }  # fmt: skip
        after = moves.get((state['id'], req.transition.id))
        res.success = after is not None
        if after is not None:
            state['id'] = after
        return res

    with _lifecycle_services(procs, 'slow', get_state, change_state):
        try:
            proc = procs.node(
                'bringup_node', '-r', '__node:=bringup', '-p', 'nodes:=[slow]',
                '-p', 'timeout_s:=120.0',
            )  # fmt: skip
            assert proc.wait_stderr('1 nodes active', 180), proc.tail()
            assert state['id'] == State.PRIMARY_STATE_ACTIVE and state['asked'] >= 2
            assert any('did not answer get_state: again' in x for x in proc.stderr), proc.tail()
            proc.stop()
        finally:
            release.set()
