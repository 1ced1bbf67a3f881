"""Closed loop: a scenario simulated around the fusion node and the planner, the planner driving.

    ros2 launch rt_fusion sim.launch.py scenario:=stopped_car seconds:=8 out:=/tmp/sim
    ros2 launch rt_fusion sim.launch.py scenario:=/path/to/my_scenario.yaml seed:=3

``sim_node`` renders the scenario's sensors (camera frames into a shared-memory ring, radar
objects, IMU, microphone, vehicle speed) lock-step with the fusion node, which acknowledges each
input on ``ack_topic``; the planner's trajectories drive the simulated ego (a plan takes effect
``actuation_delay_s`` after the frame it answers), so the sensors see what the plans do. The
planner plans once per object list on the stamps' clock. Fusion and planner are the vehicle
graph's own (``rt_fusion/ros/graph.py``) with their parameters from ``config`` (default the
installed ``config/replay.yaml``). ``tools/evaluate.py --closed-loop`` runs this and scores the
driven ego against the scenario's actors (``out/ground_truth.json``).
"""

from __future__ import annotations

from pathlib import Path

from ament_index_python.packages import get_package_share_directory
from launch import LaunchContext, LaunchDescription
from launch.actions import DeclareLaunchArgument, OpaqueFunction
from launch.substitutions import LaunchConfiguration

from rt_fusion.ros import graph

ACK = graph.ACK_TOPIC


def generate_launch_description() -> LaunchDescription:
    """``ros2 launch`` entry point."""
    share = Path(get_package_share_directory(graph.PACKAGE))
    names = (
        'scenario',
        'seed',
        'seconds',
        'out',
        'start_topic',
        'actuation_delay_s',
        'audio',
        'drive',
    )
    actions: list[object] = [
        DeclareLaunchArgument('scenario', description='built-in scenario name or a YAML path'),
        DeclareLaunchArgument('seed', default_value='1', description='sensor noise seed'),
        DeclareLaunchArgument('seconds', default_value='8.0', description='length [s]'),
        DeclareLaunchArgument(
            'out', default_value='', description='folder for ground_truth.json (empty: none)'
        ),
        DeclareLaunchArgument(
            'start_topic',
            default_value='',
            description='wait for a start signal here (a recorder that must listen first)',
        ),
        DeclareLaunchArgument(
            'actuation_delay_s',
            default_value='0.2',
            description='a plan drives the ego this long after the frame it answers [s]',
        ),
        DeclareLaunchArgument(
            'audio', default_value='true', description='render the microphone for the hearing'
        ),
        DeclareLaunchArgument(
            'drive',
            default_value='true',
            description='the plans drive the ego (false: its script, a check against the replay)',
        ),
        DeclareLaunchArgument(
            'config',
            default_value=str(share / 'config' / 'replay.yaml'),
            description='parameters of fusion and planner',
        ),
        DeclareLaunchArgument(
            'calibration',
            default_value=str(share / 'config' / 'calibration' / 'scenario.yaml'),
            description="the vehicle's sensor mountings, published on /tf_static",
        ),
        graph.declare_namespace(),
        graph.declare_frame_prefix(),
        *graph.declare_viewer(),
    ]

    def nodes(context: LaunchContext) -> list[object]:
        config = LaunchConfiguration('config').perform(context)
        graph.check_config(config)
        sim = {n: LaunchConfiguration(n) for n in names}
        # Lock-step: the fusion acknowledges every input; the planner plans once per object
        # list, on the stamps' clock (simulated time), so a plan answers each fused frame.
        closed = {'fusion': {'ack_topic': ACK}, 'planner': {'clock': 'stamps'}}
        managed = graph.MANAGED
        calibration = {'calibration': LaunchConfiguration('calibration')}
        frames = graph.frames(context)  # frame_prefix
        nodes = {
            graph.CALIBRATION.name: graph.launch_node(
                graph.CALIBRATION, [calibration, managed, frames.get('calibration', {})]
            ),
            graph.FUSION.name: graph.launch_node(
                graph.FUSION,
                [config, closed['fusion'], calibration, managed, frames.get('fusion', {})],
            ),
            graph.PLANNER.name: graph.launch_node(
                graph.PLANNER, [config, closed['planner'], managed, frames.get('planner', {})]
            ),
            **graph.viewer_node(context, [managed]),  # viewer:=true (optional)
            graph.SIM.name: graph.launch_node(graph.SIM, [sim, {'ack_topic': ACK}, managed]),
        }
        optional = [graph.VIEWER.name] if graph.VIEWER.name in nodes else []
        return graph.in_namespace(
            context, graph.brought_up(nodes, order=list(nodes), optional=optional)
        )

    actions.append(OpaqueFunction(function=nodes))
    return LaunchDescription(actions)
