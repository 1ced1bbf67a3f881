"""The rt_fusion graph on the vehicle: sensor nodes, fusion, trajectory planner.

    ros2 launch rt_fusion vehicle.launch.py
    ros2 launch rt_fusion vehicle.launch.py config:=/path/to/my_vehicle.yaml microphone:=false
    ros2 launch rt_fusion vehicle.launch.py emulate:=true overrides:=/path/to/dev.yaml
    ros2 launch rt_fusion vehicle.launch.py respawn:=true   # a node that dies is restarted
    ros2 launch rt_fusion vehicle.launch.py respawn:=true respawn_delay:=3.0   # after 3 s
    ros2 launch rt_fusion vehicle.launch.py respawn:=true warm_restart:=false   # a new process
    ros2 launch rt_fusion vehicle.launch.py respawn:=true standby:=false   # no standby
    ros2 launch rt_fusion vehicle.launch.py dds_profile:=large_frames   # graph over computers
    ros2 launch rt_fusion vehicle.launch.py dds_profile:=none   # the environment's DDS profile

Every node reads its parameters from one YAML file (``config``, default the installed
``config/vehicle.yaml``), then from ``overrides`` if given; a section for a node this graph does
not have (``fusoin:``) stops the launch before anything starts, and a misspelt or out-of-range
parameter stops that node at start-up with its name. The graph itself (nodes, executables,
remappings) is ``rt_fusion/ros/graph.py``, shared with ``replay.launch.py``. Topics: the sensor
nodes publish under their names (``/camera/out/image`` descriptors and shared memory,
``/radar/out/objects``, ``/imu/out/imu``, ``/microphone/out/audio``), the fusion node reads
them and publishes ``/fusion/out/objects`` and ``/fusion/out/odometry``, the planner publishes
``/planner/out/trajectory`` and ``/planner/out/path``. Real-time settings (SCHED_FIFO
priorities, CPU sets, locked memory) are parameters too (``rt.*``); the host must be set up
first (``rt_kernel/README.md``).

``emulate:=true`` runs the same nodes with the same configuration on a machine without the
hardware, each sensor on the next real thing fed with the recordings in ``data`` (default
``../shared/data`` beside the source tree): the Xsens MTi on a pseudo-terminal
(``xsens_emulator``), the ARS408 on a python-can UDP-multicast bus (``can_replay``, which also
answers the configuration), the camera from the dash-cam video, the microphone from an ALSA
``file`` PCM fed with a recorded clip, each looped. Only the device parameters are replaced (and
``rt.require_rt`` and ``rt.cpus``: a development machine has neither PREEMPT_RT nor the
vehicle's CPUs); everything else is the file's.
"""

from __future__ import annotations

import math
import os
import tempfile
import wave
from pathlib import Path

from ament_index_python.packages import get_package_prefix, get_package_share_directory
from launch import LaunchContext, LaunchDescription
from launch.actions import (
    DeclareLaunchArgument,
    ExecuteProcess,
    OpaqueFunction,
    RegisterEventHandler,
)
from launch.event_handlers import OnProcessIO
from launch.substitutions import LaunchConfiguration

from rt_fusion.core import keeper
from rt_fusion.core.linux import can_udp_port
from rt_fusion.ros import graph

GROUP = '239.74.163.2'
DATA = Path(__file__).resolve().parents[1].parent / 'shared' / 'data'
RECORDINGS = {
    'video': 'camera/solidWhiteRight.mp4',
    'candump': 'radar_ars408/candump-2026-06-24_154259.log',
    'imu_bag': 'imu_radar_rio/ti_mmwave_rospkg_demo_ros2',
    'audio': 'audio/car_engine.wav',
}


def _true(context: LaunchContext, name: str) -> bool:
    return LaunchConfiguration(name).perform(context).lower() in ('true', '1', 'yes')


def _seconds(context: LaunchContext, name: str) -> float:
    text = LaunchConfiguration(name).perform(context)
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value >= 0.0):
        raise ValueError(f'launch argument {name}: {text!r} is not a duration >= 0 s')
    return value


def _dds_profile(context: LaunchContext) -> dict[str, str]:
    """The environment that gives every node the Fast DDS profile of ``dds_profile``."""
    text = LaunchConfiguration('dds_profile').perform(context)
    config_dir = Path(get_package_share_directory(graph.PACKAGE)) / 'config'
    try:
        return graph.dds_profile_env(text, config_dir)
    except ValueError as err:
        raise ValueError(f'launch argument {err}') from err


def _tool(name: str) -> str:
    return str(Path(get_package_prefix(graph.PACKAGE)) / 'lib' / graph.PACKAGE / name)


def _emulation(context: LaunchContext) -> tuple[list[object], dict[str, dict[str, object]]]:
    """The emulator processes and the device parameters that point the nodes at them."""
    data = Path(LaunchConfiguration('data').perform(context))
    missing = [rel for rel in RECORDINGS.values() if not (data / rel).exists()]
    if missing:
        raise FileNotFoundError(f'emulate:=true needs the recordings in {data}: missing {missing}')
    tmp = Path(tempfile.mkdtemp(prefix='rt_fusion_emulate_'))
    port = can_udp_port()
    link = tmp / 'ttyMTi'
    audio = data / RECORDINGS['audio']
    with wave.open(str(audio)) as w:
        rate, channels = w.getframerate(), w.getnchannels()
        (tmp / 'mic.raw').write_bytes(w.readframes(w.getnframes()))
    fifo = tmp / 'mic.fifo'
    os.mkfifo(fifo)
    (tmp / '.asoundrc').write_text(
        'pcm.rtf_emulated {\n  type file\n  slave.pcm "null"\n  file "/dev/null"\n'
        f'  infile "{fifo}"\n  format "raw"\n}}\n'
    )
    procs = [
        ExecuteProcess(
            cmd=[
                _tool('rt_fusion_xsens_emulator'),
                *('--bag', str(data / RECORDINGS['imu_bag']), '--link', str(link)),
                *('--speed', '1', '--linger', '3600', '--loop'),
            ],
            name='xsens_emulator',
            output='screen',
        ),
        ExecuteProcess(
            cmd=[
                _tool('rt_fusion_can_replay'),
                str(data / RECORDINGS['candump']),
                *('-i', 'udp_multicast', '-c', GROUP, '--port', str(port)),
                *('--answer-config', '0', '--wait-config', '60', '--quiet', '--loop'),
            ],
            name='can_replay',
            output='screen',
        ),
        ExecuteProcess(
            cmd=[
                _tool('rt_fusion_alsa_feeder'),
                *(str(fifo), str(tmp / 'mic.raw')),
                *('--pace-bytes-per-s', str(rate * channels * 2), '--loop'),
            ],
            name='alsa_feeder',
            output='screen',
        ),
    ]
    cpus = list(range(os.cpu_count() or 1))
    params: dict[str, dict[str, object]] = {
        'camera': {'source': 'file', 'file': str(data / RECORDINGS['video']), 'loop': True},
        'radar': {'interface': 'udp_multicast', 'channel': GROUP, 'port': port},
        'imu': {'port': str(link)},
        'microphone': {'device': 'rtf_emulated', 'sample_rate': rate, 'channels': channels},
        # The vehicle's CPU plan and PREEMPT_RT are not this machine's: same priorities, any CPU.
        'fusion': {'rt': {'require_rt': False, 'cpus': cpus}},
        'planner': {'rt': {'require_rt': False, 'cpus': cpus}},
    }
    return procs, {'_home': {'dir': str(tmp)}, **params}


def _graph(context: LaunchContext) -> list[object]:
    config = LaunchConfiguration('config').perform(context)
    overrides = LaunchConfiguration('overrides').perform(context)
    graph.check_config(config)
    if overrides:
        graph.check_config(overrides)
    actions: list[object] = []
    emulated: dict[str, dict[str, object]] = {}
    if _true(context, 'emulate'):
        actions, emulated = _emulation(context)
    home = emulated.pop('_home', {}).get('dir')
    log_level = LaunchConfiguration('log_level').perform(context)
    node_env = _dds_profile(context)
    respawn = _true(context, 'respawn')
    respawn_delay = _seconds(context, 'respawn_delay')
    if respawn and _true(context, 'warm_restart'):
        # Each node's process keeps its imports and a standby with ROS up, which takes over
        # when the node dies (rt_fusion/core/keeper.py); launch respawns the process when that
        # dies itself.
        node_env = {
            **node_env,
            keeper.ENV: str(respawn_delay),
            keeper.STANDBY_ENV: '1' if _true(context, 'standby') else '0',
        }
    nodes: dict[str, object] = {}
    frames = graph.frames(context)
    for node in graph.VEHICLE:
        if not _true(context, node.name):
            continue
        parameters: list[object] = [config]
        if overrides:
            parameters.append(overrides)
        if node.name in emulated:
            parameters.append(emulated[node.name])
        if not respawn:  # the bring-up node configures and activates it
            parameters.append(graph.MANAGED)
        parameters.append(frames.get(node.name, {}))  # frame_prefix
        nodes[node.name] = graph.launch_node(
            node,
            parameters,
            arguments=['--ros-args', '--log-level', log_level],
            # A node that fails at start-up is named by the bring-up node, which ends the graph
            # unless the node is listed in ``optional`` (the fusion then degrades without it).
            # respawn:=true restarts a node that dies (tools/chaos.py measures how fast it is
            # back); each node then brings itself up, and the bring-up node only waits for them.
            respawn=respawn,
            respawn_delay=respawn_delay,
            additional_env={
                **node_env,
                **({'HOME': str(home)} if node.name == 'microphone' and home else {}),
            }
            or None,
        )
    # The live view, when asked: optional (without foxglove-sdk the graph runs on).
    viewer = graph.viewer_node(context, [graph.MANAGED] if not respawn else [])
    nodes.update(viewer)
    # Consumers first: configured and activated before the sensors stream into them.
    order = [n for n in ('calibration', 'fusion', 'planner', 'viewer') if n in nodes]
    order += [n for n in nodes if n not in order]
    optional = [n for n in LaunchConfiguration('optional').perform(context).split(',') if n]
    optional += list(viewer)
    unknown = sorted(set(optional) - set(nodes))
    if unknown:
        raise ValueError(f'launch argument optional: {unknown} are not nodes of this graph')
    managed = graph.brought_up(
        nodes, order=order, optional=optional, drive=not respawn, respawn=respawn
    )
    if emulated and 'imu' in nodes:
        # The IMU node opens the emulator's pseudo-terminal: start it once that exists.
        imu = nodes.pop('imu')
        managed.remove(imu)
        started: list[bool] = []

        def on_ready(event: object) -> list[object] | None:
            if started or b'READY' not in getattr(event, 'text', b''):
                return None
            started.append(True)
            return [imu]

        actions.append(
            RegisterEventHandler(OnProcessIO(target_action=actions[0], on_stdout=on_ready))
        )
    return graph.in_namespace(context, actions + managed)


def generate_launch_description() -> LaunchDescription:
    """``ros2 launch`` entry point."""
    share = Path(get_package_share_directory(graph.PACKAGE))
    actions: list[object] = [
        DeclareLaunchArgument(
            'config',
            default_value=str(share / 'config' / 'vehicle.yaml'),
            description='parameter file with a section per node',
        ),
        DeclareLaunchArgument(
            'overrides', default_value='', description='a second parameter file, applied after'
        ),
        DeclareLaunchArgument(
            'emulate',
            default_value='false',
            description='no hardware: every sensor on an emulator fed with the recordings',
        ),
        DeclareLaunchArgument(
            'data', default_value=str(DATA), description='the recordings (emulate:=true)'
        ),
        DeclareLaunchArgument('log_level', default_value='info', description='ROS log level'),
        DeclareLaunchArgument(
            'respawn',
            default_value='false',
            description='restart a node that dies (a node failing at start-up is restarted too)',
        ),
        DeclareLaunchArgument(
            'respawn_delay',
            default_value='0.0',
            description='seconds before a dead node is restarted (respawn:=true)',
        ),
        DeclareLaunchArgument(
            'warm_restart',
            default_value='true',
            description='with respawn:=true, a node that dies is replaced by a fork of its '
            "process's already-imported modules, without a new interpreter; false: launch "
            'starts a new process',
        ),
        DeclareLaunchArgument(
            'standby',
            default_value='true',
            description='with warm_restart, each node has a standby forked in advance, with a '
            'DDS participant the others have discovered, whose inputs flow within milliseconds '
            'of taking over (a node forked at its death: 0.7-1.4 s); false: forked at the death',
        ),
        DeclareLaunchArgument(
            'dds_profile',
            default_value='vehicle',
            description='a Fast DDS XML profile for every node: a path, vehicle (the shipped '
            'config/fastdds_vehicle.xml, fastrtps_vehicle.xml up to Jazzy: a restarted node is '
            'discovered within 0.5 s, a lost sample repaired within 0.1 s), or large_frames '
            '(the same, plus 4 MiB socket buffers for full frames that cross computers); '
            "none: the environment's own (FASTDDS_DEFAULT_PROFILES_FILE) or Fast DDS's "
            'defaults',
        ),
        DeclareLaunchArgument(
            'optional',
            default_value='',
            description='nodes the graph may run without, comma-separated (camera,microphone): '
            'one that fails at start-up is named and left out, the fusion degrading without '
            'it; any other node that fails ends the graph',
        ),
        graph.declare_namespace(),
        graph.declare_frame_prefix(),
        *graph.declare_viewer(),
    ]
    for node in graph.VEHICLE:
        actions.append(
            DeclareLaunchArgument(
                node.name, default_value='true', description=f'start the {node.name} node'
            )
        )
    actions.append(OpaqueFunction(function=_graph))
    return LaunchDescription(actions)
