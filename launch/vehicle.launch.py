"""The rt_fusion graph on the vehicle: sensor nodes, fusion, trajectory planner.

    ros2 launch rt_fusion vehicle.launch.py
    ros2 launch rt_fusion vehicle.launch.py config:=/path/to/my_vehicle.yaml microphone:=false

Every node reads its parameters from one YAML file (``config``, default the installed
``config/vehicle.yaml``); a misspelt or out-of-range parameter stops that node at start-up with
its name. Topics: the sensor nodes publish under their names (``/camera/out/image`` descriptors
and shared memory, ``/radar/out/objects``, ``/imu/out/imu``, ``/microphone/out/audio``), the
fusion node reads them and publishes ``/fusion/out/objects`` and ``/fusion/out/odometry``, the
planner publishes ``/planner/out/trajectory`` and ``/planner/out/path``. Real-time settings
(SCHED_FIFO priorities, CPU sets, locked memory) are parameters too (``rt.*``); the host must be
set up first (``rt_kernel/README.md``). ``emulate_sensors:=true`` (no hardware) is what
``tools/demo.py`` does on a development machine.
"""

from __future__ import annotations

from pathlib import Path

from ament_index_python.packages import get_package_share_directory
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument
from launch.conditions import IfCondition
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node

PACKAGE = 'rt_fusion'

# Node name -> (executable, remappings). The names are the sections of the YAML file.
GRAPH: dict[str, tuple[str, list[tuple[str, str]]]] = {
    'camera': ('camera_node', []),
    'radar': ('radar_node', [('~/in/odometry', '/fusion/out/odometry')]),
    'imu': ('imu_node', []),
    'microphone': ('microphone_node', []),
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
    log_level = LaunchConfiguration('log_level')
    actions: list[object] = [
        DeclareLaunchArgument(
            'config',
            default_value=str(share / 'config' / 'vehicle.yaml'),
            description='parameter file with a section per node',
        ),
        DeclareLaunchArgument('log_level', default_value='info', description='ROS log level'),
    ]
    for name, (executable, remappings) in GRAPH.items():
        actions.append(
            DeclareLaunchArgument(name, default_value='true', description=f'start the {name} node')
        )
        actions.append(
            Node(
                package=PACKAGE,
                executable=executable,
                name=name,
                parameters=[config],
                remappings=remappings,
                arguments=['--ros-args', '--log-level', log_level],
                output='screen',
                emulate_tty=True,
                condition=IfCondition(LaunchConfiguration(name)),
                # A sensor that fails at start-up exits with status 2 and its reason in the log;
                # the others keep running (the fusion degrades without it).
                respawn=False,
            )
        )
    return LaunchDescription(actions)
