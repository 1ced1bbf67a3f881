"""rt_fusion.ros.harness.recorder: what the one recorder of a graph's outputs concludes."""

from __future__ import annotations


def test_the_ledger_waits_for_the_frames_the_camera_was_asked_for(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Under load the camera node's last descriptors reached neither the probe nor the fusion
    node's ledger before both agreed on 56 frames, and the demo went on with 56 of 60
    committed. The recordings' camera commits ``--frames``: fewer is not accounted yet."""
    from tests.conftest import lease_domain  # noqa: PLC0415

    monkeypatch.setenv('ROS_DOMAIN_ID', str(lease_domain()))
    monkeypatch.setenv('ROS_AUTOMATIC_DISCOVERY_RANGE', 'LOCALHOST')
    from rt_fusion.ros.harness.recorder import Recorder  # noqa: PLC0415

    probe = Recorder('ledger_test', cameras=('front',), expected_frames=60)
    try:
        probe.seen = 56
        probe.ledger = {'frames_in_flight': 0, 'frames_delivered': 56, 'frames_overrun': 0}
        assert not probe.accounted()  # both agree, on too few
        probe.seen = 60
        probe.ledger['frames_delivered'] = 60
        assert probe.accounted()
        probe.expected_frames = 0  # not known (the scenario replay): agreement is enough
        probe.seen = probe.ledger['frames_delivered'] = 56
        assert probe.accounted()
    finally:
        probe.close()
