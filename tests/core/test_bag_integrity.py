"""MCAP chunk CRCs: bags written here carry them; corrupt chunks are found, named and skipped.

Before, rosbags wrote every CRC as 0, and 8 KB of random bytes written into the middle of a bag
replayed as valid messages."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from rosbags.rosbag2 import StoragePlugin, Writer

from rt_fusion.core import bag_integrity
from rt_fusion.core.bag import iter_messages
from rt_fusion.core.scenario.bagout import BagWriter, header, make, typestore

IMAGE = 'sensor_msgs/msg/CompressedImage'
SPEED = 'std_msgs/msg/Float64'


def _write(path: Path, n: int = 120) -> dict[str, list[bytes]]:
    """A bag of n 40 KB 'images' and n speeds, 10 ms apart: several 1 MiB chunks."""
    ts = typestore()
    rng = np.random.default_rng(7)
    writer = BagWriter(path, ts)
    sent: dict[str, list[bytes]] = {'/cam': [], '/speed': []}
    for i in range(n):
        t = 1_000_000_000 + i * 10_000_000
        data = rng.integers(0, 256, 40_000, dtype=np.uint8)
        img = make(ts, IMAGE, header=header(ts, t, 'cam'), format='jpeg', data=data)
        writer.write('/cam', IMAGE, t, img)
        writer.write('/speed', SPEED, t + 1, make(ts, SPEED, data=float(i)))
        sent['/cam'].append(bytes(ts.serialize_cdr(img, IMAGE)))
        sent['/speed'].append(bytes(ts.serialize_cdr(make(ts, SPEED, data=float(i)), SPEED)))
    writer.close()
    return sent


def _corrupt_middle(bag: Path, nbytes: int = 8192) -> None:
    mcap = next(bag.glob('*.mcap'))
    size = mcap.stat().st_size
    with mcap.open('r+b') as f:
        f.seek(size // 2)
        f.write(np.random.default_rng(1).integers(0, 256, nbytes, dtype=np.uint8).tobytes())


def test_bags_written_here_carry_chunk_crcs_and_verify_clean(tmp_path: Path) -> None:
    _write(tmp_path / 'bag')
    report = bag_integrity.verify(tmp_path / 'bag')
    assert report.chunks >= 4
    assert report.checked == report.chunks
    assert report.corrupt == ()
    assert report.unchecked_files == ()


def test_random_bytes_in_the_middle_are_found_named_and_skipped(tmp_path: Path) -> None:
    bag = tmp_path / 'bag'
    sent = _write(bag)
    _corrupt_middle(bag)
    report = bag_integrity.verify(bag)
    assert len(report.corrupt) == 1
    bad = report.corrupt[0]
    assert bad.reason == 'CRC mismatch'
    assert set(bad.messages) == {'/cam', '/speed'}
    assert 'messages skipped: /cam' in bad.describe()
    got = list(iter_messages(bag, decode=False, skip=report.skip_chunks))
    assert len(got) == 2 * len(sent['/cam']) - report.skipped  # exactly that chunk's messages
    assert [m.log_time_ns for m in got] == sorted(m.log_time_ns for m in got)
    # Nothing garbled comes out: every message replayed is one that was written.
    for topic in sent:
        written = set(sent[topic])
        assert all(m.raw in written for m in got if m.topic == topic)
    # Any reader that checks CRCs (rosbags does, once they are there) refuses the chunk too.
    with pytest.raises(Exception, match=r'(?i)checksum'):
        list(iter_messages(bag, decode=False))


def test_a_bag_without_crcs_is_reported_unchecked(tmp_path: Path) -> None:
    ts = typestore()
    with Writer(tmp_path / 'plain', version=9, storage_plugin=StoragePlugin.MCAP) as writer:
        conn = writer.add_connection('/speed', SPEED, typestore=ts)
        writer.write(conn, 1, bytes(ts.serialize_cdr(make(ts, SPEED, data=1.0), SPEED)))
    report = bag_integrity.verify(tmp_path / 'plain')
    assert (report.chunks, report.checked) == (1, 0)
    assert report.unchecked_files == ('plain.mcap',)


def _damage(bag: Path, at: int, nbytes: int = 1024) -> None:
    mcap = next(bag.glob('*.mcap'))
    with mcap.open('r+b') as f:
        f.seek(at)
        f.write(np.random.default_rng(2).integers(0, 256, nbytes, dtype=np.uint8).tobytes())


def test_a_bag_whose_every_chunk_is_corrupt_reads_as_nothing_and_says_so(tmp_path: Path) -> None:
    """One chunk, 1 KB damaged: before, leaving its only chunk out made rosbags' reader scan the
    whole file, which raised 'Chunk checksum mismatch' inside the replay thread (a hung replay)."""
    bag = tmp_path / 'bag'
    _write(bag, n=10)
    mcap = next(bag.glob('*.mcap'))
    _damage(bag, mcap.stat().st_size // 3)
    report = bag_integrity.verify(bag)
    assert report.chunks == 1 and report.all_corrupt
    assert list(iter_messages(bag, decode=False, skip=report.skip_chunks)) == []
    assert report.skipped_of({'/speed'}) == {'/speed': 10}


def test_a_corrupt_first_chunk_leaves_the_rest_and_counts_per_topic(tmp_path: Path) -> None:
    bag = tmp_path / 'bag'
    sent = _write(bag)
    _damage(bag, 2000)  # inside the first chunk (the header and schemas come before it)
    report = bag_integrity.verify(bag)
    assert len(report.corrupt) == 1 and not report.all_corrupt
    assert report.corrupt[0].start_ns == 1_000_000_000  # the first chunk: the first message
    got = list(iter_messages(bag, decode=False, skip=report.skip_chunks))
    lost = report.skipped_of({'/speed'})
    assert set(lost) == {'/speed'} and lost['/speed'] > 0
    assert sum(m.topic == '/speed' for m in got) == len(sent['/speed']) - lost['/speed']


def test_a_damaged_index_is_refused_with_its_reason(tmp_path: Path) -> None:
    bag = tmp_path / 'bag'
    _write(bag)
    mcap = next(bag.glob('*.mcap'))
    _damage(bag, mcap.stat().st_size - 300, 64)  # the summary: the chunk index and the footer
    with pytest.raises(bag_integrity.IntegrityError, match=r'\.mcap: '):
        bag_integrity.verify(bag)


def test_an_edited_message_count_in_the_metadata_is_named(tmp_path: Path) -> None:
    """metadata.yaml's per-topic counts against the chunk indexes (the bag's own counts): an
    edited or stale file was ignored silently."""
    bag = tmp_path / 'bag'
    _write(bag, n=10)
    report = bag_integrity.verify(bag)
    assert report.counts == {'/cam': 10, '/speed': 10}
    assert bag_integrity.metadata_mismatches(bag, report) == []
    meta = bag / 'metadata.yaml'
    meta.write_text(meta.read_text().replace('message_count: 10\n', 'message_count: 12\n', 1))
    (line,) = bag_integrity.metadata_mismatches(bag, report)
    assert 'metadata.yaml says 12 messages, the MCAP files hold 10' in line
