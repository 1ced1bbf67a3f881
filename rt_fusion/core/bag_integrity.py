"""MCAP chunk checksums: written into the bags this project makes, verified before a replay.

rosbags writes MCAP chunks with ``uncompressed_crc`` 0 ("not computed") and a data-end CRC of 0,
so a bag with bytes overwritten in the middle replays garbage as valid messages.
:func:`add_crcs` fills both in place once a bag is closed (offsets do not move; any MCAP reader,
rosbags' included, then checks the chunks it decompresses). :func:`verify` checks every chunk of
a bag against its CRC through the bag's chunk index and says, for each corrupt one, which topics
lose how many messages over which time range; :func:`rt_fusion.core.bag.iter_messages` skips
those chunks. sqlite3 bags carry no checksums: they are reported as unchecked.
"""

from __future__ import annotations

import dataclasses
import mmap
import struct
import zlib
from pathlib import Path
from typing import Any

MAGIC = b'\x89MCAP0\r\n'
OP_CHUNK = 0x06
OP_DATA_END = 0x0F


class IntegrityError(Exception):
    """An MCAP file cannot be walked (not MCAP, or its records run past the end)."""


@dataclasses.dataclass(frozen=True, slots=True)
class CorruptChunk:
    """A chunk whose bytes do not match its CRC (or cannot be decompressed)."""

    file: str
    offset: int  # byte offset of the chunk record
    start_ns: int  # log time of its first message
    end_ns: int  # log time of its last message
    messages: dict[str, int]  # topic -> messages it holds (all lost)
    reason: str

    def describe(self) -> str:
        """One line: where, when, what is lost, why."""
        lost = ', '.join(f'{t} {n}' for t, n in sorted(self.messages.items()))
        return (
            f'{self.file} chunk at byte {self.offset}: {self.reason}; log time '
            f'{self.start_ns / 1e9:.3f}-{self.end_ns / 1e9:.3f} s; messages skipped: {lost}'
        )


@dataclasses.dataclass(frozen=True, slots=True)
class Integrity:
    """What :func:`verify` found in a bag."""

    chunks: int  # chunks in the bag's MCAP files
    checked: int  # chunks that carry a CRC (and were checked)
    corrupt: tuple[CorruptChunk, ...]
    unchecked_files: tuple[str, ...]  # sqlite3 files, or MCAP files without a chunk index
    # Messages per topic as the MCAP files' chunk indexes count them (the bag's own truth).
    counts: dict[str, int] = dataclasses.field(default_factory=dict)

    @property
    def skipped(self) -> int:
        """Messages in corrupt chunks."""
        return sum(sum(c.messages.values()) for c in self.corrupt)

    def skipped_of(self, topics: set[str] | frozenset[str]) -> dict[str, int]:
        """Messages of ``topics`` in corrupt chunks, per topic (those with any)."""
        out: dict[str, int] = {}
        for c in self.corrupt:
            for topic, n in c.messages.items():
                if topic in topics and n:
                    out[topic] = out.get(topic, 0) + n
        return out

    @property
    def all_corrupt(self) -> bool:
        """Every chunk of the bag is corrupt: nothing in it can be read."""
        return bool(self.chunks) and len(self.corrupt) == self.chunks

    @property
    def skip_chunks(self) -> set[tuple[str, int]]:
        """(file name, offset) of the corrupt chunks, for the reader to leave out."""
        return {(c.file, c.offset) for c in self.corrupt}

    def summary(self) -> str:
        """One line for a log."""
        text = f'{self.checked}/{self.chunks} chunks checked, {len(self.corrupt)} corrupt'
        if self.corrupt:
            text += f' ({self.skipped} messages skipped)'
        if self.unchecked_files:
            text += f'; without checksums: {", ".join(self.unchecked_files)}'
        return text


def _walk(buf: Any, size: int) -> Any:
    """(opcode, record start, body start, body end) of each record up to and including DataEnd."""
    if size < 8 or bytes(buf[:8]) != MAGIC:
        raise IntegrityError('not an MCAP file (bad magic)')
    pos = 8
    while pos + 9 <= size:
        op = buf[pos]
        (length,) = struct.unpack_from('<Q', buf, pos + 1)
        body = pos + 9
        if body + length > size:
            raise IntegrityError(f'record 0x{op:02x} at byte {pos} runs past the end of the file')
        yield op, pos, body, body + length
        if op == OP_DATA_END:
            return
        pos = body + length


def _chunk_records(buf: Any, body: int, end: int) -> tuple[int, int, bytes]:
    """(uncompressed size, stored CRC, uncompressed records) of a chunk record's body."""
    from rosbags.rosbag2.storage_mcap import DECOMPRESSORS  # noqa: PLC0415

    usize, crc = struct.unpack_from('<QI', buf, body + 16)
    (clen,) = struct.unpack_from('<I', buf, body + 28)
    compression = bytes(buf[body + 32 : body + 32 + clen]).decode()
    pos = body + 32 + clen
    (dsize,) = struct.unpack_from('<Q', buf, pos)
    if pos + 8 + dsize > end:
        raise IntegrityError('chunk data runs past its record')
    data = bytes(buf[pos + 8 : pos + 8 + dsize])
    if compression not in DECOMPRESSORS:
        raise IntegrityError(f'unknown compression {compression!r}')
    return usize, crc, DECOMPRESSORS[compression](data, usize)


def add_crcs(path: Path) -> int:
    """Writes every chunk's CRC and the data section's CRC into an MCAP file, in place.

    Returns:
        The number of chunks.

    Raises:
        IntegrityError: not an MCAP file this function can walk.
    """
    with path.open('r+b') as f, mmap.mmap(f.fileno(), 0) as buf:
        chunks = 0
        for op, pos, body, end in _walk(buf, len(buf)):
            if op == OP_CHUNK:
                _, _, records = _chunk_records(buf, body, end)
                struct.pack_into('<I', buf, body + 24, zlib.crc32(records))
                chunks += 1
            elif op == OP_DATA_END:
                struct.pack_into('<I', buf, body, zlib.crc32(buf[:pos]))
        buf.flush()
    return chunks


def _verify_mcap(
    path: Path, counts: dict[str, int] | None = None
) -> tuple[int, int, list[CorruptChunk], bool]:
    """(chunks, checked, corrupt, indexed) of one MCAP file, through rosbags' chunk index;
    ``counts`` (topic -> messages) is added to from the index."""
    from rosbags.rosbag2.storage_mcap import McapReader  # noqa: PLC0415

    reader = McapReader(path)
    reader.open()
    try:
        channels = {cid: ch.topic for cid, ch in reader.channels.items()}
        infos = list(reader.chunks)
    finally:
        reader.close()
    if not infos:
        return 0, 0, [], False
    if counts is not None:
        for info in infos:
            for cid, n in info.channel_count.items():
                topic = channels.get(cid, f'channel {cid}')
                counts[topic] = counts.get(topic, 0) + int(n)
    corrupt: list[CorruptChunk] = []
    checked = 0
    with path.open('rb') as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as buf:
        for info in infos:
            reason = ''
            start = info.chunk_start_offset
            try:
                if buf[start] != OP_CHUNK:
                    raise IntegrityError('no chunk record at its indexed offset')
                (length,) = struct.unpack_from('<Q', buf, start + 1)
                if 9 + length != info.chunk_length:
                    raise IntegrityError('chunk length differs from its index')
                usize, crc, records = _chunk_records(buf, start + 9, start + 9 + length)
                if crc:
                    checked += 1
                    if len(records) != usize:
                        reason = f'{len(records)} bytes where {usize} were written'
                    elif zlib.crc32(records) != crc:
                        reason = 'CRC mismatch'
            except (IntegrityError, struct.error, IndexError, ValueError) as err:
                reason = str(err) or type(err).__name__
            except Exception as err:  # noqa: BLE001 - a decompressor's own error type
                reason = f'cannot decompress: {err}'
            if reason:
                lost = {
                    channels.get(cid, f'channel {cid}'): n
                    for cid, n in info.channel_count.items()
                    if n
                }
                corrupt.append(
                    CorruptChunk(
                        path.name,
                        start,
                        info.message_start_time,
                        info.message_end_time,
                        lost,
                        reason,
                    )
                )
    return len(infos), checked, corrupt, True


def verify(bag: Path | str) -> Integrity:
    """Checks every chunk of every MCAP file in a bag directory (or a bag file's directory).

    Raises:
        IntegrityError: an MCAP file whose header or index cannot be read at all.
    """
    folder = Path(bag)
    if folder.is_file():
        folder = folder.parent
    chunks = checked = 0
    corrupt: list[CorruptChunk] = []
    unchecked: list[str] = []
    counts: dict[str, int] = {}
    for path in sorted(folder.iterdir()):
        if path.suffix == '.db3':
            unchecked.append(path.name)
        elif path.suffix == '.mcap':
            try:
                n, c, bad, indexed = _verify_mcap(path, counts)
            except IntegrityError:
                raise
            except Exception as err:
                raise IntegrityError(f'{path.name}: {err}') from err
            chunks, checked = chunks + n, checked + c
            corrupt += bad
            if not indexed or c < n:
                unchecked.append(path.name)
    return Integrity(chunks, checked, tuple(corrupt), tuple(unchecked), counts)


def metadata_mismatches(bag: Path | str, integrity: Integrity) -> list[str]:
    """Where ``metadata.yaml``'s per-topic ``message_count`` differs from what the MCAP files'
    chunk indexes hold (an edited or stale metadata file), one line each; nothing for a bag
    without MCAP files or without a metadata file."""
    import yaml  # noqa: PLC0415

    folder = Path(bag)
    if folder.is_file():
        folder = folder.parent
    meta = folder / 'metadata.yaml'
    if not integrity.counts or integrity.unchecked_files or not meta.is_file():
        return []
    info = (yaml.safe_load(meta.read_text()) or {}).get('rosbag2_bagfile_information', {})
    out = []
    for entry in info.get('topics_with_message_count', []) or []:
        topic = entry.get('topic_metadata', {}).get('name', '')
        said, held = int(entry.get('message_count', 0)), integrity.counts.get(topic, 0)
        if said != held:
            out.append(f'{topic}: metadata.yaml says {said} messages, the MCAP files hold {held}')
    return out
