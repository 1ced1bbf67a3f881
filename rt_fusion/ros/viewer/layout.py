"""The Foxglove layout of the viewer's channels (``config/foxglove_layout.json``).

Built with foxglove-sdk's ``foxglove.layouts`` (Foxglove's own layout types), so a change of a
channel name breaks the build of the layout rather than leaving a panel empty; the committed
file is checked against it (``tests/ros/test_viewer_layout.py``). In Foxglove or Lichtblick:
Layouts → Import from file. The same layout opens an MCAP recorded by ``tools/record.py``
(checked by ``tests/tools/test_record.py``): the camera panel's topic is the camera's ROS topic,
and the 3D panel lists the fusion's and the planner's markers beside the viewer's scene.
"""

from __future__ import annotations

import json
from typing import Any

from rt_fusion.ros import graph


def layout() -> Any:
    """Left: the 3D scene (tracks, radar, plan, in ``odom`` following ``base_link``); right,
    top to bottom: the camera, the audio events, the nodes' health."""
    import foxglove.layouts as fl  # noqa: PLC0415

    # The viewer's scene, and a recording's (tools/record.py) instead: the nodes' markers.
    shown = (graph.VIEWER_TRACKS, graph.VIEWER_RADAR, graph.VIEWER_PLAN, *graph.RECORDED_SCENE)
    scene = fl.ThreeDeePanel(
        title='rt_fusion: scene',
        config=fl.ThreeDeeConfig(
            follow_tf='base_link',
            topics={t: fl.BaseRendererSceneUpdateTopicSettings(visible=True) for t in shown},
        ),
    )
    camera = fl.ImagePanel(
        title='rt_fusion: camera',
        config=fl.ImageConfig(
            image_mode=fl.ImageModeConfig(
                image_topic=graph.VIEWER_CAMERA,
                annotations={graph.VIEWER_CAMERA_BOXES: fl.ImageAnnotationSettings(visible=True)},
                synchronize=True,  # the boxes of the frame shown, matched by stamp
            )
        ),
    )
    events = fl.LogPanel(
        title='rt_fusion: audio events', config=fl.LogConfig(topic_to_render=graph.VIEWER_AUDIO)
    )
    health = fl.RawMessagesPanel(
        title='rt_fusion: health', config=fl.RawMessagesConfig(topic_path=graph.VIEWER_HEALTH)
    )
    right = fl.SplitContainer(
        direction='column',
        items=[
            fl.SplitItem(proportion=2.0, content=camera),
            fl.SplitItem(proportion=1.0, content=events),
            fl.SplitItem(proportion=1.0, content=health),
        ],
    )
    return fl.Layout(
        content=fl.SplitContainer(
            direction='row',
            items=[
                fl.SplitItem(proportion=2.0, content=scene),
                fl.SplitItem(proportion=1.0, content=right),
            ],
        )
    )


def layout_json() -> str:
    """The layout as the file holds it (indented, keys sorted)."""
    return json.dumps(json.loads(layout().to_json()), indent=2, sort_keys=True) + '\n'


if __name__ == '__main__':  # python -m rt_fusion.ros.viewer.layout: rewrites the committed file
    from pathlib import Path

    target = Path(__file__).resolve().parents[3] / 'config' / 'foxglove_layout.json'
    target.write_text(layout_json())
    print(target)
