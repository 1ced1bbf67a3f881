"""Audio capture plumbing without ROS: a lock-free block queue between the audio callback and a
publisher thread, and the stamp of a block.

The audio backend's callback must not allocate, lock or do ROS work (a late callback is a lost
block). :class:`BlockQueue` is a single-producer single-consumer ring of pre-allocated numpy
blocks: the callback copies the block in and advances ``head``; the publisher thread reads up to
``head`` and advances ``tail``. Each index is written by one side only, and Python int stores are
atomic, so no lock is needed.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from rt_fusion.core.clock import ClockMapper

FLAG_OVERFLOW = 1
FLAG_UNDERFLOW = 2


class BlockQueue:
    """SPSC ring of audio blocks (see the module docstring).

    Args:
        capacity: blocks it holds.
        block_frames: largest block (frames per channel).
        channels: channels.
        dtype: sample dtype.
    """

    def __init__(
        self, capacity: int, block_frames: int, channels: int, dtype: npt.DTypeLike
    ) -> None:
        self.capacity = capacity
        self.data = np.zeros((capacity, block_frames, channels), dtype)
        # Per block: (frames, backend time of the first sample [s], backend time at the callback
        # [s], host time at the callback [ns], flags). A list of tuples: storing one tuple is
        # several times cheaper than a numpy record, and the callback runs cold.
        self.meta: list[tuple[int, float, float, int, int]] = [(0, 0.0, 0.0, 0, 0)] * capacity
        self.head = 0  # written by the producer only
        self.tail = 0  # written by the consumer only
        self.dropped = 0  # blocks the producer found no room for (consumer too slow)

    def push(
        self,
        block: npt.NDArray[Any],
        adc_time: float,
        current_time: float,
        host_ns: int,
        flags: int,
    ) -> bool:
        """Producer side: copies a block in; False (and counts it) when the ring is full."""
        head = self.head
        if head - self.tail >= self.capacity:
            self.dropped += 1
            return False
        i = head % self.capacity
        n = block.shape[0]
        self.data[i, :n] = block
        self.meta[i] = (n, adc_time, current_time, host_ns, flags)
        self.head = head + 1
        return True

    def pending(self) -> int:
        """Blocks waiting for the consumer."""
        return self.head - self.tail

    def peek(self) -> int:
        """Consumer side: the slot of the oldest pending block (check pending() first)."""
        return self.tail % self.capacity

    def pop(self) -> None:
        """Consumer side: releases the oldest pending block."""
        self.tail += 1


def block_stamp_ns(
    clock: ClockMapper,
    adc_time: float,
    current_time: float,
    host_ns: int,
    *,
    frames: int,
    rate_hz: int,
    input_latency_s: float,
) -> tuple[int, str]:
    """Host time of a block's first sample, and where it came from.

    The backend's stream clock is mapped onto the host timeline by ``clock`` from the pair
    (``current_time``, host time at the callback). With an ADC time, the first sample's time is
    that mapped; without one (0: PulseAudio, some ALSA setups), it is estimated as the mapped
    callback time minus ``frames / rate + input latency``.
    """
    current_ns = round(current_time * 1e9)
    clock.update(current_ns, host_ns)
    if adc_time > 0.0:
        return clock.to_host(round(adc_time * 1e9)), 'adc'
    estimate = clock.to_host(current_ns) - round((frames / rate_hz + input_latency_s) * 1e9)
    return estimate, 'fallback'
