"""The shipped parameter files are valid for the nodes they configure, and a bad one is refused
with the parameter's name — checked against the nodes' own parameter dataclasses."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
import yaml

from rt_fusion.core.errors import ParameterError
from rt_fusion.nodes.calibration_node import CalibrationNode
from rt_fusion.nodes.camera_node import CameraNode
from rt_fusion.nodes.fusion_node import FusionNode
from rt_fusion.nodes.imu_node import ImuNode
from rt_fusion.nodes.microphone_node import MicrophoneNode
from rt_fusion.nodes.radar_node import RadarNode
from rt_fusion.nodes.trajectory_node import TrajectoryNode
from rt_fusion.ros import graph
from rt_fusion.ros.parameters import check_param_section
from tests.conftest import ROOT, Proc, ProcGroup

# Node name in the YAML files -> the node class that runs under it.
NODES = {
    'camera': CameraNode,
    'radar': RadarNode,
    'imu': ImuNode,
    'microphone': MicrophoneNode,
    'fusion': FusionNode,
    'fusion_rclpy': FusionNode,
    'planner': TrajectoryNode,
    'calibration': CalibrationNode,
}
# Parameter files (eval_baseline.yaml beside them holds evaluation figures, not parameters).
CONFIGS = sorted(p for p in (ROOT / 'config').glob('*.yaml') if p.name != 'eval_baseline.yaml')
# What tools/demo.py fills in at run time (the recordings' paths).
FILLED_IN = {
    'replay.yaml': {'camera': {'file': 'solidWhiteRight.mp4'}, 'imu': {'port': '/dev/pts/9'}}
}


def test_there_are_config_files() -> None:
    assert {p.name for p in CONFIGS} >= {'vehicle.yaml', 'replay.yaml'}


@pytest.mark.parametrize('path', CONFIGS, ids=lambda p: p.name)
def test_every_section_is_valid_for_its_node(path: Path) -> None:
    doc = yaml.safe_load(path.read_text())
    assert set(doc) <= set(NODES), f'sections for unknown nodes: {set(doc) - set(NODES)}'
    for name, section in doc.items():
        values = {**section['ros__parameters'], **FILLED_IN.get(path.name, {}).get(name, {})}
        check_param_section(NODES[name].PARAM_GROUPS, values)


@pytest.mark.parametrize(
    ('node', 'section', 'bad'),
    [
        ('fusion', {'sync': {'max_wiat_s': 0.1}}, 'sync.max_wiat_s'),
        ('fusion', {'sync': {'radar_mode': 'sideways'}}, 'sync.radar_mode'),
        ('fusion', {'backend': 'tensorflow'}, 'backend'),
        ('planner', {'rt': {'rt_priority': 120}}, 'rt.rt_priority'),
        ('planner', {'planner': {'max_speed': 'fast'}}, 'planner.max_speed'),
        ('camera', {'ring_slots': 1}, 'ring_slots'),
        ('imu', {'baudrate': 'quick'}, 'baudrate'),
    ],
)
def test_a_bad_parameter_is_refused_with_its_name(node: str, section: dict, bad: str) -> None:  # type: ignore[type-arg]
    base = yaml.safe_load((ROOT / 'config' / 'replay.yaml').read_text())
    merged = base.get(node, {'ros__parameters': {}})['ros__parameters']
    for key, value in section.items():
        if isinstance(value, dict):
            merged = {**merged, key: {**merged.get(key, {}), **value}}
        else:
            merged = {**merged, key: value}
    with pytest.raises(ParameterError) as err:
        check_param_section(NODES[node].PARAM_GROUPS, merged)
    assert err.value.name == bad


def _leaf_lines(path: Path) -> list[tuple[str, str, str]]:
    """(node, dotted parameter, the line) for every parameter line of a parameter file."""
    found: list[tuple[str, str, str]] = []
    stack: list[tuple[int, str]] = []
    for line in path.read_text().splitlines():
        m = re.match(r'^(\s*)([A-Za-z_]\w*):(.*)$', line)
        if not m:
            continue
        indent, key, rest = len(m.group(1)), m.group(2), m.group(3)
        while stack and stack[-1][0] >= indent:
            stack.pop()
        stack.append((indent, key))
        keys = [k for _, k in stack]
        value = rest.split('#')[0].strip()
        if len(keys) >= 3 and keys[1] == 'ros__parameters' and value:
            found.append((keys[0], '.'.join(keys[2:]), line))
    return found


@pytest.mark.parametrize('path', CONFIGS, ids=lambda p: p.name)
def test_every_parameter_line_says_what_it_is_and_its_unit(path: Path) -> None:
    from rt_fusion.core import params  # noqa: PLC0415

    lines = _leaf_lines(path)
    assert lines
    for node, name, line in lines:
        assert '#' in line, f'{path.name}: {node}.{name} has no comment'
        fields = {
            prefix + f.name: f
            for cls, prefix in NODES[node].PARAM_GROUPS
            for f in params.fields(cls)
        }
        unit = fields[name].spec.unit
        if unit:
            assert f'[{unit}]' in line.split('#', 1)[1], (
                f'{path.name}: {node}.{name} lacks [{unit}]'
            )


def test_the_vehicle_file_sets_every_calibration_parameter() -> None:
    """Mountings and intrinsics have defaults for the generated scenarios only: the vehicle's
    file sets each one, or its calibration files do (the fusion's mountings: ``calibration``;
    its intrinsics: the camera's CameraInfo, from the camera's ``calibration_file``)."""
    from rt_fusion.core import calibration, params  # noqa: PLC0415

    doc = yaml.safe_load((ROOT / 'config' / 'vehicle.yaml').read_text())
    for node, section in doc.items():
        flat = _flatten(section['ros__parameters'])
        if node == 'fusion':
            fusion = section['ros__parameters']
            cal = calibration.load(ROOT / fusion['calibration'])
            flat |= {f'fusion.{name}' for name in calibration.fusion_mounting(cal)}
            # The intrinsics: the camera's CameraInfo, from its calibration file.
            assert fusion.get('intrinsics', 'camera_info') == 'camera_info'
            camera = doc['camera']['ros__parameters']['calibration_file']
            assert (ROOT / camera).is_file()
            flat |= {f'fusion.{k}' for k in ('fx', 'fy', 'cx', 'cy', 'distortion')}
        for cls, prefix in NODES[node].PARAM_GROUPS:
            for f in params.fields(cls):
                if f.spec.calibration:
                    assert prefix + f.name in flat, f'vehicle.yaml: {node}.{prefix}{f.name} unset'


def _flatten(section: dict, prefix: str = '') -> set[str]:  # type: ignore[type-arg]
    flat: set[str] = set()
    for key, value in section.items():
        if isinstance(value, dict):
            flat |= _flatten(value, f'{prefix}{key}.')
        else:
            flat.add(prefix + key)
    return flat


# A node's participant: created, then publishing at 20 Hz until stopped.
_PUBLISHER = """
import time, rclpy
from std_msgs.msg import String
rclpy.init()
node = rclpy.create_node('profile_check')
pub = node.create_publisher(String, '/profile_check', 10)
print('CREATED', flush=True)
while True:
    pub.publish(String(data='x'))
    time.sleep(0.05)  # paced: a 20 Hz publisher
"""


def _xml_errors(proc: Proc, stdout: list[str]) -> list[str]:
    """Fast DDS's profile errors (Fast DDS 2 logs them to stdout, 3 to stderr)."""
    return [line for line in [*stdout, *proc.stderr] if 'XMLPARSER' in line]


@pytest.mark.parametrize('name', graph.DDS_PROFILES)
def test_the_shipped_dds_profiles_load_in_fast_dds_and_nodes_talk_with_them(
    name: str, procs: ProcGroup
) -> None:
    """Fast DDS reads each shipped profile (vehicle.launch.py's ``dds_profile``) without an XML
    error, in this distribution's dialect and variable (Fast DDS 2 on Jazzy, 3 on Kilted: CI runs
    both), and two participants with it exchange messages."""
    procs.env.update(graph.dds_profile_env(name, ROOT / 'config'))
    echo = procs.tool(
        'topic_echo.py',
        '/profile_check',
        'std_msgs/msg/String',
        '--count',
        '3',
        '--timeout',
        '120',
    )
    echo_out, _ = echo.read_until('READY', 120)
    publisher = procs.spawn([sys.executable, '-c', _PUBLISHER], 'publisher')
    publisher_out, _ = publisher.read_until('CREATED', 120)
    _, summary = echo.messages(deadline_s=150)
    assert summary['received'] == 3, publisher.tail()
    assert not _xml_errors(echo, echo_out) and not _xml_errors(publisher, publisher_out)


@pytest.mark.parametrize('name', graph.DDS_PROFILES)
def test_the_two_dialects_of_a_shipped_dds_profile_say_the_same(name: str) -> None:
    """fastdds_X.xml (Fast DDS 3) and fastrtps_X.xml (Fast DDS 2) differ only in how each
    spells the writer times (each refuses the other's): one edited alone drifts."""
    three = (ROOT / 'config' / f'fastdds_{name}.xml').read_text()
    two = (ROOT / 'config' / f'fastrtps_{name}.xml').read_text()
    spelling = {'heartbeat_period': 'heartbeatPeriod'}
    for new, old in spelling.items():
        three = three.replace(f'<{new}>', f'<{old}>').replace(f'</{new}>', f'</{old}>')
    assert three == two


def test_a_broken_dds_profile_shows_as_an_xml_error(tmp_path: Path, procs: ProcGroup) -> None:
    """The check above can fail: Fast DDS reports a profile it cannot read."""
    broken = tmp_path / 'broken.xml'
    text = (ROOT / 'config' / 'fastdds_vehicle.xml').read_text()
    broken.write_text(text.replace('<sec>10</sec>', '<sec>ten</sec>'))
    procs.env.update(graph.dds_profile_env(str(broken), tmp_path))
    publisher = procs.spawn([sys.executable, '-c', _PUBLISHER], 'publisher')
    stdout, _ = publisher.read_until('CREATED', 120)
    assert _xml_errors(publisher, stdout) or publisher.wait_stderr('XMLPARSER', 30), (
        publisher.tail()
    )
