"""Live parameters: `ros2 param set` either changes what a running node does (a live group,
checked by the start-up rules) or is refused with a reason (read-only, or a bad value by name).

The node runs in this process (fusion_node without a network); `ros2 param set` is the real
CLI in another process, on this test's ROS domain."""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ros2_cli, ros_context, ros_env

ROS2 = Path(sys.prefix) / 'bin' / 'ros2'


@pytest.fixture
def fusion() -> Iterator[tuple[Any, dict[str, str]]]:
    """A configured fusion node spinning in a thread, and the environment of its domain."""
    from rclpy.executors import SingleThreadedExecutor  # noqa: PLC0415
    from rclpy.parameter import Parameter  # noqa: PLC0415

    from rt_fusion.nodes.fusion_node import FusionNode  # noqa: PLC0415

    env = ros_env()
    with ros_context(int(env['ROS_DOMAIN_ID'])) as context:
        overrides = {'backend': 'none', 'autostart': False, 'hearing_model': ''}
        node = FusionNode(
            context=context,
            parameter_overrides=[Parameter(k, value=v) for k, v in overrides.items()],
        )
        node.trigger_configure()
        executor = SingleThreadedExecutor(context=context)
        executor.add_node(node)
        stop = threading.Event()

        def spin() -> None:
            while not stop.is_set():
                executor.spin_once(timeout_sec=0.05)

        thread = threading.Thread(target=spin, daemon=True)
        thread.start()
        try:
            yield node, env
        finally:
            stop.set()
            thread.join(10.0)
            node.trigger_cleanup()
            node.destroy_node()


def _param_set(env: dict[str, str], name: str, value: str) -> subprocess.CompletedProcess[str]:
    if not ROS2.exists():
        pytest.skip('ros2 CLI not installed (make setup installs it from ../shared)')
    return ros2_cli(ROS2, ['param', 'set', '/fusion', name, value], env)


def test_ros2_param_set_changes_the_running_tracker(fusion: tuple[Any, dict[str, str]]) -> None:
    node, env = fusion
    assert node.engine.tracker.life.confirm_hits != 5
    out = _param_set(env, 'tracker.confirm_hits', '5')
    assert 'Set parameter successful' in out.stdout + out.stderr, out.stdout + out.stderr
    assert node.engine.tracker.p.confirm_hits == 5
    assert node.engine.tracker.life.confirm_hits == 5  # what the kernels read


@pytest.mark.parametrize(
    ('name', 'value'),
    [
        ('tracker.confirm_hits', '0'),  # an integer below its range: rclpy's descriptor
        ('tracker.gate_chi2', '0.5'),  # a float below its range: the start-up rules
        ('tracker.gate_chi2', 'wide'),  # the wrong type
    ],
)
def test_a_bad_live_value_is_refused_with_its_name(
    fusion: tuple[Any, dict[str, str]], name: str, value: str
) -> None:
    node, env = fusion
    before = node.engine.tracker.p
    out = _param_set(env, name, value)
    said = out.stdout + out.stderr
    assert 'failed' in said and name in said, said
    assert node.engine.tracker.p is before


def test_a_read_only_parameter_is_refused_with_a_reason(
    fusion: tuple[Any, dict[str, str]],
) -> None:
    node, env = fusion
    out = _param_set(env, 'backend', 'onnxruntime')
    said = out.stdout + out.stderr
    assert 'failed' in said and 'read-only' in said and 'backend' in said, said
    assert node.get_parameter('backend').value == 'none'


def test_the_planner_weights_are_live_in_process() -> None:
    """trajectory_node's planner.* apply at the next replan; its rt.* are read-only."""
    from rclpy.parameter import Parameter  # noqa: PLC0415

    from rt_fusion.nodes.trajectory_node import TrajectoryNode  # noqa: PLC0415

    with ros_context() as context:
        node = TrajectoryNode(
            context=context, parameter_overrides=[Parameter('autostart', value=False)]
        )
        node.trigger_configure()
        try:
            (ok,) = node.set_parameters([Parameter('planner.w_speed', value=7.5)])
            assert ok.successful and node.planner_params.w_speed == 7.5
            (bad,) = node.set_parameters([Parameter('rt.rt_priority', value=1)])
            assert not bad.successful and 'read-only' in bad.reason
        finally:
            node.trigger_cleanup()
            node.destroy_node()


def test_the_detector_and_hearing_thresholds_are_live_in_process() -> None:
    """With the vehicle's detector and hearing loaded: the decoder the frames go through takes
    the new score threshold (the model's own again at -1), the hearing the new hysteresis; the
    hop length, which sizes the hearing's buffers, is refused while running."""
    from rclpy.parameter import Parameter  # noqa: PLC0415

    from rt_fusion.nodes.fusion_node import FusionNode  # noqa: PLC0415
    from tests.conftest import ROOT  # noqa: PLC0415

    overrides = {
        'autostart': False,
        'model': str(ROOT / 'models' / 'rtf_centernet.yaml'),
        'backend': 'onnxruntime',
        'threads': 1,
    }
    with ros_context() as context:
        node = FusionNode(
            context=context,
            parameter_overrides=[Parameter(k, value=v) for k, v in overrides.items()],
        )
        node.trigger_configure()
        try:
            assert node.failure is None, node.failure
            own = node.runner.spec.decoder.score_threshold
            assert node.engine.decoder.score_threshold == own
            (ok,) = node.set_parameters([Parameter('detector.score_threshold', value=0.9)])
            assert ok.successful and node.engine.decoder.score_threshold == 0.9
            (ok,) = node.set_parameters([Parameter('detector.score_threshold', value=-1.0)])
            assert ok.successful and node.engine.decoder.score_threshold == own
            (bad,) = node.set_parameters([Parameter('detector.score_threshold', value=1.5)])
            assert not bad.successful and 'detector.score_threshold' in bad.reason
            (ok,) = node.set_parameters([Parameter('hearing.on_threshold', value=0.8)])
            assert ok.successful and node.hearing.params.on_threshold == 0.8
            (bad,) = node.set_parameters([Parameter('hearing.off_threshold', value=0.9)])
            assert not bad.successful and 'off_threshold' in bad.reason  # above on_threshold
            (bad,) = node.set_parameters([Parameter('hearing.hop_s', value=0.2)])
            assert not bad.successful and 'hearing.hop_s' in bad.reason, bad.reason
            assert node.hearing.params.hop_s == 0.1
        finally:
            node.trigger_cleanup()
            node.destroy_node()
