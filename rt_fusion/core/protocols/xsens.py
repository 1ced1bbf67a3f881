"""Xsens MTi low-level protocol (Xbus over a serial line): framing, MTData2, configuration.

Message: ``0xFA`` preamble, bus id ``0xFF``, message id, length (``0xFF`` announces a 2-byte
big-endian extended length), data, checksum; every byte after the preamble, checksum included,
sums to 0 modulo 256.

MTData2 (message 0x36) is a sequence of packets: a 16-bit data identifier (XDI), a size byte and
big-endian data. The XDI's low nibble selects the number format (bits 0-1: float32, fixed 12.20,
fixed 16.32, float64) and the coordinate frame (bits 2-3: ENU, NED, NWU) of the vector items.

:class:`XbusParser` resynchronises after garbage, truncated messages and checksum errors, and
counts each; nothing here touches a serial port or reads a clock.
"""

from __future__ import annotations

import dataclasses
import struct
from collections.abc import Iterator, Sequence

import numpy as np

from rt_fusion.core.errors import RtFusionError

PREAMBLE = 0xFA
BUS_ID = 0xFF
MAX_DATA = 2048  # longer announced lengths are garbage on any MTi

# Message ids (requests and their acknowledgements are id, id + 1)
MID_REQ_DID = 0x00
MID_DEVICE_ID = 0x01
MID_GOTO_MEASUREMENT = 0x10
MID_GOTO_MEASUREMENT_ACK = 0x11
MID_REQ_FW_REV = 0x12
MID_FW_REV = 0x13
MID_GOTO_CONFIG = 0x30
MID_GOTO_CONFIG_ACK = 0x31
MID_MTDATA2 = 0x36
MID_WAKEUP = 0x3E
MID_WAKEUP_ACK = 0x3F
MID_RESET = 0x40
MID_ERROR = 0x42
MID_SET_OUTPUT_CONFIGURATION = 0xC0
MID_OUTPUT_CONFIGURATION = 0xC1

# MTData2 data identifiers (format nibble cleared)
XDI_TEMPERATURE = 0x0810
XDI_PACKET_COUNTER = 0x1020
XDI_SAMPLE_TIME_FINE = 0x1060
XDI_SAMPLE_TIME_COARSE = 0x1070
XDI_QUATERNION = 0x2010
XDI_DELTA_V = 0x4010
XDI_ACCELERATION = 0x4020
XDI_FREE_ACCELERATION = 0x4030
XDI_RATE_OF_TURN = 0x8020
XDI_DELTA_Q = 0x8030
XDI_MAGNETIC_FIELD = 0xC020
XDI_STATUS_WORD = 0xE020

FORMAT_FLOAT32 = 0x0
FORMAT_FP1220 = 0x1
FORMAT_FP1632 = 0x2
FORMAT_FLOAT64 = 0x3
COORD_ENU, COORD_NED, COORD_NWU = 0x0, 0x4, 0x8

# Item name, number of values, for the vector items (format per XDI nibble)
VECTOR_ITEMS: dict[int, tuple[str, int]] = {
    XDI_TEMPERATURE: ('temperature', 1),
    XDI_QUATERNION: ('quaternion', 4),
    XDI_DELTA_V: ('delta_v', 3),
    XDI_ACCELERATION: ('acceleration', 3),
    XDI_FREE_ACCELERATION: ('free_acceleration', 3),
    XDI_RATE_OF_TURN: ('rate_of_turn', 3),
    XDI_DELTA_Q: ('delta_q', 4),
    XDI_MAGNETIC_FIELD: ('magnetic_field', 3),
}
ITEM_XDI = {name: xdi for xdi, (name, _) in VECTOR_ITEMS.items()} | {
    'packet_counter': XDI_PACKET_COUNTER,
    'sample_time_fine': XDI_SAMPLE_TIME_FINE,
    'sample_time_coarse': XDI_SAMPLE_TIME_COARSE,
    'status_word': XDI_STATUS_WORD,
}
_SIZES = {FORMAT_FLOAT32: 4, FORMAT_FP1220: 4, FORMAT_FP1632: 6, FORMAT_FLOAT64: 8}
SAMPLE_TIME_FINE_HZ = 10_000


class XbusError(RtFusionError):
    """A device answered with an error, refused a request, or did not answer."""


def checksum(body: bytes) -> int:
    """The checksum byte for ``body`` (bus id, message id, length bytes and data)."""
    return (-sum(body)) & 0xFF


def build_message(mid: int, data: bytes = b'') -> bytes:
    """A complete Xbus message (preamble to checksum), with the extended length when needed."""
    if len(data) < 0xFF:
        body = bytes((BUS_ID, mid, len(data))) + data
    else:
        body = bytes((BUS_ID, mid, 0xFF)) + struct.pack('>H', len(data)) + data
    return bytes((PREAMBLE,)) + body + bytes((checksum(body),))


@dataclasses.dataclass
class ParserStats:
    """Counters of a parser."""

    messages: int = 0
    garbage_bytes: int = 0  # bytes skipped while looking for a preamble
    checksum_errors: int = 0
    truncated: int = 0  # a message cut short by the start of the next one
    oversize: int = 0  # announced lengths beyond MAX_DATA


class XbusParser:
    """Incremental Xbus framing: feed bytes as they come, get (message id, data) back."""

    def __init__(self) -> None:
        self._buf = bytearray()
        self.stats = ParserStats()

    def feed(self, chunk: bytes) -> Iterator[tuple[int, bytes]]:
        """Adds bytes; yields every complete, valid message found so far."""
        buf = self._buf
        buf += chunk
        pos = 0
        while True:
            start = buf.find(PREAMBLE, pos)
            if start < 0:
                self.stats.garbage_bytes += len(buf) - pos
                pos = len(buf)
                break
            self.stats.garbage_bytes += start - pos
            pos = start
            if len(buf) - pos < 4:
                break  # need bus id, message id and length
            if buf[pos + 1] != BUS_ID:
                self.stats.garbage_bytes += 1
                pos += 1
                continue
            mid, length, head = buf[pos + 2], buf[pos + 3], 4
            if length == 0xFF:
                if len(buf) - pos < 6:
                    break
                length, head = (buf[pos + 4] << 8) | buf[pos + 5], 6
            if length > MAX_DATA:
                self.stats.oversize += 1
                pos += 1
                continue
            end = pos + head + length + 1
            if end > len(buf):
                break  # wait for the rest
            if sum(buf[pos + 1 : end]) & 0xFF:
                # A preamble and bus id inside the bad message: it was cut short there.
                if buf.find(b'\xfa\xff', pos + 1, end) >= 0:
                    self.stats.truncated += 1
                else:
                    self.stats.checksum_errors += 1
                pos += 1
                continue
            self.stats.messages += 1
            yield mid, bytes(buf[pos + head : end - 1])
            pos = end
        del buf[:pos]


@dataclasses.dataclass(slots=True)
class MTData2:
    """The items of one MTData2 message; absent items are None. Vectors are float64 arrays."""

    packet_counter: int | None = None
    sample_time_fine: int | None = None  # 10 kHz ticks, 32 bits, wraps
    sample_time_coarse: int | None = None  # s
    quaternion: np.ndarray | None = None  # (w, x, y, z)
    delta_q: np.ndarray | None = None
    delta_v: np.ndarray | None = None  # [m/s]
    acceleration: np.ndarray | None = None  # [m/s²]
    free_acceleration: np.ndarray | None = None  # [m/s²]
    rate_of_turn: np.ndarray | None = None  # [rad/s]
    magnetic_field: np.ndarray | None = None  # [a.u.]
    temperature: float | None = None  # [°C]
    status_word: int | None = None
    unknown: int = 0  # packets with identifiers this parser does not know


def _decode_values(fmt: int, raw: bytes, count: int) -> np.ndarray:
    if fmt == FORMAT_FLOAT32:
        return np.frombuffer(raw, '>f4', count).astype(np.float64)
    if fmt == FORMAT_FLOAT64:
        return np.frombuffer(raw, '>f8', count).astype(np.float64)
    if fmt == FORMAT_FP1220:
        return np.frombuffer(raw, '>i4', count).astype(np.float64) / 2**20
    # FP16.32: 4 bytes fraction, then a signed 16-bit integer part.
    out = np.empty(count)
    for i in range(count):
        frac, integer = struct.unpack_from('>Ih', raw, 6 * i)
        out[i] = ((integer << 32) | frac) / 2**32
    return out


def _encode_values(fmt: int, values: Sequence[float]) -> bytes:
    if fmt == FORMAT_FLOAT32:
        return np.asarray(values, '>f4').tobytes()
    if fmt == FORMAT_FLOAT64:
        return np.asarray(values, '>f8').tobytes()
    if fmt == FORMAT_FP1220:
        return np.asarray(np.round(np.asarray(values) * 2**20), '>i4').tobytes()
    out = b''
    for v in values:
        fixed = round(v * 2**32)
        out += struct.pack('>Ih', fixed & 0xFFFFFFFF, fixed >> 32)
    return out


def parse_mtdata2(data: bytes) -> MTData2:
    """Decodes an MTData2 payload.

    Raises:
        XbusError: a packet runs past the end or has a size its format does not allow.
    """
    out = MTData2()
    pos, n = 0, len(data)
    while pos < n:
        if n - pos < 3:
            raise XbusError(f'MTData2: {n - pos} stray bytes at the end')
        xdi = (data[pos] << 8) | data[pos + 1]
        size = data[pos + 2]
        raw = data[pos + 3 : pos + 3 + size]
        if len(raw) < size:
            raise XbusError(f'MTData2: packet 0x{xdi:04X} of {size} bytes runs past the end')
        pos += 3 + size
        base, fmt = xdi & 0xFFF0, xdi & 0x3
        if base == XDI_PACKET_COUNTER and size == 2:
            out.packet_counter = struct.unpack('>H', raw)[0]
        elif base == XDI_SAMPLE_TIME_FINE and size == 4:
            out.sample_time_fine = struct.unpack('>I', raw)[0]
        elif base == XDI_SAMPLE_TIME_COARSE and size == 4:
            out.sample_time_coarse = struct.unpack('>I', raw)[0]
        elif base == XDI_STATUS_WORD and size == 4:
            out.status_word = struct.unpack('>I', raw)[0]
        elif base in VECTOR_ITEMS:
            name, count = VECTOR_ITEMS[base]
            if size != count * _SIZES[fmt]:
                raise XbusError(
                    f'MTData2: {name} (0x{xdi:04X}) has {size} bytes, '
                    f'format {fmt} needs {count * _SIZES[fmt]}'
                )
            values = _decode_values(fmt, raw, count)
            if name == 'temperature':
                out.temperature = float(values[0])
            else:
                setattr(out, name, values)
        else:
            out.unknown += 1
    return out


def encode_mtdata2(items: dict[str, object], fmt: int = FORMAT_FLOAT32) -> bytes:
    """An MTData2 payload with ``items`` (names of :class:`MTData2`), vectors in ``fmt``."""
    out = b''
    for name, value in items.items():
        xdi = ITEM_XDI[name]
        if name == 'packet_counter':
            raw = struct.pack('>H', int(value) & 0xFFFF)  # type: ignore[call-overload]
        elif name in ('sample_time_fine', 'sample_time_coarse', 'status_word'):
            raw = struct.pack('>I', int(value) & 0xFFFFFFFF)  # type: ignore[call-overload]
        else:
            values = [float(value)] if name == 'temperature' else list(value)  # type: ignore[arg-type,call-overload]
            raw = _encode_values(fmt, values)
            xdi |= fmt
        out += struct.pack('>HB', xdi, len(raw)) + raw
    return out


def output_configuration(
    items: Sequence[tuple[str, int]], fmt: int = FORMAT_FLOAT32, coords: int = COORD_ENU
) -> bytes:
    """SetOutputConfiguration data: (item name, rate [Hz]) pairs; 0xFFFF = with every packet."""
    out = b''
    for name, rate in items:
        xdi = ITEM_XDI[name]
        if xdi in VECTOR_ITEMS:
            xdi |= fmt | (coords if name != 'temperature' else 0)
        out += struct.pack('>HH', xdi, rate & 0xFFFF)
    return out


def parse_output_configuration(data: bytes) -> list[tuple[int, int]]:
    """(XDI, rate) pairs of an OutputConfiguration (the device's acknowledgement)."""
    return [struct.unpack_from('>HH', data, i) for i in range(0, len(data) - len(data) % 4, 4)]


def error_text(data: bytes) -> str:
    """The meaning of an Error (0x42) message's code."""
    codes = {
        0x03: 'invalid period',
        0x04: 'invalid message',
        0x1E: 'timer overflow',
        0x20: 'invalid baud rate',
        0x21: 'invalid parameter',
        0x28: 'device error',
    }
    code = data[0] if data else -1
    return f'error 0x{code:02X} ({codes.get(code, "unknown")})'
