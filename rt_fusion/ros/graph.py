"""The rt_fusion graph, described once: nodes, executables, topics and how they connect.

``launch/vehicle.launch.py`` (sensor nodes) and ``launch/replay.launch.py`` (a bag instead of
the sensors) build on this table; the node names are the sections of the parameter files, which
are checked against it before anything starts (a misspelt section is an error, not a node on its
defaults).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from rt_fusion.ros import params_file

PACKAGE = 'rt_fusion'


@dataclasses.dataclass(frozen=True)
class GraphNode:
    """One node of the graph: its name (the YAML section), executable and remappings."""

    name: str
    executable: str
    remappings: tuple[tuple[str, str], ...] = ()
    sensor: bool = False


CAMERA_TOPIC = '/camera/out/image'
RADAR_TOPIC = '/radar/out/objects'
IMU_TOPIC = '/imu/out/imu'
SPEED_TOPIC = '/vehicle/speed'  # the vehicle's wheel speed (std_msgs/Float64, from its CAN bus)
AUDIO_TOPIC = '/microphone/out/audio'
OBJECTS_TOPIC = '/fusion/out/objects'
ODOMETRY_TOPIC = '/fusion/out/odometry'

FUSION = GraphNode(
    'fusion',
    'fusion_node',
    (
        ('~/in/camera', CAMERA_TOPIC),
        ('~/in/imu', IMU_TOPIC),
        ('~/in/radar', RADAR_TOPIC),
        ('~/in/speed', SPEED_TOPIC),
        ('~/in/audio', AUDIO_TOPIC),
    ),
)
# The route to follow (nav_msgs/Path in the odom frame), from a route planner or a map; the
# closed-loop simulator publishes the scenario's lane.
ROUTE_TOPIC = '/route/path'
PLANNER = GraphNode(
    'planner',
    'trajectory_node',
    (
        ('~/in/objects', OBJECTS_TOPIC),
        ('~/in/odometry', ODOMETRY_TOPIC),
        ('~/in/path', ROUTE_TOPIC),
    ),
)
SENSORS = (
    GraphNode('camera', 'camera_node', sensor=True),
    GraphNode('radar', 'radar_node', (('~/in/odometry', ODOMETRY_TOPIC),), sensor=True),
    GraphNode('imu', 'imu_node', sensor=True),
    GraphNode('microphone', 'microphone_node', sensor=True),
)
REPLAY = GraphNode('replay', 'replay_node')
# The closed-loop simulator: a scenario's sensors, its ego driven by the planner's trajectories.
# It publishes where the sensor nodes and a route planner would (CAMERA_TOPIC, ..., ROUTE_TOPIC).
SIM = GraphNode('sim', 'sim_node', (('~/in/trajectory', '/planner/out/trajectory'),))

VEHICLE = (*SENSORS, FUSION, PLANNER)
REPLAYED = (REPLAY, FUSION, PLANNER)
CLOSED_LOOP = (SIM, FUSION, PLANNER)
# Every node name a parameter file of this package may have a section for (fusion_rclpy: the
# conventional-graph fusion the demo measures beside ours).
KNOWN_SECTIONS = (*(n.name for n in (*VEHICLE, REPLAY, SIM)), 'fusion_rclpy')


def check_config(path: str | Path, nodes: Iterable[GraphNode] | None = None) -> dict[str, Any]:
    """Loads a graph's parameter file, failing on a section for a node the graph lacks.

    Raises:
        params_file.ParameterFileError: one line naming the file, the section and the nearest
            node name.
    """
    names = [n.name for n in nodes] if nodes is not None else list(KNOWN_SECTIONS)
    return params_file.check_sections_known(path, names)


def launch_node(node: GraphNode, parameters: list[Any], **kwargs: Any) -> Any:
    """A launch_ros ``Node`` action for ``node`` (imported here: the core stays launch-free)."""
    from launch_ros.actions import Node  # noqa: PLC0415

    return Node(
        package=PACKAGE,
        executable=node.executable,
        name=node.name,
        parameters=parameters,
        remappings=list(node.remappings),
        output='screen',
        emulate_tty=True,
        **kwargs,
    )
