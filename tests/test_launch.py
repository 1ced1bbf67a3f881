"""The launch files wire real executables, real topics and the shipped parameter files.

The graph tables are read from the files' sources; where launch/launch_ros are installed (make
setup installs them from ../shared/wheels/ros2_launch; on the vehicle they come from apt) the
descriptions are built and ``ros2 launch`` runs the replay graph as real processes.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from rt_fusion.ros import graph
from rt_fusion.ros.harness import launching
from tests.conftest import (
    ROOT,
    VENV,
    Proc,
    ProcGroup,
    log_excerpt,
    make_scenario,
    ros2_cli,
    ros_env,
    shared_file,
)

# Real process graphs: the integration tier (make test-integration).
pytestmark = pytest.mark.integration

ROUTE = graph.ROUTE_TOPIC
SPEED = graph.SPEED_TOPIC

LAUNCH = ROOT / 'launch' / 'vehicle.launch.py'
REPLAY = ROOT / 'launch' / 'replay.launch.py'


def _graph(
    nodes: tuple[graph.GraphNode, ...] = graph.VEHICLE,
) -> dict[str, tuple[str, list[tuple[str, str]]]]:
    return {n.name: (n.executable, list(n.remappings)) for n in nodes}


def _setup_scripts() -> dict[str, str]:
    tree = ast.parse((ROOT / 'packages/rt_fusion/setup.py').read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], 'id', '') == 'NODES':
            return ast.literal_eval(node.value)
    raise AssertionError('NODES not found in setup.py')


def _topics(module: str, kind: str) -> set[str]:
    """A node's ``~/in`` or ``~/out`` topics: in its file, and in its rooms (a node
    ``<name>_node`` keeps them in ``rt_fusion/ros/<name>/``)."""
    files = [ROOT / 'rt_fusion' / 'nodes' / f'{module}.py']
    files += sorted((ROOT / 'rt_fusion' / 'ros' / module.removesuffix('_node')).glob('*.py'))
    source = '\n'.join(f.read_text() for f in files)
    return set(re.findall(rf"'~/{kind}/([a-z_]+)'", source))


def test_every_node_is_an_installed_executable_with_a_config_section() -> None:
    graph = _graph()
    scripts = _setup_scripts()
    config = yaml.safe_load((ROOT / 'config' / 'vehicle.yaml').read_text())
    assert set(graph) == set(config)
    for name, (executable, _remaps) in graph.items():
        assert executable in scripts, f'{name}: {executable} is not a console script'


@pytest.mark.parametrize('nodes', [graph.VEHICLE, graph.CLOSED_LOOP], ids=['vehicle', 'sim'])
def test_every_remapping_joins_an_input_to_an_existing_output(
    nodes: tuple[graph.GraphNode, ...],
) -> None:
    graph = _graph(nodes)
    graph_speed = SPEED
    scripts = _setup_scripts()
    outputs = {
        f'{name}/out/{topic}'  # relative: the graph goes under a launch's namespace whole
        for name, (exe, _) in graph.items()
        for topic in _topics(scripts[exe].split(':')[0].rsplit('.', 1)[1], 'out')
    }
    if 'sim' in graph:  # the simulator publishes where the sensors and a route planner would
        from rt_fusion.nodes import sim_node  # noqa: PLC0415

        outputs |= {sim_node.CAMERA, *sim_node.TYPES, ROUTE}
    for name, (exe, remaps) in graph.items():
        inputs = _topics(scripts[exe].split(':')[0].rsplit('.', 1)[1], 'in')
        for src, dst in remaps:
            assert src.removeprefix('~/in/') in inputs, f'{name}: no input {src}'
            # The vehicle speed comes from the vehicle's own CAN gateway (or a bag), the route
            # from a route planner or a map (the simulator in closed loop), not from us.
            external = dst == graph_speed or (dst == ROUTE and 'sim' not in graph)
            assert dst in outputs or external, f'{name}: {src} -> {dst}, which no node publishes'
    # The fusion node gets every sensor, the planner the fusion's output.
    fusion = dict(graph['fusion'][1])
    assert fusion['~/in/camera'] == 'camera/out/image'
    assert dict(graph['planner'][1])['~/in/objects'] == 'fusion/out/objects'


def _need_launch() -> Path:
    ros2 = VENV / 'bin' / 'ros2'
    if importlib.util.find_spec('launch_ros') is None or not ros2.exists():
        pytest.skip(
            'launch/launch_ros/ros2cli not installed: make setup installs them from '
            '../shared/wheels/ros2_launch, which this machine lacks (no PyPI wheels exist)'
        )
    if not (VENV / 'lib' / 'rt_fusion' / 'replay_node').exists():
        pytest.skip(f'no ament layout in {VENV.name}: run make setup')
    # A description built in this process finds the package's share as `ros2 launch` would
    # (tools do the same: rt_fusion.ros.harness.launching.ament_env), whatever ran before.
    import os  # noqa: PLC0415

    os.environ.update(launching.ament_env(os.environ))
    return ros2


def _vehicle_launch() -> Any:
    """launch/vehicle.launch.py as a module (launch files are not importable by name)."""
    spec = importlib.util.spec_from_file_location('vehicle_launch', LAUNCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_description_builds_where_launch_ros_exists() -> None:
    _need_launch()
    module = _vehicle_launch()
    description = module.generate_launch_description()
    # config, overrides, emulate, data, log_level, respawn, respawn_delay, warm_restart,
    # standby, dds_profile, optional, namespace, frame_prefix, viewer, viewer_port,
    # viewer_page_port, one switch per node, the graph.
    assert len(description.entities) == 16 + len(_graph()) + 1


@pytest.mark.parametrize('text', ['soon', '-1', 'nan'])
def test_a_bad_respawn_delay_is_refused_with_its_name(text: str) -> None:
    _need_launch()
    from launch import LaunchContext  # noqa: PLC0415

    module = _vehicle_launch()
    context = LaunchContext()
    context.launch_configurations['respawn_delay'] = text
    with pytest.raises(ValueError, match='respawn_delay'):
        module._seconds(context, 'respawn_delay')
    context.launch_configurations['respawn_delay'] = '2.5'
    assert module._seconds(context, 'respawn_delay') == 2.5


def test_the_dds_profile_is_given_to_every_node_or_refused_with_its_name(
    tmp_path: Path,
) -> None:
    _need_launch()
    from launch import LaunchContext  # noqa: PLC0415

    module = _vehicle_launch()
    context = LaunchContext()
    for nothing in ('none', ''):  # the environment's own ('none' on a command line)
        context.launch_configurations['dds_profile'] = nothing
        assert module._dds_profile(context) == {}
    default = next(
        a for a in module.generate_launch_description().entities if a.name == 'dds_profile'
    )
    assert default.default_value[0].text == 'vehicle'
    # This distribution's Fast DDS reads one variable, in its own dialect (CI runs both).
    var, prefix = (
        ('FASTRTPS_DEFAULT_PROFILES_FILE', 'fastrtps')
        if graph.fast_dds_major() == 2
        else ('FASTDDS_DEFAULT_PROFILES_FILE', 'fastdds')
    )
    for name in graph.DDS_PROFILES:
        context.launch_configurations['dds_profile'] = name
        env = module._dds_profile(context)
        assert list(env) == [var] and Path(env[var]).name == f'{prefix}_{name}.xml'
        assert Path(env[var]).is_file()
    context.launch_configurations['dds_profile'] = str(tmp_path / 'missing.xml')
    with pytest.raises(ValueError, match='dds_profile'):
        module._dds_profile(context)
    profile = tmp_path / 'p.xml'
    profile.write_text('<dds/>')
    context.launch_configurations['dds_profile'] = str(profile)
    assert module._dds_profile(context) == {var: str(profile.resolve())}


def test_the_replay_launch_feeds_the_same_fusion_and_planner() -> None:
    replay, vehicle = _graph(graph.REPLAYED), _graph()
    scripts = _setup_scripts()
    assert all(exe in scripts for exe, _ in replay.values())
    for name in ('fusion', 'planner'):
        assert replay[name] == vehicle[name]  # the graph under test is the vehicle's
    config = yaml.safe_load((ROOT / 'config' / 'replay.yaml').read_text())
    assert {'fusion', 'planner'} <= set(config)
    for path in (LAUNCH, REPLAY):  # both build on the one description
        assert 'from rt_fusion.ros import graph' in path.read_text()
    # Its replay parameters are valid ones (the dict literal in the file).
    source = REPLAY.read_text()
    for key in ('bag', 'mode', 'rate', 'topics', 'shm', 'restamp', 'publish_clock'):
        assert f"'{key}'" in source
    from rt_fusion.core import params  # noqa: PLC0415
    from rt_fusion.core.replay import ReplayParams  # noqa: PLC0415

    known = {f.name for f in params.fields(ReplayParams)}
    assert {
        'bag',
        'mode',
        'rate',
        'topics',
        'shm',
        'restamp',
        'publish_clock',
        'wait_subscribers_s',
    } <= known


@pytest.mark.slow
def test_ros2_launch_replays_a_generated_bag_into_objects_and_trajectories(
    tmp_path: Path, procs: ProcGroup
) -> None:
    ros2 = _need_launch()
    bag = make_scenario(tmp_path / 'scenario', 'cut_in', 3, 3)
    objects = procs.echo(
        '/fusion/out/objects',
        'rt_fusion_msgs/msg/ObjectArray',
        '--count',
        '20',
        '--quiet',
        '--timeout',
        '180',
    )
    plans = procs.echo(
        '/planner/out/trajectory',
        'rt_fusion_msgs/msg/Trajectory',
        '--count',
        '10',
        '--quiet',
        '--timeout',
        '180',
    )
    # The sensor frames (latched: a listener that comes later still gets them) and the pose.
    static = procs.echo(
        graph.TF_STATIC_TOPIC, 'tf2_msgs/msg/TFMessage', '--count', '1', '--qos', 'latched',
        '--timeout', '180',
    )  # fmt: skip
    tf = procs.echo(graph.TF_TOPIC, 'tf2_msgs/msg/TFMessage', '--count', '20', '--timeout', '180')
    # What RViz and Foxglove read: built only while subscribed (as here).
    detections = procs.echo(
        '/fusion/out/detections', 'vision_msgs/msg/Detection3DArray', '--count', '10',
        '--timeout', '180',
    )  # fmt: skip
    # (20: the lists before the first track is confirmed carry no marker; with the network
    # beside the fusion the camera's first detections come an inference later)
    markers = procs.echo(
        '/fusion/out/markers', 'visualization_msgs/msg/MarkerArray', '--count', '20',
        '--timeout', '180',
    )  # fmt: skip
    plan_markers = procs.echo(
        '/planner/out/markers', 'visualization_msgs/msg/MarkerArray', '--count', '3',
        '--timeout', '180',
    )  # fmt: skip
    # ... and recorded into an MCAP a user replays or reads without ROS (rosbags).
    rec = procs.tool(
        'record.py', '--out', str(tmp_path / 'views'), '--count', '10',
        '/fusion/out/detections:vision_msgs/msg/Detection3DArray', name='record',
    )  # fmt: skip
    rec.read_until('READY', 60)
    env = {'AMENT_PREFIX_PATH': str(VENV)}
    launch = procs.spawn(
        [str(ros2), 'launch', 'rt_fusion', 'replay.launch.py', f'bag:={bag}'],
        'ros2 launch',
        env,
    )
    _, got_objects = objects.messages(deadline_s=200)
    _, got_plans = plans.messages(deadline_s=200)
    assert got_objects['received'] >= 20, '\n'.join(launch.stderr[-30:])
    assert got_plans['received'] >= 10, '\n'.join(launch.stderr[-30:])
    (tf_static,), _ = static.messages(deadline_s=200)
    from rt_fusion.core import calibration  # noqa: PLC0415

    cal = calibration.load(ROOT / 'config' / 'calibration' / 'scenario.yaml')
    got = {t['child_frame_id']: t for t in tf_static['transforms']}
    assert sorted(got) == sorted(cal.frames())
    for m in cal.sensors:  # equal to the file
        t = got[m.frame]
        assert t['header']['frame_id'] == 'base_link'
        xyz = t['transform']['translation']
        assert (xyz['x'], xyz['y'], xyz['z']) == pytest.approx((m.x, m.y, m.z))
        q = t['transform']['rotation']
        assert (q['w'], q['x'], q['y'], q['z']) == pytest.approx(m.quaternion())
    arrays, _ = detections.messages(deadline_s=200)
    dets = [d for a in arrays for d in a['detections']]
    assert dets and all(d['header']['frame_id'] == 'base_link' for d in dets)
    hyp = [d['results'][0] for d in dets]
    assert {h['hypothesis']['class_id'] for h in hyp} <= {'car', 'truck', 'pedestrian', 'unknown',
        'bicycle', 'motorcycle', 'static', 'emergency_vehicle'}  # fmt: skip
    xx = {round(h['pose']['covariance'][0], 6) for h in hyp}
    assert min(xx) > 0 and len(xx) > 1, xx  # present, and varying with the tracks
    assert rec.wait(200) == 0, rec.tail()
    from rt_fusion.core.bag import iter_messages  # noqa: PLC0415

    stored = [m.msg for m in iter_messages(tmp_path / 'views', ['/fusion/out/detections'])]
    assert len(stored) >= 10
    cov = {round(float(d.results[0].pose.covariance[0]), 6) for m in stored for d in m.detections}
    assert min(cov) > 0 and len(cov) > 1, cov
    boxes, _ = markers.messages(deadline_s=200)
    kinds = {m['ns'] for b in boxes for m in b['markers']}
    assert kinds == {'box', 'label', 'velocity'}, kinds
    plans_drawn, _ = plan_markers.messages(deadline_s=200)
    lines = [m for b in plans_drawn for m in b['markers']]
    assert {m['ns'] for m in lines} == {'plan'} and all(len(m['points']) > 2 for m in lines)
    poses, got_tf = tf.messages(deadline_s=200)
    assert got_tf['received'] >= 20
    odom = [t for msg in poses for t in msg['transforms']]
    assert {(t['header']['frame_id'], t['child_frame_id']) for t in odom} == {
        ('odom', 'base_link')
    }
    assert len({(t['header']['stamp']['sec'], t['header']['stamp']['nanosec']) for t in odom}) > 10
    # ros2 launch takes SIGINT as the terminal's: its nodes get SIGTERM after 5 s, so it needs
    # more than that on a loaded machine (it was SIGKILLed at a 5 s deadline).
    launch.stop(timeout_s=60.0)
    assert launch.popen.returncode == 0, '\n'.join(
        ['still running at the deadline:', *launch.leftover, *launch.stderr[-30:]]
    )


@pytest.mark.slow
def test_use_sim_time_runs_the_graph_on_the_replay_s_clock(
    tmp_path: Path, procs: ProcGroup
) -> None:
    """use_sim_time:=true: the replay publishes /clock with the recorded time and keeps the
    recorded stamps, and every node runs on that clock: objects and plans come out, stamped in
    the bag's time (the generator's timeline starts in 2023), not today's."""
    from rt_fusion.core.scenario.generate import T0_NS  # noqa: PLC0415

    ros2 = _need_launch()
    bag = make_scenario(tmp_path / 'scenario', 'cut_in', 3, 7)
    clock = procs.echo('/clock', 'rosgraph_msgs/msg/Clock', '--count', '5', '--timeout', '180')
    objects = procs.echo(
        '/fusion/out/objects', 'rt_fusion_msgs/msg/ObjectArray', '--count', '10',
        '--timeout', '180',
    )  # fmt: skip
    launch = procs.spawn(
        [str(ros2), 'launch', 'rt_fusion', 'replay.launch.py', f'bag:={bag}',
         'use_sim_time:=true'],
        'ros2 launch', {'AMENT_PREFIX_PATH': str(VENV)},
    )  # fmt: skip
    ticks, _ = clock.messages(deadline_s=200)
    lists, got = objects.messages(deadline_s=200)
    assert got['received'] >= 10, launch.tail()
    end = T0_NS + 10 * 10**9
    for t in [c['clock'] for c in ticks] + [m['header']['stamp'] for m in lists]:
        assert T0_NS <= t['sec'] * 10**9 + t['nanosec'] <= end, t
    param = ros2_cli(
        ros2, ['param', 'get', '/fusion', 'use_sim_time'],
        {**procs.env, 'AMENT_PREFIX_PATH': str(VENV)},
    )  # fmt: skip
    assert 'True' in param.stdout, param.stdout + param.stderr
    launch.stop(timeout_s=60.0)


# What every ROS process has, and what the graph keeps global: /tf, /tf_static, /diagnostics.
GLOBAL_TOPICS = {'/rosout', '/parameter_events', '/tf', '/tf_static', '/diagnostics'}


@pytest.mark.slow
def test_two_namespaced_replays_share_a_machine_each_fusing_its_own_bag(
    tmp_path: Path, procs: ProcGroup
) -> None:
    """namespace:=car1 and namespace:=car2, at once on one ROS domain: every topic of each graph
    is under its namespace (rings too), and each fusion sees its own bag's world. cut_in has
    no vehicle right of the ego lane; pedestrian_crossing has a car parked there (y = -3.6 m)."""
    ros2 = _need_launch()
    bags = {
        'car1': make_scenario(tmp_path / 'cut_in', 'cut_in', 4, 5),
        'car2': make_scenario(tmp_path / 'crossing', 'pedestrian_crossing', 4, 6),
    }
    echoes = {
        car: procs.echo(
            f'/{car}/fusion/out/objects',
            'rt_fusion_msgs/msg/ObjectArray',
            '--count',
            '40',
            '--timeout',
            '240',
        )
        for car in bags
    }
    # Each vehicle's frames under its name on the shared /tf (frame_prefix).
    tf = procs.echo(graph.TF_TOPIC, 'tf2_msgs/msg/TFMessage', '--count', '100', '--timeout', '240')
    env = {'AMENT_PREFIX_PATH': str(VENV)}
    launches = {
        car: procs.spawn(
            [
                str(ros2),
                'launch',
                'rt_fusion',
                'replay.launch.py',
                f'bag:={bag}',
                f'namespace:={car}',
                f'frame_prefix:={car}/',
                'rate:=0.25',
            ],
            f'ros2 launch {car}',
            env,
        )
        for car, bag in bags.items()
    }
    right: dict[str, float] = {}
    for car, echo in echoes.items():
        lists, got = echo.messages(deadline_s=300)
        assert got['received'] >= 40, launches[car].tail()
        # The share of object lists with a vehicle right of the ego lane (a parked car; the
        # roadside posts both scenarios have are static objects), after the first 10 (tracks
        # are confirmed after their first hits; the camera's come an inference later).
        settled = lists[10:]
        right[car] = sum(
            any(o['position']['y'] < -2.5 and o['object_class'] in (1, 2) for o in m['objects'])
            for m in settled
        ) / len(settled)
        if car == 'car2':  # both graphs run now: their topics and rings, while they exist
            listed = subprocess.run(
                [str(ros2), 'topic', 'list', '--no-daemon', '--spin-time', '5'],
                env={**procs.env, **env},
                capture_output=True, text=True, timeout=120, check=True,
            ).stdout.split()  # fmt: skip
            domain = procs.env['ROS_DOMAIN_ID']
            rings = [p.name for p in Path('/dev/shm').glob(f'rt_fusion_d{domain}_*')]
    assert right['car1'] < 0.1 and right['car2'] > 0.5, right
    stray = [
        t for t in listed if t not in GLOBAL_TOPICS and not t.startswith(('/car1/', '/car2/'))
    ]
    assert not stray, stray
    for car in bags:
        assert (
            f'/{car}/fusion/out/objects' in listed and f'/{car}/planner/out/trajectory' in listed
        )
    ours = (f'rt_fusion_d{domain}_car1_', f'rt_fusion_d{domain}_car2_')
    assert rings and all(r.startswith(ours) for r in rings), rings
    poses, _ = tf.messages(deadline_s=240)
    pairs = {
        (t['header']['frame_id'], t['child_frame_id']) for m in poses for t in m['transforms']
    }
    assert pairs == {('car1/odom', 'car1/base_link'), ('car2/odom', 'car2/base_link')}, pairs
    for launch in launches.values():
        launch.stop(timeout_s=60.0)


@pytest.mark.slow
def test_the_vehicle_configuration_starts_every_node_on_emulated_sensors(tmp_path: Path) -> None:
    """config/vehicle.yaml as shipped, on pty/CAN-bus/video/ALSA emulators, with only the TensorRT
    backend swapped for one that exists here: every node of vehicle.launch.py reaches active."""
    _need_launch()
    shared_file('camera/solidWhiteRight.mp4')  # skips where the recordings are absent
    overrides = tmp_path / 'dev.yaml'
    overrides.write_text(
        'fusion:\n  ros__parameters:\n    backend: onnxruntime\n    device: cpu\n'
        '    infer_period_s: 0.2\n'
    )
    env = {**ros_env(), 'AMENT_PREFIX_PATH': str(VENV)}
    names = [n.name for n in graph.VEHICLE]
    launched = launching.LaunchedGraph(
        'vehicle.launch.py',
        {'emulate': 'true', 'overrides': str(overrides)},
        env=env,
        log=tmp_path / 'launch.log',
    )
    try:
        active: set[str] = set()
        while active != set(names):
            line = launched.wait_for_line([f'[{n}]: active' for n in names], 240)
            assert line is not None, f'active: {sorted(active)}; log:\n' + log_excerpt(
                (tmp_path / 'launch.log').read_text()
            )
            active |= {n for n in names if f'[{n}]: active' in line}
    finally:
        status = launched.stop(timeout_s=60)
    log = (tmp_path / 'launch.log').read_text()
    assert status == 0, log_excerpt(log)
    assert 'process has died' not in log, log_excerpt(log)
    assert 'Traceback' not in log, log_excerpt(log)
    for name in names:  # each says where its start went (tools/chaos.py tabulates it)
        assert re.search(
            rf'\[{name}\]: active \(\d+\.\d+ s after the process started: interpreter and '
            r'imports \d+\.\d+, ROS \d+\.\d+, configure \d+\.\d+, activate \d+\.\d+\)',
            log,
        ), name


@pytest.mark.parametrize('optional', [False, True], ids=['required', 'optional'])
def test_a_broken_device_at_bring_up_is_named_and_fails_the_graph_unless_optional(
    tmp_path: Path, optional: bool
) -> None:
    """A camera whose video does not exist (and no retry): the bring-up node names it, with the
    camera's own error, and ends the whole launch with status 1; with ``optional:=camera`` the
    graph comes up without it."""
    _need_launch()
    overrides = tmp_path / 'dev.yaml'
    overrides.write_text(
        'fusion:\n  ros__parameters:\n    backend: onnxruntime\n    device: cpu\n'
        '    rt: {require_rt: false, cpus: [0]}\n'
        'planner:\n  ros__parameters:\n    rt: {require_rt: false, cpus: [0]}\n'
        'camera:\n  ros__parameters:\n    source: file\n'
        f'    file: {tmp_path / "no_such_video.mp4"}\n'
        '    retry_s: 0.0\n'  # fail the start (the shipped file retries a camera not there yet)
    )
    env = {**ros_env(), 'AMENT_PREFIX_PATH': str(VENV)}
    args = {'overrides': str(overrides), 'radar': 'false', 'imu': 'false', 'microphone': 'false'}
    if optional:
        args['optional'] = 'camera'
    launched = launching.LaunchedGraph(
        'vehicle.launch.py', args, env=env, log=tmp_path / 'launch.log'
    )
    try:
        if optional:
            line = launched.wait_for_line('bring-up: 3 nodes active', 240)
            assert line is not None and '(without camera)' in line, log_excerpt(
                (tmp_path / 'launch.log').read_text()
            )
        else:
            assert launched.popen.wait(timeout=240) != 0
    finally:
        launched.stop(timeout_s=60)
    log = (tmp_path / 'launch.log').read_text()
    named = "bring-up: node 'camera' did not reach active: configure failed"
    assert named in log and 'no_such_video.mp4' in log, log_excerpt(log)
    if optional:
        assert 'the graph runs without it' in log, log_excerpt(log)
    else:
        assert 'stopping the graph' in log and 'the bring-up failed' in log, log_excerpt(log)


def test_a_misspelt_node_section_stops_the_launch(tmp_path: Path) -> None:
    _need_launch()
    config = tmp_path / 'vehicle.yaml'
    config.write_text(
        (ROOT / 'config' / 'vehicle.yaml').read_text().replace('\nfusion:', '\nfusoin:')
    )
    env = {**ros_env(), 'AMENT_PREFIX_PATH': str(VENV)}
    launched = launching.LaunchedGraph(
        'vehicle.launch.py', {'config': str(config)}, env=env, log=tmp_path / 'launch.log'
    )
    assert launched.popen.wait(timeout=120) != 0
    launched.stop()
    log = (tmp_path / 'launch.log').read_text()
    assert "section 'fusoin' is for no node" in log and "did you mean 'fusion'" in log, log
    assert 'process started' not in log, log  # nothing ran on its defaults


def _hearing_status(diag: Proc) -> str:
    """The fusion's last audio_* diagnostics values that ``diag`` (a /diagnostics echo) holds."""
    last: dict[str, str] = {}
    for line in list(diag.lines.queue):
        if line.startswith('MSG '):
            for status in json.loads(line.split(' ', 1)[1])['status']:
                values = {kv['key']: kv['value'] for kv in status['values']}
                if 'audio_hops' in values:
                    last = {k: v for k, v in values.items() if k.startswith('audio_')}
    return f'hearing: {last or "no status"}'


def test_ros2_launch_replays_the_microphone_and_the_fusion_hears_the_emergency_siren(
    tmp_path: Path, procs: ProcGroup
) -> None:
    """The emergency_vehicle scenario's siren (the generator's audio model) replayed with
    ``audio:=true`` comes out of the fusion's hearing as a siren event, and nothing else does."""
    ros2 = _need_launch()
    out = tmp_path / 'scenario'
    make_scenario(out, 'emergency_vehicle', 4, 5)
    events = procs.echo(
        '/fusion/out/audio_events',
        'rt_fusion_msgs/msg/AudioEvent',
        *('--qos', 'latched'),  # the events are latched: an onset before discovery still arrives
        '--count',
        '1',
        '--timeout',
        '180',
    )
    diag = procs.echo(
        '/diagnostics', 'diagnostic_msgs/msg/DiagnosticArray', '--count', '400', '--timeout', '180'
    )
    launch = procs.spawn(
        [
            str(ros2),
            'launch',
            'rt_fusion',
            'replay.launch.py',
            f'bag:={out / "bag"}',
            'audio:=true',
        ],
        'ros2 launch',
        {'AMENT_PREFIX_PATH': str(VENV)},
    )
    msgs, summary = events.messages(deadline_s=200)
    assert summary['received'] == 1, launch.tail() + '\n' + _hearing_status(diag)
    assert msgs[0]['event_class'] == 'siren' and msgs[0]['active'], msgs
    hops = 0
    while hops < 20:  # the hearing ran hop after hop on the replayed blocks, refusing none
        _, line = diag.read_until('MSG', 120)
        for status in json.loads(line.split(' ', 1)[1])['status']:
            values = {kv['key']: kv['value'] for kv in status['values']}
            if values.get('audio_hops'):
                hops = max(hops, int(values['audio_hops']))
                assert not values['audio_rejected'], values
    launch.stop(timeout_s=60.0)
