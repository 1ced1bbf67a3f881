"""Regression replay: a rosbag2 through the fusion node and the planner, instead of the sensors.

    ros2 launch rt_fusion replay.launch.py bag:=/path/to/bag
    ros2 launch rt_fusion replay.launch.py bag:=/path/to/bag mode:=lockstep rate:=1.0

In ``mode:=lockstep`` each message waits for an acknowledgement on ``ack_topic``; with
``ack_topic:=/fusion/ack`` and the fusion node's ``ack_topic`` set to the same (as
``tools/evaluate.py`` does) the fusion node paces the replay, which makes a run deterministic
on any machine. ``restamp:=false`` keeps the recorded stamps (they then match the bag's truth).

``replay_node`` publishes the recorded sensor topics as the sensor nodes would (camera images
into a shared-memory ring with ``ShmFrame`` descriptors, radar objects, IMU), with their stamps
moved onto the host clock (``restamp``), starting once the fusion node subscribes. Bags from
``tools/make_scenario.py`` and from ``tools/record.py`` on the vehicle have these topics.
Parameters of fusion and planner come from ``config`` (default the installed
``config/replay.yaml``).
"""

from __future__ import annotations

from pathlib import Path

from ament_index_python.packages import get_package_share_directory
from launch import LaunchContext, LaunchDescription
from launch.actions import DeclareLaunchArgument, OpaqueFunction
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node

PACKAGE = 'rt_fusion'
CAMERA = '/camera/out/image/compressed'

# Node name -> (executable, remappings), as in vehicle.launch.py.
GRAPH: dict[str, tuple[str, list[tuple[str, str]]]] = {
    'replay': ('replay_node', []),
    'fusion': (
        'fusion_node',
        [
            ('~/in/camera', '/camera/out/image'),
            ('~/in/imu', '/imu/out/imu'),
            ('~/in/radar', '/radar/out/objects'),
        ],
    ),
    'planner': (
        'trajectory_node',
        [('~/in/objects', '/fusion/out/objects'), ('~/in/odometry', '/fusion/out/odometry')],
    ),
}


def generate_launch_description() -> LaunchDescription:
    """``ros2 launch`` entry point."""
    share = Path(get_package_share_directory(PACKAGE))
    config = LaunchConfiguration('config')
    replay_params = {
        'bag': LaunchConfiguration('bag'),
        'mode': LaunchConfiguration('mode'),
        'rate': LaunchConfiguration('rate'),
        'restamp': LaunchConfiguration('restamp'),
        'ack_topic': LaunchConfiguration('ack_topic'),
        'start_topic': LaunchConfiguration('start_topic'),
        'publish_clock': False,
        'wait_subscribers_s': 30.0,
    }
    actions: list[object] = [
        DeclareLaunchArgument('bag', description='rosbag2 folder to replay'),
        DeclareLaunchArgument(
            'camera_topic',
            default_value=CAMERA,
            description='the camera topic in the bag (JPEG CompressedImage or Image)',
        ),
        DeclareLaunchArgument(
            'mode', default_value='realtime', description='realtime, lockstep or fast'
        ),
        DeclareLaunchArgument('rate', default_value='1.0', description='realtime speed factor'),
        DeclareLaunchArgument(
            'restamp', default_value='true', description='move stamps onto the host clock'
        ),
        DeclareLaunchArgument(
            'ack_topic', default_value='~/ack', description='lockstep: acknowledgements'
        ),
        DeclareLaunchArgument(
            'start_topic',
            default_value='',
            description='wait for a start signal here (a recorder that must listen first)',
        ),
        DeclareLaunchArgument(
            'config',
            default_value=str(share / 'config' / 'replay.yaml'),
            description='parameters of fusion and planner',
        ),
    ]

    def camera_params(context: LaunchContext) -> list[Node]:
        # Lists of strings cannot hold a substitution (launch joins them): resolved here.
        camera = LaunchConfiguration('camera_topic').perform(context)
        topics = {'topics': ['/imu/out/imu', '/radar/out/objects', camera]}
        shm = {'shm': [f'{camera}->/camera/out/image']}
        return [node('replay', [replay_params, topics, shm])]

    def node(name: str, parameters: list[object]) -> Node:
        executable, remappings = GRAPH[name]
        return Node(
            package=PACKAGE,
            executable=executable,
            name=name,
            parameters=parameters,
            remappings=remappings,
            output='screen',
            emulate_tty=True,
        )

    actions.append(OpaqueFunction(function=camera_params))
    actions += [node(name, [config]) for name in GRAPH if name != 'replay']
    return LaunchDescription(actions)
