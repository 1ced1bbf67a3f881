"""Zero-copy shared-memory rings: one writer, many readers, a seqlock per slot.

A ring is one file in /dev/shm (a POSIX shared-memory segment) with N fixed-size slots::

    [header page][slot table: N x 128 B, page-aligned][slot 0 payload][slot 1 payload]...

Payloads are page-aligned (so a slot range can be registered as pinned memory for the GPU).

**Seqlock.** Each slot has a generation counter: odd while the writer fills the slot, even once
committed (``2 x`` the number of commits to that slot). A descriptor carries the generation of its
commit. A reader compares the slot's generation with the descriptor's before it hands out a view
and again when the view is released or copied: any difference means the writer overwrote the slot
(the reader was too slow) and the result is an :class:`Overrun`, never mixed data. Readers take no
lock and never block the writer; a real-time writer never waits for readers.

**Sequences and slots.** The n-th commit of a ring has sequence n and lives in slot n mod N, so a
reader of the fast path finds frame n without a descriptor, and a slow reader knows how many it
missed.

**Fast path.** A 32-bit futex word in the header is bumped after every commit and woken; readers on
the same host wait on it (:meth:`ShmRingReader.wait_next`) instead of on an rclpy hop.

**Lifecycle.** The writer creates (0600, atomically: built under a temporary name, then linked
into place) and unlinks; readers map read-only, check the owner, never unlink. A segment whose
writer is gone (pid not running, pid reused, or another boot) is replaced when a writer starts.
Nothing here uses ``multiprocessing.shared_memory``, whose resource tracker unlinks segments
when an attaching process exits (Python 3.11).
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import mmap
import os
import re
import stat
import struct
import sys
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from rt_fusion.core import linux
from rt_fusion.core.errors import RtFusionError
from rt_fusion.core.frame import DescriptorError, FrameDescriptor

SHM_DIR = Path('/dev/shm')
MAGIC = b'RTFSHM\x00\x01'
LAYOUT_VERSION = 1
PAGE = mmap.PAGESIZE
HEADER_SIZE = 4096
META_SIZE = 128
MAX_DIMS = 6
_NAME_RE = re.compile(r'^[A-Za-z0-9_.-]{1,200}$')

# Header fields: (offset, struct format).
_H_MAGIC = (0, '8s')
_H_VERSION = (8, '<I')
_H_HEADER_SIZE = (12, '<I')
_H_SLOT_COUNT = (16, '<I')
_H_FLAGS = (20, '<I')
_H_SLOT_SIZE = (24, '<Q')
_H_SLOT_STRIDE = (32, '<Q')
_H_META_OFFSET = (40, '<Q')
_H_DATA_OFFSET = (48, '<Q')
_H_TOTAL_SIZE = (56, '<Q')
_H_WRITER_PID = (64, '<I')
_H_WRITER_UID = (68, '<I')
_H_WRITER_START = (72, '<Q')
_H_EPOCH = (80, '<Q')
_H_BOOT_ID = (88, '40s')
_H_FRAME_ID = (128, '64s')
# Hot words, each on its own cache line: commits so far (u64), futex word (u32).
_H_COMMITS = 256
_H_FUTEX = 320
FLAG_CLOSED = 1

# Slot table entry (128 bytes): the generation (u64) at offset 0, then the body, written before
# the generation is made even. Whole-entry struct calls keep the per-frame Python work small,
# which matters here: code run right after a wake-up is several times slower than warm code.
_U64 = struct.Struct('<Q')
_U32 = struct.Struct('<I')
# sequence, size, stamp, hw stamp, available, ndim, (pad), shape[6], dtype, encoding
_BODY = struct.Struct('<QQqqqI4x6I8s32s')
_STAMPS = struct.Struct('<qqq')  # the body's stamp, hw_stamp, available (from its byte 16)
assert 8 + _BODY.size == 120 <= META_SIZE


class ShmError(RtFusionError):
    """A shared-memory segment cannot be created, opened or used."""

    def __init__(self, segment: str, reason: str) -> None:
        self.segment = segment
        self.reason = reason
        super().__init__(f'shared-memory segment {segment!r}: {reason}')


class SegmentBusyError(ShmError):
    """Another live writer owns the segment."""


class SegmentNotFoundError(ShmError):
    """No such segment (the writer has not started, or it is on another host)."""


class SegmentLayoutError(ShmError):
    """The segment is not an rt_fusion ring of a known layout, or is truncated."""


class SegmentOwnerError(ShmError):
    """The segment belongs to another user or is readable by others."""


class StaleSegmentError(ShmError):
    """The segment a descriptor names was replaced (its writer restarted)."""


@dataclasses.dataclass(frozen=True, slots=True)
class Overrun:
    """A read that lost the race with the writer: the slot no longer holds the frame asked for.

    Attributes:
        sequence: the sequence that was asked for.
        reason: what was found instead, for logs.
    """

    sequence: int
    reason: str


def _round_up(value: int, align: int) -> int:
    return (value + align - 1) // align * align


def segment_path(name: str) -> Path:
    """/dev/shm path of a segment, after checking the name."""
    if not _NAME_RE.match(name):
        raise ShmError(name, 'segment names use letters, digits, "_", "." and "-" (1-200)')
    return SHM_DIR / name


@dataclasses.dataclass(frozen=True, slots=True)
class RingLayout:
    """Sizes and offsets of a ring, derived from slot size and count."""

    slot_size: int
    slot_count: int

    @property
    def slot_stride(self) -> int:
        """Bytes between the starts of two payloads (page-aligned)."""
        return _round_up(self.slot_size, PAGE)

    @property
    def meta_offset(self) -> int:
        """Offset of the slot table."""
        return HEADER_SIZE

    @property
    def data_offset(self) -> int:
        """Offset of slot 0's payload."""
        return _round_up(HEADER_SIZE + self.slot_count * META_SIZE, PAGE)

    @property
    def total_size(self) -> int:
        """Size of the segment file."""
        return self.data_offset + self.slot_count * self.slot_stride


def _pack(buf: Any, field: tuple[int, str], value: object) -> None:
    struct.pack_into(field[1], buf, field[0], value)


def _unpack(buf: Any, field: tuple[int, str]) -> Any:
    return struct.unpack_from(field[1], buf, field[0])[0]


def _cstr(raw: bytes) -> str:
    return raw.split(b'\x00', 1)[0].decode('ascii', 'replace')


class _Mapping:
    """Field access to a mapped ring (shared by writer and reader)."""

    def __init__(self, mm: mmap.mmap, layout: RingLayout) -> None:
        self.mm = mm
        self.layout = layout
        self.meta_offset = layout.meta_offset
        self._futex_word = np.frombuffer(mm, np.uint32, count=1, offset=_H_FUTEX)
        self.futex_address = int(self._futex_word.ctypes.data)
        self._views: dict[int, tuple[tuple[int, ...], str, npt.NDArray[Any]]] = {}

    def payload(self, slot: int, shape: tuple[int, ...], dtype: np.dtype[Any]) -> npt.NDArray[Any]:
        """The array view of a slot's payload (cached per slot while shape and dtype stay)."""
        cached = self._views.get(slot)
        if cached is not None and cached[0] == shape and cached[1] == dtype.str:
            return cached[2]
        offset = self.layout.data_offset + slot * self.layout.slot_stride
        view = np.ndarray(shape, dtype, buffer=self.mm, offset=offset)
        self._views[slot] = (shape, dtype.str, view)
        return view

    def slot_bytes(self, slot: int) -> npt.NDArray[np.uint8]:
        offset = self.layout.data_offset + slot * self.layout.slot_stride
        return np.ndarray((self.layout.slot_size,), np.uint8, buffer=self.mm, offset=offset)

    def generation(self, slot: int) -> int:
        return int(_U64.unpack_from(self.mm, self.meta_offset + slot * META_SIZE)[0])

    def set_generation(self, slot: int, generation: int) -> None:
        _U64.pack_into(self.mm, self.meta_offset + slot * META_SIZE, generation)

    def body(self, slot: int) -> tuple[Any, ...]:
        return _BODY.unpack_from(self.mm, self.meta_offset + slot * META_SIZE + 8)

    def set_body(self, slot: int, *fields: Any) -> None:
        _BODY.pack_into(self.mm, self.meta_offset + slot * META_SIZE + 8, *fields)

    def set_stamps(self, slot: int, stamp: int, hw_stamp: int, available: int) -> None:
        _STAMPS.pack_into(
            self.mm, self.meta_offset + slot * META_SIZE + 8 + 16, stamp, hw_stamp, available
        )

    def set_sequence(self, slot: int, sequence: int) -> None:
        _U64.pack_into(self.mm, self.meta_offset + slot * META_SIZE + 8, sequence)

    def commits(self) -> int:
        return int(_U64.unpack_from(self.mm, _H_COMMITS)[0])

    def set_commits(self, commits: int) -> None:
        _U64.pack_into(self.mm, _H_COMMITS, commits)

    def futex_word(self) -> int:
        return int(_U32.unpack_from(self.mm, _H_FUTEX)[0])

    def bump_futex(self) -> None:
        _U32.pack_into(self.mm, _H_FUTEX, (self.futex_word() + 1) & 0xFFFFFFFF)
        linux.futex_wake(self.futex_address)

    def flags(self) -> int:
        return int(_unpack(self.mm, _H_FLAGS))

    def set_flags(self, flags: int) -> None:
        _pack(self.mm, _H_FLAGS, flags)

    def release(self) -> None:
        """Drops this mapping's own views and unmaps, unless a payload view is still held.

        A numpy view keeps the mmap object alive but does not pin its buffer: ``mm.close()``
        would succeed under it and leave it pointing at unmapped memory (a segfault on the next
        read). So the mapping is closed here only when nothing but this object refers to it;
        otherwise it is unmapped when the last view dies (a frame still queued behind a reader
        that re-attached to a restarted writer).
        """
        self._views.clear()
        with contextlib.suppress(AttributeError):
            del self._futex_word
        if sys.getrefcount(self.mm) <= 2:  # self.mm and the call's argument
            self.mm.close()


@dataclasses.dataclass(slots=True)
class WriteSlot:
    """A slot handed to the writer: fill ``array``, then :meth:`ShmRingWriter.commit` it."""

    slot: int
    sequence: int
    array: npt.NDArray[Any]
    encoding: str
    generation: int = 0  #: the odd generation acquire() gave the slot


class ShmRingWriter:
    """The single writer of a ring. Creates the segment, and unlinks it on :meth:`close`."""

    def __init__(self, name: str, mapping: _Mapping, path: Path, epoch_ns: int, boot: str) -> None:
        self.name = name
        self.path = path
        self.epoch_ns = epoch_ns
        self.boot_id = boot
        self._map: _Mapping | None = mapping
        self.layout = mapping.layout
        self.frame_id = _cstr(_unpack(mapping.mm, _H_FRAME_ID))
        self._commits = 0
        self._pending: WriteSlot | None = None
        self.replaced_stale = False
        # Encoded (dtype, encoding) metadata, so a commit encodes nothing in steady state.
        self._meta_bytes: dict[tuple[str, str], tuple[bytes, bytes]] = {}

    # -- creation ------------------------------------------------------------------------------

    @classmethod
    def create(
        cls,
        name: str,
        slot_size: int,
        slot_count: int,
        *,
        frame_id: str = '',
        epoch_ns: int | None = None,
    ) -> ShmRingWriter:
        """Creates the ring ``/dev/shm/<name>``, replacing one left by a writer that is gone.

        Args:
            name: segment name.
            slot_size: payload capacity of one slot [bytes].
            slot_count: number of slots (>= 2).
            frame_id: sensor frame stored in the header, for descriptors of the fast path.
            epoch_ns: identity of this instance [ns since the epoch]; default: now.

        Raises:
            SegmentBusyError: a live writer owns a segment of that name.
            ShmError: the arguments are invalid or /dev/shm refuses.
        """
        path = segment_path(name)
        if slot_count < 2:
            raise ShmError(name, f'slot_count {slot_count} < 2')
        if slot_size < 1:
            raise ShmError(name, f'slot_size {slot_size} < 1')
        layout = RingLayout(slot_size, slot_count)
        if epoch_ns is None:
            import time  # noqa: PLC0415 - identity, not timing: the only clock read of the module

            epoch_ns = time.time_ns()
        boot = linux.boot_id()
        replaced = cls._remove_if_stale(name, path, boot)
        cls._remove_dead_temporaries(name)

        tmp = SHM_DIR / f'.{name}.{os.getpid()}.tmp'
        tmp.unlink(missing_ok=True)
        fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            os.ftruncate(fd, layout.total_size)
            mm = mmap.mmap(
                fd, layout.total_size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE
            )
        except OSError as err:
            os.close(fd)
            tmp.unlink(missing_ok=True)
            raise ShmError(name, f'cannot size or map {layout.total_size} bytes: {err}') from err
        os.close(fd)
        start = linux.process_start_ticks(os.getpid()) or 0
        _pack(mm, _H_VERSION, LAYOUT_VERSION)
        _pack(mm, _H_HEADER_SIZE, HEADER_SIZE)
        _pack(mm, _H_SLOT_COUNT, slot_count)
        _pack(mm, _H_FLAGS, 0)
        _pack(mm, _H_SLOT_SIZE, slot_size)
        _pack(mm, _H_SLOT_STRIDE, layout.slot_stride)
        _pack(mm, _H_META_OFFSET, layout.meta_offset)
        _pack(mm, _H_DATA_OFFSET, layout.data_offset)
        _pack(mm, _H_TOTAL_SIZE, layout.total_size)
        _pack(mm, _H_WRITER_PID, os.getpid())
        _pack(mm, _H_WRITER_UID, os.geteuid())
        _pack(mm, _H_WRITER_START, start)
        _pack(mm, _H_EPOCH, epoch_ns)
        _pack(mm, _H_BOOT_ID, boot.encode('ascii'))
        _pack(mm, _H_FRAME_ID, frame_id.encode('utf-8')[:63])
        _pack(mm, _H_MAGIC, MAGIC)  # last: a reader never sees a half-written header as valid
        try:
            os.link(tmp, path)  # atomic publication; fails if someone created it meanwhile
        except FileExistsError as err:
            mm.close()
            raise SegmentBusyError(name, 'created by another writer at the same moment') from err
        finally:
            tmp.unlink(missing_ok=True)
        writer = cls(name, _Mapping(mm, layout), path, epoch_ns, boot)
        writer.replaced_stale = replaced
        return writer

    @staticmethod
    def _remove_dead_temporaries(name: str) -> None:
        """Unlinks half-built segments of writers that died between create and link."""
        for tmp in SHM_DIR.glob(f'.{name}.*.tmp'):
            pid_text = tmp.name.removeprefix(f'.{name}.').removesuffix('.tmp')
            if pid_text.isdigit() and linux.process_start_ticks(int(pid_text)) is None:
                tmp.unlink(missing_ok=True)

    @staticmethod
    def _remove_if_stale(name: str, path: Path, boot: str) -> bool:
        """Unlinks a leftover segment whose writer is gone; raises if its writer lives."""
        try:
            fd = os.open(path, os.O_RDONLY)
        except FileNotFoundError:
            return False
        try:
            info = os.fstat(fd)
            head = os.pread(fd, 128, 0)
        finally:
            os.close(fd)
        if len(head) == 128 and head[:8] == MAGIC:
            pid = _unpack(head, _H_WRITER_PID)
            start = _unpack(head, _H_WRITER_START)
            seg_boot = _cstr(_unpack(head, _H_BOOT_ID))
            if seg_boot == boot and linux.process_alive(pid, start) and pid != os.getpid():
                raise SegmentBusyError(name, f'in use by live writer pid {pid}')
            if seg_boot == boot and pid == os.getpid() and linux.process_alive(pid, start):
                raise SegmentBusyError(name, 'this process already writes it')
        elif info.st_uid != os.geteuid():
            raise ShmError(name, f'exists, is not an rt_fusion ring, owned by uid {info.st_uid}')
        path.unlink(missing_ok=True)
        return True

    # -- writing -------------------------------------------------------------------------------

    @property
    def _m(self) -> _Mapping:
        if self._map is None:
            raise ShmError(self.name, 'writer is closed')
        return self._map

    @property
    def commits(self) -> int:
        """Frames committed so far (the next sequence number)."""
        return self._commits

    def acquire(self, shape: tuple[int, ...], dtype: npt.DTypeLike, encoding: str) -> WriteSlot:
        """The next slot as a writable array of ``shape``/``dtype``, marked as being written.

        Readers that still hold a view of this slot will see an overrun from now on.

        Raises:
            ShmError: the payload does not fit a slot, or a slot is already acquired.
        """
        m = self._m
        if self._pending is not None:
            raise ShmError(self.name, 'acquire() twice without commit() or abort()')
        dt = np.dtype(dtype)
        if len(shape) > MAX_DIMS:
            raise ShmError(self.name, f'{len(shape)} dimensions > {MAX_DIMS}')
        nbytes = math.prod(shape) * dt.itemsize
        if nbytes > self.layout.slot_size:
            raise ShmError(self.name, f'payload {nbytes} B > slot size {self.layout.slot_size} B')
        if len(encoding.encode()) > 32:
            raise ShmError(self.name, f'encoding {encoding!r} longer than 32 bytes')
        seq = self._commits
        slot = seq % self.layout.slot_count
        generation = m.generation(slot) + 1
        m.set_generation(slot, generation)  # odd: being written
        linux.fence()  # the odd generation is visible before any payload byte changes
        # Everything of the slot's metadata but its stamps is known now: written here, while the
        # slot is odd (readers skip it), so commit() - on the latency path, right after the
        # payload was produced and the caches are cold - writes only the three stamps.
        key = (dt.str, encoding)
        encoded = self._meta_bytes.get(key)
        if encoded is None:
            encoded = self._meta_bytes[key] = (key[0].encode(), key[1].encode())
        shape6 = (*shape, 0, 0, 0, 0, 0, 0)[:MAX_DIMS]
        m.set_body(slot, seq, nbytes, 0, 0, 0, len(shape), *shape6, *encoded)
        ws = WriteSlot(slot, seq, m.payload(slot, tuple(shape), dt), encoding, generation)
        self._pending = ws
        return ws

    def commit(
        self,
        ws: WriteSlot,
        stamp_ns: int,
        available_ns: int,
        hw_stamp_ns: int = 0,
        frame_id: str | None = None,
    ) -> FrameDescriptor:
        """Publishes the slot filled through ``ws.array``; wakes the fast-path readers.

        Args:
            ws: the slot from :meth:`acquire`.
            stamp_ns: hardware time of the sample on the host timeline [ns].
            available_ns: host time now, the commit time [ns].
            hw_stamp_ns: raw device stamp [ns of device time]; 0 when unknown.
            frame_id: sensor frame for the descriptor; default: the ring's.

        Returns:
            The descriptor to publish.
        """
        m = self._m
        if ws is not self._pending:
            raise ShmError(self.name, 'commit() of a slot that is not the acquired one')
        slot, arr = ws.slot, ws.array
        m.set_stamps(slot, stamp_ns, hw_stamp_ns, available_ns)  # the rest: at acquire()
        linux.fence()  # payload and metadata before the even generation
        generation = ws.generation + 1
        m.set_generation(slot, generation)
        self._commits += 1
        linux.fence()
        m.set_commits(self._commits)
        m.bump_futex()
        self._pending = None
        return FrameDescriptor(
            segment=self.name,
            segment_epoch_ns=self.epoch_ns,
            boot_id=self.boot_id,
            slot=slot,
            sequence=ws.sequence,
            generation=generation,
            encoding=ws.encoding,
            dtype=arr.dtype.str,
            shape=tuple(arr.shape),
            size_bytes=arr.nbytes,
            stamp_ns=stamp_ns,
            hw_stamp_ns=hw_stamp_ns,
            available_ns=available_ns,
            frame_id=self.frame_id if frame_id is None else frame_id,
        )

    def abort(self, ws: WriteSlot) -> None:
        """Gives up an acquired slot (the producer failed); its old frame is not restored."""
        m = self._m
        if ws is not self._pending:
            raise ShmError(self.name, 'abort() of a slot that is not the acquired one')
        m.set_sequence(ws.slot, 2**64 - 1)  # matches no sequence
        linux.fence()
        m.set_generation(ws.slot, m.generation(ws.slot) + 1)
        self._pending = None

    def write(
        self,
        data: npt.NDArray[Any],
        encoding: str,
        stamp_ns: int,
        available_ns: int,
        hw_stamp_ns: int = 0,
    ) -> FrameDescriptor:
        """Copies ``data`` into the next slot and commits it (when it was not made in place)."""
        ws = self.acquire(data.shape, data.dtype, encoding)
        np.copyto(ws.array, data)
        return self.commit(ws, stamp_ns, available_ns, hw_stamp_ns)

    def slot_range(self) -> tuple[int, int]:
        """(address, length) of all payloads, for page-locking (GPU pinned memory)."""
        m = self._m
        return m.slot_bytes(0).ctypes.data, self.layout.slot_count * self.layout.slot_stride

    # -- lifecycle -----------------------------------------------------------------------------

    def close(self, unlink: bool = True) -> None:
        """Marks the ring closed for its readers and unlinks it (idempotent)."""
        if self._map is None:
            return
        m = self._map
        m.set_flags(m.flags() | FLAG_CLOSED)
        m.bump_futex()
        if unlink:
            self._unlink_if_ours()
        self._map = None
        m.release()

    def _unlink_if_ours(self) -> None:
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except FileNotFoundError:
            return
        try:
            head = os.pread(fd, 128, 0)
        finally:
            os.close(fd)
        # Only our own instance: a later writer may have replaced it already.
        if (
            head[:8] == MAGIC
            and _unpack(head, _H_EPOCH) == self.epoch_ns
            and _unpack(head, _H_WRITER_PID) == os.getpid()
        ):
            self.path.unlink(missing_ok=True)

    def __enter__(self) -> ShmRingWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@dataclasses.dataclass(slots=True)
class FrameView:
    """A read-only, zero-copy view of one frame, valid while its slot keeps its generation.

    Check :meth:`valid` (or use :meth:`release`) after using ``array``: if the writer overwrote
    the slot meanwhile, what was computed from it must be discarded. :meth:`copy` makes a
    private copy that is checked before it is returned.
    """

    desc: FrameDescriptor
    array: npt.NDArray[Any]
    # The mapping itself, not the reader: a reader closed meanwhile (its writer restarted, the
    # subscription re-attached) leaves the views it handed out checkable. The old instance
    # has no writer any more, so a frame intact in it stays intact.
    _mapping: _Mapping
    # Set by the first check that found the frame intact: whoever checked has what it computed
    # from the frame, so an overwrite after that loses nothing (a transport counting torn frames
    # after its callback reads it, so that one frame is not counted both used and torn).
    vouched: bool = False

    def valid(self) -> bool:
        """True while the slot still holds this frame (seqlock check)."""
        linux.fence()
        try:
            ok = self._mapping.generation(self.desc.slot) == self.desc.generation
        except ValueError:  # released, and the mapping closed with the last view
            return False
        if ok:
            self.vouched = True
        return ok

    def release(self) -> bool:
        """Drops the view; returns whether the frame stayed intact until now."""
        ok = self.valid()
        self.array = _EMPTY
        return ok

    def copy(self) -> npt.NDArray[Any] | Overrun:
        """A private copy, or an Overrun when the slot changed during the copy."""
        out = self.array.copy()
        linux.fence()
        if not self.valid():
            return Overrun(self.desc.sequence, 'overwritten while copying')
        return out


_EMPTY: npt.NDArray[Any] = np.empty(0, np.uint8)
_EMPTY.flags.writeable = False


class ShmRingReader:
    """A read-only mapping of a ring: validates descriptors, hands out zero-copy views."""

    def __init__(self, name: str, mapping: _Mapping, inode: int, epoch_ns: int, boot: str) -> None:
        self.name = name
        self._map: _Mapping | None = mapping
        self.layout = mapping.layout
        self.inode = inode
        self.epoch_ns = epoch_ns
        self.boot_id = boot
        hdr = mapping.mm
        self.writer_pid = int(_unpack(hdr, _H_WRITER_PID))
        self.frame_id = _cstr(_unpack(hdr, _H_FRAME_ID))
        self._names: dict[bytes, str] = {}  # raw dtype/encoding fields -> str (decoded once)

    @classmethod
    def attach(cls, name: str, *, owner_uid: int | None = None) -> ShmRingReader:
        """Maps the ring read-only after checking its owner, mode and layout.

        Args:
            name: segment name.
            owner_uid: the user that must own the segment; default: this process's user.

        Raises:
            SegmentNotFoundError: no such segment.
            SegmentOwnerError: another owner, or accessible to others than its owner.
            SegmentLayoutError: not an rt_fusion ring of this layout version, or truncated.
        """
        path = segment_path(name)
        try:
            fd = os.open(path, os.O_RDONLY)
        except FileNotFoundError as err:
            raise SegmentNotFoundError(name, f'{path} does not exist') from err
        except PermissionError as err:
            raise SegmentOwnerError(name, f'no permission to read {path}') from err
        try:
            info = os.fstat(fd)
            uid = os.geteuid() if owner_uid is None else owner_uid
            if info.st_uid != uid:
                raise SegmentOwnerError(name, f'owned by uid {info.st_uid}, expected {uid}')
            if stat.S_IMODE(info.st_mode) & 0o077:
                raise SegmentOwnerError(
                    name, f'mode {stat.S_IMODE(info.st_mode):o} lets others access it (want 600)'
                )
            if info.st_size < HEADER_SIZE:
                raise SegmentLayoutError(name, f'{info.st_size} bytes, smaller than a header')
            head = os.pread(fd, HEADER_SIZE, 0)
            if head[:8] != MAGIC:
                raise SegmentLayoutError(name, 'bad magic: not an rt_fusion ring')
            version = _unpack(head, _H_VERSION)
            if version != LAYOUT_VERSION:
                raise SegmentLayoutError(
                    name, f'layout version {version}, expected {LAYOUT_VERSION}'
                )
            layout = RingLayout(_unpack(head, _H_SLOT_SIZE), _unpack(head, _H_SLOT_COUNT))
            checks = {
                'header size': (_unpack(head, _H_HEADER_SIZE), HEADER_SIZE),
                'slot stride': (_unpack(head, _H_SLOT_STRIDE), layout.slot_stride),
                'data offset': (_unpack(head, _H_DATA_OFFSET), layout.data_offset),
                'total size': (_unpack(head, _H_TOTAL_SIZE), layout.total_size),
                'file size': (info.st_size, layout.total_size),
            }
            for what, (found, expected) in checks.items():
                if found != expected or layout.slot_count < 2:
                    raise SegmentLayoutError(name, f'{what} {found} != {expected}')
            mm = mmap.mmap(fd, layout.total_size, mmap.MAP_SHARED, mmap.PROT_READ)
        finally:
            os.close(fd)
        return cls(
            name,
            _Mapping(mm, layout),
            info.st_ino,
            _unpack(head, _H_EPOCH),
            _cstr(_unpack(head, _H_BOOT_ID)),
        )

    @property
    def _m(self) -> _Mapping:
        if self._map is None:
            raise ShmError(self.name, 'reader is closed')
        return self._map

    @property
    def closed_by_writer(self) -> bool:
        """True once the writer closed this instance of the ring."""
        return bool(self._m.flags() & FLAG_CLOSED)

    def replaced(self) -> bool:
        """True when the name now points to another instance (the writer restarted) or none."""
        try:
            return os.stat(segment_path(self.name)).st_ino != self.inode
        except FileNotFoundError:
            return True

    @property
    def commits(self) -> int:
        """Frames committed so far by the writer."""
        return self._m.commits()

    # -- reading by descriptor (the rclpy path) ------------------------------------------------

    def read(self, desc: FrameDescriptor) -> FrameView | Overrun:
        """A zero-copy view of the frame ``desc`` names, or an Overrun if it was overwritten.

        Raises:
            DescriptorError: the descriptor is forged or inconsistent with this ring.
            StaleSegmentError: the descriptor names another instance of the segment.
        """
        m = self._m
        self.check_descriptor(desc)
        slot = desc.slot
        gen = m.generation(slot)
        linux.fence()
        if gen < desc.generation:
            # Generations only grow within one instance of a segment: this one was made up.
            raise DescriptorError(
                self.name, f'generation {desc.generation} is ahead of slot {slot} ({gen})'
            )
        if gen != desc.generation:
            return Overrun(desc.sequence, self._overrun_reason(gen, desc.generation))
        body = m.body(slot)
        seq, ndim = body[0], body[5]
        shape = body[6 : 6 + ndim]
        dtype = _cstr(body[12])
        linux.fence()
        if m.generation(slot) != gen:
            return Overrun(desc.sequence, 'overwritten while reading its metadata')
        if seq != desc.sequence or shape != desc.shape or dtype != desc.dtype:
            raise DescriptorError(
                self.name,
                f'slot {slot} generation {gen} holds sequence {seq} {dtype}{list(shape)}, '
                f'descriptor says sequence {desc.sequence} {desc.dtype}{list(desc.shape)}',
            )
        return FrameView(desc, m.payload(slot, desc.shape, np.dtype(desc.dtype)), m)

    def check_descriptor(self, desc: FrameDescriptor) -> None:
        """Validates a descriptor against this ring (not against the slot's current content).

        Raises:
            DescriptorError: naming the field that does not match.
            StaleSegmentError: the descriptor names another instance of the segment.
        """
        desc.check()
        if desc.segment != self.name:
            raise DescriptorError(desc.segment, f'sent to the reader of {self.name!r}')
        if desc.segment_epoch_ns != self.epoch_ns:
            raise StaleSegmentError(
                self.name, f'descriptor epoch {desc.segment_epoch_ns} != mapped {self.epoch_ns}'
            )
        if not 0 <= desc.slot < self.layout.slot_count:
            raise DescriptorError(
                self.name, f'slot {desc.slot} out of range [0, {self.layout.slot_count})'
            )
        if desc.size_bytes > self.layout.slot_size:
            raise DescriptorError(
                self.name, f'size {desc.size_bytes} B > slot size {self.layout.slot_size} B'
            )
        if desc.slot != desc.sequence % self.layout.slot_count:
            raise DescriptorError(
                self.name, f'slot {desc.slot} is not where sequence {desc.sequence} lives'
            )

    def slot_range(self) -> tuple[int, int]:
        """(address, length) of all payloads in this mapping, for page-locking (read-only)."""
        m = self._m
        return int(m.slot_bytes(0).ctypes.data), self.layout.slot_count * self.layout.slot_stride

    def still_valid(self, desc: FrameDescriptor) -> bool:
        """True while the slot of ``desc`` keeps the generation of its commit."""
        linux.fence()
        return self._m.generation(desc.slot) == desc.generation

    @staticmethod
    def _overrun_reason(found: int, expected: int) -> str:
        if found % 2:
            return f'slot being rewritten (generation {found}, expected {expected})'
        return f'slot overwritten (generation {found}, expected {expected})'

    # -- reading by sequence (the same-host fast path) -----------------------------------------

    def read_sequence(self, sequence: int) -> FrameView | Overrun | None:
        """The frame of ``sequence`` from the ring itself; None if not committed yet."""
        m = self._m
        if sequence >= m.commits():
            return None
        return self._read_committed(m, sequence)

    def _read_committed(self, m: _Mapping, sequence: int) -> FrameView | Overrun:
        slot = sequence % self.layout.slot_count
        gen = m.generation(slot)
        linux.fence()
        seq, size, stamp, hw_stamp, avail, ndim, *rest = m.body(slot)
        if gen % 2 or seq != sequence:
            return Overrun(sequence, f'slot {slot} now holds sequence {seq} (generation {gen})')
        shape = tuple(rest[:ndim])
        names = self._names
        if len(names) > 64:  # only a damaged ring has that many: stay bounded
            names.clear()
        encoding = names.get(rest[7])
        if encoding is None:
            encoding = names[rest[7]] = _cstr(rest[7])
        dtype = names.get(rest[6])
        if dtype is None:
            dtype = names[rest[6]] = _cstr(rest[6])
        desc = FrameDescriptor(
            segment=self.name,
            segment_epoch_ns=self.epoch_ns,
            boot_id=self.boot_id,
            slot=slot,
            sequence=sequence,
            generation=gen,
            encoding=encoding,
            dtype=dtype,
            shape=shape,
            size_bytes=size,
            stamp_ns=stamp,
            hw_stamp_ns=hw_stamp,
            available_ns=avail,
            frame_id=self.frame_id,
        )
        linux.fence()
        if m.generation(slot) != gen:
            return Overrun(sequence, 'overwritten while reading its metadata')
        return FrameView(desc, m.payload(slot, shape, np.dtype(dtype)), m)

    def futex_word(self) -> int:
        """The current value of the wake-up word (read it before checking for new frames)."""
        return self._m.futex_word()

    def wait_next(self, sequence: int, timeout_ns: int) -> FrameView | Overrun | None:
        """Waits until frame ``sequence`` is committed, at most ``timeout_ns``; then reads it.

        Returns None on timeout or when the writer closed the ring (see
        :attr:`closed_by_writer` and :meth:`replaced`). A reader that fell more than a ring
        behind gets an Overrun for that sequence; :meth:`oldest_available` says where to resume.
        """
        m = self._m
        word = m.futex_word()
        linux.fence()
        if m.commits() <= sequence:
            if m.flags() & FLAG_CLOSED:
                return None
            linux.futex_wait(m.futex_address, word, timeout_ns)
            if m.commits() <= sequence:
                return None
        return self._read_committed(m, sequence)

    def oldest_available(self) -> int:
        """The oldest sequence that may still be in the ring."""
        return max(0, self._m.commits() - self.layout.slot_count + 1)

    # -- lifecycle -----------------------------------------------------------------------------

    def close(self) -> None:
        """Unmaps (never unlinks). Views still held keep the mapping alive until they die."""
        if self._map is not None:
            m, self._map = self._map, None
            m.release()

    def __enter__(self) -> ShmRingReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def list_segments(prefix: str = '') -> list[str]:
    """Names of the rt_fusion rings in /dev/shm (by magic), optionally filtered by prefix."""
    names = []
    for path in sorted(SHM_DIR.glob(f'{prefix}*')):
        if path.name.startswith('.') or not path.is_file():
            continue
        try:
            with path.open('rb') as fh:
                if fh.read(8) == MAGIC:
                    names.append(path.name)
        except OSError:
            continue
    return names
