"""config/foxglove_layout.json is the layout rt_fusion.ros.viewer.layout builds, and each of its
panels shows a channel the viewer advertises."""

from __future__ import annotations

import json

import pytest

from rt_fusion.ros import graph
from tests.conftest import ROOT


def _topics(node: object) -> set[str]:
    """Every topic a layout names (its panels' topics, image topic, topic paths)."""
    out: set[str] = set()
    if isinstance(node, dict):
        for key, value in node.items():
            if key in ('topics', 'annotations') and isinstance(value, dict):
                out |= set(value)
            elif key in ('imageTopic', 'topicToRender', 'topicPath') and isinstance(value, str):
                out.add(value)
            else:
                out |= _topics(value)
    elif isinstance(node, list):
        for value in node:
            out |= _topics(value)
    return out


def test_the_committed_layout_is_the_built_one_and_shows_the_viewer_channels() -> None:
    pytest.importorskip('foxglove')
    from rt_fusion.ros.viewer.layout import layout_json  # noqa: PLC0415

    committed = (ROOT / 'config' / 'foxglove_layout.json').read_text()
    assert committed == layout_json(), 'regenerate: python -m rt_fusion.ros.viewer.layout'
    shown = _topics(json.loads(committed))
    # Every channel but /tf (the 3D panel's frames), and a recording's markers (test_record.py).
    want = set(graph.VIEWER_CHANNELS) - {graph.VIEWER_TF} | set(graph.RECORDED_SCENE)
    assert shown == want, shown
