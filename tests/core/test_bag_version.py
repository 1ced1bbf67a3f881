"""Bags say which ``ros2 bag`` reads them, and version 8 is written in the form Humble reads.

Humble's rosbag2 (0.15, JetPack 6.2) parses metadata.yaml field by field: each topic's
``offered_qos_profiles`` must be a YAML *string* holding a list of QoS maps with integer
policies. Jazzy's version 9 writes a YAML list there, which Humble rejects ("yaml-cpp: bad
conversion"). The Humble reader below asks for exactly the fields and types that Humble's
``rosbag2_storage/metadata_io.cpp`` decodes; keys it does not know are ignored there too.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from rosbags.rosbag2 import Reader

from rt_fusion.core.errors import RtFusionError
from rt_fusion.core.scenario.bagout import READERS, BagWriter, header, make, typestore

SPEED = 'std_msgs/msg/Float64'
IMU = 'sensor_msgs/msg/Imu'
QOS_INTS = ('history', 'depth', 'reliability', 'durability', 'liveliness')
QOS_DURATIONS = ('deadline', 'lifespan', 'liveliness_lease_duration')


def _write(path: Path, version: int, storage: str = 'mcap') -> None:
    ts = typestore()
    writer = BagWriter(path, ts, storage, version)
    for i in range(5):
        t = 1_000_000_000 + i * 10_000_000
        writer.write('/speed', SPEED, t, make(ts, SPEED, data=float(i)))
        writer.write('/imu', IMU, t + 1, make(ts, IMU, header=header(ts, t, 'imu')))
    writer.close()


def _humble_reads(meta: dict) -> None:
    """Raises (KeyError, TypeError, AssertionError) where Humble's metadata decoder would."""
    info = meta['rosbag2_bagfile_information']
    assert isinstance(info['version'], int)
    assert isinstance(info['storage_identifier'], str)
    assert all(isinstance(p, str) for p in info['relative_file_paths'])
    assert isinstance(info['duration']['nanoseconds'], int)
    assert isinstance(info['starting_time']['nanoseconds_since_epoch'], int)
    assert isinstance(info['message_count'], int)
    for entry in info['topics_with_message_count']:
        topic = entry['topic_metadata']
        for key in ('name', 'type', 'serialization_format'):
            assert isinstance(topic[key], str), key
        offered = topic['offered_qos_profiles']
        assert isinstance(offered, str), f'offered_qos_profiles is {type(offered).__name__}'
        profiles = yaml.safe_load(offered)
        assert isinstance(profiles, list) and profiles, 'Humble plays offers from a YAML list'
        for profile in profiles:
            for key in QOS_INTS:
                assert isinstance(profile[key], int), key
            for key in QOS_DURATIONS:
                assert isinstance(profile[key]['sec'], int), key
                assert isinstance(profile[key]['nsec'], int), key
            assert isinstance(profile['avoid_ros_namespace_conventions'], bool)
        assert isinstance(entry['message_count'], int)
    assert isinstance(info['compression_format'], str)
    assert isinstance(info['compression_mode'], str)
    for entry in info['files']:
        assert isinstance(entry['path'], str)
        assert isinstance(entry['message_count'], int)


@pytest.mark.parametrize('storage', ['mcap', 'sqlite3'])
def test_version_8_is_written_in_the_form_humble_reads(tmp_path: Path, storage: str) -> None:
    _write(tmp_path / 'bag', 8, storage)
    meta = yaml.safe_load((tmp_path / 'bag' / 'metadata.yaml').read_text())
    assert meta['rosbag2_bagfile_information']['version'] == 8
    _humble_reads(meta)
    custom = meta['rosbag2_bagfile_information']['custom_data']
    assert custom['rt_fusion.readable_by'] == READERS[8]
    assert 'Humble' in READERS[8]
    with Reader(tmp_path / 'bag') as reader:  # and the bag still reads as a bag
        assert sum(1 for _ in reader.messages()) == 10


def test_version_9_says_humble_cannot_read_it_and_humble_indeed_could_not(tmp_path: Path) -> None:
    _write(tmp_path / 'bag', 9)
    meta = yaml.safe_load((tmp_path / 'bag' / 'metadata.yaml').read_text())
    info = meta['rosbag2_bagfile_information']
    assert info['version'] == 9
    assert 'Humble cannot' in info['custom_data']['rt_fusion.readable_by']
    with pytest.raises(AssertionError, match='offered_qos_profiles is list'):
        _humble_reads(meta)  # the checker can fail: on what Jazzy writes


def test_an_unknown_version_is_refused_with_its_number(tmp_path: Path) -> None:
    with pytest.raises(RtFusionError, match='bag version 5'):
        BagWriter(tmp_path / 'bag', typestore(), 'mcap', 5)
