"""Regression replay: a rosbag2 through the fusion node and the planner, instead of the sensors.

    ros2 launch rt_fusion replay.launch.py bag:=/path/to/bag
    ros2 launch rt_fusion replay.launch.py bag:=/path/to/bag mode:=lockstep rate:=1.0
    ros2 launch rt_fusion replay.launch.py bag:=/path/to/bag loops:=0   # until stopped (a soak)

In ``mode:=lockstep`` each message waits for an acknowledgement on ``ack_topic``; with
``ack_topic:=/fusion/ack`` and the fusion node's ``ack_topic`` set to the same (as
``tools/evaluate.py`` does) the fusion node paces the replay, which makes a run deterministic
on any machine. ``restamp:=false`` keeps the recorded stamps (they then match the bag's truth).

``replay_node`` publishes the recorded sensor topics as the sensor nodes would (camera images
into a shared-memory ring with ``ShmFrame`` descriptors, radar objects, IMU), with their stamps
moved onto the host clock (``restamp``), and the vehicle speed when the bag has it, starting once
the fusion node subscribes. Bags from
``tools/make_scenario.py`` and from ``tools/record.py`` on the vehicle have these topics.
Parameters of fusion and planner come from ``config`` (default the installed
``config/replay.yaml``); a section in it for a node this graph lacks stops the launch. Fusion
and planner are the vehicle graph's own (``rt_fusion/ros/graph.py``, shared with
``vehicle.launch.py``).
"""

from __future__ import annotations

from pathlib import Path

from ament_index_python.packages import get_package_share_directory
from launch import LaunchContext, LaunchDescription
from launch.actions import DeclareLaunchArgument, OpaqueFunction
from launch.substitutions import LaunchConfiguration

from rt_fusion.core.bag import open_reader
from rt_fusion.ros import graph

CAMERA = graph.bag_topic(graph.COMPRESSED_CAMERA_TOPIC)


def generate_launch_description() -> LaunchDescription:
    """``ros2 launch`` entry point."""
    share = Path(get_package_share_directory(graph.PACKAGE))
    replay_params = {
        'bag': LaunchConfiguration('bag'),
        'mode': LaunchConfiguration('mode'),
        'rate': LaunchConfiguration('rate'),
        'restamp': LaunchConfiguration('restamp'),
        'ack_topic': LaunchConfiguration('ack_topic'),
        'start_topic': LaunchConfiguration('start_topic'),
        'loops': LaunchConfiguration('loops'),
        'publish_clock': False,
        'wait_subscribers_s': 30.0,
        'require_subscribers': True,  # a graph that is not there: the replay fails, naming it
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
            'loops', default_value='1', description='passes over the bag (0: until stopped)'
        ),
        DeclareLaunchArgument(
            'audio',
            default_value='false',
            description="replay the bag's microphone blocks into the fusion's hearing (true)",
        ),
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
        DeclareLaunchArgument(
            'radar_type',
            default_value='objects',
            description="the radar as rt_fusion's RadarObjects (objects) or as a third-party "
            "driver's radar_msgs/RadarTracks (tracks), replayed so and fused so",
        ),
        DeclareLaunchArgument(
            'calibration',
            default_value=str(share / 'config' / 'calibration' / 'scenario.yaml'),
            description="the vehicle's sensor mountings, published on /tf_static",
        ),
        DeclareLaunchArgument(
            'use_sim_time',
            default_value='false',
            description="every node on the replay's /clock (the recorded time; restamp off)",
        ),
        graph.declare_namespace(),
        graph.declare_frame_prefix(),
        *graph.declare_viewer(),
    ]

    def nodes(context: LaunchContext) -> list[object]:
        config = LaunchConfiguration('config').perform(context)
        sections = graph.check_config(config)  # one file may serve the demo's graph too
        # A surround rig: the fusion's extra cameras (its ``cameras``), recorded beside the
        # front camera's topic as /camera_<name>/... (tools/make_scenario.py --cameras 4).
        extra = graph.fusion_cameras(sections)
        # Lists of strings cannot hold a substitution (launch joins them): resolved here.
        camera = LaunchConfiguration('camera_topic').perform(context)
        bag = graph.bag_topic
        rig = {camera: graph.CAMERA_TOPIC} | {
            graph.rig_topic(camera, n): graph.camera_topic(n) for n in extra
        }
        listed = [bag(graph.IMU_TOPIC), bag(graph.RADAR_TOPIC), *rig]
        # The vehicle speed when the bag has it, and the microphone (the fusion's hearing) asked.
        with open_reader(LaunchConfiguration('bag').perform(context)) as reader:
            recorded = {c.topic: c.msgtype for c in reader.connections}
            # ... and the camera's intrinsics (the fusion's single source of them)
            extras = (bag(graph.SPEED_TOPIC), bag(graph.CAMERA_INFO_TOPIC))
            listed += [t for t in extras if t in recorded]
            # A bag of an unstamped wheel speed (std_msgs/Float64, before TwistStamped).
            old = recorded.get(bag(graph.SPEED_TOPIC)) == 'std_msgs/msg/Float64'
            # Off by default (a bag's own choice of topics); the demo and the evaluation ask.
            audio = LaunchConfiguration('audio').perform(context).lower() == 'true'
            audio = audio and bag(graph.AUDIO_TOPIC) in recorded
        topics = {'topics': [*listed, *([bag(graph.AUDIO_TOPIC)] if audio else [])]}
        # Frames and microphone blocks through shared memory, as the sensor nodes send them.
        shm_map = [f'{recorded}->{live}' for recorded, live in rig.items()]
        if audio:
            shm_map.append(f'{bag(graph.AUDIO_TOPIC)}->{graph.AUDIO_TOPIC}')
        shm = {'shm': shm_map}
        radar_type = LaunchConfiguration('radar_type').perform(context)
        if radar_type not in ('objects', 'tracks'):
            raise ValueError(f'radar_type {radar_type!r}: objects or tracks')
        radar = {'radar_tracks': radar_type == 'tracks'}
        # use_sim_time: every node on the replay's /clock (the recorded time), the stamps as
        # recorded (restamping would move them off that clock).
        sim_time = LaunchConfiguration('use_sim_time').perform(context).lower() == 'true'
        clock = {'use_sim_time': sim_time, **graph.MANAGED}
        replay = {'publish_clock': True, 'restamp': False} if sim_time else {}
        calibration = {'calibration': LaunchConfiguration('calibration')}
        fusion = {
            'radar_type': radar_type,
            'speed_type': 'float64' if old else 'twist',
            **calibration,  # the mountings: the same file as /tf_static's
        }
        frames = graph.frames(context)  # frame_prefix
        nodes = {
            graph.CALIBRATION.name: graph.launch_node(
                graph.CALIBRATION, [calibration, clock, frames.get('calibration', {})]
            ),
            graph.FUSION.name: graph.launch_node(
                graph.with_cameras(graph.FUSION, extra),
                [config, fusion, clock, frames.get('fusion', {})],
            ),
            graph.PLANNER.name: graph.launch_node(
                graph.PLANNER, [config, clock, frames.get('planner', {})]
            ),
            # The live view, when asked (optional: without foxglove-sdk the graph runs on).
            **graph.viewer_node(context, [clock]),
            graph.REPLAY.name: graph.launch_node(
                graph.REPLAY, [replay_params, topics, shm, radar, replay, clock]
            ),
        }
        # Configured and activated in this order (the consumers first, the replay last).
        optional = [graph.VIEWER.name] if graph.VIEWER.name in nodes else []
        return graph.in_namespace(
            context, graph.brought_up(nodes, order=list(nodes), optional=optional)
        )

    actions.append(OpaqueFunction(function=nodes))
    return LaunchDescription(actions)
