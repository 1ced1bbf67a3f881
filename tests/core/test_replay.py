"""Replay pacing and remapping (ROS-free part of replay_node)."""

from __future__ import annotations

import pytest

from rt_fusion.core import params
from rt_fusion.core.errors import ParameterError
from rt_fusion.core.replay import Pacer, ReplayParams, parse_remaps


def test_pacer_scales_the_recorded_timeline_from_the_first_message() -> None:
    pacer = Pacer(rate=2.0)
    # Recorded at 100 s, 101 s, 103 s; the replay starts at host time 5 s.
    assert pacer.due_ns(100 * 10**9, 5 * 10**9) == 5 * 10**9
    assert pacer.due_ns(101 * 10**9, 99 * 10**9) == 5_500_000_000  # anchored, not re-anchored
    assert pacer.due_ns(103 * 10**9, 0) == 6_500_000_000


def test_remaps() -> None:
    assert parse_remaps(('/a->/b', ' /c -> /d ')) == {'/a': '/b', '/c': '/d'}
    for bad in (('/a',), ('/a->',), ('->/b',)):
        with pytest.raises(ParameterError, match="'remap'"):
            parse_remaps(bad)


def test_params_need_a_bag_and_a_known_mode() -> None:
    with pytest.raises(ParameterError, match="'bag'"):
        params.build(ReplayParams, {})
    with pytest.raises(ParameterError, match="'mode'"):
        params.build(ReplayParams, {'bag': 'x', 'mode': 'backwards'})
    p = params.build(ReplayParams, {'bag': 'x', 'remap': ['/a->/b']})
    assert p.mode == 'realtime' and p.remap == ('/a->/b',)


def test_restamper_keeps_offsets_on_the_host_timeline() -> None:
    from rt_fusion.core.replay import Restamper  # noqa: PLC0415

    r = Restamper(rate=1.0)
    # First message logged at 1,000 s (stamp 0.012 s earlier: its sensor delay), replayed at
    # host time 5,000 s.
    r.anchor(1_000 * 10**9, 5_000 * 10**9)
    r.anchor(1_001 * 10**9, 9_999 * 10**9)  # later anchors change nothing
    assert r(1_000 * 10**9 - 12_000_000) == 5_000 * 10**9 - 12_000_000
    assert r(1_002 * 10**9) == 5_002 * 10**9
    fast = Restamper(rate=2.0)
    fast.anchor(0, 100)
    assert fast(10) == 105


def test_a_looped_pass_anchored_at_the_floor_stamps_after_the_previous_pass() -> None:
    from rt_fusion.core.replay import Restamper  # noqa: PLC0415

    # Stamps precede their log times by up to 40 ms (delivery delay); the pass is replayed fast.
    msgs = [(1_000 + k * 100, 1_000 + k * 100 - (40 if k % 2 else 10)) for k in range(10)]
    first = Restamper(1.0)
    first.anchor(msgs[0][0], 5_000)
    made = [first(stamp) for _, stamp in msgs]
    second = Restamper(1.0)
    second.anchor(msgs[0][0], max(5_050, first.next_floor_ns()))  # "now" is only 50 ns later
    again = [second(stamp) for _, stamp in msgs]
    assert min(again) > max(made)
    assert [b - a for a, b in zip(made, again, strict=True)] == [again[0] - made[0]] * 10
