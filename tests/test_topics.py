"""Topic names are written in one place, ``rt_fusion/ros/graph.py``: nodes, launch files and tools
take them from there, so a renamed topic cannot leave a reader listening on the old name."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from rt_fusion.core.scenario import generate
from rt_fusion.ros import graph

ROOT = Path(__file__).resolve().parents[1]
GRAPH = ROOT / 'rt_fusion' / 'ros' / 'graph.py'
TOPICS = {v for k, v in vars(graph).items() if k.endswith('_TOPIC') and isinstance(v, str)}
# A topic's first name (``/camera_left/...`` counts as ``camera``), and the tools' start topics.
NAMESPACES = {t.lstrip('/').split('/')[0] for t in TOPICS}
NAMESPACES |= {'evaluate', 'demo', 'soak', 'two_hosts'}
RELATIVE = {t for t in TOPICS if not t.startswith('/')}


def _strings(path: Path) -> list[tuple[int, str]]:
    """The string literals of a file (f-strings' literal parts too), with their lines."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            out.append((node.lineno, node.value))
    return out


def _topic_literals(path: Path) -> list[str]:
    found = []
    for line, text in _strings(path):
        # A relative name counts when it is one of the graph's or a node's output under one.
        if any(text == t or text.startswith(t + '/') for t in RELATIVE) or re.match(
            r'[a-z]+(_[a-z0-9]+)?/out/', text
        ):
            if text.split('/', 1)[0].split('_', 1)[0] in NAMESPACES:
                found.append(f'{path.relative_to(ROOT)}:{line}: {text!r}')
        elif text.startswith('/') and len(text) > 1:
            first = text[1:].split('/', 1)[0].split('_', 1)[0]
            whole = text[1:].split('/', 1)[0]
            if first in NAMESPACES or whole in NAMESPACES:
                found.append(f'{path.relative_to(ROOT)}:{line}: {text!r}')
    return found


def _scanned() -> list[Path]:
    files = [*(ROOT / 'rt_fusion').rglob('*.py'), *(ROOT / 'tools').glob('*.py')]
    files += (ROOT / 'launch').glob('*.py')
    # The ROS-free core cannot import graph.py: the scenario generator names the bag's topics
    # itself, held to graph.py's below.
    core = ROOT / 'rt_fusion' / 'core'
    return sorted(p for p in files if p != GRAPH and core not in p.parents)


def test_topic_names_are_written_only_in_graph_py() -> None:
    offenders = [hit for path in _scanned() for hit in _topic_literals(path)]
    assert not offenders, 'topic names outside rt_fusion/ros/graph.py:\n' + '\n'.join(offenders)


def test_the_scan_finds_a_topic_written_by_hand() -> None:
    probe = ROOT / 'tools' / '_probe_topics_tmp.py'
    probe.write_text(
        "A = '/fusion/out/objects'\nB = f'/camera_{1}/out/image'\nC = '/dev/shm'\n"
        "D = 'radar/out/objects'\nE = 'camera/solidWhiteRight.mp4'\nF = 'vehicle/speed'\n"
    )
    try:
        hits = _topic_literals(probe)
    finally:
        probe.unlink()
    assert len(hits) == 4, hits


@pytest.mark.parametrize(
    ('core', 'live'),
    [
        (generate.RADAR_TOPIC, graph.RADAR_TOPIC),
        (generate.IMU_TOPIC, graph.IMU_TOPIC),
        (generate.SPEED_TOPIC, graph.SPEED_TOPIC),
        (generate.camera_base('front') + '/out/camera_info', graph.CAMERA_INFO_TOPIC),
        (generate.AUDIO_TOPIC, graph.AUDIO_TOPIC),
        (generate.camera_base('front') + '/out/image', graph.CAMERA_TOPIC),
        (generate.camera_base('left') + '/out/image', graph.camera_topic('left')),
    ],
)
def test_the_scenario_bags_topics_are_the_graphs(core: str, live: str) -> None:
    assert core == graph.bag_topic(live)
