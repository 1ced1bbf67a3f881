"""The ground truth of a surround rig: each camera's view of every object (``camera_<name>``),
what ``tools/evaluate.py --cameras 4`` scores each camera on."""

from __future__ import annotations

from pathlib import Path

import yaml

from rt_fusion.core.scenario import sensors as sm
from rt_fusion.core.scenario.generate import build_world, truth_at
from rt_fusion.core.scenario.render import Look

ROOT = Path(__file__).resolve().parents[3]


def test_each_rig_camera_sees_what_lies_in_its_own_view() -> None:
    """cut_in at 1 s: the cars far behind in the next lane are the rear camera's alone, those
    ahead the front camera's; none is seen by a camera it lies behind of; the front camera's
    view is the one-camera truth's."""
    scenario = yaml.safe_load((ROOT / 'config' / 'scenarios' / 'cut_in.yaml').read_text())
    world = build_world(scenario, 2.0)
    look = Look(scenery_seed=1)
    alone = truth_at(world, 1.0, sm.VEHICLE, look=look)
    rig = truth_at(world, 1.0, sm.VEHICLE, look=look, rig=sm.RIG[1:])
    names = ('camera_left', 'camera_right', 'camera_rear')
    for one, both in zip(alone['objects'], rig['objects'], strict=True):
        seen = both['visible']
        assert set(names) <= set(seen)
        assert seen['camera'] == one['visible']['camera']  # the front camera unchanged
        x, y = both['ego_x'], both['ego_y']
        if x < -15.0 and abs(y) < 8.0:  # far behind: the rear camera's, never the front's
            assert not seen['camera']
        if x > 15.0:  # ahead: never the rear camera's
            assert not seen['camera_rear']
    behind = [o for o in rig['objects'] if o['ego_x'] < -15.0 and o['visible']['camera_rear']]
    ahead = [o for o in rig['objects'] if o['ego_x'] > 15.0 and o['visible']['camera']]
    assert behind and ahead
