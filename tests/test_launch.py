"""launch/vehicle.launch.py wires real executables, real topics and the shipped parameter file.

launch_ros is not installable from PyPI wheels here, so the graph table is read from the file's
source; where launch_ros imports (the vehicle, a ROS install) the description is built as well.
"""

from __future__ import annotations

import ast
import importlib.util
import re
from pathlib import Path

import pytest
import yaml

from tests.conftest import ROOT

LAUNCH = ROOT / 'launch' / 'vehicle.launch.py'
REPLAY = ROOT / 'launch' / 'replay.launch.py'


def _graph(path: Path = LAUNCH) -> dict[str, tuple[str, list[tuple[str, str]]]]:
    tree = ast.parse(path.read_text())
    for node in tree.body:
        if isinstance(node, ast.AnnAssign) and getattr(node.target, 'id', '') == 'GRAPH':
            assert node.value is not None
            return ast.literal_eval(node.value)
    raise AssertionError('GRAPH not found in the launch file')


def _setup_scripts() -> dict[str, str]:
    tree = ast.parse((ROOT / 'setup.py').read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], 'id', '') == 'NODES':
            return ast.literal_eval(node.value)
    raise AssertionError('NODES not found in setup.py')


def _topics(module: str, kind: str) -> set[str]:
    source = (ROOT / 'rt_fusion' / 'nodes' / f'{module}.py').read_text()
    return set(re.findall(rf"'~/{kind}/([a-z_]+)'", source))


def test_every_node_is_an_installed_executable_with_a_config_section() -> None:
    graph = _graph()
    scripts = _setup_scripts()
    config = yaml.safe_load((ROOT / 'config' / 'vehicle.yaml').read_text())
    assert set(graph) == set(config)
    for name, (executable, _remaps) in graph.items():
        assert executable in scripts, f'{name}: {executable} is not a console script'


def test_every_remapping_joins_an_input_to_an_existing_output() -> None:
    graph = _graph()
    scripts = _setup_scripts()
    outputs = {
        f'/{name}/out/{topic}'
        for name, (exe, _) in graph.items()
        for topic in _topics(scripts[exe].split(':')[0].rsplit('.', 1)[1], 'out')
    }
    for name, (exe, remaps) in graph.items():
        inputs = _topics(scripts[exe].split(':')[0].rsplit('.', 1)[1], 'in')
        for src, dst in remaps:
            assert src.removeprefix('~/in/') in inputs, f'{name}: no input {src}'
            assert dst in outputs, f'{name}: {src} -> {dst}, which no node publishes'
    # The fusion node gets every sensor, the planner the fusion's output.
    fusion = dict(graph['fusion'][1])
    assert fusion['~/in/camera'] == '/camera/out/image'
    assert dict(graph['planner'][1])['~/in/objects'] == '/fusion/out/objects'


def test_the_description_builds_where_launch_ros_exists() -> None:
    if importlib.util.find_spec('launch_ros') is None:
        pytest.skip('launch_ros is not installable from PyPI wheels (it is on the vehicle)')
    spec = importlib.util.spec_from_file_location('vehicle_launch', LAUNCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    description = module.generate_launch_description()
    assert len(description.entities) == 2 + 2 * len(_graph())


def test_the_replay_launch_feeds_the_same_fusion_and_planner() -> None:
    replay, vehicle = _graph(REPLAY), _graph(LAUNCH)
    scripts = _setup_scripts()
    assert all(exe in scripts for exe, _ in replay.values())
    for name in ('fusion', 'planner'):
        assert replay[name] == vehicle[name]  # the graph under test is the vehicle's
    config = yaml.safe_load((ROOT / 'config' / 'replay.yaml').read_text())
    assert {'fusion', 'planner'} <= set(config)
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
