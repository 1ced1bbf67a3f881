"""The rt_fusion graph, described once: nodes, executables, topics and how they connect.

``launch/vehicle.launch.py`` (sensor nodes) and ``launch/replay.launch.py`` (a bag instead of
the sensors) build on this table; the node names are the sections of the parameter files, which
are checked against it before anything starts (a misspelt section is an error, not a node on its
defaults).
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from rt_fusion.ros import params_file

PACKAGE = 'rt_fusion'

#: The shipped Fast DDS profiles (``dds_profile``), each in two dialects: Fast DDS 3's
#: (``config/fastdds_<name>.xml``: Kilted on) and Fast DDS 2's (``config/fastrtps_<name>.xml``:
#: Humble to Jazzy). Each refuses the other's spelling of the writer times.
DDS_PROFILES = ('vehicle', 'large_frames')
FAST_DDS_2_DISTROS = ('humble', 'iron', 'jazzy')


def fast_dds_major() -> int:
    """The Fast DDS under this ROS 2: 2 up to Jazzy (it reads FASTRTPS_DEFAULT_PROFILES_FILE), 3
    from Kilted on (FASTDDS_DEFAULT_PROFILES_FILE; Kilted's rmw also loads a
    FASTRTPS_DEFAULT_PROFILES_FILE, so only one of them may be set). From ``ROS_DISTRO``, else
    from rclpy's version (Jazzy 7.x, Kilted 9.x)."""
    distro = os.environ.get('ROS_DISTRO', '').lower()
    if distro:
        return 2 if distro in FAST_DDS_2_DISTROS else 3
    try:
        major = int(importlib.metadata.version('rclpy').split('.', 1)[0])
    except (importlib.metadata.PackageNotFoundError, ValueError):
        return 3
    return 2 if major <= 8 else 3


def dds_profile_env(profile: str, config_dir: Path) -> dict[str, str]:
    """The environment that gives a process the Fast DDS profile ``profile``: a shipped one by
    name (its dialect for this ROS 2's Fast DDS, from ``config_dir``) or a file of one's own, in
    the variable this Fast DDS reads; ``none`` (or '') gives nothing (the environment's own, or
    Fast DDS's defaults).

    Raises:
        ValueError: the file does not exist.
    """
    if profile in ('', 'none'):  # 'none': a command line cannot give an empty value
        return {}
    two = fast_dds_major() == 2
    if profile in DDS_PROFILES:
        path = config_dir / f'{"fastrtps" if two else "fastdds"}_{profile}.xml'
    else:
        path = Path(profile)
    if not path.is_file():
        raise ValueError(f'dds_profile {profile!r}: no such file ({path})')
    var = 'FASTRTPS_DEFAULT_PROFILES_FILE' if two else 'FASTDDS_DEFAULT_PROFILES_FILE'
    return {var: str(path.resolve())}


@dataclasses.dataclass(frozen=True)
class GraphNode:
    """One node of the graph: its name (the YAML section), executable and remappings."""

    name: str
    executable: str
    remappings: tuple[tuple[str, str], ...] = ()
    sensor: bool = False


# The graph's topics are relative: a node in namespace /car1 (``namespace:=car1`` on the launch
# files) reads and writes /car1/camera/out/image, so two graphs share a machine. Only the
# system-wide ones are absolute: /tf, /tf_static, /diagnostics and /clock (as in every ROS stack).
# A bag recorded in the root namespace holds them as ``/`` + name (:func:`bag_topic`).
CAMERA_TOPIC = 'camera/out/image'
RADAR_TOPIC = 'radar/out/objects'
IMU_TOPIC = 'imu/out/imu'
# The vehicle's wheel speed (geometry_msgs/TwistStamped, from its CAN bus; std_msgs/Float64 too).
SPEED_TOPIC = 'vehicle/speed'
AUDIO_TOPIC = 'microphone/out/audio'
CAMERA_INFO_TOPIC = 'camera/out/camera_info'  # sensor_msgs/CameraInfo: the camera's intrinsics
OBJECTS_TOPIC = 'fusion/out/objects'
ODOMETRY_TOPIC = 'fusion/out/odometry'
TRAJECTORY_TOPIC = 'planner/out/trajectory'
# A bag's camera: the generator's JPEG frames, or raw images a recorder wrote.
COMPRESSED_CAMERA_TOPIC = f'{CAMERA_TOPIC}/compressed'
SHM_SUFFIX = '/shm'  # a shared-memory publisher's descriptors: ``<topic>/shm`` (ShmFrame)
DIAGNOSTICS_TOPIC = '/diagnostics'  # diagnostic_msgs, as the ROS 2 diagnostics stack reads it
CLOCK_TOPIC = '/clock'  # rosgraph_msgs/Clock (use_sim_time)
TF_TOPIC = '/tf'  # tf2_msgs/TFMessage: odom -> base_link, from the fusion's odometry
TF_STATIC_TOPIC = '/tf_static'  # tf2_msgs/TFMessage, latched: base_link -> every sensor frame
# Lock-step runs: the fusion node acknowledges each input it took in (std_msgs/UInt64).
ACK_TOPIC = 'fusion/ack'
AUDIO_EVENTS_TOPIC = 'fusion/out/audio_events'  # rt_fusion_msgs/AudioEvent (the hearing)
# viewer_node's Foxglove channels (not ROS topics: what Foxglove's panels subscribe to).
# The camera keeps its topic's name (a recording holds sensor_msgs/Image there): one Image panel
# of the layout shows the live view and a recording alike.
VIEWER_CAMERA = '/' + CAMERA_TOPIC
VIEWER_CAMERA_BOXES = f'{VIEWER_CAMERA}/annotations'  # the tracks drawn on the camera
VIEWER_TRACKS = '/tracks'
VIEWER_RADAR = '/radar'
VIEWER_PLAN = '/plan'
VIEWER_TF = '/tf'
VIEWER_AUDIO = '/audio_events'
VIEWER_HEALTH = '/health'
# What the layout's 3D panel shows of a recording (tools/record.py): the fusion's and the
# planner's visualization_msgs/MarkerArray (``~/out/markers`` of the nodes fusion and planner).
RECORDED_SCENE = ('/fusion/out/markers', '/planner/out/markers')
VIEWER_CHANNELS = (
    VIEWER_CAMERA,
    VIEWER_CAMERA_BOXES,
    VIEWER_TRACKS,
    VIEWER_RADAR,
    VIEWER_PLAN,
    VIEWER_TF,
    VIEWER_AUDIO,
    VIEWER_HEALTH,
)

FUSION = GraphNode(
    'fusion',
    'fusion_node',
    (
        ('~/in/camera', CAMERA_TOPIC),
        ('~/in/camera_info', CAMERA_INFO_TOPIC),
        ('~/in/imu', IMU_TOPIC),
        ('~/in/radar', RADAR_TOPIC),
        ('~/in/speed', SPEED_TOPIC),
        ('~/in/audio', AUDIO_TOPIC),
    ),
)
# The route to follow (nav_msgs/Path in the odom frame), from a route planner or a map; the
# closed-loop simulator publishes the scenario's lane.
ROUTE_TOPIC = 'route/path'
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
# The vehicle's calibration file on /tf_static (the sensor frames for RViz, Foxglove, tf2).
CALIBRATION = GraphNode('calibration', 'calibration_node')
# The closed-loop simulator: a scenario's sensors, its ego driven by the planner's trajectories.
# It publishes where the sensor nodes and a route planner would (CAMERA_TOPIC, ..., ROUTE_TOPIC).
SIM = GraphNode('sim', 'sim_node', (('~/in/trajectory', TRAJECTORY_TOPIC),))

# Brings the others up in order and names the one that fails (rt_fusion/ros/bringup.py).
BRINGUP = GraphNode('bringup', 'bringup_node')
VIEWER = GraphNode('viewer', 'viewer_node')  # viewer:=true (Foxglove WebSocket)

VEHICLE = (*SENSORS, FUSION, PLANNER, CALIBRATION)
REPLAYED = (REPLAY, FUSION, PLANNER, CALIBRATION)
CLOSED_LOOP = (SIM, FUSION, PLANNER, CALIBRATION)
# Every node name a parameter file of this package may have a section for (fusion_rclpy: the
# conventional-graph fusion the demo measures beside ours).
KNOWN_SECTIONS = (*(n.name for n in (*VEHICLE, REPLAY, SIM, BRINGUP, VIEWER)), 'fusion_rclpy')
#: What a node brought up by the bring-up node is given: it waits to be configured.
MANAGED = {'autostart': False}


def camera_topic(name: str) -> str:
    """The live topic (ShmPublisher base) of a rig camera: CAMERA_TOPIC for the front one,
    ``camera_<name>/out/image`` for the others (fusion_node's ``cameras``)."""
    return CAMERA_TOPIC if name == 'front' else f'camera_{name}/out/image'


def bag_topic(topic: str) -> str:
    """A graph topic as a bag recorded in the root namespace names it (``/`` + the name)."""
    return topic if topic.startswith('/') else '/' + topic


def rig_topic(front: str, name: str) -> str:
    """A rig camera's topic in a bag, from the front camera's (``/camera/...`` becomes
    ``/camera_<name>/...``: tools/make_scenario.py --cameras 4).

    Raises:
        ValueError: ``front`` is not under ``/camera/``.
    """
    prefix = bag_topic(CAMERA_TOPIC).rsplit('/out/', 1)[0] + '/'
    if not front.startswith(prefix):
        raise ValueError(f'camera_topic {front}: extra cameras need it under {prefix}')
    return front.replace(prefix, f'{prefix[:-1]}_{name}/', 1)


def start_topic(tool: str) -> str:
    """The latched topic on which a tool's recorder tells a replay or simulator to start
    (std_msgs/UInt64, the run's number): ``<tool>/start``, in the graph's namespace."""
    return f'{tool}/start'


def fusion_cameras(sections: dict[str, Any]) -> tuple[str, ...]:
    """The extra cameras that a parameter file's fusion section names (its ``cameras``)."""
    for pattern, values in sections.items():
        if pattern.lstrip('/').rsplit('/', 1)[-1] == FUSION.name and isinstance(values, dict):
            return tuple(values.get('cameras') or ())
    return ()


def with_cameras(node: GraphNode, cameras: Iterable[str]) -> GraphNode:
    """The fusion node with its extra cameras' inputs (``~/in/camera_<name>``) connected."""
    extra = tuple((f'~/in/camera_{n}', camera_topic(n)) for n in cameras)
    return dataclasses.replace(node, remappings=node.remappings + extra)


def check_config(path: str | Path, nodes: Iterable[GraphNode] | None = None) -> dict[str, Any]:
    """Loads a graph's parameter file, failing on a section for a node the graph lacks.

    Raises:
        params_file.ParameterFileError: one line naming the file, the section and the nearest
            node name.
    """
    names = [n.name for n in nodes] if nodes is not None else list(KNOWN_SECTIONS)
    return params_file.check_sections_known(path, names)


def check_namespace(namespace: str) -> str:
    """``namespace`` as an absolute ROS namespace ('' for none).

    Raises:
        ValueError: not a valid namespace (the reason, as rclpy gives it).
    """
    from rclpy.exceptions import InvalidNamespaceException  # noqa: PLC0415
    from rclpy.validate_namespace import validate_namespace  # noqa: PLC0415

    name = namespace.strip().strip('/')
    if not name:
        return ''
    try:
        validate_namespace('/' + name)
    except InvalidNamespaceException as err:
        raise ValueError(
            f'launch argument namespace: {namespace!r} is not a namespace: {err}'
        ) from err
    return '/' + name


def declare_namespace() -> Any:
    """The launch argument ``namespace``: the whole graph (topics, services, shared-memory rings)
    under it."""
    from launch.actions import DeclareLaunchArgument  # noqa: PLC0415

    return DeclareLaunchArgument(
        'namespace',
        default_value='',
        description='put every node, topic and shared-memory ring under this namespace '
        '(car1: /car1/fusion/out/objects); /tf, /tf_static and /diagnostics stay global',
    )


def declare_frame_prefix() -> Any:
    """The launch argument ``frame_prefix``: before every TF frame the graph publishes."""
    from launch.actions import DeclareLaunchArgument  # noqa: PLC0415

    return DeclareLaunchArgument(
        'frame_prefix',
        default_value='',
        description='before every TF frame of the graph (car1/: car1/odom -> car1/base_link -> '
        'car1/camera), so namespaced graphs on one machine share /tf and /tf_static',
    )


def frames(context: Any) -> dict[str, dict[str, str]]:
    """Per node, the frame parameters that ``frame_prefix`` sets (none when it is empty)."""
    from launch.substitutions import LaunchConfiguration  # noqa: PLC0415

    prefix = LaunchConfiguration('frame_prefix').perform(context)
    if not prefix:
        return {}
    return {
        CALIBRATION.name: {'frame_prefix': prefix},
        FUSION.name: {'odom_frame': f'{prefix}odom', 'base_frame': f'{prefix}base_link'},
        PLANNER.name: {'frame_id': f'{prefix}odom'},
    }


def in_namespace(context: Any, actions: list[Any]) -> list[Any]:
    """``actions`` under the launch argument ``namespace`` (as they are when it is empty)."""
    from launch.actions import GroupAction  # noqa: PLC0415
    from launch.substitutions import LaunchConfiguration  # noqa: PLC0415
    from launch_ros.actions import PushRosNamespace  # noqa: PLC0415

    namespace = check_namespace(LaunchConfiguration('namespace').perform(context))
    if not namespace:
        return actions
    return [GroupAction([PushRosNamespace(namespace), *actions])]


def launch_node(node: GraphNode, parameters: list[Any], **kwargs: Any) -> Any:
    """A launch_ros ``Node`` action for ``node`` (imported here: the core stays launch-free)."""
    from launch_ros.actions import Node  # noqa: PLC0415

    from rt_fusion.ros import stopping  # noqa: PLC0415

    # SIGINT to the node when the launch process dies, however it dies (rt_fusion.ros.stopping).
    kwargs['additional_env'] = {
        stopping.PARENT_DEATH_ENV: 'SIGINT',
        **(kwargs.get('additional_env') or {}),
    }

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


class GraphFailedError(RuntimeError):
    """A node of a launched graph failed: launch ends the whole graph with status 1."""


def declare_viewer() -> list[Any]:
    """The launch arguments ``viewer`` (true: viewer_node beside the graph, optional in the
    bring-up), ``viewer_port`` and ``viewer_page_port``."""
    from launch.actions import DeclareLaunchArgument  # noqa: PLC0415

    return [
        DeclareLaunchArgument(
            'viewer', default_value='false',
            description='the Foxglove live view (viewer_node; ws://127.0.0.1:<viewer_port>)',
        ),
        DeclareLaunchArgument('viewer_port', default_value='8765', description='its port'),
        DeclareLaunchArgument(
            'viewer_page_port', default_value='8080',
            description='the operator page (http://127.0.0.1:<port>/; -1: none)',
        ),
    ]  # fmt: skip


def viewer_node(context: Any, parameters: list[Any]) -> dict[str, Any]:
    """``{'viewer': its Node action}`` when ``viewer:=true``, else nothing."""
    from launch.substitutions import LaunchConfiguration  # noqa: PLC0415

    if LaunchConfiguration('viewer').perform(context).lower() != 'true':
        return {}
    port = int(LaunchConfiguration('viewer_port').perform(context))
    page = int(LaunchConfiguration('viewer_page_port').perform(context))
    return {VIEWER.name: launch_node(VIEWER, [*parameters, {'port': port, 'page_port': page}])}


def brought_up(
    nodes: dict[str, Any],
    *,
    order: Iterable[str],
    optional: Iterable[str] = (),
    drive: bool = True,
    timeout_s: float = 120.0,
    respawn: bool = False,
) -> list[Any]:
    """The launch actions of ``nodes`` (name → its ``Node`` action, given :data:`MANAGED` when
    ``drive``) with the bring-up node, which configures all of ``order``, then activates all,
    and whose exit with a failure ends the launch. Without ``respawn``, a node that exits with
    an error ends the launch too, naming it (not a graph half up that waits for it)."""
    from launch.actions import RegisterEventHandler  # noqa: PLC0415
    from launch.event_handlers import OnProcessExit  # noqa: PLC0415

    params: dict[str, Any] = {'nodes': list(order), 'drive': drive, 'timeout_s': timeout_s}
    if list(optional):  # launch cannot pass an empty list (no type to give it)
        params['optional'] = list(optional)
    bringup = launch_node(BRINGUP, [params])
    from rt_fusion.ros import stopping  # noqa: PLC0415

    # SIGTERM to the launch (systemd, docker stop) stops every node as Ctrl-C does.
    actions: list[Any] = [stopping.sigterm_as_shutdown(), *nodes.values(), bringup]

    def ended(name: str) -> Any:
        def on_exit(event: Any, context: Any) -> None:
            code = event.returncode
            if code == 0 or context.is_shutdown or (respawn and name != BRINGUP.name):
                return
            # Raised, launch stops every node and exits with status 1 (a Shutdown action
            # would end it with 0, as if all went well).
            if name == BRINGUP.name:
                raise GraphFailedError('the bring-up failed: its line above names the node')
            raise GraphFailedError(f'{name} exited with status {code}: stopping the graph')

        return on_exit

    for name, action in [*nodes.items(), (BRINGUP.name, bringup)]:
        actions.append(
            RegisterEventHandler(OnProcessExit(target_action=action, on_exit=ended(name)))
        )
    return actions
